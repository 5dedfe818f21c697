# cython: language_level=3
"""The biased logistic loss of a round's subset: its gradient and the leaf re-fit.

* :func:`subset_gradient` -- margins ``z = F + b`` and the log-likelihood gradient
  ``g = onehot(y) - softmax(z)`` on the round's rows: the targets the trees are grown on;
* :func:`stepped_loss` -- the biased loss of all rows at ``F + scale * D`` (a guarded
  round's trees ``D``, halved ``scale = 2**-j``), without forming the scores;
* :func:`step_log_partition`, :func:`step_target_term` and :func:`add_step` -- the change of
  that loss at a scale of the step from the rows' probabilities and the trees' leaves, in one
  ``log1p`` per row, and the step's addition, the probabilities carried along;
* :func:`refit_leaves` -- with a vector tree's splits fixed, Newton's method with a
  backtracking line search on the biased logistic loss of each leaf (leaves are
  independent; the steps are built around :func:`_refit_leaf`);
* :func:`class_margins` and :func:`refit_class_leaves` -- the same for the scalar leaves
  of a per-class tree (the NIPS protocol), each class against the rest.

Each takes optional row weights ``w`` (the loss of a row is multiplied by its weight;
None: every row weighs 1) and optional soft targets ``q`` (a row's loss is
``lse(z) - <q, z>``, its gradient ``q - softmax(z)``; None: the one-hot rows of the labels).

Inputs are validated by the Python layer (``slr.oracles.trees``); nothing here checks.
"""
from libc.math cimport exp, fabs, log, log1p, sqrt, INFINITY
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

import numpy as np

from slr._kernel_utils cimport exp_sum, intp_t, logsumexp

cdef enum:
    # Above this many classes the leaf re-fit uses the diagonal of the Hessian only:
    # the full Hessian costs O(n K^2 + K^3) per Newton step.
    FULL_HESSIAN_MAX_CLASSES = 16
    # halvings of the step before the line search gives up
    MAX_BACKTRACKS = 40


def subset_gradient(const double[:, ::1] F, const double[:, ::1] B, const int64_t[::1] labels,
                    const intp_t[::1] rows, double[:, ::1] Z, double[:, ::1] G,
                    int64_t[::1] y_out, weights=None, targets=None):
    """Margins, labels and log-likelihood gradients of the subset ``rows``.

    Writes ``Z[j] = F[rows[j]] + B[rows[j]]``, ``y_out[j] = labels[rows[j]]`` and
    ``G[j] = w_j (q_j - softmax(Z[j]))`` with ``q_j = onehot(y_out[j])``; returns the summed
    (weighted) biased loss. ``weights`` (n,) and ``targets`` (n, K), where given, are those
    of the subset's rows (already taken at ``rows``); with ``targets`` the labels are not read
    but copied.
    """
    cdef intp_t n = rows.shape[0], K = F.shape[1], j, i, k
    cdef double log_normaliser, exp_total, row_loss, total = 0.0
    cdef bint weighted = weights is not None, soft = targets is not None
    cdef const double[::1] W = weights if weighted else np.ones(1)
    cdef const double[:, ::1] Q = targets if soft else np.zeros((1, K))
    with nogil:
        for j in range(n):
            i = rows[j]
            for k in range(K):
                Z[j, k] = F[i, k] + B[i, k]
            log_normaliser = logsumexp(&Z[j, 0], K, &G[j, 0], &exp_total)
            for k in range(K):
                G[j, k] = -G[j, k] / exp_total
            if soft:
                row_loss = log_normaliser
                for k in range(K):
                    G[j, k] += Q[j, k]
                    row_loss -= Q[j, k] * Z[j, k]
            else:
                G[j, labels[i]] += 1.0
                row_loss = log_normaliser - Z[j, labels[i]]
            if weighted:
                for k in range(K):
                    G[j, k] *= W[j]
                row_loss *= W[j]
            y_out[j] = labels[i]
            total += row_loss
    return total


