"""Exact MAP on chains by dynamic programming (Viterbi), one chain or a batch of chains."""
from __future__ import annotations

import numpy as np

from slr.graph import GraphBatch

__all__ = ["batch_viterbi", "is_chain", "viterbi", "viterbi_chains"]


def is_chain(edges: np.ndarray, n_nodes: int) -> bool:
    """True when ``edges`` is exactly ``[(0, 1), (1, 2), ..., (n-2, n-1)]``."""
    if edges.shape[0] != n_nodes - 1:
        return False
    left = np.arange(n_nodes - 1)
    return bool(np.array_equal(edges[:, 0], left) and np.array_equal(edges[:, 1], left + 1))


def viterbi(theta_nodes: np.ndarray, theta_edges: np.ndarray) -> np.ndarray:
    """Exact MAP of one chain ``0 - 1 - ... - n-1``.

    Parameters
    ----------
    theta_nodes : ndarray of shape (n, L)
    theta_edges : ndarray of shape (n - 1, L, L)
        ``theta_edges[i, a, b]`` scores ``y_i = a, y_{i+1} = b``.

    Returns
    -------
    y : ndarray of shape (n,), int64
        A maximiser of ``sum_i theta_nodes[i, y_i] + sum_i theta_edges[i, y_i, y_{i+1}]``.
    """
    return viterbi_chains(theta_nodes[None], theta_edges[None])[0]


def viterbi_chains(theta_nodes: np.ndarray, theta_edges: np.ndarray) -> np.ndarray:
    """Viterbi on ``B`` chains of the same length at once.

    Parameters
    ----------
    theta_nodes : ndarray of shape (B, n, L)
    theta_edges : ndarray of shape (B, n - 1, L, L)

    Returns
    -------
    y : ndarray of shape (B, n), int64
    """
    n_chains, n, n_states = theta_nodes.shape
    back = np.empty((n_chains, max(n - 1, 0), n_states), dtype=np.int64)
    score = theta_nodes[:, 0].copy()
    for i in range(n - 1):
        cand = score[:, :, None] + theta_edges[:, i]  # (B, a, b)
        back[:, i] = np.argmax(cand, axis=1)
        score = np.take_along_axis(cand, back[:, i][:, None, :], axis=1)[:, 0] + theta_nodes[:, i + 1]
    y = np.empty((n_chains, n), dtype=np.int64)
    y[:, -1] = np.argmax(score, axis=1)
    for i in range(n - 2, -1, -1):
        y[:, i] = np.take_along_axis(back[:, i], y[:, i + 1][:, None], axis=1)[:, 0]
    return y


def batch_viterbi(batch: GraphBatch, theta_nodes: np.ndarray, theta_edges: np.ndarray) -> np.ndarray:
    """Viterbi on every example of a batch of chains (edges ``(i, i + 1)`` in order), grouped by length.

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
    L = batch.n_states
    node_ptr, edge_ptr = batch.node_ptr, batch.edge_ptr
    lengths = np.diff(node_ptr)
    y = np.empty(batch.n_nodes, dtype=np.int64)
    for n in dict.fromkeys(lengths.tolist()):  # lengths in order of first appearance
        ks = np.flatnonzero(lengths == n)
        node_idx = (node_ptr[ks][:, None] + np.arange(n)).ravel()
        edge_idx = (edge_ptr[ks][:, None] + np.arange(n - 1)).ravel()
        tn = theta_nodes[node_idx].reshape(len(ks), n, L)
        te = theta_edges[edge_idx].reshape(len(ks), n - 1, L, L)
        y[node_idx] = viterbi_chains(tn, te).ravel()
    return y
