"""Boosted multivariate regression trees (slr.oracles.trees) and the LightGBM adapter."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp
from sklearn.tree import DecisionTreeRegressor

from slr.oracles._boosting import growth, logistic, predictor
from slr.oracles._boosting.splitting import find_best_split, sorted_orders
from slr.oracles._boosting.tree import Tree
from slr.oracles.base import biased_logistic_loss
from slr.oracles.trees import AUTO_PER_CLASS_MIN_CLASSES, TREE_DEFAULTS, BoostedTrees, resolve_tree

lightgbm = pytest.importorskip("lightgbm")
from slr.oracles.lightgbm_adapter import LightGBM  # noqa: E402


def make_problem(n: int, k: int, d: int = 2, seed: int = 0):
    """Features that carry label information, random biases."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    features = rng.uniform(size=(n, d))
    features[:, 0] += 0.5 * labels / max(k - 1, 1)
    bias = rng.normal(size=(n, k))
    return features, bias, labels


def brute_force_split(x: np.ndarray, g: np.ndarray, min_leaf: int):
    """Best split by trying every threshold between distinct values."""
    def sse(a: np.ndarray) -> float:
        return float(((a - a.mean(axis=0)) ** 2).sum())

    parent = sse(g)
    best = (-1, 0.0, -np.inf)
    for f in range(x.shape[1]):
        values = np.unique(x[:, f])
        for lo, hi in zip(values[:-1], values[1:]):
            left = x[:, f] <= lo
            if left.sum() < min_leaf or (~left).sum() < min_leaf:
                continue
            gain = parent - sse(g[left]) - sse(g[~left])
            if gain > best[2] + 1e-12:
                best = (f, (lo + hi) / 2, gain)
    return best


def tree_arrays_predict(x, feature, threshold, left, right, value):
    out = np.zeros((x.shape[0], value.shape[1]))
    predictor.add_tree(x, Tree(feature, threshold, left, right, value), out)
    return out


# ------------------------------------------------------------------ split search
@pytest.mark.parametrize("seed", range(6))
def test_split_finder_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        n = int(rng.integers(2, 40))
        d = int(rng.integers(1, 4))
        k = int(rng.integers(1, 5))
        x = np.round(rng.normal(size=(n, d)), 1)  # ties on purpose
        g = rng.normal(size=(n, k))
        min_leaf = int(rng.integers(1, 6))
        feature, threshold, gain = find_best_split(x, g, min_leaf)
        bf_feature, bf_threshold, bf_gain = brute_force_split(x, g, min_leaf)
        if bf_feature < 0:
            assert feature < 0
            continue
        assert gain == pytest.approx(bf_gain, rel=1e-9, abs=1e-12)
        # the chosen split realises that gain (equal only up to ties with another split)
        left = x[:, feature] <= threshold
        assert min(left.sum(), (~left).sum()) >= min_leaf
        realised = (((g - g.mean(0)) ** 2).sum() - ((g[left] - g[left].mean(0)) ** 2).sum()
                    - ((g[~left] - g[~left].mean(0)) ** 2).sum())
        assert realised == pytest.approx(bf_gain, rel=1e-9, abs=1e-12)


def test_no_split_on_constant_feature_or_zero_gradient():
    x = np.ones((50, 1))
    g = np.random.default_rng(0).normal(size=(50, 3))
    assert find_best_split(x, g, 1)[0] == -1
    x = np.random.default_rng(1).normal(size=(50, 2))
    assert find_best_split(x, np.zeros((50, 3)), 1)[0] == -1


@pytest.mark.parametrize("max_leaves", [None, 7])
def test_tree_equals_sklearn_multioutput_tree(max_leaves):
    """Same partition and leaf means as scikit-learn's multi-output squared-error tree."""
    rng = np.random.default_rng(3)
    n, k = 2000, 3
    x = rng.integers(0, 256, size=(n, 3)) / 8.0  # exact in float32, as sklearn uses
    g = rng.normal(size=(n, k)) + np.column_stack([x[:, 0], -x[:, 1], x[:, 2] ** 2]) / 30
    min_leaf, min_split = 20, 50
    order = sorted_orders(x)
    grown = growth.grow_tree(x, g, order, min_leaf, min_split,
                             10**9 if max_leaves is None else max_leaves)
    feature, threshold, left, right = grown.feature, grown.threshold, grown.left, grown.right
    leaf_of_node, start, end, raw = grown.leaf_of_node, grown.leaf_start, grown.leaf_end, grown.leaf_value
    value = np.zeros((feature.shape[0], k))
    value[leaf_of_node >= 0] = raw
    ours = tree_arrays_predict(x, feature, threshold, left, right, value)
    sk = DecisionTreeRegressor(
        min_samples_leaf=min_leaf, min_samples_split=min_split, max_leaf_nodes=max_leaves,
        random_state=0,
    ).fit(x, g)
    assert int(np.sum(feature < 0)) == sk.get_n_leaves()
    np.testing.assert_allclose(ours, sk.predict(x), atol=1e-10)
    # every leaf's rows, as reported, are the rows that reach the leaf
    for leaf in range(start.shape[0]):
        rows = order[0, start[leaf]:end[leaf]]
        assert end[leaf] - start[leaf] >= min_leaf
        np.testing.assert_allclose(ours[rows], np.broadcast_to(raw[leaf], ours[rows].shape),
                                   atol=1e-12)


