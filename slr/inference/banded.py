"""Exact marginals on graphs of small bandwidth (narrow grids, ladders, short cycles) by elimination.

Sum-product (:mod:`slr.inference.sum_product`) is exact only on forests. A graph whose edges
join only nodes close in the node order -- its *bandwidth* ``W = max |i - j|`` over the edges
is small -- has exact marginals by forward-backward over windows: the state after node ``i`` is
the labelling of the last ``W`` nodes ``(y_{i-W+1}, ..., y_i)``, every edge lies inside one
window of ``W + 1`` nodes, and the windows form a chain. The cost is ``n L^(W+1)`` per pass and
the memory ``n L^W`` (the forward pass's tables; each step's factor is built in both passes,
not kept): an ``h x w`` grid in raster order has ``W = w``, so a binary grid 12
pixels wide takes 2^13 operations per pixel. Everything is in the log domain.

This is the exact reference for the calibration of LP marginals on loopy graphs (the
``calibration`` report) and the loopy branch of ``predict_marginals(method="exact")``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import logsumexp

from slr.data import GraphBatch
from slr.graph import check_epsilon, check_potentials
from slr.inference.batch import _check_batch, _potentials, resolve_threads
from slr.inference.sum_product import ExactMarginals, _forest_pass
from slr.validation import check_bool, check_int

__all__ = ["MAX_WINDOW_STATES", "banded_marginals", "bandwidth", "batch_exact_marginals"]

#: Largest ``L^(W+1)`` (labellings of one window plus its next node) :func:`banded_marginals`
#: accepts by default: 2^22 doubles are 32 MiB per array.
MAX_WINDOW_STATES = 2**22


def bandwidth(edges: np.ndarray) -> int:
    """``max |i - j|`` over the edges ``(m, 2)`` (0 without edges)."""
    return int(np.abs(edges[:, 0] - edges[:, 1]).max()) if len(edges) else 0


def window_states(n_states: int, width: int) -> int:
    """``L^(W+1)``, the size of one elimination step's table (as a Python int: no overflow)."""
    return n_states ** (max(width, 1) + 1)


def banded_marginals(theta_nodes: Any, theta_edges: Any, edges: Any, temperature: float = 1.0, *,
                     edge_marginals: bool = False, max_states: int = MAX_WINDOW_STATES) -> ExactMarginals:
    """Exact node (and edge) marginals of one graph, by elimination over windows of its node order.

    Parameters
    ----------
    theta_nodes : array-like of shape (n, L)
    theta_edges : array-like of shape (m, L, L)
        ``theta_edges[e, a, b]`` scores ``y_i = a, y_j = b`` for ``edges[e] = (i, j)``.
    edges : array-like of shape (m, 2)
    temperature : float, default=1.0
        ``T > 0``; the distribution is ``exp(F / T) / Z``.
    edge_marginals : bool, default=False
        Also compute the ``(m, L, L)`` edge marginals.
    max_states : int, default=MAX_WINDOW_STATES
        Refuse graphs whose window table ``L^(W+1)`` is larger (``W``: the bandwidth).

    Returns
    -------
    ExactMarginals
        With a ``log_partition`` of shape (1,), as :func:`slr.inference.forest_marginals` gives.

    Raises
    ------
    ValueError
        For bad potentials, edges or temperature, or a bandwidth too large for ``max_states``
        (renumber the nodes so that neighbours are close, e.g. a grid along its short side).
    """
    theta_nodes, theta_edges, edges = check_potentials(theta_nodes, theta_edges, edges)
    L = theta_nodes.shape[1]
    temperature = check_epsilon(temperature, allow_zero=False, name="temperature")
    with_edges = check_bool(edge_marginals, "edge_marginals")
    max_states = check_int(max_states, "max_states", 1, None)
    width = max(bandwidth(edges), 1)
    if window_states(L, width) > max_states:
        raise ValueError(f"edges: the graph's bandwidth {width} (largest |i - j| over its edges) needs tables of "
                         f"L^(W+1) = {L}^{width + 1} states, more than max_states={max_states}; exact marginals "
                         "by elimination need neighbours close in the node order")
    return _Elimination(theta_nodes / temperature, theta_edges / temperature, edges, width).run(with_edges)


