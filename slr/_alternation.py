"""One fit's state of Algorithm 1.1 and its half steps, on any :class:`slr._fit_data.FitData`.

With exact oracles neither an oracle fit nor the sweeps after it increase

    R = sum_k [ -F(x^k, y^k) + A(lambda^k, theta^k) ]

(:mod:`slr.reduction`); the shipped inexact oracles (SGD, boosting) keep that promise themselves: a fit
never ends above the loss of the function it replaces (docs/design.md section 1).
"""
from __future__ import annotations

import copy
from contextlib import AbstractContextManager
from typing import Any, Callable

import numpy as np
import pandas as pd

from slr._fit_data import FitData, LocalData
from slr._prediction import map_labels
from slr._relaxation import linear_parameters, relaxed_step
from slr._setup import FACTORS
from slr.certificate import FitCertificate
from slr.inference.batch import BatchSweepResult
from slr.models import PairwiseModel
from slr.oracles.base import OracleTags, get_oracle_tags

__all__ = ["TRACE_COLUMNS", "Alternation"]

#: Columns of ``objective_trace_``.
TRACE_COLUMNS = ["iteration", "stage", "objective", "penalised"]

# with sweep_tol > 0 the sweeps of a half step run in chunks of a forward and a backward sweep,
# R evaluated after each
_SWEEP_CHUNK = 2

#: Data sets whose last decode's messages are kept for warm starts: the training and validation
#: data and a callback's one or two; the least recently decoded goes first.
_KEPT_DECODES = 4


