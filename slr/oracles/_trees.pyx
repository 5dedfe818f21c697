# cython: language_level=3
"""Cython kernels of the boosted multivariate regression trees (chapter Sec. 1.9.4).

One round of boosting uses, in order:

* :func:`subset_gradient` -- margins ``z = F + b`` and the log-likelihood gradient
  ``g = onehot(y) - softmax(z)`` on the round's random subset;
* :func:`grow_tree` -- one regression tree for all classes (vector leaves), greedy on
  the multivariate squared loss ``sum_k ||g_k - t(x_k)||^2``, best split first. Every
  feature is sorted once per round (the caller passes the orders); a node's rows stay
  sorted inside a contiguous segment of every feature's order, split by a stable
  partition, so the best split of a node costs ``O(D_in n_node D_out)`` with running
  (prefix) sums of the gradient vectors (footnote 3 of the chapter);
* :func:`refit_leaves` -- with the splits fixed, Newton's method with a backtracking
  line search on the biased logistic loss of each leaf (leaves are independent);
* :func:`add_tree` -- add the scaled tree to the scores of all rows.

:func:`predict_ensemble` evaluates a whole ensemble stored as flat node arrays.
Inputs are validated by the Python layer (``slr.oracles.trees``); nothing here checks.

The code is laid out as scikit-learn's tree module: split search (:func:`_scan_feature`,
:func:`_best_split`), partition (:func:`_partition`), the frontier of splittable leaves
(a heap, :func:`_frontier_push` / :func:`_frontier_pop`) and the growth that uses them
(:class:`_TreeGrower`); the leaf re-fit around one Newton step per leaf
(:func:`_refit_leaf`); one tree walk (:func:`_leaf_reached`).
"""
from cython.parallel cimport prange
from libc.math cimport exp, fabs, log, log1p, sqrt, INFINITY
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

import numpy as np

from slr._kernel_utils cimport exp_sum, intp_t, logsumexp

# Above this many classes the leaf re-fit uses the diagonal of the Hessian only:
# the full Hessian costs O(n K^2 + K^3) per Newton step.
cdef enum:
    FULL_HESSIAN_MAX_CLASSES = 16
    # rows that every tree walks in turn in predict_ensemble
    PREDICT_BLOCK_ROWS = 256
    # rows walked side by side through one tree, for trees at most this deep
    WALK_LANES = 16
    LOCKSTEP_MAX_DEPTH = 32
    # halvings of the step before the line search gives up
    MAX_BACKTRACKS = 40

cdef struct Split:
    intp_t feature      # -1: no admissible split
    intp_t n_left       # rows that go left (x <= threshold)
    double threshold
    double gain         # decrease of the squared loss
    intp_t bin          # histogram search: the last bin that goes left

cdef struct SplitScan:
    # the best candidate of a split search so far
    double score        # |S_L|^2 / n_L + |S_R|^2 / n_R
    intp_t feature      # -1: none yet
    intp_t n_left
    double below        # largest value going left
    double above        # smallest value going right


# --------------------------------------------------------------------------------------
# split search
# --------------------------------------------------------------------------------------
cdef inline double _children_score(const double* left_sum, const double* total, intp_t K,
                                   intp_t n_left, intp_t n_right) noexcept nogil:
    """``|S_L|^2 / n_L + |S_R|^2 / n_R`` with ``S_R = total - S_L``."""
    cdef intp_t k
    cdef double diff, left = 0.0, right = 0.0
    for k in range(K):
        left += left_sum[k] * left_sum[k]
        diff = total[k] - left_sum[k]
        right += diff * diff
    return left / n_left + right / n_right


cdef inline double _midpoint(double below, double above) noexcept nogil:
    """A threshold in ``[below, above)``: their midpoint, computed without overflow."""
    cdef double middle = below * 0.5 + above * 0.5
    if middle >= above or middle < below:
        return below
    return middle


cdef void _scan_feature(const double[:, ::1] X, const double[:, ::1] G,
                        const intp_t[:, ::1] order, intp_t f, intp_t start, intp_t end,
                        intp_t min_leaf, const double* total, double* left_sum,
                        SplitScan* best) noexcept nogil:
    """Try every threshold of feature ``f`` on the rows ``order[f, start:end]``.

    One left-to-right pass with the running sum of the gradient vectors; a candidate
    replaces ``best`` only if it scores strictly higher, so ties keep the earlier one.
    """
    cdef intp_t n = end - start, K = G.shape[1]
    cdef intp_t p, k, row, n_left
    cdef double value, next_value, score
    memset(left_sum, 0, K * sizeof(double))
    for p in range(start, end - min_leaf):
        row = order[f, p]
        for k in range(K):
            left_sum[k] += G[row, k]
        n_left = p - start + 1
        if n_left < min_leaf:
            continue
        value = X[row, f]
        next_value = X[order[f, p + 1], f]
        if not (next_value > value):
            continue  # no threshold separates equal values
        score = _children_score(left_sum, total, K, n_left, n - n_left)
        if score > best.score:
            best.score = score
            best.feature = f
            best.n_left = n_left
            best.below = value
            best.above = next_value


cdef inline void _take_best(const SplitScan* best, const double* total, intp_t K, intp_t n,
                            Split* out) noexcept nogil:
    """Make the search's best candidate the node's split if it lowers the squared loss:
    its gain over the unsplit node, ``score - |S|^2 / n``, must be positive. Otherwise
    ``out.feature`` stays -1."""
    cdef intp_t k
    cdef double parent = 0.0, gain
    if best.feature < 0:
        return
    for k in range(K):
        parent += total[k] * total[k]
    gain = best.score - parent / n
    if not (gain > 0.0):
        return
    out.feature = best.feature
    out.n_left = best.n_left
    out.threshold = _midpoint(best.below, best.above)
    out.gain = gain


