# cython: language_level=3
"""Cython kernels of the boosted multivariate regression trees (chapter Sec. 1.9.4).

One round of boosting uses, in order:

* :func:`subset_gradient` -- margins ``z = F + b`` and the log-likelihood gradient
  ``g = onehot(y) - softmax(z)`` on the round's random subset;
* :func:`grow_tree` -- one regression tree for all classes (vector leaves), greedy on
  the multivariate squared loss ``sum_k ||g_k - t(x_k)||^2``. Every feature is sorted
  once per round (the caller passes the orders); a node's rows stay sorted inside a
  contiguous segment of every feature's order, split by a stable partition, so the
  best split of a node costs ``O(D_in n_node D_out)`` with running (prefix) sums of the
  gradient vectors (footnote 3 of the chapter);
* :func:`refit_leaves` -- with the splits fixed, Newton's method with a backtracking
  line search on the biased logistic loss of each leaf (leaves are independent);
* :func:`add_tree` -- add the scaled tree to the scores of all rows.

:func:`predict_ensemble` evaluates a whole ensemble stored as flat node arrays.
Inputs are validated by the Python layer (``slr.oracles.trees``); nothing here checks.
"""
from cython.parallel cimport prange
from libc.math cimport exp, log, sqrt, INFINITY
from libc.stdlib cimport malloc, free
from libc.string cimport memset

import numpy as np
cimport numpy as cnp

cnp.import_array()

ctypedef cnp.intp_t intp
ctypedef cnp.int64_t int64

# Above this many classes the leaf re-fit uses the diagonal of the Hessian only:
# the full Hessian costs O(n K^2 + K^3) per Newton step.
cdef enum:
    FULL_HESSIAN_MAX_CLASSES = 16

cdef struct Split:
    intp feature      # -1: no admissible split
    intp n_left       # rows that go left (x <= threshold)
    double threshold
    double gain       # decrease of the squared loss


# --------------------------------------------------------------------------------------
# split search
# --------------------------------------------------------------------------------------
cdef void _best_split(const double[:, ::1] X, const double[:, ::1] G, const intp[:, ::1] order,
                      intp start, intp end, intp min_leaf, const double* total,
                      double* left_sum, Split* out) noexcept nogil:
    """Best split of the node whose rows are ``order[f, start:end]`` for every f.

    Minimising the summed squared distance to the child means is maximising
    ``|S_L|^2 / n_L + |S_R|^2 / n_R`` (S = sum of gradient vectors), evaluated in one
    left-to-right pass per feature. Ties keep the first candidate (lowest feature,
    lowest threshold).
    """
    cdef intp n = end - start
    cdef intp K = G.shape[1]
    cdef intp d = X.shape[1]
    cdef intp f, p, k, row, n_left, n_right
    cdef double parent, score, sl, sr, diff, xv, xnext, best = -INFINITY
    cdef double best_lo = 0.0, best_hi = 0.0
    out.feature = -1
    out.n_left = 0
    out.threshold = 0.0
    out.gain = 0.0
    if min_leaf < 1:
        min_leaf = 1
    if n < 2 * min_leaf:
        return
    parent = 0.0
    for k in range(K):
        parent += total[k] * total[k]
    parent /= n
    for f in range(d):
        for k in range(K):
            left_sum[k] = 0.0
        for p in range(start, end - min_leaf):
            row = order[f, p]
            for k in range(K):
                left_sum[k] += G[row, k]
            n_left = p - start + 1
            if n_left < min_leaf:
                continue
            xv = X[row, f]
            xnext = X[order[f, p + 1], f]
            if not (xnext > xv):
                continue
            n_right = n - n_left
            sl = 0.0
            sr = 0.0
            for k in range(K):
                sl += left_sum[k] * left_sum[k]
                diff = total[k] - left_sum[k]
                sr += diff * diff
            score = sl / n_left + sr / n_right
            if score > best:
                best = score
                out.feature = f
                out.n_left = n_left
                best_lo = xv
                best_hi = xnext
    if out.feature < 0:
        return
    out.gain = best - parent
    if not (out.gain > 0.0):
        out.feature = -1
        out.gain = 0.0
        return
    # midpoint, computed without overflow; never equal to the upper value
    out.threshold = best_lo * 0.5 + best_hi * 0.5
    if out.threshold >= best_hi or out.threshold < best_lo:
        out.threshold = best_lo