class Alternation:
    """One fit's state of Algorithm 1.1 and its half steps.

    The state: the functions (the oracles), R's node and edge parts at the current potentials and
    messages (which ``data`` hold), and the trace of R and J after every half step. A half step
    (:meth:`half_step`) fits one factor type's function for the current messages (oracle fit, the
    safeguarded over-relaxed step, potentials, R) and then runs the sweeps on every example.

    Parameters
    ----------
    data : FitData
        The training data with their messages and potentials.
    oracles : dict
        ``{"unary": oracle, "pairwise": oracle}``, fitted in place.
    epsilon : float
    max_sweeps : int
        Kernel sweeps per half step.
    relaxation : float
        Over-relaxation ``omega`` of oracles linear in their parameters.
    timed : callable
        ``timed(phase)``, a context manager around each phase (the profiling hook).
    resume : (messages or None, fitted_pairwise), optional
        Continue a fit (``warm_start``): the oracles are fitted already (the pairwise one if
        ``fitted_pairwise``), and ``messages`` of these data are kept (zeros when None).
    sweep_tol : float, default=0
        0: every half step runs ``max_sweeps`` sweeps (an example stops when its messages
        settle). Positive: the sweeps run in pairs and stop once a pair lowers R by no more
        than ``sweep_tol`` times what the half step (its fit and earlier sweeps) had gained.
    latent_iter : int
        With soft targets (unlabelled nodes): learning iterations between CCCP target updates
        (:mod:`slr.latent`).
    """

    def __init__(self, data: FitData, oracles: dict[str, Any], epsilon: float, max_sweeps: int,
                 relaxation: float, timed: Callable[[str], AbstractContextManager], *,
                 resume: tuple[Any, bool] | None = None, sweep_tol: float = 0.0, latent_iter: int = 1) -> None:
        self.data, self.oracles = data, oracles
        self.tags: dict[str, OracleTags] = {factor: get_oracle_tags(oracles[factor]) for factor in FACTORS}
        self.epsilon, self.max_sweeps, self.sweep_tol = epsilon, max_sweeps, sweep_tol
        self.relaxation, self.timed = relaxation, timed
        self.latent_iter, self._iterations_on_targets = latent_iter, 0
        self.fitted_pairwise = False if resume is None else resume[1]
        self.last_sweep: BatchSweepResult | None = None
        self.penalties = dict.fromkeys(FACTORS, 0.0)   # eps * each oracle's penalty (tags' penalty)
        self.joint_steps = 0   # iterates of the joint solver taken in (adopt)
        self.settled = False   # whether settle ran after the last of them (and no restore since)
        data.start(oracles, resume)
        self.node_part = self.edge_part = 0.0
        self._restored: tuple[float, float] | None = None   # R and J of a restored snapshot
        if resume is not None:
            for factor in FACTORS:
                self.penalties[factor] = self._penalty(factor)
        self.trace: list[tuple[int, str, float, float]] = []
        # the max-product messages of the last decode of each data set (warm_start)
        self._decoded: list[tuple[Any, np.ndarray]] = []
        self._record(0, "start", self._objective())
        data.started()

    @property
    def objective(self) -> float:
        """R at the current functions and messages."""
        return self.trace[-1][2] if self._restored is None else self._restored[0]

    @property
    def penalised(self) -> float:
        """``J = R + eps * (penalty_u + penalty_p)``, what exact fits never raise (R for oracles
        without a penalty: the tags' ``penalty``)."""
        return self.trace[-1][3] if self._restored is None else self._restored[1]

    @property
    def messages(self) -> np.ndarray | None:
        """The messages, where the data hold them in this process."""
        return self.data.messages

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
        """Before ``iteration``'s half steps, with soft targets: every ``latent_iter`` iterations,
        the CCCP update of the targets (a trace row ``"targets"``; R does not rise)."""
        if not self.data.has_targets:
            return
        if self._iterations_on_targets == self.latent_iter:
            with self.timed("targets"):
                self.data.update_targets()
            self._iterations_on_targets = 0
            self._record(iteration, "targets", self._objective())
        self._iterations_on_targets += 1

    def half_step(self, iteration: int, factor: str) -> None:
        """Fit ``factor``'s function (``"unary"`` or ``"pairwise"``) for the current messages,
        then sweep; R and J after each part go to the trace."""
        start = self.penalised
        if factor == "pairwise" and not self.data.has_edges:
            self._record(iteration, "pairwise_fit", self._objective())   # nothing to fit
        else:
            self._fit(factor)
            self._record(iteration, f"{factor}_fit", self.node_part + self.edge_part)
        self._record(iteration, f"{factor}_mp", self._sweep(start))

    def _fit(self, factor: str) -> float:
        """The oracle fit of one half step, over-relaxed where that lowers J; returns J. A fit the
        data cannot hold to its promise (:meth:`FitData.unchecked_fit`) is kept only if it does not
        raise J."""
        oracle, names = self.oracles[factor], self.tags[factor].linear_parameters
        before = linear_parameters(oracle, names) if self.relaxation != 1.0 else None
        checked = self.data.unchecked_fit(oracle)
        previous = ((copy.deepcopy(oracle), self.data.snapshot(), self.fitted_pairwise, self.node_part,
                     self.edge_part) if checked else None)
        self.data.fit(factor, oracle, self.tags[factor])
        if factor == "pairwise":
            self.fitted_pairwise = True
        value = relaxed_step(oracle, names, before, self.relaxation,
                             lambda exact: self._set_potentials(factor, exact),
                             lambda: self._fitted_objective(factor), self.penalised)
        if previous is not None and not value <= self.penalised:   # the previous function (and its potentials) stay
            self.oracles[factor], snapshot, self.fitted_pairwise, self.node_part, self.edge_part = previous
            self.data.restore(snapshot)
            value = self.penalised
        return value

    def _fitted_objective(self, factor: str) -> float:
        """J after a fit of ``factor``'s oracle: the part of R it changed, and its penalty."""
        R = self._objective(nodes=factor == "unary", edges=factor == "pairwise")
        self.penalties[factor] = self._penalty(factor)
        return R + self._penalty_total()

    def _set_potentials(self, factor: str, exact: bool) -> None:
        """Potentials of ``factor``'s current function; ``exact``: the oracle's fitted function,
        whose training scores it may keep (``training_scores`` tag)."""
        self.data.set_potentials(factor, self.oracles[factor], self.tags[factor], exact)

    def _sweep(self, start: float) -> float:
        """The half step's sweeps (``start``: J before its fit); returns R after them."""
        if self.sweep_tol == 0 or self.max_sweeps == 0:
            self.last_sweep = self.data.sweeps(self.max_sweeps)
            return self._objective()
        value = self.objective
        n_sweeps: np.ndarray | None = None
        for done in range(0, self.max_sweeps, _SWEEP_CHUNK):
            run = self.data.sweeps(min(_SWEEP_CHUNK, self.max_sweeps - done))
            n_sweeps = run.n_sweeps if n_sweeps is None else n_sweeps + run.n_sweeps
            gained, previous = start - (value + self._penalty_total()), value
            value = self._objective()
            if run.converged.all() or previous - value <= self.sweep_tol * max(gained, 0.0):
                break
        assert n_sweeps is not None   # max_sweeps > 0: at least one chunk ran
        self.last_sweep = BatchSweepResult(self.messages, n_sweeps, run.converged)
        return value

    def _objective(self, nodes: bool = True, edges: bool = True) -> float:
        """R, recomputing the parts whose inputs changed since the last call."""
        with self.timed("objective R"):
            node_part, edge_part = self.data.objective_parts(nodes, edges)   # None: not asked for
            if node_part is not None:
                self.node_part = node_part
            if edge_part is not None:
                self.edge_part = edge_part
            return self.node_part + self.edge_part

    # ------------------------------------------------------------------ the joint solver's iterates
    def adopt(self, iteration: int, messages: np.ndarray, objective: float, penalised: float,
              potentials: tuple[np.ndarray, np.ndarray] | None) -> None:
        """An iterate of the joint solver (:mod:`slr._joint`) as the current state: the oracles hold
        its functions already; ``messages``, R and J (the solver's) go to the state and the trace
        (stage ``"joint"``). ``potentials``: the solver's ``(eps g_u, eps g_p)`` at the iterate, taken
        as the state's potentials (for monitoring and snapshots; :meth:`settle` sets the kept
        functions' own), or None to leave them."""
        assert isinstance(self.data, LocalData)   # the joint solver runs on local data (choose_solver)
        self.fitted_pairwise = self.fitted_pairwise or self.data.has_edges
        self.data.adopt(messages, potentials, self.fitted_pairwise)
        self.joint_steps += 1
        self.settled = False
        self._restored = None
        self.trace.append((iteration, "joint", objective, penalised))

    def node_start(self, iteration: int) -> None:
        """The joint solver's start: the unary function fitted at the current messages (zero in a
        fresh fit: the model of the nodes alone), without sweeps (the joint solver's first
        evaluation sweeps from there); R and J after it go to the trace (stage ``"unary_fit"``)."""
        self._fit("unary")
        self._record(iteration, "unary_fit", self.node_part + self.edge_part)

    def settle(self, iteration: int) -> None:
        """After the joint solver: the potentials of the functions kept, up to ``max_sweeps`` sweeps
        (each example until its messages settle) and R from scratch (a trace row ``"joint_mp"``), so
        that the certificate and the messages kept for ``warm_start`` belong to that model."""
        self._set_potentials("unary", False)
        if self.fitted_pairwise:
            self._set_potentials("pairwise", False)
        for factor in FACTORS:
            self.penalties[factor] = self._penalty(factor)
        self._restored = None
        self.last_sweep = self.data.sweeps(self.max_sweeps)
        self._record(iteration, "joint_mp", self._objective())
        self.settled = True

    # ------------------------------------------------------------------ early stopping, monitoring, the end
    def snapshot(self) -> dict[str, Any]:
        """The current model and messages (copies), for :meth:`restore`."""
        return {"oracles": copy.deepcopy(self.oracles), "data": self.data.snapshot(),
                "node_part": self.node_part, "edge_part": self.edge_part,
                "fitted_pairwise": self.fitted_pairwise, "last_sweep": self.last_sweep,
                "penalties": dict(self.penalties), "trace": len(self.trace)}

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Go back to a :meth:`snapshot`; the trace keeps its later rows (it records the fit as run),
        but :attr:`objective` and :attr:`penalised` are the snapshot's R and J again."""
        self.oracles.update(snapshot["oracles"])
        self.data.restore(snapshot["data"])
        for name in ("node_part", "edge_part", "fitted_pairwise", "last_sweep", "penalties"):
            setattr(self, name, snapshot[name])
        self._restored = self.trace[snapshot["trace"] - 1][2:4]
        self.settled = False

    def map_labels(self, predictor: PairwiseModel, data: Any) -> np.ndarray:
        """MAP labels of ``data`` under the current functions, by ``predictor``'s inference; on the
        training data from the potentials at hand; the LP's sweeps warm-started
        (:meth:`warm_start`)."""
        training = self.data.holds(data)
        messages = self.warm_start(predictor, data, data)
        with self.timed("train" if training else "validation"):
            if not training:
                return map_labels(predictor, data, self.oracles["unary"], self.current_pairwise(), self.timed,
                                  messages=messages)
            with self.timed("predict: MAP"):
                return self.data.decode(predictor, messages)

    def warm_start(self, predictor: PairwiseModel, data: Any, source: Any) -> np.ndarray | None:
        """The messages to decode ``data`` (checked from the object ``source``) from by the LP's
        max-product sweeps, updated in place by the decode: those the last decode from ``source``
        ended with if they fit ``data``, else zeros; None where ``predictor`` decodes ``data``
        without those sweeps. The messages of the ``_KEPT_DECODES`` most recently decoded sources
        are kept (a callback that builds its ``X`` anew each iteration adds no memory).

        The functions move little from one iteration to the next, so the sweeps start near their
        fixed point; the labels are those of a decode from zero messages wherever the LP
        certifies them, up to ties between labellings of the same score.
        """
        if predictor.epsilon > 0 or predictor.method(data) != "lp":
            return None
        shape = (data.batch.n_edges, 2, data.n_states)
        for k, (decoded, messages) in enumerate(self._decoded):
            if decoded is source:
                del self._decoded[k]
                if messages.shape == shape:   # any messages are a start; these fit the data's edges
                    self._decoded.append((source, messages))
                    return messages
                break
        messages = np.zeros(shape)
        self._decoded = self._decoded[-(_KEPT_DECODES - 1):] + [(source, messages)]
        return messages

    def current_pairwise(self) -> Any | None:
        """The pairwise function if it was fitted, else None (no pairwise term)."""
        return self.oracles["pairwise"] if self.fitted_pairwise else None

    def certificate(self, stop_reason: str, n_iter: int) -> FitCertificate | None:
        """Theorem 1.1's bounds and the message passing's state at the current functions
        (:meth:`FitData.certificate`), with why and after how many iterations the fit stopped."""
        return self.data.certificate(self.objective, self.last_sweep, stop_reason, n_iter)
