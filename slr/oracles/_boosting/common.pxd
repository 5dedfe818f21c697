# cython: language_level=3
"""Declarations the split searches and the growth of ``slr.oracles._boosting`` share.

A split search (exact: :mod:`.splitting`; on histograms: :mod:`.histogram`) scans the
candidate thresholds of a node into a :c:type:`SplitScan` and hands the growth
(:mod:`.growth`) the winner as a :c:type:`Split`. Both searches score a candidate the same
way (:func:`children_score`) and turn their best one into a split the same way
(:func:`take_best`); these are ``inline`` and copied into each module.
"""
from libc.math cimport INFINITY

from slr._kernel_utils cimport intp_t


cdef struct Split:
    intp_t feature      # -1: no admissible split
    intp_t n_left       # rows that go left (x <= threshold); the histogram search's partition sets it
    double threshold
    double gain         # decrease of the squared loss
    intp_t bin          # histogram search: the last bin that goes left


cdef struct SplitScan:
    # the best candidate of a split search so far
    double score        # |S_L|^2 / w_L + |S_R|^2 / w_R
    intp_t feature      # -1: none yet
    intp_t n_left
    double below        # largest value going left
    double above        # smallest value going right


cdef inline void start_scan(SplitScan* best) noexcept nogil:
    """No candidate yet: any finite score replaces this one."""
    best.score = -INFINITY
    best.feature = -1


cdef inline double children_score(const double* left_sum, const double* total, intp_t K,
                                  double left_weight, double right_weight) noexcept nogil:
    """``|S_L|^2 / w_L + |S_R|^2 / w_R`` with ``S_R = total - S_L`` (S the children's weighted
    target sums, w their weights: row counts without weights)."""
    cdef intp_t k
    cdef double diff, left = 0.0, right = 0.0
    for k in range(K):
        left += left_sum[k] * left_sum[k]
        diff = total[k] - left_sum[k]
        right += diff * diff
    return left / left_weight + right / right_weight


cdef inline double midpoint(double below, double above) noexcept nogil:
    """A threshold in ``[below, above)``: their midpoint, computed without overflow."""
    cdef double middle = below * 0.5 + above * 0.5
    if middle >= above or middle < below:
        return below
    return middle


cdef inline void take_best(const SplitScan* best, const double* total, intp_t K, double weight,
                           Split* out) noexcept nogil:
    """Make the search's best candidate the node's split if it lowers the (weighted) squared
    loss: its gain over the unsplit node of weight ``w``, ``score - |S|^2 / w``, must be
    positive. Otherwise ``out.feature`` stays -1."""
    cdef intp_t k
    cdef double parent = 0.0, gain
    if best.feature < 0:
        return
    for k in range(K):
        parent += total[k] * total[k]
    gain = best.score - parent / weight
    if not (gain > 0.0):
        return
    out.feature = best.feature
    out.n_left = best.n_left
    out.threshold = midpoint(best.below, best.above)
    out.gain = gain


cdef inline void add_column_sums(const double[:, ::1] G, double* total) noexcept nogil:
    """``total += G.sum(axis=0)``, summed row after row (a node's gradient sum)."""
    cdef intp_t i, k
    for i in range(G.shape[0]):
        for k in range(G.shape[1]):
            total[k] += G[i, k]
