# cython: language_level=3
"""Viterbi on a flat batch of chains (Cython kernel).

Example ``k`` is the chain of nodes ``node_ptr[k] .. node_ptr[k+1] - 1`` whose edge
``edge_ptr[k] + i`` joins its nodes ``i`` and ``i + 1``. The recursion is the textbook one,

    score_0(b)     = theta_nodes[0, b]
    score_{i+1}(b) = max_a (score_i(a) + theta_edges[i, a, b]) + theta_nodes[i + 1, b],

each maximum taken at its first maximiser (a NaN counting as the largest value, as
``numpy.argmax`` does), and the labels are read back from the last node's first maximiser. Only
additions and comparisons: the labels are those of the same recursion in NumPy, bit for bit.

``theta_edges`` of shape ``(1, L, L)`` is one table for every edge. The kernel checks that the
arrays fit the pointers (one edge fewer than nodes per example), so that it never reads outside
them; the values are trusted.
"""
import numpy as np

from libc.stdint cimport int64_t


cdef inline Py_ssize_t _first_max(const double* values, Py_ssize_t n) noexcept nogil:
    """Index of the first largest of ``values[0 .. n-1]``, or of the first NaN."""
    cdef Py_ssize_t a, best = 0
    cdef double top = values[0], v
    if top != top:
        return 0
    for a in range(1, n):
        v = values[a]
        if v > top:
            top, best = v, a
        elif v != v:
            return a
    return best


def viterbi_batch(
    const double[:, ::1] theta_nodes,
    const double[:, :, ::1] theta_edges,
    const int64_t[::1] node_ptr,
    const int64_t[::1] edge_ptr,
    int64_t[::1] out,
):
    """``out[v]``: the MAP label of node ``v`` of every chain of the batch (see the module docstring)."""
    cdef Py_ssize_t n_examples = node_ptr.shape[0] - 1, L = theta_nodes.shape[1]
    cdef Py_ssize_t k, i, a, b, n, v0, e0, es = 1
    if n_examples < 0 or node_ptr[0] != 0 or edge_ptr.shape[0] != n_examples + 1 or edge_ptr[0] != 0:
        raise ValueError("Viterbi: the pointers must start at 0, one more of each than examples")
    if not (L >= 1 and theta_nodes.shape[0] == out.shape[0] == node_ptr[n_examples]
            and theta_edges.shape[0] in (edge_ptr[n_examples], 1)
            and theta_edges.shape[1] == theta_edges.shape[2] == L):
        raise ValueError("Viterbi: the potentials do not match the batch's nodes, edges and states")
    if theta_edges.shape[0] == 1:
        es = 0   # one table for every edge
    for k in range(n_examples):
        if node_ptr[k + 1] < node_ptr[k] or edge_ptr[k + 1] - edge_ptr[k] != max(node_ptr[k + 1] - node_ptr[k] - 1, 0):
            raise ValueError(f"Viterbi: example {k} is not a chain (it needs one edge fewer than its nodes)")
    cdef double[::1] score = np.empty(L)
    cdef double[::1] moved = np.empty(L)
    cdef double[::1] cands = np.empty(L)
    cdef int64_t[:, ::1] back = np.empty((max(edge_ptr[n_examples], 1), L), dtype=np.int64)
    with nogil:
        for k in range(n_examples):
            v0, e0, n = node_ptr[k], edge_ptr[k], node_ptr[k + 1] - node_ptr[k]
            if n == 0:
                continue
            for b in range(L):
                score[b] = theta_nodes[v0, b]
            for i in range(n - 1):
                for b in range(L):
                    for a in range(L):
                        cands[a] = score[a] + theta_edges[(e0 + i) * es, a, b]
                    a = _first_max(&cands[0], L)
                    back[e0 + i, b] = a
                    moved[b] = cands[a] + theta_nodes[v0 + i + 1, b]
                for b in range(L):
                    score[b] = moved[b]
            out[v0 + n - 1] = _first_max(&score[0], L)
            for i in range(n - 2, -1, -1):
                out[v0 + i] = back[e0 + i, out[v0 + i + 1]]