# ------------------------------------------------------------------ leaf re-fit
def test_refit_minimises_biased_loss_with_splits_fixed():
    features, bias, labels = make_problem(3000, 4, seed=5)
    scores = np.zeros_like(bias)
    rows = np.arange(3000, dtype=np.intp)
    margins = np.empty_like(bias)
    grad = np.empty_like(bias)
    sub_labels = np.empty(3000, dtype=np.int64)
    logistic.subset_gradient(scores, bias, labels, rows, margins, grad, sub_labels)
    np.testing.assert_allclose(grad, -biased_logistic_loss(scores, bias, labels)[1])
    order = sorted_orders(features)
    grown = growth.grow_tree(features, grad, order, 150, 300, 10**9)
    feature, threshold, left, right = grown.feature, grown.threshold, grown.left, grown.right
    leaf_of_node, start, end, raw = grown.leaf_of_node, grown.leaf_start, grown.leaf_end, grown.leaf_value
    assert start.shape[0] >= 8
    refit = raw.copy()
    logistic.refit_leaves(margins, sub_labels, order[0], start, end, refit, 0.0, 20)

    def tree_loss(leaf_values: np.ndarray) -> float:
        value = np.zeros((feature.shape[0], 4))
        value[leaf_of_node >= 0] = leaf_values
        t = tree_arrays_predict(features, feature, threshold, left, right, value)
        return biased_logistic_loss(t, bias, labels)[0]

    loss_raw, loss_refit = tree_loss(raw), tree_loss(refit)
    assert loss_refit < loss_raw - 1.0
    assert loss_refit < biased_logistic_loss(scores, bias, labels)[0]
    # independent optimum: L-BFGS over each leaf's vector
    leaf_rows = [order[0, s:e] for s, e in zip(start, end)]
    best = 0.0
    for rows_l in leaf_rows:
        z, y = margins[rows_l], labels[rows_l]

        def f(v):
            zz = z + v
            lse = logsumexp(zz, axis=1)
            p = np.exp(zz - lse[:, None])
            p[np.arange(len(y)), y] -= 1
            return float(np.sum(lse - zz[np.arange(len(y)), y])), p.sum(0)

        best += minimize(f, np.zeros(4), jac=True, method="L-BFGS-B",
                         options={"gtol": 1e-10, "ftol": 1e-15}).fun
    assert loss_refit == pytest.approx(best, rel=1e-7)


def test_refit_with_many_classes_uses_diagonal_and_still_lowers_loss():
    features, bias, labels = make_problem(2000, 20, seed=2)
    model = BoostedTrees(n_rounds=5, subsample=1.0, random_state=0).fit(features, bias, labels)
    assert np.all(np.diff(model.subset_loss_) < 0)


# ------------------------------------------------------------------ the booster
def test_training_loss_decreases_on_fixed_subset():
    features, bias, labels = make_problem(1500, 3, seed=1)
    model = BoostedTrees(n_rounds=30, subsample=1.0, random_state=0).fit(features, bias, labels)
    history = model.subset_loss_
    assert history.shape == (30,)
    assert history[0] == pytest.approx(biased_logistic_loss(np.zeros_like(bias), bias, labels)[0]
                                       / 1500)
    assert np.all(np.diff(history) < 0)
    assert model.loss(features, bias, labels) / 1500 < history[-1]


def test_split_rules_and_learning_rate_are_respected():
    features, bias, labels = make_problem(4000, 3, seed=4)
    model = BoostedTrees(n_rounds=3, subsample=2000, learning_rate=0.5, random_state=0)
    model.fit(features, bias, labels)
    assert model.n_trees_ == 3
    # leaves hold >= 1% of the 2000-row subset and at most 2000 / 20 = 100 leaves exist
    assert np.all(model.n_leaves_ <= 100) and np.all(model.n_leaves_ > 10)
    capped = BoostedTrees(n_rounds=3, subsample=2000, max_leaf_nodes=5, random_state=0)
    assert np.all(capped.fit(features, bias, labels).n_leaves_ == 5)