class _Elimination:
    """Forward-backward over the windows ``(y_{i-W+1}, ..., y_i)`` of one graph.

    Step ``i``'s table has ``W + 1`` axes, ``(y_{i-W}, ..., y_i)``; nodes before node 0 are
    virtual, fixed to label 0 by the initial window (all other labellings at ``-inf``).
    """

    def __init__(self, theta_nodes: np.ndarray, theta_edges: np.ndarray, edges: np.ndarray, width: int) -> None:
        self.theta_nodes, self.theta_edges, self.width = theta_nodes, theta_edges, width
        self.n, self.L = theta_nodes.shape
        # each edge belongs to the step of its later node; ``first`` says whether its node i comes first
        later = edges.max(axis=1)
        self.first = edges[:, 0] < edges[:, 1]
        self.earlier = edges.min(axis=1)
        self.edges_at = [np.flatnonzero(later == i) for i in range(self.n)]

    def factor(self, i: int) -> np.ndarray:
        """Step ``i``'s log factor on ``(y_{i-W}, ..., y_i)``: node ``i``'s potential and its edges to earlier nodes."""
        W, L = self.width, self.L
        table = np.zeros((L,) * (W + 1))
        table += self.theta_nodes[i].reshape((1,) * W + (L,))
        for e in self.edges_at[i]:
            pair = self.theta_edges[e] if self.first[e] else self.theta_edges[e].T   # (y_earlier, y_i)
            shape = [1] * (W + 1)
            shape[self.earlier[e] - (i - W)] = L
            shape[W] = L
            table += pair.reshape(shape)
        return table

    def run(self, with_edges: bool) -> ExactMarginals:
        W, L, n = self.width, self.L, self.n
        start = np.full((L,) * W, -np.inf)
        start[(0,) * W] = 0.0
        with np.errstate(divide="ignore"):   # windows of virtual labels other than 0 stay at -inf
            alphas = [start]   # alphas[i]: the window ending at node i - 1
            for i in range(n):
                alphas.append(logsumexp(alphas[-1][..., None] + self.factor(i), axis=0))
            log_z = float(logsumexp(alphas[-1]))
            beta = np.zeros((L,) * W)   # the window ending at node i
            nodes = np.empty((n, L))
            pairs = np.empty((len(self.first), L, L)) if with_edges else None
            for i in range(n - 1, -1, -1):
                factor = self.factor(i)
                joint = np.exp(alphas[i][..., None] + factor + beta[None, ...] - log_z)   # (y_{i-W}, ..., y_i)
                nodes[i] = joint.reshape(-1, L).sum(axis=0)
                if pairs is not None:   # with_edges
                    for e in self.edges_at[i]:
                        axis = self.earlier[e] - (i - W)
                        kept = tuple(a for a in range(W) if a != axis)
                        pair = joint.sum(axis=kept)   # (y_earlier, y_i)
                        pairs[e] = pair if self.first[e] else pair.T
                beta = logsumexp(factor + beta[None, ...], axis=-1)
        return ExactMarginals(nodes, pairs, np.array([log_z]))


def batch_exact_marginals(batch: GraphBatch, theta_nodes: Any, theta_edges: Any, temperature: float = 1.0, *,
                          edge_marginals: bool = False, max_states: int = MAX_WINDOW_STATES,
                          n_jobs: int | None = None) -> ExactMarginals:
    """Exact marginals of every example of a batch: sum-product on forests, elimination
    (:func:`banded_marginals`) on the examples with a cycle.

    Parameters
    ----------
    batch : GraphBatch
    theta_nodes : array-like of shape (n_nodes, L)
    theta_edges : array-like of shape (n_edges, L, L)
    temperature : float, default=1.0
    edge_marginals : bool, default=False
    max_states : int, default=MAX_WINDOW_STATES
        The largest elimination table a cyclic example may need (see :func:`banded_marginals`).
    n_jobs : int, optional
        OpenMP threads of the sum-product pass; all cores when None or -1.

    Returns
    -------
    ExactMarginals
        Of every example, forest or not.

    Raises
    ------
    ValueError
        For bad potentials or temperature, or a cyclic example whose bandwidth is too large
        (naming the example).
    """
    batch = _check_batch(batch)
    theta_nodes, theta_edges = _potentials(batch, theta_nodes, theta_edges, check_input=True)
    temperature = check_epsilon(temperature, allow_zero=False, name="temperature")
    with_edges = check_bool(edge_marginals, "edge_marginals")
    max_states = check_int(max_states, "max_states", 1, None)
    result, is_forest = _forest_pass(batch, theta_nodes, theta_edges, temperature, with_edges,
                                     resolve_threads(n_jobs))
    for k in np.flatnonzero(~is_forest):
        nodes = slice(batch.node_ptr[k], batch.node_ptr[k + 1])
        edges = slice(batch.edge_ptr[k], batch.edge_ptr[k + 1])
        local = batch.edges[edges] - batch.node_ptr[k]
        width = max(bandwidth(local), 1)
        if window_states(batch.n_states, width) > max_states:
            raise ValueError(f"exact marginals: example {k} has a cycle and bandwidth {width}, whose elimination "
                             f"tables of L^(W+1) = {batch.n_states}^{width + 1} states exceed "
                             f"max_states={max_states}; use the smoothed LP's marginals instead")
        exact = _Elimination(theta_nodes[nodes] / temperature, theta_edges[edges] / temperature, local,
                             width).run(with_edges)
        result.node_marginals[nodes] = exact.node_marginals
        if result.edge_marginals is not None:   # with_edges
            result.edge_marginals[edges] = exact.edge_marginals
        result.log_partition[k] = exact.log_partition[0]
    return result
