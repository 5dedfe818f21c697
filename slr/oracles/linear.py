"""Linear functions ``g(x, y) = (W x)_y (+ b_y)`` fitted exactly with L-BFGS (chapter Sec. 1.9.3)."""
from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import minimize

from slr.oracles.base import LogisticOracle

__all__ = ["Linear"]


def _check_positive(name: str, value: Any, *, allow_zero: bool) -> None:
    """Raise ValueError unless ``value`` is a finite real number > 0 (or >= 0)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    ok = np.isfinite(number) and (number >= 0 if allow_zero else number > 0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}")


def _check_int(name: str, value: Any, minimum: int) -> int:
    """Return ``value`` as an int, raising ValueError unless it is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


# Columns per block are chosen so a block of scores holds about this many numbers:
# bounds memory for K = 676 classes and keeps the temporaries in cache.
_BLOCK_ELEMENTS = 1 << 16


class _ClassMajorLoss:
    """The biased logistic loss of linear scores, evaluated many times on one problem.

    Works in class-major layout (scores of shape (K, N)) so that the reductions over
    classes run along contiguous rows, with preallocated block buffers; this is several
    times faster than row-major code for small K. Agrees with
    :func:`slr.oracles.base.biased_logistic_loss` (tested).
    """

    def __init__(self, features: np.ndarray, bias: np.ndarray, labels: np.ndarray) -> None:
        n, k = bias.shape
        self.n, self.k = n, k
        self.features_t = np.ascontiguousarray(features.T)
        self.bias_t = np.ascontiguousarray(bias.T)
        step = max(1, _BLOCK_ELEMENTS // k)
        self.buffer = np.empty(k * min(step, n))
        self.blocks = []
        for start in range(0, n, step):
            stop = min(n, start + step)
            # flat positions of the true labels inside a (k, stop - start) block
            label_pos = labels[start:stop] * (stop - start) + np.arange(stop - start)
            self.blocks.append((start, stop, label_pos))

    def __call__(
        self, coef: np.ndarray, intercept: np.ndarray | None
    ) -> tuple[float, np.ndarray, np.ndarray]:
        """Summed loss and its gradients with respect to ``coef`` (K, d) and the intercept (K,)."""
        k = self.k
        loss = 0.0
        grad_coef = np.zeros_like(coef)
        grad_intercept = np.zeros(k)
        for start, stop, label_pos in self.blocks:
            m = stop - start
            flat = self.buffer[: k * m]
            z = flat.reshape(k, m)
            x_t = self.features_t[:, start:stop]
            np.matmul(coef, x_t, out=z)
            z += self.bias_t[:, start:stop]
            if intercept is not None:
                z += intercept[:, None]
            z -= z.max(axis=0)
            picked = float(flat[label_pos].sum())
            np.exp(z, out=z)
            total = z.sum(axis=0)
            loss += float(np.log(total).sum()) - picked
            z /= total
            flat[label_pos] -= 1.0
            grad_coef += z @ x_t.T
            grad_intercept += z.sum(axis=1)
        return loss, grad_coef, grad_intercept


class Linear(LogisticOracle):
    """Multinomial logistic regression with per-example biases.

    Minimises ``sum_k loss_k(W x_k + c) + l2/2 ||W||_F^2`` (the intercept ``c`` is not
    penalised), where ``loss_k(s) = log sum_y exp(s_y + b_k(y)) - s_{y_k} - b_k(y_k)``,
    with scipy's L-BFGS-B on the exact loss and gradient. Each fit starts from the
    previous solution when the problem's shape is unchanged, and never returns a
    solution with a higher objective than its starting point.

    Parameters
    ----------
    l2 : float, default=0.0
        Ridge penalty on ``W``. With ``l2 = 0`` the solution may be unbounded
        (separable data, unseen classes); L-BFGS then stops at ``tol`` or ``max_iter``.
    fit_intercept : bool, default=False
        Add an unpenalised per-class offset ``c_y``.
    tol : float, default=1e-6
        Stop when the largest gradient component of the *mean* objective
        (objective divided by N) is below ``tol``.
    max_iter : int, default=1000
        Maximum number of L-BFGS iterations per fit.

    Attributes
    ----------
    coef_ : ndarray of shape (K, d)
    intercept_ : ndarray of shape (K,)
        Zeros when ``fit_intercept`` is False.
    n_iter_ : int
        L-BFGS iterations of the last fit.
    """

    def __init__(
        self,
        l2: float = 0.0,
        fit_intercept: bool = False,
        tol: float = 1e-6,
        max_iter: int = 1000,
    ) -> None:
        self.l2 = l2
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter

    def _objective(self, theta: np.ndarray, problem: _ClassMajorLoss) -> tuple[float, np.ndarray]:
        """Mean penalised loss and its gradient in the flat parameter vector."""
        k, n = problem.k, problem.n
        d = problem.features_t.shape[0]
        coef = theta[: k * d].reshape(k, d)
        intercept = theta[k * d:] if self.fit_intercept else None
        loss, grad_coef, grad_intercept = problem(coef, intercept)
        l2 = float(self.l2)
        loss += 0.5 * l2 * float(np.sum(coef * coef))
        grad_coef += l2 * coef
        grad = grad_coef.ravel()
        if intercept is not None:
            grad = np.concatenate([grad, grad_intercept])
        return loss / n, grad / n

    def _fit(self, features: np.ndarray, bias: np.ndarray, labels: np.ndarray) -> None:
        _check_positive("l2", self.l2, allow_zero=True)
        _check_positive("tol", self.tol, allow_zero=False)
        max_iter = _check_int("max_iter", self.max_iter, 1)
        n, d = features.shape
        k = bias.shape[1]
        if hasattr(self, "coef_"):
            theta0 = self.coef_.ravel()
            if self.fit_intercept:
                theta0 = np.concatenate([theta0, self.intercept_])
        else:
            theta0 = np.zeros(k * d + (k if self.fit_intercept else 0))
        theta0 = np.array(theta0, dtype=np.float64)
        if theta0.size == 0:
            theta, n_iter = theta0, 0
        else:
            problem = _ClassMajorLoss(features, bias, labels)
            f0 = self._objective(theta0, problem)[0]
            # ftol is set tiny so that the gradient test (gtol) decides convergence.
            res = minimize(
                self._objective, theta0, args=(problem,), jac=True,
                method="L-BFGS-B",
                options={"maxiter": max_iter, "gtol": float(self.tol),
                         "ftol": 1e-15, "maxfun": 20 * max_iter},
            )
            theta = res.x if res.fun <= f0 else theta0
            n_iter = int(res.nit)
        self.coef_ = theta[: k * d].reshape(k, d).copy()
        self.intercept_ = theta[k * d:].copy() if self.fit_intercept else np.zeros(k)
        self.n_iter_ = n_iter

    def decision_function(self, features: Any) -> np.ndarray:
        """Scores ``W x + c`` of shape (N, K)."""
        features = self._check_features(features)
        return features @ self.coef_.T + self.intercept_