def test_same_seed_same_model_and_pickle_roundtrip():
    features, bias, labels = make_problem(5000, 3, seed=6)
    a = BoostedTrees(n_rounds=20, subsample=1000, random_state=7).fit(features, bias, labels)
    b = BoostedTrees(n_rounds=20, subsample=1000, random_state=7).fit(features, bias, labels)
    c = BoostedTrees(n_rounds=20, subsample=1000, random_state=8).fit(features, bias, labels)
    for name in ("tree_offsets_", "node_feature_", "node_threshold_", "node_value_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.decision_function(features), c.decision_function(features))
    # a refit with an int seed is reproducible too
    np.testing.assert_array_equal(
        a.fit(features, bias, labels).node_value_, b.node_value_
    )
    clone = pickle.loads(pickle.dumps(a))
    test = np.random.default_rng(0).uniform(size=(300, 2))
    np.testing.assert_array_equal(clone.decision_function(test), a.decision_function(test))
    np.testing.assert_array_equal(clone.decision_function(features), a.decision_function(features))


def test_training_scores_equal_tree_walk():
    features, bias, labels = make_problem(2000, 3, seed=8)
    model = BoostedTrees(n_rounds=10, subsample=500, random_state=0).fit(features, bias, labels)
    walked = model.decision_function(features[::-1])[::-1]
    np.testing.assert_array_equal(model.training_scores_, walked)


def test_warm_start_continues_from_current_ensemble():
    features, bias, labels = make_problem(3000, 3, seed=9)
    model = BoostedTrees(n_rounds=10, subsample=1.0, warm_start=True, random_state=0)
    first = model.fit(features, bias, labels).loss(features, bias, labels)
    second = model.fit(features, bias, labels).loss(features, bias, labels)
    assert model.n_trees_ == 20 and second < first
    cold = BoostedTrees(n_rounds=10, subsample=1.0, random_state=0)
    cold.fit(features, bias, labels)
    cold.fit(features, bias, labels)
    assert cold.n_trees_ == 10
    assert cold.loss(features, bias, labels) == pytest.approx(first)


@pytest.mark.parametrize("oracle", [BoostedTrees(n_rounds=3), LightGBM(n_rounds=3)])
def test_single_class_is_zero_function(oracle):
    features = np.random.default_rng(0).uniform(size=(50, 2))
    oracle.fit(features, np.zeros((50, 1)), np.zeros(50, dtype=int))
    np.testing.assert_array_equal(oracle.decision_function(features), np.zeros((50, 1)))


# ------------------------------------------------------------------ never above the replaced function
NODE_ARRAYS = ("tree_offsets_", "tree_class_", "node_feature_", "node_threshold_", "node_left_", "node_right_",
               "node_value_")


def shifted(bias: np.ndarray, seed: int) -> np.ndarray:
    """The next bias of a structured learner: the last one moved a little."""
    return bias + 0.2 * np.random.default_rng(seed).normal(size=bias.shape)


def prefix_scores(model: BoostedTrees, features: np.ndarray, n_trees: int) -> np.ndarray:
    """Scores of the ensemble's first ``n_trees`` trees."""
    out = np.zeros((features.shape[0], model.n_classes_))
    predictor.predict_ensemble(features, model.tree_offsets_[:n_trees + 1].copy(), model.tree_class_,
                               model.node_feature_, model.node_threshold_, model.node_left_, model.node_right_,
                               model.node_value_, out, 1)
    return out


@pytest.mark.parametrize("tree", ["vector", "per_class"])
def test_refit_that_would_rise_boosts_on_from_the_replaced_function(tree):
    """A well-fitted ensemble refitted with 2 rounds for a new bias: from 0 the fit ends above the
    replaced function's loss; the oracle boosts on from that function instead, round by round
    without a rise, and ends below it. The training rows' scores are taken from
    ``training_scores_`` (or, after pickling, predicted): the same fit either way."""
    features, bias, labels = make_problem(2000, 3, seed=11)
    model = BoostedTrees(n_rounds=40, subsample=500, tree=tree, random_state=0).fit(features, bias, labels)
    replaced = pickle.loads(pickle.dumps(model))
    new_bias = shifted(bias, 1)
    reference = biased_logistic_loss(replaced.decision_function(features), new_bias, labels)[0]
    fresh = BoostedTrees(n_rounds=2, subsample=500, tree=tree, random_state=0).fit(features, new_bias, labels)
    assert fresh.loss(features, new_bias, labels) > reference
    assert not fresh.continued_

    model.set_params(n_rounds=2).fit(features, new_bias, labels)
    assert model.continued_
    n_old, per_round = replaced.n_trees_, 3 if tree == "per_class" else 1
    assert replaced.n_trees_ < model.n_trees_ <= n_old + 2 * per_round
    for name in NODE_ARRAYS[1:]:   # the replaced trees come first, unchanged
        old = getattr(replaced, name)
        np.testing.assert_array_equal(getattr(model, name)[:old.shape[0]], old)
    losses = [biased_logistic_loss(prefix_scores(model, features, t), new_bias, labels)[0]
              for t in range(n_old, model.n_trees_ + 1, per_round)]
    assert losses[0] == pytest.approx(reference, rel=1e-12)
    assert np.all(np.diff(losses) <= 0) and losses[-1] < reference
    np.testing.assert_array_equal(model.training_scores_, model.decision_function(features))

    replaced.set_params(n_rounds=2).fit(features, new_bias, labels)   # no training_scores_ after pickling
    for name in NODE_ARRAYS:
        np.testing.assert_array_equal(getattr(replaced, name), getattr(model, name))


@pytest.mark.parametrize("tree", ["vector", "per_class"])
def test_refit_that_does_not_rise_is_the_fit_from_zero(tree):
    features, bias, labels = make_problem(2000, 3, seed=12)
    model = BoostedTrees(n_rounds=1, subsample=500, tree=tree, random_state=0).fit(features, bias, labels)
    new_bias = shifted(bias, 2)
    model.set_params(n_rounds=20).fit(features, new_bias, labels)
    fresh = BoostedTrees(n_rounds=20, subsample=500, tree=tree, random_state=0).fit(features, new_bias, labels)
    assert not model.continued_ and model.n_halvings_ == 0
    for name in NODE_ARRAYS + ("subset_loss_",):
        np.testing.assert_array_equal(getattr(model, name), getattr(fresh, name))


@pytest.mark.parametrize("tree", ["vector", "per_class"])
def test_refit_after_a_continued_fit_on_the_same_rows_continues_at_once(tree, monkeypatch):
    """After a fit that continued, the next fit on the same rows boosts on from the replaced
    function without a fit from 0 first; its rounds never raise the loss. Where the fit from 0
    would have risen, the result is that of trying it first (a copy that tries it: its rows'
    scores predicted after pickling). On other rows the fit from 0 is tried first, as before."""
    features, bias, labels = make_problem(2000, 3, seed=11)
    model = BoostedTrees(n_rounds=40, subsample=500, tree=tree, random_state=0).fit(features, bias, labels)
    model.set_params(n_rounds=2).fit(features, shifted(bias, 1), labels)
    assert model.continued_
    boosts = []
    original = BoostedTrees._boost
    monkeypatch.setattr(BoostedTrees, "_boost", lambda self, *args, **kw: boosts.append(kw.get("guarded", False))
                        or original(self, *args, **kw))
    replaced = pickle.loads(pickle.dumps(model))   # no training_scores_, no kept scores
    replaced.continued_ = False   # so it tries the fit from 0 first
    new_bias = shifted(bias, 2)
    reference = biased_logistic_loss(model.training_scores_, new_bias, labels)[0]
    n_old, per_round = model.n_trees_, 3 if tree == "per_class" else 1
    model.fit(features, new_bias, labels)
    assert boosts == [True] and model.continued_
    losses = [biased_logistic_loss(prefix_scores(model, features, t), new_bias, labels)[0]
              for t in range(n_old, model.n_trees_ + 1, per_round)]
    assert losses[0] == pytest.approx(reference, rel=1e-12)
    assert np.all(np.diff(losses) <= 0) and losses[-1] < reference
    np.testing.assert_array_equal(model.training_scores_, model.decision_function(features))
    leaves = [np.sum(model.node_feature_[lo:hi] < 0) for lo, hi in zip(model.tree_offsets_, model.tree_offsets_[1:])]
    np.testing.assert_array_equal(model.n_leaves_, leaves)
    boosts.clear()
    replaced.fit(features, new_bias, labels)
    assert boosts == [False, True] and replaced.continued_   # the fit from 0 rose
    for name in NODE_ARRAYS + ("subset_loss_", "training_scores_", "n_halvings_"):
        np.testing.assert_array_equal(getattr(replaced, name), getattr(model, name))

    boosts.clear()
    other = features[::-1].copy()   # the same rows in another order: other rows to the oracle
    model.fit(other, shifted(bias, 3)[::-1].copy(), labels[::-1].copy())
    assert boosts[0] is False


def test_stepped_loss_is_the_biased_loss_of_the_stepped_scores():
    """Integer labels, weights and soft targets: the loss at ``F + scale * D`` equals numpy's."""
    rng = np.random.default_rng(5)
    n, k = 300, 4
    scores, step, bias = rng.normal(size=(n, k)), rng.normal(size=(n, k)), 3 * rng.normal(size=(n, k))
    labels = rng.integers(0, k, n)
    weights = rng.uniform(0, 2, n)
    targets = rng.dirichlet(np.ones(k), n)
    for scale in (1.0, 0.25, 0.0):
        stepped = scores + scale * step
        for w in (None, weights):
            assert logistic.stepped_loss(scores, step, scale, bias, labels, w) == pytest.approx(
                biased_logistic_loss(stepped, bias, labels, w)[0], rel=1e-12)
            assert logistic.stepped_loss(scores, step, scale, bias, np.zeros(n, dtype=np.int64), w, targets) \
                == pytest.approx(biased_logistic_loss(stepped, bias, targets, w)[0], rel=1e-12)


def test_guarded_rounds_are_undone_where_the_full_loss_rose(monkeypatch):
    """The guard's checks of the full loss: where the check of a block finds a rise, its rounds are
    taken again one by one; where the check after those finds one too (by the rounding of the loss's
    sums only), they are undone and the continued fit ends at the function it replaced, bit for bit."""
    import slr.oracles.trees as trees

    features, bias, labels = make_problem(2000, 3, seed=11)
    model = BoostedTrees(n_rounds=40, subsample=500, tree="per_class", random_state=0).fit(features, bias, labels)
    before = {name: getattr(model, name).copy() for name in NODE_ARRAYS + ("subset_loss_", "training_scores_")}
    checks = []
    true_loss = trees._RoundGuard._loss

    def rising_loss(self, scores):   # the loss at the start as it is, every later one above it
        checks.append(scores.copy())
        return true_loss(self, scores) + (np.inf if len(checks) > 1 else 0.0)

    monkeypatch.setattr(trees._RoundGuard, "_loss", rising_loss)
    model.set_params(n_rounds=6).fit(features, shifted(bias, 1), labels)
    assert model.continued_
    # the start, the first block's end, and the rounds taken again one by one: other scores
    assert len(checks) == 3 and not np.array_equal(checks[1], checks[2])
    for name, value in before.items():
        np.testing.assert_array_equal(getattr(model, name), value)


@pytest.mark.parametrize("tree", ["vector", "per_class"])
@pytest.mark.parametrize("n_rounds, n_checks", [(40, 1 + 4), (30, 1 + 3)])
def test_guarded_blocks_that_lower_the_loss_are_the_unguarded_rounds(tree, n_rounds, n_checks, monkeypatch):
    """From f = 0 at the default step no block raises the full loss: a guarded boost's rounds are
    then the unguarded boost's, bit for bit, with one pass of the full loss at the start and per
    block, none taken round by round. Blocks of 4, 8, 16 and the 12 rounds left of 40; of 30, the
    third block takes the 2 rounds a block of 16 would leave."""
    import slr.oracles.trees as trees
    from slr.oracles.trees import _Ensemble

    features, bias, labels = make_problem(3000, 3, seed=4)
    checks, alone = [], []
    true_loss, add = trees._RoundGuard._loss, trees._RoundGuard._add
    monkeypatch.setattr(trees._RoundGuard, "_loss", lambda self, scores: checks.append(1) or true_loss(self, scores))
    monkeypatch.setattr(trees._RoundGuard, "_add", lambda self, *args: alone.append(1) or add(self, *args))
    fitted = []
    for guarded in (False, True):
        oracle = BoostedTrees(n_rounds=n_rounds, subsample=1000, tree=tree, random_state=0)
        settings = oracle._boosting_settings(oracle.get_params(), 3000, 2, 3)
        oracle.n_halvings_ = 0
        ensemble = _Ensemble(np.zeros((3000, 3)))
        oracle._boost(features, bias, labels, None, ensemble, settings, np.random.default_rng(0), 0.0,
                      guarded=guarded)
        fitted.append((ensemble, oracle.n_halvings_))
    (plain, _), (guarded_fit, halvings) = fitted
    assert (len(checks), len(alone), halvings) == (n_checks, 0, 0)
    np.testing.assert_array_equal(guarded_fit.scores, plain.scores)
    assert guarded_fit.subset_loss == plain.subset_loss and len(guarded_fit.round_seconds) == n_rounds
    assert len(guarded_fit.trees) == len(plain.trees)
    for ours, theirs in zip(guarded_fit.trees, plain.trees):
        np.testing.assert_array_equal(ours.value, theirs.value)
        np.testing.assert_array_equal(ours.threshold, theirs.threshold)


@pytest.mark.parametrize("vector", [True, False])
def test_guarded_step_kernels_agree_with_the_loss_of_the_stepped_scores(vector):
    """A guarded round's kernels against numpy: the leaves a tree sends its rows to, the change of the
    biased loss at a scale of the round's step (integer labels, weights, soft targets) from the rows'
    probabilities, and the step's addition (scores bitwise as adding the trees; probabilities the
    softmax of the new margins)."""
    rng = np.random.default_rng(7)
    n, k = 400, 3
    features, bias, labels = make_problem(n, k, seed=7)
    scores = rng.normal(size=(n, k))
    columns = [-1] if vector else list(range(k))
    trees = []
    for c in columns:
        target = rng.normal(size=(n, k if c < 0 else 1))
        grown = growth.grow_tree(features, target, sorted_orders(features), 20, 40, 8, None)
        trees.append(grown.fitted(rng.normal(size=grown.leaf_value.shape), column=c))
    step = np.zeros((n, k))
    leaves = np.empty((len(trees), n), dtype=np.intp)
    for t, tree in enumerate(trees):
        predictor.add_tree(features, tree, step)
        predictor.tree_leaves(features, tree, leaves[t])
        assert np.all(tree.feature[leaves[t]] < 0)   # every row ends at a leaf
    values = np.concatenate([tree.value for tree in trees])
    offsets = np.cumsum([0] + [tree.n_nodes for tree in trees[:-1]]).astype(np.intp)
    margins = scores + bias
    probabilities = np.exp(margins - logsumexp(margins, axis=1, keepdims=True))
    weights, targets = rng.uniform(0, 2, n), rng.dirichlet(np.ones(k), n)
    for scale in (1.0, 0.25, 2.0 ** -30):
        for w in (None, weights):
            for q, y in ((None, labels), (targets, np.zeros(n, dtype=np.int64))):
                change = (logistic.step_log_partition(probabilities, leaves, offsets, vector,
                                                      np.expm1(scale * values), w)
                          - scale * logistic.step_target_term(leaves, offsets, vector, values, y, w, q))
                reference = [biased_logistic_loss(f, bias, labels if q is None else q, w)[0]
                             for f in (scores + scale * step, scores)]
                assert change == pytest.approx(reference[0] - reference[1], rel=1e-7, abs=1e-9 * abs(reference[1]))
    added = scores.copy()
    logistic.add_step(probabilities, leaves, offsets, vector, np.expm1(0.5 * values), 0.5 * values, added)
    expected = scores.copy()
    for tree in trees:
        predictor.add_tree(features, Tree(tree.feature, tree.threshold, tree.left, tree.right, 0.5 * tree.value,
                                          tree.column), expected)
    assert np.array_equal(added, expected)
    margins = added + bias
    np.testing.assert_allclose(probabilities, np.exp(margins - logsumexp(margins, axis=1, keepdims=True)),
                               rtol=1e-12)


@pytest.mark.parametrize("tree", ["vector", "per_class"])
def test_predictions_kept_between_fits_equal_a_full_walk(tree, monkeypatch):
    """decision_function keeps the scores of the rows it predicted last: after a continued fit it
    walks only the added trees, after a fit from 0 or a change of the trees all of them, and
    each equals a walk of all trees from 0, bit for bit."""
    features, bias, labels = make_problem(2000, 3, seed=11)
    test = np.random.default_rng(3).uniform(size=(500, 2))
    model = BoostedTrees(n_rounds=40, subsample=500, tree=tree, random_state=0).fit(features, bias, labels)
    model.decision_function(test)
    walked = []
    original = predictor.predict_ensemble
    monkeypatch.setattr(predictor, "predict_ensemble",
                        lambda X, offsets, *args: walked.append(offsets.shape[0] - 1) or original(X, offsets, *args))
    for seed in (1, 2):   # continued fits (the first from 0 rises, the second skips it)
        n_old = model.n_trees_
        model.set_params(n_rounds=2).fit(features, shifted(bias, seed), labels)
        assert model.continued_
        walked.clear()
        predicted = model.decision_function(test)
        assert walked == [model.n_trees_ - n_old]
        np.testing.assert_array_equal(predicted, prefix_scores(model, test, model.n_trees_))
    n_before = model.n_trees_
    model.set_params(tree="per_class" if tree == "vector" else "vector").fit(features, bias, labels)
    assert not model.continued_ and model.n_trees_ != n_before   # a new ensemble of the other protocol
    walked.clear()
    predicted = model.decision_function(test)
    assert walked == [model.n_trees_]
    np.testing.assert_array_equal(predicted, prefix_scores(model, test, model.n_trees_))
    model.node_value_ *= 2.0   # trees changed in place: the kept scores are not theirs
    walked.clear()
    predicted = model.decision_function(test)
    assert walked == [model.n_trees_]
    np.testing.assert_array_equal(predicted, prefix_scores(model, test, model.n_trees_))
    restored = pickle.loads(pickle.dumps(model))   # nothing kept
    assert "_prediction_cache_" not in restored.__dict__
    restored.decision_function(test)
    restored.set_params(tree=tree, n_rounds=3).fit(features, bias, labels)
    np.testing.assert_array_equal(restored.decision_function(test), prefix_scores(restored, test, restored.n_trees_))


def test_first_fit_never_ends_above_the_zero_function():
    """Without the Newton re-fit, a step of 50 overshoots: the fit from 0 continues from 0 with its
    rounds halved, and ends below the loss of f = 0."""
    features, bias, labels = make_problem(1000, 4, seed=13)
    zero = biased_logistic_loss(np.zeros_like(bias), bias, labels)[0]
    model = BoostedTrees(n_rounds=5, learning_rate=50.0, newton_steps=0, random_state=0)
    model.fit(features, bias, labels)
    assert model.continued_ and model.n_halvings_ > 0
    assert model.loss(features, bias, labels) < zero
    # the first block rose: its rounds were taken again one by one, none of them raising the loss
    losses = [biased_logistic_loss(prefix_scores(model, features, t), bias, labels)[0]
              for t in range(0, model.n_trees_ + 1)]
    assert len(losses) > 2 and np.all(np.diff(losses) <= 0)


def test_lightgbm_refit_that_would_rise_boosts_on_from_the_replaced_function():
    """As BoostedTrees: the new booster is added to the replaced function's, and the loss falls;
    the training rows' scores are taken from training_scores_ or, after pickling, predicted."""
    features, bias, labels = make_problem(2000, 3, seed=11)
    model = LightGBM(n_rounds=40, random_state=0).fit(features, bias, labels)
    replaced = pickle.loads(pickle.dumps(model))
    new_bias = shifted(bias, 1)
    reference = biased_logistic_loss(replaced.decision_function(features), new_bias, labels)[0]
    fresh = LightGBM(n_rounds=2, random_state=0).fit(features, new_bias, labels)
    assert fresh.loss(features, new_bias, labels) > reference
    assert not fresh.continued_ and fresh.base_boosters_ == ()

    model.set_params(n_rounds=2).fit(features, new_bias, labels)
    assert model.continued_ and len(model.base_boosters_) == 1
    assert model.loss(features, new_bias, labels) < reference
    added = model.booster_.predict(features, raw_score=True, num_threads=1)
    np.testing.assert_allclose(model.decision_function(features), replaced.decision_function(features) + added,
                               rtol=0, atol=1e-12)
    # the scores the rounds accumulated, added up in another order than LightGBM's prediction
    np.testing.assert_allclose(model.training_scores_, model.decision_function(features), rtol=0, atol=1e-12)

    replaced.set_params(n_rounds=2).fit(features, new_bias, labels)   # no training_scores_ after pickling
    np.testing.assert_array_equal(replaced.decision_function(features), model.decision_function(features))
    test = np.random.default_rng(1).uniform(size=(100, 2))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(model)).decision_function(test),
                                  model.decision_function(test))


