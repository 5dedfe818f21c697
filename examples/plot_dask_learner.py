"""
Training on a Dask cluster
==========================

:class:`slr.distributed.DaskStructuredLogisticRegression` trains on the current Dask client:
each partition's examples, messages and potentials stay on one worker, and only the model's
parameters, the oracles' gradients and a few numbers per partition cross the network. Here a
local cluster in this process stands in for a real one (``Client("tcp://HOST:8786")``; user
guide: :doc:`/guide/distributed`). Each partition is a *source*, a picklable callable that its
worker runs to load ``(X, Y)``, so the data never pass through the client.
"""

# %%
# Two workers; four partitions of two 32 x 32 denoising images each.
import functools

import matplotlib.pyplot as plt
from distributed import Client, LocalCluster

from slr.datasets import make_denoising
from slr.distributed import DaskStructuredLogisticRegression

cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0")
client = Client(cluster)
sources = [functools.partial(make_denoising, 2, 32, 3.2, random_state=seed) for seed in range(4)]
test = [functools.partial(make_denoising, 2, 32, 3.2, random_state=99)]

# %%
# Linear oracles on both factors (the default); ``tol=0`` runs exactly ``max_iter`` iterations.
model = DaskStructuredLogisticRegression(epsilon=0.1, max_iter=20, tol=0).fit_sources(sources)
print(f"{model.n_partitions_} partitions, test accuracy {model.score_sources(test):.3f}")

# %%
# What each iteration sent over the network (``transfer_``), and the objective.
transfer = model.transfer_
print(transfer.tail(3).to_string(index=False))
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3))
left.plot(model.history_["iteration"], model.history_["objective"], marker="o")
left.set_xlabel("iteration")
left.set_ylabel("objective R")
right.plot(transfer["iteration"], transfer["bytes_sent"] / 1e3, marker="s")
right.set_xlabel("iteration")
right.set_ylabel("kB sent to the workers")
fig.tight_layout()
plt.show()

client.close()
cluster.close()
