"""Batched star-update inference on many graphs at once (the learner's entry point).

All functions take a :class:`slr.data.GraphBatch` and flat potentials of shapes
``(n_nodes, L)`` and ``(n_edges, L, L)``; messages are ``(n_edges, 2, L)``. Inputs are
validated here, once (shapes always; values unless ``check_input=False``), and the Cython
kernels then run without checks, in parallel over the examples of the batch.

Adding a constant to a message vector ``lam[e, s, :]`` changes no marginal and no dual value
(the node loses what the edge gains), but a large constant costs the potentials their
precision once the two are added. Functions whose result does not depend on that constant
(sweeps, dual values, marginals) therefore first shift every validated message vector so that
its largest entry is 0. Inputs that float64 cannot resolve are refused with a ``ValueError``:
magnitudes above :data:`slr.graph.MAX_MAGNITUDE`, a positive ``epsilon`` below ``2**-40``
times the potentials' magnitude, and warm starts more than ``2**20`` times larger than the
potentials (and ``epsilon``) after the shift.
"""
from __future__ import annotations

import functools
import os
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from slr.data import GraphBatch
from slr.graph import _finite_float_array, _float_array, check_epsilon, kernel_edges, shared_table
from slr.inference import _star
from slr.validation import check_int, check_n_jobs, check_real

__all__ = [
    "BatchSweepResult",
    "batch_dual_parts",
    "batch_dual_values",
    "batch_edge_beliefs",
    "batch_marginals",
    "batch_node_beliefs",
    "batch_sweeps",
    "resolve_threads",
]

#: Smallest positive ``epsilon`` for smoothed sweeps, relative to the potentials' magnitude.
#: The smoothing terms ``eps * log(1 + exp(-d / eps))`` are then still resolved to about 12
#: bits against the potentials' rounding (2**-52); as they vanish in it the smoothed updates
#: turn into max-product updates, which may stop at a point that is not the smoothed optimum.
MIN_RELATIVE_EPSILON = 2.0**-40

#: Largest warm-start message magnitude (after the constant shift) relative to the magnitude
#: of the potentials and ``epsilon``: the potentials added to such messages keep at least
#: 32 of their 53 bits.
MAX_RELATIVE_MESSAGES = 2.0**20


def resolve_threads(n_jobs: Any, name: str = "n_jobs") -> int:
    """Number of OpenMP threads requested: ``None`` or ``-1`` means OpenMP's default (all cores,
    unless ``OMP_NUM_THREADS`` or ``threadpoolctl.threadpool_limits`` say fewer).

    Raises
    ------
    ValueError
        Naming ``name``, unless ``n_jobs`` is ``None``, ``-1`` or an integer in ``[1, 2**31 - 1]``.
    """
    n_jobs = check_n_jobs(n_jobs, name)
    if n_jobs is None or n_jobs == -1:
        return max(1, min(_star.openmp_max_threads(), _cpu_count()))
    return n_jobs


@functools.cache
def _cpu_count() -> int:
    # os.cpu_count() reads /sys on every call (~7 us, a few per cent of a small sweep call)
    return os.cpu_count() or 1


#: Each batch's ``_star.sweep_order``, computed on its first sweep: the layout cannot change.
_SWEEP_ORDERS: weakref.WeakKeyDictionary[GraphBatch, tuple[np.ndarray, np.ndarray]] = weakref.WeakKeyDictionary()


#: The order ``_star.star_sweeps`` is given where it is not read: the index order.
_INDEX_ORDER = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint8))


def _sweep_order(batch: GraphBatch) -> tuple[np.ndarray, np.ndarray]:
    """The order in which the two-state sweeps visit the nodes, and its groups of independent nodes."""
    order = _SWEEP_ORDERS.get(batch)
    if order is None:
        order = _star.sweep_order(batch.node_ptr, batch.inc_ptr, batch.inc_edge, batch.inc_side,
                                  batch.edges)
        for array in order:
            array.flags.writeable = False
        _SWEEP_ORDERS[batch] = order
    return order


def _kernel_threads(threads: int, batch: GraphBatch) -> int:
    # more threads than examples or cores buys nothing, and OpenMP cannot start a million
    return max(1, min(threads, batch.n_examples, _cpu_count()))


def _check_batch(batch: Any) -> GraphBatch:
    if not isinstance(batch, GraphBatch):
        raise ValueError(f"batch must be a GraphBatch (see GraphBatch.from_graphs), got {type(batch).__name__}")
    return batch


