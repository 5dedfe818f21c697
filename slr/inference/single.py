"""Inference on one pairwise graph: the smoothed LP and the plain LP by star updates."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from slr.graph import GraphBatch, check_epsilon, check_messages, check_potentials
from slr.inference.batch import (
    batch_dual_values,
    batch_marginals,
    batch_node_beliefs,
    batch_sweeps,
)

__all__ = ["MapResult", "SmoothedResult", "map_lp", "smoothed_lp"]


@dataclass(frozen=True)
class SmoothedResult:
    """Result of :func:`smoothed_lp`.

    Attributes
    ----------
    value : float
        ``A(lambda, theta)`` at the final messages (equals the smoothed LP optimum at convergence).
    node_marginals : ndarray of shape (n, L)
    edge_marginals : ndarray of shape (m, L, L)
    messages : ndarray of shape (m, 2, L)
    n_sweeps : int
    converged : bool
    """

    value: float
    node_marginals: np.ndarray
    edge_marginals: np.ndarray
    messages: np.ndarray
    n_sweeps: int
    converged: bool


@dataclass(frozen=True)
class MapResult:
    """Result of :func:`map_lp`.

    Attributes
    ----------
    value : float
        The dual bound ``sum_alpha max b_alpha`` (an upper bound on the LP and the MAP value).
    labels : ndarray of shape (n,)
        Argmax of each node's reparametrised belief.
    messages : ndarray of shape (m, 2, L)
    n_sweeps : int
    converged : bool
    """

    value: float
    labels: np.ndarray
    messages: np.ndarray
    n_sweeps: int
    converged: bool


def _prepare(theta_nodes: Any, theta_edges: Any, edges: Any, messages: Any):
    theta_nodes, theta_edges, edges = check_potentials(theta_nodes, theta_edges, edges)
    n, L = theta_nodes.shape
    batch = GraphBatch.from_graphs([(n, edges)], L)
    lam = np.zeros((edges.shape[0], 2, L)) if messages is None else check_messages(messages, edges.shape[0], L)
    return batch, theta_nodes, theta_edges, lam


def smoothed_lp(
    theta_nodes: Any,
    theta_edges: Any,
    edges: Any,
    epsilon: float,
    *,
    max_sweeps: int = 1000,
    tol: float = 1e-9,
    messages: Any = None,
) -> SmoothedResult:
    """Entropy-smoothed LP relaxation ``max_mu theta.mu + eps * sum_alpha H(mu_alpha)``.

    Solved in the dual by star updates (block coordinate descent); the dual value
    ``A(lambda, theta)`` never increases from sweep to sweep.

    Parameters
    ----------
    theta_nodes : array-like of shape (n, L)
    theta_edges : array-like of shape (m, L, L)
        ``theta_edges[e, a, b]`` scores ``y_i = a, y_j = b`` for ``edges[e] = (i, j)``.
    edges : array-like of shape (m, 2)
    epsilon : float
        Entropy weight, ``> 0`` (use :func:`map_lp` for ``0``).
    max_sweeps : int
        At most this many sweeps over the nodes (direction alternates).
    tol : float
        Stop when no message vector moves by more than ``tol`` in a sweep, beyond a
        constant shift (which changes no belief; see :func:`slr.inference.batch.batch_sweeps`).
    messages : array-like of shape (m, 2, L), optional
        Warm start.

    Returns
    -------
    SmoothedResult
    """
    eps = check_epsilon(epsilon, allow_zero=False)
    batch, theta_nodes, theta_edges, lam = _prepare(theta_nodes, theta_edges, edges, messages)
    run = batch_sweeps(
        batch, theta_nodes, theta_edges, eps, out=lam, max_sweeps=max_sweeps, tol=tol,
        n_threads=1, check_input=False,
    )
    value = batch_dual_values(batch, theta_nodes, theta_edges, lam, eps, n_threads=1, check_input=False)
    node_mu, edge_mu = batch_marginals(batch, theta_nodes, theta_edges, lam, eps)
    return SmoothedResult(
        value=float(value[0]),
        node_marginals=node_mu,
        edge_marginals=edge_mu,
        messages=lam,
        n_sweeps=int(run.n_sweeps[0]),
        converged=bool(run.converged[0]),
    )


def map_lp(
    theta_nodes: Any,
    theta_edges: Any,
    edges: Any,
    *,
    max_sweeps: int = 500,
    tol: float = 1e-9,
    messages: Any = None,
) -> MapResult:
    """The LP relaxation of MAP (``epsilon = 0``) by max-product star updates, with decoding.

    The updates are block coordinate descent on the (non-smooth) dual; they never
    increase the bound but may stop above the LP optimum on loopy graphs. On trees the
    node-belief argmax is the MAP labelling.

    Parameters
    ----------
    theta_nodes : array-like of shape (n, L)
    theta_edges : array-like of shape (m, L, L)
    edges : array-like of shape (m, 2)
    max_sweeps : int
    tol : float
    messages : array-like of shape (m, 2, L), optional
        Warm start.

    Returns
    -------
    MapResult
    """
    batch, theta_nodes, theta_edges, lam = _prepare(theta_nodes, theta_edges, edges, messages)
    run = batch_sweeps(
        batch, theta_nodes, theta_edges, 0.0, out=lam, max_sweeps=max_sweeps, tol=tol,
        n_threads=1, check_input=False,
    )
    value = batch_dual_values(batch, theta_nodes, theta_edges, lam, 0.0, n_threads=1, check_input=False)
    labels = batch_node_beliefs(batch, theta_nodes, lam).argmax(axis=1)
    return MapResult(
        value=float(value[0]),
        labels=labels,
        messages=lam,
        n_sweeps=int(run.n_sweeps[0]),
        converged=bool(run.converged[0]),
    )

