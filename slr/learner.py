"""Algorithm 1.1 of Domke's chapter as a scikit-learn style estimator.

Structured learning by iterated logistic regression (docs/design.md section 1). For fixed
messages ``lambda``, learning the unary function ``g_u`` (tied over all nodes of all
examples) is a multinomial logistic regression whose rows carry the bias

    b_i(a)    = (Delta(y_i, a) - sum_{e at i} lambda_e(y_i = a)) / eps

and learning the pairwise function ``g_p`` (``L^2`` classes, pair class ``a * L + b``) one
with the bias

    b_e(a, b) = (lambda_e(y_i = a) + lambda_e(y_j = b)) / eps.

The potentials are ``theta_i(a) = eps g_u(x_i)[a] + Delta(y_i, a)`` (Hamming loss on nodes)
and ``theta_e(a, b) = eps g_p(x_e)[a L + b]``. One learning iteration is: fit ``g_u``,
message passing, fit ``g_p``, message passing, with the messages of every example kept
from one iteration to the next. With oracles that solve their problem exactly the
objective

    R = sum_k [ -F(x^k, y^k) + A(lambda^k, theta^k) ]

never increases (``A`` is the smoothed dual, :func:`slr.inference.batch_dual_values`). The
shipped inexact oracles (SGD, boosting) keep that promise themselves: a fit never ends above the
loss of the function it replaces (docs/design.md section 1).

``fit`` is that loop over one state object, :class:`_Alternation`: the messages, the potentials,
R's node and edge parts and the trace of R and J (R plus the oracles' ridge terms), with one method
per half step (bias, oracle fit with the safeguarded over-relaxed step, potentials, sweeps, R). For
oracles linear in their parameters ``solver="joint"`` (or ``"auto"``) runs the first unary fit of such
an iteration (the model of the nodes alone) and then :func:`slr._joint.joint_minimise`, L-BFGS over
both functions' parameters, whose iterates the same state object takes in
(:meth:`_Alternation.adopt`). What happens after each iteration (``history_``, the caller's
``callback`` with an :class:`Iterate`, early stopping, the stopping rule) is one object for both
solvers, :class:`_Progress`. The estimator around it validates everything first and replaces its
fitted attributes only when the loop has finished
(:meth:`slr.estimator.StructuredEstimator._commit_fit`), so a fit that fails changes nothing.
"""
from __future__ import annotations

import copy
import hashlib
import math
import sys
import warnings
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pandas as pd
from sklearn.exceptions import ConvergenceWarning

from slr._params import Boolean, Checked, Integer, NJobs, Options, RandomState, Real, validate_params
from slr.estimator import FitHistory, StructuredEstimator, validation_data
from slr.formats import Labellings
from slr.graph import GraphBatch, check_epsilon
from slr._joint import joint_minimise, supports
from slr.certificate import FitCertificate, certify
from slr.inference.batch import (BatchSweepResult, batch_dual_parts, batch_node_beliefs, batch_sweeps,
                                 resolve_threads)
from slr.hidden import flat_data, state_offset
from slr.labels import (decode_labels, encode_class_weight, encode_labels, fit_labels, integer_classes,
                        is_integer_classes)
from slr.latent import LATENT_INIT, LatentTargets, clamp_mask, initial_node_targets
from slr.models import (CLASS_WEIGHT, MARGINALS, FlatData, PairwiseModel, check_example_weights, class_weights,
                        hamming_margin)
from slr.oracles.base import MAX_BIAS_SPAN, LogisticOracle, OracleTags, get_oracle_tags
from slr.oracles.linear import Linear
from slr.oracles.linear_protocol import is_linear_in_parameters
from slr.oracles.pair_bias import PairBias
from slr.transitions import FORBIDDEN_UNITS, TRANSITIONS, Transitions, add_edge_offset, check_transitions
from slr.validation import check_bool, check_generator, check_int, check_option, check_real

__all__ = [
    "Iterate",
    "StructuredLogisticRegression",
    "node_message_sums",
    "pairwise_bias",
    "structured_objective",
    "unary_bias",
]

# message-change threshold at which an example stops sweeping early
_SWEEP_TOL = 1e-9

# with sweep_tol > 0 the sweeps of a half step run in chunks of a forward and a backward sweep,
# R evaluated after each
_SWEEP_CHUNK = 2

# the stopping rule compares R now with R this many iterations ago: over one iteration a
# fallen-back relaxed step or a noisy oracle fit (SGD, subsampled boosting) can gain little
# while the fit is far from converged
_TOL_WINDOW = 3

_UNTIMED = nullcontext()

# early_stopping="auto" without X_val holds out validation_fraction of the examples when an oracle
# asks for it (its tags' validation_stopping) and X has at least this many
_AUTO_HOLD_OUT_MIN = 20

#: Columns of ``objective_trace_``.
TRACE_COLUMNS = ["iteration", "stage", "objective", "penalised"]

#: The values of ``solver``.
SOLVERS = ("auto", "alternation", "joint")

# the joint solver's sweeps per evaluation follow progress (slr._joint's sweep_tol), up to max_sweeps
_JOINT_SWEEP_TOL = 0.25

# L-BFGS iterations of the unary Linear fit that is the joint solver's first iteration (the model of
# the nodes alone, which the joint solver refines with the pairwise function): a start, not a solution
_FIRST_FIT_ITER = 20

# the joint solver's own stopping test, on its scaled gradient (slr._joint); far below what the
# stopping rule on J needs, so that the rule (or max_iter) ends a fit
_JOINT_GRADIENT_TOL = 1e-10


def _untimed(phase: str) -> AbstractContextManager:
    return _UNTIMED


# ----------------------------------------------------------------------------------------
# the reduction (pure functions, tested against finite differences of R)
# ----------------------------------------------------------------------------------------
def node_message_sums(batch: GraphBatch, messages: np.ndarray) -> np.ndarray:
    """``sum_{e at i} lambda_e(y_i = a)`` for every node, shape ``(n_nodes, L)``."""
    return -batch_node_beliefs(batch, np.zeros((batch.n_nodes, batch.n_states)), messages)


def unary_bias(batch: GraphBatch, messages: np.ndarray, labels: np.ndarray, epsilon: float) -> np.ndarray:
    """Bias of the unary logistic problem, ``(Delta(y_i, a) - sum_e lambda_e(y_i = a)) / eps``."""
    delta = hamming_margin(labels, batch.n_states)
    return (delta - node_message_sums(batch, messages)) / epsilon


def pairwise_bias(messages: np.ndarray, epsilon: float, *, factored: bool = False,
                  offset: np.ndarray | None = None) -> np.ndarray | PairBias:
    """Bias of the pairwise problem, ``(lambda_e(a) + lambda_e(b)) / eps`` at column ``a L + b``:
    the dense ``(n_edges, L^2)`` array, or with ``factored`` its two factors as a PairBias.
    ``offset``: a fixed ``(L, L)`` table of the potentials (forbidden transitions), added as
    ``offset / eps``."""
    bias = PairBias(messages[:, 0] / epsilon, messages[:, 1] / epsilon,
                    None if offset is None else offset / epsilon)
    return bias if factored else np.asarray(bias)


def structured_objective(
    batch: GraphBatch,
    theta_nodes: np.ndarray,
    theta_edges: np.ndarray,
    messages: np.ndarray,
    labels: np.ndarray,
    epsilon: float,
    *,
    n_jobs: int | None = None,
) -> float:
    """``R = sum_k [ -F(x^k, y^k) + A(lambda^k, theta^k) ]`` for given potentials and messages.

    ``theta`` includes the margin ``Delta``; since ``Delta(y, y) = 0`` the energy of the
    truth ``F(x^k, y^k)`` is ``theta`` evaluated at the true labels.

    Parameters
    ----------
    batch : GraphBatch
    theta_nodes : ndarray of shape (n_nodes, L)
    theta_edges : ndarray of shape (n_edges, L, L)
    messages : ndarray of shape (n_edges, 2, L)
    labels : ndarray of shape (n_nodes,)
        True labels of all nodes (flat, global node order).
    epsilon : float
    n_jobs : int, optional
        OpenMP threads; all cores when None or -1.

    Returns
    -------
    float
    """
    threads = resolve_threads(n_jobs)
    objective = _SplitObjective(batch, labels, epsilon, threads, check_input=True)
    return objective.nodes(theta_nodes, messages) + objective.edges(theta_edges, messages)


class _SplitObjective:
    """R as its node part (node terms of ``A`` minus the truth's node potentials) plus its edge
    part: a unary fit changes only the first, a pairwise fit only the second.

    With ``sample_weight`` (per example) each example's terms are weighted; with ``targets``
    (:class:`slr.latent.LatentTargets`) the truth's potentials are the soft targets' expected
    potentials plus their entropy (``<theta, q> + eps H(q)``) instead of the labels'.
    """

    def __init__(self, batch: GraphBatch, labels: np.ndarray, epsilon: float, threads: int,
                 check_input: bool, *, sample_weight: np.ndarray | None = None,
                 targets: LatentTargets | None = None) -> None:
        self.batch, self.labels, self.epsilon = batch, labels, epsilon
        self.threads, self.check_input = threads, check_input
        self.weights, self.latent = sample_weight, targets
        if targets is None:
            self.sources = labels[batch.edges[:, 0]]
            self.targets = labels[batch.edges[:, 1]]
        if sample_weight is not None:
            self.node_weights = sample_weight[batch.node_example]
            self.edge_weights = sample_weight[batch.edge_example]

    def nodes(self, theta_nodes: np.ndarray, messages: np.ndarray) -> float:
        duals, _ = batch_dual_parts(self.batch, theta_nodes, None, messages, self.epsilon, edge_terms=False,
                                    n_jobs=self.threads, check_input=self.check_input)
        if self.latent is None and self.weights is None:
            return float(duals.sum() - theta_nodes[np.arange(self.labels.shape[0]), self.labels].sum())
        truth = (theta_nodes[np.arange(self.labels.shape[0]), self.labels] if self.latent is None
                 else self.latent.node_truth(theta_nodes))
        if self.weights is None:
            return float(duals.sum() - truth.sum())
        return float(duals @ self.weights - truth @ self.node_weights)

    def edges(self, theta_edges: np.ndarray, messages: np.ndarray) -> float:
        _, duals = batch_dual_parts(self.batch, None, theta_edges, messages, self.epsilon, node_terms=False,
                                    n_jobs=self.threads, check_input=self.check_input)
        if self.latent is None and self.weights is None:
            truth = theta_edges[np.arange(self.batch.n_edges), self.sources, self.targets].sum()
            return float(duals.sum() - truth)
        rows = (theta_edges[np.arange(self.batch.n_edges), self.sources, self.targets] if self.latent is None
                else self.latent.edge_truth(theta_edges))
        if self.weights is None:
            return float(duals.sum() - rows.sum())
        return float(duals @ self.weights - rows @ self.edge_weights)


def _linear_parameters(oracle: Any, names: tuple[str, ...]) -> dict[str, np.ndarray] | None:
    """Copies of a fitted oracle's parameters ``names`` (its tags' ``linear_parameters``), or
    None if it has none (yet)."""
    if not names or not all(hasattr(oracle, name) for name in names):
        return None
    return {name: np.array(getattr(oracle, name), dtype=np.float64) for name in names}