cdef void _best_split(const double[:, ::1] X, const double[:, ::1] G,
                      const intp_t[:, ::1] order, intp_t start, intp_t end, intp_t min_leaf,
                      const double* total, double* left_sum, Split* out) noexcept nogil:
    """Best split of the node whose rows are ``order[f, start:end]`` for every f.

    Minimising the summed squared distance to the child means is maximising
    ``|S_L|^2 / n_L + |S_R|^2 / n_R`` (S = sum of gradient vectors, ``total`` the node's).
    Ties keep the first candidate (lowest feature, lowest threshold). ``out.feature`` is
    -1 when no split leaves ``min_leaf >= 1`` rows on each side and lowers the loss.
    """
    cdef intp_t n = end - start, K = G.shape[1], f
    cdef SplitScan best
    out.feature = -1
    out.n_left = 0
    out.threshold = 0.0
    out.gain = 0.0
    if n < 2 * min_leaf:
        return
    best.score = -INFINITY
    best.feature = -1
    for f in range(X.shape[1]):
        _scan_feature(X, G, order, f, start, end, min_leaf, total, left_sum, &best)
    _take_best(&best, total, K, n, out)


cdef void _add_column_sums(const double[:, ::1] G, double* total) noexcept nogil:
    """``total += G.sum(axis=0)``, summed row after row."""
    cdef intp_t i, k
    for i in range(G.shape[0]):
        for k in range(G.shape[1]):
            total[k] += G[i, k]


def find_best_split(const double[:, ::1] X, const double[:, ::1] G, intp_t min_leaf):
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
    order = np.ascontiguousarray(np.argsort(np.asarray(X), axis=0, kind="stable").T, dtype=np.intp)
    cdef const intp_t[:, ::1] order_view = order
    cdef double[::1] total = np.zeros(G.shape[1])
    cdef double[::1] left_sum = np.zeros(G.shape[1])
    cdef Split split
    with nogil:
        _add_column_sums(G, &total[0])
        _best_split(X, G, order_view, 0, X.shape[0], max(min_leaf, 1), &total[0],
                    &left_sum[0], &split)
    return int(split.feature), float(split.threshold), float(split.gain)


# --------------------------------------------------------------------------------------
# partition
# --------------------------------------------------------------------------------------
cdef void _partition_segment(intp_t[:, ::1] order, intp_t f, intp_t start, intp_t end,
                             const unsigned char[::1] goes_left, intp_t[::1] spill) noexcept nogil:
    """Stable partition of ``order[f, start:end]``: the rows marked in ``goes_left`` first."""
    cdef intp_t p, row, n_kept = start, n_spilled = 0
    for p in range(start, end):
        row = order[f, p]
        if goes_left[row]:
            order[f, n_kept] = row
            n_kept += 1
        else:
            spill[n_spilled] = row
            n_spilled += 1
    for p in range(n_spilled):
        order[f, n_kept + p] = spill[p]


cdef void _partition(intp_t[:, ::1] order, intp_t split_feature, intp_t start, intp_t end,
                     intp_t n_left, unsigned char[::1] goes_left, intp_t[::1] spill) noexcept nogil:
    """Split the segment ``start:end`` of every feature's order into the two children.

    The left child's rows are the first ``n_left`` of the split feature's segment; in
    every other feature's segment they move before the right child's rows, both keeping
    their order, so each child's rows stay sorted by every feature. ``goes_left`` is all
    zero on entry and on return.
    """
    cdef intp_t f, p
    for p in range(start, start + n_left):
        goes_left[order[split_feature, p]] = 1
    for f in range(order.shape[0]):
        if f != split_feature:
            _partition_segment(order, f, start, end, goes_left, spill)
    for p in range(start, start + n_left):
        goes_left[order[split_feature, p]] = 0


# --------------------------------------------------------------------------------------
# frontier: the leaves that have an admissible split, best gain first
# --------------------------------------------------------------------------------------
cdef struct FrontierEntry:
    Split split
    intp_t node
    # Gain ties go to the smaller rank: the leaf's position in a list where a split
    # leaves its left child in its parent's place and appends its right child (the
    # order in which a linear scan of the leaves met them, kept so trees do not change).
    intp_t rank


cdef inline bint _comes_first(const FrontierEntry* a, const FrontierEntry* b) noexcept nogil:
    return a.split.gain > b.split.gain or (a.split.gain == b.split.gain and a.rank < b.rank)


cdef void _frontier_push(FrontierEntry* heap, intp_t* size, FrontierEntry entry) noexcept nogil:
    """Add ``entry`` to the binary max-heap ``heap[:size]`` (sift up)."""
    cdef intp_t child = size[0], parent
    size[0] += 1
    while child > 0:
        parent = (child - 1) // 2
        if not _comes_first(&entry, &heap[parent]):
            break
        heap[child] = heap[parent]
        child = parent
    heap[child] = entry


cdef FrontierEntry _frontier_pop(FrontierEntry* heap, intp_t* size) noexcept nogil:
    """Remove and return the first entry of the non-empty heap ``heap[:size]`` (sift down)."""
    cdef FrontierEntry first = heap[0], last
    cdef intp_t parent = 0, child
    size[0] -= 1
    last = heap[size[0]]
    while True:
        child = 2 * parent + 1
        if child >= size[0]:
            break
        if child + 1 < size[0] and _comes_first(&heap[child + 1], &heap[child]):
            child += 1
        if not _comes_first(&heap[child], &last):
            break
        heap[parent] = heap[child]
        parent = child
    heap[parent] = last
    return first


