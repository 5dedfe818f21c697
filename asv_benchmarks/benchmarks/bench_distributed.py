"""Bytes the data-parallel learner (slr.distributed) moves per learning iteration.

``Traffic`` fits 3 iterations of ``DaskStructuredLogisticRegression`` (Linear / Linear) on 4
denoising images of 32x32 over 2 in-process workers, with settings that make the count of tasks
deterministic (``sweep_tol=0``, ``relaxation=1``), and tracks the bytes sent and received per
iteration (pickled task arguments and results, the fit's ``transfer_``) for 2 and 4 partitions.
The data sent once at loading is not counted. Needs dask and distributed (the ``distributed``
extra); without them asv skips the benchmark.
"""
from __future__ import annotations

from . import common


class Traffic(common.Benchmark):
    """Bytes per iteration of a distributed fit, against the number of partitions."""

    params = [2, 4]
    param_names = ["n_partitions"]

    def setup(self, n_partitions):
        try:
            import distributed
        except ImportError:   # asv skips a benchmark whose setup raises NotImplementedError
            raise NotImplementedError("needs dask.distributed")
        from slr.distributed import DaskStructuredLogisticRegression

        X, Y = common.denoising(4, 32)
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0",
                                      silence_logs=50) as cluster, distributed.Client(cluster):
            model = DaskStructuredLogisticRegression(n_partitions=n_partitions, max_iter=3, tol=0, sweep_tol=0,
                                                     max_sweeps=10, relaxation=1.0, monitor=False, n_jobs=1)
            self.transfer = model.fit(X, Y).transfer_.iloc[1:]

    def track_bytes_per_iteration(self, n_partitions):
        return float((self.transfer["bytes_sent"] + self.transfer["bytes_received"]).mean())

    track_bytes_per_iteration.unit = "bytes"

    def track_tasks_per_iteration(self, n_partitions):
        return float(self.transfer["tasks"].mean())

    track_tasks_per_iteration.unit = "tasks"
