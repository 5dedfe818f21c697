"""The biased multinomial logistic loss for many features, dense or sparse, and its minimiser.

Memory grows with the data, not with the square of the feature count: the loss holds the feature
matrix as it is given (``ndarray`` or ``csr_array``) and blocks of ``rows x classes`` numbers; the
minimiser holds a few ``(K, D)`` arrays. It is L-BFGS on variables scaled by the square root of the
Hessian's diagonal at the start of each cycle of iterations (a Jacobi preconditioner, as the joint
solver of :mod:`slr._joint` uses). With an L1 penalty the cycles run OWL-QN instead (Andrew and Gao
2007, "Scalable training of L1-regularized log-linear models", the method of CRFsuite's ``c1``):
L-BFGS steps on the pseudo-gradient that stay in one orthant per step, so weights reach zero exactly.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from slr._features import FeatureMatrix, squared
from slr._lbfgs import Corrections, history_size, minimise_lbfgs

__all__ = ["RowLoss", "add_ridge", "minimise_diagonal"]

# rows per block: about this many scores in a block's temporaries (64 MiB each; fewer blocks, fewer
# passes over the (K, D) gradient)
_BLOCK_ELEMENTS = 1 << 23

# smallest diagonal curvature assumed, relative to the largest (a class whose probability has
# vanished would otherwise get steps without bound)
_CURVATURE_FLOOR = 1e-10


class RowLoss:
    """``sum_k w_k [lse(W x_k + c + b_k) - <q_k, W x_k + c + b_k>]``, its gradient and the diagonal
    of its Hessian, in the ``(K, D [+ 1])`` layout of :class:`~slr.oracles.Linear`'s coefficients
    (the intercept last, with ``fit_intercept``).

    Parameters
    ----------
    features : ndarray or scipy.sparse.csr_array of shape (N, D)
    bias : ndarray of shape (N, K)
    labels : ndarray of shape (N,) int or (N, K) soft targets
    fit_intercept : bool
    sample_weight : ndarray of shape (N,) or None
    """

    def __init__(self, features: FeatureMatrix, bias: np.ndarray, labels: np.ndarray, fit_intercept: bool,
                 sample_weight: np.ndarray | None) -> None:
        self.features, self.bias, self.labels = features, bias, labels
        self.intercept, self.weights = fit_intercept, sample_weight
        n, self.k = bias.shape
        self.n = float(n if sample_weight is None else sample_weight.sum())
        self.n_features = features.shape[1]
        self.squares: FeatureMatrix | None = None   # the features squared, made at the first need
        step = max(1, _BLOCK_ELEMENTS // max(self.k, 1))
        self.blocks = [(start, min(n, start + step)) for start in range(0, n, step)]

    @property
    def n_columns(self) -> int:
        return self.n_features + int(self.intercept)

    def _rows(self, matrix: FeatureMatrix, start: int, stop: int) -> FeatureMatrix:
        """Rows ``start:stop`` of ``matrix``: the matrix itself for a single block (slicing a sparse
        matrix copies its entries)."""
        return matrix if (start, stop) == (0, matrix.shape[0]) else matrix[start:stop]

    def _probabilities(self, coef: np.ndarray, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Softmax ``p`` of a block's biased scores, and each row's loss ``lse - <q, z>``."""
        weights = coef[:, :self.n_features]
        z = self._rows(self.features, start, stop) @ weights.T
        z += self.bias[start:stop]
        if self.intercept:
            z += coef[:, -1]
        z -= z.max(axis=1, keepdims=True)
        labels = self.labels[start:stop]
        picked = (np.einsum("nk,nk->n", labels, z) if labels.ndim == 2
                  else z[np.arange(stop - start), labels])
        np.exp(z, out=z)
        total = z.sum(axis=1)
        z /= total[:, None]
        return z, np.log(total) - picked

    def _add_columns(self, out: np.ndarray, start: int, stop: int, rows: np.ndarray, squares: bool) -> None:
        """``out += rows^T X`` over a block (``X`` squared with ``squares``), the intercept's column
        ``rows`` summed."""
        block = self._rows(self.squares if squares else self.features, start, stop)
        out[:, :self.n_features] += (block.T @ rows).T
        if self.intercept:
            out[:, -1] += rows.sum(axis=0)

    def __call__(self, coef: np.ndarray) -> tuple[float, np.ndarray]:
        """The (weighted) loss and its gradient with respect to ``coef``."""
        loss, grad = 0.0, np.zeros_like(coef)
        for start, stop in self.blocks:
            p, row_loss = self._probabilities(coef, start, stop)
            labels = self.labels[start:stop]
            if labels.ndim == 2:
                p -= labels
            else:
                p[np.arange(stop - start), labels] -= 1.0
            if self.weights is not None:
                w = self.weights[start:stop]
                row_loss *= w
                p *= w[:, None]
            loss += float(row_loss.sum())
            self._add_columns(grad, start, stop, p, squares=False)
        return loss, grad

    def hessian_diagonal(self, coef: np.ndarray) -> np.ndarray:
        """``sum_k w_k p_k(y) (1 - p_k(y)) x_kd^2`` for every class ``y`` and column ``d``."""
        if self.squares is None:
            self.squares = squared(self.features)
        diagonal = np.zeros_like(coef)
        for start, stop in self.blocks:
            p, _ = self._probabilities(coef, start, stop)
            p *= 1.0 - p
            if self.weights is not None:
                p *= self.weights[start:stop][:, None]
            self._add_columns(diagonal, start, stop, p, squares=True)
        return diagonal


