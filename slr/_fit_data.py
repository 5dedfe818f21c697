"""The data side of the fit loop: what Algorithm 1.1 asks of the training data, and its local form.

The loop (:class:`slr._alternation.Alternation`, :mod:`slr._solvers`) keeps the functions, R's parts,
the trace and the stopping bookkeeping; everything that reads the training examples goes through
a :class:`FitData`: fit an oracle for a factor type on its problem at the current messages, compute
potentials, run sweeps, return R's node and edge parts, update the soft targets, snapshot and
restore, decode. Two implementations: :class:`LocalData` (this module: the examples in memory,
dense or sparse features) and :class:`slr.distributed._sharded_data.ShardedData` (the examples
in partitions on Dask workers).
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Callable, Protocol

import numpy as np

from slr.certificate import FitCertificate, certify
from slr.data import FlatData
from slr.hidden import state_offset
from slr.inference.batch import BatchSweepResult, batch_sweeps
from slr.latent import LatentTargets
from slr.models import PairwiseModel, hamming_margin
from slr.oracles.base import OracleTags
from slr.oracles.pair_bias import PairBias
from slr.reduction import SWEEP_TOL, SplitObjective, node_message_sums, pairwise_bias
from slr.transitions import FORBIDDEN_UNITS, Transitions, add_edge_offset

__all__ = ["FitData", "LocalData"]


class FitData(Protocol):
    """The training data of one fit with their share of Algorithm 1.1's state (messages, potentials,
    soft targets), as the fit loop uses them."""

    has_edges: bool
    has_targets: bool

    @property
    def messages(self) -> np.ndarray | None:
        """The messages, where these data hold them in this process."""

    def start(self, oracles: dict[str, Any], resume: tuple[Any, bool] | None) -> None:
        """Set the starting potentials: zero, or those of the fitted ``oracles`` of a continued fit
        (``resume``: the earlier fit's messages if they fit these data, and whether it fitted the
        pairwise function)."""

    def started(self) -> None:
        """After R at the start is known."""

    def fit(self, factor: str, oracle: Any, tags: OracleTags) -> None:
        """Fit ``oracle`` to ``factor``'s logistic problem at the current messages."""

    def unchecked_fit(self, oracle: Any) -> bool:
        """Whether a fit of ``oracle`` here may raise J (the loop then keeps the earlier function)."""

    def set_potentials(self, factor: str, oracle: Any, tags: OracleTags, exact: bool) -> None:
        """The potentials of ``oracle`` for ``factor``; ``exact``: it is the fitted function."""

    def sweeps(self, n: int) -> BatchSweepResult:
        """Up to ``n`` kernel sweeps from the current messages."""

    def objective_parts(self, nodes: bool, edges: bool) -> tuple[float | None, float | None]:
        """R's node and edge parts at the current potentials and messages (None where not asked)."""

    def update_targets(self) -> None:
        """The CCCP update of the soft targets at the current potentials."""

    def snapshot(self) -> Any:
        """The data's state, for :meth:`restore`."""

    def restore(self, snapshot: Any) -> None:
        """Go back to a :meth:`snapshot`."""

    def holds(self, data: Any) -> bool:
        """Whether ``data`` are these training data (decoded from the potentials at hand)."""

    def decode(self, predictor: PairwiseModel, messages: np.ndarray | None = None) -> np.ndarray:
        """MAP labels of the training nodes under the current potentials; ``messages``: the LP's
        warm start, updated in place (:meth:`slr.models.PairwiseModel.decode`)."""

    def decodes_in_one_pass(self, predictor: PairwiseModel) -> bool:
        """Whether decoding the training data costs one pass (the monitor's schedule)."""

    def iteration_done(self, iteration: int, oracles: dict[str, Any], fitted_pairwise: bool) -> None:
        """After an iteration's row of ``history_`` is recorded."""

    def certificate(self, objective: float, last_sweep: BatchSweepResult | None, stop_reason: str,
                    n_iter: int) -> FitCertificate | None:
        """What the fit proves on these data, or None where it cannot be computed."""

    def fitted_attributes(self) -> dict[str, Any]:
        """Fitted attributes of the learner that these data add."""


