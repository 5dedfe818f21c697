"""Feature matrices, dense or sparse: the one checker every entry point uses, and the few operations
the oracles and solvers need on both kinds.

A feature matrix is a C-contiguous float64 ``ndarray`` or a ``scipy.sparse.csr_array`` of float64
with canonical (sorted, duplicate-free) indices. Sparse matrices stay sparse through the learner:
nothing here allocates more than the stored entries, a row-sized or a column-sized vector.
"""
from __future__ import annotations

from typing import Any, Sequence, TypeGuard, Union

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg

__all__ = ["FeatureMatrix", "DENSE_BUDGET", "check_feature_matrix", "column_max_abs", "densified",
           "first_row", "is_sparse", "rows_equal", "rows_times", "scale_columns", "scale_rows", "spectral_norm",
           "squared", "stack_rows", "with_ones_column"]

FeatureMatrix = Union[np.ndarray, sp.csr_array]

#: Largest dense copy (in float64 entries, 2 GiB) that an oracle without sparse support makes of
#: sparse features; beyond it the oracle refuses them with the size it would need.
DENSE_BUDGET = 2**28


def is_sparse(features: Any) -> TypeGuard[sp.sparray | sp.spmatrix]:
    """Whether ``features`` is a SciPy sparse matrix or array."""
    return sp.issparse(features)


def check_feature_matrix(value: Any, name: str, *, finite: bool = True) -> FeatureMatrix:
    """``value`` as a feature matrix: 2-D float64, C-contiguous if dense, canonical CSR if sparse.

    Parameters
    ----------
    value : array-like or scipy.sparse matrix of shape (N, d)
    name : str
        The argument's name, used in error messages.
    finite : bool, default=True
        Refuse NaN and infinite entries.

    Returns
    -------
    ndarray or scipy.sparse.csr_array

    Raises
    ------
    ValueError
        Naming ``name``: not numeric (complex numbers included: they would lose their imaginary
        part), not 2-D, or not finite.
    """
    if is_sparse(value):
        if value.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got shape {value.shape}")
        if value.dtype.kind == "c":
            raise ValueError(f"{name} must be real, got complex values ({value.dtype})")
        if value.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be a numeric array")
        matrix = sp.csr_array(value, dtype=np.float64, copy=value.format == "csr")
        matrix.sum_duplicates()   # sorts the indices too
        matrix.eliminate_zeros()
        if finite and not np.all(np.isfinite(matrix.data)):
            raise ValueError(f"{name} contains NaN or infinite values")
        return matrix
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a numeric array") from None
    if arr.dtype.kind == "c":
        raise ValueError(f"{name} must be real, got complex values ({arr.dtype})")
    try:
        arr = np.ascontiguousarray(arr, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a numeric array") from None
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {arr.shape}")
    if finite and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def stack_rows(blocks: Sequence[FeatureMatrix], width: int) -> FeatureMatrix:
    """The blocks one under the other: sparse if any block is sparse, else a dense array.
    ``width`` is the number of columns (used when ``blocks`` is empty)."""
    if not blocks:
        return np.zeros((0, width))
    if any(is_sparse(block) for block in blocks):
        return sp.csr_array(sp.vstack([sp.csr_array(block) for block in blocks], format="csr"))
    return np.ascontiguousarray(np.concatenate(blocks))


def column_max_abs(features: FeatureMatrix) -> np.ndarray:
    """The largest magnitude of every column (0 for empty columns), shape ``(d,)``."""
    if not is_sparse(features):
        return np.max(np.abs(features), axis=0, initial=0.0)
    largest = np.zeros(features.shape[1])
    np.maximum.at(largest, features.indices, np.abs(features.data))
    return largest


def scale_columns(features: FeatureMatrix, exponents: np.ndarray) -> FeatureMatrix:
    """``features`` with column ``j`` multiplied by ``2**exponents[j]`` (exact), as a new matrix."""
    if not is_sparse(features):
        return np.ldexp(features, exponents)
    scaled = features.copy()
    scaled.data = np.ldexp(scaled.data, exponents[scaled.indices])
    return scaled


def with_ones_column(features: FeatureMatrix) -> FeatureMatrix:
    """``features`` with a column of ones appended (an intercept's constant feature)."""
    ones = np.ones((features.shape[0], 1))
    if is_sparse(features):
        return sp.csr_array(sp.hstack([features, sp.csr_array(ones)], format="csr"))
    return np.hstack([features, ones])


def first_row(features: FeatureMatrix) -> np.ndarray:
    """Row 0 as a dense vector."""
    return features[[0]].toarray()[0] if is_sparse(features) else features[0].copy()


def rows_times(rows: np.ndarray, features: FeatureMatrix) -> np.ndarray:
    """``rows^T features`` as a dense ``(K, d)`` array, for ``rows`` of shape ``(N, K)``."""
    return np.asarray((features.T @ rows).T)


def scale_rows(features: FeatureMatrix, factors: np.ndarray) -> FeatureMatrix:
    """``features`` with row ``i`` multiplied by ``factors[i]``, as a new matrix."""
    if not is_sparse(features):
        return features * factors[:, None]
    return sp.csr_array(sp.diags_array(factors) @ features)


def spectral_norm(features: FeatureMatrix) -> float:
    """The largest singular value (ARPACK's, to rounding, for sparse matrices)."""
    if not is_sparse(features):
        return float(np.linalg.norm(features, 2))
    if features.nnz == 0:
        return 0.0
    if min(features.shape) == 1:   # one row or column: its Euclidean norm (ARPACK needs two)
        return float(np.linalg.norm(features.data))
    return float(scipy.sparse.linalg.norm(features, 2))


def squared(features: FeatureMatrix) -> FeatureMatrix:
    """The entries squared (the same sparsity)."""
    if not is_sparse(features):
        return features * features
    out = features.copy()
    out.data *= out.data
    return out


def rows_equal(features: FeatureMatrix) -> bool:
    """Whether the matrix has rows and all of them are equal."""
    if features.shape[0] == 0:
        return False
    if not is_sparse(features):
        return bool(np.all(features == features[0]))
    counts = np.diff(features.indptr)
    if np.any(counts != counts[0]):
        return False
    if counts[0] == 0:   # every row empty
        return True
    # canonical rows with the same number of entries: equal where their indices and values are
    indices, data = features.indices.reshape(-1, counts[0]), features.data.reshape(-1, counts[0])
    return bool(np.all(indices == indices[0]) and np.all(data == data[0]))


def densified(features: FeatureMatrix, name: str, who: str, alternative: str) -> np.ndarray:
    """``features`` as a dense array for code that needs one, refusing a copy beyond
    :data:`DENSE_BUDGET` entries.

    Raises
    ------
    ValueError
        Naming ``name``, ``who`` cannot take sparse features that large, the size a dense copy
        would need, and ``alternative``.
    """
    if not is_sparse(features):
        return features
    n, d = features.shape
    if n * d > DENSE_BUDGET:
        raise ValueError(
            f"{who} needs dense {name}; these sparse features ({n} x {d}, {features.nnz} stored "
            f"entries) would take {n * d * 8 / 2**30:.1f} GiB as a dense array. {alternative}")
    return np.ascontiguousarray(features.toarray())
