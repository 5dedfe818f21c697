"""The tree kernels (slr.oracles._boosting) against plain Python and numpy re-implementations.

* ``grow_tree``: best-first growth with a leaf cap, replayed by a literal Python version
  (brute-force split search in the kernel's arithmetic, the leaves as a list); repeated
  blocks of data make gains of different leaves tie exactly, so the order in which such
  ties are broken is checked too.
* ``refit_leaves``: one Newton step with its line search per leaf, replayed with numpy
  (``numpy.linalg.solve`` for the full Hessian, the diagonal beyond 16 classes).
* ``add_tree`` / ``predict_ensemble``: the one tree walk against a Python walk.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp, softmax

from slr.oracles._boosting import growth, logistic, predictor
from slr.oracles._boosting.splitting import sorted_orders
from slr.oracles._boosting.tree import Tree

FULL_HESSIAN_MAX_CLASSES = 16


# ------------------------------------------------------------------ growth
def running_sums(vectors):
    """Sums of ``vectors[:1], vectors[:2], ...`` added one row after the other."""
    return np.cumsum(vectors, axis=0)


def square_norm(vector):
    total = 0.0
    for entry in vector:
        total += entry * entry
    return total


def best_split_reference(x, g, rows, total, min_leaf):
    """``(gain, feature, threshold, n_left)`` of the best split of ``rows``, or None.

    Brute force over the thresholds between distinct values, in the kernel's arithmetic
    (running sums in each feature's order, the node's ``total`` as the kernel keeps it), so
    equal gains are bitwise equal; ties keep the lowest feature, then the lowest threshold.
    """
    n = len(rows)
    best = None
    for f in range(x.shape[1]):
        ordered = rows[np.argsort(x[rows, f], kind="stable")]
        left_sums = running_sums(g[ordered])
        for n_left in range(min_leaf, n - min_leaf + 1):
            below, above = x[ordered[n_left - 1], f], x[ordered[n_left], f]
            if not above > below:
                continue
            score = (square_norm(left_sums[n_left - 1]) / n_left
                     + square_norm(total - left_sums[n_left - 1]) / (n - n_left))
            if best is None or score > best[0]:
                best = (score, f, below * 0.5 + above * 0.5, n_left)
    if best is None:
        return None
    gain = best[0] - square_norm(total) / n
    return (gain, *best[1:]) if gain > 0 else None


def grow_reference(x, g, min_leaf, min_split, max_leaves):
    """Best-first growth, written out: returns the node arrays, each leaf's rows and
    whether a tie between leaves was decided otherwise than the order of node ids would."""
    n = len(x)
    leaf_cap = min(max(n // min_leaf, 1), max(max_leaves, 1))
    feature, threshold, left, right = [-1], [0.0], [-1], [-1]
    rows, totals = [np.arange(n)], [running_sums(g)[-1]]
    split = {}

    def consider(node, n_leaves):
        if len(rows[node]) >= max(min_split, 2) and n_leaves < leaf_cap:
            found = best_split_reference(x, g, rows[node], totals[node], min_leaf)
            if found is not None:
                split[node] = found

    consider(0, 1)
    # a split leaves its left child in its parent's place and appends its right child
    leaves = [0]
    tie_against_node_order = False
    while len(leaves) < leaf_cap:
        queued = [node for node in leaves if node in split]
        if not queued:
            break
        top = max(split[node][0] for node in queued)
        tied = [node for node in queued if split[node][0] == top]
        node = tied[0]
        tie_against_node_order |= node != min(tied)
        _, f, t, n_left = split.pop(node)
        feature[node], threshold[node] = f, t
        ordered = rows[node][np.argsort(x[rows[node], f], kind="stable")]
        left_total = running_sums(g[ordered[:n_left]])[-1]
        children = (len(feature), len(feature) + 1)
        left[node], right[node] = children
        for child_rows, total in ((ordered[:n_left], left_total),
                                  (ordered[n_left:], totals[node] - left_total)):
            feature.append(-1)
            threshold.append(0.0)
            left.append(-1)
            right.append(-1)
            rows.append(np.sort(child_rows))
            totals.append(total)
        leaves[leaves.index(node)] = children[0]
        leaves.append(children[1])
        for child in children:
            consider(child, len(leaves))
    leaf_rows = [rows[node] for node in range(len(feature)) if feature[node] < 0]
    arrays = [np.array(a) for a in (feature, threshold, left, right)]
    return arrays, leaf_rows, tie_against_node_order


def grow_kernel(x, g, min_leaf, min_split, max_leaves):
    order = sorted_orders(x)
    grown = growth.grow_tree(x, g, order, min_leaf, min_split, max_leaves)
    np.testing.assert_array_equal(grown.rows, order[0])  # the leaves' rows are in order[0]
    leaf_rows = [grown.rows[s:e] for s, e in zip(grown.leaf_start, grown.leaf_end)]
    return ((grown.feature, grown.threshold, grown.left, grown.right), grown.leaf_of_node,
            leaf_rows, grown.leaf_value)


def random_growth_problems(kind, count, seed=0):
    """``(x, g, min_leaf, min_split, max_leaves)``: real data, integer data (gains tie), or
    integer blocks repeated along feature 0 with gradients shifted or mirrored (whole
    subtrees tie, so leaves at different depths have equal gains)."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(2, 50))
        d = int(rng.integers(1, 4))
        k = int(rng.integers(1, 4))
        if kind == "real":
            x = rng.normal(size=(n, d))
            g = rng.normal(size=(n, k))
        else:
            x = rng.integers(0, 4, size=(n, d)).astype(float)
            g = rng.integers(-1, 2, size=(n, k)).astype(float)
        if kind == "blocks":
            copies = range(int(rng.integers(2, 5)))
            shifts = [3 * c if rng.random() < 0.5 else 0 for c in copies]
            x = np.vstack([x + np.eye(d)[0] * 10 * c for c in copies])
            g = np.vstack([g * (-1) ** c + shift for c, shift in zip(copies, shifts)])
        yield x, g, int(rng.integers(1, 4)), int(rng.integers(1, 8)), int(rng.integers(1, 20))


