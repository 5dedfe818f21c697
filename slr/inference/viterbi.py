"""Exact MAP on chains by dynamic programming (Viterbi), one chain or a batch of chains."""
from __future__ import annotations

import numpy as np

from slr.data import GraphBatch
from slr.graph import _finite_float_array, kernel_edges
from slr.inference import _viterbi

__all__ = ["batch_viterbi", "is_chain", "viterbi", "viterbi_chains"]


def is_chain(edges: np.ndarray, n_nodes: int) -> bool:
    """True when ``edges`` is exactly ``[(0, 1), (1, 2), ..., (n-2, n-1)]``."""
    if edges.shape[0] != n_nodes - 1:
        return False
    left = np.arange(n_nodes - 1)
    return bool(np.array_equal(edges[:, 0], left) and np.array_equal(edges[:, 1], left + 1))


def viterbi(theta_nodes: np.ndarray, theta_edges: np.ndarray) -> np.ndarray:
    """Exact MAP of one chain ``0 - 1 - (...) - n-1``.

    Parameters
    ----------
    theta_nodes : array-like of shape (n, L)
    theta_edges : array-like of shape (n - 1, L, L)
        ``theta_edges[i, a, b]`` scores ``y_i = a, y_{i+1} = b``.

    Returns
    -------
    y : ndarray of shape (n,), int64
        A maximiser of ``sum_i theta_nodes[i, y_i] + sum_i theta_edges[i, y_i, y_{i+1}]``.

    Raises
    ------
    ValueError
        Naming the argument, for potentials of the wrong shape (fewer than one node or state),
        NaN, infinite or complex.
    """
    theta_nodes = _finite_float_array(theta_nodes, "theta_nodes", 2, bounded=True)
    n = theta_nodes.shape[0]
    if n < 1 or theta_nodes.shape[1] < 1:
        raise ValueError(f"theta_nodes must have at least one node and one state, got shape {theta_nodes.shape}")
    theta_edges = np.asarray(theta_edges)
    if n == 1 and theta_edges.size == 0:
        theta_edges = np.zeros((0, theta_nodes.shape[1], theta_nodes.shape[1]))
    theta_edges = _finite_float_array(theta_edges, "theta_edges", 3, bounded=True)
    return viterbi_chains(theta_nodes[None], theta_edges[None])[0]


def viterbi_chains(theta_nodes: np.ndarray, theta_edges: np.ndarray) -> np.ndarray:
    """Viterbi on ``B`` chains of the same length at once.

    Parameters
    ----------
    theta_nodes : array-like of shape (B, n, L)
    theta_edges : array-like of shape (B, n - 1, L, L)

    Returns
    -------
    y : ndarray of shape (B, n), int64

    Raises
    ------
    ValueError
        As :func:`viterbi`.
    """
    theta_nodes = _finite_float_array(theta_nodes, "theta_nodes", 3, bounded=True)
    theta_edges = _finite_float_array(theta_edges, "theta_edges", 4, bounded=True)
    n_chains, n, n_states = theta_nodes.shape
    if n_chains < 1 or n < 1 or n_states < 1:
        raise ValueError(f"theta_nodes must have at least one chain, node and state, got shape {theta_nodes.shape}")
    if theta_edges.shape != (n_chains, n - 1, n_states, n_states):
        raise ValueError(f"theta_edges must have shape (B, n - 1, L, L) = ({n_chains}, {n - 1}, {n_states}, "
                         f"{n_states}), got {theta_edges.shape}")
    steps = np.arange(n_chains + 1, dtype=np.int64)
    y = np.empty(n_chains * n, dtype=np.int64)
    _viterbi.viterbi_batch(theta_nodes.reshape(n_chains * n, n_states),
                           np.ascontiguousarray(theta_edges.reshape(-1, n_states, n_states)), steps * n,
                           steps * (n - 1), y)
    return y.reshape(n_chains, n)


def batch_viterbi(batch: GraphBatch, theta_nodes: np.ndarray, theta_edges: np.ndarray) -> np.ndarray:
    """Viterbi on every example of a batch of chains (edges ``(i, i + 1)`` in order).

    Parameters
    ----------
    batch : GraphBatch
        Every example a chain (see :func:`is_chain`); not checked here.
    theta_nodes : ndarray of shape (n_nodes, L)
    theta_edges : ndarray of shape (n_edges, L, L)

    Returns
    -------
    y : ndarray of shape (n_nodes,), int64
    """
    y = np.empty(batch.n_nodes, dtype=np.int64)
    _viterbi.viterbi_batch(_float64(theta_nodes), kernel_edges(theta_edges), batch.node_ptr, batch.edge_ptr, y)
    return y


def _float64(theta: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(theta, dtype=np.float64)