def stepped_loss(const double[:, ::1] F, const double[:, ::1] D, double scale, const double[:, ::1] B,
                 const int64_t[::1] labels, weights=None, targets=None):
    """The summed (weighted) biased loss of all rows at the scores ``F + scale * D``.

    A row's margins are ``z = (F[i] + scale * D[i]) + B[i]``, rounded as the scores
    ``F + scale * D`` and then ``z`` would be; its loss is ``w_i (lse(z) - <q_i, z>)`` with
    ``q_i = onehot(labels[i])``, or ``targets[i]`` where given (the labels are then not
    read). ``weights`` (n,), ``targets`` (n, K): as in :func:`subset_gradient`, for all rows.
    """
    cdef intp_t n = F.shape[0], K = F.shape[1], i, k
    cdef double exp_total, row_loss, total = 0.0
    cdef bint weighted = weights is not None, soft = targets is not None
    cdef const double[::1] W = weights if weighted else np.ones(1)
    cdef const double[:, ::1] Q = targets if soft else np.zeros((1, K))
    cdef double* z = <double*> malloc(max(K, 1) * sizeof(double))
    cdef double* terms = <double*> malloc(max(K, 1) * sizeof(double))
    if z == NULL or terms == NULL:
        free(z)
        free(terms)
        raise MemoryError("stepped_loss: no memory for one row")
    with nogil:
        for i in range(n):
            for k in range(K):
                z[k] = (F[i, k] + scale * D[i, k]) + B[i, k]
            row_loss = logsumexp(z, K, terms, &exp_total)
            if soft:
                for k in range(K):
                    row_loss -= Q[i, k] * z[k]
            else:
                row_loss -= z[labels[i]]
            if weighted:
                row_loss *= W[i]
            total += row_loss
    free(z)
    free(terms)
    return total


cdef inline intp_t _column_node(const intp_t[:, ::1] leaves, const intp_t[::1] node_offset, bint vector,
                                intp_t i, intp_t k) noexcept nogil:
    """The node of the round's table that gives row ``i``'s step in class ``k``: the vector tree's
    leaf, or that of class ``k``'s tree."""
    if vector:
        return node_offset[0] + leaves[0, i]
    return node_offset[k] + leaves[k, i]


def step_target_term(const intp_t[:, ::1] leaves, const intp_t[::1] node_offset, bint vector,
                     const double[:, ::1] values, const int64_t[::1] labels, weights=None, targets=None):
    """``sum_i w_i <q_i, D_i>`` for a round's step ``D`` (see :func:`step_log_partition`)."""
    cdef intp_t n = leaves.shape[1], K = node_offset.shape[0] if not vector else values.shape[1], i, k
    cdef double row, total = 0.0
    cdef bint weighted = weights is not None, soft = targets is not None
    cdef const double[::1] W = weights if weighted else np.ones(1)
    cdef const double[:, ::1] Q = targets if soft else np.zeros((1, K))
    with nogil:
        for i in range(n):
            if soft:
                row = 0.0
                for k in range(K):
                    row = row + Q[i, k] * values[_column_node(leaves, node_offset, vector, i, k),
                                                 k if vector else 0]
            else:
                k = labels[i]
                row = values[_column_node(leaves, node_offset, vector, i, k), k if vector else 0]
            if weighted:
                row = row * W[i]
            total += row
    return total


def step_log_partition(const double[:, ::1] P, const intp_t[:, ::1] leaves, const intp_t[::1] node_offset,
                       bint vector, const double[:, ::1] growth, weights=None):
    """``sum_i w_i log(sum_k P[i, k] exp(s D[i, k]) / sum_k P[i, k])``: with ``P`` the softmax of a
    guarded round's margins, the rise of the (weighted) log-partition part of the loss when the
    round's step ``D``, scaled by ``s``, is added to the scores; the loss rises by that minus
    ``s`` :func:`step_target_term`.

    The step is read from tables, not from rows: row ``i``'s step in class ``k`` is the value of
    the node :func:`_column_node` gives (``leaves`` (T, N): each tree's leaf of every row, local
    to the tree, ``node_offset`` (T,): where each tree's nodes begin in the tables; ``vector``:
    one tree for all classes, else tree ``k`` for class ``k``), and ``growth[node] =
    expm1(s value[node])`` (its column ``k`` for the vector tree, else column 0), so that a trial
    scale costs one ``log1p`` per row, not K exponentials.
    """
    cdef intp_t n = P.shape[0], K = P.shape[1], i, k
    cdef double mass, grown, row, total = 0.0
    cdef bint weighted = weights is not None
    cdef const double[::1] W = weights if weighted else np.ones(1)
    with nogil:
        for i in range(n):
            mass = 0.0
            grown = 0.0
            for k in range(K):
                mass = mass + P[i, k]
                grown = grown + P[i, k] * growth[_column_node(leaves, node_offset, vector, i, k),
                                                 k if vector else 0]
            row = log1p(grown / mass)
            if weighted:
                row = row * W[i]
            total += row
    return total