def add_ridge(coef: np.ndarray, penalty: np.ndarray, grad: np.ndarray) -> float:
    """``grad += penalty * coef`` (``penalty`` per column of the ``(K, C)`` coefficients), and the
    ridge ``sum penalty / 2 coef^2`` returned: a class at a time, without a temporary of the
    coefficients' size."""
    value = 0.0
    for row, row_grad in zip(coef, grad):
        value += 0.5 * float(penalty @ (row * row))
        row_grad += penalty * row
    return value


def _optimality(coef: np.ndarray, grad: np.ndarray, l1: np.ndarray) -> float:
    """The largest entry of the minimum-norm subgradient of ``f + sum l1 |c|`` (``grad`` that of
    ``f``): the plain gradient without an L1 penalty."""
    if not np.any(l1):
        return float(np.max(np.abs(grad))) if grad.size else 0.0
    signed = grad + l1 * np.sign(coef)
    at_zero = np.maximum(np.abs(grad) - l1, 0.0)
    return float(np.max(np.where(coef != 0.0, np.abs(signed), at_zero))) if grad.size else 0.0


def _pseudo_gradient(x: np.ndarray, g: np.ndarray, l1: np.ndarray) -> np.ndarray:
    """The minimum-norm subgradient of ``f + sum l1 |x|`` (``g`` the gradient of ``f``)."""
    pg = g + l1 * np.sign(x)
    at_zero = x == 0.0
    pg[at_zero] = np.sign(g[at_zero]) * np.maximum(np.abs(g[at_zero]) - l1[at_zero], 0.0)
    return pg


def _owlqn(fun: Callable[[np.ndarray], tuple[float, np.ndarray]], x: np.ndarray, l1: np.ndarray, max_iter: int,
           gtol: float, memory: int = 10) -> tuple[np.ndarray, int]:
    """Minimise ``fun(x)[0] + sum l1 |x|`` by OWL-QN (Andrew and Gao 2007): L-BFGS directions on the
    pseudo-gradient, kept in the orthant of the current point, with a backtracking line search that
    projects every trial point onto that orthant. Stops when the largest pseudo-gradient entry is at
    most ``gtol``, after ``max_iter`` iterations, or when a line search finds no decrease.

    Returns
    -------
    x, n_iter
    """
    f, g = fun(x)
    value = f + float(l1 @ np.abs(x))
    corrections = Corrections(x.size, memory)
    direction = np.empty_like(x)
    for n_iter in range(max_iter):
        pg = _pseudo_gradient(x, g, l1)
        if np.max(np.abs(pg), initial=0.0) <= gtol:
            return x, n_iter
        corrections.apply(pg, direction)
        direction[direction * pg >= 0.0] = 0.0     # only where it descends along the pseudo-gradient
        orthant = np.where(x != 0.0, np.sign(x), -np.sign(pg))
        step = 1.0 if len(corrections) else 1.0 / max(float(np.max(np.abs(direction))), 1.0)
        for _ in range(50):
            trial = x + step * direction
            trial[np.sign(trial) != orthant] = 0.0
            f_trial, g_trial = fun(trial)
            value_trial = f_trial + float(l1 @ np.abs(trial))
            if value_trial <= value + 1e-4 * float(pg @ (trial - x)):
                break
            step *= 0.5
        else:
            return x, n_iter
        slot = corrections.free_slot()
        s, y = corrections.s[slot], corrections.y[slot]
        np.subtract(trial, x, out=s)
        np.subtract(g_trial, g, out=y)
        sy, yy = float(s @ y), float(y @ y)
        if sy > 1e-12 * yy:
            corrections.add(slot, sy, yy)
        else:
            corrections.drop(slot)
        x, g, value = trial, g_trial, value_trial
    return x, max_iter


