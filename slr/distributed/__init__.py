"""Training past one machine: Algorithm 1.1 data-parallel on a ``dask.distributed`` cluster.

:class:`DaskStructuredLogisticRegression` keeps each partition of the training examples, with its
messages and potentials, on one worker for the whole fit; Linear and Constant oracles are fitted
on a loss summed over the partitions. Needs the ``distributed`` extra (``pip install "slr[distributed]"``).
"""
from slr.distributed.learner import DaskStructuredLogisticRegression

__all__ = ["DaskStructuredLogisticRegression"]
