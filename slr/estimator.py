"""The learner contract shared by slr's learner and every baseline: fit, predict, score, history.

A learner is a scikit-learn estimator constructed with ``max_iter``, ``n_states``,
``random_state`` and ``verbose`` (among its own parameters) whose ``fit(X, Y, X_val=None,
Y_val=None)`` returns ``self`` and leaves ``history_``, one row per iteration with the columns
:data:`HISTORY_COLUMNS`:

``iteration``
    0, 1, ... (0 is the start or the first iteration, as the learner documents).
``objective``
    The objective the learner minimises, after the iteration (NaN where it has none).
``train_error``, ``val_error``
    Per-node error rates of MAP predictions on the training and validation data (NaN when not
    measured).
``seconds``
    Wall time since ``fit`` began, cumulative, without the time spent measuring the errors.
``eval_seconds``
    Time spent measuring this row's errors.
"""
from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from slr.formats import Labellings
from slr.models import FlatData

__all__ = ["HISTORY_COLUMNS", "StructuredEstimator"]

HISTORY_COLUMNS = ["iteration", "objective", "train_error", "val_error", "seconds", "eval_seconds"]

Decoder = Callable[[FlatData], np.ndarray]


class StructuredEstimator(BaseEstimator):
    """Base class of the structured learners (see the module docstring for the contract).

    Subclasses implement ``_data(X, Y)`` (the validated flat data, checked against the fitted
    feature widths once fitted), ``_predict_flat(data)`` (a flat MAP labelling) and ``fit``,
    which calls :meth:`_start_history` before its first iteration, :meth:`_record` after each
    and :meth:`_finish_history` at the end.

    Attributes
    ----------
    n_states_ : int
    history_ : pandas.DataFrame
    """

    def _data(self, X: Sequence, Y: Sequence | None = None, name: str = "X") -> FlatData:  # pragma: no cover
        raise NotImplementedError

    def _predict_flat(self, data: FlatData) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------------ history
    def _start_history(self, train: FlatData, X_val: Sequence | None, Y_val: Sequence | None) -> None:
        """Start the clock; keep the data the errors are measured on."""
        if (X_val is None) != (Y_val is None):
            raise ValueError("X_val and Y_val must be given together")
        self._train = train
        self._val = None if X_val is None else self._data(X_val, Y_val, "X_val")
        self._rows: list[dict] = []
        self._eval_total = 0.0
        self._t0 = time.perf_counter()

    def _record(self, iteration: int, objective: float, train_error: float = float("nan"),
                decode: Decoder | None = None, monitor_train: bool = False) -> dict:
        """Append a history row; ``decode`` labels data under the current parameters.

        With ``decode`` the validation error is measured, and the training error too when
        ``monitor_train``; the time this takes is ``eval_seconds``, left out of ``seconds``.
        """
        now = time.perf_counter()
        val_error = float("nan")
        if decode is not None:
            if monitor_train:
                train_error = _error(decode, self._train)
            if self._val is not None:
                val_error = _error(decode, self._val)
        eval_seconds = time.perf_counter() - now
        row = {"iteration": iteration, "objective": objective, "train_error": train_error,
               "val_error": val_error, "seconds": now - self._t0 - self._eval_total,
               "eval_seconds": eval_seconds}
        self._eval_total += eval_seconds
        self._rows.append(row)
        return row

    def _finish_history(self) -> None:
        self.history_ = pd.DataFrame(self._rows, columns=HISTORY_COLUMNS)
        del self._rows, self._train, self._val

    # ------------------------------------------------------------------ public
    def _check_fitted(self) -> None:
        check_is_fitted(self, "history_")

    def predict(self, X: Sequence) -> list[np.ndarray]:
        """MAP labelling of every example.

        Parameters
        ----------
        X : list of (node_features, edges, edge_features)

        Returns
        -------
        Labellings
            A list of int64 arrays ``(n,)``, one per example (to NumPy a 1-D object array, so that
            ``cross_val_predict`` works; :class:`slr.formats.Labellings`).
        """
        self._check_fitted()
        data = self._data(X)
        return Labellings(data.split(self._predict_flat(data).astype(np.int64)))

    def score(self, X: Sequence, Y: Sequence) -> float:
        """Per-node accuracy of :meth:`predict` over all nodes of all examples."""
        self._check_fitted()
        data = self._data(X, Y)
        return float(np.mean(self._predict_flat(data) == data.labels))


def _error(decode: Decoder, data: FlatData) -> float:
    return float(np.mean(decode(data) != data.labels))

