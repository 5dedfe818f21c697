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
    Time spent measuring this row's errors (and in a callback observing the fit after it).

A fit is a transaction: it validates everything (parameters, ``X``, ``Y``, ``X_val``, ``Y_val``),
computes into state of its own (a :class:`FitHistory` for the rows, local variables or an
object for the rest), and only at the end replaces all fitted attributes at once with
:meth:`StructuredEstimator._commit_fit`. A fit that raises leaves a fitted estimator exactly
as it was::

    def fit(self, X, Y, X_val=None, Y_val=None):
        params = validate_params(self)
        train = ...                                                # checked training data
        val = validation_data(X_val, Y_val, lambda X, Y: ...)      # checked against train
        history = FitHistory(train, val)
        ...                                                        # iterate, history.record(...)
        self._commit_fit({"n_states_": ..., "classes_": ..., "w_": ..., "history_": history.frame()})
        return self

Labels may be of any hashable type: ``fit`` codes them once with :func:`slr.labels.fit_labels`,
the kernels see ints ``0 .. L-1``, ``classes_`` names the codes, and ``predict`` and ``score``
speak the caller's labels (:meth:`StructuredEstimator._fitted_labels` codes them on the way in).
"""
from __future__ import annotations

import re
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar, overload

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from slr._versions import VersionedPickle
from slr.data import FlatData
from slr.formats import Labellings
from slr.labels import decode_labels, encode_labels, integer_classes

__all__ = ["HISTORY_COLUMNS", "FitHistory", "StructuredEstimator", "validation_data"]

HISTORY_COLUMNS = ["iteration", "objective", "train_error", "val_error", "seconds", "eval_seconds"]

Decoder = Callable[[FlatData], np.ndarray]
Data = TypeVar("Data")


@overload
def validation_data(X_val: Sequence, Y_val: Sequence, build: Callable[[Sequence, Sequence], Data]) -> Data: ...


@overload
def validation_data(X_val: Sequence | None, Y_val: Sequence | None,
                    build: Callable[[Sequence, Sequence], Data]) -> Data | None: ...


def validation_data(X_val: Sequence | None, Y_val: Sequence | None,
                    build: Callable[[Sequence, Sequence], Data]) -> Data | None:
    """The validation data of a fit: ``build(X_val, Y_val)`` (which checks them against the
    training data), or None without them.

    Raises
    ------
    ValueError
        If only one of ``X_val`` and ``Y_val`` is given, or from ``build``.
    """
    if (X_val is None) != (Y_val is None):
        raise ValueError("X_val and Y_val must be given together")
    if X_val is None or Y_val is None:   # both
        return None
    try:
        return build(X_val, Y_val)
    except ValueError as exc:   # the shared checkers name X and Y: these are X_val and Y_val
        raise ValueError(_VALIDATION_NAMES.sub(r"\1_val", str(exc))) from None


#: ``X`` or ``Y`` as an argument's name in a message (``X[3]``, ``Y must``), not ``X_val``.
_VALIDATION_NAMES = re.compile(r"\b([XY])(?=\[|\s|$)")


class FitHistory:
    """The rows of ``history_`` while a fit runs, kept apart from the estimator.

    The clock starts at construction.

    Parameters
    ----------
    train : FlatData or None
        The data the training error is measured on; None where they are not in this process
        (the learner then measures it and passes ``train_error`` to :meth:`record`).
    val : FlatData, optional
        The data the validation error is measured on.
    """

    def __init__(self, train: FlatData | None, val: FlatData | None = None) -> None:
        self.train, self.val = train, val
        self.rows: list[dict] = []
        self._eval_total = 0.0
        self._t0 = time.perf_counter()

    def record(self, iteration: int, objective: float, train_error: float = float("nan"),
               decode: Decoder | None = None, monitor_train: bool = False) -> dict:
        """Append a row; ``decode`` labels data under the current parameters.

        With ``decode`` the validation error is measured, and the training error too when
        ``monitor_train``; the time this takes is ``eval_seconds``, left out of ``seconds``.
        """
        now = time.perf_counter()
        val_error = float("nan")
        if decode is not None:
            if monitor_train:
                assert self.train is not None   # measured here only where the training data are here
                train_error = _error(decode, self.train)
            if self.val is not None:
                val_error = _error(decode, self.val)
        eval_seconds = time.perf_counter() - now
        row = {"iteration": iteration, "objective": objective, "train_error": train_error,
               "val_error": val_error, "seconds": now - self._t0 - self._eval_total,
               "eval_seconds": eval_seconds}
        self._eval_total += eval_seconds
        self.rows.append(row)
        return row

    def measure_train(self, iteration: int, decode: Decoder) -> None:
        """After a fit: the training error of iteration ``iteration``'s row, decoded by ``decode``
        (the model of that iteration), the time this takes added to its ``eval_seconds``; nothing
        if no row has that iteration."""
        row = next((row for row in self.rows if row["iteration"] == iteration), None)
        if row is None:
            return
        start = time.perf_counter()
        assert self.train is not None   # measured here only where the training data are here
        row["train_error"] = _error(decode, self.train)
        row["eval_seconds"] += time.perf_counter() - start

    @contextmanager
    def untimed(self) -> Iterator[None]:
        """Leave the time spent inside the block out of ``seconds`` (it goes to the last row's
        ``eval_seconds``), as the errors' measurement is: for callbacks that observe a fit."""
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            self._eval_total += elapsed
            if self.rows:
                self.rows[-1]["eval_seconds"] += elapsed

    def frame(self) -> pd.DataFrame:
        """The rows as ``history_``: :data:`HISTORY_COLUMNS`, then any columns a learner adds to
        every row (e.g. a dual objective)."""
        extra = [name for name in (self.rows[0] if self.rows else ()) if name not in HISTORY_COLUMNS]
        return pd.DataFrame(self.rows, columns=[*HISTORY_COLUMNS, *extra])


