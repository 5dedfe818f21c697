"""Exact reference solvers for one pairwise graph (slow; for tests and reports).

* :func:`exact_lp` -- the LP relaxation ``max theta . mu`` over the local polytope (cvxpy + HiGHS);
* :func:`exact_smoothed` -- the entropy-smoothed LP
  ``max theta . mu + eps * sum_alpha H(mu_alpha)``, regions = all nodes and all edges
  (cvxpy ``entr`` on the exponential cone, solved by Clarabel at tight tolerances);
* :func:`brute_force_map` -- the exact MAP by enumerating every labelling;
* :func:`ilp_map` -- the exact MAP as an integer program over the local polytope (scipy's HiGHS,
  no cvxpy): branch and bound on the LP relaxation, for graphs too large to enumerate;
* :func:`hmax` -- ``n log L + m log L^2``, the largest total entropy (Theorem 1.1).

Conventions are those of docs/design.md section 1: ``theta_nodes (n, L)``, ``theta_edges (m, L, L)``
and ``edges (m, 2)`` with ``theta_edges[e, a, b]`` the score of ``y_i = a, y_j = b`` for
``edges[e] = (i, j)``. cvxpy (with HiGHS and Clarabel) comes with the extra ``exact``
(``pip install "slr[exact]"``); it is imported lazily, when a solver is first called, as it is
slow to import, and without it the solvers raise an ImportError naming the extra.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from slr._optional import import_optional
from slr.graph import check_epsilon, check_potentials

__all__ = ["ExactSolution", "brute_force_map", "exact_lp", "exact_smoothed", "hmax", "ilp_map"]

#: Largest number of labellings :func:`brute_force_map` enumerates.
MAX_CONFIGURATIONS = 2**20

# Dual Newton polish of exact_smoothed's marginals: at most this many messages (2 m L), steps.
_MAX_POLISH_VARIABLES = 20_000
_POLISH_MAX_STEPS = 30

# Clarabel settings for exact_smoothed. With the defaults (1e-8) values are good to ~1e-9 but
# marginals only to ~3e-5: marginal errors of an interior-point solution scale like the square
# root of the objective gap. Tighter tolerances give values to ~1e-11 and marginals to ~1e-6
# (the dual polish then makes marginals exact); Clarabel sometimes stalls just above them, so
# the reduced (fallback) tolerances are 1e-9 rather than their loose defaults (5e-5).
_CLARABEL_SETTINGS = {
    "tol_gap_abs": 1e-11,
    "tol_gap_rel": 1e-11,
    "tol_feas": 1e-11,
    "tol_ktratio": 1e-9,
    "reduced_tol_gap_abs": 1e-9,
    "reduced_tol_gap_rel": 1e-9,
    "reduced_tol_feas": 1e-9,
    "reduced_tol_ktratio": 1e-7,
    "max_iter": 500,
}


@dataclass(frozen=True)
class ExactSolution:
    """Optimum of a (smoothed) LP over the local polytope.

    Attributes
    ----------
    value : float
        Optimal objective value.
    node_marginals : ndarray of shape (n, L)
        Optimal node marginals ``mu_i``.
    edge_marginals : ndarray of shape (m, L, L)
        Optimal edge marginals ``mu_e``; ``edge_marginals[e, a, b]`` belongs to ``y_i = a, y_j = b``.
    """

    value: float
    node_marginals: np.ndarray
    edge_marginals: np.ndarray


def hmax(n_nodes: int, n_edges: int, n_states: int) -> float:
    """Largest total entropy of the smoothed relaxation, ``n log L + m log L^2``.

    Theorem 1.1 of the chapter bounds the smoothed optimum by ``l1 <= l <= l1 + eps * hmax``.

    Parameters
    ----------
    n_nodes, n_edges : int
        Number of nodes ``n`` and edges ``m`` (``>= 0``).
    n_states : int
        Number of states ``L`` per node (``>= 1``).

    Returns
    -------
    float
    """
    for name, value in (("n_nodes", n_nodes), ("n_edges", n_edges), ("n_states", n_states)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if n_states < 1:
        raise ValueError(f"n_states must be at least 1, got {n_states}")
    return float((n_nodes + 2 * n_edges) * np.log(n_states))


def exact_lp(theta_nodes: Any, theta_edges: Any, edges: Any) -> ExactSolution:
    """Solve the LP relaxation of MAP over the local polytope.

    ``max_mu theta . mu`` subject to ``mu_i >= 0``, ``sum_a mu_i(a) = 1``, ``mu_e >= 0``,
    ``sum_b mu_e(a, b) = mu_i(a)`` and ``sum_a mu_e(a, b) = mu_j(b)``; solved by HiGHS.

    Parameters
    ----------
    theta_nodes : array-like of shape (n, L)
    theta_edges : array-like of shape (m, L, L)
    edges : array-like of shape (m, 2)
        ``edges[e] = (i, j)``, ``i != j``, indices in ``[0, n)``.

    Returns
    -------
    ExactSolution
        The optimal value and an optimal (vertex) solution.

    Raises
    ------
    ValueError
        On invalid inputs.
    RuntimeError
        If the solver does not report an optimum.
    """
    cp = _cvxpy("exact_lp", "highspy")
    theta_nodes, theta_edges, edges = check_potentials(theta_nodes, theta_edges, edges)
    x, constraints = _local_polytope(cp, edges, *theta_nodes.shape)
    c = np.concatenate([theta_nodes.ravel(), theta_edges.ravel()])
    problem = cp.Problem(cp.Maximize(c @ x), constraints + [x >= 0])
    problem.solve(solver=cp.HIGHS)
    _check_status(cp, problem, "HiGHS")
    node, edge = _marginals(x.value, edges.shape[0], *theta_nodes.shape)
    return ExactSolution(_linear_value(theta_nodes, theta_edges, node, edge), node, edge)


def exact_smoothed(theta_nodes: Any, theta_edges: Any, edges: Any, epsilon: float) -> ExactSolution:
    """Solve the entropy-smoothed LP over the local polytope.

    ``max_mu theta . mu + eps * (sum_i H(mu_i) + sum_e H(mu_e))`` with ``H(p) = -sum p log p``,
    over the same polytope as :func:`exact_lp`. Solved by Clarabel (exponential cone) on the
    rescaled problem ``max (theta - c) . mu / eps + H`` where ``c`` holds each region's largest
    potential, at tolerances around ``1e-11`` (values to about ``1e-10`` relative). The
    interior-point marginals (good to about ``1e-6``) are then polished by a few Newton steps
    on the smooth dual ``min_lam eps * sum_alpha logsumexp(b_alpha / eps)`` started from
    Clarabel's multipliers, which makes them exact to round-off (marginalisation residual
    below ``1e-10``); graphs with more than 10,000 ``m * L`` skip the polish.

    Parameters
    ----------
    theta_nodes : array-like of shape (n, L)
    theta_edges : array-like of shape (m, L, L)
    edges : array-like of shape (m, 2)
    epsilon : float
        Entropy weight, finite and ``> 0`` (for ``0`` use :func:`exact_lp`).

    Returns
    -------
    ExactSolution
        The optimal value and the (unique) optimal marginals.

    Raises
    ------
    ValueError
        On invalid inputs, including ``epsilon == 0``.
    RuntimeError
        If the solver does not report an optimum.
    """
    cp = _cvxpy("exact_smoothed", "clarabel")
    theta_nodes, theta_edges, edges = check_potentials(theta_nodes, theta_edges, edges)
    eps = check_epsilon(epsilon, allow_zero=True)
    if eps == 0:
        raise ValueError("epsilon must be > 0 for exact_smoothed; for epsilon = 0 call exact_lp")
    tn, te = _shift(theta_nodes, theta_edges)
    n, L = theta_nodes.shape
    m = edges.shape[0]
    x, constraints = _local_polytope(cp, edges, n, L)
    c = np.concatenate([tn.ravel(), te.ravel()]) / eps
    problem = cp.Problem(cp.Maximize(c @ x + cp.sum(cp.entr(x))), constraints)
    with warnings.catch_warnings():
        # inaccurate ends are handled below (the polish certifies its own result)
        warnings.filterwarnings("ignore", message="Solution may be inaccurate", category=UserWarning)
        problem.solve(solver=cp.CLARABEL, accept_unknown=True, **_CLARABEL_SETTINGS)
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise RuntimeError(f"Clarabel failed: status {problem.status}")
    # the value is evaluated at the returned marginals rather than taken from cvxpy, whose
    # problem.value is -inf as soon as one variable sits at -1e-13 inside entr
    node, edge = _marginals(x.value, m, n, L)
    value = _linear_value(theta_nodes, theta_edges, node, edge) + eps * (_entropy(node) + _entropy(edge))

    # Interior-point marginals are only good to ~1e-6 (the square root of the objective gap).
    # A few Newton steps on the smooth dual, started from Clarabel's multipliers, make them exact;
    # the polish certifies itself (softmax beliefs whose marginalisation residual is ~0 are optimal).
    # messages from the multipliers of the marginalisation rows (cvxpy's sign, scaled back by eps)
    lam = np.zeros((m, 2, L))
    if m:
        lam[_kept_messages(m, L)] = -eps * constraints[1].dual_value
    lam = lam.ravel()
    dual = _SmoothedDual(theta_nodes, theta_edges, edges, eps)
    if lam.size <= _MAX_POLISH_VARIABLES:
        polished = dual.polish(lam)
        if polished is not None and abs(polished.value - value) <= 1e-6 * (1.0 + abs(value)):
            return polished
    # Clarabel's own solution; check it against the duality gap at its multipliers
    residual = max(
        np.abs(edge.sum(axis=2) - node[edges[:, 0]]).max(initial=0.0),
        np.abs(edge.sum(axis=1) - node[edges[:, 1]]).max(initial=0.0),
        np.abs(node.sum(axis=1) - 1.0).max(),
    )
    gap = dual.value(lam) - value
    if residual > 1e-7 or abs(gap) > 1e-7 * (1.0 + abs(value)):
        warnings.warn(
            f"Clarabel's solution is inaccurate (status {problem.status}, duality gap {gap:.1e}, "
            f"marginalisation residual {residual:.1e})",
            RuntimeWarning,
            stacklevel=2,
        )
    return ExactSolution(value, node, edge)


def brute_force_map(theta_nodes: Any, theta_edges: Any, edges: Any) -> tuple[float, np.ndarray]:
    """Exact MAP by enumerating all ``L**n`` labellings.

    Parameters
    ----------
    theta_nodes : array-like of shape (n, L)
    theta_edges : array-like of shape (m, L, L)
    edges : array-like of shape (m, 2)

    Returns
    -------
    value : float
        ``max_y sum_i theta_i(y_i) + sum_e theta_e(y_i, y_j)``.
    labels : ndarray of shape (n,), int64
        A maximising labelling (the first in row-major order among ties).

    Raises
    ------
    ValueError
        On invalid inputs, or if ``L**n`` exceeds ``2**20`` labellings.
    """
    theta_nodes, theta_edges, edges = check_potentials(theta_nodes, theta_edges, edges)
    n, L = theta_nodes.shape
    if L**n > MAX_CONFIGURATIONS:
        raise ValueError(
            f"brute_force_map enumerates L**n = {L}**{n} labellings, more than the limit 2**20; "
            "use a smaller graph"
        )
    # score[y_0, ..., y_{n-1}] built by broadcasting each region's table along its axes
    score = np.zeros((L,) * n)
    for i in range(n):
        shape = [1] * n
        shape[i] = L
        score += theta_nodes[i].reshape(shape)
    for (i, j), table in zip(edges, theta_edges):
        if i > j:
            i, j, table = j, i, table.T
        shape = [1] * n
        shape[i] = shape[j] = L
        score += table.reshape(shape)
    flat = int(np.argmax(score))
    labels = np.array(np.unravel_index(flat, score.shape), dtype=np.int64).reshape(n)
    return float(score.flat[flat]), labels


def ilp_map(theta_nodes: Any, theta_edges: Any, edges: Any, *, check_input: bool = True) -> tuple[float, np.ndarray]:
    """Exact MAP as the integer program ``max <theta, mu>`` over the local polytope, ``mu_i`` integral.

    With every node indicator 0 or 1 the marginalisation constraints leave each edge one
    feasible indicator, so only the ``n L`` node indicators are declared integral. HiGHS
    (through :func:`scipy.optimize.milp`) runs branch and bound on the LP relaxation to a zero
    relative gap; where the relaxation is tight that is one LP. The time is not bounded by the
    graph's size (frustrated cycles make it branch): callers cap the sizes they hand it.

    Parameters
    ----------
    theta_nodes : array-like of shape (n, L)
    theta_edges : array-like of shape (m, L, L)
    edges : array-like of shape (m, 2)
    check_input : bool, default=True
        Validate the inputs (callers that already did pass False).

    Returns
    -------
    value : float
        ``max_y sum_i theta_i(y_i) + sum_e theta_e(y_i, y_j)``, the score of ``labels``.
    labels : ndarray of shape (n,), int64
        A maximising labelling.

    Raises
    ------
    ValueError
        On invalid inputs.
    RuntimeError
        If HiGHS does not report an optimum.
    """
    from scipy.optimize import Bounds, LinearConstraint, milp

    if check_input:
        theta_nodes, theta_edges, edges = check_potentials(theta_nodes, theta_edges, edges)
    n, L = theta_nodes.shape
    m = edges.shape[0]
    shifted_nodes, shifted_edges = _shift(theta_nodes, theta_edges)
    normalise = sp.hstack([sp.kron(sp.eye(n), np.ones((1, L))), sp.csr_array((n, m * L * L))])
    rows, rhs = [normalise], [np.ones(n)]
    if m:
        marginalise = _message_matrix(edges, n, L).T.tocsr()[_kept_messages(m, L).ravel()]
        rows.append(marginalise)
        rhs.append(np.zeros(marginalise.shape[0]))
    A, b = sp.vstack(rows, format="csr"), np.concatenate(rhs)
    integral = np.concatenate([np.ones(n * L), np.zeros(m * L * L)])
    result = milp(-np.concatenate([shifted_nodes.ravel(), shifted_edges.ravel()]),
                  constraints=LinearConstraint(A, b, b), integrality=integral, bounds=Bounds(0.0, 1.0),
                  options={"mip_rel_gap": 0.0})
    if result.status != 0 or result.x is None:
        raise RuntimeError(f"ilp_map: HiGHS reports no optimum ({result.message})")
    labels = np.argmax(result.x[: n * L].reshape(n, L), axis=1).astype(np.int64)
    value = theta_nodes[np.arange(n), labels].sum()
    if m:
        value += theta_edges[np.arange(m), labels[edges[:, 0]], labels[edges[:, 1]]].sum()
    return float(value), labels


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------
def _shift(theta_nodes: np.ndarray, theta_edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Subtract each region's largest potential (a constant shift of the objective: marginals sum to 1)."""
    node_max = theta_nodes.max(axis=1)
    edge_max = theta_edges.max(axis=(1, 2)) if theta_edges.shape[0] else np.zeros(0)
    return theta_nodes - node_max[:, None], theta_edges - edge_max[:, None, None]