def test_lightgbm_continued_fits_keep_the_scores_of_the_whole_ensemble_and_never_raise_the_loss():
    """A chain of continued fits (the ensemble grows by a booster each time) carries the training
    scores forward round by round: they equal the final ensemble predicted from scratch by
    LightGBM (each booster reloaded from its text), and no fit ends above the function it replaced
    under the new bias; with soft targets and row weights as well."""
    features, bias, hard = make_problem(3000, 3, seed=13)
    rng = np.random.default_rng(14)
    soft = 0.7 * np.eye(3)[hard] + 0.3 * rng.dirichlet(np.ones(3), size=hard.size)
    weights = rng.uniform(0.0, 2.0, hard.size)
    for labels, sample_weight in ((hard, None), (soft, weights)):
        model = LightGBM(n_rounds=30, random_state=0).fit(features, bias, labels, sample_weight=sample_weight)
        model.set_params(n_rounds=2)
        new_bias = bias
        for step in range(4):
            new_bias = shifted(new_bias, 20 + step)
            replaced = model.decision_function(features)
            reference = biased_logistic_loss(replaced, new_bias, labels, sample_weight)[0]
            model.fit(features, new_bias, labels, sample_weight=sample_weight)
            assert model.continued_ and len(model.base_boosters_) == step + 1
            assert model.loss(features, new_bias, labels, sample_weight=sample_weight) <= reference
        scratch = sum(lightgbm.Booster(model_str=booster.model_to_string()).predict(features, raw_score=True)
                      for booster in model._boosters())
        np.testing.assert_allclose(model.training_scores_, scratch, rtol=0, atol=1e-10)
        np.testing.assert_allclose(model.decision_function(features), scratch, rtol=0, atol=1e-10)


