# cython: language_level=3
"""Best-first growth of one regression tree on the squared loss.

A tree for the gradient vectors ``r_k`` of rows of weight ``w_k`` (one for all classes,
vector leaves, or one per class, ``K = 1``) minimises ``sum_k w_k ||r_k - t(x_k)||^2``
from the weighted gradients ``G = w r`` and the weights ``W`` (ones without weights: a
row's weight is then its count, and the sizes below are numbers of rows): the leaf of
largest gain is split first, until the tree has ``max_leaves`` leaves or no leaf can be
split. The
growth keeps the tree as :c:type:`Node` records and the frontier of splittable leaves in a
heap; a subclass of :class:`_Growth` finds and applies the splits, with the exact search
(:class:`_TreeGrower`, :mod:`.splitting`) or on histograms (:class:`_HistGrower`,
:mod:`.histogram`). :func:`grow_tree` and :func:`grow_tree_hist` return the tree as a
:class:`slr.oracles._boosting.tree.GrownTree`.
"""
from libc.stdlib cimport free, malloc

import numpy as np

from slr._kernel_utils cimport intp_t
from slr.oracles._boosting.common cimport Split, add_column_sums
from slr.oracles._boosting.histogram cimport Histograms
from slr.oracles._boosting.splitting cimport best_split, partition

from slr.oracles._boosting.tree import GrownTree


cdef struct Node:
    intp_t feature      # split feature, -1 at a leaf
    double threshold    # rows with x[feature] <= threshold go left
    intp_t left, right  # children, -1 at a leaf
    intp_t start, end   # the node's rows: a segment of the row order the growth keeps
    # Gain ties between leaves go to the smaller rank: the leaf's position in a list where
    # a split leaves its left child in its parent's place and appends its right child (the
    # order in which a linear scan of the leaves met them, kept so trees do not change).
    intp_t rank


