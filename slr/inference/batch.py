"""Batched star-update inference on many graphs at once (the learner's entry point).

All functions take a :class:`slr.graph.GraphBatch` and flat potentials of shapes
``(n_nodes, L)`` and ``(n_edges, L, L)``; messages are ``(n_edges, 2, L)``. Inputs are
validated here, once, and the Cython kernels then run without checks, in parallel over
the examples of the batch.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from slr.graph import GraphBatch, check_epsilon, check_messages
from slr.inference import _star

__all__ = [
    "BatchSweepResult",
    "batch_dual_values",
    "batch_edge_beliefs",
    "batch_marginals",
    "batch_node_beliefs",
    "batch_sweeps",
    "resolve_threads",
]


def resolve_threads(n_threads: int | None) -> int:
    """Number of OpenMP threads to use: ``None`` or ``-1`` means all cores."""
    if n_threads is None or n_threads == -1:
        return os.cpu_count() or 1
    if isinstance(n_threads, bool) or not isinstance(n_threads, (int, np.integer)) or n_threads < 1:
        raise ValueError(f"n_threads must be a positive integer, -1 or None, got {n_threads!r}")
    return int(n_threads)


def _check_count(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_tol(tol: Any) -> float:
    try:
        value = float(tol)
    except (TypeError, ValueError):
        raise ValueError(f"tol must be a non-negative number, got {tol!r}") from None
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"tol must be a finite non-negative number, got {tol!r}")
    return value


@dataclass(frozen=True)
class BatchSweepResult:
    """Outcome of :func:`batch_sweeps`.

    Attributes
    ----------
    messages : ndarray of shape (n_edges, 2, L)
    n_sweeps : ndarray of shape (B,)
        Sweeps run on each example.
    converged : ndarray of shape (B,), bool
        Whether the last sweep changed no message by more than ``tol`` (see ``tol``).
    """

    messages: np.ndarray
    n_sweeps: np.ndarray
    converged: np.ndarray


def batch_sweeps(
    batch: GraphBatch,
    theta_nodes: Any,
    theta_edges: Any,
    epsilon: float,
    *,
    messages: Any = None,
    max_sweeps: int = 100,
    tol: float = 1e-8,
    n_threads: int | None = None,
    out: np.ndarray | None = None,
    check_input: bool = True,
) -> BatchSweepResult:
    """Star-update sweeps (block coordinate descent on the dual) on every example.

    Parameters
    ----------
    batch : GraphBatch
    theta_nodes : array-like of shape (n_nodes, L)
    theta_edges : array-like of shape (n_edges, L, L)
    epsilon : float
        Entropy weight ``>= 0``; ``0`` runs the max-product star update of the plain LP.
    messages : array-like of shape (n_edges, 2, L), optional
        Warm start (copied). Zeros when omitted.
    max_sweeps : int
        Upper bound on sweeps per example; one sweep visits every node once, the
        direction alternating between sweeps.
    tol : float
        An example stops when a sweep changes no message vector ``lam[e, s, :]`` by more than
        ``tol``; with ``eps > 0`` beyond a constant shift: adding a constant to
        ``lam[e, s, :]`` changes no belief and not ``A`` (the node loses what the edge gains),
        and on chains such shifts drift for hundreds of sweeps after the beliefs have settled.
    n_threads : int, optional
        OpenMP threads (examples run in parallel). All cores by default.
    out : ndarray of shape (n_edges, 2, L), optional
        A C-contiguous float64 array updated in place and returned as the messages
        (its content is the warm start); ``messages`` must then be omitted.
    check_input : bool
        Skip validation of the potentials when the caller has already validated them
        (the learner, in its inner loop).

    Returns
    -------
    BatchSweepResult
    """
    eps = check_epsilon(epsilon)
    max_sweeps = _check_count(max_sweeps, "max_sweeps", 0)
    tol = _check_tol(tol)
    threads = resolve_threads(n_threads)
    L = batch.n_states
    if check_input:
        theta_nodes, theta_edges = batch.check_potentials(theta_nodes, theta_edges)
    if out is not None:
        if messages is not None:
            raise ValueError("pass either messages or out, not both")
        if not (
            isinstance(out, np.ndarray)
            and out.dtype == np.float64
            and out.flags.c_contiguous
            and out.shape == (batch.n_edges, 2, L)
        ):
            raise ValueError(f"out must be a C-contiguous float64 array of shape ({batch.n_edges}, 2, {L})")
        lam = out
    elif messages is None:
        lam = np.zeros((batch.n_edges, 2, L))
    else:
        lam = check_messages(messages, batch.n_edges, L)
    n_sweeps = np.zeros(batch.n_examples, dtype=np.int32)
    last_change = np.zeros(batch.n_examples)
    _star.star_sweeps(
        theta_nodes, theta_edges, lam, batch.node_ptr, batch.inc_ptr, batch.inc_edge,
        batch.inc_side, batch.max_degree, eps, max_sweeps, tol, threads, n_sweeps, last_change,
    )
    return BatchSweepResult(messages=lam, n_sweeps=n_sweeps, converged=last_change <= tol)


def batch_dual_values(
    batch: GraphBatch,
    theta_nodes: Any,
    theta_edges: Any,
    messages: Any,
    epsilon: float,
    *,
    n_threads: int | None = None,
    check_input: bool = True,
) -> np.ndarray:
    """``A(lambda, theta)`` of every example, shape ``(B,)``.

    With ``epsilon > 0`` this is the smoothed dual ``eps * sum_alpha logsumexp(b_alpha / eps)``,
    an upper bound on the smoothed LP that is tight at the optimal messages; with
    ``epsilon = 0`` it is ``sum_alpha max b_alpha``, an upper bound on the LP value.
    """
    eps = check_epsilon(epsilon)
    threads = resolve_threads(n_threads)
    if check_input:
        theta_nodes, theta_edges = batch.check_potentials(theta_nodes, theta_edges)
        messages = check_messages(messages, batch.n_edges, batch.n_states)
    out = np.zeros(batch.n_examples)
    _star.dual_values(
        theta_nodes, theta_edges, messages, batch.edges, batch.node_ptr, batch.edge_ptr,
        batch.inc_ptr, batch.inc_edge, batch.inc_side, eps, threads, out,
    )
    return out


def batch_node_beliefs(batch: GraphBatch, theta_nodes: np.ndarray, messages: np.ndarray) -> np.ndarray:
    """Reparametrised node beliefs ``b_i(a) = theta_i(a) - sum_{e at i} lambda_e(y_i = a)``."""
    sums = np.empty((batch.n_nodes, batch.n_states))
    _star.node_message_sums(
        np.ascontiguousarray(messages, dtype=np.float64), batch.inc_ptr, batch.inc_edge,
        batch.inc_side, sums,
    )
    return theta_nodes - sums


def batch_edge_beliefs(theta_edges: np.ndarray, messages: np.ndarray) -> np.ndarray:
    """Reparametrised edge beliefs ``b_e(a, b) = theta_e(a, b) + lambda_e(a) + lambda_e(b)``."""
    return theta_edges + messages[:, 0, :, None] + messages[:, 1, None, :]


def _softmax(beliefs: np.ndarray, epsilon: float, axes: tuple[int, ...]) -> np.ndarray:
    if epsilon == 0:
        # the eps -> 0 limit: uniform over the maximisers
        top = beliefs == beliefs.max(axis=axes, keepdims=True)
        return top / top.sum(axis=axes, keepdims=True)
    z = beliefs / epsilon
    z = z - z.max(axis=axes, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=axes, keepdims=True)


def batch_marginals(
    batch: GraphBatch,
    theta_nodes: np.ndarray,
    theta_edges: np.ndarray,
    messages: np.ndarray,
    epsilon: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Node and edge marginals ``mu ∝ exp(b / eps)`` for given messages.

    Returns
    -------
    node_marginals : ndarray of shape (n_nodes, L)
    edge_marginals : ndarray of shape (n_edges, L, L)
    """
    eps = check_epsilon(epsilon)
    node = _softmax(batch_node_beliefs(batch, theta_nodes, messages), eps, (1,))
    edge = _softmax(batch_edge_beliefs(theta_edges, messages), eps, (1, 2))
    return node, edge