def find_best_split(const double[:, ::1] X, const double[:, ::1] G, intp min_leaf):
    """Best root split of ``X`` for the gradient vectors ``G`` (exposed for tests).

    Parameters
    ----------
    X : ndarray of shape (n, d), float64
    G : ndarray of shape (n, K), float64
    min_leaf : int
        Minimum number of rows in each child.

    Returns
    -------
    feature : int
        -1 if no split lowers the squared loss.
    threshold : float
        Rows with ``x[feature] <= threshold`` go left.
    gain : float
        Decrease of ``sum ||g - mean||^2``.
    """
    cdef intp n = X.shape[0], K = G.shape[1], k, i
    order = np.ascontiguousarray(np.argsort(np.asarray(X), axis=0, kind="stable").T, dtype=np.intp)
    cdef const intp[:, ::1] order_v = order
    cdef double[::1] total = np.zeros(K)
    cdef double[::1] scratch = np.zeros(K)
    cdef Split s
    for i in range(n):
        for k in range(K):
            total[k] += G[i, k]
    with nogil:
        _best_split(X, G, order_v, 0, n, min_leaf, &total[0], &scratch[0], &s)
    return int(s.feature), float(s.threshold), float(s.gain)


# --------------------------------------------------------------------------------------
# tree induction
# --------------------------------------------------------------------------------------
def grow_tree(const double[:, ::1] X, const double[:, ::1] G, intp[:, ::1] order,
              intp min_leaf, intp min_split, intp max_leaves):
    """Induce one multivariate regression tree, best split first.

    Parameters
    ----------
    X : ndarray of shape (n, d), float64
        Features of the round's subset.
    G : ndarray of shape (n, K), float64
        Targets (the gradient vectors).
    order : ndarray of shape (d, n), intp
        ``order[f]`` sorts the rows by feature ``f``. Overwritten: on return every
        leaf's rows are contiguous in ``order[0]``.
    min_leaf : int
        Minimum rows in each child of a split.
    min_split : int
        Nodes with fewer rows are not split.
    max_leaves : int
        Stop when the tree has this many leaves (nodes are split in order of gain).

    Returns
    -------
    feature : ndarray (n_nodes,) intp, -1 at leaves
    threshold : ndarray (n_nodes,) float64
    left, right : ndarray (n_nodes,) intp, children (node ids), -1 at leaves
    leaf_of_node : ndarray (n_nodes,) intp, leaf number or -1
    leaf_start, leaf_end : ndarray (n_leaves,) intp
        Leaf ``l`` owns the rows ``order[0, leaf_start[l]:leaf_end[l]]``.
    raw_values : ndarray (n_leaves, K) float64
        Mean gradient vector of each leaf (the squared-loss fit).
    """
    cdef intp n = X.shape[0], d = X.shape[1], K = G.shape[1]
    if min_leaf < 1:
        min_leaf = 1
    if min_split < 2:
        min_split = 2
    cdef intp leaf_cap = n // min_leaf
    if leaf_cap < 1:
        leaf_cap = 1
    if max_leaves < leaf_cap:
        leaf_cap = max_leaves if max_leaves >= 1 else 1
    cdef intp cap = 2 * leaf_cap - 1

    feature_a = np.full(cap, -1, dtype=np.intp)
    threshold_a = np.zeros(cap, dtype=np.float64)
    left_a = np.full(cap, -1, dtype=np.intp)
    right_a = np.full(cap, -1, dtype=np.intp)
    start_a = np.zeros(cap, dtype=np.intp)
    end_a = np.zeros(cap, dtype=np.intp)
    sums_a = np.zeros((cap, K), dtype=np.float64)
    cdef intp[::1] feature = feature_a
    cdef double[::1] threshold = threshold_a
    cdef intp[::1] left = left_a
    cdef intp[::1] right = right_a
    cdef intp[::1] nstart = start_a
    cdef intp[::1] nend = end_a
    cdef double[:, ::1] sums = sums_a
    cdef double[::1] scratch = np.zeros(K)
    cdef intp[::1] tmp = np.empty(max(n, 1), dtype=np.intp)
    cdef cnp.int8_t[::1] goes_left = np.zeros(max(n, 1), dtype=np.int8)
    cdef intp[::1] frontier = np.empty(cap, dtype=np.intp)
    cdef Split* cand = <Split*> malloc(cap * sizeof(Split))
    if cand == NULL:
        raise MemoryError()

    cdef intp i, k, f, p, q_left, q_right, node, best_slot, slot, fs, nl
    cdef intp n_nodes = 1, n_front = 1, n_leaves = 1, s0, e0, child
    cdef double best_gain
    try:
        with nogil:
            nstart[0] = 0
            nend[0] = n
            for i in range(n):
                for k in range(K):
                    sums[0, k] += G[i, k]
            cand[0].feature = -1
            if n >= min_split and leaf_cap > 1:
                _best_split(X, G, order, 0, n, min_leaf, &sums[0, 0], &scratch[0], &cand[0])
            frontier[0] = 0
            while n_leaves < leaf_cap:
                best_slot = -1
                best_gain = 0.0
                for slot in range(n_front):
                    node = frontier[slot]
                    if cand[node].feature >= 0 and (best_slot < 0 or cand[node].gain > best_gain):
                        best_slot = slot
                        best_gain = cand[node].gain
                if best_slot < 0:
                    break
                node = frontier[best_slot]
                fs = cand[node].feature
                nl = cand[node].n_left
                s0 = nstart[node]
                e0 = nend[node]
                feature[node] = fs
                threshold[node] = cand[node].threshold
                # the left rows are the first nl of the split feature's segment
                for p in range(s0, s0 + nl):
                    goes_left[order[fs, p]] = 1
                for f in range(d):
                    if f == fs:
                        continue
                    q_left = s0
                    q_right = 0
                    for p in range(s0, e0):
                        i = order[f, p]
                        if goes_left[i]:
                            order[f, q_left] = i
                            q_left += 1
                        else:
                            tmp[q_right] = i
                            q_right += 1
                    for p in range(q_right):
                        order[f, q_left + p] = tmp[p]
                for p in range(s0, s0 + nl):
                    goes_left[order[fs, p]] = 0
                # children
                left[node] = n_nodes
                right[node] = n_nodes + 1
                nstart[n_nodes] = s0
                nend[n_nodes] = s0 + nl
                nstart[n_nodes + 1] = s0 + nl
                nend[n_nodes + 1] = e0
                for p in range(s0, s0 + nl):
                    i = order[fs, p]
                    for k in range(K):
                        sums[n_nodes, k] += G[i, k]
                for k in range(K):
                    sums[n_nodes + 1, k] = sums[node, k] - sums[n_nodes, k]
                for child in range(n_nodes, n_nodes + 2):
                    cand[child].feature = -1
                    if nend[child] - nstart[child] >= min_split and n_leaves + 1 < leaf_cap:
                        _best_split(X, G, order, nstart[child], nend[child], min_leaf,
                                    &sums[child, 0], &scratch[0], &cand[child])
                frontier[best_slot] = n_nodes
                frontier[n_front] = n_nodes + 1
                n_front += 1
                n_nodes += 2
                n_leaves += 1
    finally:
        free(cand)

    leaf_of_node_a = np.full(n_nodes, -1, dtype=np.intp)
    leaf_nodes = np.flatnonzero(feature_a[:n_nodes] < 0)
    leaf_of_node_a[leaf_nodes] = np.arange(leaf_nodes.size)
    counts = (end_a[leaf_nodes] - start_a[leaf_nodes]).astype(np.float64)
    raw_values = sums_a[leaf_nodes] / np.maximum(counts, 1.0)[:, None]
    return (feature_a[:n_nodes].copy(), threshold_a[:n_nodes].copy(), left_a[:n_nodes].copy(),
            right_a[:n_nodes].copy(), leaf_of_node_a, start_a[leaf_nodes].copy(),
            end_a[leaf_nodes].copy(), raw_values)


