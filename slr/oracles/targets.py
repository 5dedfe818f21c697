"""What a logistic problem is fitted to: hard labels or soft targets, and row weights.

Every oracle minimises the weighted biased logistic loss

    sum_k w_k [ log sum_y exp(s_k(y) + b_k(y)) - sum_y q_k(y) (s_k(y) + b_k(y)) ]

where the target ``q_k`` is a distribution over the ``K`` classes: ``onehot(y_k)`` for an
integer label, or a row of a soft-target array; ``w_k >= 0`` is the row's weight (1 by
default). A row with weight ``w`` counts as ``w`` copies of it; a soft row counts as its
one-hot rows, class ``c`` with weight ``q_k(c)``. The gradient with respect to the scores is
``w_k (softmax(s_k + b_k) - q_k)``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["TARGET_SUM_TOL", "check_sample_weight", "check_targets", "is_soft", "target_totals"]

#: Largest ``|sum_y q_k(y) - 1|`` accepted for a row of soft targets. Loose enough for
#: probabilities computed in single precision; rows are divided by their sums after the check.
TARGET_SUM_TOL = 1e-6


def is_soft(labels: np.ndarray) -> bool:
    """Whether validated ``labels`` are soft targets (2-D) rather than integer classes (1-D)."""
    return labels.ndim == 2


def check_targets(labels: Any, n_rows: int, n_classes: int) -> np.ndarray:
    """Validate integer labels (N,) or soft targets (N, K).

    Parameters
    ----------
    labels : array-like of shape (N,) or (N, K)
        Integer classes in ``[0, K)`` (floats holding integers are accepted), or rows of
        nonnegative finite numbers that sum to 1 within :data:`TARGET_SUM_TOL`.
    n_rows, n_classes : int
        ``N`` and ``K`` of the problem.

    Returns
    -------
    ndarray
        C-contiguous int64 labels of shape (N,), or float64 targets of shape (N, K), each
        row divided by its sum (one-hot rows are unchanged).

    Raises
    ------
    ValueError
        Naming ``labels``: wrong shape or dtype, labels outside ``[0, K)``, or soft targets
        that are not finite, negative, or whose rows do not sum to 1.
    """
    labels_arr = np.asarray(labels)
    if labels_arr.ndim == 2:
        return _check_soft(labels_arr, n_rows, n_classes)
    if labels_arr.ndim != 1:
        raise ValueError(
            f"labels must be 1-D (N,) classes or 2-D (N, K) soft targets, got shape {labels_arr.shape}")
    if labels_arr.shape[0] != n_rows:
        raise ValueError(f"labels must have one entry per row of features ({n_rows}), got {labels_arr.shape[0]}")
    if labels_arr.dtype.kind not in "iu":
        if labels_arr.dtype.kind == "f" and np.all(labels_arr == np.round(labels_arr)):
            labels_arr = labels_arr.astype(np.int64)
        else:
            raise ValueError(f"labels must be integers, got dtype {labels_arr.dtype}")
    labels_arr = np.ascontiguousarray(labels_arr, dtype=np.int64)
    if labels_arr.min() < 0 or labels_arr.max() >= n_classes:
        raise ValueError(f"labels must lie in [0, {n_classes}) (bias has {n_classes} columns)")
    return labels_arr


def _check_soft(targets: np.ndarray, n_rows: int, n_classes: int) -> np.ndarray:
    if targets.shape != (n_rows, n_classes):
        raise ValueError(
            f"labels given as soft targets must have the shape of bias ({n_rows}, {n_classes}), "
            f"got {targets.shape}")
    if targets.dtype.kind not in "iuf":
        raise ValueError(f"labels given as soft targets must be numbers, got dtype {targets.dtype}")
    targets = np.ascontiguousarray(targets, dtype=np.float64)
    if not np.all(np.isfinite(targets)):
        raise ValueError("labels given as soft targets contain NaN or infinite values")
    if targets.min() < 0:
        raise ValueError(f"labels given as soft targets must be nonnegative, got {targets.min():.3g}")
    sums = targets.sum(axis=1)
    worst = float(np.max(np.abs(sums - 1.0)))
    if worst > TARGET_SUM_TOL:
        raise ValueError(
            f"labels given as soft targets must have rows summing to 1 (within {TARGET_SUM_TOL:g}); "
            f"a row sums to {sums[np.argmax(np.abs(sums - 1.0))]:.9g}")
    return targets / sums[:, None]


def check_sample_weight(sample_weight: Any, n_rows: int, row: str = "row") -> np.ndarray | None:
    """Validate row weights: None (every row weighs 1) or (N,) finite, nonnegative, not all 0.

    ``row`` is what one weight stands for in the error message (an oracle's row, a learner's
    example).

    Returns
    -------
    ndarray of shape (N,), float64, or None

    Raises
    ------
    ValueError
        Naming ``sample_weight``.
    """
    if sample_weight is None:
        return None
    weights = np.asarray(sample_weight)
    if weights.dtype.kind not in "iuf" or weights.ndim != 1 or weights.shape[0] != n_rows:
        raise ValueError(
            f"sample_weight must be a 1-D array of {n_rows} numbers (one per {row}), got "
            f"shape {weights.shape} and dtype {weights.dtype}")
    weights = np.ascontiguousarray(weights, dtype=np.float64)
    if not np.all(np.isfinite(weights)):
        raise ValueError("sample_weight contains NaN or infinite values")
    if weights.min() < 0:
        raise ValueError(f"sample_weight must be nonnegative, got {weights.min():.3g}")
    if not weights.sum() > 0:
        raise ValueError("sample_weight must have a positive sum (every row weighs 0)")
    return weights


def target_totals(labels: np.ndarray, n_classes: int, sample_weight: np.ndarray | None) -> np.ndarray:
    """``sum_k w_k q_k``: the (weighted) count of each class, shape (K,), float64."""
    if is_soft(labels):
        return labels.sum(axis=0) if sample_weight is None else sample_weight @ labels
    return np.bincount(labels, weights=sample_weight, minlength=n_classes).astype(np.float64)