def _relaxed_step(oracle: Any, names: tuple[str, ...], before: dict[str, np.ndarray] | None, omega: float,
                  set_potentials: Callable[[bool], None], objective: Callable[[], float],
                  previous: float) -> float:
    """Move a just-fitted oracle to ``before + omega * (fitted - before)``; keep the exact fit
    if that raises the objective above ``previous`` (its value before the fit) or gives potentials
    out of range.

    ``set_potentials(exact)`` sets the potentials of the oracle's current functions; ``exact``
    says they are the fitted ones (not moved by the relaxation). ``objective()`` is the quantity
    the exact fits descend: ``J = R + eps * penalties`` (R for oracles without a penalty).
    Returns it.
    """
    fitted = _linear_parameters(oracle, names) if before is not None else None
    relaxed = fitted is not None and all(fitted[n].shape == before[n].shape for n in before)
    if relaxed:
        for name, old in before.items():
            setattr(oracle, name, old + omega * (fitted[name] - old))
        try:
            set_potentials(False)
            value = objective()
        except ValueError:   # scores too large for the potentials' range
            value = math.inf
    else:
        set_potentials(True)
        value = objective()
    if relaxed and not value <= previous:
        for name, exact in fitted.items():
            setattr(oracle, name, exact)
        set_potentials(True)
        value = objective()
    return value


# ----------------------------------------------------------------------------------------
# the state of Algorithm 1.1
# ----------------------------------------------------------------------------------------
_FACTORS = ("unary", "pairwise")


class _Alternation:
    """One fit's state of Algorithm 1.1 and its half steps.

    The state: the messages ``lambda`` of every example (kept from one half step to the next),
    the potentials of the current functions, R's node and edge parts at them, and the trace of
    R after every half step. A half step (:meth:`half_step`) fits one factor type's function for
    the current messages (bias, oracle fit, the safeguarded over-relaxed step, potentials, R)
    and then runs the sweeps on every example; with exact oracles neither part increases R.

    Parameters
    ----------
    train : FlatData
        The training data, with labels.
    oracles : dict
        ``{"unary": oracle, "pairwise": oracle}``, fitted in place.
    epsilon : float
    max_sweeps : int
        Kernel sweeps per half step.
    threads : int
        OpenMP threads of the sweeps and of R.
    relaxation : float
        Over-relaxation ``omega`` of oracles linear in their parameters.
    timed : callable
        ``timed(phase)``, a context manager around each phase (the profiling hook).
    resume : (messages or None, fitted_pairwise), optional
        Continue a fit (``warm_start``): the oracles are fitted already (the pairwise one if
        ``fitted_pairwise``), and ``messages`` of this data are kept (zeros when None).
    sweep_tol : float, default=0
        0: every half step runs ``max_sweeps`` sweeps (an example stops when its messages
        settle). Positive: the sweeps run in pairs and stop once a pair lowers R by no more
        than ``sweep_tol`` times what the half step (its fit and earlier sweeps) had gained.
    sample_weight : ndarray of shape (B,), optional
        Per-example weights: each example's terms of R, and its node and edge rows in the
        oracle fits, are weighted.
    class_weight : ndarray of shape (L,), optional
        Per-label weights of the Hamming margin, ``Delta_i(a) = cw[y_i] [a != y_i]``.
    latent_iter : int
        With unlabelled nodes (label -1): learning iterations between CCCP target updates
        (:mod:`slr.latent`).
    latent_start : ndarray of shape (n_nodes, L), optional
        The first node targets with unlabelled nodes (:func:`slr.latent.initial_node_targets`);
        None: uniform, and updated at the starting potentials before the first fit.
    transitions : Transitions, optional
        Allowed transitions (:mod:`slr.transitions`): every forbidden pair's edge potential and every
        forbidden end state's node potential ``FORBIDDEN_UNITS * eps`` below, a fixed part of the
        potentials and of the oracles' biases (whose softmax then gives them weight 0).
    """

    def __init__(self, train: FlatData, oracles: dict[str, Any], epsilon: float, max_sweeps: int,
                 threads: int, relaxation: float, timed: Callable[[str], AbstractContextManager], *,
                 resume: tuple[np.ndarray | None, bool] | None = None, sweep_tol: float = 0.0,
                 sample_weight: np.ndarray | None = None, class_weight: np.ndarray | None = None,
                 latent_iter: int = 1, latent_start: np.ndarray | None = None,
                 transitions: Transitions | None = None) -> None:
        self.train, self.oracles = train, oracles
        self.tags: dict[str, OracleTags] = {factor: get_oracle_tags(oracles[factor]) for factor in _FACTORS}
        self.epsilon, self.max_sweeps, self.threads = epsilon, max_sweeps, threads
        self.sweep_tol = sweep_tol
        self.relaxation, self.timed = relaxation, timed
        batch, L = train.batch, train.n_states
        self.energy = PairwiseModel(epsilon)
        self.delta = hamming_margin(train.labels, L, class_weight)
        # hidden states: the states a node may not take sit far below in every potential and bias
        self.offset = 0.0 if train.allowed_states is None else state_offset(train.allowed_states, epsilon)
        self.edge_offset, self.transitions = None, transitions
        if transitions is not None:
            self.offset = self.offset + transitions.node_offset(batch, FORBIDDEN_UNITS * epsilon)
            self.edge_offset = transitions.edge_offset(FORBIDDEN_UNITS * epsilon)
        self.delta = self.delta + self.offset
        self.node_weights = None if sample_weight is None else sample_weight[batch.node_example]
        self.edge_weights = None if sample_weight is None else sample_weight[batch.edge_example]
        self.latent = (LatentTargets(train, epsilon, max_sweeps, _SWEEP_TOL, threads, initial=latent_start,
                                     allowed=_allowed_states(train, transitions),
                                     pairs=None if transitions is None else transitions.pairs)
                       if train.unlabelled.any() else None)
        self.latent_iter, self._iterations_on_targets = latent_iter, 0
        self.pair_labels = train.pair_labels if self.latent is None else None
        self.messages = np.zeros((batch.n_edges, 2, L))
        self.unary_potentials = np.zeros((batch.n_nodes, L))   # g_u = 0 before the first fit
        self.fitted_pairwise = False
        self.last_sweep: BatchSweepResult | None = None
        self.penalties = dict.fromkeys(_FACTORS, 0.0)   # eps * each oracle's penalty (tags' penalty)
        self.joint_steps = 0   # iterates of the joint solver taken in (adopt)
        self.settled = False   # whether settle ran after the last of them (and no restore since)
        if resume is not None:   # fitted functions, and the messages if they fit this data
            messages, self.fitted_pairwise = resume
            self.messages = self.messages if messages is None else messages
            self.unary_potentials = self.energy.unary_potentials(train, oracles["unary"])
        self.theta_nodes = self.unary_potentials + self.delta
        self.theta_edges = self._excluded(self.energy.pairwise_potentials(
            train, oracles["pairwise"] if self.fitted_pairwise else None))
        if self.latent is not None and self.latent.fresh:
            self.latent.update(self.theta_nodes, self.theta_edges)
        self._split = _SplitObjective(batch, train.labels, epsilon, threads, check_input=False,
                                      sample_weight=sample_weight, targets=self.latent)
        self.node_part = self.edge_part = 0.0
        self._restored: tuple[float, float] | None = None   # R and J of a restored snapshot
        if resume is not None:
            for factor in _FACTORS:
                self.penalties[factor] = self._penalty(factor)
        self.trace: list[tuple[int, str, float, float]] = []
        self._record(0, "start", self._objective())

    @property
    def objective(self) -> float:
        """R at the current functions and messages."""
        return self.trace[-1][2] if self._restored is None else self._restored[0]

    @property
    def penalised(self) -> float:
        """``J = R + eps * (penalty_u + penalty_p)``, what exact fits never raise (R for oracles
        without a penalty: the tags' ``penalty``)."""
        return self.trace[-1][3] if self._restored is None else self._restored[1]

    def trace_frame(self) -> pd.DataFrame:
        """The trace as ``objective_trace_``."""
        return pd.DataFrame(self.trace, columns=TRACE_COLUMNS)

    def _record(self, iteration: int, stage: str, objective: float) -> None:
        """A trace row: R and J at the current functions and messages."""
        self.trace.append((iteration, stage, objective, objective + self._penalty_total()))

    def _penalty(self, factor: str) -> float:
        """``eps`` times ``factor``'s oracle's penalty at its current parameters (0 without one)."""
        oracle = self.oracles[factor]
        return self.epsilon * oracle.penalty() if self.tags[factor].penalty else 0.0

    def _penalty_total(self) -> float:
        return self.penalties["unary"] + self.penalties["pairwise"]

    # ------------------------------------------------------------------ the half step
    def refresh_targets(self, iteration: int) -> None:
        """Before ``iteration``'s half steps, with unlabelled nodes: every ``latent_iter``
        iterations, the CCCP update of the soft targets (a trace row ``"targets"``; R does not rise)."""
        if self.latent is None:
            return
        if self._iterations_on_targets == self.latent_iter:
            with self.timed("targets"):
                self.latent.update(self.theta_nodes, self.theta_edges)
            self._iterations_on_targets = 0
            self._record(iteration, "targets", self._objective())
        self._iterations_on_targets += 1

    def half_step(self, iteration: int, factor: str) -> None:
        """Fit ``factor``'s function (``"unary"`` or ``"pairwise"``) for the current messages,
        then sweep; R and J after each part go to the trace."""
        start = self.penalised
        if factor == "pairwise" and not self.train.has_edges:
            self._record(iteration, "pairwise_fit", self._objective())   # nothing to fit
        else:
            self._fit(factor)
            self._record(iteration, f"{factor}_fit", self.node_part + self.edge_part)
        self._record(iteration, f"{factor}_mp", self._sweep(start))

    def _fit(self, factor: str) -> float:
        """The oracle fit of one half step, over-relaxed where that lowers J; returns J."""
        oracle, names = self.oracles[factor], self.tags[factor].linear_parameters
        with self.timed(f"{factor} bias"):
            bias = self._bias(factor)
        before = _linear_parameters(oracle, names) if self.relaxation != 1.0 else None
        targets, weights = self._fit_targets(factor)
        extra = {} if weights is None else {"sample_weight": weights}
        with self.timed(f"{factor} fit"):
            if factor == "unary":
                oracle.fit(self.train.node_features, bias, targets, **extra)
            else:
                oracle.fit(self.train.edge_features, bias, targets, **extra)
                self.fitted_pairwise = True
        return _relaxed_step(oracle, names, before, self.relaxation,
                             lambda exact: self._set_potentials(factor, exact),
                             lambda: self._fitted_objective(factor), self.penalised)

    def _fitted_objective(self, factor: str) -> float:
        """J after a fit of ``factor``'s oracle: the part of R it changed, and its penalty."""
        R = self._objective(nodes=factor == "unary", edges=factor == "pairwise")
        self.penalties[factor] = self._penalty(factor)
        return R + self._penalty_total()

    def _fit_targets(self, factor: str) -> tuple[np.ndarray, np.ndarray | None]:
        """What ``factor``'s oracle fits: its labels (soft targets with unlabelled nodes) and row weights."""
        if factor == "unary":
            return (self.train.labels if self.latent is None else self.latent.nodes), self.node_weights
        return (self.pair_labels if self.latent is None else self.latent.edges), self.edge_weights

    def _bias(self, factor: str) -> np.ndarray | PairBias:
        if factor == "unary":   # unary_bias with the margin at hand (class weights, unlabelled nodes)
            return (self.delta - node_message_sums(self.train.batch, self.messages)) / self.epsilon
        return pairwise_bias(self.messages, self.epsilon, factored=self.tags[factor].factored_pair_bias,
                             offset=self.edge_offset)

    def _set_potentials(self, factor: str, exact: bool) -> None:
        """Potentials of ``factor``'s current function; ``exact``: the oracle's fitted function,
        whose training scores it may keep (``training_scores`` tag)."""
        oracle = self.oracles[factor]
        scores = oracle.training_scores_ if exact and self.tags[factor].training_scores else None
        with self.timed(f"{factor} potentials"):
            if factor == "unary":
                self.unary_potentials = self.energy.unary_potentials(self.train, oracle, scores=scores)
                self.theta_nodes = self.unary_potentials + self.delta
            else:
                self.theta_edges = self._excluded(self.energy.pairwise_potentials(self.train, oracle, scores=scores))

    def _excluded(self, theta_edges: np.ndarray) -> np.ndarray:
        """Edge potentials with the forbidden transitions' offset, if any (in place where they are
        writeable; one shared table stays one table)."""
        if self.edge_offset is None:
            return theta_edges
        return add_edge_offset(theta_edges, self.edge_offset, in_place=True)

    def _sweep(self, start: float) -> float:
        """The half step's sweeps (``start``: J before its fit); returns R after them."""
        if self.sweep_tol == 0 or self.max_sweeps == 0:
            self.last_sweep = self._sweeps(self.max_sweeps)
            return self._objective()
        value, n_sweeps = self.objective, None
        for done in range(0, self.max_sweeps, _SWEEP_CHUNK):
            run = self._sweeps(min(_SWEEP_CHUNK, self.max_sweeps - done))
            n_sweeps = run.n_sweeps if n_sweeps is None else n_sweeps + run.n_sweeps
            gained, previous = start - (value + self._penalty_total()), value
            value = self._objective()
            if run.converged.all() or previous - value <= self.sweep_tol * max(gained, 0.0):
                break
        self.last_sweep = BatchSweepResult(self.messages, n_sweeps, run.converged)
        return value

    def _sweeps(self, n: int) -> BatchSweepResult:
        with self.timed("message passing"):
            return batch_sweeps(self.train.batch, self.theta_nodes, self.theta_edges, self.epsilon,
                                max_sweeps=n, tol=_SWEEP_TOL, n_jobs=self.threads, out=self.messages,
                                check_input=False)

    # ------------------------------------------------------------------ the joint solver's iterates
    def adopt(self, iteration: int, messages: np.ndarray, objective: float, penalised: float,
              potentials: tuple[np.ndarray, np.ndarray] | None) -> None:
        """An iterate of the joint solver (:mod:`slr._joint`) as the current state: the oracles hold
        its functions already; ``messages``, R and J (the solver's) go to the state and the trace
        (stage ``"joint"``). ``potentials``: the solver's ``(eps g_u, eps g_p)`` at the iterate, taken
        as the state's potentials (for monitoring and snapshots; :meth:`settle` sets the kept
        functions' own), or None to leave them."""
        self.messages[...] = messages
        self.fitted_pairwise = self.fitted_pairwise or self.train.has_edges
        self.joint_steps += 1
        self.settled = False
        if potentials is not None:
            self.unary_potentials, theta_edges = potentials
            self.theta_nodes = self.unary_potentials + self.delta
            if self.fitted_pairwise:
                self.theta_edges = theta_edges
        self._restored = None
        self.trace.append((iteration, "joint", objective, penalised))

    def node_start(self, iteration: int) -> None:
        """The joint solver's start: the unary function fitted at the current messages (zero in a
        fresh fit: the model of the nodes alone), without sweeps (the joint solver's first
        evaluation sweeps from there; sweeping here too changed its course by rounding only on
        letters and the quick held-out grid); R and J after it go to the trace (stage ``"unary_fit"``)."""
        self._fit("unary")
        self._record(iteration, "unary_fit", self.node_part + self.edge_part)

    def settle(self, iteration: int) -> None:
        """After the joint solver: the potentials of the functions kept, up to ``max_sweeps`` sweeps
        (each example until its messages settle) and R from scratch (a trace row ``"joint_mp"``), so
        that the certificate and the messages kept for ``warm_start`` belong to that model."""
        self._set_potentials("unary", False)
        if self.fitted_pairwise:
            self._set_potentials("pairwise", False)
        for factor in _FACTORS:
            self.penalties[factor] = self._penalty(factor)
        self._restored = None
        self.last_sweep = self._sweeps(self.max_sweeps)
        self._record(iteration, "joint_mp", self._objective())
        self.settled = True

    def snapshot(self) -> dict[str, Any]:
        """The current model and messages (copies), for :meth:`restore`."""
        return {"oracles": copy.deepcopy(self.oracles), "messages": self.messages.copy(),
                "unary_potentials": self.unary_potentials, "theta_nodes": self.theta_nodes,
                "theta_edges": self.theta_edges, "node_part": self.node_part, "edge_part": self.edge_part,
                "fitted_pairwise": self.fitted_pairwise, "last_sweep": self.last_sweep,
                "penalties": dict(self.penalties), "trace": len(self.trace)}

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Go back to a :meth:`snapshot`; the trace keeps its later rows (it records the fit as run),
        but :attr:`objective` and :attr:`penalised` are the snapshot's R and J again."""
        self.oracles.update(snapshot["oracles"])
        self.messages[...] = snapshot["messages"]
        for name in ("unary_potentials", "theta_nodes", "theta_edges", "node_part", "edge_part",
                     "fitted_pairwise", "last_sweep", "penalties"):
            setattr(self, name, snapshot[name])
        self._restored = self.trace[snapshot["trace"] - 1][2:4]
        self.settled = False

    def certificate(self, stop_reason: str, n_iter: int) -> FitCertificate | None:
        """Theorem 1.1's bounds and the message passing's state at the current functions, with why
        and after how many iterations the fit stopped; None with unlabelled nodes (the theorem
        bounds the loss of labelled examples). The bounds are on the unweighted losses, so with
        sample weights they hold the unweighted R."""
        last = self.last_sweep
        if self.latent is not None:
            return None
        objective = self.objective
        if self.node_weights is not None:
            unweighted = _SplitObjective(self.train.batch, self.train.labels, self.epsilon, self.threads, False)
            objective = (unweighted.nodes(self.theta_nodes, self.messages)
                         + unweighted.edges(self.theta_edges, self.messages))
        with self.timed("certificate"):
            return certify(self.train, self.theta_nodes, self.theta_edges, self.messages, self.epsilon,
                           objective, last.n_sweeps if last else np.zeros(0, dtype=np.int32),
                           last.converged if last else np.ones(0, dtype=bool), max_sweeps=self.max_sweeps,
                           tol=_SWEEP_TOL, n_jobs=self.threads, stop_reason=stop_reason, n_iter=n_iter)

    def _objective(self, nodes: bool = True, edges: bool = True) -> float:
        """R, recomputing the parts whose inputs changed since the last call."""
        with self.timed("objective R"):
            if nodes:
                self.node_part = self._split.nodes(self.theta_nodes, self.messages)
            if edges:
                self.edge_part = self._split.edges(self.theta_edges, self.messages)
            return self.node_part + self.edge_part

    def map_labels(self, predictor: PairwiseModel, data: FlatData) -> np.ndarray:
        """MAP labels of ``data`` under the current functions, by ``predictor``'s inference; on the
        training data from the potentials at hand."""
        with self.timed("train" if data is self.train else "validation"):
            if data is not self.train:
                pairwise = self.oracles["pairwise"] if self.fitted_pairwise else None
                return _map_labels(predictor, data, self.oracles["unary"], pairwise, self.timed)
            with self.timed("predict: MAP"):
                return predictor.decode(self.train, self.unary_potentials + self.offset, self.theta_edges)