# --------------------------------------------------------------------------------------
# tree induction
# --------------------------------------------------------------------------------------
cdef class _Growth:
    """Best-first growth of one tree, whatever the split search (see :func:`grow_tree`).

    Subclasses find and apply splits: ``_open_root`` queues the root's split,
    ``_partition`` reorders a leaf's rows for its split and returns the row array in
    which both children's rows are then contiguous, ``_open_children`` queues the
    children's splits.
    """

    cdef const double[:, ::1] G
    cdef intp_t min_leaf, min_split, leaf_cap
    # the tree, one entry per node (capacity 2 * leaf_cap - 1)
    cdef object feature_array, threshold_array, left_array, right_array, start_array
    cdef object end_array, sums_array
    cdef intp_t[::1] feature, left, right, start, end, rank
    cdef double[::1] threshold
    cdef double[:, ::1] sums        # gradient sum of each node's rows
    cdef intp_t n_nodes, n_leaves
    cdef double[::1] left_sum       # scratch of the split searches
    cdef FrontierEntry* frontier
    cdef intp_t frontier_size

    cdef _allocate(self, const double[:, ::1] G, intp_t min_leaf, intp_t min_split,
                   intp_t max_leaves):
        cdef intp_t n = G.shape[0], K = G.shape[1], capacity
        self.G = G
        self.min_leaf = max(min_leaf, 1)
        self.min_split = max(min_split, 2)
        self.leaf_cap = min(max(n // self.min_leaf, 1), max(max_leaves, 1))
        capacity = 2 * self.leaf_cap - 1
        self.feature_array = np.full(capacity, -1, dtype=np.intp)
        self.threshold_array = np.zeros(capacity)
        self.left_array = np.full(capacity, -1, dtype=np.intp)
        self.right_array = np.full(capacity, -1, dtype=np.intp)
        self.start_array = np.zeros(capacity, dtype=np.intp)
        self.end_array = np.zeros(capacity, dtype=np.intp)
        self.sums_array = np.zeros((capacity, K))
        self.feature, self.threshold = self.feature_array, self.threshold_array
        self.left, self.right = self.left_array, self.right_array
        self.start, self.end, self.sums = self.start_array, self.end_array, self.sums_array
        self.rank = np.zeros(capacity, dtype=np.intp)
        self.left_sum = np.zeros(K)
        self.frontier = <FrontierEntry*> malloc(self.leaf_cap * sizeof(FrontierEntry))
        if self.frontier == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.frontier)

    cdef void grow(self) noexcept nogil:
        """Split the leaf of largest gain until ``leaf_cap`` leaves or none can be split."""
        _add_column_sums(self.G, &self.sums[0, 0])
        self.start[0] = 0
        self.end[0] = self.G.shape[0]
        self.n_nodes = 1
        self.n_leaves = 1
        self.frontier_size = 0
        self._open_root()
        while self.n_leaves < self.leaf_cap and self.frontier_size > 0:
            self._split(_frontier_pop(self.frontier, &self.frontier_size))

    cdef bint _splittable(self, intp_t node) noexcept nogil:
        """Whether the node may be split: it is large enough and the tree not yet full."""
        return (self.end[node] - self.start[node] >= self.min_split
                and self.n_leaves < self.leaf_cap)

    cdef void _push(self, intp_t node, const Split* split) noexcept nogil:
        """Queue the node's best split, if it has one."""
        cdef FrontierEntry entry
        if split.feature >= 0:
            entry.split = split[0]
            entry.node = node
            entry.rank = self.rank[node]
            _frontier_push(self.frontier, &self.frontier_size, entry)

    cdef void _open_root(self) noexcept nogil:
        pass

    cdef const intp_t* _partition(self, intp_t node, const Split* split) noexcept nogil:
        return NULL

    cdef void _open_children(self, intp_t node, intp_t left, intp_t right) noexcept nogil:
        pass

    cdef void _split(self, FrontierEntry entry) noexcept nogil:
        """Apply the queued split of a leaf: partition its rows, open and queue its children."""
        cdef intp_t node = entry.node
        cdef intp_t lo = self.start[node], hi = self.end[node], mid = lo + entry.split.n_left
        cdef intp_t left = self.n_nodes, right = self.n_nodes + 1, p, k
        cdef const intp_t* rows
        self.feature[node] = entry.split.feature
        self.threshold[node] = entry.split.threshold
        rows = self._partition(node, &entry.split)
        self.left[node] = left
        self.right[node] = right
        self.start[left], self.end[left], self.rank[left] = lo, mid, self.rank[node]
        self.start[right], self.end[right], self.rank[right] = mid, hi, self.n_leaves
        for p in range(lo, mid):
            for k in range(self.G.shape[1]):
                self.sums[left, k] += self.G[rows[p], k]
        for k in range(self.G.shape[1]):
            self.sums[right, k] = self.sums[node, k] - self.sums[left, k]
        self.n_nodes += 2
        self.n_leaves += 1
        self._open_children(node, left, right)

    def arrays(self):
        """The grown tree in :func:`grow_tree`'s output layout."""
        cdef intp_t n_nodes = self.n_nodes
        feature = self.feature_array[:n_nodes].copy()
        leaf_nodes = np.flatnonzero(feature < 0)
        leaf_of_node = np.full(n_nodes, -1, dtype=np.intp)
        leaf_of_node[leaf_nodes] = np.arange(leaf_nodes.size)
        leaf_start = self.start_array[leaf_nodes]
        leaf_end = self.end_array[leaf_nodes]
        counts = (leaf_end - leaf_start).astype(np.float64)
        raw_values = self.sums_array[leaf_nodes] / np.maximum(counts, 1.0)[:, None]
        return (feature, self.threshold_array[:n_nodes].copy(),
                self.left_array[:n_nodes].copy(), self.right_array[:n_nodes].copy(),
                leaf_of_node, leaf_start, leaf_end, raw_values)


cdef class _TreeGrower(_Growth):
    """Growth with the exact split search on every feature's sorted rows."""

    cdef const double[:, ::1] X
    cdef intp_t[:, ::1] order
    cdef intp_t[::1] spill
    cdef unsigned char[::1] goes_left

    def __cinit__(self, const double[:, ::1] X, const double[:, ::1] G, intp_t[:, ::1] order,
                  intp_t min_leaf, intp_t min_split, intp_t max_leaves):
        cdef intp_t n = X.shape[0]
        self._allocate(G, min_leaf, min_split, max_leaves)
        self.X, self.order = X, order
        self.spill = np.empty(max(n, 1), dtype=np.intp)
        self.goes_left = np.zeros(max(n, 1), dtype=np.uint8)

    cdef void _enqueue(self, intp_t node) noexcept nogil:
        """Queue the node's best split, if it has one and another split can still happen."""
        cdef Split split
        if not self._splittable(node):
            return
        _best_split(self.X, self.G, self.order, self.start[node], self.end[node],
                    self.min_leaf, &self.sums[node, 0], &self.left_sum[0], &split)
        self._push(node, &split)

    cdef void _open_root(self) noexcept nogil:
        self._enqueue(0)

    cdef const intp_t* _partition(self, intp_t node, const Split* split) noexcept nogil:
        _partition(self.order, split.feature, self.start[node], self.end[node], split.n_left,
                   self.goes_left, self.spill)
        return &self.order[split.feature, 0]

    cdef void _open_children(self, intp_t node, intp_t left, intp_t right) noexcept nogil:
        self._enqueue(left)
        self._enqueue(right)


# Histograms of one tree's growth take at most this much memory (beyond it, nodes are
# searched from a scratch histogram and their children's built without subtraction).
DEF HIST_POOL_BYTES = 128 * 1024 * 1024


cdef class _HistGrower(_Growth):
    """Growth with the histogram split search on binned features.

    Every node that may be split gets a histogram: per feature and bin, the gradient sum
    of its rows and their count (``K + 1`` doubles). A split builds the smaller child's
    histogram from its rows and obtains the larger child's by subtracting it from the
    parent's, in the parent's slot of a fixed pool.
    """

    cdef const unsigned char[:, ::1] codes     # (d, n) bin of every row
    cdef const intp_t[::1] n_bins, bin_offset
    cdef const double[:, ::1] bin_low, bin_high
    cdef intp_t[::1] rows
    cdef intp_t[::1] slot                      # pool slot of each node's histogram, or -1
    cdef intp_t[::1] free_slots
    cdef intp_t n_free, n_slots, hist_size     # the scratch slot is number n_slots
    cdef double* pool
    cdef double[:, ::1] ordered                # the gradients of a node's rows, in order
    cdef intp_t[::1] spill

    def __cinit__(self, const unsigned char[:, ::1] codes, const double[:, ::1] G,
                  const intp_t[::1] n_bins, const double[:, ::1] bin_low,
                  const double[:, ::1] bin_high, intp_t[::1] rows, intp_t min_leaf,
                  intp_t min_split, intp_t max_leaves):
        cdef intp_t n = G.shape[0], K = G.shape[1], f
        self._allocate(G, min_leaf, min_split, max_leaves)
        self.codes, self.n_bins, self.bin_low, self.bin_high = codes, n_bins, bin_low, bin_high
        self.rows = rows
        offsets = np.zeros(codes.shape[0] + 1, dtype=np.intp)
        np.cumsum(n_bins, out=offsets[1:])
        self.bin_offset = offsets
        self.hist_size = max(offsets[codes.shape[0]] * (K + 1), 1)
        # at most one histogram per leaf (plus the one being split) is alive at a time
        self.n_slots = min(self.leaf_cap + 1,
                           max(2, HIST_POOL_BYTES // (self.hist_size * sizeof(double))))
        self.free_slots = np.arange(self.n_slots - 1, -1, -1, dtype=np.intp)
        self.n_free = self.n_slots
        self.slot = np.full(2 * self.leaf_cap - 1, -1, dtype=np.intp)
        self.ordered = np.empty((max(n, 1), K))
        self.spill = np.empty(max(n, 1), dtype=np.intp)
        self.pool = <double*> malloc((self.n_slots + 1) * self.hist_size * sizeof(double))
        if self.pool == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.pool)

    cdef inline double* _hist(self, intp_t slot) noexcept nogil:
        return self.pool + slot * self.hist_size

    cdef intp_t _acquire(self) noexcept nogil:
        """A free slot, or the scratch slot when the pool is exhausted."""
        if self.n_free == 0:
            return self.n_slots
        self.n_free -= 1
        return self.free_slots[self.n_free]

    cdef void _release(self, intp_t slot) noexcept nogil:
        if slot < self.n_slots:
            self.free_slots[self.n_free] = slot
            self.n_free += 1

    cdef void _build(self, intp_t node, intp_t slot) noexcept nogil:
        """The histogram of the node's rows, in ``slot``."""
        cdef intp_t lo = self.start[node], hi = self.end[node], K = self.G.shape[1]
        cdef intp_t width = K + 1, f, r, k
        cdef double* hist = self._hist(slot)
        cdef double* entry
        cdef const unsigned char* column
        memset(hist, 0, self.hist_size * sizeof(double))
        for r in range(lo, hi):
            for k in range(K):
                self.ordered[r - lo, k] = self.G[self.rows[r], k]
        for f in range(self.codes.shape[0]):
            column = &self.codes[f, 0]
            if K == 1:
                for r in range(lo, hi):
                    entry = hist + (self.bin_offset[f] + column[self.rows[r]]) * 2
                    entry[0] += self.ordered[r - lo, 0]
                    entry[1] += 1.0
            else:
                for r in range(lo, hi):
                    entry = hist + (self.bin_offset[f] + column[self.rows[r]]) * width
                    for k in range(K):
                        entry[k] += self.ordered[r - lo, k]
                    entry[K] += 1.0

    cdef void _best_hist_split(self, intp_t node, const double* hist, Split* out) noexcept nogil:
        """:func:`_best_split` on the node's histogram: the candidates lie between
        consecutive bins that hold rows of the node; the threshold is the midpoint of the
        largest value of the left bin and the smallest of the right one (their values
        over all rows of the fit)."""
        cdef intp_t n = self.end[node] - self.start[node], K = self.G.shape[1]
        cdef intp_t width = K + 1, f, b, k, previous, n_left
        cdef double count, score
        cdef const double* total = &self.sums[node, 0]
        cdef double* left_sum = &self.left_sum[0]
        cdef const double* entry
        cdef SplitScan best
        out.feature = -1
        if n < 2 * self.min_leaf:
            return
        best.score = -INFINITY
        best.feature = -1
        if K == 1:
            self._scan_scalar(hist, n, total[0], &best, out)
        for f in range(self.codes.shape[0] if K > 1 else 0):
            memset(left_sum, 0, K * sizeof(double))
            n_left = 0
            previous = -1
            for b in range(self.n_bins[f]):
                entry = hist + (self.bin_offset[f] + b) * width
                count = entry[K]
                if count == 0.0:
                    continue
                if previous >= 0 and n_left >= self.min_leaf:
                    score = _children_score(left_sum, total, K, n_left, n - n_left)
                    if score > best.score:
                        best.score = score
                        best.feature = f
                        best.n_left = n_left
                        best.below = self.bin_high[f, previous]
                        best.above = self.bin_low[f, b]
                        out.bin = previous
                for k in range(K):
                    left_sum[k] += entry[k]
                n_left += <intp_t> count
                previous = b
                if n - n_left < self.min_leaf:
                    break  # no later candidate leaves enough rows on the right
        _take_best(&best, total, K, n, out)

    cdef void _scan_scalar(self, const double* hist, intp_t n, double total, SplitScan* best,
                           Split* out) noexcept nogil:
        """The candidates of :meth:`_best_hist_split` for scalar targets (``K == 1``), with
        the running sums in registers: the scan of every bin of every feature is most of
        the time of a per-class tree."""
        cdef intp_t f, b, previous
        cdef double n_rows = n, min_leaf = self.min_leaf, count, n_left, left, right, score
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
                if previous >= 0 and n_left >= min_leaf:
                    right = total - left
                    score = left * left / n_left + right * right / (n_rows - n_left)
                    if score > best.score:
                        best.score = score
                        best.feature = f
                        best.n_left = <intp_t> n_left
                        best.below = self.bin_high[f, previous]
                        best.above = self.bin_low[f, b]
                        out.bin = previous
                left += entry[2 * b]
                n_left += count
                previous = b
                if n_rows - n_left < min_leaf:
                    break

    cdef void _keep(self, intp_t node, intp_t slot) noexcept nogil:
        """Queue the node's split from the histogram in ``slot``; keep the histogram for
        the split (unless it is the scratch slot) or release it."""
        cdef Split split
        self._best_hist_split(node, self._hist(slot), &split)
        self._push(node, &split)
        if split.feature >= 0 and slot < self.n_slots:
            self.slot[node] = slot
        else:
            self._release(slot)

    cdef void _open_root(self) noexcept nogil:
        cdef intp_t slot
        if self._splittable(0):
            slot = self._acquire()
            self._build(0, slot)
            self._keep(0, slot)

    cdef const intp_t* _partition(self, intp_t node, const Split* split) noexcept nogil:
        """Stable partition of the node's rows: those with ``bin <= split.bin`` first."""
        cdef intp_t p, row, kept = self.start[node], spilled = 0
        cdef const unsigned char* column = &self.codes[split.feature, 0]
        cdef unsigned char last_left = <unsigned char> split.bin
        for p in range(self.start[node], self.end[node]):
            row = self.rows[p]
            if column[row] <= last_left:
                self.rows[kept] = row
                kept += 1
            else:
                self.spill[spilled] = row
                spilled += 1
        memcpy(&self.rows[kept], &self.spill[0], spilled * sizeof(intp_t))
        return &self.rows[0]

    cdef void _open_children(self, intp_t node, intp_t left, intp_t right) noexcept nogil:
        cdef intp_t parent = self.slot[node], small = left, large = right, small_slot, slot, i
        cdef double* parent_hist
        cdef double* small_hist
        self.slot[node] = -1
        if self.end[left] - self.start[left] > self.end[right] - self.start[right]:
            small, large = right, left
        if parent >= 0 and self._splittable(large):
            small_slot = self._acquire()
            self._build(small, small_slot)
            parent_hist = self._hist(parent)
            small_hist = self._hist(small_slot)
            for i in range(self.hist_size):
                parent_hist[i] -= small_hist[i]
            self._keep(large, parent)
            if self._splittable(small):
                self._keep(small, small_slot)
            else:
                self._release(small_slot)
            return
        if parent >= 0:
            self._release(parent)
        if self._splittable(small):
            slot = self._acquire()
            self._build(small, slot)
            self._keep(small, slot)
        if self._splittable(large):
            slot = self._acquire()
            self._build(large, slot)
            self._keep(large, slot)


def grow_tree_hist(const unsigned char[:, ::1] codes, const double[:, ::1] G,
                   const intp_t[::1] n_bins, const double[:, ::1] bin_low,
                   const double[:, ::1] bin_high, intp_t[::1] rows, intp_t min_leaf,
                   intp_t min_split, intp_t max_leaves):
    """:func:`grow_tree` with the histogram split search on binned features.

    Parameters
    ----------
    codes : ndarray of shape (d, n), uint8
        ``codes[f, i]``: the bin of row ``i`` in feature ``f`` (bins ordered by value).
    G : ndarray of shape (n, K), float64
        Targets (the gradient vectors).
    n_bins : ndarray of shape (d,), intp
        Bins of each feature (at most 256).
    bin_low, bin_high : ndarray of shape (d, max(n_bins)), float64
        Smallest and largest value of each bin; a split between the bins ``b`` and
        ``b' > b`` (the next bin holding rows of the node) has the threshold halfway
        between ``bin_high[f, b]`` and ``bin_low[f, b']``. With one bin per distinct
        value the splits are those of :func:`grow_tree`.
    rows : ndarray of shape (n,), intp
        A permutation of ``range(n)``. Overwritten: on return every leaf's rows are
        contiguous in it.
    min_leaf, min_split, max_leaves : int
        As in :func:`grow_tree`.

    Returns
    -------
    The tuple of :func:`grow_tree`; leaf ``l`` owns ``rows[leaf_start[l]:leaf_end[l]]``.
    """
    cdef _HistGrower grower = _HistGrower(codes, G, n_bins, bin_low, bin_high, rows, min_leaf,
                                          min_split, max_leaves)
    with nogil:
        grower.grow()
    return grower.arrays()


def grow_tree(const double[:, ::1] X, const double[:, ::1] G, intp_t[:, ::1] order,
              intp_t min_leaf, intp_t min_split, intp_t max_leaves):
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
        Stop when the tree has this many leaves. Leaves are split in order of gain;
        among equal gains, in the order of a list of the leaves in which a split leaves
        its left child in its parent's place and appends its right child.

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
    cdef _TreeGrower grower = _TreeGrower(X, G, order, min_leaf, min_split, max_leaves)
    with nogil:
        grower.grow()
    return grower.arrays()


# --------------------------------------------------------------------------------------
# gradients and leaf re-fitting
# --------------------------------------------------------------------------------------
def subset_gradient(const double[:, ::1] F, const double[:, ::1] B, const int64_t[::1] labels,
                    const intp_t[::1] rows, double[:, ::1] Z, double[:, ::1] G,
                    int64_t[::1] y_out):
    """Margins, labels and log-likelihood gradients of the subset ``rows``.

    Writes ``Z[j] = F[rows[j]] + B[rows[j]]``, ``y_out[j] = labels[rows[j]]`` and
    ``G[j] = onehot(y_out[j]) - softmax(Z[j])``; returns the summed biased loss.
    """
    cdef intp_t n = rows.shape[0], K = F.shape[1], j, i, k
    cdef double log_normaliser, exp_total, total = 0.0
    with nogil:
        for j in range(n):
            i = rows[j]
            for k in range(K):
                Z[j, k] = F[i, k] + B[i, k]
            log_normaliser = logsumexp(&Z[j, 0], K, &G[j, 0], &exp_total)
            for k in range(K):
                G[j, k] = -G[j, k] / exp_total
            G[j, labels[i]] += 1.0
            y_out[j] = labels[i]
            total += log_normaliser - Z[j, labels[i]]
    return total


cdef struct NewtonWork:
    # scratch of the leaf re-fit, each of K entries unless said otherwise
    double* probabilities
    double* direction
    double* grad        # gradient at the current values
    double* hess        # Hessian there: K x K (lower triangle) with the full Hessian, else K
    double* trial       # line-search point
    double* trial_grad
    double* trial_hess


cdef inline void _add_softmax_hessian(const double* p, intp_t K, double* hess,
                                      bint full) noexcept nogil:
    """``hess += diag(p) - p p^T`` (lower triangle), or its diagonal when not ``full``."""
    cdef intp_t a, b
    if full:
        for a in range(K):
            hess[a * K + a] += p[a]
            for b in range(a + 1):
                hess[a * K + b] -= p[a] * p[b]
    else:
        for a in range(K):
            hess[a] += p[a] * (1.0 - p[a])


cdef double _leaf_objective(const double[:, ::1] Z, const int64_t[::1] y, const intp_t[::1] rows,
                            intp_t start, intp_t end, const double* v, double l2, double* p,
                            double* grad, double* hess, bint full) noexcept nogil:
    """Biased loss of one leaf at values v, plus l2/2 |v|^2, with its gradient and Hessian.

    ``hess`` is K x K (lower triangle) if ``full`` else its diagonal (K); ``p`` is scratch.
    """
    cdef intp_t K = Z.shape[1], r, i, a, label
    cdef double largest, exp_total, objective = 0.0
    for a in range(K):
        grad[a] = l2 * v[a]
    memset(hess, 0, (K * K if full else K) * sizeof(double))
    for r in range(start, end):
        i = rows[r]
        label = y[i]
        # logsumexp with the maximum taken while the row is formed (one pass fewer)
        largest = -INFINITY
        for a in range(K):
            p[a] = Z[i, a] + v[a]
            largest = p[a] if p[a] > largest else largest
        exp_total = exp_sum(p, K, largest, 1.0, p)
        objective += largest + log(exp_total) - Z[i, label] - v[label]
        for a in range(K):
            p[a] /= exp_total
            grad[a] += p[a]
        grad[label] -= 1.0
        _add_softmax_hessian(p, K, hess, full)
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

    Overwrites ``work.hess`` (the Cholesky factor) when ``full``.
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
                                             work.trial_hess, full)
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
    cdef intp_t K = Z.shape[1], step
    cdef double n_rows = end - start, objective, trial_objective, decrement, ridge
    objective = _leaf_objective(Z, y, rows, start, end, v, l2, work.probabilities, work.grad,
                                work.hess, full)
    memset(work.trial, 0, K * sizeof(double))
    trial_objective = _leaf_objective(Z, y, rows, start, end, work.trial, l2,
                                      work.probabilities, work.trial_grad, work.trial_hess, full)
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
                 double[:, ::1] values, double l2, int max_steps):
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
    cdef intp_t K = Z.shape[1], leaf
    cdef bint full = K <= FULL_HESSIAN_MAX_CLASSES
    cdef intp_t hess_size = K * K if full else K
    cdef NewtonWork work
    cdef double* buffer = <double*> malloc((5 * K + 2 * hess_size) * sizeof(double))
    if buffer == NULL:
        raise MemoryError()
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
                                  double* hess) noexcept nogil:
    """Biased loss of one leaf when class ``k`` is shifted by ``v`` (plus ``l2/2 v^2``,
    minus a constant), with its derivative and curvature (the latter without the ridge)."""
    cdef intp_t r, i
    cdef double x, s, objective = 0.5 * l2 * v * v
    grad[0] = l2 * v
    hess[0] = 0.0
    for r in range(start, end):
        i = rows[r]
        x = U[i, k] + v
        # softplus(x) and sigmoid(x) from one exponential of -|x|
        s = exp(-fabs(x))
        objective += (x if x > 0.0 else 0.0) + log1p(s)
        s = 1.0 / (1.0 + s) if x >= 0.0 else s / (1.0 + s)
        grad[0] += s
        hess[0] += s * (1.0 - s)
        if y[i] == k:
            objective -= x
            grad[0] -= 1.0
    return objective