# --------------------------------------------------------------------------------------
# gradients and leaf re-fitting
# --------------------------------------------------------------------------------------
def subset_gradient(const double[:, ::1] F, const double[:, ::1] B, const int64[::1] labels,
                    const intp[::1] rows, double[:, ::1] Z, double[:, ::1] G, int64[::1] y_out):
    """Margins, labels and log-likelihood gradients of the subset ``rows``.

    Writes ``Z[j] = F[rows[j]] + B[rows[j]]``, ``y_out[j] = labels[rows[j]]`` and
    ``G[j] = onehot(y_out[j]) - softmax(Z[j])``; returns the summed biased loss.
    """
    cdef intp n = rows.shape[0], K = F.shape[1], j, i, k
    cdef double m, s, lse, total = 0.0
    with nogil:
        for j in range(n):
            i = rows[j]
            m = -INFINITY
            for k in range(K):
                Z[j, k] = F[i, k] + B[i, k]
                if Z[j, k] > m:
                    m = Z[j, k]
            s = 0.0
            for k in range(K):
                G[j, k] = exp(Z[j, k] - m)
                s += G[j, k]
            lse = m + log(s)
            for k in range(K):
                G[j, k] = -G[j, k] / s
            y_out[j] = labels[i]
            G[j, labels[i]] += 1.0
            total += lse - Z[j, labels[i]]
    return total