def test_lightgbm_refit_that_does_not_rise_is_the_fit_from_zero():
    features, bias, labels = make_problem(2000, 3, seed=12)
    model = LightGBM(n_rounds=1, random_state=0).fit(features, bias, labels)
    new_bias = shifted(bias, 2)
    model.set_params(n_rounds=20).fit(features, new_bias, labels)
    fresh = LightGBM(n_rounds=20, random_state=0).fit(features, new_bias, labels)
    assert not model.continued_ and model.base_boosters_ == ()
    np.testing.assert_array_equal(model.decision_function(features), fresh.decision_function(features))


def test_lightgbm_constant_that_would_rise_is_refitted_from_the_replaced_constant():
    """No split possible: a per-class constant. One round from 0 moves a quarter of the way to the
    new optimum, above the replaced constant's loss; the constant boosts on from the replaced one."""
    rng = np.random.default_rng(14)
    features, labels = np.ones((500, 2)), rng.integers(0, 3, 500)
    bias = rng.normal(size=(500, 3))
    model = LightGBM(n_rounds=60, random_state=0).fit(features, bias, labels)
    assert model.booster_ is None
    new_bias = shifted(bias, 3)
    reference = biased_logistic_loss(model.decision_function(features), new_bias, labels)[0]
    fresh = LightGBM(n_rounds=1, random_state=0).fit(features, new_bias, labels)
    assert fresh.loss(features, new_bias, labels) > reference
    model.set_params(n_rounds=1).fit(features, new_bias, labels)
    assert model.continued_ and model.booster_ is None
    assert model.loss(features, new_bias, labels) < reference
    np.testing.assert_array_equal(model.decision_function(features[:3]), np.tile(model.constant_, (3, 1)))