@pytest.mark.parametrize("kind", ["real", "integer", "blocks"])
def test_growth_order_matches_python_replay(kind):
    ties_seen = 0
    for x, g, min_leaf, min_split, max_leaves in random_growth_problems(kind, 200):
        expected, expected_rows, tie = grow_reference(x, g, min_leaf, min_split, max_leaves)
        arrays, leaf_of_node, leaf_rows, raw = grow_kernel(x, g, min_leaf, min_split, max_leaves)
        ties_seen += tie
        for got, want in zip(arrays, expected):
            np.testing.assert_array_equal(got, want)
        assert len(leaf_rows) == len(expected_rows) == np.sum(arrays[0] < 0)
        np.testing.assert_array_equal(leaf_of_node >= 0, arrays[0] < 0)
        for got_rows, want_rows, value in zip(leaf_rows, expected_rows, raw):
            # each leaf's rows, still sorted by feature 0 (stably: ties in row order)
            np.testing.assert_array_equal(got_rows, want_rows[np.argsort(x[want_rows, 0], kind="stable")])
            np.testing.assert_allclose(value, g[want_rows].mean(axis=0), rtol=1e-12, atol=1e-15)
    if kind == "blocks":
        # ties between leaves that the list order decides otherwise than node ids would
        assert ties_seen > 0


def test_raising_the_leaf_cap_adds_one_split():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 3))
    g = rng.normal(size=(200, 2)) + (x[:, :1] > 0)
    previous, _, _, _ = grow_kernel(x, g, 5, 10, 1)
    for max_leaves in range(2, 12):
        arrays, _, leaf_rows, _ = grow_kernel(x, g, 5, 10, max_leaves)
        assert len(leaf_rows) == max_leaves
        # best first: the smaller cap's tree, one of its leaves split, the children appended
        n_old = len(previous[0])
        assert len(arrays[0]) == n_old + 2
        split = np.flatnonzero(arrays[0][:n_old] != previous[0])
        assert len(split) == 1 and previous[0][split[0]] == -1
        for got, want in zip(arrays, previous):
            np.testing.assert_array_equal(np.delete(got[:n_old], split), np.delete(want, split))
        previous = arrays


# ------------------------------------------------------------------ leaf re-fit
def leaf_objective(z, y, v, l2):
    return float(np.sum(logsumexp(z + v, axis=1) - z[np.arange(len(y)), y] - v[y]) + 0.5 * l2 * v @ v)