def _array(value: Any, name: str, shape: tuple[int, ...], check_values: bool) -> np.ndarray:
    """``value`` as a C-contiguous float64 array of exactly ``shape``.

    With ``check_values`` its entries must also be finite and at most ``MAX_MAGNITUDE``.
    """
    if check_values:
        arr = _finite_float_array(value, name, len(shape), bounded=True)
    else:
        arr = _float_array(value, name)
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {arr.shape}")
    return arr


def _potentials(
    batch: GraphBatch, theta_nodes: Any, theta_edges: Any, check_input: bool
) -> tuple[np.ndarray, np.ndarray]:
    L = batch.n_states
    return _array(theta_nodes, "theta_nodes", (batch.n_nodes, L), check_input), _edges(batch, theta_edges, check_input)


def _edges(batch: GraphBatch, theta_edges: Any, check_input: bool) -> np.ndarray:
    """``theta_edges`` checked as by :func:`_array`; a view repeating one table (:func:`slr.graph.shared_table`)
    stays one, its table checked."""
    shape = (batch.n_edges, batch.n_states, batch.n_states)
    table = shared_table(theta_edges)
    if table is None:
        return _array(theta_edges, "theta_edges", shape, check_input)
    if theta_edges.shape != shape:
        raise ValueError(f"theta_edges must have shape {shape}, got {theta_edges.shape}")
    return np.broadcast_to(_array(table, "theta_edges", shape[1:], check_input), shape)


def _messages(batch: GraphBatch, messages: Any, check_input: bool) -> np.ndarray:
    return _array(messages, "messages", (batch.n_edges, 2, batch.n_states), check_input)


def _shift_out_constants(messages: np.ndarray, *, in_place: bool = False) -> np.ndarray:
    """``messages`` with every vector ``messages[e, s, :]`` shifted to a largest entry of 0."""
    top = messages.max(axis=2, keepdims=True) if messages.size else 0.0
    if in_place:
        messages -= top
        return messages
    return messages - top


def _sweep_start(batch: GraphBatch, messages: Any, out: Any, check_input: bool) -> np.ndarray:
    """The message array the sweeps update: ``out``, a copy of ``messages`` or zeros."""
    shape = (batch.n_edges, 2, batch.n_states)
    if out is None:
        if messages is None:
            return np.zeros(shape)
        lam = _messages(batch, messages, check_input)
        return _shift_out_constants(lam) if check_input else lam.copy()
    if messages is not None:
        raise ValueError("pass either messages or out, not both")
    if not (
        isinstance(out, np.ndarray)
        and out.dtype == np.float64
        and out.flags.c_contiguous
        and out.flags.writeable
        and out.shape == shape
    ):
        raise ValueError(f"out must be a writeable C-contiguous float64 array of shape {shape}")
    if check_input:
        _array(out, "out", shape, check_values=True)
        _shift_out_constants(out, in_place=True)
    return out


def _max_abs(array: np.ndarray) -> float:
    return float(np.abs(array).max()) if array.size else 0.0


def _check_sweep_scale(eps: float, theta_nodes: np.ndarray, theta_edges: np.ndarray, messages: np.ndarray) -> None:
    """Refuse sweeps that float64 cannot carry out faithfully (see the module docstring)."""
    theta_scale = max(_max_abs(theta_nodes), _max_abs(kernel_edges(theta_edges)))
    if 0 < eps < MIN_RELATIVE_EPSILON * theta_scale:
        raise ValueError(
            f"epsilon={eps:.3g} is too small for potentials of magnitude {theta_scale:.3g}: the entropy "
            f"term is lost to float64 rounding; use epsilon >= {MIN_RELATIVE_EPSILON * theta_scale:.3g} "
            "(2**-40 times the potentials' magnitude) or solve the plain LP (epsilon = 0, map_lp)"
        )
    scale = max(theta_scale, eps)
    message_scale = _max_abs(messages)
    if scale > 0 and message_scale > MAX_RELATIVE_MESSAGES * scale:
        raise ValueError(
            f"messages have entries of magnitude {message_scale:.3g} (after shifting each vector "
            f"messages[e, s, :] to a largest entry of 0, which changes nothing), more than 2**20 times "
            f"the magnitude {scale:.3g} of the potentials and epsilon: the potentials would be lost to "
            "float64 rounding; warm-start from smaller messages or from none"
        )