def _message_matrix(edges: np.ndarray, n: int, L: int) -> sp.csr_matrix:
    """Sparse ``M`` with ``beliefs = theta + M @ lam.ravel()`` (docs/design.md section 1).

    Rows are the flattened regions ``[node (n, L), edge (m, L, L)]``, columns the messages
    ``lam (m, 2, L)``: ``lam[e, 0, a]`` adds to ``b_e(a, .)`` and subtracts from ``b_i(a)``,
    ``lam[e, 1, b]`` adds to ``b_e(., b)`` and subtracts from ``b_j(b)``. Its transpose maps
    marginals to the marginalisation residuals ``sum_b mu_e(a, b) - mu_i(a)`` and
    ``sum_a mu_e(a, b) - mu_j(b)``.
    """
    m = edges.shape[0]
    e3, a3, b3 = (g.ravel() for g in np.meshgrid(np.arange(m), np.arange(L), np.arange(L), indexing="ij"))
    edge_rows = n * L + (e3 * L + a3) * L + b3
    e2, a2 = (g.ravel() for g in np.meshgrid(np.arange(m), np.arange(L), indexing="ij"))
    rows = np.concatenate([edge_rows, edge_rows, edges[e2, 0] * L + a2, edges[e2, 1] * L + a2])
    side0, side1 = 2 * L * np.arange(m), 2 * L * np.arange(m) + L  # column offsets of lam[e, 0], lam[e, 1]
    cols = np.concatenate([side0[e3] + a3, side1[e3] + b3, side0[e2] + a2, side1[e2] + a2])
    vals = np.concatenate([np.ones(2 * edge_rows.size), -np.ones(2 * e2.size)])
    return sp.csr_matrix((vals, (rows, cols)), shape=(n * L + m * L * L, 2 * m * L))