cdef double _refit_class_leaf(const double[:, ::1] U, const int64_t[::1] y,
                              const intp_t[::1] rows, intp_t start, intp_t end, intp_t k,
                              double v, double l2, int max_steps) noexcept nogil:
    """Newton's method on one leaf's value for class ``k``, from the better of ``v`` and 0."""
    cdef intp_t step, halvings
    cdef double n_rows = end - start, objective, grad, hess, trial, trial_objective
    cdef double trial_grad, trial_hess, direction, decrement, t, ridge
    objective = _class_leaf_objective(U, y, rows, start, end, k, v, l2, &grad, &hess)
    trial_objective = _class_leaf_objective(U, y, rows, start, end, k, 0.0, l2, &trial_grad,
                                            &trial_hess)
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
                                                    &trial_grad, &trial_hess)
            if trial_objective <= objective - 1e-4 * t * decrement:
                break
            t *= 0.5
        else:
            break
        v, objective, grad, hess = trial, trial_objective, trial_grad, trial_hess
    return v


def refit_class_leaves(const double[:, ::1] U, const int64_t[::1] y, const intp_t[::1] rows,
                       const intp_t[::1] leaf_start, const intp_t[::1] leaf_end,
                       double[::1] values, intp_t k, double l2, int max_steps):
    """Re-fit the scalar leaves of a tree for class ``k`` to the biased logistic loss.

    For each leaf ``l`` minimises, over ``v``, the loss of its rows when ``v`` is added to
    class ``k``'s score and the other classes' scores stay as they are,
    ``sum_{j in leaf} [softplus(U[j, k] + v) - [y[j] == k] (U[j, k] + v)] + l2/2 v^2``,
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
        Newton steps per leaf (fewer once the Newton decrement is below 1e-9 per row).
    """
    cdef intp_t leaf
    with nogil:
        for leaf in range(leaf_start.shape[0]):
            if leaf_end[leaf] > leaf_start[leaf]:
                values[leaf] = _refit_class_leaf(U, y, rows, leaf_start[leaf], leaf_end[leaf],
                                                 k, values[leaf], l2, max_steps)


