# cython: language_level=3
"""Histograms of binned features and the split search on them (``splitter="hist"``).

The features are binned once per fit (:func:`slr.oracles._boosting.binning.bin_features`:
at most 255 bins a feature, ordered by value). A node's histogram holds, per feature and
bin, the gradient sum of its rows and their weight, the row count without weights
(``K + 1`` doubles); its best split
(:meth:`Histograms.best_split`) lies between two consecutive bins holding rows of the
node. :class:`Histograms` keeps one tree's histograms in a fixed pool of slots, so that
the growth (:class:`slr.oracles._boosting.growth._HistGrower`) can build the smaller
child's histogram from its rows and obtain the larger child's by subtraction from the
parent's.
"""
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

import numpy as np

from slr._kernel_utils cimport intp_t
from slr.oracles._boosting.common cimport (
    Split, SplitScan, children_score, start_scan, take_best,
)

cdef enum:
    # Histograms of one tree's growth take at most this much memory (beyond it, nodes are
    # searched from the scratch slot and their children's built without subtraction).
    POOL_BYTES = 128 * 1024 * 1024


cdef class Histograms:
    """The histograms of one tree's growth, in a pool of slots, and their split search.

    Parameters
    ----------
    codes : ndarray of shape (d, n), uint8
        ``codes[f, i]``: the bin of row ``i`` in feature ``f``.
    n_bins : ndarray of shape (d,), intp
    bin_low, bin_high : ndarray of shape (d, max(n_bins)), float64
        Smallest and largest value of each bin.
    n_targets : int
        ``K``, the length of the gradient vectors.
    max_alive : int
        At most this many histograms are held at once (the pool has fewer slots when
        they would take more than ``POOL_BYTES``). Beyond the pool, :meth:`acquire` hands
        out one scratch slot.
    """

    def __cinit__(self, const unsigned char[:, ::1] codes, const intp_t[::1] n_bins,
                  const double[:, ::1] bin_low, const double[:, ::1] bin_high,
                  intp_t n_targets, intp_t max_alive):
        cdef intp_t n = codes.shape[1]
        self.codes, self.n_bins, self.bin_low, self.bin_high = codes, n_bins, bin_low, bin_high
        self.n_targets = n_targets
        offsets = np.zeros(codes.shape[0] + 1, dtype=np.intp)
        np.cumsum(n_bins, out=offsets[1:])
        self.bin_offset = offsets
        self.size = max(offsets[codes.shape[0]] * (n_targets + 1), 1)
        self.n_slots = min(max_alive, max(2, POOL_BYTES // (self.size * sizeof(double))))
        self.free_slots = np.arange(self.n_slots - 1, -1, -1, dtype=np.intp)
        self.n_free = self.n_slots
        self.ordered = np.empty((max(n, 1), n_targets))
        self.left_sum = np.zeros(n_targets)
        self.spill = np.empty(max(n, 1), dtype=np.intp)
        self.pool = <double*> malloc((self.n_slots + 1) * self.size * sizeof(double))
        if self.pool == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.pool)

    cdef double* at(self, intp_t slot) noexcept nogil:
        """The histogram in ``slot``."""
        return self.pool + slot * self.size

    cdef intp_t acquire(self) noexcept nogil:
        """A free slot, or the scratch slot when the pool is exhausted."""
        if self.n_free == 0:
            return self.n_slots
        self.n_free -= 1
        return self.free_slots[self.n_free]

    cdef void release(self, intp_t slot) noexcept nogil:
        if slot < self.n_slots:
            self.free_slots[self.n_free] = slot
            self.n_free += 1

    cdef bint pooled(self, intp_t slot) noexcept nogil:
        """Whether ``slot`` is one of the pool's (not the scratch slot, which the next
        :meth:`acquire` may hand out again)."""
        return slot < self.n_slots

    cdef void build(self, intp_t slot, const double[:, ::1] G, const double[::1] W,
                    const intp_t[::1] rows, intp_t start, intp_t end) noexcept nogil:
        """The histogram of the rows ``rows[start:end]`` for the targets ``G`` and weights
        ``W``, in ``slot``."""
        cdef intp_t K = self.n_targets, width = K + 1, f, r, k
        cdef double* hist = self.at(slot)
        cdef double* entry
        cdef const unsigned char* column
        memset(hist, 0, self.size * sizeof(double))
        for r in range(start, end):
            for k in range(K):
                self.ordered[r - start, k] = G[rows[r], k]
        for f in range(self.codes.shape[0]):
            column = &self.codes[f, 0]
            if K == 1:
                for r in range(start, end):
                    entry = hist + (self.bin_offset[f] + column[rows[r]]) * 2
                    entry[0] += self.ordered[r - start, 0]
                    entry[1] += W[rows[r]]
            else:
                for r in range(start, end):
                    entry = hist + (self.bin_offset[f] + column[rows[r]]) * width
                    for k in range(K):
                        entry[k] += self.ordered[r - start, k]
                    entry[K] += W[rows[r]]

    cdef void subtract(self, intp_t slot, intp_t other) noexcept nogil:
        """The histogram in ``slot`` minus the one in ``other`` (in ``slot``)."""
        cdef intp_t i
        cdef double* minuend = self.at(slot)
        cdef double* subtrahend = self.at(other)
        for i in range(self.size):
            minuend[i] -= subtrahend[i]

    cdef void best_split(self, intp_t slot, double weight, const double* total, double min_leaf,
                         Split* out) noexcept nogil:
        """The exact search's best split (:func:`slr.oracles._boosting.splitting.best_split`)
        on the histogram in ``slot`` of a node of weight ``weight`` and gradient sum
        ``total``: the candidates lie between consecutive bins that hold rows of the node
        of positive weight (rows of weight 0 in other bins go right; they do not change the
        loss); the threshold is the midpoint of the largest value of the left bin and the
        smallest of the right one (their values over all rows of the fit). ``out.bin`` is
        the last bin that goes left; :meth:`partition` sets ``out.n_left``."""
        cdef intp_t K = self.n_targets, width = K + 1, f, b, k, previous
        cdef double count, score, left_weight
        cdef const double* hist = self.at(slot)
        cdef double* left_sum = &self.left_sum[0]
        cdef const double* entry
        cdef SplitScan best
        out.feature = -1
        if weight < 2 * min_leaf:
            return
        start_scan(&best)
        best.n_left = 0
        if K == 1:
            self._scan_scalar(hist, weight, total[0], min_leaf, &best, out)
        for f in range(self.codes.shape[0] if K > 1 else 0):
            memset(left_sum, 0, K * sizeof(double))
            left_weight = 0.0
            previous = -1
            for b in range(self.n_bins[f]):
                entry = hist + (self.bin_offset[f] + b) * width
                count = entry[K]
                if count == 0.0:
                    continue
                if previous >= 0 and left_weight >= min_leaf:
                    score = children_score(left_sum, total, K, left_weight, weight - left_weight)
                    if score > best.score:
                        best.score = score
                        best.feature = f
                        best.below = self.bin_high[f, previous]
                        best.above = self.bin_low[f, b]
                        out.bin = previous
                for k in range(K):
                    left_sum[k] += entry[k]
                left_weight += count
                previous = b
                if not (weight - left_weight >= min_leaf and weight - left_weight > 0.0):
                    break  # no later candidate leaves enough weight on the right
        take_best(&best, total, K, weight, out)

    cdef void _scan_scalar(self, const double* hist, double weight, double total,
                           double min_leaf, SplitScan* best, Split* out) noexcept nogil:
        """The candidates of :meth:`best_split` for scalar targets (``K == 1``), with the
        running sums in registers: the scan of every bin of every feature is most of the
        time of a per-class tree."""
        cdef intp_t f, b, previous
        cdef double n_rows = weight, least = min_leaf, count, n_left, left, right, score
        cdef const double* entry
        for f in range(self.codes.shape[0]):
            entry = hist + 2 * self.bin_offset[f]
            left = 0.0
            n_left = 0.0
            previous = -1
            for b in range(self.n_bins[f]):
                count = entry[2 * b + 1]
                if count == 0.0:
                    continue
                if previous >= 0 and n_left >= least:
                    right = total - left
                    score = left * left / n_left + right * right / (n_rows - n_left)
                    if score > best.score:
                        best.score = score
                        best.feature = f
                        best.below = self.bin_high[f, previous]
                        best.above = self.bin_low[f, b]
                        out.bin = previous
                left += entry[2 * b]
                n_left += count
                previous = b
                if not (n_rows - n_left >= least and n_rows - n_left > 0.0):
                    break

    cdef void partition(self, intp_t[::1] rows, intp_t start, intp_t end,
                        Split* split) noexcept nogil:
        """Stable partition of ``rows[start:end]``: those with ``bin <= split.bin`` in the
        split's feature first; sets ``split.n_left`` to their number."""
        cdef intp_t p, row, kept = start, spilled = 0
        cdef const unsigned char* column = &self.codes[split.feature, 0]
        cdef unsigned char last_left = <unsigned char> split.bin
        for p in range(start, end):
            row = rows[p]
            if column[row] <= last_left:
                rows[kept] = row
                kept += 1
            else:
                self.spill[spilled] = row
                spilled += 1
        memcpy(&rows[kept], &self.spill[0], spilled * sizeof(intp_t))
        split.n_left = kept - start
