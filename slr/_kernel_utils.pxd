# cython: language_level=3
"""Types and inline numerics shared by the Cython kernels of slr.

``slr/inference/_star.pyx`` (message passing) and ``slr/oracles/_boosting/`` (boosted
trees) both reduce rows of scores by a logsumexp with the maximum subtracted; the one
loop that sums the exponentials lives here. Everything is ``inline``, ``noexcept`` and
``nogil``: Cython copies it into each kernel, where the compiler specialises it.
"""
from libc.math cimport exp, fabs, log, log1p

# numpy's intp (npy_intp) is Py_ssize_t on every platform numpy supports
ctypedef Py_ssize_t intp_t


cdef inline double row_max(const double* x, intp_t n) noexcept nogil:
    """``max(x[:n])`` for ``n >= 1``.

    Written without data-dependent branches (the maxima compile to ``maxsd``): which entry
    is largest is random, and mispredicted branches cost more than the comparisons.
    """
    cdef intp_t i
    cdef double largest = x[0]
    for i in range(1, n):
        largest = x[i] if x[i] > largest else largest
    return largest


cdef inline double exp_sum(const double* x, intp_t n, double shift, double scale,
                           double* terms) noexcept nogil:
    """``sum_i exp((x[i] - shift) * scale)``; the terms go to ``terms`` unless it is NULL.

    ``terms`` may be ``x`` itself. With ``shift = max(x)`` the largest term is exactly 1,
    so the sum lies in ``[1, n]``.
    """
    cdef intp_t i
    cdef double term, total = 0.0
    for i in range(n):
        term = exp((x[i] - shift) * scale)
        if terms != NULL:
            terms[i] = term
        total += term
    return total


cdef inline double logsumexp(const double* x, intp_t n, double* terms,
                             double* total) noexcept nogil:
    """``logsumexp(x[:n])``; ``exp(x[i] - max(x))`` go to ``terms`` (may be ``x``), their sum
    to ``total`` (so ``terms[i] / total`` is the softmax)."""
    cdef double largest = row_max(x, n)
    total[0] = exp_sum(x, n, largest, 1.0, terms)
    return largest + log(total[0])


cdef inline double smoothed_max2(double x0, double x1, double eps, double inv_eps) noexcept nogil:
    """``eps * log(exp(x0 / eps) + exp(x1 / eps))`` (``max(x0, x1)`` when eps == 0).

    One exponential and one ``log1p``: ``max + eps * log1p(exp(-|x0 - x1| / eps))``.
    """
    cdef double largest = x0 if x0 > x1 else x1
    if eps == 0.0:
        return largest
    return largest + eps * log1p(exp(-fabs(x0 - x1) * inv_eps))


cdef inline double smoothed_max(const double* x, intp_t n, double eps, double inv_eps) noexcept nogil:
    """``eps * logsumexp(x[:n] / eps)`` (``max(x)`` when eps == 0); ``inv_eps = 1 / eps``."""
    cdef double largest
    if n == 2:
        return smoothed_max2(x[0], x[1], eps, inv_eps)
    largest = row_max(x, n)
    if eps == 0.0:
        return largest
    return largest + eps * log(exp_sum(x, n, largest, inv_eps, NULL))
