"""What the learner does after every iteration, whichever solver runs and wherever the data are:
the ``history_`` row and the monitor's schedule, the progress line, the caller's ``callback`` (an
:class:`Iterate`), early stopping and the stopping rule on J."""
from __future__ import annotations

import math
import sys
from contextlib import AbstractContextManager
from typing import Any, Callable, Literal, Sequence

import numpy as np
import pandas as pd

from slr._alternation import Alternation
from slr._prediction import map_labels
from slr.data import FlatData
from slr.estimator import FitHistory
from slr.formats import Labellings
from slr.labels import decode_labels
from slr.models import PairwiseModel
from slr.oracles.base import get_oracle_tags

__all__ = ["BestIteration", "Iterate", "Progress", "TrainingRows", "early_stopping", "iteration_objectives",
           "print_progress", "tol_reached"]

# the stopping rule compares R now with R this many iterations ago: over one iteration a
# fallen-back relaxed step or a noisy oracle fit (SGD, subsampled boosting) can gain little
# while the fit is far from converged
_TOL_WINDOW = 3

# early_stopping="auto" without X_val holds out validation_fraction of the examples when an oracle
# asks for it (its tags' validation_stopping) and X has at least this many
_AUTO_HOLD_OUT_MIN = 20

# early stopping also ends a plateau at the lowest validation error once it has lasted this many
# times n_iter_no_change iterations (counted from the iteration that first reached that error)
_PLATEAU_FACTOR = 4