def _power_of_two(iteration: int) -> bool:
    """The iterations 1, 2, 4, 8, ... at which ``monitor="auto"`` decodes where decoding costs sweeps."""
    return iteration > 0 and iteration & (iteration - 1) == 0


class _TrainingRows:
    """Which rows of ``history_`` get the training error (``monitor``), and the kept model's row.

    ``monitor=True``: every row. ``"auto"``: every row where the training decode is Viterbi (every
    example a chain, ``predict_epsilon = 0``), else the rows of iterations 1, 2, 4, 8, ... and, after the
    fit, the row of the model kept (:meth:`finish`). ``False``: none.
    """

    def __init__(self, monitor: bool | str, predictor: PairwiseModel, train: FlatData) -> None:
        self.on = monitor is not False
        self.every = monitor is True or predictor.method(train) != "lp"

    def __call__(self, iteration: int) -> bool:
        """Whether ``iteration``'s row gets the training error when recorded."""
        return self.on and (self.every or _power_of_two(iteration))

    def finish(self, history: FitHistory, kept: int, decode: Callable | None,
               timed: Callable[[str], AbstractContextManager]) -> None:
        """After the fit: the training error of the kept model (``decode``, the learner's decoder,
        labels under it) in its row, iteration ``kept``, if the schedule left it out."""
        if not self.on or self(kept):
            return
        with timed("monitor"):
            history.measure_train(kept, decode)


def _prediction_model(epsilon: float, params: dict[str, Any],
                      transitions: Transitions | None = None) -> PairwiseModel:
    """The energy of a fit at ``epsilon`` with the checked prediction settings of ``params`` and
    the allowed ``transitions``."""
    return PairwiseModel(epsilon, inference="auto" if params["predict_epsilon"] == 0 else "lp",
                         epsilon=params["predict_epsilon"], max_sweeps=params["predict_max_sweeps"], tol=_SWEEP_TOL,
                         n_jobs=params["n_jobs"], transitions=transitions)


def _potentials(predictor: PairwiseModel, data: FlatData, unary: Any,
                pairwise: Any | None) -> tuple[np.ndarray, np.ndarray]:
    """The potentials of ``data`` under the functions ``unary`` and ``pairwise`` (None: no pairwise term),
    the states a node may not take (hidden states, :mod:`slr.hidden`) far below the others."""
    theta_nodes = predictor.unary_potentials(data, unary)
    if data.allowed_states is not None:
        theta_nodes = theta_nodes + state_offset(data.allowed_states, predictor.scale)
    return theta_nodes, predictor.pairwise_potentials(data, pairwise)


def _map_labels(predictor: PairwiseModel, data: FlatData, unary: Any, pairwise: Any | None,
                timed: Callable[[str], AbstractContextManager], warn: bool = False) -> np.ndarray:
    """MAP labels of ``data`` under the functions ``unary`` and ``pairwise`` (None: no pairwise term);
    ``warn``: a ``ConvergenceWarning`` when the LP's sweeps stop before converging."""
    with timed("predict: potentials"):
        theta_nodes, theta_edges = _potentials(predictor, data, unary, pairwise)
    with timed("predict: MAP"):
        return predictor.decode(data, theta_nodes, theta_edges, warn=warn)


