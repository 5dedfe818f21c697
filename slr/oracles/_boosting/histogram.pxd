# cython: language_level=3
"""Histograms of binned features and the split search on them (see histogram.pyx)."""
from slr._kernel_utils cimport intp_t
from slr.oracles._boosting.common cimport Split, SplitScan


cdef class Histograms:
    cdef const unsigned char[:, ::1] codes     # (d, n) bin of every row
    cdef const intp_t[::1] n_bins, bin_offset
    cdef const double[:, ::1] bin_low, bin_high
    cdef intp_t n_targets                      # K: gradient entries summed per bin
    cdef intp_t size                           # doubles in one histogram
    cdef intp_t n_slots                        # pooled slots; slot n_slots is the scratch
    cdef intp_t n_free
    cdef intp_t[::1] free_slots
    cdef double* pool
    cdef double[:, ::1] ordered                # the gradients of a node's rows, in order
    cdef double[::1] left_sum                  # scratch of the split search
    cdef intp_t[::1] spill                     # scratch of the partition

    cdef double* at(self, intp_t slot) noexcept nogil
    cdef intp_t acquire(self) noexcept nogil
    cdef void release(self, intp_t slot) noexcept nogil
    cdef bint pooled(self, intp_t slot) noexcept nogil
    cdef void build(self, intp_t slot, const double[:, ::1] G, const double[::1] W,
                    const intp_t[::1] rows, intp_t start, intp_t end) noexcept nogil
    cdef void subtract(self, intp_t slot, intp_t other) noexcept nogil
    cdef void best_split(self, intp_t slot, double weight, const double* total, double min_leaf,
                         Split* out) noexcept nogil
    cdef void _scan_scalar(self, const double* hist, double weight, double total,
                           double min_leaf, SplitScan* best, Split* out) noexcept nogil
    cdef void partition(self, intp_t[::1] rows, intp_t start, intp_t end,
                        Split* split) noexcept nogil
