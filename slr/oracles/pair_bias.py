"""The bias of a pairwise logistic problem in factored form, and its loss evaluated factor-wise.

The structured learner's pairwise problem has ``L^2`` pair classes and the bias
``b_e(a L + b) = left_e(a) + right_e(b)`` with ``left_e = lambda_e(y_i) / eps`` and
``right_e = lambda_e(y_j) / eps`` (docs/design.md section 1). :class:`PairBias` carries the two
``(N, L)`` factors; any oracle can use it as the dense ``(N, L^2)`` array (``np.asarray``).

When the function's scores ``s`` are the same for every edge (a constant table, or a linear
function of features that are the same on every edge, as on chains with a constant edge
feature), the partition function factors:

    Z_e = sum_{a,b} exp(s_ab + left_e(a) + right_e(b)) = sum_a U_ea (V S^T)_ea,
    S = exp(s), U = exp(left), V = exp(right)

(each with its maximum taken out), so the loss and its gradient cost two ``(N, L) x (L, L)``
matrix products and ``2 N L`` exponentials instead of ``N L^2`` exponentials. A fixed table
``offset(a, b)`` common to every row (the allowed transitions' exclusion of forbidden pairs,
:mod:`slr.transitions`) joins the scores: ``S = exp(s + offset)``.
:class:`PairLoss` does this where :func:`factorable` holds (the factors of no row spread so
widely that ``Z_e`` could underflow); elsewhere the dense loss is used.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from slr.oracles.targets import is_soft, target_totals

__all__ = ["PairBias", "PairLoss", "factorable"]

# The factored sums are used when every row's factors span at most this many nats
# (range(left_e) + range(right_e)): the term of Z_e at the largest score is then at least
# exp(-_FACTOR_RANGE) whatever the scores, so no Z_e underflows (terms that do are smaller than
# it by exp(400) or more), and the Hessian's 1 / Z_e^2 stays below exp(2 * _FACTOR_RANGE).
_FACTOR_RANGE = 300.0


class PairBias:
    """Bias of shape ``(N, L * L)`` whose column ``a * L + b`` is ``left[:, a] + right[:, b]``
    (``+ offset[a, b]`` with an offset).

    Parameters
    ----------
    left, right : array-like of shape (N, L)
        Finite factors.
    offset : array-like of shape (L, L), optional
        A finite table added to every row (its spread is not counted in :meth:`row_spans`: the
        factored loss takes it with the scores).

    Raises
    ------
    ValueError
        If the factors are not 2-D of one shape, or hold NaN or infinite values.
    """

    def __init__(self, left: Any, right: Any, offset: Any = None) -> None:
        left = np.ascontiguousarray(left, dtype=np.float64)
        right = np.ascontiguousarray(right, dtype=np.float64)
        if left.ndim != 2 or left.shape != right.shape:
            raise ValueError(f"left and right must be 2-D of one shape (N, L), got {left.shape} and {right.shape}")
        if not (np.all(np.isfinite(left)) and np.all(np.isfinite(right))):
            raise ValueError("bias contains NaN or infinite values")
        if left.size:
            with np.errstate(over="ignore"):
                extremes = (left.max(axis=1) + right.max(axis=1), left.min(axis=1) + right.min(axis=1))
            if not all(np.all(np.isfinite(e)) for e in extremes):
                raise ValueError("bias contains NaN or infinite values (left + right overflows float64)")
        if offset is not None:
            offset = np.ascontiguousarray(offset, dtype=np.float64)
            if offset.shape != (left.shape[1],) * 2 or not np.all(np.isfinite(offset)):
                raise ValueError(f"offset must be a finite ({left.shape[1]}, {left.shape[1]}) table, got shape "
                                 f"{offset.shape}")
        self.left, self.right, self.offset = left, right, offset

    @property
    def n_states(self) -> int:
        return self.left.shape[1]

    @property
    def shape(self) -> tuple[int, int]:
        return self.left.shape[0], self.n_states**2

    @property
    def ndim(self) -> int:
        return 2

    def row_spans(self) -> np.ndarray:
        """``max - min`` of every row of the dense bias, shape (N,)."""
        return np.ptp(self.left, axis=1) + np.ptp(self.right, axis=1) if self.left.size else np.zeros(len(self.left))

    def rows_equal(self) -> bool:
        """Whether every row's factors are those of the first row (then the dense rows are equal;
        dense rows can also be equal with factors shifted by opposite constants)."""
        return bool(np.all(self.left == self.left[0]) and np.all(self.right == self.right[0]))

    def row(self, n: int) -> np.ndarray:
        """Row ``n`` of the dense bias, shape (L * L,)."""
        row = self.left[n][:, None] + self.right[n][None, :]
        return (row if self.offset is None else row + self.offset).ravel()

    def at(self, labels: np.ndarray) -> np.ndarray:
        """The dense bias at column ``labels[n]`` of each row ``n``, shape (N,)."""
        rows = np.arange(labels.shape[0])
        L = self.n_states
        values = self.left[rows, labels // L] + self.right[rows, labels % L]
        return values if self.offset is None else values + self.offset.ravel()[labels]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        dense = self.left[:, :, None] + self.right[:, None, :]
        if self.offset is not None:
            dense += self.offset
        dense = dense.reshape(self.shape)
        return dense if dtype is None else dense.astype(dtype, copy=False)


class PairLoss:
    """The summed biased logistic loss of scores shared by every row, ``s = coef @ x``.

    The same interface as the Linear oracle's dense loss: ``__call__(coef)`` returns the loss
    and its gradient with respect to ``coef`` (K, D), ``hessian_blocks(coef)`` the per-class
    diagonal Hessian blocks (K, D, D). Use it where :func:`factorable` holds.

    Parameters
    ----------
    row : ndarray of shape (D,)
        The features of every row (with a trailing 1 for an intercept).
    bias : PairBias
    labels : ndarray of shape (N,), int, or (N, L * L), soft targets (rows summing to 1)
    sample_weight : ndarray of shape (N,) or None, default=None
        Row weights; ``n`` is then their sum (the number of rows without).
    """

    def __init__(self, row: np.ndarray, bias: PairBias, labels: np.ndarray,
                 sample_weight: np.ndarray | None = None) -> None:
        self.n: float   # the row count, or the weights' sum
        self.n, self.k = bias.shape
        self.L = bias.n_states
        self.row = row
        self.weights = sample_weight
        self.counts = target_totals(labels, self.k, sample_weight)
        if is_soft(labels):
            # <q_e, b_e> = <q_e's marginal of a, left_e> + <q_e's marginal of b, right_e>
            pairs = labels.reshape(-1, self.L, self.L)
            truth = (np.einsum("nab,na->n", pairs, bias.left)
                     + np.einsum("nab,nb->n", pairs, bias.right))
            if bias.offset is not None:
                truth += labels @ bias.offset.ravel()
        else:
            truth = bias.at(labels)
        left_top = bias.left.max(axis=1)
        right_top = bias.right.max(axis=1)
        self.U = np.exp(bias.left - left_top[:, None])
        self.V = np.exp(bias.right - right_top[:, None])
        self.table = None if bias.offset is None else bias.offset.ravel()
        if sample_weight is None:
            self.truth_bias = float(truth.sum())
            self.offset = float(np.sum(left_top + right_top))   # log Z_e = log(sum ...) + tops + max(s)
        else:
            self.n = float(sample_weight.sum())
            self.truth_bias = float(sample_weight @ truth)
            self.offset = float(sample_weight @ (left_top + right_top))

    def _row_scale(self, Z: np.ndarray, power: int = 1) -> np.ndarray:
        """``w_e / Z_e^power`` as a column (``1 / Z_e^power`` without weights)."""
        inv = 1.0 / Z if power == 1 else 1.0 / (Z * Z)
        return (inv if self.weights is None else self.weights * inv)[:, None]

    def _factors(self, coef: np.ndarray):
        """The scores, ``S = exp(s - max s)`` as (L, L), ``max s`` and ``Z_e`` without its offsets."""
        scores = coef @ self.row
        shifted = scores if self.table is None else scores + self.table
        top = float(shifted.max())
        S = np.exp(shifted - top).reshape(self.L, self.L)
        Z = np.einsum("na,na->n", self.U, self.V @ S.T)
        return scores, S, top, Z

    def __call__(self, coef: np.ndarray) -> tuple[float, np.ndarray]:
        scores, S, top, Z = self._factors(coef)
        if self.weights is None:
            log_z = float(np.sum(np.log(Z)))
            # sum_e p_e(ab) = S_ab sum_e U_ea V_eb / Z_e
            expected = (S * (self.U.T @ (self.V / Z[:, None]))).ravel()
        else:
            log_z = float(self.weights @ np.log(Z))
            expected = (S * (self.U.T @ (self.V * self._row_scale(Z)))).ravel()
        loss = log_z + self.offset + self.n * top - float(self.counts @ scores) - self.truth_bias
        return loss, np.outer(expected - self.counts, self.row)

    def hessian_blocks(self, coef: np.ndarray) -> np.ndarray:
        """``sum_e w_e p_e(k)(1 - p_e(k)) x x^T`` per class ``k``, shape (K, D, D)."""
        _, S, _, Z = self._factors(coef)
        if self.weights is None:
            inv = 1.0 / Z[:, None]
            once, twice = inv, inv * inv
        else:
            once, twice = self._row_scale(Z), self._row_scale(Z, 2)
        expected = S * (self.U.T @ (self.V * once))
        squares = S * S * ((self.U * self.U).T @ (self.V * self.V * twice))
        weights = (expected - squares).ravel()
        return weights[:, None, None] * np.outer(self.row, self.row)[None]


def factorable(features: np.ndarray, bias: Any) -> bool:
    """Whether :class:`PairLoss` applies: a PairBias whose rows' factors span at most
    ``_FACTOR_RANGE`` nats, on rows that all have the same features."""
    return (isinstance(bias, PairBias) and float(bias.row_spans().max(initial=0.0)) <= _FACTOR_RANGE
            and bool(np.all(features == features[0])))