# --------------------------------------------------------------------------------------
# prediction
# --------------------------------------------------------------------------------------
cdef struct TreeWalk:
    # An ensemble's nodes laid out for walking rows without data-dependent branches: a
    # leaf points to itself (threshold +inf, so every finite value "goes left", to the
    # leaf), which lets every row of a tree take the same number of steps, the tree's depth.
    intp_t* feature     # the split's feature; 0 at leaves
    double* threshold   # the split's threshold; +inf at leaves
    intp_t* child       # child[2 * node] left, child[2 * node + 1] right (x > threshold)
    intp_t* depth       # per tree: the longest root-to-leaf path


cdef void _free_walk(TreeWalk* walk) noexcept nogil:
    free(walk.feature)
    free(walk.threshold)
    free(walk.child)
    free(walk.depth)


cdef bint _build_walk(TreeWalk* walk, const intp_t[::1] tree_offsets, const intp_t[::1] feature,
                      const double[::1] threshold, const intp_t[::1] left,
                      const intp_t[::1] right) noexcept nogil:
    """Fill ``walk`` from node arrays (leaves: ``feature < 0``); False if out of memory."""
    cdef intp_t n_nodes = feature.shape[0], n_trees = tree_offsets.shape[0] - 1
    cdef intp_t node, t, top, deepest, d
    cdef intp_t* stack = <intp_t*> malloc((2 * n_nodes + 1) * sizeof(intp_t))
    walk.feature = <intp_t*> malloc((n_nodes + 1) * sizeof(intp_t))
    walk.threshold = <double*> malloc((n_nodes + 1) * sizeof(double))
    walk.child = <intp_t*> malloc((2 * n_nodes + 1) * sizeof(intp_t))
    walk.depth = <intp_t*> malloc((n_trees + 1) * sizeof(intp_t))
    if (stack == NULL or walk.feature == NULL or walk.threshold == NULL or walk.child == NULL
            or walk.depth == NULL):
        free(stack)
        _free_walk(walk)
        return False
    for node in range(n_nodes):
        if feature[node] >= 0:
            walk.feature[node] = feature[node]
            walk.threshold[node] = threshold[node]
            walk.child[2 * node] = left[node]
            walk.child[2 * node + 1] = right[node]
        else:
            walk.feature[node] = 0
            walk.threshold[node] = INFINITY
            walk.child[2 * node] = node
            walk.child[2 * node + 1] = node
    # depth first from each root; the stack holds (node, depth) pairs
    for t in range(n_trees):
        deepest = 0
        top = 0
        if tree_offsets[t + 1] > tree_offsets[t]:
            stack[0] = tree_offsets[t]
            stack[1] = 0
            top = 1
        while top > 0:
            top -= 1
            node = stack[2 * top]
            d = stack[2 * top + 1]
            if feature[node] < 0:
                deepest = d if d > deepest else deepest
            else:
                stack[2 * top] = left[node]
                stack[2 * top + 1] = d + 1
                stack[2 * top + 2] = right[node]
                stack[2 * top + 3] = d + 1
                top += 2
        walk.depth[t] = deepest
    free(stack)
    return True