def _kept_messages(m: int, L: int) -> np.ndarray:
    """Mask over ``lam (m, 2, L)`` of the marginalisation rows kept in :func:`_local_polytope`."""
    keep = np.ones((m, 2, L), dtype=bool)
    keep[:, 1, L - 1] = False
    return keep


def _local_polytope(cp, edges: np.ndarray, n: int, L: int):
    """Variable ``x = [mu_nodes.ravel(), mu_edges.ravel()]`` and the polytope's equalities.

    Returns ``x`` and ``[node normalisation, marginalisation]``; the marginalisation rows are
    those of ``_message_matrix(...).T`` selected by :func:`_kept_messages`. Edge normalisation
    is implied by the others, and so is the last column constraint of each edge; both are left
    out so the equality system has full row rank (kinder to interior-point solvers).
    Nonnegativity is not included.
    """
    m = edges.shape[0]
    x = cp.Variable(n * L + m * L * L)
    node_sum = sp.hstack([sp.kron(sp.eye(n), np.ones((1, L))), sp.csr_matrix((n, m * L * L))]).tocsr()
    constraints = [node_sum @ x == np.ones(n)]
    if m:
        marg = _message_matrix(edges, n, L).T.tocsr()[_kept_messages(m, L).ravel()]
        constraints.append(marg @ x == np.zeros(marg.shape[0]))
    return x, constraints