# ----------------------------------------------------------------------------------------
# unchecked computations (inputs validated by the caller)
# ----------------------------------------------------------------------------------------
def _run_sweeps(
    batch: GraphBatch,
    theta_nodes: np.ndarray,
    theta_edges: np.ndarray,
    lam: np.ndarray,
    eps: float,
    max_sweeps: int,
    tol: float,
    threads: int,
) -> BatchSweepResult:
    n_sweeps = np.zeros(batch.n_examples, dtype=np.int32)
    converged = np.zeros(batch.n_examples, dtype=np.uint8)
    # only two-state sweeps with eps > 0 (on a CPU with AVX2) read the order
    order = _sweep_order(batch) if batch.n_states == 2 and eps > 0 else _INDEX_ORDER
    _star.star_sweeps(
        theta_nodes, kernel_edges(theta_edges), lam, batch.node_ptr, *order, batch.inc_ptr,
        batch.inc_edge, batch.inc_side, batch.max_degree, eps, max_sweeps, tol, _kernel_threads(threads, batch),
        n_sweeps, converged,
    )
    return BatchSweepResult(messages=lam, n_sweeps=n_sweeps, converged=converged.astype(bool))


def _dual_values(
    batch: GraphBatch, theta_nodes: np.ndarray, theta_edges: np.ndarray, lam: np.ndarray, eps: float, threads: int
) -> np.ndarray:
    nodes, edges = _dual_parts(batch, theta_nodes, theta_edges, lam, eps, threads)
    return nodes + edges


