# cython: language_level=3
"""The exact split search (``splitter="exact"``) on every feature's sorted rows.

Every feature is sorted once per round (:func:`sorted_orders`); a node's rows stay sorted
inside a contiguous segment of every feature's order, split by a stable partition
(:func:`partition`), so the best split of a node (:func:`best_split`) costs
``O(D_in n_node D_out)`` with running (prefix) sums of the gradient vectors (footnote 3
of the chapter).
"""
from libc.string cimport memset

import numpy as np

from slr._kernel_utils cimport intp_t
from slr.oracles._boosting.common cimport (
    Split, SplitScan, add_column_sums, children_score, start_scan, take_best,
)


def sorted_orders(X) -> np.ndarray:
    """``(d, n)`` row orders sorting each feature of ``X`` (stable: ties keep row order)."""
    return np.ascontiguousarray(np.argsort(X, axis=0, kind="stable").T, dtype=np.intp)


cdef void _scan_feature(const double[:, ::1] X, const double[:, ::1] G, const double[::1] W,
                        const intp_t[:, ::1] order, intp_t f, intp_t start, intp_t end,
                        double min_leaf, const double* total, double total_weight,
                        double* left_sum, SplitScan* best) noexcept nogil:
    """Try every threshold of feature ``f`` on the rows ``order[f, start:end]``.

    One left-to-right pass with the running sums of the gradient vectors and of the
    weights; a candidate replaces ``best`` only if it scores strictly higher, so ties keep
    the earlier one.
    """
    cdef intp_t K = G.shape[1]
    cdef intp_t p, k, row
    cdef double value, next_value, score, left_weight = 0.0, right_weight
    memset(left_sum, 0, K * sizeof(double))
    for p in range(start, end - 1):
        row = order[f, p]
        for k in range(K):
            left_sum[k] += G[row, k]
        left_weight += W[row]
        right_weight = total_weight - left_weight
        if not (right_weight >= min_leaf and right_weight > 0.0):
            break  # the weights are nonnegative: no later candidate leaves enough on the right
        if not (left_weight >= min_leaf and left_weight > 0.0):
            continue
        value = X[row, f]
        next_value = X[order[f, p + 1], f]
        if not (next_value > value):
            continue  # no threshold separates equal values
        score = children_score(left_sum, total, K, left_weight, right_weight)
        if score > best.score:
            best.score = score
            best.feature = f
            best.n_left = p - start + 1
            best.below = value
            best.above = next_value


cdef void best_split(const double[:, ::1] X, const double[:, ::1] G, const double[::1] W,
                     const intp_t[:, ::1] order, intp_t start, intp_t end, double min_leaf,
                     const double* total, double total_weight, double* left_sum,
                     Split* out) noexcept nogil:
    """Best split of the node whose rows are ``order[f, start:end]`` for every f.

    ``G`` holds the rows' weighted targets ``w_i r_i`` and ``W`` their weights ``w_i``
    (ones: every row counts once). Minimising the weighted squared distance
    ``sum_i w_i ||r_i - t||^2`` to the children's weighted means is maximising
    ``|S_L|^2 / w_L + |S_R|^2 / w_R`` (S = sum of ``G`` over the child, ``total`` the
    node's; w = the child's weight, ``total_weight`` the node's). Ties keep the first
    candidate (lowest feature, lowest threshold). ``out.feature`` is -1 when no split
    leaves a positive weight of at least ``min_leaf`` on each side and lowers the loss.
    ``left_sum`` is scratch of ``G.shape[1]`` entries.
    """
    cdef intp_t K = G.shape[1], f
    cdef SplitScan best
    out.feature = -1
    out.n_left = 0
    out.threshold = 0.0
    out.gain = 0.0
    if total_weight < 2 * min_leaf or end - start < 2:
        return
    start_scan(&best)
    for f in range(X.shape[1]):
        _scan_feature(X, G, W, order, f, start, end, min_leaf, total, total_weight, left_sum,
                      &best)
    take_best(&best, total, K, total_weight, out)


def find_best_split(const double[:, ::1] X, const double[:, ::1] G, double min_leaf,
                    weights=None):
    """Best root split of ``X`` for the gradient vectors ``G`` (exposed for tests).

    Parameters
    ----------
    X : ndarray of shape (n, d), float64
    G : ndarray of shape (n, K), float64
        The weighted targets ``w_i r_i``.
    min_leaf : float
        Minimum weight (without weights: number of rows, at least 1) in each child.
    weights : ndarray of shape (n,), float64, or None
        Row weights (None: ones).

    Returns
    -------
    feature : int
        -1 if no split lowers the squared loss.
    threshold : float
        Rows with ``x[feature] <= threshold`` go left.
    gain : float
        Decrease of ``sum ||g - mean||^2``.
    """
    cdef const intp_t[:, ::1] order = sorted_orders(np.asarray(X))
    cdef double[::1] total = np.zeros(G.shape[1])
    cdef double[::1] left_sum = np.zeros(G.shape[1])
    cdef const double[::1] W = np.ones(X.shape[0]) if weights is None else weights
    cdef double total_weight = 0.0
    cdef Split split
    cdef intp_t i
    if weights is None:
        min_leaf = max(min_leaf, 1.0)
    with nogil:
        add_column_sums(G, &total[0])
        for i in range(W.shape[0]):
            total_weight += W[i]
        best_split(X, G, W, order, 0, X.shape[0], min_leaf, &total[0], total_weight,
                   &left_sum[0], &split)
    return int(split.feature), float(split.threshold), float(split.gain)


cdef void _partition_segment(intp_t[:, ::1] order, intp_t f, intp_t start, intp_t end,
                             const unsigned char[::1] goes_left, intp_t[::1] spill) noexcept nogil:
    """Stable partition of ``order[f, start:end]``: the rows marked in ``goes_left`` first."""
    cdef intp_t p, row, n_kept = start, n_spilled = 0
    for p in range(start, end):
        row = order[f, p]
        if goes_left[row]:
            order[f, n_kept] = row
            n_kept += 1
        else:
            spill[n_spilled] = row
            n_spilled += 1
    for p in range(n_spilled):
        order[f, n_kept + p] = spill[p]


cdef void partition(intp_t[:, ::1] order, intp_t split_feature, intp_t start, intp_t end,
                    intp_t n_left, unsigned char[::1] goes_left,
                    intp_t[::1] spill) noexcept nogil:
    """Split the segment ``start:end`` of every feature's order into the two children.

    The left child's rows are the first ``n_left`` of the split feature's segment; in
    every other feature's segment they move before the right child's rows, both keeping
    their order, so each child's rows stay sorted by every feature. ``goes_left`` (one
    flag per row) is all zero on entry and on return; ``spill`` is scratch of a row each.
    """
    cdef intp_t f, p
    for p in range(start, start + n_left):
        goes_left[order[split_feature, p]] = 1
    for f in range(order.shape[0]):
        if f != split_feature:
            _partition_segment(order, f, start, end, goes_left, spill)
    for p in range(start, start + n_left):
        goes_left[order[split_feature, p]] = 0