def add_step(double[:, ::1] P, const intp_t[:, ::1] leaves, const intp_t[::1] node_offset, bint vector,
             const double[:, ::1] growth, const double[:, ::1] values, double[:, ::1] F):
    """Add a round's step to the scores, ``F[i, k] += values[node]`` (the node as in
    :func:`step_log_partition`; one addition per score, as the trees add their values), and
    move ``P`` to the softmax of the new margins: ``P[i, k] *= 1 + growth[node]``, normalised."""
    cdef intp_t n = P.shape[0], K = P.shape[1], i, k, node, column
    cdef double mass
    with nogil:
        for i in range(n):
            # the grown probabilities are formed twice, for their sum and then divided by it, rather
            # than stored and read back, which made the loop several times slower (docs/design.md)
            mass = 0.0
            for k in range(K):
                node = _column_node(leaves, node_offset, vector, i, k)
                column = k if vector else 0
                F[i, k] += values[node, column]
                mass = mass + P[i, k] * (1.0 + growth[node, column])
            for k in range(K):
                node = _column_node(leaves, node_offset, vector, i, k)
                P[i, k] = P[i, k] * (1.0 + growth[node, k if vector else 0]) / mass


cdef struct NewtonWork:
    # the rows' weights and soft targets (row i at targets + i * K; used if soft)
    const double* weights
    const double* targets
    bint soft
    # scratch of the leaf re-fit, each of K entries unless said otherwise
    double* probabilities
    double* direction
    double* grad        # gradient at the current values
    double* hess        # Hessian there: K x K (lower triangle) with the full Hessian, else K
    double* trial       # line-search point
    double* trial_grad
    double* trial_hess


cdef inline void _add_softmax_hessian(const double* p, intp_t K, double w, double* hess,
                                      bint full) noexcept nogil:
    """``hess += w (diag(p) - p p^T)`` (lower triangle), or its diagonal when not ``full``."""
    cdef intp_t a, b
    if full:
        for a in range(K):
            hess[a * K + a] += w * p[a]
            for b in range(a + 1):
                hess[a * K + b] -= w * p[a] * p[b]
    else:
        for a in range(K):
            hess[a] += w * (p[a] * (1.0 - p[a]))


cdef double _leaf_objective(const double[:, ::1] Z, const int64_t[::1] y, const intp_t[::1] rows,
                            intp_t start, intp_t end, const double* v, double l2, double* p,
                            double* grad, double* hess, bint full,
                            const NewtonWork* work) noexcept nogil:
    """Weighted biased loss of one leaf at values v, plus l2/2 |v|^2, with its gradient and
    Hessian.

    ``hess`` is K x K (lower triangle) if ``full`` else its diagonal (K); ``p`` is scratch;
    ``work`` gives the rows' weights and soft targets.
    """
    cdef intp_t K = Z.shape[1], r, i, a, label
    cdef double largest, exp_total, w, row, objective = 0.0
    cdef const double* q
    for a in range(K):
        grad[a] = l2 * v[a]
    memset(hess, 0, (K * K if full else K) * sizeof(double))
    for r in range(start, end):
        i = rows[r]
        label = y[i]
        w = work.weights[i]
        # logsumexp with the maximum taken while the row is formed (one pass fewer)
        largest = -INFINITY
        for a in range(K):
            p[a] = Z[i, a] + v[a]
            largest = p[a] if p[a] > largest else largest
        exp_total = exp_sum(p, K, largest, 1.0, p)
        if work.soft:
            q = work.targets + i * K
            row = largest + log(exp_total)
            for a in range(K):
                row -= q[a] * (Z[i, a] + v[a])
            objective += w * row
        else:
            objective += w * (largest + log(exp_total) - Z[i, label] - v[label])
        for a in range(K):
            p[a] /= exp_total
            grad[a] += w * p[a]
        if work.soft:
            for a in range(K):
                grad[a] -= w * q[a]
        else:
            grad[label] -= w
        _add_softmax_hessian(p, K, w, hess, full)
    for a in range(K):
        objective += 0.5 * l2 * v[a] * v[a]
    return objective


cdef bint _cholesky_solve(double* H, double* rhs, intp_t K) noexcept nogil:
    """Solve H x = rhs in place (x in rhs) for symmetric H given in its lower triangle."""
    cdef intp_t a, b, c
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