def _clone_oracle(oracle: Any, name: str, rng: np.random.Generator) -> LogisticOracle:
    """A fresh copy of an oracle parameter (``Linear()`` for None), checked, its seed drawn from ``rng``
    if it takes one and has none."""
    oracle = Linear() if oracle is None else copy.deepcopy(oracle)
    if not (hasattr(oracle, "fit") and hasattr(oracle, "decision_function")):
        raise ValueError(f"{name} must be an oracle with fit and decision_function, got {oracle!r}")
    get_oracle_tags(oracle)   # a malformed declaration is refused before anything is fitted
    seed = int(rng.integers(2**31 - 1))
    params = oracle.get_params() if hasattr(oracle, "get_params") else {}
    if "random_state" in params and params["random_state"] is None:
        oracle.set_params(random_state=seed)
    if hasattr(oracle, "_parameter_constraints") and hasattr(oracle, "get_params"):
        validate_params(oracle)
    return oracle


def _oracle_spec(oracle: Any) -> str:
    """What identifies an oracle parameter: its class and its parameters as given (``Linear()``
    for None), not its fitted state."""
    oracle = Linear() if oracle is None else oracle
    params = oracle.get_params(deep=True) if hasattr(oracle, "get_params") else {}
    return f"{type(oracle).__module__}.{type(oracle).__qualname__}{sorted(params.items())!r}"


def _check_same_model(fitted: Any, params: dict[str, Any]) -> None:
    """Refuse a ``warm_start`` continuation of another model than the fitted one (another
    ``n_states``, ``unary`` or ``pairwise``), and say what a changed ``epsilon`` does."""
    if params["n_states"] is not None and params["n_states"] != fitted.n_states_:
        raise ValueError(f"warm_start=True continues the fitted model of n_states={fitted.n_states_}, but "
                         f"n_states={params['n_states']} now; set warm_start=False to fit the new model")
    if params["n_hidden_states"] != fitted.n_hidden_states_:
        raise ValueError(f"warm_start=True continues the fitted model of n_hidden_states="
                         f"{fitted.n_hidden_states_}, but n_hidden_states={params['n_hidden_states']} "
                         f"now; set warm_start=False to fit the new model")
    for name in _FACTORS:
        if _oracle_spec(getattr(fitted, name)) != fitted._oracle_specs[name]:
            raise ValueError(f"warm_start=True continues the fitted {name} oracle, but {name} was changed since "
                             f"the fit (now {getattr(fitted, name)!r}); set warm_start=False to fit the new oracle")
    if params["epsilon"] != fitted._predictor.scale:
        warnings.warn(
            f"warm_start=True with epsilon={params['epsilon']:g}, the earlier fit's was {fitted._predictor.scale:g}: "
            "the continued fit minimises the objective at the new epsilon from the earlier functions and "
            "messages, so history_'s objective changes scale where it starts (R at one epsilon is not R at "
            "another)", UserWarning, stacklevel=3)


def _check_resolvable_class_weights(class_weight: np.ndarray | None, epsilon: float) -> None:
    """Refuse class weights whose margins, ``cw[y] / epsilon`` in the oracles' bias, span more than
    the oracles resolve (:data:`slr.oracles.base.MAX_BIAS_SPAN`)."""
    if class_weight is None:
        return
    span = float(class_weight.max()) / epsilon
    if span > MAX_BIAS_SPAN:
        raise ValueError(
            f"class_weight: the largest weight, {class_weight.max():.3g}, over epsilon={epsilon:g} is {span:.3g}, "
            f"more than the oracles resolve ({MAX_BIAS_SPAN:.3g}); only the weights' ratios to each other and to "
            "epsilon matter: scale them down")


def _checked_data(X: Sequence, Y: Sequence | None, n_states: int, inferred_n_states: bool,
                  d_node: int, d_edge: int | None, name: str, allow_unlabelled: bool = False,
                  n_hidden_states: int = 0) -> FlatData:
    """``X`` (and ``Y``) as flat data with ``n_states`` labels (and ``n_hidden_states``) and the
    given feature widths."""
    data = flat_data(X, Y, n_states, n_hidden_states, inferred_n_states=Y is not None and inferred_n_states,
                      allow_unlabelled=allow_unlabelled, name=name)
    data.check_widths(d_node, d_edge, name)
    return data


def _allowed_states(data: FlatData, transitions: Transitions | None) -> np.ndarray | None:
    """The states each node of ``data`` may take (hidden states, the transitions' end states), shape
    ``(n_nodes, n_states)``; None: every state."""
    ends = None if transitions is None else transitions.node_mask(data.batch)
    if ends is None or data.allowed_states is None:
        return data.allowed_states if ends is None else ends
    return data.allowed_states & ends


def _checked_transitions(value: Any, data: FlatData, classes: np.ndarray | None) -> Transitions | None:
    """An ``allowed_transitions`` parameter over ``data``'s labels (a scheme resolved against the
    tags ``classes``; None: integer labels), on all its states (hidden states unconstrained), after
    refusing labels of ``data`` that it forbids."""
    transitions = check_transitions(value, data.n_labels, None if classes is None else classes.tolist())
    if transitions is None:
        return None
    transitions = transitions.padded(data.n_states)
    transitions.check_labels(data.batch, data.labels)
    return transitions


def _layout_digest(data: FlatData) -> str:
    """What identifies the messages' meaning: the examples' graphs and labels."""
    digest = hashlib.blake2b(digest_size=16)
    for array in (data.batch.node_ptr, data.batch.edges, data.labels):
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def _edge_width(data: FlatData) -> int | None:
    return data.d_edge if data.has_edges else None