def newton_step_reference(z, y, v0, l2):
    """One step of the re-fit in numpy: start, ridged Newton direction, Armijo search."""
    n, k = z.shape
    v = v0 if leaf_objective(z, y, v0, l2) < leaf_objective(z, y, np.zeros(k), l2) else np.zeros(k)
    p = softmax(z + v, axis=1)
    grad = p.sum(axis=0) - np.bincount(y, minlength=k) + l2 * v
    ridge = max(l2, 1e-9 * n)
    if k <= FULL_HESSIAN_MAX_CLASSES:
        hess = np.diag(p.sum(axis=0)) - p.T @ p
        direction = np.linalg.solve(hess + ridge * np.eye(k), -grad)
    else:
        direction = -grad / ((p * (1 - p)).sum(axis=0) + ridge)
    decrement = -grad @ direction
    objective, t = leaf_objective(z, y, v, l2), 1.0
    while leaf_objective(z, y, v + t * direction, l2) > objective - 1e-4 * t * decrement:
        t *= 0.5
    return v + t * direction


@pytest.mark.parametrize("k", [2, 3, 5, FULL_HESSIAN_MAX_CLASSES + 4])
def test_one_newton_step_per_leaf_matches_numpy(k):
    rng = np.random.default_rng(k)
    n = 90
    z = 2 * rng.normal(size=(n, k))
    y = rng.integers(0, k, n).astype(np.int64)
    rows = rng.permutation(n).astype(np.intp)
    leaf_start = np.array([0, 30, 31, 60], dtype=np.intp)
    leaf_end = np.array([30, 31, 60, 90], dtype=np.intp)
    start_values = np.vstack([rng.normal(size=k), np.zeros(k), 0.1 * rng.normal(size=(2, k))])
    values = start_values.copy()
    logistic.refit_leaves(z, y, rows, leaf_start, leaf_end, values, 1e-3, 1)
    for leaf in range(4):
        members = rows[leaf_start[leaf]:leaf_end[leaf]]
        expected = newton_step_reference(z[members], y[members], start_values[leaf], 1e-3)
        np.testing.assert_allclose(values[leaf], expected, rtol=1e-9, atol=1e-12)


def test_empty_leaf_keeps_its_value():
    z = np.zeros((4, 3))
    y = np.zeros(4, dtype=np.int64)
    values = np.full((2, 3), 7.0)
    logistic.refit_leaves(z, y, np.arange(4, dtype=np.intp), np.array([0, 2], dtype=np.intp),
                        np.array([2, 2], dtype=np.intp), values, 1e-3, 8)
    np.testing.assert_array_equal(values[1], 7.0)


# ------------------------------------------------------------------ tree walk
def walk_reference(x, feature, threshold, left, right, root):
    node = root
    while feature[node] >= 0:
        node = left[node] if x[feature[node]] <= threshold[node] else right[node]
    return node


def absolute_ids(children, offset):
    """Child ids of a tree whose nodes start at ``offset`` in an ensemble (-1 stays)."""
    return np.where(children >= 0, children + offset, -1).astype(np.intp)


def test_add_tree_and_predict_ensemble_walk_like_python():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(300, 3))
    trees, offset = [], 0
    for seed in range(3):
        g = np.random.default_rng(seed).normal(size=(300, 2)) + x[:, seed:seed + 1]
        arrays, *_ = grow_kernel(x, g, 10, 20, 6)
        feature, threshold, left, right = arrays
        value = rng.normal(size=(len(feature), 2))
        trees.append((feature, threshold, left, right, value, offset))
        offset += len(feature)
    expected = np.zeros((300, 2))
    for feature, threshold, left, right, value, _ in trees:
        one = np.zeros((300, 2))
        predictor.add_tree(x, Tree(feature, threshold, left, right, value), one, 2)
        walked = np.array([value[walk_reference(row, feature, threshold, left, right, 0)] for row in x])
        np.testing.assert_array_equal(one, walked)
        expected += walked
    offsets = np.array([t[5] for t in trees] + [offset], dtype=np.intp)
    out = np.zeros((300, 2))
    predictor.predict_ensemble(
        x, offsets, np.full(3, -1, dtype=np.intp), np.concatenate([t[0] for t in trees]),
        np.concatenate([t[1] for t in trees]),
        np.concatenate([absolute_ids(t[2], t[5]) for t in trees]),
        np.concatenate([absolute_ids(t[3], t[5]) for t in trees]),
        np.concatenate([t[4] for t in trees]), out, 2,
    )
    np.testing.assert_array_equal(out, expected)