cdef double _newton_direction(NewtonWork* work, intp_t K, bint full, double ridge,
                              double n_rows) noexcept nogil:
    """Set ``work.direction`` to the ridged Newton step; return the decrement ``-grad . step``.

    Overwrites ``work.hess`` (the Cholesky factor) when ``full``. ``n_rows`` is the leaf's
    weight (its number of rows without weights).
    """
    cdef intp_t a
    cdef double decrement = 0.0
    for a in range(K):
        work.direction[a] = -work.grad[a]
    if full:
        for a in range(K):
            work.hess[a * K + a] += ridge
        if not _cholesky_solve(work.hess, work.direction, K):
            # numerically indefinite: a safe gradient step (curvature <= n/4)
            for a in range(K):
                work.direction[a] = -work.grad[a] / (0.25 * n_rows + ridge)
    else:
        for a in range(K):
            work.direction[a] = -work.grad[a] / (work.hess[a] + ridge)
    for a in range(K):
        decrement -= work.grad[a] * work.direction[a]
    return decrement


cdef bint _backtrack(const double[:, ::1] Z, const int64_t[::1] y, const intp_t[::1] rows,
                     intp_t start, intp_t end, const double* v, double objective,
                     double decrement, double l2, bint full, NewtonWork* work,
                     double* trial_objective) noexcept nogil:
    """Armijo line search from ``v`` along ``work.direction``, halving the step from 1.

    On success ``work.trial`` holds the accepted point, ``trial_objective`` its objective
    and ``work.trial_grad`` / ``work.trial_hess`` its derivatives.
    """
    cdef intp_t K = Z.shape[1], a, halvings
    cdef double t = 1.0
    for halvings in range(MAX_BACKTRACKS):
        for a in range(K):
            work.trial[a] = v[a] + t * work.direction[a]
        trial_objective[0] = _leaf_objective(Z, y, rows, start, end, work.trial, l2,
                                             work.probabilities, work.trial_grad,
                                             work.trial_hess, full, work)
        if trial_objective[0] <= objective - 1e-4 * t * decrement:
            return True
        t *= 0.5
    return False


cdef inline void _accept_trial(NewtonWork* work) noexcept nogil:
    """The trial point's derivatives become the current ones (the buffers swap)."""
    work.grad, work.trial_grad = work.trial_grad, work.grad
    work.hess, work.trial_hess = work.trial_hess, work.hess


cdef void _refit_leaf(const double[:, ::1] Z, const int64_t[::1] y, const intp_t[::1] rows,
                      intp_t start, intp_t end, double* v, double l2, int max_steps,
                      bint full, NewtonWork* work) noexcept nogil:
    """Newton's method on one leaf's biased loss, from the better of ``v`` and zero; in place."""
    cdef intp_t K = Z.shape[1], step, r
    cdef double n_rows = 0.0, objective, trial_objective, decrement, ridge
    for r in range(start, end):
        n_rows += work.weights[rows[r]]   # the leaf's weight: its number of rows without weights
    objective = _leaf_objective(Z, y, rows, start, end, v, l2, work.probabilities, work.grad,
                                work.hess, full, work)
    memset(work.trial, 0, K * sizeof(double))
    trial_objective = _leaf_objective(Z, y, rows, start, end, work.trial, l2,
                                      work.probabilities, work.trial_grad, work.trial_hess, full,
                                      work)
    if trial_objective <= objective:
        objective = trial_objective
        memset(v, 0, K * sizeof(double))
        _accept_trial(work)
    # the softmax Hessian is singular along (1, ..., 1): the step uses a ridge >= l2
    ridge = l2 if l2 > 1e-9 * n_rows else 1e-9 * n_rows
    for step in range(max_steps):
        decrement = _newton_direction(work, K, full, ridge, n_rows)
        if not (decrement > 1e-9 * n_rows):
            break
        if not _backtrack(Z, y, rows, start, end, v, objective, decrement, l2, full, work,
                          &trial_objective):
            break
        objective = trial_objective
        memcpy(v, work.trial, K * sizeof(double))
        _accept_trial(work)


