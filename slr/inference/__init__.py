"""Inference on pairwise graphs: entropy-smoothed LP and plain LP by star-update message passing.

Single graphs: :func:`smoothed_lp`, :func:`map_lp`. Many graphs at once (flat batches,
parallel over examples): :func:`batch_sweeps`, :func:`batch_dual_values` (and its node and
edge parts, :func:`batch_dual_parts`), :func:`batch_marginals`; MAP labellings of loopy graphs with
their bounds: :func:`batch_map`. Exact MAP on chains: :func:`viterbi`, :func:`batch_viterbi`; on
forests by max-product: :func:`forest_map`, :func:`batch_forest_map`; exact marginals on forests by
sum-product: :func:`forest_marginals`, :func:`batch_forest_marginals`. Exact references with
cvxpy live in :mod:`slr.inference.exact` (cvxpy itself is imported lazily, as it is slow to
import).
"""
from slr.inference.batch import (
    BatchSweepResult,
    batch_dual_parts,
    batch_dual_values,
    batch_edge_beliefs,
    batch_marginals,
    batch_node_beliefs,
    batch_sweeps,
)
from slr.inference.decoding import BatchMap, batch_map
from slr.inference.exact import hmax
from slr.inference.max_product import batch_forest_map, forest_examples, forest_map
from slr.inference.single import MapResult, SmoothedResult, map_lp, smoothed_lp
from slr.inference.sum_product import ExactMarginals, batch_forest_marginals, forest_marginals
from slr.inference.viterbi import batch_viterbi, is_chain, viterbi, viterbi_chains


__all__ = [
    "BatchMap",
    "BatchSweepResult",
    "ExactMarginals",
    "MapResult",
    "SmoothedResult",
    "batch_dual_parts",
    "batch_dual_values",
    "batch_edge_beliefs",
    "batch_forest_map",
    "batch_forest_marginals",
    "batch_map",
    "batch_marginals",
    "batch_node_beliefs",
    "batch_sweeps",
    "batch_viterbi",
    "forest_examples",
    "forest_map",
    "forest_marginals",
    "hmax",
    "is_chain",
    "map_lp",
    "smoothed_lp",
    "viterbi",
    "viterbi_chains",
]