# ----------------------------------------------------------------------------------------
# the estimator
# ----------------------------------------------------------------------------------------
class StructuredLogisticRegression(StructuredEstimator):
    """Structured prediction on pairwise graphs by iterated logistic regression.

    Domke's Algorithm 1.1 with Hamming loss on the nodes: the energy is
    ``F(x, y) = eps * (sum_i g_u(x_i)[y_i] + sum_(i,j) g_p(x_ij)[y_i L + y_j])``, with one
    unary function for all nodes and one pairwise function for all edges, each chosen
    from the function class of its oracle. Training alternates exact (or approximate,
    for SGD / boosting) oracle fits with star-update message passing on the entropy-
    smoothed LP relaxation; prediction is MAP by max-product star updates on the plain LP
    relaxation of ``F`` (``predict_epsilon = 0``), then each node's best state. When every
    example is a chain the LP is tight, and prediction runs Viterbi instead: the exact MAP,
    in one forward and one backward pass.

    Parameters
    ----------
    unary : LogisticOracle, optional
        Function class of ``g_u`` (input: node features; ``L`` classes). ``Linear()``
        when None. It is deep-copied at ``fit``; the fitted copy is ``unary_``.
    pairwise : LogisticOracle, optional
        Function class of ``g_p`` (input: edge features; ``L^2`` classes). ``Linear()``
        when None; fitted copy in ``pairwise_``.
    epsilon : float, default=0.1
        Entropy weight of the smoothed inference (> 0).
    max_iter : int, default=200
        Most learning iterations (a cap: ``tol`` and early stopping usually stop first). With
        ``warm_start`` it counts the iterations of the earlier fits too. An iteration of Algorithm
        1.1 fits both functions and sweeps after each fit; with the joint solver (``solver``) the
        first iteration of a fresh fit is the unary fit of Algorithm 1.1's first iteration alone
        (from zero messages: the model of the nodes alone, the pairwise function still zero) and
        every later one is one L-BFGS iteration over both functions' parameters (a few star sweeps
        and one gradient per evaluation: much cheaper than an iteration of Algorithm 1.1).
    tol : float, default=1e-4
        The stopping rule: learning stops after iteration ``t`` once
        ``J_{t-3} - J_t < 3 * tol * max(J_{t-3}, J_t, 1)``, i.e. the objective fell by less than a
        fraction ``tol`` per iteration over the last three. ``J = R + eps * sum_f l2_f / 2 ||W_f||^2``
        is what the exact fits descend: R plus the ridge terms of oracles that have one (the tags'
        ``penalty``), R itself without. R is a sum of per-node losses and never negative (Theorem
        1.1), so where it nears 0 the floor of 1 (one node's loss) makes the test absolute; the
        window of three lets an over-relaxed step that fell back, or a noisy oracle fit, gain
        little once without stopping the fit. ``tol=0`` turns the rule off: the fit runs
        ``max_iter`` iterations (unless early stopping ends it, or the joint solver can make no
        more progress in float64) and does not warn. A ``ConvergenceWarning`` says when
        ``max_iter`` stops a fit with ``tol > 0``.
    max_sweeps : int, default=50
        Most star-update sweeps (kernel sweeps: one pass over the nodes, the direction
        alternating) after each oracle fit. The chapter's message-passing iteration is a forward
        and a backward pass, two sweeps. An example stops early when no message changes by more
        than 1e-9; see also ``sweep_tol``.
    sweep_tol : float, default=0.1
        Message passing stops on progress: the sweeps of a half step run in pairs (a forward and
        a backward sweep), and stop once a pair lowers R by no more than ``sweep_tol`` times what
        the half step had gained before it (the oracle fit and the earlier pairs). Sweeping on
        when the messages gain little against what the next fit will gain only costs time: the
        next fit starts from the messages where they are. ``sweep_tol=0`` runs ``max_sweeps``
        sweeps every half step (each example until its messages settle), as before 0.2.
    predict_max_sweeps : int, default=10000
        The budget of kernel sweeps for prediction on graphs that are not forests. The sweeps run in
        chunks of doubling length and stop once every example's labels are a certified MAP
        (the LP's bound met by their score) or settled (unchanged over a chunk with the bound no
        longer falling; :func:`slr.inference.decoding.batch_map`), which on most graphs is long
        before the budget; a ``ConvergenceWarning`` says when the budget ran out first.
    predict_epsilon : float, default=0.0
        Entropy weight of the inference used for prediction; 0 is MAP on the LP
        relaxation (exact by Viterbi when every example is a chain, by max-product when every
        example is a forest). With a positive
        value, nodes are labelled by their smoothed marginals' mode (the sweeps then run
        on chains too).
    n_states : int, optional
        Number of states ``L``; inferred as ``max(Y) + 1`` for integer labels when None. For
        labels of other types, the number of distinct labels, which is what it must be if given.
    n_jobs : int, optional
        OpenMP threads for message passing (parallel over examples); all cores when None or -1.
    monitor : "auto" or bool, default="auto"
        Measure the training error (and the validation error, with validation data) after learning
        iterations for ``history_``: the per-node error of ``predict``'s labels under the functions
        of that iteration. ``True``: after every iteration (the default before 0.2). ``"auto"``: after
        every iteration where every training example is a chain (Viterbi: one pass), and otherwise
        after iterations 1, 2, 4, 8, ... and, once the fit has ended, for the model kept (the last
        iteration, or ``best_iteration_``); the other rows' ``train_error`` is NaN. On graphs that
        are not forests ``predict`` runs max-product sweeps from zero messages until its labels
        settle (up to ``predict_max_sweeps``): a decode of the training examples then costs
        about what an iteration of learning does, or more, so measuring every iteration would cost
        about as much as the fit; ``"auto"`` decodes ``floor(log2(n_iter)) + 2`` times at most
        (figures: the research notes, "The figures behind the defaults").
        ``False``: none, and no validation error unless early stopping needs it. Early stopping
        measures the validation error after every iteration in every mode, and monitoring never
        changes the fit.
    verbose : int, default=0
        0 is silent; 1 prints one line per iteration to stderr (R, training error, time);
        2 also R after every half step. ``True`` is 1.
    random_state : None, int or numpy.random.Generator
        Seeds oracles that have a ``random_state`` parameter left at None (e.g. MLP);
        oracles with an explicit seed keep it.
    relaxation : float, default=1.9
        Over-relaxation ``omega`` in ``[1, 2)`` of the function updates: after each fit of an
        oracle whose functions are linear in their parameters (``Linear``, ``Constant``) the
        parameters move to ``old + omega * (fitted - old)``; if that raises ``J`` (R plus the
        ridge terms, see ``tol``) above its value before the fit, the exact fit is kept instead,
        so ``J`` still never increases.
        The minimised objective is unchanged; on strongly coupled problems the blocks move
        further per iteration (docs/design.md section 1). Other oracles take exact steps;
        ``relaxation=1`` is Algorithm 1.1 as the chapter states it. The default 1.9 reaches the
        objective of exact steps in about half the iterations (the research notes, "The figures
        behind the defaults").
    warm_start : bool, default=False
        Continue the last fit instead of starting afresh: its fitted oracles and, on the same
        training data, its messages are kept, and ``max_iter`` counts all iterations, so a fit of
        10 iterations followed by ``set_params(max_iter=20, warm_start=True)`` and ``fit`` ends
        where one fit of 20 would (``history_`` and ``objective_trace_`` continue). On other
        training data (another graph layout or other labels) the messages start from zero. An
        early-stopped fit continues from the iteration it kept (``best_iteration_``); the rows
        of ``history_`` after it are dropped, and early stopping's count starts afresh. With the
        alternating solver the continuation is the uninterrupted fit exactly; the joint solver
        starts L-BFGS afresh from the kept functions and messages (its curvature memory is not
        kept), so 10 + 10 iterations end near 20, not at them (3 + 3 against 6 on denoising
        grids and random graphs: within 5% of R, above or below). A continuation must be of the
        fitted model: a changed ``n_states``, ``unary`` or ``pairwise`` is refused (set
        ``warm_start=False`` to fit it), as are features of other widths; a changed ``epsilon``
        is taken with a ``UserWarning`` (the objective then changes scale in ``history_``).
    early_stopping : "auto" or bool, default="auto"
        Stop when the validation error (per-node error of MAP predictions) has stayed above its
        lowest value for ``n_iter_no_change`` iterations, or has stayed at or above it for
        ``4 * n_iter_no_change`` iterations since it first reached it, and keep the model of the
        last iteration with the lowest validation error (``best_iteration_``). On a few validation
        examples the error moves in coarse steps and often stays level for many iterations while
        the fit still improves (letters, 10 held-out words: level for 34 iterations before it fell
        again), so a plateau at the lowest gets four times the patience of a rise (the sign of
        overfitting). A longer plateau ends the fit too, which would otherwise run to the
        stopping rule on R or to ``max_iter`` (an MLP on chains with 20 states: held-out error
        level from the 4th iteration to the 200th). The validation data are ``X_val``, ``Y_val``
        when given to ``fit``, else
        ``validation_fraction`` of the examples of ``X``, held out (drawn with ``random_state``).
        ``"auto"`` is on when ``X_val`` and ``Y_val`` are given, and otherwise only where an
        oracle asks for it (its tags' ``validation_stopping``: ``MLP``) and ``X`` has at least
        20 examples. Otherwise it holds nothing out: structured data sets often have few
        examples (letters' fold has 704 words, the denoising sets 16 images), and holding a
        tenth of them out costs the fit more than the stopping rule on R, which needs no
        held-out data, does (the research notes, "The figures behind the defaults"). A network,
        however, drives R towards 0 by memorising the training examples while the error on
        other examples rises, so the rule ends its fit only at ``max_iter``, far past its best
        model; a tenth of the examples held out stops it there. With fewer than 20 examples that
        tenth is one example (or a share rounded up past a tenth): one example's error is too
        noisy to choose an iteration on, and the example is missed in the fit. ``stop_reason_`` is
        ``"early_stopping"`` when it ends the fit.
    validation_fraction : float, default=0.1
        Share of the examples of ``X`` held out for early stopping when no ``X_val`` is given
        (rounded up to whole examples; at least one must remain to train on).
    n_iter_no_change : int, default=10
        Iterations with a validation error above its lowest after which early stopping ends the
        fit; four times as many at its lowest, without a new lowest, end it too.
    class_weight : None, "balanced" or dict, default=None
        Per-label weights ``cw`` of the Hamming margin: ``Delta_i(y_i, a) = cw[y_i] [a != y_i]`` in
        ``theta``, so R is the smoothed surrogate of the weighted Hamming loss (as the SSVMs' loss-
        augmented inference uses it). A dict ``{label: weight}`` (labels it omits weigh 1), or
        ``"balanced"``: ``n_nodes / (n_classes * count(label))`` over the labelled training nodes,
        as scikit-learn defines it. (Weighting each node's term of the log-partition instead is not
        possible: the smoothed LP couples the nodes of an example, its value does not split into
        per-node parts that one could scale; docs/design.md section 1.)
    latent_iter : int, default=1
        With unlabelled nodes in ``Y`` (label ``-1``): learning iterations between updates of the
        soft targets (CCCP, :mod:`slr.latent`). Fully labelled fits ignore it.
    latent_init : {"neighbours", "kmeans", "random", "uniform"}, default="neighbours"
        With unlabelled nodes: the first soft targets, which break the symmetry among an unlabelled
        node's states (from uniform targets they stay interchangeable and the node learns nothing):
        its labelled neighbours' labels, pystruct's k-means clustering of those, a random state
        (both seeded by ``random_state``), or uniform (:func:`slr.latent.initial_node_targets`).
        A continued fit (``warm_start``) starts from the fitted functions instead.
    n_hidden_states : int, default=0
        Hidden nodes with states of their own (pystruct's ``LatentNodeCRF``, :mod:`slr.hidden`):
        with ``n_hidden_states > 0`` every example is ``(node_features, edges, edge_features,
        n_hidden)``, its last ``n_hidden`` nodes hidden (never labelled, one of ``n_hidden_states``
        states each), ``Y`` labels its visible nodes and ``predict`` returns their labels. The
        model has ``n_states + n_hidden_states`` states, visible nodes kept to the first, hidden
        nodes to the others; the hidden nodes are learnt as latent variables (``latent_init``,
        ``latent_iter``). :func:`slr.formats.from_latent_node_crf` converts pystruct's examples.
    solver : {"auto", "alternation", "joint"}, default="auto"
        ``"alternation"``: Algorithm 1.1 (block coordinate descent: oracle fits and sweeps in
        turn). ``"joint"``: for ``Linear``, ``Constant`` and ``Zero`` oracles, whose potentials are
        linear in their parameters so that J is jointly convex in (parameters, messages): the
        unary fit from zero messages (the model of the nodes alone, capped at 20 L-BFGS
        iterations; a fit stopped after it has no pairwise term), then L-BFGS over both
        functions' parameters at once from there, the pairwise function and the messages
        starting at zero, each evaluation running as many warm-started star sweeps on the
        messages as its progress asks for (from 2, at most ``max_sweeps``; :mod:`slr._joint`);
        at the end up to ``max_sweeps`` sweeps settle the messages. Sample
        and class weights, early stopping and ``warm_start`` work with both (a continued joint
        fit starts L-BFGS's memory afresh). ``"auto"``: ``"joint"`` where it applies (such
        oracles, no unlabelled nodes, ``max_sweeps >= 1``), else ``"alternation"``;
        ``solver_`` says which ran. ``relaxation`` and ``sweep_tol`` concern the alternation only.
    allowed_transitions : None, "BIO", "BIOES" or array-like of bool, default=None
        Which label may follow which along an edge (:mod:`slr.transitions`): an ``(L, L)`` mask,
        ``allowed[a, b]`` saying that label ``a`` at an edge's first node may be followed by ``b`` at
        its second (on a chain, node ``i`` and ``i + 1``); or an ``(L + 2, L + 2)`` mask whose row
        ``L`` and column ``L + 1`` also say which labels a chain may start and end with (on other
        graphs: the nodes without an incoming, an outgoing edge); or a tagging scheme, resolved
        against string tags (with integer labels, pass the mask
        ``slr.transitions.allowed_transitions(scheme, tags)`` instead). Forbidden pairs and end
        states are excluded from training (their potentials and the pairwise oracle's bias far
        below the others: weight 0 in every softmax, R and the certificate finite) and from
        prediction (no forbidden pair is decoded on chains and trees, where inference is exact;
        on loopy graphs the LP's labelling may use one only where its rounding finds no allowed
        labelling). Training labels that use a forbidden pair are refused.

    Attributes
    ----------
    unary_, pairwise_ : LogisticOracle
        The fitted functions.
    n_states_ : int
        The labels (without the hidden states).
    classes_ : ndarray of shape (n_classes,)
        The labels, sorted (``arange(n_states_)`` for integer labels): ``predict`` returns them,
        and column ``a`` of ``predict_marginals`` is label ``classes_[a]``.
    n_hidden_states_ : int
    n_node_features_, n_edge_features_ : int
    history_ : pandas.DataFrame
        One row per learning iteration run (plus row 0 for the start, all messages zero and
        both functions zero): ``iteration``, ``objective`` (R after the iteration),
        ``train_error``, ``val_error`` (per-node error rates of MAP predictions; NaN
        without validation data or monitoring, and ``train_error`` in the rows ``monitor="auto"``
        leaves out), ``seconds`` (wall time since ``fit`` began,
        without monitoring) and ``eval_seconds`` (see :mod:`slr.estimator`). With early
        stopping it goes on past the kept iteration, to the last one run.
    n_iter_ : int
        Learning iterations run (with ``warm_start``, of all fits together).
    stop_reason_ : str
        Why learning stopped: ``"tol"`` (the stopping rule), ``"early_stopping"``, ``"max_iter"``
        or, for the joint solver only, ``"converged"`` (its gradient test met, or no progress left
        in float64); also in ``certificate_``.
    solver_ : str
        The solver that ran: ``"alternation"`` or ``"joint"`` (see ``solver``).
    best_iteration_ : int or None
        With early stopping, the iteration whose model was kept (the last with the lowest
        validation error); None without.
    objective_trace_ : pandas.DataFrame
        ``R`` and ``J`` after every half step: columns ``iteration``, ``stage`` (one of
        ``"start"``, ``"unary_fit"``, ``"unary_mp"``, ``"pairwise_fit"``, ``"pairwise_mp"``,
        ``"targets"`` after a soft-target update of a fit with unlabelled nodes, and for the joint
        solver ``"joint"`` after each of its iterations and ``"joint_mp"`` after its final sweeps),
        ``objective`` (R) and ``penalised`` (J: R plus ``eps`` times the oracles' ridge terms,
        see ``tol``). With exact oracles (Zero, Constant, Linear) ``penalised`` never increases,
        up to the rounding of its sums (and R neither without a ridge; with one R can rise a
        little where a fit shrinks the weights); SGD (``MLP``) and boosting can raise it at a fit.
    certificate_ : slr.certificate.FitCertificate or None
        What the fit proves on its training set: Theorem 1.1's bounds (``R`` against the LP loss
        bracketed by a decoded labelling and the ``eps = 0`` dual, and ``eps * Hmax``), the sweeps
        and convergence of the last half step, the message residual, ``n_iter`` and
        ``stop_reason``. With early stopping it certifies the kept model; with ``sample_weight``
        its bounds and ``objective`` are the unweighted ones; None after a fit with unlabelled nodes.

    Notes
    -----
    What the learner asks of an oracle beyond ``fit`` and ``decision_function`` it reads from
    :func:`slr.oracles.get_oracle_tags` only: ``factored_pair_bias`` (the pairwise bias handed
    over as a :class:`~slr.oracles.pair_bias.PairBias`), ``linear_parameters`` (what
    ``relaxation`` moves), ``training_scores`` (the potentials of a freshly fitted function
    on the training rows come from the oracle's ``training_scores_`` instead of
    ``decision_function``), ``penalty`` (J instead of R) and ``validation_stopping``
    (what ``early_stopping="auto"`` holds examples out for).

    ``fit`` is a transaction: it checks the parameters, the oracles and all the data first, and
    replaces the fitted attributes only once it has finished. A fit that raises (bad validation
    data, a bad parameter, an oracle failing mid-fit) leaves a fitted model as it was. The
    energy's ``epsilon`` is that of the last successful fit; the settings of prediction
    (``predict_epsilon``, ``predict_max_sweeps``, ``n_jobs``) are read when ``predict`` runs, so
    ``set_params`` changes them for a fitted model.

    Examples
    --------
    >>> from slr import StructuredLogisticRegression
    >>> from slr.datasets import make_denoising
    >>> X, Y = make_denoising(n_images=2, size=60, sigma=6.0, random_state=0)
    >>> model = StructuredLogisticRegression(max_iter=10, tol=0, random_state=0).fit(X, Y)  # no rule: 10 iterations
    >>> model.score(X, Y) > 0.85
    True
    >>> model.n_iter_, model.stop_reason_
    (10, 'max_iter')
    >>> model.history_.columns.tolist()
    ['iteration', 'objective', 'train_error', 'val_error', 'seconds', 'eval_seconds']
    """

    #: Profiling hook (``asv_benchmarks/profile_learner.py``): when set, ``fit`` and prediction
    #: run each phase inside ``_phase_timer(name)``, a context manager that times it.
    _phase_timer: Callable[[str], AbstractContextManager] | None = None

    _parameter_constraints = {
        "epsilon": Checked(lambda value, name: check_epsilon(value, allow_zero=False, name=name),
                           "a real number > 0"),
        "max_iter": Integer(1),
        "tol": Real(0.0),
        "max_sweeps": Integer(0),
        "sweep_tol": Real(0.0),
        "predict_max_sweeps": Integer(0),
        "predict_epsilon": Checked(lambda value, name: check_epsilon(value, name=name), "a real number >= 0"),
        "n_states": (None, Integer(1)),
        "n_jobs": NJobs(),
        "monitor": (Boolean(), Options(("auto",))),
        "verbose": (Boolean(), Integer(0)),
        "random_state": RandomState(),
        "relaxation": Real(1.0, 2.0, high_open=True),
        "warm_start": Boolean(),
        "early_stopping": (Options(("auto",)), Boolean()),
        "validation_fraction": Real(0.0, 1.0, low_open=True, high_open=True),
        "n_iter_no_change": Integer(1),
        "class_weight": CLASS_WEIGHT,
        "latent_iter": Integer(1),
        "latent_init": Options(LATENT_INIT),
        "n_hidden_states": Integer(0),
        "solver": Options(SOLVERS),
        "allowed_transitions": TRANSITIONS,
    }

    def __init__(
        self,
        unary: LogisticOracle | None = None,
        pairwise: LogisticOracle | None = None,
        *,
        epsilon: float = 0.1,
        max_iter: int = 200,
        tol: float = 1e-4,
        max_sweeps: int = 50,
        sweep_tol: float = 0.1,
        predict_max_sweeps: int = 10_000,
        predict_epsilon: float = 0.0,
        n_states: int | None = None,
        n_jobs: int | None = None,
        monitor: bool | str = "auto",
        verbose: int = 0,
        random_state: Any = None,
        relaxation: float = 1.9,
        warm_start: bool = False,
        early_stopping: str | bool = "auto",
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 10,
        class_weight: dict | str | None = None,
        latent_iter: int = 1,
        latent_init: str = "neighbours",
        n_hidden_states: int = 0,
        solver: str = "auto",
        allowed_transitions: Any = None,
    ) -> None:
        self.unary = unary
        self.pairwise = pairwise
        self.epsilon = epsilon
        self.max_iter = max_iter
        self.tol = tol
        self.max_sweeps = max_sweeps
        self.sweep_tol = sweep_tol
        self.predict_max_sweeps = predict_max_sweeps
        self.predict_epsilon = predict_epsilon
        self.n_states = n_states
        self.n_jobs = n_jobs
        self.monitor = monitor
        self.verbose = verbose
        self.random_state = random_state
        self.relaxation = relaxation
        self.warm_start = warm_start
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.class_weight = class_weight
        self.latent_iter = latent_iter
        self.latent_init = latent_init
        self.n_hidden_states = n_hidden_states
        self.solver = solver
        self.allowed_transitions = allowed_transitions

    # ------------------------------------------------------------------------------------
    def _check_params(self) -> dict[str, Any]:
        """Every hyperparameter checked."""
        params = validate_params(self)
        params["verbose"] = int(params["verbose"])
        return params

    def fit(
        self,
        X: Sequence,
        Y: Sequence,
        X_val: Sequence | None = None,
        Y_val: Sequence | None = None,
        sample_weight: Any = None,
        callback: Callable[[Iterate], Any] | None = None,
    ) -> "StructuredLogisticRegression":
        """Learn the unary and pairwise functions.

        Parameters
        ----------
        X : list of (node_features (n, d_u), edges (m, 2), edge_features (m, d_e))
            With ``n_hidden_states``, ``(node_features, edges, edge_features, n_hidden)``.
        Y : list of label arrays (n,)
            With ``n_hidden_states``, ``(n - n_hidden,)``: the visible nodes' labels. Integer
            labels, or labels of any hashable type that sort (strings: ``"B-PER"``), which
            ``classes_`` then lists (:mod:`slr.labels`). Label ``-1`` for integer labels, ``None``
            for others, or a masked entry of a numpy masked array, marks an unlabelled node,
            learnt as a latent variable (:mod:`slr.latent`); an example may have no labelled node.
        X_val, Y_val : optional
            Validation data in the same format (fully labelled), for ``history_["val_error"]`` and
            early stopping (which they then turn on with ``early_stopping="auto"``, and which then
            holds nothing out of ``X``).
        sample_weight : array-like of shape (n_examples,), optional
            Per-example weights ``w_k >= 0``: R becomes ``sum_k w_k [-F(x^k, y^k) + A(lambda^k, theta^k)]``
            and every node and edge row of example ``k`` weighs ``w_k`` in the oracle fits. An
            integer weight is the example repeated; weight 0 drops it.
        callback : callable, optional
            Called as ``callback(iterate)`` after every learning iteration (with both solvers, and
            with ``warm_start`` for the continued fit's iterations), with an :class:`Iterate`: the
            iteration, R and J, the fit time so far, and :meth:`Iterate.predict` /
            :meth:`Iterate.score` of any data under the current functions. It observes the fit
            and does not steer it (its return value is ignored), so data scored there, unlike
            ``X_val``, choose nothing: e.g. a test error curve. Its time is left out of
            ``history_["seconds"]`` (it goes to ``eval_seconds``). An exception it raises ends
            the fit and propagates; the fitted attributes then stay those of the previous fit. A
            parameter of ``fit``, not of the estimator: it observes one fit and is no part of the
            model (``get_params``, ``clone`` and pickling do not carry it).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Naming the argument, for a bad parameter, oracle or data set; the fitted
            attributes are then those of the previous fit (or none).

        Warns
        -----
        ConvergenceWarning
            When ``max_iter`` stops the fit before the stopping rule does (``tol > 0``).
        """
        params = self._check_params()
        if callback is not None and not callable(callback):
            raise ValueError(f"callback must be a callable taking an Iterate, or None, got {callback!r}")
        warm = params["warm_start"] and hasattr(self, "history_")
        if warm:
            done = self._resume_iteration
            if params["max_iter"] < done:
                raise ValueError(f"max_iter must be at least the {done} iterations done when warm_start=True "
                                 f"(it counts all iterations), got {params['max_iter']}")
            if params["max_iter"] == done:   # nothing left to do: the fitted model stays as it is
                return self
            _check_same_model(self, params)
            inferred = self._n_states_inferred
            unary, pairwise = copy.deepcopy(self.unary_), copy.deepcopy(self.pairwise_)
            classes = None if is_integer_classes(self.classes_) else self.classes_
            data = _checked_data(X, encode_labels(Y, classes), self.n_states_, inferred, self.n_node_features_,
                                 self.n_edge_features_, "X", allow_unlabelled=True,
                                 n_hidden_states=params["n_hidden_states"])
            rng = None
        else:
            done, inferred = 0, params["n_states"] is None
            rng = check_generator(params["random_state"])
            unary = _clone_oracle(self.unary, "unary", rng)
            pairwise = _clone_oracle(self.pairwise, "pairwise", rng)
            Y, classes = fit_labels(Y, params["n_states"])
            data = flat_data(X, Y, params["n_states"], params["n_hidden_states"], allow_unlabelled=True)
        fitted_classes = integer_classes(data.n_labels) if classes is None else classes
        transitions = _checked_transitions(params["allowed_transitions"], data, classes)
        weights = check_example_weights(sample_weight, data.n_examples)
        val = validation_data(X_val, Y_val, lambda X, Y: _checked_data(
            X, encode_labels(Y, classes), data.n_labels, inferred, data.d_node, _edge_width(data), "X_val",
            n_hidden_states=params["n_hidden_states"]))
        early = _early_stopping(params["early_stopping"], val is not None, (unary, pairwise), data.n_examples,
                                params["validation_fraction"])
        split = None
        if early and val is None:   # hold out validation_fraction of the examples
            split = self._hold_out(data.n_examples, params["validation_fraction"], warm, rng)
            train, val = data.subset(split[0]), data.subset(split[1])
            weights = None if weights is None else weights[split[0]]
        else:
            train = data
        threads = resolve_threads(params["n_jobs"])
        predictor = _prediction_model(params["epsilon"], params, transitions)
        layout = _layout_digest(train)
        resume, earlier_history, earlier_trace = None, None, None
        if warm:
            same_data = layout == self._train_layout
            resume = (self._train_messages.copy() if same_data else None, self._fitted_pairwise)
            # an early-stopped fit continues from the iteration it kept
            earlier_history = self.history_[self.history_["iteration"] <= done]
            earlier_trace = self.objective_trace_[self.objective_trace_["iteration"] <= done]

        history = FitHistory(train, val)
        timed = self._phase_timer or _untimed
        cw = class_weights(encode_class_weight(params["class_weight"], classes), train.labels, train.n_labels)
        if cw is not None and train.n_states > train.n_labels:   # hidden states are never a label
            cw = np.r_[cw, np.ones(train.n_states - train.n_labels)]
        _check_resolvable_class_weights(cw, params["epsilon"])
        allowed = _allowed_states(train, transitions)
        allowed = None if allowed is None else clamp_mask(train.labels, train.n_states) & allowed
        latent_start = (initial_node_targets(train, params["latent_init"], rng, allowed)
                        if resume is None and params["latent_init"] != "uniform" and train.unlabelled.any()
                        else None)
        state = _Alternation(train, {"unary": unary, "pairwise": pairwise}, params["epsilon"],
                             params["max_sweeps"], threads, params["relaxation"], timed, resume=resume,
                             sweep_tol=params["sweep_tol"], sample_weight=weights, latent_iter=params["latent_iter"],
                             class_weight=cw, latent_start=latent_start, transitions=transitions)
        solver = _choose_solver(params["solver"], unary, pairwise, train, params["max_sweeps"])
        objectives = [] if earlier_history is None else _iteration_objectives(earlier_history, earlier_trace)
        if not warm:
            history.record(0, state.objective)
            objectives.append(state.penalised)
        rows = _TrainingRows(params["monitor"], predictor, train)
        decode = (lambda data: state.map_labels(predictor, data)) if rows.on or early else None

        def check_data(X: Sequence, Y: Sequence | None) -> FlatData:
            return _checked_data(X, None if Y is None else encode_labels(Y, classes), train.n_labels,
                                 inferred, train.d_node, _edge_width(train), "X",
                                 n_hidden_states=params["n_hidden_states"])

        progress = _Progress(history, objectives, decode, rows,
                             _BestIteration(params["n_iter_no_change"]) if early else None, params["tol"],
                             params["verbose"], timed, callback,
                             lambda row, state: Iterate(row, state, predictor, check_data, fitted_classes))
        if solver == "joint":
            stop_reason, n_iter = _run_joint(state, progress, done, params["max_iter"], weights, cw)
        else:
            stop_reason, n_iter = _run_alternation(state, progress, done, params["max_iter"])
        best, kept = progress.best, n_iter
        if best is not None and best.iteration < n_iter:   # keep the best iteration's model
            state.restore(best.snapshot)
            kept = best.iteration
        if state.joint_steps and not state.settled:
            state.settle(n_iter)
        rows.finish(history, kept, decode, timed)
        if params["verbose"]:
            print(f"[StructuredLogisticRegression] stopped after {n_iter} iterations ({stop_reason})"
                  + (f"; kept iteration {kept}" if best is not None else ""), file=sys.stderr)
        if stop_reason == "max_iter" and params["tol"] > 0:
            warnings.warn(f"StructuredLogisticRegression stopped at max_iter={params['max_iter']} before the "
                          f"objective's relative decrease fell below tol={params['tol']:g}; raise max_iter (with "
                          f"warm_start=True a fit continues where it stopped)", ConvergenceWarning, stacklevel=2)

        history_frame, trace_frame = history.frame(), state.trace_frame()
        if warm:   # the continued fit's rows after the earlier fit's, its clock after theirs
            history_frame["seconds"] += earlier_history["seconds"].iloc[-1]
            history_frame = pd.concat([earlier_history, history_frame], ignore_index=True)
            trace_frame = pd.concat([earlier_trace, trace_frame.iloc[1:]], ignore_index=True)
        self._commit_fit({
            "n_states_": train.n_labels,
            "classes_": fitted_classes,
            "n_hidden_states_": params["n_hidden_states"],
            "n_node_features_": train.d_node,
            # a continuation on graphs without edges keeps the width the pairwise function was fitted on
            "n_edge_features_": self.n_edge_features_ if warm and not train.has_edges else _edge_width(train),
            "unary_": state.oracles["unary"],
            "pairwise_": state.oracles["pairwise"],
            "_oracle_specs": {name: _oracle_spec(getattr(self, name)) for name in _FACTORS},
            "history_": history_frame,
            "objective_trace_": trace_frame,
            "n_iter_": n_iter,
            "stop_reason_": stop_reason,
            "best_iteration_": None if best is None else kept,
            "_n_states_inferred": inferred,
            "_fitted_pairwise": state.fitted_pairwise,
            "_predictor": predictor,
            "certificate_": state.certificate(stop_reason, n_iter),
            "solver_": solver,
            "_train_messages": state.messages,
            "_train_layout": layout,
            "_resume_iteration": kept,
            "_validation_split": split,
        })
        return self

    def _hold_out(self, n_examples: int, fraction: float, warm: bool,
                  rng: np.random.Generator | None) -> tuple[np.ndarray, np.ndarray]:
        """The examples early stopping trains on and holds out: a continued fit's earlier split
        (on as many examples), else ``ceil(fraction * n_examples)`` drawn from ``rng`` (from
        ``random_state`` when None)."""
        earlier = self._validation_split if warm else None
        if earlier is not None and len(earlier[0]) + len(earlier[1]) == n_examples:
            return earlier
        n_val = math.ceil(fraction * n_examples)
        if n_val >= n_examples:
            raise ValueError(f"validation_fraction={fraction:g} holds out all {n_examples} examples of X for "
                             f"early stopping; lower it, pass X_val and Y_val, or set early_stopping=False")
        rng = check_generator(self.random_state) if rng is None else rng
        order = rng.permutation(n_examples)
        return np.sort(order[n_val:]), np.sort(order[:n_val])

    def predict_marginals(self, X: Sequence, *, method: str = "lp", epsilon: float | None = None,
                          edge_marginals: bool = False, max_sweeps: int = 10_000,
                          tol: float = 1e-9) -> list:
        """Node (and edge) marginals of every example under the learned energy.

        Two kinds, which differ (docs/design.md section 1, "LP marginals are not probabilities of
        labellings"):

        - ``method="lp"`` (any graph): the entropy-smoothed LP's marginals at ``epsilon``, the
          quantities the model was trained with. They are locally consistent (each edge
          marginal sums to its nodes'), but not the marginals of any distribution over
          labellings, even on a chain.
        - ``method="exact"`` (forests, and loopy graphs of small bandwidth such as narrow grids):
          the exact marginals of the CRF ``p(y | x)`` proportional to ``exp(F(x, y) / epsilon)``,
          by sum-product on forests and by elimination over windows of the node order on the
          others (:mod:`slr.inference.banded`); at the fit's ``epsilon`` that is ``exp(g_u + g_p)``.

        Parameters
        ----------
        X : list of (node_features, edges, edge_features)
        method : {"lp", "exact"}, default="lp"
        epsilon : float, optional
            The temperature; the fit's ``epsilon`` when None.
        edge_marginals : bool, default=False
            Also return each example's ``(m, L, L)`` edge marginals.
        max_sweeps : int, default=10000
            Star-update sweeps for ``method="lp"``; a ``ConvergenceWarning`` when they stop first.
        tol : float, default=1e-9
            Convergence tolerance of the sweeps (largest message change).

        Returns
        -------
        list
            Per example its ``(n, L)`` node marginals, or with ``edge_marginals`` a pair
            ``(node_marginals (n, L), edge_marginals (m, L, L))``.

        Raises
        ------
        ValueError
            For bad arguments, or ``method="exact"`` on an example with a cycle whose bandwidth
            is too large for elimination.
        """
        self._check_fitted()
        method = check_option(method, "method", MARGINALS)
        epsilon = self._predictor.scale if epsilon is None else check_epsilon(epsilon, allow_zero=False)
        edge_marginals = check_bool(edge_marginals, "edge_marginals")
        max_sweeps, tol = check_int(max_sweeps, "max_sweeps"), check_real(tol, "tol", 0.0)
        data = self._data(X)
        theta_nodes, theta_edges = _potentials(self._predictor, data, self.unary_, self._fitted_pairwise_function())
        nodes, edges = self._predictor.marginals(data, theta_nodes, theta_edges, epsilon, method,
                                                 max_sweeps=max_sweeps, tol=tol, edge_marginals=edge_marginals)
        per_node = data.split(nodes)
        if not edge_marginals:
            return per_node
        return list(zip(per_node, np.split(edges, data.batch.edge_ptr[1:-1])))

    # ------------------------------------------------------------------------------------
    def _data(self, X: Sequence, Y: Sequence | None = None, name: str = "X") -> FlatData:
        return _checked_data(X, Y, self.n_states_, self._n_states_inferred, self.n_node_features_,
                             self.n_edge_features_, name, n_hidden_states=self.n_hidden_states_)

    def _predict_flat(self, data: FlatData) -> np.ndarray:
        return _map_labels(self._current_predictor(), data, self.unary_, self._fitted_pairwise_function(),
                           self._phase_timer or _untimed, warn=True)

    def _current_predictor(self) -> PairwiseModel:
        """The fit's energy (its ``epsilon``) decoded under the prediction settings as they are now:
        ``set_params(predict_max_sweeps=...)`` after ``fit`` applies to the next ``predict``."""
        names = ("predict_epsilon", "predict_max_sweeps", "n_jobs")
        params = validate_params(self, {name: self._parameter_constraints[name] for name in names},
                                 params={name: getattr(self, name) for name in names})
        return _prediction_model(self._predictor.scale, params, self._predictor.transitions)

    def _fitted_pairwise_function(self) -> LogisticOracle | None:
        """``pairwise_`` if a fit ever fitted it (graphs without edges leave it unfitted), else None."""
        return self.pairwise_ if self._fitted_pairwise else None


