"""Shared plumbing of the baseline learners: fit/predict/score, history, parameters."""
from __future__ import annotations

import sys
import time
from typing import Any, Sequence

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from threadpoolctl import threadpool_limits

from baselines.features import StructuredData

__all__ = ["BaseStructuredLearner", "check_positive"]


def check_positive(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a float, raising ValueError unless finite and > 0 (or >= 0)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    if not np.isfinite(number) or number < 0 or (number == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}")
    return number


def check_count(name: str, value: Any, minimum: int) -> int:
    """Return ``value`` as an int, raising ValueError unless an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


class BaseStructuredLearner(BaseEstimator):
    """Base class: a linear model over :class:`baselines.features.StructuredData`.

    Subclasses implement ``_fit(data)``, which sets ``self.w_`` and appends rows to the
    history through :meth:`_record`. ``get_params``/``set_params`` come from scikit-learn.

    Attributes
    ----------
    w_ : ndarray of shape (L * d_u + L * L * d_e,)
        The weights (layout in :mod:`baselines.features`).
    n_states_ : int
    history_ : pandas.DataFrame
        One row per iteration: ``iteration``, ``primal_objective``, ``train_error``
        (per node, of the MAP prediction when measured, else NaN), ``seconds`` (since fit began).
    """

    def _data(self, X: Sequence, Y: Sequence | None = None, n_states: int | None = None,
              dims: tuple[int, int] | None = None) -> StructuredData:
        return StructuredData(X, Y, n_states, model=self.model, max_sweeps=self.max_sweeps,
                              tol=self.inference_tol, dims=dims)

    def fit(self, X: Sequence, Y: Sequence, n_states: int | None = None) -> "BaseStructuredLearner":
        """Learn the weights.

        Parameters
        ----------
        X : sequence of (node_features (n, d_u), edges (m, 2), edge_features (m, d_e))
        Y : sequence of int arrays (n,)
        n_states : int, optional
            Number of states ``L``; ``max label + 1`` by default.

        Returns
        -------
        self
        """
        self._validate_params()
        data = self._data(X, Y, n_states)
        self.n_states_ = data.n_states
        self.dims_ = (data.d_u, data.d_e)
        self._rows: list[dict] = []
        self._t0 = time.perf_counter()
        # the products here are small; BLAS threads only contend with the OpenMP kernels
        # and other jobs on a shared machine (as in slr.oracles.linear)
        with threadpool_limits(limits=1, user_api="blas"):
            self._fit(data)
        self.history_ = pd.DataFrame(self._rows, columns=["iteration", "primal_objective",
                                                          "train_error", "seconds"])
        del self._rows
        return self

    def _validate_params(self) -> None:
        if self.model not in ("auto", "chain", "lp"):
            raise ValueError(f"model must be 'auto', 'chain' or 'lp', got {self.model!r}")
        check_count("max_sweeps", self.max_sweeps, 1)
        check_positive("inference_tol", self.inference_tol, allow_zero=True)
        check_count("verbose", int(self.verbose), 0)

    def _fit(self, data: StructuredData) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers
    def _record(self, iteration: int, primal: float, train_error: float = float("nan")) -> None:
        seconds = time.perf_counter() - self._t0
        self._rows.append({"iteration": iteration, "primal_objective": primal,
                           "train_error": train_error, "seconds": seconds})
        if self.verbose:
            print(f"[{type(self).__name__}] iter {iteration:4d}  primal {primal:.6g}  "
                  f"train error {train_error:.4f}  {seconds:.2f}s", file=sys.stderr)

    @staticmethod
    def _primal(w: np.ndarray, slack: np.ndarray, C: float) -> float:
        return float(0.5 * w @ w + C * slack.sum())

    def _train_error(self, data: StructuredData, w: np.ndarray) -> float:
        y_hat = data.decode(*data.potentials(w))
        return float(np.mean(y_hat != data.y))

    def _check_fitted(self) -> None:
        if not hasattr(self, "w_"):
            raise ValueError(f"{type(self).__name__} is not fitted yet; call fit first")

    # ------------------------------------------------------------------ public
    def decision_potentials(self, X: Sequence) -> tuple[StructuredData, np.ndarray, np.ndarray]:
        """The data in flat form and its potentials ``theta_nodes``, ``theta_edges`` under ``w_``."""
        self._check_fitted()
        data = self._data(X, None, self.n_states_, dims=self.dims_)
        return (data, *data.potentials(self.w_))

    def predict(self, X: Sequence) -> list[np.ndarray]:
        """MAP labellings (Viterbi on chains, LP star updates + node argmax otherwise)."""
        data, theta_nodes, theta_edges = self.decision_potentials(X)
        return data.split(data.decode(theta_nodes, theta_edges))

    def score(self, X: Sequence, Y: Sequence) -> float:
        """Per-node accuracy of :meth:`predict`."""
        pred = np.concatenate(self.predict(X))
        truth = np.concatenate([np.asarray(y) for y in Y])
        if pred.shape != truth.shape:
            raise ValueError("Y does not match X in size")
        return float(np.mean(pred == truth))

    def primal_objective(self, X: Sequence, Y: Sequence, C: float | None = None) -> float:
        """``0.5 ||w||^2 + C * sum_k slack_k`` at ``w_`` (``C`` defaults to the learner's)."""
        self._check_fitted()
        C = getattr(self, "C", 1.0) if C is None else C
        data = self._data(X, Y, self.n_states_, dims=self.dims_)
        return self._primal(self.w_, data.loss_augmented(self.w_)[3], C)
