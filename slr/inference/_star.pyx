# cython: language_level=3
"""Star-update message passing on flat batches of pairwise graphs (Cython kernels).

Conventions are those of docs/design.md section 1. With messages ``lam[e, s, :]`` on side ``s``
of edge ``e`` (side 0 is the edge's first node ``i``, side 1 its second node ``j``), the star
update at node ``v`` computes for every incident edge ``e`` (v on side ``s``, other side ``o``)

    mt_e(a) = eps * logsumexp_b((theta_e[a, b] + lam[e, o, b]) / eps)      (side 0; transposed for side 1)
    t(a)    = (theta_v(a) + sum_e mt_e(a)) / (1 + N_v)
    lam[e, s, a] <- t(a) - mt_e(a)

which is the chapter's Eq. 1.16 written without the terms that cancel: ``mt_e`` is the edge's
max-marginal onto ``v`` minus the old message on ``v``'s side. After the update the node belief
and every incident edge belief marginalise to the same ``t``. With ``eps = 0`` logsumexp is a max.
Two-state graphs (binary denoising) take the same update written out for ``L = 2``.

With ``eps > 0`` on a CPU with AVX2 and FMA, each star's max-marginals ``mt`` are computed by
the vector code of ``_star_simd.h`` (one vector exp/log call over the star's ``deg * L`` terms);
the rest of the update, and the order of the updates, are the same on both paths. ``use_simd``
switches it off (as does the environment variable ``SLR_DISABLE_SIMD`` at import). The vector
code updates two-state stars several at a time, in ``sweep_order``, with the same messages bit
for bit; on a CPU with AVX-512F in 8-double vectors (``use_avx512(False)`` keeps it to AVX2).

Every function here trusts its inputs: the Python layer (``slr.inference.batch``) validates
shapes, index ranges, finiteness and magnitudes once and then calls these kernels without checks.
"""
import os

import numpy as np

cimport cython
from cython.parallel cimport parallel, prange
from libc.math cimport fabs, INFINITY
from libc.stdlib cimport free, malloc
from libc.stdint cimport int64_t

from slr._kernel_utils cimport smoothed_max, smoothed_max2

cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    static int slr_openmp_max_threads(void) { return omp_get_max_threads(); }
    #else
    static int slr_openmp_max_threads(void) { return 1; }
    #endif
    """
    int slr_openmp_max_threads() nogil

cdef extern from "_star_simd.h" nogil:
    int slr_simd_supported()
    int slr_avx512_supported()
    int SLR_GROUP
    double slr_binary_stars_avx512(
        const int64_t* nodes, int64_t count, const double* theta_nodes, const double* theta_edges,
        int64_t edge_stride, double* lam, const int64_t* inc_ptr, const int64_t* inc_edge,
        const int64_t* inc_side, double eps, double inv_eps, double* mt, double* size)
    double slr_binary_stars_avx2(
        const int64_t* nodes, int64_t count, const double* theta_nodes, const double* theta_edges,
        int64_t edge_stride, double* lam, const int64_t* inc_ptr, const int64_t* inc_edge,
        const int64_t* inc_side, double eps, double inv_eps, double* mt, double* size)
    double slr_binary_star_avx2(
        int64_t v, const double* theta_nodes, const double* theta_edges, int64_t edge_stride, double* lam,
        const int64_t* inc_ptr, const int64_t* inc_edge, const int64_t* inc_side, double eps,
        double inv_eps, double* mt, double* size)
    void slr_general_marginals_avx2(
        const double* theta_edges, int64_t edge_stride, const double* lam, const int64_t* edge, const int64_t* side,
        int64_t deg, int64_t L, double eps, double inv_eps, double* mt, double* scratch)

cdef bint SIMD_SUPPORTED = slr_simd_supported()
cdef bint simd_enabled = SIMD_SUPPORTED and not os.environ.get("SLR_DISABLE_SIMD")
cdef bint AVX512_SUPPORTED = slr_avx512_supported()
cdef bint avx512_enabled = AVX512_SUPPORTED

# Relative float64 resolution of the stopping test: message changes below this fraction
# (1024 ulps) of the largest magnitude a sweep computed are rounding noise (measured: up to
# ~25 ulps on grids and chains), so a sweep that changes no more has converged.
cdef double RESOLUTION = 2.0 ** -42


cdef inline double _converged_below(double tol, double size) noexcept nogil:
    """The change below which a sweep has converged: ``max(tol, RESOLUTION * size)``."""
    return RESOLUTION * size if RESOLUTION * size > tol else tol


cdef double _update_binary_node(
    Py_ssize_t v,
    const double[:, ::1] theta_nodes,
    const double[:, :, ::1] theta_edges,
    Py_ssize_t es,
    double[:, :, ::1] lam,
    const int64_t[::1] inc_ptr,
    const int64_t[::1] inc_edge,
    const int64_t[::1] inc_side,
    double eps,
    double inv_eps,
    double* mt,
    double* size,
) noexcept nogil:
    """``_update_node`` for two states, with the rows in registers instead of scratch loops."""
    cdef Py_ssize_t start = inc_ptr[v], stop = inc_ptr[v + 1]
    cdef Py_ssize_t deg = stop - start
    cdef Py_ssize_t k, e, s, t
    cdef double t0 = theta_nodes[v, 0], t1 = theta_nodes[v, 1]
    cdef double l0, l1, m0, m1, d0, d1, diff, scale, change = 0.0, big = size[0]
    if deg == 0:
        return 0.0
    for k in range(deg):
        e = inc_edge[start + k]
        s = inc_side[start + k]
        l0 = lam[e, 1 - s, 0]
        l1 = lam[e, 1 - s, 1]
        t = e * es
        if s == 0:
            m0 = smoothed_max2(theta_edges[t, 0, 0] + l0, theta_edges[t, 0, 1] + l1, eps, inv_eps)
            m1 = smoothed_max2(theta_edges[t, 1, 0] + l0, theta_edges[t, 1, 1] + l1, eps, inv_eps)
        else:
            m0 = smoothed_max2(theta_edges[t, 0, 0] + l0, theta_edges[t, 1, 0] + l1, eps, inv_eps)
            m1 = smoothed_max2(theta_edges[t, 0, 1] + l0, theta_edges[t, 1, 1] + l1, eps, inv_eps)
        mt[2 * k] = m0
        mt[2 * k + 1] = m1
        t0 += m0
        t1 += m1
        big = fabs(m0) if fabs(m0) > big else big
        big = fabs(m1) if fabs(m1) > big else big
    scale = 1.0 / (1 + deg)
    t0 *= scale
    t1 *= scale
    big = fabs(t0) if fabs(t0) > big else big
    big = fabs(t1) if fabs(t1) > big else big
    size[0] = big
    for k in range(deg):
        e = inc_edge[start + k]
        s = inc_side[start + k]
        d0 = (t0 - mt[2 * k]) - lam[e, s, 0]
        d1 = (t1 - mt[2 * k + 1]) - lam[e, s, 1]
        lam[e, s, 0] = t0 - mt[2 * k]
        lam[e, s, 1] = t1 - mt[2 * k + 1]
        # the change measure of _update_node, for two entries
        diff = fabs(d0 - d1) if eps > 0.0 else (fabs(d0) if fabs(d0) > fabs(d1) else fabs(d1))
        change = diff if diff > change else change
    return change


cdef double _update_node(
    Py_ssize_t v,
    const double[:, ::1] theta_nodes,
    const double[:, :, ::1] theta_edges,
    Py_ssize_t es,
    double[:, :, ::1] lam,
    const int64_t[::1] inc_ptr,
    const int64_t[::1] inc_edge,
    const int64_t[::1] inc_side,
    Py_ssize_t L,
    double eps,
    double inv_eps,
    bint simd,
    double* mt,
    double* extra,
    double* t,
    double* row,
    double* size,
) noexcept nogil:
    """Star update at node ``v``; returns the largest message change up to a constant shift.

    ``size[0]`` is raised to the largest magnitude among the values computed (``mt``, ``t``),
    which sets the rounding noise of the change. With ``simd`` (only for ``eps > 0``) the
    vector code computes ``mt``, using ``extra`` as scratch. Edge ``e``'s table is
    ``theta_edges[e * es]`` (``es`` 0: one table for every edge).
    """
    cdef Py_ssize_t start = inc_ptr[v], stop = inc_ptr[v + 1]
    cdef Py_ssize_t deg = stop - start
    cdef Py_ssize_t k, a, b, e, s, o
    cdef double* m
    cdef double new, diff, lo, hi, change = 0.0
    if deg == 0:
        return 0.0
    for a in range(L):
        t[a] = theta_nodes[v, a]
    if simd:
        slr_general_marginals_avx2(&theta_edges[0, 0, 0], es, &lam[0, 0, 0], &inc_edge[start],
                                   &inc_side[start], deg, L, eps, inv_eps, mt, extra)
    for k in range(deg):
        e = inc_edge[start + k]
        s = inc_side[start + k]
        o = 1 - s
        m = mt + k * L
        for a in range(L):
            if not simd:
                if s == 0:
                    for b in range(L):
                        row[b] = theta_edges[e * es, a, b] + lam[e, o, b]
                else:
                    for b in range(L):
                        row[b] = theta_edges[e * es, b, a] + lam[e, o, b]
                m[a] = smoothed_max(row, L, eps, inv_eps)
            t[a] += m[a]
            if fabs(m[a]) > size[0]:
                size[0] = fabs(m[a])
    for a in range(L):
        t[a] /= (1 + deg)
        if fabs(t[a]) > size[0]:
            size[0] = fabs(t[a])
    for k in range(deg):
        e = inc_edge[start + k]
        s = inc_side[start + k]
        m = mt + k * L
        lo = INFINITY
        hi = -INFINITY
        for a in range(L):
            new = t[a] - m[a]
            diff = new - lam[e, s, a]
            lo = diff if diff < lo else lo
            hi = diff if diff > hi else hi
            lam[e, s, a] = new
        # Adding a constant to lam[e, s, :] changes no belief and not A (the node loses what
        # the edge gains), and such shifts drift slowly along chains: with eps > 0 only the
        # rest counts. With eps = 0 the whole change counts: the max-product updates can
        # make slow real progress that a gauge-free measure would stop too early.
        diff = hi - lo if eps > 0.0 else (hi if hi > -lo else -lo)
        change = diff if diff > change else change
    return change


cdef inline void _heap_push(int64_t* heap, Py_ssize_t* size, int64_t value) noexcept nogil:
    """Push ``value`` on the binary min-heap ``heap[:size]``."""
    cdef Py_ssize_t k = size[0], parent
    size[0] = k + 1
    while k > 0:
        parent = (k - 1) // 2
        if heap[parent] <= value:
            break
        heap[k] = heap[parent]
        k = parent
    heap[k] = value


cdef inline int64_t _heap_pop(int64_t* heap, Py_ssize_t* size) noexcept nogil:
    """Pop the smallest value of the non-empty binary min-heap ``heap[:size]``."""
    cdef int64_t top = heap[0], last
    cdef Py_ssize_t k = 0, child, n = size[0] - 1
    size[0] = n
    last = heap[n]
    while True:
        child = 2 * k + 1
        if child >= n:
            break
        if child + 1 < n and heap[child + 1] < heap[child]:
            child = child + 1
        if heap[child] >= last:
            break
        heap[k] = heap[child]
        k = child
    heap[k] = last
    return top


cdef inline void _release(Py_ssize_t v, const int64_t[::1] inc_ptr, const int64_t[::1] inc_edge,
                          const int64_t[::1] inc_side, const int64_t[:, ::1] edges,
                          int64_t[::1] waiting, int64_t* heap, Py_ssize_t* size) noexcept nogil:
    """``v`` is updated: its later neighbours wait for one node fewer; push those now ready."""
    cdef Py_ssize_t k, u
    for k in range(inc_ptr[v], inc_ptr[v + 1]):
        u = edges[inc_edge[k], 1 - inc_side[k]]
        if u > v:
            waiting[u] -= 1
            if waiting[u] == 0:
                _heap_push(heap, size, u)


def sweep_order(
    const int64_t[::1] node_ptr,
    const int64_t[::1] inc_ptr,
    const int64_t[::1] inc_edge,
    const int64_t[::1] inc_side,
    const int64_t[:, ::1] edges,
):
    """The order in which ``star_sweeps`` visits the nodes of each example, shape ``(N,)``, and
    its groups of independent nodes, shape ``(N,)``, uint8.

    The updates of two nodes without an edge between them commute (each writes only its own side
    of its edges). A sweep gives the same messages, bit for bit, in index order and in any order
    that keeps each node after its neighbours of lower index (and, backwards, in the reverse of
    either). This order takes the nodes whose lower neighbours are all done (the ready ones)
    ``SLR_GROUP`` at a time, those of lowest index: no two ready nodes have an edge between them.
    ``group[k]`` is the size of the group at the first and at the last of its positions ``k``
    (0 elsewhere). The two-state vector code updates a group at once, instead of waiting for
    each star's messages before the next (on a grid a group is a diagonal across as many rows,
    in nearly the index order that the caches prefer).
    """
    cdef Py_ssize_t n_examples = node_ptr.shape[0] - 1
    cdef Py_ssize_t n_nodes = inc_ptr.shape[0] - 1
    order_arr = np.empty(n_nodes, dtype=np.int64)
    group_arr = np.zeros(n_nodes, dtype=np.uint8)
    waiting_arr = np.zeros(n_nodes, dtype=np.int64)
    heap_arr = np.empty(max(n_nodes, 1), dtype=np.int64)
    cdef int64_t[::1] order = order_arr
    cdef unsigned char[::1] group = group_arr
    cdef int64_t[::1] waiting = waiting_arr    # neighbours of lower index not yet updated
    cdef int64_t[::1] heap = heap_arr          # the ready nodes, lowest index first
    cdef Py_ssize_t ex, v, k, g, position, size
    with nogil:
        for ex in range(n_examples):
            size = 0
            for v in range(node_ptr[ex], node_ptr[ex + 1]):
                for k in range(inc_ptr[v], inc_ptr[v + 1]):
                    if edges[inc_edge[k], 1 - inc_side[k]] < v:
                        waiting[v] += 1
                if waiting[v] == 0:
                    _heap_push(&heap[0], &size, v)
            position = node_ptr[ex]
            while size > 0:
                g = 0
                while g < SLR_GROUP and size > 0:
                    order[position + g] = _heap_pop(&heap[0], &size)
                    g = g + 1
                group[position] = g
                group[position + g - 1] = g
                for k in range(position, position + g):
                    _release(order[k], inc_ptr, inc_edge, inc_side, edges, waiting, &heap[0], &size)
                position = position + g
    return order_arr, group_arr


def star_sweeps(
    const double[:, ::1] theta_nodes,
    const double[:, :, ::1] theta_edges,
    double[:, :, ::1] lam,
    const int64_t[::1] node_ptr,
    const int64_t[::1] order,
    const unsigned char[::1] group,
    const int64_t[::1] inc_ptr,
    const int64_t[::1] inc_edge,
    const int64_t[::1] inc_side,
    Py_ssize_t max_degree,
    double eps,
    int max_sweeps,
    double tol,
    int n_threads,
    int[::1] n_sweeps_out,
    unsigned char[::1] converged_out,
):
    """Run up to ``max_sweeps`` star-update sweeps on every example of a batch, in place.

    One sweep visits every node of an example once, in index order or in ``order``, which gives
    the same messages (see ``sweep_order``); the direction alternates (forward, then backward,
    ...) so information flows both ways. An example stops as soon as a sweep changes no message
    vector ``lam[e, s, :]`` by more than ``max(tol, RESOLUTION * size)``, ``size`` being the
    largest magnitude the sweep computed (with ``tol = 0``: only when nothing changes). The
    change is measured for ``eps > 0`` beyond a constant shift (``max_a d_a - min_a d_a`` of its
    change ``d``; a constant shift is a gauge that changes no belief and not ``A``), for
    ``eps = 0`` in absolute value (``max_a |d_a|``). Examples run in parallel.

    Parameters
    ----------
    theta_nodes : (N, L) float64, theta_edges : (M, L, L) or (1, L, L) float64
        Flat potentials of the batch; ``(1, L, L)``: one table for every edge.
    lam : (M, 2, L) float64
        Messages, updated in place.
    node_ptr, inc_ptr, inc_edge, inc_side : int64
        The batch layout (see ``slr.data.GraphBatch``).
    order : (N,) or (0,) int64, group : (N,) or (0,) uint8
        ``sweep_order`` of the layout: each example's nodes, permuted within the example, and
        the sizes of its groups of nodes without an edge between them. Read by the two-state
        vector code only; empty arrays keep every sweep in index order.
    max_degree : int
        Largest node degree (sizes the per-thread scratch).
    eps : float
        Entropy weight; 0 gives the max-product (MPLP-style) star update.
    max_sweeps : int, tol : float, n_threads : int
    n_sweeps_out : (B,) int32, converged_out : (B,) uint8
        Filled with the sweeps run and whether the last one met ``max(tol, RESOLUTION * size)``.
    """
    cdef Py_ssize_t n_examples = node_ptr.shape[0] - 1
    cdef Py_ssize_t L = theta_nodes.shape[1]
    cdef Py_ssize_t es = 1 if theta_edges.shape[0] > 1 else 0   # 0: one table for every edge
    cdef double inv_eps = 1.0 / eps if eps > 0 else 0.0
    # mt and the vector code's scratch: deg * L values padded to whole vectors of 4, and room for
    # the max-marginals of the SLR_GROUP stars the two-state code updates at once, 8 each
    cdef Py_ssize_t padded = max_degree * L + 8 * SLR_GROUP
    cdef bint simd = simd_enabled and eps > 0.0
    # two-state stars with the vector code go in sweep_order, the rest in index order: only the
    # former update several stars at once, and the index order keeps the latter's reads sequential
    cdef bint groups = L == 2 and simd and order.shape[0] == theta_nodes.shape[0]
    cdef bint wide = avx512_enabled
    cdef Py_ssize_t ex, i, j, count, v, lo, hi
    cdef int sweep
    cdef double change, node_change, size, limit
    cdef double* scratch
    if n_examples == 0:
        return
    with nogil, parallel(num_threads=n_threads):
        scratch = <double*> malloc((2 * padded + 2 * L) * sizeof(double))
        for ex in prange(n_examples, schedule="dynamic", chunksize=1):
            if scratch == NULL:
                n_sweeps_out[ex] = -1  # this thread could not allocate: reported below
                continue
            lo = node_ptr[ex]
            hi = node_ptr[ex + 1]
            change = INFINITY
            limit = tol
            sweep = 0
            while sweep < max_sweeps and change > limit:
                change = 0.0
                size = 0.0
                i = 0
                while i < hi - lo:
                    # even sweeps run forward, odd sweeps backward
                    j = lo + i if sweep % 2 == 0 else hi - 1 - i
                    i = i + 1
                    v = j
                    if groups:
                        # in sweep_order: the same messages as in index order, a group at once
                        count = group[j]
                        if wide:
                            node_change = slr_binary_stars_avx512(
                                &order[j if sweep % 2 == 0 else j - count + 1], count,
                                &theta_nodes[0, 0], &theta_edges[0, 0, 0], es, &lam[0, 0, 0],
                                &inc_ptr[0], &inc_edge[0], &inc_side[0], eps, inv_eps, scratch,
                                &size)
                        else:
                            node_change = slr_binary_stars_avx2(
                                &order[j if sweep % 2 == 0 else j - count + 1], count,
                                &theta_nodes[0, 0], &theta_edges[0, 0, 0], es, &lam[0, 0, 0],
                                &inc_ptr[0], &inc_edge[0], &inc_side[0], eps, inv_eps, scratch,
                                &size)
                        i = i + count - 1
                    elif L == 2 and simd:
                        node_change = slr_binary_star_avx2(
                            v, &theta_nodes[0, 0], &theta_edges[0, 0, 0], es, &lam[0, 0, 0],
                            &inc_ptr[0], &inc_edge[0], &inc_side[0], eps, inv_eps, scratch,
                            &size)
                    elif L == 2:
                        node_change = _update_binary_node(
                            v, theta_nodes, theta_edges, es, lam, inc_ptr, inc_edge, inc_side,
                            eps, inv_eps, scratch, &size)
                    else:
                        node_change = _update_node(
                            v, theta_nodes, theta_edges, es, lam, inc_ptr, inc_edge, inc_side,
                            L, eps, inv_eps, simd, scratch, scratch + padded,
                            scratch + 2 * padded, scratch + 2 * padded + L, &size)
                    if node_change > change:
                        change = node_change
                # tol = 0 asks for every sweep: only a sweep that changes nothing stops early
                limit = _converged_below(tol, size) if tol > 0 else 0.0
                sweep = sweep + 1
            n_sweeps_out[ex] = sweep
            converged_out[ex] = change <= _converged_below(tol, size)
        free(scratch)
    if np.any(np.asarray(n_sweeps_out) < 0):
        raise MemoryError("could not allocate the star-update scratch buffer")


def dual_values(
    const double[:, ::1] theta_nodes,
    const double[:, :, ::1] theta_edges,
    const double[:, :, ::1] lam,
    const int64_t[:, ::1] edges,
    const int64_t[::1] node_ptr,
    const int64_t[::1] edge_ptr,
    const int64_t[::1] inc_ptr,
    const int64_t[::1] inc_edge,
    const int64_t[::1] inc_side,
    double eps,
    int n_threads,
    double[::1] out_nodes,
    double[::1] out_edges,
    bint node_terms=True,
    bint edge_terms=True,
):
    """The dual objective ``A(lam, theta)`` of every example, split into its node terms (written
    to ``out_nodes``, (B,)) and its edge terms (``out_edges``).

    ``A = eps * sum_alpha logsumexp(b_alpha / eps)`` over nodes and edges, with the
    reparametrised beliefs ``b`` of docs/design.md section 1; with ``eps = 0`` each term is a max.
    ``node_terms`` / ``edge_terms`` False skip one part (its output is left as it is): the node
    terms do not depend on ``theta_edges``, the edge terms not on ``theta_nodes``.
    ``theta_edges`` of shape ``(1, L, L)`` is one table for every edge.
    """
    cdef Py_ssize_t n_examples = node_ptr.shape[0] - 1
    cdef Py_ssize_t L = theta_nodes.shape[1]
    cdef Py_ssize_t es = 1 if theta_edges.shape[0] > 1 else 0
    cdef double inv_eps = 1.0 / eps if eps > 0 else 0.0
    cdef Py_ssize_t ex, v, e, k, a, b
    cdef double total
    cdef double* row
    failed_arr = np.zeros(n_examples, dtype=np.uint8)
    cdef unsigned char[::1] failed = failed_arr
    if n_examples == 0:
        return
    with nogil, parallel(num_threads=n_threads):
        row = <double*> malloc((L * L + 1) * sizeof(double))
        for ex in prange(n_examples, schedule="dynamic", chunksize=1):
            if row == NULL:
                failed[ex] = 1  # this thread could not allocate: reported below
                continue
            if node_terms:
                total = 0.0
                for v in range(node_ptr[ex], node_ptr[ex + 1]):
                    for a in range(L):
                        row[a] = theta_nodes[v, a]
                    for k in range(inc_ptr[v], inc_ptr[v + 1]):
                        for a in range(L):
                            row[a] -= lam[inc_edge[k], inc_side[k], a]
                    total = total + smoothed_max(row, L, eps, inv_eps)
                out_nodes[ex] = total
            if edge_terms:
                total = 0.0
                for e in range(edge_ptr[ex], edge_ptr[ex + 1]):
                    for a in range(L):
                        for b in range(L):
                            row[a * L + b] = theta_edges[e * es, a, b] + lam[e, 0, a] + lam[e, 1, b]
                    total = total + smoothed_max(row, L * L, eps, inv_eps)
                out_edges[ex] = total
        free(row)
    if np.any(failed_arr):
        raise MemoryError("could not allocate the dual-value scratch buffer")


def node_message_sums(
    const double[:, :, ::1] lam,
    const int64_t[::1] inc_ptr,
    const int64_t[::1] inc_edge,
    const int64_t[::1] inc_side,
    double[:, ::1] out,
):
    """``out[v, a] = sum over edges e at v of lam[e, side, a]`` (out has shape (N, L))."""
    cdef Py_ssize_t n_nodes = out.shape[0], L = out.shape[1]
    cdef Py_ssize_t v, k, a
    with nogil:
        for v in range(n_nodes):
            for a in range(L):
                out[v, a] = 0.0
            for k in range(inc_ptr[v], inc_ptr[v + 1]):
                for a in range(L):
                    out[v, a] += lam[inc_edge[k], inc_side[k], a]


def use_simd(enabled: bool) -> bool:
    """Run the star sweeps' vector code (``True``, where the CPU has AVX2 and FMA) or the scalar
    code only (``False``); returns the previous setting.

    Both compute the same updates in the same order; their exp and log round differently (the
    vector ones within 3 ulps, see ``_star_simd.h``), so messages agree to rounding level, not
    bit for bit.
    """
    global simd_enabled
    previous = simd_enabled
    simd_enabled = bool(enabled) and SIMD_SUPPORTED
    return previous


def simd_supported() -> bool:
    """Whether this CPU runs the vector code (x86-64 with AVX2 and FMA)."""
    return SIMD_SUPPORTED


def use_avx512(enabled: bool) -> bool:
    """Let the vector code of two-state sweeps use 8-double AVX-512 vectors (``True``, where the
    CPU has AVX-512F) or 4-double AVX2 vectors only (``False``); returns the previous setting.

    Both compute the same operations lane for lane: the messages agree bit for bit.
    """
    global avx512_enabled
    previous = avx512_enabled
    avx512_enabled = bool(enabled) and AVX512_SUPPORTED
    return previous


def avx512_supported() -> bool:
    """Whether this CPU runs the AVX-512 vector code (AVX2, FMA and AVX-512F)."""
    return AVX512_SUPPORTED


def openmp_max_threads() -> int:
    """OpenMP's thread count for the next parallel region (1 in a build without OpenMP).

    It follows ``OMP_NUM_THREADS`` and ``threadpoolctl.threadpool_limits``, which is how
    ``slr --threads`` reaches every kernel that is not given a thread count.
    """
    return slr_openmp_max_threads()