def _tol_reached(objectives: Sequence[float], tol: float) -> bool:
    """The stopping rule on R after each iteration (``objectives[t]``: R after iteration t, t >= 0):
    over the last ``w = _TOL_WINDOW`` iterations R fell by less than ``w * tol * max(R_{t-w}, R_t, 1)``.

    R is a sum of per-node losses (and never negative), so the floor of 1, one node's loss, turns the
    relative test into an absolute one where R itself approaches 0. ``tol = 0`` turns the rule off.
    """
    if tol == 0 or len(objectives) <= _TOL_WINDOW:
        return False
    old, new = objectives[-1 - _TOL_WINDOW], objectives[-1]
    return old - new < _TOL_WINDOW * tol * max(old, new, 1.0)


class Iterate:
    """The model after one learning iteration, as a ``callback`` of
    :meth:`StructuredLogisticRegression.fit` sees it.

    It is valid during the call only: the fit goes on from the same state afterwards, and
    :meth:`predict` and :meth:`score` then raise ``RuntimeError``.

    Attributes
    ----------
    iteration : int
        The iteration just run (with ``warm_start``, counting the earlier fits' iterations).
    objective : float
        R after it (``history_["objective"]``).
    penalised : float
        J after it: R plus ``eps`` times the oracles' ridge terms (see ``tol``).
    seconds : float
        Fit time so far, as ``history_["seconds"]``: without monitoring and callbacks.
    train_error, val_error : float
        The iteration's row of ``history_`` (NaN where not measured; with ``monitor="auto"`` the
        kept model's training error is measured after the fit, so a callback sees NaN there).
    """

    def __init__(self, row: dict, state: _Alternation, predictor: PairwiseModel,
                 check_data: Callable[[Sequence, Sequence | None], FlatData], classes: np.ndarray) -> None:
        self.iteration, self.objective, self.seconds = int(row["iteration"]), float(row["objective"]), row["seconds"]
        self.train_error, self.val_error = row["train_error"], row["val_error"]
        self.penalised = float(state.penalised)
        self._live: tuple | None = (state, predictor, check_data)
        self._classes = classes

    def _expire(self) -> None:
        self._live = None

    def _labels(self, X: Sequence, Y: Sequence | None) -> tuple[FlatData, np.ndarray]:
        if self._live is None:
            raise RuntimeError(f"the Iterate of iteration {self.iteration} predicts only during its callback; "
                               f"the fit has moved on")
        state, predictor, check_data = self._live
        data = check_data(X, Y)
        pairwise = state.oracles["pairwise"] if state.fitted_pairwise else None
        return data, _map_labels(predictor, data, state.oracles["unary"], pairwise, state.timed)

    def predict(self, X: Sequence) -> Labellings:
        """MAP labelling of every example of ``X`` under this iteration's functions, as
        :meth:`StructuredLogisticRegression.predict` of a model stopped here gives it.

        Parameters
        ----------
        X : list of (node_features, edges, edge_features)

        Returns
        -------
        Labellings
        """
        data, labels = self._labels(X, None)
        return Labellings([decode_labels(part, self._classes) for part in data.split_labels(labels)])

    def score(self, X: Sequence, Y: Sequence) -> float:
        """Per-node accuracy of :meth:`predict` on ``X``, ``Y`` (fully labelled), as
        :meth:`StructuredLogisticRegression.score` of a model stopped here gives it."""
        data, labels = self._labels(X, Y)
        return float(np.mean(labels[data.visible] == data.labels[data.visible]))


