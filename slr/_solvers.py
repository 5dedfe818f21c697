"""The two solvers of the learner's objective J on local or sharded data: Algorithm 1.1's
alternation (:func:`run_alternation`) and the joint solver over both functions' parameters
(:func:`run_joint`, :mod:`slr._joint`), and the choice between them (:func:`choose_solver`)."""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import Any, Iterator

import numpy as np

from slr._alternation import Alternation
from slr._fit_data import LocalData
from slr._joint import joint_minimise, supports
from slr._progress import Progress
from slr.data import FlatData
from slr.oracles.linear_protocol import is_linear_in_parameters

__all__ = ["SOLVERS", "capped_fits", "choose_solver", "run_alternation", "run_joint"]

#: The values of ``solver``.
SOLVERS = ("auto", "alternation", "joint")

# the joint solver's sweeps per evaluation follow progress (slr._joint's sweep_tol), up to max_sweeps
_JOINT_SWEEP_TOL = 0.25

# L-BFGS iterations of the unary Linear fit that is the joint solver's first iteration (the model of
# the nodes alone, which the joint solver refines with the pairwise function): a start, not a solution
FIRST_FIT_ITER = 20

# the joint solver's own stopping test, on its scaled gradient (slr._joint); far below what the
# stopping rule on J needs, so that the rule (or max_iter) ends a fit
_JOINT_GRADIENT_TOL = 1e-10


def run_alternation(state: Alternation, progress: Progress, done: int, max_iter: int) -> tuple[str, int]:
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


def run_joint(state: Alternation, progress: Progress, done: int, max_iter: int,
              class_weight: np.ndarray | None) -> tuple[str, int]:
    """The joint solver (:func:`slr._joint.joint_minimise`, L-BFGS over both oracles' parameters,
    the messages eliminated by sweeps), one learner iteration per L-BFGS iteration. A fresh fit's
    first iteration is Algorithm 1.1's first unary fit alone, capped at ``FIRST_FIT_ITER`` L-BFGS
    iterations (:meth:`Alternation.node_start`): the model of the nodes alone is a start the
    joint solver needs several times as long to reach from zero (its diagonal preconditioner is
    weaker than the oracle's per-class blocks), while the first pairwise fit and the sweeps of a
    whole first iteration cost more than the joint solver's first steps gain from them (letters:
    docs/design.md, the joint solver). The data are local (:class:`slr._fit_data.LocalData`).
    Returns why it stopped and the last iteration run."""
    data = state.data
    assert isinstance(data, LocalData)   # choose_solver picks the joint solver for data in this process only
    iteration = done
    if done == 0:   # the unary fit, capped (not in the snapshots of progress)
        iteration = 1
        with capped_fits(state.oracles, FIRST_FIT_ITER):
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
        result = joint_minimise(data.train, state.epsilon, state.oracles["unary"], state.oracles["pairwise"],
                                state.messages, max_iter=max_iter - start, tol=_JOINT_GRADIENT_TOL, warm_sweeps=0,
                                max_sweeps=state.max_sweeps, sweep_tol=_JOINT_SWEEP_TOL, n_jobs=data.threads,
                                callback=callback, callback_potentials=progress.decode is not None,
                                sample_weight=data.sample_weight, class_weight=class_weight,
                                transitions=data.transitions)
    if not (state.settled and np.array_equal(result.messages, settled_from[-1])):   # not the settled iterate
        data.messages[...] = result.messages
        state.settled = False
    state.fitted_pairwise = state.fitted_pairwise or data.has_edges
    if not result.n_iter:   # no iterate taken in: the solver's start (committed, its messages swept) settled
        state.settle(start)
    n_iter = start + result.n_iter
    if stopped:
        return stopped[0], n_iter
    # on its own the solver stops only at its gradient test or where float64 allows no more progress
    return ("max_iter" if n_iter >= max_iter else "converged"), n_iter


@contextmanager
def capped_fits(oracles: dict[str, Any], max_iter: int) -> Iterator[None]:
    """Inside the block, oracles linear in their parameters fit with at most ``max_iter`` iterations of
    their solver (:meth:`slr.oracles.linear_protocol.LinearInParameters.capped_fits`)."""
    with ExitStack() as stack:
        for oracle in oracles.values():
            if is_linear_in_parameters(oracle):
                stack.enter_context(oracle.capped_fits(max_iter))
        yield


def choose_solver(solver: str, unary: Any, pairwise: Any, train: FlatData | None, max_sweeps: int) -> str:
    """``"alternation"`` or ``"joint"`` for the ``solver`` parameter on the training data ``train``
    (None: data that are not in this process); ``"joint"`` refused (naming ``solver``) where it does
    not apply, ``"auto"`` taking it wherever it does."""
    if solver == "alternation":
        return solver
    if train is None:
        reason = "runs on training data in this process only"
    elif not (supports(unary) and supports(pairwise)):
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