# --------------------------------------------------------------------------------------
# the frontier: the leaves that have an admissible split, best gain first
# --------------------------------------------------------------------------------------
cdef struct FrontierEntry:
    Split split
    intp_t node
    intp_t rank         # the node's


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
# growth
# --------------------------------------------------------------------------------------
cdef class _Growth:
    """Best-first growth of one tree, whatever the split search (see :func:`grow_tree`).

    Subclasses find and apply splits: ``_open_root`` queues the root's split,
    ``_partition`` reorders a leaf's rows for its split and returns the row array in
    which both children's rows are then contiguous, ``_open_children`` queues the
    children's splits.
    """

    cdef const double[:, ::1] G
    cdef const double[::1] W
    cdef double min_leaf, min_split
    cdef intp_t leaf_cap
    cdef Node* nodes                # capacity 2 * leaf_cap - 1
    cdef object sums_array, weight_array
    cdef double[:, ::1] sums        # gradient sum of each node's rows
    cdef double[::1] weight         # weight of each node's rows
    cdef intp_t n_nodes, n_leaves
    cdef double[::1] left_sum       # scratch of the split searches
    cdef FrontierEntry* frontier
    cdef intp_t frontier_size

    cdef _allocate(self, const double[:, ::1] G, const double[::1] W, double min_leaf,
                   double min_split, intp_t max_leaves):
        cdef intp_t n = G.shape[0], K = G.shape[1], capacity, i, most = n
        cdef double total_weight = 0.0
        self.G, self.W = G, W
        self.min_leaf = max(min_leaf, 0.0)
        self.min_split = min_split
        for i in range(n):
            total_weight += W[i]
        if self.min_leaf > 0.0 and total_weight / self.min_leaf < n:
            most = <intp_t> (total_weight / self.min_leaf)   # every leaf weighs min_leaf or more
        self.leaf_cap = min(max(most, 1), max(max_leaves, 1))
        capacity = 2 * self.leaf_cap - 1
        self.sums_array = np.zeros((capacity, K))
        self.sums = self.sums_array
        self.weight_array = np.zeros(capacity)
        self.weight = self.weight_array
        self.weight[0] = total_weight
        self.left_sum = np.zeros(K)
        self.nodes = <Node*> malloc(capacity * sizeof(Node))
        self.frontier = <FrontierEntry*> malloc(self.leaf_cap * sizeof(FrontierEntry))
        if self.nodes == NULL or self.frontier == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.nodes)
        free(self.frontier)

    cdef void _open_leaf(self, intp_t node, intp_t start, intp_t end, intp_t rank) noexcept nogil:
        """Make ``node`` a leaf owning the rows ``start:end`` of the row order."""
        self.nodes[node].feature = -1
        self.nodes[node].threshold = 0.0
        self.nodes[node].left = -1
        self.nodes[node].right = -1
        self.nodes[node].start = start
        self.nodes[node].end = end
        self.nodes[node].rank = rank

    cdef void grow(self) noexcept nogil:
        """Split the leaf of largest gain until ``leaf_cap`` leaves or none can be split."""
        add_column_sums(self.G, &self.sums[0, 0])
        self._open_leaf(0, 0, self.G.shape[0], 0)
        self.n_nodes = 1
        self.n_leaves = 1
        self.frontier_size = 0
        self._open_root()
        while self.n_leaves < self.leaf_cap and self.frontier_size > 0:
            self._split(_frontier_pop(self.frontier, &self.frontier_size))

    cdef inline intp_t _size(self, intp_t node) noexcept nogil:
        return self.nodes[node].end - self.nodes[node].start

    cdef bint _splittable(self, intp_t node) noexcept nogil:
        """Whether the node may be split: it has two rows, weighs ``min_split`` or more and
        the tree is not yet full."""
        return (self._size(node) >= 2 and self.weight[node] >= self.min_split
                and self.n_leaves < self.leaf_cap)

    cdef void _push(self, intp_t node, const Split* split) noexcept nogil:
        """Queue the node's best split, if it has one."""
        cdef FrontierEntry entry
        if split.feature >= 0:
            entry.split = split[0]
            entry.node = node
            entry.rank = self.nodes[node].rank
            _frontier_push(self.frontier, &self.frontier_size, entry)

    cdef void _open_root(self) noexcept nogil:
        pass

    cdef const intp_t* _partition(self, intp_t node, Split* split) noexcept nogil:
        return NULL

    cdef void _open_children(self, intp_t node, intp_t left, intp_t right) noexcept nogil:
        pass

    cdef void _split(self, FrontierEntry entry) noexcept nogil:
        """Apply the queued split of a leaf: partition its rows, open and queue its children."""
        cdef intp_t node = entry.node
        cdef intp_t lo = self.nodes[node].start, hi = self.nodes[node].end, mid
        cdef intp_t left = self.n_nodes, right = self.n_nodes + 1, p, k
        cdef const intp_t* rows
        self.nodes[node].feature = entry.split.feature
        self.nodes[node].threshold = entry.split.threshold
        rows = self._partition(node, &entry.split)
        mid = lo + entry.split.n_left
        self.nodes[node].left = left
        self.nodes[node].right = right
        self._open_leaf(left, lo, mid, self.nodes[node].rank)
        self._open_leaf(right, mid, hi, self.n_leaves)
        for p in range(lo, mid):
            for k in range(self.G.shape[1]):
                self.sums[left, k] += self.G[rows[p], k]
            self.weight[left] += self.W[rows[p]]
        for k in range(self.G.shape[1]):
            self.sums[right, k] = self.sums[node, k] - self.sums[left, k]
        self.weight[right] = self.weight[node] - self.weight[left]
        self.n_nodes += 2
        self.n_leaves += 1
        self._open_children(node, left, right)

    def grown_tree(self, rows) -> GrownTree:
        """The grown tree, its leaves owning segments of ``rows`` (the row order)."""
        cdef intp_t n_nodes = self.n_nodes, node
        feature = np.empty(n_nodes, dtype=np.intp)
        threshold = np.empty(n_nodes)
        left = np.empty(n_nodes, dtype=np.intp)
        right = np.empty(n_nodes, dtype=np.intp)
        start = np.empty(n_nodes, dtype=np.intp)
        end = np.empty(n_nodes, dtype=np.intp)
        cdef intp_t[::1] feature_view = feature, left_view = left, right_view = right
        cdef intp_t[::1] start_view = start, end_view = end
        cdef double[::1] threshold_view = threshold
        for node in range(n_nodes):
            feature_view[node] = self.nodes[node].feature
            threshold_view[node] = self.nodes[node].threshold
            left_view[node] = self.nodes[node].left
            right_view[node] = self.nodes[node].right
            start_view[node] = self.nodes[node].start
            end_view[node] = self.nodes[node].end
        leaf_nodes = np.flatnonzero(feature < 0)
        leaf_of_node = np.full(n_nodes, -1, dtype=np.intp)
        leaf_of_node[leaf_nodes] = np.arange(leaf_nodes.size)
        leaf_start = start[leaf_nodes]
        leaf_end = end[leaf_nodes]
        weights = self.weight_array[leaf_nodes]
        # a leaf without weight has a zero sum, and value zero
        leaf_value = self.sums_array[leaf_nodes] / np.where(weights > 0.0, weights, 1.0)[:, None]
        return GrownTree(feature=feature, threshold=threshold, left=left, right=right,
                         leaf_of_node=leaf_of_node, rows=rows, leaf_start=leaf_start,
                         leaf_end=leaf_end, leaf_value=leaf_value)