# ------------------------------------------------------------------ tree="auto"
def test_auto_resolves_by_the_number_of_classes():
    below, at = AUTO_PER_CLASS_MIN_CLASSES - 1, AUTO_PER_CLASS_MIN_CLASSES
    assert resolve_tree("auto", below) == ("vector", TREE_DEFAULTS["vector"])
    assert resolve_tree("auto", at) == ("per_class", TREE_DEFAULTS["auto"])
    for tree in ("vector", "per_class"):   # an explicit protocol keeps its own defaults whatever K
        assert resolve_tree(tree, below) == resolve_tree(tree, at) == (tree, TREE_DEFAULTS[tree])


@pytest.mark.parametrize("n_classes", [3, AUTO_PER_CLASS_MIN_CLASSES - 1])
def test_default_below_the_threshold_is_the_former_vector_default(n_classes):
    """Below the threshold the defaults fit what tree="vector", newton_steps=8 (the defaults before
    "auto") fit, bit for bit."""
    features, bias, labels = make_problem(600, n_classes, d=3, seed=15)
    auto = BoostedTrees(n_rounds=3, subsample=300, random_state=0).fit(features, bias, labels)
    former = BoostedTrees(n_rounds=3, subsample=300, tree="vector", newton_steps=8, max_leaf_nodes=None,
                          random_state=0).fit(features, bias, labels)
    assert auto.tree_ == "vector"
    for name in NODE_ARRAYS:
        np.testing.assert_array_equal(getattr(auto, name), getattr(former, name))