cdef inline void _walk_rows(const double* X, intp_t n_features, intp_t start, intp_t stop,
                            intp_t root, intp_t depth, const TreeWalk* walk,
                            intp_t* leaf) noexcept nogil:
    """``leaf[i] =`` the leaf that row ``i`` of ``X`` reaches from ``root``, for ``start <= i < stop``.

    Every row takes ``depth`` steps of ``node = child[2 node + (x > threshold)]``: no
    branch depends on the data, and ``WALK_LANES`` rows are walked side by side so that
    their independent chains of loads overlap (3.4x faster than one row at a time with a
    branch per node: 800 trees of 16 leaves, depth 7.6 on average, on 316,800 rows, one
    thread). Trees deeper than ``LOCKSTEP_MAX_DEPTH`` are walked a row at a time, each
    row stopping at its leaf.
    """
    cdef const intp_t* feature = walk.feature
    cdef const double* threshold = walk.threshold
    cdef const intp_t* child = walk.child
    cdef intp_t node[WALK_LANES]
    cdef const double* row
    cdef intp_t i = start, j, d, at
    if depth > LOCKSTEP_MAX_DEPTH:
        # a deep, lopsided tree: the rows that stop early would idle through most steps
        for i in range(start, stop):
            at = root
            row = X + i * n_features
            while child[2 * at] != at:
                at = child[2 * at + (row[feature[at]] > threshold[at])]
            leaf[i] = at
        return
    while i + WALK_LANES <= stop:
        for j in range(WALK_LANES):
            node[j] = root
        for d in range(depth):
            for j in range(WALK_LANES):
                at = node[j]
                node[j] = child[2 * at + (X[(i + j) * n_features + feature[at]] > threshold[at])]
        for j in range(WALK_LANES):
            leaf[i + j] = node[j]
        i += WALK_LANES
    while i < stop:
        at = root
        row = X + i * n_features
        for d in range(depth):
            at = child[2 * at + (row[feature[at]] > threshold[at])]
        leaf[i] = at
        i += 1


