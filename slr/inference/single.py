"""Inference on one pairwise graph: the smoothed LP and the plain LP by star updates."""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from slr.data import GraphBatch
from slr.graph import check_epsilon, check_potentials
from slr.inference.batch import (
    BatchSweepResult,
    _check_sweep_scale,
    _dual_values,
    _marginals,
    _node_beliefs,
    _run_sweeps,
    _sweep_start,
)
from slr.validation import check_int, check_real

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


def _solve(
    theta_nodes: Any, theta_edges: Any, edges: Any, eps: float, max_sweeps: Any, tol: Any, messages: Any
) -> tuple[GraphBatch, np.ndarray, np.ndarray, BatchSweepResult]:
    """Validate one graph's inputs and run the sweeps (``eps`` already validated)."""
    max_sweeps = check_int(max_sweeps, "max_sweeps")
    tol = check_real(tol, "tol", 0.0)
    theta_nodes, theta_edges, edges = check_potentials(theta_nodes, theta_edges, edges)
    n, L = theta_nodes.shape
    batch = GraphBatch.from_graphs([(n, edges)], L)
    lam = _sweep_start(batch, messages, None, check_input=True)
    _check_sweep_scale(eps, theta_nodes, theta_edges, lam)
    run = _run_sweeps(batch, theta_nodes, theta_edges, lam, eps, max_sweeps, tol, threads=1)
    return batch, theta_nodes, theta_edges, run


def _warn_unconverged(run: BatchSweepResult, function: str) -> None:
    if not run.converged[0]:
        warnings.warn(f"{function} stopped after max_sweeps={int(run.n_sweeps[0])} sweeps before the messages "
                      "converged to tol; raise max_sweeps (or warm-start from the returned messages)",
                      ConvergenceWarning, stacklevel=3)


def smoothed_lp(
    theta_nodes: Any,
    theta_edges: Any,
    edges: Any,
    epsilon: float,
    *,
    max_sweeps: int = 10_000,
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
        Entropy weight, ``> 0`` (use :func:`map_lp` for ``0``), at least ``2**-40`` times the
        largest potential (smaller values are lost to float64 rounding).
    max_sweeps : int, default=10000
        At most this many sweeps over the nodes (direction alternates), in ``[0, 2**31 - 1]``.
        A ``ConvergenceWarning`` says when they stop before ``tol`` is met. A 10 x 10 grid with
        unit potentials at ``epsilon = 0.1`` takes about 2,500 (0.15 s).
    tol : float
        Stop when no message vector moves by more than ``tol`` in a sweep, beyond a
        constant shift (which changes no belief), or by no more than float64 resolves at the
        problem's magnitude; see :func:`slr.inference.batch.batch_sweeps`.
    messages : array-like of shape (m, 2, L), optional
        Warm start; each vector ``messages[e, s, :]`` is first shifted to a largest entry of
        0 (which changes no marginal and no value). Refused when the shifted messages exceed
        ``2**20`` times the magnitude of the potentials and ``epsilon``.

    Returns
    -------
    SmoothedResult

    Raises
    ------
    ValueError
        Naming the argument, for invalid inputs and inputs float64 cannot resolve.
    """
    eps = check_epsilon(epsilon, allow_zero=False)
    batch, theta_nodes, theta_edges, run = _solve(theta_nodes, theta_edges, edges, eps, max_sweeps, tol, messages)
    _warn_unconverged(run, "smoothed_lp")
    lam = run.messages
    assert lam is not None   # the sweeps ran in this process
    node_mu, edge_mu = _marginals(batch, theta_nodes, theta_edges, lam, eps)
    return SmoothedResult(
        value=float(_dual_values(batch, theta_nodes, theta_edges, lam, eps, threads=1)[0]),
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
    max_sweeps: int = 10_000,
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
    max_sweeps : int, default=10000
        At most this many sweeps, in ``[0, 2**31 - 1]``; a ``ConvergenceWarning`` says when they
        stop before ``tol`` is met.
    tol : float
        See :func:`smoothed_lp`.
    messages : array-like of shape (m, 2, L), optional
        Warm start, shifted and checked as in :func:`smoothed_lp`.

    Returns
    -------
    MapResult

    Raises
    ------
    ValueError
        Naming the argument, for invalid inputs and inputs float64 cannot resolve.
    """
    batch, theta_nodes, theta_edges, run = _solve(theta_nodes, theta_edges, edges, 0.0, max_sweeps, tol, messages)
    _warn_unconverged(run, "map_lp")
    lam = run.messages
    assert lam is not None   # the sweeps ran in this process
    labels = _node_beliefs(batch, theta_nodes, lam).argmax(axis=1)
    return MapResult(
        value=float(_dual_values(batch, theta_nodes, theta_edges, lam, 0.0, threads=1)[0]),
        labels=labels,
        messages=lam,
        n_sweeps=int(run.n_sweeps[0]),
        converged=bool(run.converged[0]),
    )