def minimise_diagonal(
    coef: np.ndarray, problem: RowLoss, l2: np.ndarray, l1: np.ndarray, tol: float, max_iter: int,
    refresh: int, overflow: Callable[[], None],
) -> tuple[np.ndarray, int, bool]:
    """Minimise ``(problem(c) + sum l2/2 c^2 + sum l1 |c|) / problem.n`` from ``coef``.

    Parameters
    ----------
    coef : ndarray of shape (K, C)
        The start.
    problem : RowLoss
        Or any object with its ``__call__``, ``hessian_diagonal`` and ``n`` (:mod:`slr.distributed`
        sums the partitions' losses).
    l2, l1 : ndarray of shape (C,)
        Per-column penalties (0 for the intercept's column).
    tol : float
        Stop when the largest entry of the mean objective's minimum-norm subgradient is below it.
    max_iter : int
        L-BFGS iterations in all.
    refresh : int
        L-BFGS iterations per cycle (the scaling is computed anew at each cycle's start).
    overflow : callable
        Called (to raise) when the objective is not finite at zero.

    Returns
    -------
    coef, n_iter, converged
        Never a point with a higher objective than the start.
    """
    n = problem.n
    split = bool(np.any(l1))

    def objective(c: np.ndarray) -> tuple[float, np.ndarray]:
        """The mean objective and the gradient of its smooth part."""
        value, grad = problem(c)
        value += add_ridge(c, l2, grad)
        if split:
            value += sum(float(l1 @ np.abs(row)) for row in c)
        grad /= n
        return value / n, grad

    value, grad = objective(coef)
    if not np.isfinite(value) and np.any(coef):
        coef = np.zeros_like(coef)   # a warm start fitted to differently scaled data
        value, grad = objective(coef)
    if not np.isfinite(value):
        overflow()
    n_iter, converged = 0, True
    while _optimality(coef, grad, l1 / n) > tol:
        if n_iter >= max_iter:
            converged = False
            break
        curvature = (problem.hessian_diagonal(coef) + l2) / n
        curvature = np.maximum(curvature, _CURVATURE_FLOOR * max(float(curvature.max()), 1.0))
        root = np.sqrt(curvature)
        inner = tol / float(np.sqrt(curvature.max()))
        cycle_iter = min(refresh, max_iter - n_iter)
        if split:
            def scaled(u: np.ndarray) -> tuple[float, np.ndarray]:
                """The smooth part of the mean objective, and its gradient, in scaled variables."""
                c = u.reshape(coef.shape) / root
                f, g = problem(c)
                f += 0.5 * float(np.sum(l2 * c * c))
                g += l2 * c
                return f / n, (g / root).ravel() / n

            x, nit = _owlqn(scaled, (coef * root).ravel(), (l1 / n / root).ravel(), cycle_iter, inner,
                            history_size(coef.size, 10))
            candidate = x.reshape(coef.shape) / root
        else:
            def smooth(c: np.ndarray, out: np.ndarray) -> float:
                """The mean objective at ``c`` (flat), its gradient written to ``out``."""
                f, g = objective(c.reshape(coef.shape))
                out[...] = g.ravel()
                return f

            result = minimise_lbfgs(smooth, coef.ravel(), scale=root.ravel(), memory=history_size(coef.size, 10),
                                    max_iter=cycle_iter, gtol=inner, ftol=1e-15, max_evaluations=20 * refresh)
            candidate = result.x.reshape(coef.shape)
            nit = result.n_iter
            del result   # the optimiser's buffers
        n_iter += nit
        new_value, new_grad = objective(candidate)
        if not new_value < value:
            # no progress in a whole cycle: numerically converged as far as possible
            converged = _optimality(coef, grad, l1 / n) <= tol
            break
        coef, value, grad = candidate, new_value, new_grad
    return coef, n_iter, converged