class LocalData:
    """The training examples in memory (:class:`slr.data.FlatData`, dense or sparse features) with
    their messages, potentials and soft targets.

    Parameters
    ----------
    train : FlatData
        The training data, with labels.
    epsilon : float
    max_sweeps : int
        Sweeps of the soft targets' updates.
    threads : int
        OpenMP threads of the sweeps and of R.
    timed : callable
        ``timed(phase)``, a context manager around each phase (the profiling hook).
    sample_weight : ndarray of shape (B,), optional
        Per-example weights: each example's terms of R, and its node and edge rows in the
        oracle fits, are weighted.
    class_weight : ndarray of shape (L,), optional
        Per-label weights of the Hamming margin, ``Delta_i(a) = cw[y_i] [a != y_i]``.
    latent_start : ndarray of shape (n_nodes, L), optional
        The first node targets with unlabelled nodes (:func:`slr.latent.initial_node_targets`);
        None: uniform, and updated at the starting potentials before the first fit.
    transitions : Transitions, optional
        Allowed transitions (:mod:`slr.transitions`): every forbidden pair's edge potential and every
        forbidden end state's node potential ``FORBIDDEN_UNITS * eps`` below, a fixed part of the
        potentials and of the oracles' biases (whose softmax then gives them weight 0).
    allowed : ndarray of bool of shape (n_nodes, L), optional
        The states each node may take (hidden states, the transitions' end states), for the soft targets.
    """

    def __init__(self, train: FlatData, epsilon: float, max_sweeps: int, threads: int,
                 timed: Callable[[str], AbstractContextManager], *, sample_weight: np.ndarray | None = None,
                 class_weight: np.ndarray | None = None, latent_start: np.ndarray | None = None,
                 transitions: Transitions | None = None, allowed: np.ndarray | None = None) -> None:
        self.train, self.epsilon, self.max_sweeps, self.threads, self.timed = train, epsilon, max_sweeps, threads, timed
        self.has_edges = train.has_edges
        batch, L = train.batch, train.n_states
        self.energy = PairwiseModel(epsilon)
        labels = train.labels
        assert labels is not None   # training data: labelled
        self.labels = labels
        self.delta = hamming_margin(labels, L, class_weight)
        # hidden states: the states a node may not take sit far below in every potential and bias
        self.offset = 0.0 if train.allowed_states is None else state_offset(train.allowed_states, epsilon)
        self.edge_offset, self.transitions = None, transitions
        if transitions is not None:
            self.offset = self.offset + transitions.node_offset(batch, FORBIDDEN_UNITS * epsilon)
            self.edge_offset = transitions.edge_offset(FORBIDDEN_UNITS * epsilon)
        self.delta = self.delta + self.offset
        self.sample_weight = sample_weight
        self.node_weights = None if sample_weight is None else sample_weight[batch.node_example]
        self.edge_weights = None if sample_weight is None else sample_weight[batch.edge_example]
        self.latent = (LatentTargets(train, epsilon, max_sweeps, SWEEP_TOL, threads, initial=latent_start,
                                     allowed=allowed, pairs=None if transitions is None else transitions.pairs)
                       if train.unlabelled.any() else None)
        self.has_targets = self.latent is not None
        self.pair_labels = train.pair_labels if self.latent is None else None
        self.messages = np.zeros((batch.n_edges, 2, L))
        self.unary_potentials = np.zeros((batch.n_nodes, L))   # g_u = 0 before the first fit

    def start(self, oracles: dict[str, Any], resume: tuple[np.ndarray | None, bool] | None) -> None:
        fitted_pairwise = False
        if resume is not None:   # fitted functions, and the messages if they fit this data
            messages, fitted_pairwise = resume
            self.messages = self.messages if messages is None else messages
            self.unary_potentials = self.energy.unary_potentials(self.train, oracles["unary"])
        self.theta_nodes = self.unary_potentials + self.delta
        self.theta_edges = self._excluded(self.energy.pairwise_potentials(
            self.train, oracles["pairwise"] if fitted_pairwise else None))
        if self.latent is not None and self.latent.fresh:
            self.latent.update(self.theta_nodes, self.theta_edges)
        self._split = SplitObjective(self.train.batch, self.labels, self.epsilon, self.threads,
                                     check_input=False, sample_weight=self.sample_weight, targets=self.latent)

    def started(self) -> None:
        pass

    # ------------------------------------------------------------------ a half step's parts
    def fit(self, factor: str, oracle: Any, tags: OracleTags) -> None:
        with self.timed(f"{factor} bias"):
            bias = self._bias(factor, tags)
        targets, weights = self._fit_targets(factor)
        extra = {} if weights is None else {"sample_weight": weights}
        with self.timed(f"{factor} fit"):
            features = self.train.node_features if factor == "unary" else self.train.edge_features
            oracle.fit(features, bias, targets, **extra)

    def unchecked_fit(self, oracle: Any) -> bool:
        return False   # the oracles keep their promise on local data

    def _fit_targets(self, factor: str) -> tuple[np.ndarray, np.ndarray | None]:
        """What ``factor``'s oracle fits: its labels (soft targets with unlabelled nodes) and row weights."""
        if factor == "unary":
            return (self.labels if self.latent is None else self.latent.nodes), self.node_weights
        if self.latent is not None:
            return self.latent.edges, self.edge_weights
        assert self.pair_labels is not None   # kept whenever there are no soft targets
        return self.pair_labels, self.edge_weights

    def _bias(self, factor: str, tags: OracleTags) -> np.ndarray | PairBias:
        if factor == "unary":   # unary_bias with the margin at hand (class weights, unlabelled nodes)
            return (self.delta - node_message_sums(self.train.batch, self.messages)) / self.epsilon
        return pairwise_bias(self.messages, self.epsilon, factored=tags.factored_pair_bias, offset=self.edge_offset)

    def set_potentials(self, factor: str, oracle: Any, tags: OracleTags, exact: bool) -> None:
        scores = oracle.training_scores_ if exact and tags.training_scores else None
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

    def sweeps(self, n: int) -> BatchSweepResult:
        with self.timed("message passing"):
            return batch_sweeps(self.train.batch, self.theta_nodes, self.theta_edges, self.epsilon,
                                max_sweeps=n, tol=SWEEP_TOL, n_jobs=self.threads, out=self.messages,
                                check_input=False)

    def objective_parts(self, nodes: bool, edges: bool) -> tuple[float | None, float | None]:
        return (self._split.nodes(self.theta_nodes, self.messages) if nodes else None,
                self._split.edges(self.theta_edges, self.messages) if edges else None)

    def update_targets(self) -> None:
        assert self.latent is not None   # the loop updates targets only where there are some (has_targets)
        self.latent.update(self.theta_nodes, self.theta_edges)

    # ------------------------------------------------------------------ the joint solver's iterates
    def adopt(self, messages: np.ndarray, potentials: tuple[np.ndarray, np.ndarray] | None,
              fitted_pairwise: bool) -> None:
        """An iterate of the joint solver: its messages, and its potentials ``(eps g_u, eps g_p)`` if given."""
        self.messages[...] = messages
        if potentials is not None:
            self.unary_potentials, theta_edges = potentials
            self.theta_nodes = self.unary_potentials + self.delta
            if fitted_pairwise:
                self.theta_edges = theta_edges

    # ------------------------------------------------------------------ early stopping, monitoring
    def snapshot(self) -> dict[str, np.ndarray]:
        return {"messages": self.messages.copy(), "unary_potentials": self.unary_potentials,
                "theta_nodes": self.theta_nodes, "theta_edges": self.theta_edges}

    def restore(self, snapshot: dict[str, np.ndarray]) -> None:
        self.messages[...] = snapshot["messages"]
        self.unary_potentials, self.theta_nodes = snapshot["unary_potentials"], snapshot["theta_nodes"]
        self.theta_edges = snapshot["theta_edges"]

    def holds(self, data: Any) -> bool:
        return data is self.train

    def decode(self, predictor: PairwiseModel, messages: np.ndarray | None = None) -> np.ndarray:
        return predictor.decode(self.train, self.unary_potentials + self.offset, self.theta_edges, messages=messages)

    def decodes_in_one_pass(self, predictor: PairwiseModel) -> bool:
        return predictor.method(self.train) != "lp"

    def iteration_done(self, iteration: int, oracles: dict[str, Any], fitted_pairwise: bool) -> None:
        pass

    def certificate(self, objective: float, last_sweep: BatchSweepResult | None, stop_reason: str,
                    n_iter: int) -> FitCertificate | None:
        """Theorem 1.1's bounds and the message passing's state at the current potentials; None with
        unlabelled nodes (the theorem bounds the loss of labelled examples). The bounds are on the
        unweighted losses, so with sample weights they hold the unweighted R."""
        if self.latent is not None:
            return None
        if self.node_weights is not None:
            unweighted = SplitObjective(self.train.batch, self.labels, self.epsilon, self.threads, False)
            objective = (unweighted.nodes(self.theta_nodes, self.messages)
                         + unweighted.edges(self.theta_edges, self.messages))
        with self.timed("certificate"):
            return certify(self.train, self.theta_nodes, self.theta_edges, self.messages, self.epsilon,
                           objective, last_sweep.n_sweeps if last_sweep else np.zeros(0, dtype=np.int32),
                           last_sweep.converged if last_sweep else np.ones(0, dtype=bool),
                           max_sweeps=self.max_sweeps, tol=SWEEP_TOL, n_jobs=self.threads,
                           stop_reason=stop_reason, n_iter=n_iter)

    def fitted_attributes(self) -> dict[str, Any]:
        return {}
