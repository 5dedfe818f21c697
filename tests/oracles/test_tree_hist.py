"""The histogram split search (``splitter="hist"``) against the exact one.

With at most 255 distinct values per feature every value has its own bin, so the
histogram search meets the exact search's candidates and must pick the same splits
(gains are summed in another order, so leaf values agree to rounding); with more
values the bins are quantiles and the fit must come close to the exact one's loss.
"""
from __future__ import annotations

import numpy as np
import pytest

from slr.oracles._boosting.binning import MAX_BINS, bin_features
from slr.oracles._boosting.growth import grow_tree, grow_tree_hist
from slr.oracles._boosting.splitting import sorted_orders
from slr.oracles.trees import BoostedTrees, resolve_splitter


def grow_both(x, g, min_leaf, min_split, max_leaves):
    exact = grow_tree(x, g, sorted_orders(x), min_leaf, min_split, max_leaves)
    codes, n_bins, low, high = bin_features(x)
    rows = np.arange(x.shape[0], dtype=np.intp)
    hist = grow_tree_hist(codes, g, n_bins, low, high, rows, min_leaf, min_split, max_leaves)
    return exact, hist


def assert_same_tree(exact, hist):
    for name in ("feature", "threshold", "left", "right", "leaf_of_node", "leaf_start",
                 "leaf_end"):
        np.testing.assert_array_equal(getattr(exact, name), getattr(hist, name))
    for start, end in zip(exact.leaf_start, exact.leaf_end):
        np.testing.assert_array_equal(np.sort(exact.rows[start:end]),
                                      np.sort(hist.rows[start:end]))
    np.testing.assert_allclose(exact.leaf_value, hist.leaf_value, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", [1, 3])
def test_hist_tree_equals_exact_tree_with_few_distinct_values(seed, k):
    rng = np.random.default_rng(seed)
    n = 1500
    x = np.column_stack([rng.integers(0, 255, n), rng.integers(0, 7, n),
                         rng.normal(size=n).round(1), np.full(n, 3.0)]).astype(np.float64)
    g = rng.normal(size=(n, k)) + np.column_stack([x[:, 0] / 100, -x[:, 1] / 3, x[:, 2]])[:, :k]
    for min_leaf, min_split, max_leaves in [(15, 40, 10**9), (1, 2, 25), (60, 60, 10**9)]:
        assert_same_tree(*grow_both(x, g, min_leaf, min_split, max_leaves))


def test_hist_tree_equals_exact_tree_when_histograms_exceed_the_pool():
    # 26 x 128 x 201 histograms of 5.5 MB: the 128 MB pool holds 23, the tree grows 60
    # leaves, so nodes are searched from the scratch histogram and children are built
    # without subtraction
    rng = np.random.default_rng(9)
    n = 3000
    x = rng.integers(0, 201, size=(n, 128)).astype(np.float64)
    g = rng.normal(size=(n, 26)) + x[:, :26] / 200
    assert_same_tree(*grow_both(x, g, 5, 10, 60))


@pytest.mark.parametrize("tree", ["vector", "per_class"])
def test_booster_hist_splits_equal_exact_splits(tree):
    rng = np.random.default_rng(3)
    n, k = 4000, 4
    labels = rng.integers(0, k, n)
    features = np.round(rng.uniform(size=(n, 5)) * 50) / 50
    features[:, 0] += 0.2 * labels
    bias = rng.normal(size=(n, k))
    fits = [BoostedTrees(tree=tree, splitter=splitter, n_rounds=6, subsample=2000,
                         random_state=0).fit(features, bias, labels)
            for splitter in ("exact", "hist")]
    for name in ("tree_offsets_", "node_feature_", "node_threshold_", "node_left_"):
        np.testing.assert_array_equal(getattr(fits[0], name), getattr(fits[1], name))
    np.testing.assert_allclose(fits[0].node_value_, fits[1].node_value_, atol=1e-9)


@pytest.mark.parametrize("tree", ["vector", "per_class"])
def test_booster_hist_loss_close_to_exact_on_continuous_features(tree):
    rng = np.random.default_rng(5)
    n, k = 6000, 3
    labels = rng.integers(0, k, n)
    features = rng.normal(size=(n, 3))
    features[:, 0] += 0.7 * labels
    features[:, 1] *= 1 + labels
    bias = rng.normal(size=(n, k))
    losses = [BoostedTrees(tree=tree, splitter=splitter, n_rounds=10, subsample=3000,
                           random_state=0).fit(features, bias, labels).loss(features, bias, labels)
              for splitter in ("exact", "hist")]
    start = BoostedTrees(n_rounds=0).fit(features, bias, labels).loss(features, bias, labels)
    assert losses[1] < 0.9 * start
    # thresholds only between bins of about 24 rows cost a little training loss, more as
    # the rounds go on (after 100 rounds the exact trees fit the random biases closer)
    assert losses[1] == pytest.approx(losses[0], rel=0.02)


def test_bins_hold_their_values_in_order():
    rng = np.random.default_rng(2)
    n = 20000
    features = np.column_stack([rng.normal(size=n), rng.integers(0, 40, n),
                                np.where(rng.random(n) < 0.5, 0.0, rng.exponential(size=n))])
    codes, n_bins, low, high = bin_features(features)
    assert list(n_bins) == [MAX_BINS, 40, MAX_BINS]
    for f in range(3):
        x, c, b = features[:, f], codes[f].astype(np.intp), n_bins[f]
        assert np.all((low[f, c] <= x) & (x <= high[f, c]))
        assert np.all(low[f, :b] <= high[f, :b]) and np.all(high[f, :b - 1] < low[f, 1:b])
        counts = np.bincount(c, minlength=b)
        assert np.all(counts > 0)
    np.testing.assert_array_equal(low[1, :40], np.arange(40))  # one bin per value
    # quantile bins: about n / 255 rows each, except the bin of the repeated zero
    assert np.bincount(codes[0]).max() <= 2 * n / MAX_BINS
    assert np.bincount(codes[2])[0] == np.sum(features[:, 2] == 0.0)


def test_auto_splitter_rule_and_bad_splitter():
    assert resolve_splitter("auto", 2) == "exact" and resolve_splitter("auto", 3) == "hist"
    assert resolve_splitter("hist", 0) == "exact"  # no feature: nothing to bin
    features = np.random.default_rng(0).uniform(size=(300, 2))
    labels = np.arange(300) % 3
    bias = np.zeros((300, 3))
    default = BoostedTrees(n_rounds=3, subsample=100, random_state=0).fit(features, bias, labels)
    exact = BoostedTrees(n_rounds=3, subsample=100, random_state=0, splitter="exact")
    np.testing.assert_array_equal(default.node_value_,
                                  exact.fit(features, bias, labels).node_value_)
    for value in ("histogram", None, 0):
        with pytest.raises(ValueError, match="splitter"):
            BoostedTrees(n_rounds=2, splitter=value).fit(features, bias, labels)
