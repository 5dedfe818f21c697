# cython: language_level=3
"""Exact marginals of pairwise models on forests by sum-product, and exact MAP by max-product
(Cython kernel).

For every example of a flat batch whose graph is a forest, the distribution

    p(y) = exp(F(y) / T) / Z,    F(y) = sum_i theta_i(y_i) + sum_e theta_e(y_i, y_j),

has node and edge marginals that two passes of sum-product compute exactly: messages from the
leaves to a root (in reverse breadth-first order), then back. Everything is in the log domain;
each message is shifted to a largest entry of 0 and the shifts of the upward messages are added
to ``log Z``. A graph with a cycle (or two edges joining the same pair of nodes) is flagged and
left alone. Max-product (:func:`forest_map`) passes the same messages with ``max`` in place of
``logsumexp`` from the leaves to a root, then labels every node by its best state given its
parent's, the first maximiser among ties.

The kernel trusts its inputs: :mod:`slr.inference.sum_product` validates them once.
"""
import numpy as np

cimport cython
from cython.parallel cimport prange
from libc.math cimport exp
from libc.stdlib cimport free, malloc
from libc.stdint cimport int64_t

from slr._kernel_utils cimport logsumexp, row_max

ctypedef Py_ssize_t intp_t

cdef int64_t UNVISITED = -2
cdef int64_t ROOT = -1


cdef bint _breadth_first(
    int64_t first, int64_t last, const int64_t[:, ::1] edges, const int64_t[::1] inc_ptr,
    const int64_t[::1] inc_edge, const int64_t[::1] inc_side, int64_t[::1] order,
    int64_t[::1] parent_edge,
) noexcept nogil:
    """Order nodes ``first:last`` breadth-first from one root per component (into
    ``order[first:last]``), each with the edge to its parent; False if an edge closes a cycle."""
    cdef int64_t r, v, u, e, k, head, tail = first
    for r in range(first, last):
        if parent_edge[r] != UNVISITED:
            continue
        parent_edge[r] = ROOT
        order[tail] = r
        tail += 1
        head = tail - 1
        while head < tail:
            v = order[head]
            head += 1
            for k in range(inc_ptr[v], inc_ptr[v + 1]):
                e = inc_edge[k]
                if e == parent_edge[v]:
                    continue
                u = edges[e, 1 - inc_side[k]]
                if parent_edge[u] != UNVISITED:
                    return False
                parent_edge[u] = e
                order[tail] = u
                tail += 1
    return True


cdef void _incoming(
    int64_t v, int64_t skip, intp_t L, double inv_t, const double[:, ::1] theta_nodes,
    const double[:, :, ::1] messages, const int64_t[::1] inc_ptr, const int64_t[::1] inc_edge,
    const int64_t[::1] inc_side, double* out,
) noexcept nogil:
    """``theta_v / T`` plus every message into ``v`` except along edge ``skip`` (-1: none)."""
    cdef intp_t a
    cdef int64_t k, e
    for a in range(L):
        out[a] = theta_nodes[v, a] * inv_t
    for k in range(inc_ptr[v], inc_ptr[v + 1]):
        e = inc_edge[k]
        if e != skip:
            for a in range(L):
                out[a] += messages[e, inc_side[k], a]


cdef double _send(
    int64_t e, int64_t side, const double* source, intp_t L, double inv_t,
    const double[:, :, ::1] theta_edges, double[:, :, ::1] messages, double* terms,
) noexcept nogil:
    """The message along edge ``e`` from its node on ``side`` (whose other messages and potential
    are ``source``) into the other node, shifted to a largest entry of 0; returns the shift."""
    cdef intp_t a, b
    cdef double total, shift
    for b in range(L):
        for a in range(L):
            if side == 0:
                terms[a] = source[a] + theta_edges[e, a, b] * inv_t
            else:
                terms[a] = source[a] + theta_edges[e, b, a] * inv_t
        messages[e, 1 - side, b] = logsumexp(terms, L, terms, &total)
    shift = row_max(&messages[e, 1 - side, 0], L)
    for b in range(L):
        messages[e, 1 - side, b] -= shift
    return shift


cdef void _softmax_into(const double* x, intp_t n, double* out) noexcept nogil:
    cdef intp_t i
    cdef double largest = row_max(x, n), total = 0.0
    for i in range(n):
        out[i] = exp(x[i] - largest)
        total += out[i]
    for i in range(n):
        out[i] /= total


