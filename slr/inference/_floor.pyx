# cython: language_level=3
"""The scalar arithmetic floor of a star sweep, for benchmarks only.

A sweep's cost is dominated by ``exp`` and ``log`` of single doubles from libm, one value
at a time (the operands are gathered through the graph's incidence lists). numpy evaluates
the same count of calls as whole-array SIMD loops, a floor that no scalar kernel reaches
on hosts with wide vector units; this loop gives the scalar one beside it.
"""
from libc.math cimport exp, log


def scalar_exp_log(const double[::1] exp_input, const double[::1] log_input) -> float:
    """``sum(exp(exp_input)) + sum(log(log_input))`` by scalar libm calls, without the GIL."""
    cdef Py_ssize_t i
    cdef double acc = 0.0
    with nogil:
        for i in range(exp_input.shape[0]):
            acc += exp(exp_input[i])
        for i in range(log_input.shape[0]):
            acc += log(log_input[i])
    return acc