class _SmoothedDual:
    """The smoothed dual ``D(lam) = eps * sum_alpha logsumexp(b_alpha / eps)`` of one graph.

    ``b = theta + M lam`` are the reparametrised beliefs of docs/design.md section 1, with ``lam``
    the flattened messages ``(m, 2, L)``. ``D(lam)`` bounds the smoothed optimum from above,
    its gradient ``M^T mu(lam)`` is the marginalisation residual of the softmax marginals
    ``mu(lam)``, and at a zero gradient ``mu(lam)`` is the optimum.
    """

    def __init__(self, theta_nodes: np.ndarray, theta_edges: np.ndarray, edges: np.ndarray, eps: float):
        n, L = theta_nodes.shape
        m = edges.shape[0]
        self.n, self.m, self.L, self.eps = n, m, L, eps
        self.theta = np.concatenate([theta_nodes.ravel(), theta_edges.ravel()])
        self.M = _message_matrix(edges, n, L)
        self.region = np.concatenate([np.repeat(np.arange(n), L), n + np.repeat(np.arange(m), L * L)])

    def evaluate(self, lam: np.ndarray) -> tuple[float, np.ndarray]:
        """``D(lam)`` and the flat softmax marginals ``mu(lam)`` (nodes, then edges)."""
        n, m, L, eps = self.n, self.m, self.L, self.eps
        beliefs = (self.theta + self.M @ lam) / eps
        total, parts = 0.0, []
        for b in (beliefs[: n * L].reshape(n, L), beliefs[n * L :].reshape(m, L * L)):
            top = b.max(axis=1, keepdims=True) if b.size else np.zeros((0, 1))
            p = np.exp(b - top)
            z = p.sum(axis=1, keepdims=True)
            total += float(np.sum(top + np.log(z)))
            parts.append((p / z).ravel())
        return eps * total, np.concatenate(parts)

    def value(self, lam: np.ndarray) -> float:
        return self.evaluate(lam)[0]

    def polish(self, lam: np.ndarray) -> ExactSolution | None:
        """Damped Newton from ``lam``; None unless the residual falls below ``1e-10``."""
        from scipy.sparse.linalg import spsolve

        M, n, m, L = self.M, self.n, self.m, self.L
        value, mu = self.evaluate(lam)
        for _ in range(_POLISH_MAX_STEPS):
            grad = M.T @ mu
            if grad.size == 0 or np.abs(grad).max() < 1e-13:
                break
            P = sp.csr_matrix((mu, (np.arange(mu.size), self.region)), shape=(mu.size, n + m))
            MtP = (M.T @ P).tocsc()
            hess = ((M.T @ sp.diags(mu) @ M) - MtP @ MtP.T) / self.eps
            # D is flat along a constant shift of each lam[e, side]: a tiny ridge makes H invertible
            ridge = 1e-12 * max(float(hess.diagonal().max()), 1e-300)
            step = spsolve((hess + ridge * sp.eye(hess.shape[0])).tocsc(), -grad)
            t, slope = 1.0, float(grad @ step)
            while True:
                new_value, new_mu = self.evaluate(lam + t * step)
                if new_value <= value + 1e-4 * t * slope or t < 1e-8:
                    break
                t /= 2
            if not new_value <= value + 1e-12 * (1.0 + abs(value)):
                break
            lam, value, mu = lam + t * step, new_value, new_mu
        if m and np.abs(M.T @ mu).max() > 1e-10:
            return None
        node, edge = mu[: n * L].reshape(n, L).copy(), mu[n * L :].reshape(m, L, L).copy()
        return ExactSolution(value, node, edge)


def _cvxpy(function: str, solver: str):
    """cvxpy, after checking that it and the solver's module are installed (extra ``exact``)."""
    feature = f"slr.inference.exact.{function}"
    cp = import_optional("cvxpy", "exact", feature)
    import_optional(solver, "exact", feature)
    return cp


def _check_status(cp, problem, solver: str) -> None:
    if problem.status == cp.OPTIMAL_INACCURATE:
        warnings.warn(f"{solver} reports an inaccurate optimum", RuntimeWarning, stacklevel=3)
    elif problem.status != cp.OPTIMAL:
        raise RuntimeError(f"{solver} failed: status {problem.status}")


def _marginals(x: np.ndarray, m: int, n: int, L: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.maximum(np.asarray(x, dtype=np.float64), 0.0)  # interior-point round-off below 0
    return x[: n * L].reshape(n, L).copy(), x[n * L :].reshape(m, L, L).copy()


def _linear_value(theta_nodes, theta_edges, node, edge) -> float:
    return float(np.sum(theta_nodes * node) + np.sum(theta_edges * edge))


def _entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-np.sum(p * np.log(p)))