# The row loops live in the Python-visible functions: the same prange in a cdef function
# taking the memoryviews as arguments measured 10-20% slower.
def add_tree(const double[:, ::1] X, const intp_t[::1] feature, const double[::1] threshold,
             const intp_t[::1] left, const intp_t[::1] right, const double[:, ::1] value,
             double[:, ::1] out, int n_jobs=1, intp_t column=-1):
    """``out[i] += value[leaf(i)]`` for one tree (node ids local to the tree).

    With ``column >= 0`` the tree is scalar (``value`` of shape (n_nodes, 1)) and adds
    to ``out[i, column]`` only.
    """
    predict_ensemble(X, np.array([0, feature.shape[0]], dtype=np.intp),
                     np.array([column], dtype=np.intp), feature, threshold, left, right, value,
                     out, n_jobs)


def predict_ensemble(const double[:, ::1] X, const intp_t[::1] tree_offsets,
                     const intp_t[::1] tree_class, const intp_t[::1] feature,
                     const double[::1] threshold, const intp_t[::1] left,
                     const intp_t[::1] right, const double[:, ::1] value,
                     double[:, ::1] out, int n_jobs=1):
    """``out[i] += sum_t value[leaf_t(i)]`` over all trees.

    Node arrays are concatenated over trees; tree ``t`` owns nodes
    ``tree_offsets[t]:tree_offsets[t+1]`` and its child ids are absolute. A tree with
    ``tree_class[t] = -1`` adds the vector ``value[node]`` to all classes; one with
    ``tree_class[t] = k >= 0`` adds the scalar ``value[node, 0]`` to class ``k``.
    ``X`` must be finite (a row goes left where ``x <= threshold``).

    Rows are taken in blocks of ``PREDICT_BLOCK_ROWS`` and every tree walks a whole block
    before the next tree starts: one tree's nodes and one block's rows stay in cache, where
    a row walking all trees in turn reloads every tree from memory (2-3x slower on 300,000
    rows and 800 trees). Each row still adds its trees in order, so the sums are unchanged.
    """
    cdef intp_t n = X.shape[0], d = X.shape[1], K = out.shape[1]
    cdef intp_t n_trees = tree_offsets.shape[0] - 1
    cdef intp_t n_blocks = (n + PREDICT_BLOCK_ROWS - 1) // PREDICT_BLOCK_ROWS
    cdef intp_t block, start, stop, i, t, node, k, column
    cdef TreeWalk walk
    cdef intp_t[::1] leaf = np.empty(n, dtype=np.intp)
    cdef bint built
    if n == 0 or n_trees == 0:
        return
    with nogil:
        built = _build_walk(&walk, tree_offsets, feature, threshold, left, right)
    if not built:
        raise MemoryError("predict_ensemble: no memory for the walk layout of the trees")
    with nogil:
        for block in prange(n_blocks, num_threads=max(n_jobs, 1), schedule="static"):
            start = block * PREDICT_BLOCK_ROWS
            stop = start + PREDICT_BLOCK_ROWS
            if stop > n:
                stop = n
            for t in range(n_trees):
                _walk_rows(&X[0, 0], d, start, stop, tree_offsets[t], walk.depth[t], &walk,
                           &leaf[0])
                column = tree_class[t]
                if column >= 0:
                    for i in range(start, stop):
                        out[i, column] += value[leaf[i], 0]
                else:
                    for i in range(start, stop):
                        node = leaf[i]
                        for k in range(K):
                            out[i, k] += value[node, k]
        _free_walk(&walk)