cdef double _leaf_objective(const double[:, ::1] Z, const int64[::1] y, const intp[::1] rows,
                            intp s0, intp e0, const double* v, double l2, double* p,
                            double* grad, double* hess, bint full) noexcept nogil:
    """Biased loss of one leaf at values v, plus l2/2 |v|^2; optionally gradient/Hessian.

    ``grad`` NULL: value only. ``hess`` is K x K if ``full`` else its diagonal (K).
    """
    cdef intp K = Z.shape[1], r, i, a, b, yi
    cdef double m, s, lse, obj = 0.0, pa
    if grad != NULL:
        for a in range(K):
            grad[a] = l2 * v[a]
        if full:
            memset(hess, 0, K * K * sizeof(double))
        else:
            memset(hess, 0, K * sizeof(double))
    for r in range(s0, e0):
        i = rows[r]
        yi = y[i]
        m = -INFINITY
        for a in range(K):
            p[a] = Z[i, a] + v[a]
            if p[a] > m:
                m = p[a]
        s = 0.0
        for a in range(K):
            pa = p[a]
            p[a] = exp(pa - m)
            s += p[a]
        lse = m + log(s)
        obj += lse - Z[i, yi] - v[yi]
        if grad != NULL:
            for a in range(K):
                p[a] /= s
                grad[a] += p[a]
            grad[yi] -= 1.0
            if full:
                for a in range(K):
                    pa = p[a]
                    hess[a * K + a] += pa
                    for b in range(a + 1):
                        hess[a * K + b] -= pa * p[b]
            else:
                for a in range(K):
                    hess[a] += p[a] * (1.0 - p[a])
    for a in range(K):
        obj += 0.5 * l2 * v[a] * v[a]
    return obj


cdef bint _cholesky_solve(double* H, double* rhs, intp K) noexcept nogil:
    """Solve H x = rhs in place (x in rhs) for symmetric H given in its lower triangle."""
    cdef intp a, b, c
    cdef double s
    for a in range(K):
        for b in range(a + 1):
            s = H[a * K + b]
            for c in range(b):
                s -= H[a * K + c] * H[b * K + c]
            if a == b:
                if not (s > 0.0):
                    return False
                H[a * K + a] = sqrt(s)
            else:
                H[a * K + b] = s / H[b * K + b]
    for a in range(K):
        s = rhs[a]
        for c in range(a):
            s -= H[a * K + c] * rhs[c]
        rhs[a] = s / H[a * K + a]
    for a in range(K - 1, -1, -1):
        s = rhs[a]
        for c in range(a + 1, K):
            s -= H[c * K + a] * rhs[c]
        rhs[a] = s / H[a * K + a]
    return True