cdef class _TreeGrower(_Growth):
    """Growth with the exact split search on every feature's sorted rows."""

    cdef const double[:, ::1] X
    cdef intp_t[:, ::1] order
    cdef intp_t[::1] spill
    cdef unsigned char[::1] goes_left

    def __cinit__(self, const double[:, ::1] X, const double[:, ::1] G, const double[::1] W,
                  intp_t[:, ::1] order, double min_leaf, double min_split, intp_t max_leaves):
        cdef intp_t n = X.shape[0]
        self._allocate(G, W, min_leaf, min_split, max_leaves)
        self.X, self.order = X, order
        self.spill = np.empty(max(n, 1), dtype=np.intp)
        self.goes_left = np.zeros(max(n, 1), dtype=np.uint8)

    cdef void _enqueue(self, intp_t node) noexcept nogil:
        """Queue the node's best split, if it has one and another split can still happen."""
        cdef Split split
        if not self._splittable(node):
            return
        best_split(self.X, self.G, self.W, self.order, self.nodes[node].start,
                   self.nodes[node].end, self.min_leaf, &self.sums[node, 0], self.weight[node],
                   &self.left_sum[0], &split)
        self._push(node, &split)

    cdef void _open_root(self) noexcept nogil:
        self._enqueue(0)

    cdef const intp_t* _partition(self, intp_t node, Split* split) noexcept nogil:
        partition(self.order, split.feature, self.nodes[node].start, self.nodes[node].end,
                  split.n_left, self.goes_left, self.spill)
        return &self.order[split.feature, 0]

    cdef void _open_children(self, intp_t node, intp_t left, intp_t right) noexcept nogil:
        self._enqueue(left)
        self._enqueue(right)


cdef class _HistGrower(_Growth):
    """Growth with the histogram split search on binned features.

    Every node that may be split gets a histogram. A split builds the smaller child's
    histogram from its rows and obtains the larger child's by subtracting it from the
    parent's, in the parent's slot of the pool.
    """

    cdef Histograms histograms
    cdef intp_t[::1] rows
    cdef intp_t[::1] slot          # pool slot of each node's histogram, or -1

    def __cinit__(self, const unsigned char[:, ::1] codes, const double[:, ::1] G,
                  const double[::1] W, const intp_t[::1] n_bins, const double[:, ::1] bin_low,
                  const double[:, ::1] bin_high, intp_t[::1] rows, double min_leaf,
                  double min_split, intp_t max_leaves):
        self._allocate(G, W, min_leaf, min_split, max_leaves)
        self.rows = rows
        # at most one histogram per leaf (plus the one being split) is alive at a time
        self.histograms = Histograms(codes, n_bins, bin_low, bin_high, G.shape[1],
                                     self.leaf_cap + 1)
        self.slot = np.full(2 * self.leaf_cap - 1, -1, dtype=np.intp)

    cdef void _build(self, intp_t node, intp_t slot) noexcept nogil:
        self.histograms.build(slot, self.G, self.W, self.rows, self.nodes[node].start,
                              self.nodes[node].end)

    cdef void _keep(self, intp_t node, intp_t slot) noexcept nogil:
        """Queue the node's split from the histogram in ``slot``; keep the histogram for
        the split (unless it is the scratch slot) or release it."""
        cdef Split split
        self.histograms.best_split(slot, self.weight[node], &self.sums[node, 0], self.min_leaf,
                                   &split)
        self._push(node, &split)
        if split.feature >= 0 and self.histograms.pooled(slot):
            self.slot[node] = slot
        else:
            self.histograms.release(slot)

    cdef void _open_root(self) noexcept nogil:
        cdef intp_t slot
        if self._splittable(0):
            slot = self.histograms.acquire()
            self._build(0, slot)
            self._keep(0, slot)

    cdef const intp_t* _partition(self, intp_t node, Split* split) noexcept nogil:
        self.histograms.partition(self.rows, self.nodes[node].start, self.nodes[node].end,
                                  split)
        return &self.rows[0]

    cdef void _open_children(self, intp_t node, intp_t left, intp_t right) noexcept nogil:
        cdef intp_t parent = self.slot[node], small = left, large = right, small_slot, slot
        self.slot[node] = -1
        if self._size(left) > self._size(right):
            small, large = right, left
        if parent >= 0 and self._splittable(large):
            small_slot = self.histograms.acquire()
            self._build(small, small_slot)
            self.histograms.subtract(parent, small_slot)
            self._keep(large, parent)
            if self._splittable(small):
                self._keep(small, small_slot)
            else:
                self.histograms.release(small_slot)
            return
        if parent >= 0:
            self.histograms.release(parent)
        if self._splittable(small):
            slot = self.histograms.acquire()
            self._build(small, slot)
            self._keep(small, slot)
        if self._splittable(large):
            slot = self.histograms.acquire()
            self._build(large, slot)
            self._keep(large, slot)


