"""Exact MAP on forests (chains, trees) by max-product, one graph or a batch of graphs.

Two passes of :mod:`slr.inference._sum_product`'s forest kernel with ``max`` in place of
``logsumexp``: messages from the leaves to a root, then each node's best state given its parent's.
On chains this is Viterbi (:mod:`slr.inference.viterbi`), on trees its generalisation.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from slr.data import GraphBatch, forest_examples
from slr.graph import check_edges
from slr.inference import _sum_product
from slr.inference.batch import _check_batch, _kernel_threads, _potentials, resolve_threads

__all__ = ["batch_forest_map", "forest_examples", "forest_map"]


def batch_forest_map(batch: GraphBatch, theta_nodes: Any, theta_edges: Any, *, n_jobs: int | None = None,
                     check_input: bool = True) -> np.ndarray:
    """A MAP labelling of every example of a batch whose graphs are forests.

    Parameters
    ----------
    batch : GraphBatch
    theta_nodes : array-like of shape (n_nodes, L)
    theta_edges : array-like of shape (n_edges, L, L)
    n_jobs : int, optional
        OpenMP threads (parallel over examples); all cores when None or -1.
    check_input : bool, default=True
        Check that the potentials are finite (their shapes are always checked).

    Returns
    -------
    labels : ndarray of shape (n_nodes,), int64
        A maximiser of ``sum_i theta_i(y_i) + sum_e theta_e(y_i, y_j)`` on every example.

    Raises
    ------
    ValueError
        For potentials of the wrong shape or not finite, or an example whose graph has a cycle
        (naming the first such examples).
    """
    batch = _check_batch(batch)
    theta_nodes, theta_edges = _potentials(batch, theta_nodes, theta_edges, check_input)
    labels = np.zeros(batch.n_nodes, dtype=np.int64)
    is_forest = np.zeros(batch.n_examples, dtype=np.uint8)
    threads = _kernel_threads(resolve_threads(n_jobs), batch)
    # this kernel reads a table per edge: a view repeating one table is written out
    _sum_product.forest_map(theta_nodes, np.ascontiguousarray(theta_edges), batch.edges, batch.node_ptr,
                            batch.inc_ptr, batch.inc_edge, batch.inc_side, threads, labels, is_forest)
    cyclic = np.flatnonzero(~is_forest.astype(bool))
    if cyclic.size:
        shown = ", ".join(map(str, cyclic[:5])) + (", ..." if cyclic.size > 5 else "")
        raise ValueError(f"exact MAP by max-product needs forests (chains, trees), but the graphs of examples "
                         f"{shown} have a cycle; use the LP's star updates (batch_sweeps) instead")
    return labels


def forest_map(theta_nodes: Any, theta_edges: Any, edges: Any, *, n_jobs: int | None = None) -> np.ndarray:
    """A MAP labelling of one graph that is a forest (see :func:`batch_forest_map`).

    Parameters
    ----------
    theta_nodes : array-like of shape (n, L)
    theta_edges : array-like of shape (m, L, L)
    edges : array-like of shape (m, 2)
    n_jobs : int, optional

    Returns
    -------
    labels : ndarray of shape (n,), int64
    """
    theta_nodes = np.asarray(theta_nodes, dtype=np.float64)
    if theta_nodes.ndim != 2:
        raise ValueError(f"theta_nodes must be 2-D (n, L), got shape {theta_nodes.shape}")
    n, L = theta_nodes.shape
    batch = GraphBatch.from_graphs([(n, check_edges(edges, n))], L)
    return batch_forest_map(batch, theta_nodes, theta_edges, n_jobs=n_jobs)