def test_scalar_trees_add_to_their_class_only():
    """``add_tree`` of a tree with ``column = c`` and ``predict_ensemble`` with
    ``tree_class >= 0``."""
    rng = np.random.default_rng(6)
    x = rng.normal(size=(200, 2))
    trees, offset = [], 0
    expected = np.zeros((200, 3))
    for c in (2, 0, 2):
        g = rng.normal(size=(200, 1)) + x[:, :1]
        (feature, threshold, left, right), *_ = grow_kernel(x, g, 10, 20, 5)
        value = rng.normal(size=(len(feature), 1))
        one = np.zeros((200, 3))
        predictor.add_tree(x, Tree(feature, threshold, left, right, value, c), one, 1)
        walked = np.array([value[walk_reference(row, feature, threshold, left, right, 0), 0]
                           for row in x])
        np.testing.assert_array_equal(one[:, c], walked)
        assert not np.any(np.delete(one, c, axis=1))
        expected[:, c] += walked
        trees.append((feature, threshold, absolute_ids(left, offset),
                      absolute_ids(right, offset), value))
        offset += len(feature)
    offsets = np.cumsum([0] + [len(t[0]) for t in trees]).astype(np.intp)
    out = np.zeros((200, 3))
    predictor.predict_ensemble(x, offsets, np.array([2, 0, 2], dtype=np.intp),
                               *(np.concatenate([t[i] for t in trees]) for i in range(5)), out, 2)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("depth", [3, 40])
def test_lopsided_trees_walk_like_python(depth):
    """A caterpillar tree (every right child split again) beside a single leaf: the
    lock-step walk for shallow trees, the row-at-a-time walk beyond 32 levels."""
    rng = np.random.default_rng(depth)
    x = rng.normal(size=(101, 2))
    x[:5] = 0.0  # rows exactly at a threshold go left
    x[5] = 100.0  # this row walks down to the last leaf
    feature, threshold, left, right = [], [], [], []
    for level in range(depth):
        node = len(feature)
        feature.append(level % 2)
        threshold.append([0.0, -1.0, 1.0][level % 3] + 0.01 * level)
        left.append(node + 1)
        right.append(node + 2)
        feature.append(-1)
        threshold.append(0.0)
        left.append(-1)
        right.append(-1)
    feature.append(-1), threshold.append(0.0), left.append(-1), right.append(-1)
    arrays = [np.array(a, dtype=np.intp) for a in (feature, left, right)]
    feature, left, right = arrays
    threshold = np.array(threshold)
    value = rng.normal(size=(len(feature), 1))
    walked = np.array([value[walk_reference(row, feature, threshold, left, right, 0), 0]
                       for row in x])
    n_nodes = len(feature)
    out = np.zeros((101, 2))
    predictor.predict_ensemble(
        x, np.array([0, n_nodes, n_nodes + 1], dtype=np.intp), np.array([1, 0], dtype=np.intp),
        np.append(feature, -1), np.append(threshold, 0.0), np.append(left, -1),
        np.append(right, -1), np.vstack([value, [[7.0]]]), out, 2,
    )
    np.testing.assert_array_equal(out[:, 1], walked)
    np.testing.assert_array_equal(out[:, 0], 7.0)


@pytest.mark.parametrize("scale", [1.0, 300.0])
def test_class_margins_against_logsumexp(scale):
    z = np.random.default_rng(7).normal(size=(500, 5)) * scale
    z[0] = [1e3, 0.0, -1e3, 5.0, 1e3 - 1e-9]  # a near-tie for the largest class
    u = np.empty_like(z)
    logistic.class_margins(z, u)
    expected = np.column_stack([z[:, c] - logsumexp(np.delete(z, c, axis=1), axis=1)
                                for c in range(5)])
    np.testing.assert_allclose(u, expected, rtol=1e-12, atol=1e-12 * scale)