def test_default_from_the_threshold_grows_lightgbm_shaped_per_class_trees():
    k = AUTO_PER_CLASS_MIN_CLASSES
    features, bias, labels = make_problem(3000, k, d=3, seed=16)
    auto = BoostedTrees(n_rounds=2, random_state=0).fit(features, bias, labels)
    spelled = BoostedTrees(n_rounds=2, tree="per_class", min_leaf_fraction=0.01, min_split_fraction=0.02,
                           max_leaf_nodes=31, newton_steps=1, random_state=0).fit(features, bias, labels)
    assert auto.tree_ == "per_class" and auto.n_trees_ == 2 * k
    assert auto.n_leaves_.max() <= 31 and auto.n_leaves_.max() > 20   # 1% leaves of 3,000 rows, capped
    for name in NODE_ARRAYS:
        np.testing.assert_array_equal(getattr(auto, name), getattr(spelled, name))
    # a parameter given explicitly overrides what "auto" would take
    three = BoostedTrees(n_rounds=2, newton_steps=3, max_leaf_nodes=4, random_state=0).fit(features, bias, labels)
    assert three.n_leaves_.max() == 4
    assert three.loss(features, bias, labels) != auto.loss(features, bias, labels)


# ------------------------------------------------------------------ LightGBM
def test_lightgbm_adapter_without_hessian_floor_is_lightgbms_multiclass(monkeypatch):
    """Without the Hessian floor (and with no halving needed) the adapter's rounds are LightGBM's
    own multiclass boosting with the bias as init score: its multi_logloss is our biased loss."""
    import slr.oracles.lightgbm_adapter as adapter
    monkeypatch.setattr(adapter, "HESSIAN_FLOOR", 0.0)
    features, bias, labels = make_problem(2000, 3, seed=10)
    oracle = LightGBM(n_rounds=5, subsample=1.0, random_state=0).fit(features, bias, labels)
    assert oracle.n_halvings_ == 0
    params = oracle.lightgbm_params(2000, 3) | {"objective": "multiclass", "metric": "multi_logloss"}
    data = lightgbm.Dataset(features, label=labels, init_score=bias, params={"verbosity": -1})
    record: dict = {}
    reference = lightgbm.train(params, data, 5, valid_sets=[data],
                               callbacks=[lightgbm.record_evaluation(record)])
    assert record["training"]["multi_logloss"][-1] == pytest.approx(
        oracle.loss(features, bias, labels) / 2000, rel=1e-6
    )
    np.testing.assert_allclose(oracle.decision_function(features),
                               reference.predict(features, raw_score=True), rtol=1e-5, atol=1e-6)


def test_binary_problem_grows_one_tree_per_class():
    features, bias, labels = make_problem(2000, 2, seed=11)
    oracle = LightGBM(n_rounds=10, random_state=0).fit(features, bias, labels)
    assert oracle.booster_.num_trees() == 2 * oracle.booster_.current_iteration() == 20
    assert oracle.decision_function(features).shape == (2000, 2)


def test_boosted_trees_and_lightgbm_reach_comparable_loss():
    features, bias, labels = make_problem(20000, 3, seed=12)
    start = biased_logistic_loss(np.zeros_like(bias), bias, labels)[0]
    ours = BoostedTrees(n_rounds=60, subsample=5000, max_leaf_nodes=31, random_state=0)
    ref = LightGBM(n_rounds=60, subsample=5000, max_leaf_nodes=31, random_state=0)
    loss_ours = ours.fit(features, bias, labels).loss(features, bias, labels)
    loss_ref = ref.fit(features, bias, labels).loss(features, bias, labels)
    assert loss_ours < 0.9 * start and loss_ref < 0.9 * start
    assert abs(loss_ours - loss_ref) < 0.02 * loss_ref


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("make_oracle", [lambda: BoostedTrees(n_rounds=2),
                                         lambda: LightGBM(n_rounds=2)])
def test_bad_input_raises_value_error(make_oracle):
    features, bias, labels = make_problem(100, 3)
    nan_features = features.copy()
    nan_features[3, 1] = np.nan
    with pytest.raises(ValueError, match="features"):
        make_oracle().fit(nan_features, bias, labels)
    with pytest.raises(ValueError, match="bias"):
        make_oracle().fit(features, bias[:, :, None], labels)
    with pytest.raises(ValueError, match="rows"):
        make_oracle().fit(features, bias[:50], labels)
    with pytest.raises(ValueError, match="at least 2 rows"):
        make_oracle().fit(features[:1], bias[:1], labels[:1])
    with pytest.raises(ValueError, match="subsample"):
        make_oracle().set_params(subsample=1).fit(features, bias, labels)
    with pytest.raises(ValueError, match="labels"):
        make_oracle().fit(features, bias, labels + 3)
    fitted = make_oracle().fit(features, bias, labels)
    with pytest.raises(ValueError, match="features"):
        fitted.decision_function(features[:, :1])


@pytest.mark.parametrize("param, value", [("n_rounds", -1), ("learning_rate", 0.0),
                                          ("learning_rate", np.nan), ("min_leaf_fraction", 0.7),
                                          ("max_leaf_nodes", 0), ("l2_regularization", -1.0),
                                          ("n_jobs", 0), ("n_jobs", -2), ("n_jobs", 1.0),
                                          ("random_state", "seed"), ("subsample", 1.5)])
def test_bad_parameters_raise_value_error(param, value):
    features, bias, labels = make_problem(100, 3)
    with pytest.raises(ValueError, match=param):
        BoostedTrees(**({"n_rounds": 2} | {param: value})).fit(features, bias, labels)


# ------------------------------------------------------------------ per-class trees (NIPS)
def class_tree(model, t):
    """Tree ``t`` of a fitted model as local node arrays (feature, threshold, left, right, value)."""
    lo, hi = model.tree_offsets_[t], model.tree_offsets_[t + 1]
    local = [np.where(a[lo:hi] >= 0, a[lo:hi] - lo, -1).astype(np.intp)
             for a in (model.node_left_, model.node_right_)]
    return (model.node_feature_[lo:hi], model.node_threshold_[lo:hi], *local,
            model.node_value_[lo:hi])


def leaf_ids(x, tree):
    """The node each row of ``x`` reaches (add_tree with the node id as the value)."""
    feature, threshold, left, right, _ = tree
    ids = np.zeros((x.shape[0], 1))
    predictor.add_tree(x, Tree(feature, threshold, left, right,
                               np.arange(feature.shape[0], dtype=np.float64)[:, None]), ids)
    return ids[:, 0].astype(np.intp)