def refit_leaves(const double[:, ::1] Z, const int64[::1] y, const intp[::1] rows,
                 const intp[::1] leaf_start, const intp[::1] leaf_end, double[:, ::1] values,
                 double l2, int max_steps):
    """Re-fit the leaf values of a tree to the biased logistic loss, splits fixed.

    For each leaf ``l`` minimises
    ``sum_{j in leaf} [logsumexp(Z[j] + v) - Z[j, y[j]] - v[y[j]]] + l2/2 |v|^2`` by Newton
    steps with a backtracking (Armijo) line search, starting from whichever of
    ``values[l]`` (on input: the raw squared-loss leaves) and zero is lower, so the
    result is never worse than either. With more than ``FULL_HESSIAN_MAX_CLASSES``
    classes the steps use the Hessian's diagonal.

    Parameters
    ----------
    Z : ndarray (n, K) float64
        Margins ``F + b`` of the subset.
    y : ndarray (n,) int64
    rows, leaf_start, leaf_end : intp arrays, as returned by :func:`grow_tree`.
    values : ndarray (n_leaves, K) float64
        In: starting values; out: re-fitted values.
    l2 : float
        Ridge on the leaf values.
    max_steps : int
        Newton steps per leaf (fewer once the Newton decrement is below 1e-9 per row).
    """
    cdef intp K = Z.shape[1], n_leaves = leaf_start.shape[0], leaf, a, it, ls
    cdef bint full = K <= FULL_HESSIAN_MAX_CLASSES
    cdef intp hsize = K * K if full else K
    cdef double* buf = <double*> malloc((6 * K + 2 * hsize) * sizeof(double))
    if buf == NULL:
        raise MemoryError()
    cdef double* v = buf
    cdef double* trial = buf + K
    cdef double* p = buf + 2 * K
    cdef double* grad = buf + 3 * K
    cdef double* grad2 = buf + 4 * K
    cdef double* direction = buf + 5 * K
    cdef double* hess = buf + 6 * K
    cdef double* hess2 = buf + 6 * K + hsize
    cdef double* swap
    cdef double obj, new_obj, decrement, t, n_rows, ridge
    cdef intp s0, e0
    cdef bint accepted
    try:
        with nogil:
            for leaf in range(n_leaves):
                s0 = leaf_start[leaf]
                e0 = leaf_end[leaf]
                n_rows = e0 - s0
                if n_rows <= 0:
                    continue
                for a in range(K):
                    v[a] = values[leaf, a]
                    trial[a] = 0.0
                obj = _leaf_objective(Z, y, rows, s0, e0, v, l2, p, grad, hess, full)
                new_obj = _leaf_objective(Z, y, rows, s0, e0, trial, l2, p, grad2, hess2, full)
                if new_obj <= obj:
                    obj = new_obj
                    for a in range(K):
                        v[a] = 0.0
                    swap = grad; grad = grad2; grad2 = swap
                    swap = hess; hess = hess2; hess2 = swap
                # the softmax Hessian is singular along (1, ..., 1): the step uses a ridge >= l2
                ridge = l2 if l2 > 1e-9 * n_rows else 1e-9 * n_rows
                for it in range(max_steps):
                    for a in range(K):
                        direction[a] = -grad[a]
                    if full:
                        for a in range(K):
                            hess[a * K + a] += ridge
                        if not _cholesky_solve(hess, direction, K):
                            # numerically indefinite: a safe gradient step (curvature <= n/4)
                            for a in range(K):
                                direction[a] = -grad[a] / (0.25 * n_rows + ridge)
                    else:
                        for a in range(K):
                            direction[a] = -grad[a] / (hess[a] + ridge)
                    decrement = 0.0
                    for a in range(K):
                        decrement -= grad[a] * direction[a]
                    if not (decrement > 1e-9 * n_rows):
                        break
                    t = 1.0
                    accepted = False
                    for ls in range(40):
                        for a in range(K):
                            trial[a] = v[a] + t * direction[a]
                        new_obj = _leaf_objective(Z, y, rows, s0, e0, trial, l2, p, grad2, hess2,
                                                  full)
                        if new_obj <= obj - 1e-4 * t * decrement:
                            accepted = True
                            break
                        t *= 0.5
                    if not accepted:
                        break
                    obj = new_obj
                    for a in range(K):
                        v[a] = trial[a]
                    swap = grad; grad = grad2; grad2 = swap
                    swap = hess; hess = hess2; hess2 = swap
                for a in range(K):
                    values[leaf, a] = v[a]
    finally:
        free(buf)


# --------------------------------------------------------------------------------------
# prediction
# --------------------------------------------------------------------------------------
def add_tree(const double[:, ::1] X, const intp[::1] feature, const double[::1] threshold,
             const intp[::1] left, const intp[::1] right, const double[:, ::1] value,
             double[:, ::1] out, int n_jobs=1):
    """``out[i] += value[leaf(i)]`` for one tree (node ids local to the tree)."""
    cdef intp n = X.shape[0], K = out.shape[1], i, node, k
    if n_jobs < 1:
        n_jobs = 1
    with nogil:
        for i in prange(n, num_threads=n_jobs, schedule="static"):
            node = 0
            while feature[node] >= 0:
                if X[i, feature[node]] <= threshold[node]:
                    node = left[node]
                else:
                    node = right[node]
            for k in range(K):
                out[i, k] += value[node, k]


def predict_ensemble(const double[:, ::1] X, const intp[::1] tree_offsets,
                     const intp[::1] feature, const double[::1] threshold,
                     const intp[::1] left, const intp[::1] right, const double[:, ::1] value,
                     double[:, ::1] out, int n_jobs=1):
    """``out[i] += sum_t value[leaf_t(i)]`` over all trees.

    Node arrays are concatenated over trees; tree ``t`` owns nodes
    ``tree_offsets[t]:tree_offsets[t+1]`` and its child ids are absolute.
    """
    cdef intp n = X.shape[0], K = out.shape[1], n_trees = tree_offsets.shape[0] - 1
    cdef intp i, t, node, k
    if n_jobs < 1:
        n_jobs = 1
    with nogil:
        for i in prange(n, num_threads=n_jobs, schedule="static"):
            for t in range(n_trees):
                node = tree_offsets[t]
                while feature[node] >= 0:
                    if X[i, feature[node]] <= threshold[node]:
                        node = left[node]
                    else:
                        node = right[node]
                for k in range(K):
                    out[i, k] += value[node, k]
