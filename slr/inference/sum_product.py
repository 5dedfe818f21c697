"""Exact node and edge marginals on forests (chains, trees) by sum-product.

The smoothed LP's marginals (:func:`slr.inference.batch_marginals` at the sweeps' fixed point)
are not the marginals of a probability distribution over labellings, even on a chain: the LP
counts the entropy of every node and every edge once, which is not the entropy of a tree-shaped
distribution (docs/design.md section 1, "Chains need the sweeps too"). On a forest the marginals
of the Gibbs distribution

    p(y) = exp(F(y) / T) / Z

are computed exactly by two passes of sum-product (:mod:`slr.inference._sum_product`, parallel
over examples). With ``F`` the learned energy ``eps * g`` and ``T = eps`` this is the CRF
``p(y) proportional to exp(g(y))``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from slr.data import GraphBatch
from slr.graph import check_edges, check_epsilon
from slr.inference import _sum_product
from slr.inference.batch import _check_batch, _kernel_threads, _potentials, resolve_threads
from slr.validation import check_bool

__all__ = ["ExactMarginals", "batch_forest_marginals", "forest_marginals"]


@dataclass(frozen=True)
class ExactMarginals:
    """Exact marginals of ``p(y) = exp(F(y) / T) / Z``: sum-product's on forests, elimination's
    (:mod:`slr.inference.banded`) on graphs of small bandwidth.

    Attributes
    ----------
    node_marginals : ndarray of shape (n_nodes, L)
    edge_marginals : ndarray of shape (n_edges, L, L) or None
        ``edge_marginals[e, a, b] = p(y_i = a, y_j = b)`` for ``edges[e] = (i, j)``; None unless asked for.
    log_partition : ndarray of shape (n_examples,)
        ``log Z`` of each example.
    """

    node_marginals: np.ndarray
    edge_marginals: np.ndarray | None
    log_partition: np.ndarray


def batch_forest_marginals(batch: GraphBatch, theta_nodes: Any, theta_edges: Any, temperature: float = 1.0, *,
                           edge_marginals: bool = False, n_jobs: int | None = None) -> ExactMarginals:
    """Exact marginals of every example of a batch whose graphs are forests.

    Parameters
    ----------
    batch : GraphBatch
    theta_nodes : array-like of shape (n_nodes, L)
    theta_edges : array-like of shape (n_edges, L, L)
    temperature : float, default=1.0
        ``T > 0``; the distribution is ``exp(F / T) / Z``.
    edge_marginals : bool, default=False
        Also compute the ``(n_edges, L, L)`` edge marginals.
    n_jobs : int, optional
        OpenMP threads (parallel over examples); all cores when None or -1.

    Returns
    -------
    ExactMarginals

    Raises
    ------
    ValueError
        For potentials of the wrong shape or not finite, a temperature that is not positive, or
        an example whose graph has a cycle (naming the first such examples).
    """
    batch = _check_batch(batch)
    theta_nodes, theta_edges = _potentials(batch, theta_nodes, theta_edges, check_input=True)
    temperature = check_epsilon(temperature, allow_zero=False, name="temperature")
    with_edges = check_bool(edge_marginals, "edge_marginals")
    result, is_forest = _forest_pass(batch, theta_nodes, theta_edges, temperature, with_edges,
                                     resolve_threads(n_jobs))
    cyclic = np.flatnonzero(~is_forest)
    if cyclic.size:
        shown = ", ".join(map(str, cyclic[:5])) + (", ..." if cyclic.size > 5 else "")
        raise ValueError(f"exact marginals need forests (chains, trees), but the graphs of examples {shown} "
                         "have a cycle; use the smoothed LP's marginals (batch_marginals) instead")
    return result


def _forest_pass(batch: GraphBatch, theta_nodes: np.ndarray, theta_edges: np.ndarray, temperature: float,
                 with_edges: bool, threads: int) -> tuple[ExactMarginals, np.ndarray]:
    """Sum-product on every example of a checked batch; also the mask of the examples that are
    forests (the others' marginals are meaningless)."""
    threads = _kernel_threads(threads, batch)
    L = batch.n_states
    nodes = np.empty((batch.n_nodes, L))
    edges = np.empty((batch.n_edges if with_edges else 0, L, L))
    log_z = np.empty(batch.n_examples)
    is_forest = np.zeros(batch.n_examples, dtype=np.uint8)
    # this kernel reads a table per edge: a view repeating one table is written out
    _sum_product.forest_marginals(theta_nodes, np.ascontiguousarray(theta_edges), batch.edges, batch.node_ptr,
                                  batch.edge_ptr, batch.inc_ptr, batch.inc_edge, batch.inc_side, temperature,
                                  with_edges, threads, nodes, edges, log_z, is_forest)
    return ExactMarginals(nodes, edges if with_edges else None, log_z), is_forest.astype(bool)


def forest_marginals(theta_nodes: Any, theta_edges: Any, edges: Any, temperature: float = 1.0, *,
                     n_jobs: int | None = None) -> ExactMarginals:
    """Exact node and edge marginals of one graph that is a forest (see :func:`batch_forest_marginals`).

    Parameters
    ----------
    theta_nodes : array-like of shape (n, L)
    theta_edges : array-like of shape (m, L, L)
    edges : array-like of shape (m, 2)
    temperature : float, default=1.0
    n_jobs : int, optional

    Returns
    -------
    ExactMarginals
        With edge marginals and a ``log_partition`` of shape (1,).
    """
    theta_nodes = np.asarray(theta_nodes, dtype=np.float64)
    if theta_nodes.ndim != 2:
        raise ValueError(f"theta_nodes must be 2-D (n, L), got shape {theta_nodes.shape}")
    n, L = theta_nodes.shape
    batch = GraphBatch.from_graphs([(n, check_edges(edges, n))], L)
    return batch_forest_marginals(batch, theta_nodes, theta_edges, temperature, edge_marginals=True, n_jobs=n_jobs)
