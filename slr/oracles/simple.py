"""The two trivial function classes of the chapter (Sec. 1.9.1-1.9.2): zero and constant."""
from __future__ import annotations

from contextlib import nullcontext
from typing import Any, ContextManager

import numpy as np

from slr._features import FeatureMatrix
from slr._params import Integer, Real, validate_params
from slr.oracles.base import LogisticOracle, OracleTags
from slr.oracles.linear import Linear
from slr.oracles.pair_bias import PairBias
from slr.oracles.targets import target_totals

__all__ = ["Zero", "Constant"]


class Zero(LogisticOracle):
    """The class holding only ``g(x, y) = 0``; fitting just records the problem's shape.

    It takes the pairwise problem's bias in factored form (its tags), as it never reads it.

    Attributes
    ----------
    n_classes_ : int
    n_features_in_ : int
    """

    def __slr_tags__(self) -> OracleTags:
        return OracleTags(factored_pair_bias=True, sparse_features=True)

    def __init__(self) -> None:
        pass

    # ------------------------------------------------------------------ LinearInParameters
    def design_matrix(self, features: FeatureMatrix) -> np.ndarray:
        """No column: the block is empty."""
        return np.zeros((features.shape[0], 0))

    def ridge_weights(self, n_features: int) -> np.ndarray:
        return np.zeros(0)

    def get_coef_block(self, n_classes: int, n_features: int) -> np.ndarray:
        return np.zeros((n_classes, 0))

    def set_coef_block(self, coef: np.ndarray, n_features: int, *, n_iter: int, converged: bool) -> None:
        self.n_classes_, self.n_features_in_ = coef.shape[0], n_features

    def capped_fits(self, max_iter: int) -> ContextManager[None]:
        return nullcontext()

    def _fit(self, features: np.ndarray, bias: np.ndarray | PairBias, labels: np.ndarray,
             sample_weight: np.ndarray | None, params: dict[str, Any]) -> None:
        pass

    def decision_function(self, features: Any) -> np.ndarray:
        """Zeros of shape (N, K)."""
        features = self._check_features(features)
        return np.zeros((features.shape[0], self.n_classes_))


class Constant(LogisticOracle):
    """A table ``g(y)`` that ignores the features (chapter Sec. 1.9.2).

    Minimises ``sum_k w_k [log sum_y exp(g(y) + b_k(y)) - <q_k, g + b_k>] + l2/2 ||g||^2``
    (``q_k`` the target of row ``k``, ``w_k`` its weight; see :meth:`fit`), a smooth convex
    problem in ``K`` variables. When ``l2 == 0``, every class has positive total target
    weight ``c_y = sum_k w_k q_k(y)`` and all bias rows are equal, the optimum is in closed
    form (``softmax(g + b)`` equals the class frequencies ``c / sum(c)``; the table is
    centred to mean zero). Otherwise it is solved with L-BFGS-B, warm-started from the
    previous table.

    Parameters
    ----------
    l2 : float, default=0.0
        Ridge penalty on the table.
    tol : float, default=1e-8
        Stop when the largest gradient component of the *mean* objective
        (objective divided by N) is below ``tol``.
    max_iter : int, default=1000
        Maximum number of L-BFGS iterations per fit.

    Attributes
    ----------
    table_ : ndarray of shape (K,)
        The fitted ``g(y)``.
    n_iter_ : int
        L-BFGS iterations of the last fit (0 for the closed form).
    """

    def __slr_tags__(self) -> OracleTags:
        # the factored bias is handed on to Linear's factored loss
        return OracleTags(factored_pair_bias=True, linear_parameters=("table_",), penalty=True, sparse_features=True)

    def penalty(self) -> float:
        """``l2 / 2 ||table||^2`` at the current ``table_``, the term that :meth:`fit` adds to the
        loss; 0 before a fit."""
        table = getattr(self, "table_", None)
        return 0.0 if table is None else 0.5 * float(self.l2) * float(table @ table)

    _parameter_constraints = {"l2": Real(0.0), "tol": Real(0.0, low_open=True), "max_iter": Integer(1, None)}

    def __init__(self, l2: float = 0.0, tol: float = 1e-8, max_iter: int = 1000) -> None:
        self.l2 = l2
        self.tol = tol
        self.max_iter = max_iter

    # ------------------------------------------------------------------ LinearInParameters
    def design_matrix(self, features: FeatureMatrix) -> np.ndarray:
        """One constant column: the table is the block's only column."""
        return np.ones((features.shape[0], 1))

    def ridge_weights(self, n_features: int) -> np.ndarray:
        return np.full(1, float(validate_params(self)["l2"]))

    def get_coef_block(self, n_classes: int, n_features: int) -> np.ndarray:
        """The table as a column, zeros unless fitted to ``n_classes`` classes."""
        block = np.zeros((n_classes, 1))
        if getattr(self, "table_", np.zeros(0)).shape == (n_classes,):
            block[:, 0] = self.table_
        return block

    def set_coef_block(self, coef: np.ndarray, n_features: int, *, n_iter: int, converged: bool) -> None:
        self.n_classes_, self.n_features_in_ = coef.shape[0], n_features
        self.table_ = coef[:, 0].copy()
        self.n_iter_ = n_iter

    def capped_fits(self, max_iter: int) -> ContextManager[None]:
        """No cap: the closed form or a fit on one feature, cheap either way."""
        return nullcontext()

    def _fit(self, features: np.ndarray, bias: np.ndarray | PairBias, labels: np.ndarray,
             sample_weight: np.ndarray | None, params: dict[str, Any]) -> None:
        l2, tol, max_iter = params["l2"], params["tol"], params["max_iter"]
        n, k = bias.shape
        counts = target_totals(labels, k, sample_weight)
        if l2 == 0 and np.all(counts > 0) and (
                bias.rows_equal() if isinstance(bias, PairBias) else np.all(bias == bias[0])):
            table = np.log(counts) - (bias.row(0) if isinstance(bias, PairBias) else bias[0])
            self.table_ = table - table.mean()
            self.n_iter_ = 0
            return

        # Linear on a single constant feature (the chapter's recipe), warm-started.
        solver = Linear(l2=l2, fit_intercept=False, tol=tol, max_iter=max_iter)
        start = getattr(self, "table_", None)
        if start is not None:
            solver.coef_ = start[:, None].copy()
            solver.n_classes_, solver.n_features_in_ = k, 1
        solver.fit(np.ones((n, 1)), bias, labels, sample_weight)
        self.table_ = solver.coef_[:, 0].copy()
        self.n_iter_ = solver.n_iter_

    def decision_function(self, features: Any) -> np.ndarray:
        """The table repeated for every row: shape (N, K)."""
        features = self._check_features(features)
        return np.tile(self.table_, (features.shape[0], 1))
