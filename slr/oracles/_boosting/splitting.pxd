# cython: language_level=3
"""The exact split search and the partition of sorted row orders (see splitting.pyx)."""
from slr._kernel_utils cimport intp_t
from slr.oracles._boosting.common cimport Split


cdef void best_split(const double[:, ::1] X, const double[:, ::1] G, const double[::1] W,
                     const intp_t[:, ::1] order, intp_t start, intp_t end, double min_leaf,
                     const double* total, double total_weight, double* left_sum,
                     Split* out) noexcept nogil

cdef void partition(intp_t[:, ::1] order, intp_t split_feature, intp_t start, intp_t end,
                    intp_t n_left, unsigned char[::1] goes_left,
                    intp_t[::1] spill) noexcept nogil