class StructuredEstimator(VersionedPickle, BaseEstimator):
    """Base class of the structured learners (see the module docstring for the contract).

    Subclasses implement ``_data(X, Y)`` (the validated flat data, checked against the fitted
    feature widths once fitted), ``_predict_flat(data)`` (a flat MAP labelling) and ``fit``, a
    transaction (see the module docstring) that ends with :meth:`_commit_fit`.

    Attributes
    ----------
    n_states_ : int
    classes_ : ndarray of shape (n_classes,)
        The labels, sorted (``arange(n_states_)`` for integer labels); code ``a`` in the kernels
        is label ``classes_[a]``.
    history_ : pandas.DataFrame
    """

    def _data(self, X: Sequence, Y: Sequence | None = None, name: str = "X") -> FlatData:  # pragma: no cover
        raise NotImplementedError

    def _predict_flat(self, data: FlatData) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------------ the transaction
    def _commit_fit(self, fitted: Mapping[str, Any]) -> None:
        """Replace the fitted attributes by ``fitted`` (name: value), all at once.

        Called once, at the end of a fit that succeeded. Attributes of the previous fit that
        ``fitted`` does not name are removed, so nothing of an earlier fit survives a refit.
        """
        for name in getattr(self, "_fitted_names", ()):
            if name not in fitted:
                self.__dict__.pop(name, None)
        self.__dict__.update(fitted)
        self._fitted_names = tuple(fitted)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        if "n_states_" in state and "classes_" not in state:   # pickled before classes_: integer labels
            self.classes_ = integer_classes(self.n_states_)

    def _fitted_labels(self, Y: Sequence, name: str = "Y") -> Sequence:
        """``Y`` in the fitted model's codes (:func:`slr.labels.encode_labels`)."""
        return encode_labels(Y, self.classes_, name)

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
            A list of arrays ``(n,)`` of labels of ``classes_``'s dtype (int64 for integer labels),
            one per example (to NumPy a 1-D object array, so that ``cross_val_predict`` works;
            :class:`slr.formats.Labellings`).
        """
        self._check_fitted()
        data = self._data(X)
        labellings = data.split_labels(self._predict_flat(data))
        return Labellings([decode_labels(labels, self.classes_) for labels in labellings])

    def score(self, X: Sequence, Y: Sequence) -> float:
        """Per-node accuracy of :meth:`predict` over all (visible) nodes of all examples.

        Raises
        ------
        ValueError
            For a label of ``Y`` that is not one of ``classes_``.
        """
        self._check_fitted()
        data = self._data(X, self._fitted_labels(Y))
        visible, labels = data.visible, data.labels
        assert labels is not None   # checked with Y
        return float(np.mean(self._predict_flat(data)[visible] == labels[visible]))


def _error(decode: Decoder, data: FlatData) -> float:
    labels = data.labels
    assert labels is not None   # training and validation data: labelled
    labelled = labels >= 0   # unlabelled nodes (-1, training data only) are not scored
    return float(np.mean(decode(data)[labelled] != labels[labelled])) if labelled.any() else float("nan")

