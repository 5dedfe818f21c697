"""Shared plumbing of the linear baseline learners: data, fit, history, primal objective."""
from __future__ import annotations

import sys
from typing import Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from baselines.features import StructuredData
from slr.estimator import StructuredEstimator
from slr.models import INFERENCE
from slr.validation import check_int, check_option, check_real

__all__ = ["BaseStructuredLearner"]


class BaseStructuredLearner(StructuredEstimator):
    """Base class: a linear model over :class:`baselines.features.StructuredData`.

    Subclasses implement ``_fit(data)``, which sets ``self.w_`` and records every iteration
    through :meth:`_log`. The contract (``fit``, ``predict``, ``score``,
    ``history_``) is :class:`slr.estimator.StructuredEstimator`'s; ``objective`` in the
    history is the learner's primal objective.

    Attributes
    ----------
    w_ : ndarray of shape (L * d_u + L * L * d_e,)
        The weights (layout in :mod:`baselines.features`).
    n_states_ : int
    history_ : pandas.DataFrame
    """

    def _data(self, X: Sequence, Y: Sequence | None = None, name: str = "X") -> StructuredData:
        return self._structured(X, Y, self.n_states_, self.dims_)

    def _structured(self, X: Sequence, Y: Sequence | None, n_states: int | None,
                    dims: tuple[int, int] | None) -> StructuredData:
        return StructuredData(X, Y, n_states, model=self.model, max_sweeps=self.max_sweeps,
                              tol=self.inference_tol, dims=dims)

    def fit(self, X: Sequence, Y: Sequence, X_val: Sequence | None = None,
            Y_val: Sequence | None = None) -> "BaseStructuredLearner":
        """Learn the weights.

        Parameters
        ----------
        X : sequence of (node_features (n, d_u), edges (m, 2), edge_features (m, d_e))
        Y : sequence of int arrays (n,)
        X_val, Y_val : optional
            Validation data in the same format, for ``history_["val_error"]``.

        Returns
        -------
        self
        """
        self._validate_params()
        data = self._structured(X, Y, self.n_states, None)
        self.n_states_ = data.n_states
        self.dims_ = (data.d_u, data.d_e)
        self._start_history(data, X_val, Y_val)
        # the products here are small; BLAS threads only contend with the OpenMP kernels
        # and other jobs on a shared machine (as in slr.oracles.linear)
        with threadpool_limits(limits=1, user_api="blas"):
            self._fit(data)
        self._finish_history()
        return self

    def _validate_params(self) -> None:
        check_option(self.model, "model", INFERENCE)
        if self.n_states is not None:
            check_int(self.n_states, "n_states", 2)
        check_int(self.max_sweeps, "max_sweeps", 1)
        check_real(self.inference_tol, "inference_tol", 0.0)
        check_int(int(self.verbose), "verbose", 0)

    def _fit(self, data: StructuredData) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers
    def _log(self, iteration: int, objective: float, w: np.ndarray | None,
             train_error: float = float("nan")) -> None:
        """A history row for the weights ``w`` (the fitted state when None); the validation
        error is measured under them."""
        decode = self._predict_flat if w is None else (lambda data: data.decode(*data.potentials(w)))
        row = self._record(iteration, objective, train_error, decode=decode)
        if self.verbose:
            print(f"[{type(self).__name__}] iter {iteration:4d}  objective {objective:.6g}  "
                  f"train error {row['train_error']:.4f}  {row['seconds']:.2f}s", file=sys.stderr)

    @staticmethod
    def _primal(w: np.ndarray, slack: np.ndarray, C: float) -> float:
        return float(0.5 * w @ w + C * slack.sum())

    @staticmethod
    def _train_error(data: StructuredData, w: np.ndarray) -> float:
        return float(np.mean(data.decode(*data.potentials(w)) != data.labels))

    # ------------------------------------------------------------------ public
    def _predict_flat(self, data: StructuredData) -> np.ndarray:
        return data.decode(*self._potentials(data))

    def _potentials(self, data: StructuredData) -> tuple[np.ndarray, np.ndarray]:
        return data.potentials(self.w_)

    def decision_potentials(self, X: Sequence) -> tuple[StructuredData, np.ndarray, np.ndarray]:
        """The data in flat form and its potentials ``theta_nodes``, ``theta_edges`` under the fit."""
        self._check_fitted()
        data = self._data(X)
        return (data, *self._potentials(data))

    def primal_objective(self, X: Sequence, Y: Sequence, C: float | None = None) -> float:
        """``0.5 ||w||^2 + C * sum_k slack_k`` at ``w_`` (``C`` defaults to the learner's)."""
        self._check_fitted()
        C = getattr(self, "C", 1.0) if C is None else C
        return self._primal(self.w_, self._data(X, Y).loss_augmented(self.w_)[3], C)