def _iteration_objectives(history: pd.DataFrame, trace: pd.DataFrame) -> list[float]:
    """J after each iteration of an earlier fit (its trace's last row per iteration), for the
    stopping rule of a continued fit; R (``history``) for a model saved before the trace had J."""
    if "penalised" not in trace or trace["penalised"].isna().any():
        return history["objective"].tolist()
    return trace.groupby("iteration", sort=False)["penalised"].last().tolist()


class _Progress:
    """What the learner does after every iteration, whichever solver runs: the ``history_`` row
    (with the errors if ``decode``; the training error at the iterations ``monitor`` selects,
    :class:`_TrainingRows`), the progress line, the user's ``callback`` (an :class:`Iterate`
    from ``iterate(row, state)``; its time left out of ``history_["seconds"]``), early stopping
    (``best``) and the stopping rule on J (``objectives``, continued)."""

    def __init__(self, history: FitHistory, objectives: list[float], decode: Callable | None,
                 monitor: Callable[[int], bool],
                 best: "_BestIteration | None", tol: float, verbose: int,
                 timed: Callable[[str], AbstractContextManager],
                 callback: Callable[["Iterate"], Any] | None = None,
                 iterate: Callable[[dict, "_Alternation"], "Iterate"] | None = None) -> None:
        self.history, self.objectives, self.decode, self.monitor = history, objectives, decode, monitor
        self.best, self.tol, self.verbose, self.timed = best, tol, verbose, timed
        self.callback, self.iterate = callback, iterate

    def after(self, iteration: int, state: _Alternation) -> str | None:
        """Record ``iteration``; why learning stops now (``"early_stopping"``, ``"tol"``) or None."""
        with self.timed("monitor"):
            row = self.history.record(iteration, state.objective, decode=self.decode,
                                      monitor_train=self.monitor(iteration))
        self.objectives.append(state.penalised)
        if self.verbose:
            _print_progress(row, state.trace[-4:] if self.verbose > 1 else ())
        if self.callback is not None:
            with self.timed("callback"), self.history.untimed():
                current = self.iterate(row, state)
                try:
                    self.callback(current)
                finally:
                    current._expire()
        if self.best is not None and self.best.update(iteration, row["val_error"], state):
            return "early_stopping"
        if _tol_reached(self.objectives, self.tol):
            return "tol"
        return None