cdef bint _example(
    int64_t first, int64_t last, intp_t L, double inv_t, const double[:, ::1] theta_nodes,
    const double[:, :, ::1] theta_edges, const int64_t[:, ::1] edges, const int64_t[::1] inc_ptr,
    const int64_t[::1] inc_edge, const int64_t[::1] inc_side, int64_t[::1] order,
    int64_t[::1] parent_edge, double[:, :, ::1] messages, double[:, ::1] node_marginals,
    double[:, ::1] beliefs, bint keep_beliefs, double* log_z, double* scratch,
) noexcept nogil:
    """Both passes over one example's nodes ``first:last``; False (nothing computed) if its graph
    is not a forest. With ``keep_beliefs`` each node's potential plus all its incoming messages
    (the log of its unnormalised marginal) goes to ``beliefs``, for :func:`_edge_block`."""
    cdef double* full = scratch
    cdef double* other = scratch + L
    cdef double* terms = scratch + 2 * L
    cdef intp_t a
    cdef int64_t idx, v, e, k
    cdef int side
    cdef double total
    if not _breadth_first(first, last, edges, inc_ptr, inc_edge, inc_side, order, parent_edge):
        return False
    log_z[0] = 0.0
    for idx in range(last - 1, first - 1, -1):          # leaves to roots
        v = order[idx]
        e = parent_edge[v]
        _incoming(v, e, L, inv_t, theta_nodes, messages, inc_ptr, inc_edge, inc_side, full)
        if e == ROOT:
            log_z[0] += logsumexp(full, L, terms, &total)
        else:
            log_z[0] += _send(e, 0 if edges[e, 0] == v else 1, full, L, inv_t, theta_edges, messages, terms)
    for idx in range(first, last):                       # roots to leaves
        v = order[idx]
        _incoming(v, -1, L, inv_t, theta_nodes, messages, inc_ptr, inc_edge, inc_side, full)
        _softmax_into(full, L, &node_marginals[v, 0])
        if keep_beliefs:
            for a in range(L):
                beliefs[v, a] = full[a]
        for k in range(inc_ptr[v], inc_ptr[v + 1]):
            e = inc_edge[k]
            if e == parent_edge[v]:
                continue
            side = inc_side[k]
            for a in range(L):
                other[a] = full[a] - messages[e, side, a]
            _send(e, side, other, L, inv_t, theta_edges, messages, terms)
    return True


@cython.boundscheck(False)
@cython.wraparound(False)
def forest_marginals(
    const double[:, ::1] theta_nodes, const double[:, :, ::1] theta_edges, const int64_t[:, ::1] edges,
    const int64_t[::1] node_ptr, const int64_t[::1] edge_ptr, const int64_t[::1] inc_ptr,
    const int64_t[::1] inc_edge, const int64_t[::1] inc_side, double temperature, bint with_edges,
    int n_threads, double[:, ::1] node_marginals, double[:, :, ::1] edge_marginals, double[::1] log_z,
    unsigned char[::1] is_forest,
):
    """Fill ``node_marginals`` (and, ``with_edges``, ``edge_marginals``), ``log_z`` and ``is_forest``
    for every example; examples that are not forests are flagged and their outputs left as given."""
    cdef intp_t n_examples = node_ptr.shape[0] - 1, L = theta_nodes.shape[1]
    cdef intp_t k
    cdef double inv_t = 1.0 / temperature
    cdef int64_t[::1] order = np.empty(theta_nodes.shape[0], dtype=np.int64)
    cdef int64_t[::1] parent_edge = np.full(theta_nodes.shape[0], UNVISITED, dtype=np.int64)
    cdef double[:, :, ::1] messages = np.zeros((edges.shape[0], 2, L))
    cdef double[:, ::1] beliefs = np.empty((theta_nodes.shape[0] if with_edges else 0, L))
    cdef double* scratch
    for k in prange(n_examples, nogil=True, num_threads=n_threads, schedule="dynamic"):
        scratch = <double*> malloc((3 * L + L * L) * sizeof(double))
        is_forest[k] = _example(node_ptr[k], node_ptr[k + 1], L, inv_t, theta_nodes, theta_edges, edges,
                                inc_ptr, inc_edge, inc_side, order, parent_edge, messages, node_marginals,
                                beliefs, with_edges, &log_z[k], scratch)
        if is_forest[k] and with_edges:
            _edge_block(edge_ptr[k], edge_ptr[k + 1], L, inv_t, theta_edges, edges, beliefs, messages,
                        edge_marginals, scratch)
        free(scratch)


cdef void _edge_block(
    int64_t first, int64_t last, intp_t L, double inv_t, const double[:, :, ::1] theta_edges,
    const int64_t[:, ::1] edges, const double[:, ::1] beliefs, const double[:, :, ::1] messages,
    double[:, :, ::1] edge_marginals, double* scratch,
) noexcept nogil:
    """Edge marginals: ``p(a, b)`` proportional to ``exp`` of each end's potential and messages
    other than along the edge, plus ``theta_e(a, b) / T``. Each end's term is its belief less the
    message along the edge: constant time per edge, whatever the degree of its nodes."""
    cdef double* left = scratch
    cdef double* right = scratch + L
    cdef double* joint = scratch + 3 * L
    cdef intp_t a, b
    cdef int64_t e
    for e in range(first, last):
        for a in range(L):
            left[a] = beliefs[edges[e, 0], a] - messages[e, 0, a]
            right[a] = beliefs[edges[e, 1], a] - messages[e, 1, a]
        for a in range(L):
            for b in range(L):
                joint[a * L + b] = left[a] + right[b] + theta_edges[e, a, b] * inv_t
        _softmax_into(joint, L * L, &edge_marginals[e, 0, 0])


