"""Inference on pairwise graphs: entropy-smoothed LP and plain LP by star-update message passing.

Single graphs: :func:`smoothed_lp`, :func:`map_lp`. Many graphs at once (flat batches,
parallel over examples): :func:`batch_sweeps`, :func:`batch_dual_values`,
:func:`batch_marginals`. Exact references with cvxpy live in :mod:`slr.inference.exact`
(cvxpy itself is imported lazily, as it is slow to import).
"""
from slr.inference.batch import (
    BatchSweepResult,
    batch_dual_values,
    batch_edge_beliefs,
    batch_marginals,
    batch_node_beliefs,
    batch_sweeps,
)
from slr.inference.exact import hmax
from slr.inference.single import MapResult, SmoothedResult, map_lp, smoothed_lp


__all__ = [
    "BatchSweepResult",
    "MapResult",
    "SmoothedResult",
    "batch_dual_values",
    "batch_edge_beliefs",
    "batch_marginals",
    "batch_node_beliefs",
    "batch_sweeps",
    "hmax",
    "map_lp",
    "smoothed_lp",
]