def refit_leaves(const double[:, ::1] Z, const int64_t[::1] y, const intp_t[::1] rows,
                 const intp_t[::1] leaf_start, const intp_t[::1] leaf_end,
                 double[:, ::1] values, double l2, int max_steps, weights=None, targets=None):
    """Re-fit the leaf values of a tree to the biased logistic loss, splits fixed.

    For each leaf ``l`` minimises
    ``sum_{j in leaf} w_j [logsumexp(Z[j] + v) - <q_j, Z[j] + v>] + l2/2 |v|^2``
    (``q_j = onehot(y[j])`` and ``w_j = 1`` unless given) by Newton
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
        Newton steps per leaf (fewer once the Newton decrement is below 1e-9 per row, or
        per unit of weight).
    weights : ndarray (n,) float64 or None
        Row weights ``w`` (None: ones).
    targets : ndarray (n, K) float64 or None
        Soft targets ``q`` (None: the labels ``y``, which are then not read).
    """
    cdef intp_t K = Z.shape[1], leaf
    cdef bint full = K <= FULL_HESSIAN_MAX_CLASSES
    cdef intp_t hess_size = K * K if full else K
    cdef NewtonWork work
    cdef double* buffer = <double*> malloc((5 * K + 2 * hess_size) * sizeof(double))
    if buffer == NULL:
        raise MemoryError()
    cdef const double[::1] W = np.ones(Z.shape[0]) if weights is None else weights
    cdef const double[:, ::1] Q = np.zeros((1, K)) if targets is None else targets
    work.weights = &W[0] if W.shape[0] else NULL
    work.targets = &Q[0, 0]
    work.soft = targets is not None
    work.probabilities = buffer
    work.direction = buffer + K
    work.grad = buffer + 2 * K
    work.trial = buffer + 3 * K
    work.trial_grad = buffer + 4 * K
    work.hess = buffer + 5 * K
    work.trial_hess = buffer + 5 * K + hess_size
    try:
        with nogil:
            for leaf in range(leaf_start.shape[0]):
                if leaf_end[leaf] > leaf_start[leaf]:
                    _refit_leaf(Z, y, rows, leaf_start[leaf], leaf_end[leaf], &values[leaf, 0],
                                l2, max_steps, full, &work)
    finally:
        free(buffer)


# --------------------------------------------------------------------------------------
# per-class trees (the NIPS protocol)
# --------------------------------------------------------------------------------------
def class_margins(const double[:, ::1] Z, double[:, ::1] U):
    """``U[j, k] = Z[j, k] - logsumexp_{a != k} Z[j, a]``: each class against the rest.

    With these, the biased loss of a row as a function of a shift ``v`` of class ``k``
    alone is ``softplus(U[j, k] + v)`` minus ``U[j, k] + v`` if the row's label is ``k``,
    plus a constant. Relative to the row's largest score, the others of a class sum to
    the total minus its own term (at least 1, since the largest's term is 1: no
    cancellation); those of the largest class are summed relative to the second largest
    (whose term is then 1: no underflow however far ahead the largest is).
    """
    cdef intp_t n = Z.shape[0], K = Z.shape[1], j, k, top
    cdef double largest, second, total, rest
    with nogil:
        for j in range(n):
            top = 0
            for k in range(1, K):
                if Z[j, k] > Z[j, top]:
                    top = k
            largest = Z[j, top]
            second = -INFINITY
            total = 0.0
            for k in range(K):
                U[j, k] = exp(Z[j, k] - largest)
                total += U[j, k]
                if k != top and Z[j, k] > second:
                    second = Z[j, k]
            for k in range(K):
                if k != top:
                    U[j, k] = Z[j, k] - largest - log(total - U[j, k])
            rest = 0.0
            for k in range(K):
                if k != top:
                    rest += exp(Z[j, k] - second)
            U[j, top] = largest - second - log(rest)


cdef double _class_leaf_objective(const double[:, ::1] U, const int64_t[::1] y,
                                  const intp_t[::1] rows, intp_t start, intp_t end,
                                  intp_t k, double v, double l2, double* grad,
                                  double* hess, const double[::1] W, const double[:, ::1] Q,
                                  bint soft) noexcept nogil:
    """Weighted biased loss of one leaf when class ``k`` is shifted by ``v`` (plus
    ``l2/2 v^2``, minus a constant), with its derivative and curvature (the latter without
    the ridge); with soft targets ``Q`` the row's target of class ``k`` replaces
    ``[y == k]``."""
    cdef intp_t r, i
    cdef double x, s, w, objective = 0.5 * l2 * v * v
    grad[0] = l2 * v
    hess[0] = 0.0
    for r in range(start, end):
        i = rows[r]
        w = W[i]
        x = U[i, k] + v
        # softplus(x) and sigmoid(x) from one exponential of -|x|
        s = exp(-fabs(x))
        objective += w * ((x if x > 0.0 else 0.0) + log1p(s))
        s = 1.0 / (1.0 + s) if x >= 0.0 else s / (1.0 + s)
        grad[0] += w * s
        hess[0] += w * (s * (1.0 - s))
        if soft:
            objective -= w * (Q[i, k] * x)
            grad[0] -= w * Q[i, k]
        elif y[i] == k:
            objective -= w * x
            grad[0] -= w
    return objective