def _dual_parts(
    batch: GraphBatch, theta_nodes: np.ndarray, theta_edges: np.ndarray, lam: np.ndarray, eps: float, threads: int,
    node_terms: bool = True, edge_terms: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """The node and the edge terms of ``A`` per example (a part not asked for is zeros)."""
    nodes, edges = np.zeros(batch.n_examples), np.zeros(batch.n_examples)
    _star.dual_values(
        theta_nodes, kernel_edges(theta_edges), lam, batch.edges, batch.node_ptr, batch.edge_ptr,
        batch.inc_ptr, batch.inc_edge, batch.inc_side, eps, _kernel_threads(threads, batch), nodes, edges,
        node_terms, edge_terms,
    )
    return nodes, edges


def _node_beliefs(batch: GraphBatch, theta_nodes: np.ndarray, lam: np.ndarray) -> np.ndarray:
    sums = np.empty((batch.n_nodes, batch.n_states))
    _star.node_message_sums(lam, batch.inc_ptr, batch.inc_edge, batch.inc_side, sums)
    return theta_nodes - sums


def _edge_beliefs(theta_edges: np.ndarray, lam: np.ndarray) -> np.ndarray:
    return theta_edges + lam[:, 0, :, None] + lam[:, 1, None, :]


def _softmax(beliefs: np.ndarray, epsilon: float, axes: tuple[int, ...]) -> np.ndarray:
    top = beliefs.max(axis=axes, keepdims=True)
    if epsilon == 0:
        # the eps -> 0 limit: uniform over the maximisers
        is_top = beliefs == top
        return is_top / is_top.sum(axis=axes, keepdims=True)
    # shift before dividing: b / eps can overflow to inf (inf - inf = NaN), while (b - max) / eps
    # <= 0 at worst overflows to -inf, whose exp is the right limit 0
    with np.errstate(over="ignore"):
        p = np.exp((beliefs - top) / epsilon)
    return p / p.sum(axis=axes, keepdims=True)


def _marginals(
    batch: GraphBatch, theta_nodes: np.ndarray, theta_edges: np.ndarray, lam: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray]:
    node = _softmax(_node_beliefs(batch, theta_nodes, lam), eps, (1,))
    edge = _softmax(_edge_beliefs(theta_edges, lam), eps, (1, 2))
    return node, edge


# ----------------------------------------------------------------------------------------
# the public functions
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchSweepResult:
    """Outcome of :func:`batch_sweeps`.

    Attributes
    ----------
    messages : ndarray of shape (n_edges, 2, L) or None
        None only in the fit loop's summary of sweeps that ran elsewhere (sharded data:
        :class:`slr.distributed._sharded_data.ShardedData`); :func:`batch_sweeps` returns them.
    n_sweeps : ndarray of shape (B,)
        Sweeps run on each example.
    converged : ndarray of shape (B,), bool
        Whether the last sweep met the stopping test (see ``tol`` of :func:`batch_sweeps`).
    """

    messages: np.ndarray | None
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
    n_jobs: int | None = None,
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
        A positive value must be at least ``2**-40`` times the largest potential.
    messages : array-like of shape (n_edges, 2, L), optional
        Warm start (copied, and each vector ``messages[e, s, :]`` shifted to a largest entry
        of 0, which changes no belief distribution and no dual value). Zeros when omitted.
    max_sweeps : int
        Upper bound on sweeps per example, in ``[0, 2**31 - 1]``; one sweep visits every node
        once, the direction alternating between sweeps.
    tol : float
        An example stops when a sweep changes no message vector ``lam[e, s, :]`` by more than
        ``max(tol, 2**-42 * scale)``, ``scale`` being the largest magnitude the sweep computed
        (the second term is float64's resolution there: without it a problem with large
        potentials or ``epsilon`` could never stop). With ``eps > 0`` the change is measured
        beyond a constant shift: adding a constant to ``lam[e, s, :]`` changes no belief and
        not ``A`` (the node loses what the edge gains), and on chains such shifts drift for
        hundreds of sweeps after the beliefs have settled. ``tol = 0`` runs ``max_sweeps``
        sweeps unless a sweep changes nothing at all.
    n_jobs : int, optional
        OpenMP threads (examples run in parallel; at most one per example and per core).
        All cores when None or -1.
    out : ndarray of shape (n_edges, 2, L), optional
        A writeable C-contiguous float64 array updated in place and returned as the messages
        (its content is the warm start, shifted like ``messages``); ``messages`` must then be
        omitted.
    check_input : bool
        ``False`` skips the checks on values (finiteness, magnitudes, the constant shift) when
        the caller has already validated them (the learner, in its inner loop). Shapes are
        always checked. Unchecked NaN or infinite inputs give meaningless messages, but never
        a false report of convergence: an example whose messages are not all finite after the
        sweeps has ``converged`` False.

    Returns
    -------
    BatchSweepResult

    Raises
    ------
    ValueError
        Naming the argument, for invalid inputs and inputs float64 cannot resolve (see the
        module docstring).
    """
    batch = _check_batch(batch)
    eps = check_epsilon(epsilon)
    max_sweeps = check_int(max_sweeps, "max_sweeps")
    tol = check_real(tol, "tol", 0.0)
    threads = resolve_threads(n_jobs)
    theta_nodes, theta_edges = _potentials(batch, theta_nodes, theta_edges, check_input)
    lam = _sweep_start(batch, messages, out, check_input)
    if check_input:
        _check_sweep_scale(eps, theta_nodes, theta_edges, lam)
        return _run_sweeps(batch, theta_nodes, theta_edges, lam, eps, max_sweeps, tol, threads)
    run = _run_sweeps(batch, theta_nodes, theta_edges, lam, eps, max_sweeps, tol, threads)
    # one pass over the whole array first: numpy's reduction over the small trailing axes costs
    # as much as a sweep of a binary grid
    if not np.isfinite(lam).all():   # an unchecked NaN or infinity: these examples did not converge
        finite_edges = np.isfinite(lam).all(axis=(1, 2))
        run.converged[np.unique(batch.edge_example[~finite_edges])] = False
    return run


def batch_dual_values(
    batch: GraphBatch,
    theta_nodes: Any,
    theta_edges: Any,
    messages: Any,
    epsilon: float,
    *,
    n_jobs: int | None = None,
    check_input: bool = True,
) -> np.ndarray:
    """``A(lambda, theta)`` of every example, shape ``(B,)``.

    With ``epsilon > 0`` this is the smoothed dual ``eps * sum_alpha logsumexp(b_alpha / eps)``,
    an upper bound on the smoothed LP that is tight at the optimal messages; with
    ``epsilon = 0`` it is ``sum_alpha max b_alpha``, an upper bound on the LP value.

    Parameters
    ----------
    batch : GraphBatch
    theta_nodes : array-like of shape (n_nodes, L)
    theta_edges : array-like of shape (n_edges, L, L)
    messages : array-like of shape (n_edges, 2, L)
    epsilon : float
        Entropy weight ``>= 0``.
    n_jobs : int, optional
        OpenMP threads; all cores when None or -1.
    check_input : bool
        ``False`` checks shapes only (see :func:`batch_sweeps`).

    Returns
    -------
    ndarray of shape (B,)
    """
    threads = resolve_threads(n_jobs)
    batch, eps, theta_nodes, theta_edges, lam = _dual_inputs(
        batch, theta_nodes, theta_edges, messages, epsilon, check_input)
    if check_input:
        lam = _shift_out_constants(lam)  # A does not depend on the shift
    return _dual_values(batch, theta_nodes, theta_edges, lam, eps, threads)


def batch_dual_parts(
    batch: GraphBatch,
    theta_nodes: Any,
    theta_edges: Any,
    messages: Any,
    epsilon: float,
    *,
    node_terms: bool = True,
    edge_terms: bool = True,
    n_jobs: int | None = None,
    check_input: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """The node terms and the edge terms of ``A(lambda, theta)`` per example.

    ``A`` (:func:`batch_dual_values`) is a sum of one term per node, which depends on
    ``theta_nodes`` and the messages only, and one per edge, which depends on ``theta_edges``
    and the messages only; a learner that changes one kind of potential recomputes one part.
    Unlike their sum, the parts change when a constant is added to a message (they are
    computed at the messages as given).

    Parameters
    ----------
    batch, theta_nodes, theta_edges, messages, epsilon, n_jobs, check_input
        As for :func:`batch_dual_values`.
    node_terms, edge_terms : bool, default=True
        Which parts to compute; a part not computed is returned as zeros, and its potentials
        are not read (they may be None).

    Returns
    -------
    node_values, edge_values : ndarray of shape (B,)
    """
    node_terms, edge_terms = bool(node_terms), bool(edge_terms)
    threads = resolve_threads(n_jobs)
    batch, eps, theta_nodes, theta_edges, lam = _dual_inputs(
        batch, theta_nodes, theta_edges, messages, epsilon, check_input, node_terms, edge_terms)
    return _dual_parts(batch, theta_nodes, theta_edges, lam, eps, threads, node_terms, edge_terms)


def _dual_inputs(batch, theta_nodes, theta_edges, messages, epsilon, check_input,
                 node_terms: bool = True, edge_terms: bool = True):
    """The checked arguments of the dual values; potentials of a part not computed are not read."""
    batch = _check_batch(batch)
    eps = check_epsilon(epsilon)
    L = batch.n_states
    theta_nodes = (_array(theta_nodes, "theta_nodes", (batch.n_nodes, L), check_input) if node_terms
                   else np.zeros((0, L)))
    theta_edges = (_edges(batch, theta_edges, check_input) if edge_terms
                   else np.zeros((0, L, L)))
    return batch, eps, theta_nodes, theta_edges, _messages(batch, messages, check_input)


def batch_node_beliefs(batch: GraphBatch, theta_nodes: Any, messages: Any) -> np.ndarray:
    """Reparametrised node beliefs ``b_i(a) = theta_i(a) - sum_{e at i} lambda_e(y_i = a)``.

    Parameters
    ----------
    batch : GraphBatch
    theta_nodes : array-like of shape (n_nodes, L)
    messages : array-like of shape (n_edges, 2, L)

    Returns
    -------
    ndarray of shape (n_nodes, L)
    """
    batch = _check_batch(batch)
    theta_nodes = _array(theta_nodes, "theta_nodes", (batch.n_nodes, batch.n_states), check_values=True)
    return _node_beliefs(batch, theta_nodes, _messages(batch, messages, check_input=True))


def batch_edge_beliefs(theta_edges: Any, messages: Any) -> np.ndarray:
    """Reparametrised edge beliefs ``b_e(a, b) = theta_e(a, b) + lambda_e(a) + lambda_e(b)``.

    Parameters
    ----------
    theta_edges : array-like of shape (m, L, L)
    messages : array-like of shape (m, 2, L)

    Returns
    -------
    ndarray of shape (m, L, L)
    """
    theta = _finite_float_array(theta_edges, "theta_edges", 3, bounded=True)
    m, L, _ = theta.shape
    if theta.shape[2] != L:
        raise ValueError(f"theta_edges must have shape (m, L, L), got {theta.shape}")
    return _edge_beliefs(theta, _array(messages, "messages", (m, 2, L), check_values=True))


def batch_marginals(
    batch: GraphBatch,
    theta_nodes: Any,
    theta_edges: Any,
    messages: Any,
    epsilon: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Node and edge marginals ``mu ∝ exp(b / eps)`` for given messages.

    Parameters
    ----------
    batch : GraphBatch
    theta_nodes : array-like of shape (n_nodes, L)
    theta_edges : array-like of shape (n_edges, L, L)
    messages : array-like of shape (n_edges, 2, L)
    epsilon : float
        Entropy weight ``>= 0``; ``0`` gives the uniform distribution over each belief's maximisers.

    Returns
    -------
    node_marginals : ndarray of shape (n_nodes, L)
    edge_marginals : ndarray of shape (n_edges, L, L)
    """
    batch = _check_batch(batch)
    eps = check_epsilon(epsilon)
    theta_nodes, theta_edges = _potentials(batch, theta_nodes, theta_edges, check_input=True)
    lam = _shift_out_constants(_messages(batch, messages, check_input=True))  # the marginals do not depend on it
    return _marginals(batch, theta_nodes, theta_edges, lam, eps)