def _unit_or(weights, intp_t n):
    """``weights``, or ones (every row counts once) for None."""
    return np.ones(n) if weights is None else weights


def grow_tree(const double[:, ::1] X, const double[:, ::1] G, intp_t[:, ::1] order,
              double min_leaf, double min_split, intp_t max_leaves,
              weights=None) -> GrownTree:
    """Induce one multivariate regression tree, best split first.

    Parameters
    ----------
    X : ndarray of shape (n, d), float64
        Features of the round's subset.
    G : ndarray of shape (n, K), float64
        Targets (the gradient vectors, multiplied by the rows' weights).
    order : ndarray of shape (d, n), intp
        ``order[f]`` sorts the rows by feature ``f``
        (:func:`slr.oracles._boosting.splitting.sorted_orders`). Overwritten: on return
        every leaf's rows are contiguous in ``order[0]``.
    min_leaf : float
        Minimum weight (rows, without weights) in each child of a split; a child's weight
        must also be positive.
    min_split : float
        Nodes of smaller weight (fewer rows), or of fewer than 2 rows, are not split.
    max_leaves : int
        Stop when the tree has this many leaves. Leaves are split in order of gain;
        among equal gains, in the order of a list of the leaves in which a split leaves
        its left child in its parent's place and appends its right child.
    weights : ndarray of shape (n,), float64, or None
        Nonnegative row weights (None: ones).

    Returns
    -------
    GrownTree
        Its ``rows`` are ``order[0]`` (a view), or ``arange(n)`` without features (the
        tree is then a single leaf); ``leaf_value`` holds each leaf's weighted mean gradient
        vector ``sum G / sum W``.
    """
    cdef _TreeGrower grower = _TreeGrower(X, G, _unit_or(weights, X.shape[0]), order, min_leaf,
                                          min_split, max_leaves)
    with nogil:
        grower.grow()
    rows = np.asarray(order)[0] if order.shape[0] else np.arange(X.shape[0], dtype=np.intp)
    return grower.grown_tree(rows)


def grow_tree_hist(const unsigned char[:, ::1] codes, const double[:, ::1] G,
                   const intp_t[::1] n_bins, const double[:, ::1] bin_low,
                   const double[:, ::1] bin_high, intp_t[::1] rows, double min_leaf,
                   double min_split, intp_t max_leaves, weights=None) -> GrownTree:
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
    min_leaf, min_split, max_leaves, weights
        As in :func:`grow_tree`.

    Returns
    -------
    GrownTree
        Its ``rows`` are ``rows``.
    """
    cdef _HistGrower grower = _HistGrower(codes, G, _unit_or(weights, G.shape[0]), n_bins, bin_low,
                                          bin_high, rows, min_leaf, min_split, max_leaves)
    with nogil:
        grower.grow()
    return grower.grown_tree(np.asarray(rows))