# ------------------------------------------------------------------------------------------
# max-product: exact MAP on forests
# ------------------------------------------------------------------------------------------
cdef inline intp_t _first_max(const double* values, intp_t n) noexcept nogil:
    """Index of the first largest of ``values[:n]``."""
    cdef intp_t a, best = 0
    for a in range(1, n):
        if values[a] > values[best]:
            best = a
    return best


cdef void _send_max(
    int64_t e, int64_t side, const double* source, intp_t L, const double[:, :, ::1] theta_edges,
    double[:, :, ::1] messages,
) noexcept nogil:
    """The max-product message along edge ``e`` from its node on ``side`` into the other node:
    ``max_a source[a] + theta_e(a, b)``, shifted to a largest entry of 0."""
    cdef intp_t a, b
    cdef double best, value, shift
    for b in range(L):
        best = source[0] + (theta_edges[e, 0, b] if side == 0 else theta_edges[e, b, 0])
        for a in range(1, L):
            value = source[a] + (theta_edges[e, a, b] if side == 0 else theta_edges[e, b, a])
            if value > best:
                best = value
        messages[e, 1 - side, b] = best
    shift = row_max(&messages[e, 1 - side, 0], L)
    for b in range(L):
        messages[e, 1 - side, b] -= shift


cdef bint _example_map(
    int64_t first, int64_t last, intp_t L, const double[:, ::1] theta_nodes,
    const double[:, :, ::1] theta_edges, const int64_t[:, ::1] edges, const int64_t[::1] inc_ptr,
    const int64_t[::1] inc_edge, const int64_t[::1] inc_side, int64_t[::1] order,
    int64_t[::1] parent_edge, double[:, :, ::1] messages, int64_t[::1] labels, double* scratch,
) noexcept nogil:
    """Max-product from the leaves to the roots, then each node's best state given its parent's;
    False (nothing computed) if the example's graph is not a forest."""
    cdef double* full = scratch
    cdef intp_t a
    cdef int64_t idx, v, e, parent
    if not _breadth_first(first, last, edges, inc_ptr, inc_edge, inc_side, order, parent_edge):
        return False
    for idx in range(last - 1, first - 1, -1):          # leaves to roots
        v = order[idx]
        e = parent_edge[v]
        if e != ROOT:
            _incoming(v, e, L, 1.0, theta_nodes, messages, inc_ptr, inc_edge, inc_side, full)
            _send_max(e, 0 if edges[e, 0] == v else 1, full, L, theta_edges, messages)
    for idx in range(first, last):                       # roots to leaves: parents are decided first
        v = order[idx]
        e = parent_edge[v]
        _incoming(v, e, L, 1.0, theta_nodes, messages, inc_ptr, inc_edge, inc_side, full)
        if e != ROOT:
            if edges[e, 0] == v:
                parent = labels[edges[e, 1]]
                for a in range(L):
                    full[a] += theta_edges[e, a, parent]
            else:
                parent = labels[edges[e, 0]]
                for a in range(L):
                    full[a] += theta_edges[e, parent, a]
        labels[v] = _first_max(full, L)
    return True


@cython.boundscheck(False)
@cython.wraparound(False)
def forest_map(
    const double[:, ::1] theta_nodes, const double[:, :, ::1] theta_edges, const int64_t[:, ::1] edges,
    const int64_t[::1] node_ptr, const int64_t[::1] inc_ptr, const int64_t[::1] inc_edge,
    const int64_t[::1] inc_side, int n_threads, int64_t[::1] labels, unsigned char[::1] is_forest,
):
    """Fill ``labels`` with a MAP labelling of every example and ``is_forest``; examples that are
    not forests are flagged and their labels left as given."""
    cdef intp_t n_examples = node_ptr.shape[0] - 1, L = theta_nodes.shape[1]
    cdef intp_t k
    cdef int64_t[::1] order = np.empty(theta_nodes.shape[0], dtype=np.int64)
    cdef int64_t[::1] parent_edge = np.full(theta_nodes.shape[0], UNVISITED, dtype=np.int64)
    cdef double[:, :, ::1] messages = np.zeros((edges.shape[0], 2, L))
    cdef double* scratch
    for k in prange(n_examples, nogil=True, num_threads=n_threads, schedule="dynamic"):
        scratch = <double*> malloc(L * sizeof(double))
        is_forest[k] = _example_map(node_ptr[k], node_ptr[k + 1], L, theta_nodes, theta_edges, edges, inc_ptr,
                                    inc_edge, inc_side, order, parent_edge, messages, labels, scratch)
        free(scratch)