def tol_reached(objectives: Sequence[float], tol: float) -> bool:
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
    :meth:`predict` and :meth:`score` then raise ``RuntimeError``. Where they decode by the LP's
    max-product sweeps, the sweeps on an ``X`` (the same object) that an earlier iteration's
    Iterate decoded start from the messages that decode ended with: the labels of a decode from
    zero messages wherever the LP certifies them (up to ties between labellings of the same score),
    in a fraction of the sweeps.

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

    def __init__(self, row: dict, state: Alternation, predictor: PairwiseModel,
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
        return data, map_labels(predictor, data, state.oracles["unary"], state.current_pairwise(), state.timed,
                                messages=state.warm_start(predictor, data, X))

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
        assert data.labels is not None   # checked with Y
        return float(np.mean(labels[data.visible] == data.labels[data.visible]))



def iteration_objectives(history: pd.DataFrame, trace: pd.DataFrame) -> list[float]:
    """J after each iteration of an earlier fit (its trace's last row per iteration), for the
    stopping rule of a continued fit; R (``history``) for a model saved before the trace had J."""
    if "penalised" not in trace or trace["penalised"].isna().any():
        return history["objective"].tolist()
    return trace.groupby("iteration", sort=False)["penalised"].last().tolist()


class Progress:
    """What the learner does after every iteration, whichever solver runs: the ``history_`` row
    (with the errors if ``decode``; the training error at the iterations ``monitor`` selects,
    :class:`TrainingRows`), the data's own bookkeeping (:meth:`slr._fit_data.FitData.iteration_done`),
    the progress line, the user's ``callback`` (an :class:`Iterate` from ``iterate(row, state)``; its
    time left out of ``history_["seconds"]``), early stopping (``best``) and the stopping rule on J
    (``objectives``, continued).

    ``train_error``: where the training data are not in this process, what measures their error
    (the history then measures the validation error only, with ``decode``); None: ``decode`` does.
    """

    def __init__(self, history: FitHistory, objectives: list[float], decode: Callable | None,
                 monitor: Callable[[int], bool], best: "BestIteration | None", tol: float, verbose: int,
                 timed: Callable[[str], AbstractContextManager],
                 callback: Callable[["Iterate"], Any] | None = None,
                 iterate: Callable[[dict, Alternation], "Iterate"] | None = None,
                 train_error: Callable[[], float] | None = None) -> None:
        self.history, self.objectives, self.decode, self.monitor = history, objectives, decode, monitor
        self.best, self.tol, self.verbose, self.timed = best, tol, verbose, timed
        self.callback, self.iterate, self.train_error = callback, iterate, train_error

    def after(self, iteration: int, state: Alternation) -> str | None:
        """Record ``iteration``; why learning stops now (``"early_stopping"``, ``"tol"``) or None."""
        with self.timed("monitor"):
            row = self._record(iteration, state.objective)
        state.data.iteration_done(iteration, state.oracles, state.fitted_pairwise)
        self.objectives.append(state.penalised)
        if self.verbose:
            print_progress(row, state.trace[-4:] if self.verbose > 1 else ())
        if self.callback is not None:
            assert self.iterate is not None   # the learner passes it with every callback
            with self.timed("callback"), self.history.untimed():
                current = self.iterate(row, state)
                try:
                    self.callback(current)
                finally:
                    current._expire()
        if self.best is not None and self.best.update(iteration, row["val_error"], state):
            return "early_stopping"
        if tol_reached(self.objectives, self.tol):
            return "tol"
        return None

    def _record(self, iteration: int, objective: float) -> dict:
        measure = self.monitor(iteration)
        if self.train_error is None:
            return self.history.record(iteration, objective, decode=self.decode, monitor_train=measure)
        error = self.train_error() if measure else float("nan")
        return self.history.record(iteration, objective, train_error=error, decode=self.decode)


def _power_of_two(iteration: int) -> bool:
    """The iterations 1, 2, 4, 8, ... at which ``monitor="auto"`` decodes where decoding costs sweeps."""
    return iteration > 0 and iteration & (iteration - 1) == 0


class TrainingRows:
    """Which rows of ``history_`` get the training error (``monitor``), and the kept model's row.

    ``monitor=True``: every row. ``"auto"``: every row where decoding the training data takes one pass
    (``decodes_in_one_pass``: Viterbi, every example a chain and ``predict_epsilon = 0``), else the
    rows of iterations 1, 2, 4, 8, ... and, after the fit, the row of the model kept (:meth:`finish`).
    ``False``: none.
    """

    def __init__(self, monitor: bool | str, decodes_in_one_pass: bool) -> None:
        self.on = monitor is not False
        self.every = monitor is True or decodes_in_one_pass

    def __call__(self, iteration: int) -> bool:
        """Whether ``iteration``'s row gets the training error when recorded."""
        return self.on and (self.every or _power_of_two(iteration))

    def finish(self, history: FitHistory, kept: int, decode: Callable | None,
               timed: Callable[[str], AbstractContextManager]) -> None:
        """After the fit: the training error of the kept model (``decode``, the learner's decoder,
        labels under it) in its row, iteration ``kept``, if the schedule left it out."""
        if not self.on or self(kept):
            return
        assert decode is not None   # the learner decodes whenever it monitors
        with timed("monitor"):
            history.measure_train(kept, decode)



class BestIteration:
    """Early stopping's bookkeeping: the last iteration with the lowest validation error so far, a
    snapshot of the model then, and the iteration that first reached that error (``reached``)."""

    def __init__(self, patience: int) -> None:
        self.patience = patience
        self.error, self.iteration, self.reached = math.inf, 0, 0
        self.snapshot: dict[str, Any] | None = None

    def update(self, iteration: int, error: float, state: Alternation) -> bool:
        """Record ``iteration``'s validation error; True once ``patience`` iterations have passed
        above the lowest, or ``_PLATEAU_FACTOR * patience`` since the lowest was first reached."""
        if error < self.error:
            self.reached = iteration
        if error <= self.error:
            self.error, self.iteration, self.snapshot = error, iteration, state.snapshot()
        return (iteration - self.iteration >= self.patience
                or iteration - self.reached >= _PLATEAU_FACTOR * self.patience)


def early_stopping(setting: Literal["auto"] | bool, has_val: bool, oracles: tuple[Any, Any], n_examples: int,
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


def print_progress(row: dict, half_steps: Sequence[tuple[int, str, float, float]]) -> None:
    """One line per iteration (``verbose=1``), with R after each half step (``verbose=2``)."""
    steps = "".join(f"  {stage} {value:.6g}" for _, stage, value, _ in half_steps)
    print(f"[StructuredLogisticRegression] iteration {row['iteration']:4d}  R {row['objective']:.6g}  "
          f"train error {row['train_error']:.4f}  {row['seconds']:.2f}s{steps}", file=sys.stderr)