def first_round_gradient(bias, labels):
    return -biased_logistic_loss(np.zeros_like(bias), bias, labels)[1]


@pytest.mark.parametrize("seed", range(3))
def test_per_class_root_split_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n, k = 300, 3
    features = np.round(rng.normal(size=(n, 3)), 1)  # ties on purpose
    labels = rng.integers(0, k, n)
    features[:, 1] += labels
    bias = rng.normal(size=(n, k))
    model = BoostedTrees(tree="per_class", n_rounds=1, subsample=1.0, random_state=0)
    model.fit(features, bias, labels)
    assert model.n_trees_ == k and list(model.tree_class_) == [0, 1, 2]
    grad = first_round_gradient(bias, labels)
    for c in range(k):
        feature, threshold, *_ = class_tree(model, c)
        bf_feature, _, bf_gain = brute_force_split(features, grad[:, c:c + 1], 15)  # 5% of 300
        assert bf_feature >= 0 and feature[0] >= 0
        left = features[:, feature[0]] <= threshold[0]
        assert min(left.sum(), (~left).sum()) >= 15
        g = grad[:, c]
        realised = (((g - g.mean()) ** 2).sum() - ((g[left] - g[left].mean()) ** 2).sum()
                    - ((g[~left] - g[~left].mean()) ** 2).sum())
        assert realised == pytest.approx(bf_gain, rel=1e-9)


def test_per_class_trees_equal_sklearn_and_leaves_minimise_class_loss():
    """Each class's tree partitions the rows as scikit-learn's tree on that gradient column
    (5% leaves, 10% splits); each leaf value is the 1-D minimiser of the biased loss."""
    from scipy.optimize import minimize_scalar

    rng = np.random.default_rng(4)
    n, k = 2000, 3
    features = rng.integers(0, 256, size=(n, 3)) / 8.0  # exact in float32, as sklearn uses
    signal = rng.integers(0, k, n)
    features[:, 0] += 4 * signal
    # half the labels random, so that no leaf is pure (a pure leaf's loss has no minimiser)
    labels = np.where(rng.random(n) < 0.5, signal, rng.integers(0, k, n))
    bias = rng.normal(size=(n, k))
    step = 0.5
    model = BoostedTrees(tree="per_class", splitter="exact", n_rounds=1, subsample=1.0,
                         learning_rate=step, l2_regularization=0.0, newton_steps=30,
                         random_state=0).fit(features, bias, labels)
    grad = first_round_gradient(bias, labels)
    for c in range(k):
        tree = class_tree(model, c)
        ours = leaf_ids(features, tree)
        sk = DecisionTreeRegressor(min_samples_leaf=100, min_samples_split=200,
                                   random_state=0).fit(features, grad[:, c])
        theirs = sk.apply(features)
        pairs = np.unique(np.column_stack([ours, theirs]), axis=0)
        assert len(pairs) == len(np.unique(ours)) == len(np.unique(theirs)) == sk.get_n_leaves()
        for leaf in np.unique(ours):
            rows = ours == leaf
            z, y = bias[rows], labels[rows]

            def leaf_loss(v):
                shifted = z.copy()
                shifted[:, c] += v
                return float(np.sum(logsumexp(shifted, axis=1) - shifted[np.arange(len(y)), y]))

            best = minimize_scalar(leaf_loss, bracket=(-1.0, 1.0), tol=1e-12)
            # Newton stops once its decrement is below 1e-9 per row
            fitted = tree[4][leaf, 0] / (step * (k - 1) / k)  # Friedman's (K - 1) / K
            assert leaf_loss(fitted) == pytest.approx(best.fun, rel=1e-9)
            assert fitted == pytest.approx(best.x, abs=1e-4)


def test_per_class_training_loss_decreases_every_round():
    # each class's re-fitted tree lowers the loss alone; with step * (K - 1) <= 1 their
    # sum, scaled by step * (K - 1) / K, does too (convexity), so on a fixed subset the loss
    # falls every round
    features, bias, labels = make_problem(1500, 3, d=3, seed=1)
    model = BoostedTrees(tree="per_class", n_rounds=25, subsample=1.0, random_state=0)
    history = model.fit(features, bias, labels).subset_loss_
    assert history.shape == (25,) and model.n_trees_ == 75
    assert history[0] == pytest.approx(
        biased_logistic_loss(np.zeros_like(bias), bias, labels)[0] / 1500)
    assert np.all(np.diff(history) < 0)
    assert model.loss(features, bias, labels) / 1500 < history[-1]
    # leaves hold at least 5% of the rows: at most 20 per tree
    assert np.all(model.n_leaves_ <= 20) and np.all(model.n_leaves_ >= 2)


def test_per_class_params_pickle_warm_start_and_prediction():
    features, bias, labels = make_problem(3000, 4, d=3, seed=6)
    model = BoostedTrees(tree="per_class", n_rounds=5, subsample=1000, random_state=3)
    assert model.get_params()["tree"] == "per_class"
    model.fit(features, bias, labels)
    assert model.node_value_.shape[1] == 1 and model.tree_class_.shape == (20,)
    assert model.round_seconds_.shape == (5,) and np.all(np.diff(model.round_seconds_) >= 0)
    test = np.random.default_rng(0).uniform(size=(300, 3))
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(clone.decision_function(test), model.decision_function(test))
    # the training scores accumulated while boosting equal a walk of the trees
    np.testing.assert_array_equal(model.training_scores_,
                                  model.decision_function(features[::-1])[::-1])
    # same protocol: warm start continues; switching protocol starts over
    model.set_params(warm_start=True)
    model.fit(features, bias, labels)
    assert model.n_trees_ == 40
    model.set_params(tree="vector").fit(features, bias, labels)
    assert model.n_trees_ == 5 and np.all(model.tree_class_ == -1)


@pytest.mark.parametrize("value", ["nips", None, 1, "Vector"])
def test_bad_tree_protocol_raises_value_error(value):
    features, bias, labels = make_problem(100, 3)
    with pytest.raises(ValueError, match="tree"):
        BoostedTrees(n_rounds=2, tree=value).fit(features, bias, labels)