def _run_alternation(state: _Alternation, progress: _Progress, done: int, max_iter: int) -> tuple[str, int]:
    """Algorithm 1.1's iterations ``done + 1, ..., max_iter`` (or until ``progress`` stops them);
    returns why it stopped and the last iteration run."""
    for iteration in range(done + 1, max_iter + 1):
        state.refresh_targets(iteration)
        state.half_step(iteration, "unary")
        state.half_step(iteration, "pairwise")
        reason = progress.after(iteration, state)
        if reason is not None:
            return reason, iteration
    return "max_iter", max_iter


def _run_joint(state: _Alternation, progress: _Progress, done: int, max_iter: int,
               sample_weight: np.ndarray | None, class_weight: np.ndarray | None) -> tuple[str, int]:
    """The joint solver (:func:`slr._joint.joint_minimise`, L-BFGS over both oracles' parameters,
    the messages eliminated by sweeps), one learner iteration per L-BFGS iteration. A fresh fit's
    first iteration is Algorithm 1.1's first unary fit alone, capped at ``_FIRST_FIT_ITER`` L-BFGS
    iterations (:meth:`_Alternation.node_start`): the model of the nodes alone is a start the
    joint solver needs several times as long to reach from zero (its diagonal preconditioner is
    weaker than the oracle's per-class blocks), while the first pairwise fit and the sweeps of a
    whole first iteration cost more than the joint solver's first steps gain from them (letters:
    docs/design.md, the joint solver). Returns why it stopped and the last iteration run."""
    iteration = done
    if done == 0:   # the unary fit, capped (not in the snapshots of progress)
        iteration = 1
        with _capped_fits(state.oracles, _FIRST_FIT_ITER):
            state.node_start(iteration)
        reason = progress.after(iteration, state)
        if reason is not None or max_iter == 1:
            return reason or "max_iter", iteration
    start, stopped, settled_from = iteration, [], []

    def callback(k: int, messages: np.ndarray, objective: float, penalised: float,
                 potentials: tuple[np.ndarray, np.ndarray] | None = None) -> bool:
        state.adopt(start + k, messages, objective, penalised, potentials)
        if start + k >= max_iter:   # the cap's iteration: its row gets the fitted model's R, after settling
            settled_from.append(messages.copy())
            state.settle(start + k)
        reason = progress.after(start + k, state)
        if reason is not None:
            stopped.append(reason)
        return reason is not None

    with state.timed("joint solver"):
        result = joint_minimise(state.train, state.epsilon, state.oracles["unary"], state.oracles["pairwise"],
                                state.messages, max_iter=max_iter - start, tol=_JOINT_GRADIENT_TOL, warm_sweeps=0,
                                max_sweeps=state.max_sweeps, sweep_tol=_JOINT_SWEEP_TOL, n_jobs=state.threads,
                                callback=callback, callback_potentials=progress.decode is not None,
                                sample_weight=sample_weight, class_weight=class_weight,
                                transitions=state.transitions)
    if not (state.settled and np.array_equal(result.messages, settled_from[-1])):   # not the settled iterate
        state.messages[...] = result.messages
        state.settled = False
    state.fitted_pairwise = state.fitted_pairwise or state.train.has_edges
    if not result.n_iter:   # no iterate taken in: the solver's start (committed, its messages swept) settled
        state.settle(start)
    n_iter = start + result.n_iter
    if stopped:
        return stopped[0], n_iter
    # on its own the solver stops only at its gradient test or where float64 allows no more progress
    return ("max_iter" if n_iter >= max_iter else "converged"), n_iter


@contextmanager
def _capped_fits(oracles: dict[str, Any], max_iter: int) -> Iterator[None]:
    """Inside the block, oracles linear in their parameters fit with at most ``max_iter`` iterations of
    their solver (:meth:`slr.oracles.linear_protocol.LinearInParameters.capped_fits`)."""
    with ExitStack() as stack:
        for oracle in oracles.values():
            if is_linear_in_parameters(oracle):
                stack.enter_context(oracle.capped_fits(max_iter))
        yield


def _choose_solver(solver: str, unary: Any, pairwise: Any, train: FlatData, max_sweeps: int) -> str:
    """``"alternation"`` or ``"joint"`` for the ``solver`` parameter; ``"joint"`` refused (naming
    ``solver``) where it does not apply, ``"auto"`` taking it wherever it does."""
    if solver == "alternation":
        return solver
    if not (supports(unary) and supports(pairwise)):
        reason = (f"needs oracles linear in their parameters with a ridge (Linear without l1, Constant, Zero: "
                  f"slr.oracles.linear_protocol.LinearInParameters), got "
                  f"unary={type(unary).__name__}, pairwise={type(pairwise).__name__}")
    elif train.unlabelled.any():
        reason = "does not learn latent labels: Y has unlabelled nodes (label -1)"
    elif train.allowed_states is not None:
        reason = "does not model hidden states (n_hidden_states > 0)"
    elif max_sweeps == 0:
        reason = "eliminates the messages by sweeps: max_sweeps must be at least 1"
    else:
        return "joint"
    if solver == "joint":
        raise ValueError(f"solver='joint' {reason}; use solver='alternation' or 'auto'")
    return "alternation"


# early stopping also ends a plateau at the lowest validation error once it has lasted this many
# times n_iter_no_change iterations (counted from the iteration that first reached that error)
_PLATEAU_FACTOR = 4


class _BestIteration:
    """Early stopping's bookkeeping: the last iteration with the lowest validation error so far, a
    snapshot of the model then, and the iteration that first reached that error (``reached``)."""

    def __init__(self, patience: int) -> None:
        self.patience = patience
        self.error, self.iteration, self.reached, self.snapshot = math.inf, 0, 0, None

    def update(self, iteration: int, error: float, state: _Alternation) -> bool:
        """Record ``iteration``'s validation error; True once ``patience`` iterations have passed
        above the lowest, or ``_PLATEAU_FACTOR * patience`` since the lowest was first reached."""
        if error < self.error:
            self.reached = iteration
        if error <= self.error:
            self.error, self.iteration, self.snapshot = error, iteration, state.snapshot()
        return (iteration - self.iteration >= self.patience
                or iteration - self.reached >= _PLATEAU_FACTOR * self.patience)


def _early_stopping(setting: str | bool, has_val: bool, oracles: tuple[Any, Any], n_examples: int,
                    fraction: float) -> bool:
    """Whether a fit stops early: ``early_stopping`` itself, or for ``"auto"``: with validation data,
    or when an oracle asks for it (its tags' ``validation_stopping``) and ``X`` has
    ``_AUTO_HOLD_OUT_MIN`` examples or more, at least one left to train on."""
    if setting != "auto":
        return setting
    if has_val:
        return True
    asked = any(get_oracle_tags(oracle).validation_stopping for oracle in oracles)
    return asked and n_examples >= _AUTO_HOLD_OUT_MIN and math.ceil(fraction * n_examples) < n_examples


def _print_progress(row: dict, half_steps: Sequence[tuple[int, str, float]]) -> None:
    """One line per iteration (``verbose=1``), with R after each half step (``verbose=2``)."""
    steps = "".join(f"  {stage} {value:.6g}" for _, stage, value, _ in half_steps)
    print(f"[StructuredLogisticRegression] iteration {row['iteration']:4d}  R {row['objective']:.6g}  "
          f"train error {row['train_error']:.4f}  {row['seconds']:.2f}s{steps}", file=sys.stderr)