cdef double _refit_class_leaf(const double[:, ::1] U, const int64_t[::1] y,
                              const intp_t[::1] rows, intp_t start, intp_t end, intp_t k,
                              double v, double l2, int max_steps, const double[::1] W,
                              const double[:, ::1] Q, bint soft) noexcept nogil:
    """Newton's method on one leaf's value for class ``k``, from the better of ``v`` and 0."""
    cdef intp_t step, halvings, r
    cdef double n_rows = 0.0, objective, grad, hess, trial, trial_objective
    cdef double trial_grad, trial_hess, direction, decrement, t, ridge
    for r in range(start, end):
        n_rows += W[rows[r]]   # the leaf's weight: its number of rows without weights
    objective = _class_leaf_objective(U, y, rows, start, end, k, v, l2, &grad, &hess, W, Q, soft)
    trial_objective = _class_leaf_objective(U, y, rows, start, end, k, 0.0, l2, &trial_grad,
                                            &trial_hess, W, Q, soft)
    if trial_objective <= objective:
        v, objective, grad, hess = 0.0, trial_objective, trial_grad, trial_hess
    ridge = l2 if l2 > 1e-9 * n_rows else 1e-9 * n_rows
    for step in range(max_steps):
        direction = -grad / (hess + ridge)
        decrement = -grad * direction
        if not (decrement > 1e-9 * n_rows):
            break
        t = 1.0
        for halvings in range(MAX_BACKTRACKS):
            trial = v + t * direction
            trial_objective = _class_leaf_objective(U, y, rows, start, end, k, trial, l2,
                                                    &trial_grad, &trial_hess, W, Q, soft)
            if trial_objective <= objective - 1e-4 * t * decrement:
                break
            t *= 0.5
        else:
            break
        v, objective, grad, hess = trial, trial_objective, trial_grad, trial_hess
    return v


def refit_class_leaves(const double[:, ::1] U, const int64_t[::1] y, const intp_t[::1] rows,
                       const intp_t[::1] leaf_start, const intp_t[::1] leaf_end,
                       double[::1] values, intp_t k, double l2, int max_steps, weights=None,
                       targets=None):
    """Re-fit the scalar leaves of a tree for class ``k`` to the biased logistic loss.

    For each leaf ``l`` minimises, over ``v``, the loss of its rows when ``v`` is added to
    class ``k``'s score and the other classes' scores stay as they are,
    ``sum_{j in leaf} w_j [softplus(U[j, k] + v) - q_j(k) (U[j, k] + v)] + l2/2 v^2``
    (``q_j(k) = [y[j] == k]`` and ``w_j = 1`` unless given),
    by Newton steps with a backtracking (Armijo) line search, starting from whichever
    of ``values[l]`` and zero is lower.

    Parameters
    ----------
    U : ndarray (n, K) float64
        Class-against-rest margins of the subset (:func:`class_margins`).
    y : ndarray (n,) int64
    rows, leaf_start, leaf_end : intp arrays, as returned by :func:`grow_tree`.
    values : ndarray (n_leaves,) float64
        In: starting values; out: re-fitted values.
    k : int
        The class of the tree.
    l2 : float
        Ridge on the leaf values.
    max_steps : int
        Newton steps per leaf (fewer once the Newton decrement is below 1e-9 per row, or
        per unit of weight).
    weights, targets : ndarray or None
        As in :func:`refit_leaves`.
    """
    cdef intp_t leaf
    cdef bint soft = targets is not None
    cdef const double[::1] W = np.ones(U.shape[0]) if weights is None else weights
    cdef const double[:, ::1] Q = targets if soft else np.zeros((1, U.shape[1]))
    with nogil:
        for leaf in range(leaf_start.shape[0]):
            if leaf_end[leaf] > leaf_start[leaf]:
                values[leaf] = _refit_class_leaf(U, y, rows, leaf_start[leaf], leaf_end[leaf],
                                                 k, values[leaf], l2, max_steps, W, Q, soft)


