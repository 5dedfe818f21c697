"""
Table 1 in small: function classes on denoising
===============================================

The NIPS 2013 paper's Table 1 crosses five function classes for the unary (per-pixel) and the
pairwise (per-edge) factors on noisy binary images. This example runs a corner of it on small
images: linear and boosted-tree unaries against zero, constant and linear pairwise functions.
The full table is ``slr denoising --full`` (research notes: :doc:`/research/index`).
"""

# %%
# Six 20 x 20 training images and six test images (the paper's protocol at a small size:
# ``make_denoising`` draws the images, their noisy pixels and the edge features).
import time

import matplotlib.pyplot as plt
import numpy as np

from slr import StructuredLogisticRegression
from slr.datasets import make_denoising
from slr.oracles import BoostedTrees, Constant, Linear, Zero

X, Y = make_denoising(n_images=6, size=20, sigma=2.0, random_state=0)
X_test, Y_test = make_denoising(n_images=6, size=20, sigma=2.0, random_state=1)

# %%
# Each cell is one learner; ``tol=0`` runs exactly ``max_iter`` iterations of Algorithm 1.1.
unaries = {"Linear": lambda: Linear(), "Boost": lambda: BoostedTrees(n_rounds=5, random_state=0)}
pairwises = {"Zero": Zero, "Constant": Constant, "Linear": Linear}
errors, models = {}, {}
for u_name, unary in unaries.items():
    for p_name, pairwise in pairwises.items():
        start = time.perf_counter()
        model = StructuredLogisticRegression(unary(), pairwise(), max_iter=10, tol=0, random_state=0)
        model.fit(X, Y)
        errors[u_name, p_name] = 1 - model.score(X_test, Y_test)
        models[u_name, p_name] = model
        print(f"{u_name:>6} / {p_name:<8} test error {errors[u_name, p_name]:.3f}"
              f"  ({time.perf_counter() - start:.1f} s)")

# %%
# The table: rows are the unary function class, columns the pairwise one. Coupling neighbours
# (Constant) helps every unary; a pairwise function of the edge features (Linear) smooths less
# across edges whose features say the labels differ, and boosted trees on the pixel's value
# beat a linear threshold of it.
print(f"{'':>8}" + "".join(f"{p:>10}" for p in pairwises))
for u_name in unaries:
    print(f"{u_name:>8}" + "".join(f"{errors[u_name, p]:>10.3f}" for p in pairwises))

# %%
# One test image: the truth, the noisy input (the first node feature) and two cells' labelling.
image = 0
nodes = X_test[image][0]
shown = {"truth": Y_test[image], "noisy input": nodes[:, 0],
         "Linear / Zero": models["Linear", "Zero"].predict(X_test[:1])[0],
         "Boost / Linear": models["Boost", "Linear"].predict(X_test[:1])[0]}
fig, axes = plt.subplots(1, len(shown), figsize=(10, 2.8))
for ax, (title, values) in zip(axes, shown.items()):
    ax.imshow(np.asarray(values, dtype=float).reshape(20, 20), cmap="gray")
    ax.set_title(title)
    ax.set_axis_off()
fig.tight_layout()
plt.show()
