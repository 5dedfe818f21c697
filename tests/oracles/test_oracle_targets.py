"""Row weights and soft targets in every logistic oracle.

The independent references: a row of integer weight ``w`` is ``w`` copies of the row; a row of
soft targets ``q`` is its ``K`` one-hot rows weighted by ``q`` (both evaluated on the unweighted
integer-label path, which these features leave unchanged); where an oracle is not convex (MLP,
LightGBM's trees) its first step is recomputed with numpy.
"""
from __future__ import annotations

import copy

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax

from slr.oracles import MLP, BoostedTrees, Constant, LightGBM, Linear, Zero
from slr.oracles._boosting.splitting import find_best_split
from slr.oracles.base import biased_logistic_loss, softmax_loss
from slr.oracles.linear import _ClassMajorLoss
from slr.oracles.pair_bias import PairBias, PairLoss


def make_problem(n=120, d=2, k=3, seed=0):
    """Features, bias, int labels, soft targets (some zero entries) and int weights (some 0)."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(n, d))
    labels = (np.arange(n) + (features[:, 0] > 0 if d else 0)) % k
    bias = 0.5 * rng.normal(size=(n, k))
    targets = rng.dirichlet(np.ones(k), size=n)
    targets[::4, 0] = 0.0
    targets /= targets.sum(axis=1, keepdims=True)
    weights = rng.integers(0, 4, size=n).astype(np.float64)
    return features, bias, labels, targets, weights


def duplicated(weights, *arrays):
    """Every row ``i`` repeated ``weights[i]`` times (0: dropped)."""
    rows = np.repeat(np.arange(len(weights)), weights.astype(int))
    return [a[rows] for a in arrays]


def expanded(targets, weights, *arrays):
    """Every row repeated once per class: labels 0..K-1, weights ``w * q``."""
    n, k = targets.shape
    rows = np.repeat(np.arange(n), k)
    return [a[rows] for a in arrays] + [np.tile(np.arange(k), n), (weights[:, None] * targets).ravel()]


# --------------------------------------------------------------------------- the loss itself
def test_weighted_soft_loss_is_the_loss_of_the_expanded_and_duplicated_rows():
    features, bias, labels, targets, weights = make_problem()
    scores = np.random.default_rng(1).normal(size=bias.shape)
    loss, grad = biased_logistic_loss(scores, bias, targets, weights)
    # the expansion with fractional weights, then duplicated integer weights: both by hand
    s_e, b_e, y_e, w_e = expanded(targets, weights, scores, bias)
    z = s_e + b_e
    expected = np.sum(w_e * (logsumexp(z, axis=1) - z[np.arange(len(y_e)), y_e]))
    assert loss == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(grad, weights[:, None] * (softmax(scores + bias, axis=1) - targets), atol=1e-14)
    s_d, b_d, y_d = duplicated(weights, scores, bias, labels)
    int_loss, int_grad = biased_logistic_loss(scores, bias, labels, weights)
    assert int_loss == pytest.approx(biased_logistic_loss(s_d, b_d, y_d)[0], rel=1e-12)
    assert np.allclose(int_grad[weights == 0], 0.0)


@pytest.mark.parametrize("scale", [1.0, 1e4])
def test_softmax_loss_is_biased_logistic_loss_and_scipys_softmax_to_the_bit(scale):
    """The line search's loss (one exponential per entry) is biased_logistic_loss's number exactly,
    with scipy's softmax and logsumexp, also where potentials reach 1e4 (eps = 1e-3) and rows tie."""
    _, bias, labels, targets, weights = make_problem()
    scores = scale * np.random.default_rng(2).normal(size=bias.shape)
    scores[:5] = -bias[:5]   # every entry of these rows is the largest
    z = scores + bias
    for q, rows in ((labels, None), (targets, weights)):
        loss, prob, lse = softmax_loss(z, q, rows)
        assert loss == biased_logistic_loss(scores, bias, q, rows)[0]
        np.testing.assert_array_equal(prob, softmax(z, axis=1))
        np.testing.assert_array_equal(lse, logsumexp(z, axis=1))


# --------------------------------------------------------------------------- Linear, Constant
def tight_linear(**kwargs):
    return Linear(l2=0.1, tol=1e-11, max_iter=5000, **kwargs)


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_linear_integer_weights_equal_duplicated_rows(fit_intercept):
    features, bias, labels, _, weights = make_problem()
    weighted = tight_linear(fit_intercept=fit_intercept).fit(features, bias, labels, weights)
    copies = tight_linear(fit_intercept=fit_intercept).fit(*duplicated(weights, features, bias, labels))
    np.testing.assert_allclose(weighted.coef_, copies.coef_, atol=1e-6)
    np.testing.assert_allclose(weighted.intercept_, copies.intercept_, atol=1e-6)


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_linear_soft_targets_equal_the_weighted_one_hot_expansion(fit_intercept):
    features, bias, _, targets, weights = make_problem()
    soft = tight_linear(fit_intercept=fit_intercept).fit(features, bias, targets, weights)
    f_e, b_e, y_e, w_e = expanded(targets, weights, features, bias)
    onehot = tight_linear(fit_intercept=fit_intercept).fit(f_e, b_e, y_e, w_e)
    np.testing.assert_allclose(soft.coef_, onehot.coef_, atol=1e-6)
    np.testing.assert_allclose(soft.intercept_, onehot.intercept_, atol=1e-6)
    assert soft.loss(features, bias, targets, weights) == pytest.approx(onehot.loss(f_e, b_e, y_e, w_e), rel=1e-10)


def test_linear_one_hot_targets_reproduce_labels():
    features, bias, labels, _, _ = make_problem()
    hard = Linear(l2=0.1).fit(features, bias, labels)
    soft = Linear(l2=0.1).fit(features, bias, np.eye(3)[labels])
    np.testing.assert_allclose(soft.coef_, hard.coef_, atol=1e-12)


def pair_problem(n=80, L=3, seed=2):
    rng = np.random.default_rng(seed)
    bias = PairBias(rng.normal(size=(n, L)), rng.normal(size=(n, L)))
    targets = rng.dirichlet(np.ones(L * L), size=n)
    weights = rng.integers(0, 4, size=n).astype(np.float64)
    return bias, targets, weights


@pytest.mark.parametrize("soft", [False, True])
def test_factored_pair_loss_with_weights_and_targets_equals_the_dense_loss(soft):
    bias, targets, weights = pair_problem()
    n, k = bias.shape
    labels = targets if soft else targets.argmax(axis=1)
    row = np.array([1.0, 0.5])
    coef = np.random.default_rng(3).normal(size=(k, 2))
    factored = PairLoss(row, bias, labels, weights)
    dense = _ClassMajorLoss(np.tile(row, (n, 1)), np.asarray(bias), labels, False, weights)
    (f_loss, f_grad), (d_loss, d_grad) = factored(coef), dense(coef)
    assert f_loss == pytest.approx(d_loss, rel=1e-12)
    np.testing.assert_allclose(f_grad, d_grad, atol=1e-10)
    np.testing.assert_allclose(factored.hessian_blocks(coef), dense.hessian_blocks(coef), atol=1e-10)
    # and both are the row-major reference
    scores = np.tile(coef @ row, (n, 1))
    assert d_loss == pytest.approx(biased_logistic_loss(scores, np.asarray(bias), labels, weights)[0], rel=1e-12)
    assert factored.n == dense.n == weights.sum()


@pytest.mark.parametrize("oracle", [Linear(tol=1e-10), Constant(l2=0.5, tol=1e-10)], ids=["Linear", "Constant"])
def test_pairwise_soft_targets_through_the_factored_bias_equal_the_dense_fit(oracle):
    bias, targets, weights = pair_problem()
    n = bias.shape[0]
    edges = np.ones((n, 1))
    factored = oracle.__class__(**oracle.get_params()).fit(edges, bias, targets, weights)
    dense = oracle.__class__(**oracle.get_params()).fit(edges, np.asarray(bias), targets, weights)
    f_e, b_e, y_e, w_e = expanded(targets, weights, edges, np.asarray(bias))
    onehot = oracle.__class__(**oracle.get_params()).fit(f_e, b_e, y_e, w_e)
    got, want, reference = (np.asarray(m.decision_function(edges[:1])) for m in (factored, dense, onehot))
    np.testing.assert_allclose(got, want, atol=1e-6)
    np.testing.assert_allclose(got, reference, atol=1e-6)


def test_constant_closed_form_takes_weighted_soft_counts():
    _, bias, labels, targets, weights = make_problem(d=0)
    bias = np.tile(bias[0], (len(labels), 1))           # equal rows: the closed form applies
    features = np.empty((len(labels), 0))
    soft = Constant().fit(features, bias, targets, weights)
    assert soft.n_iter_ == 0
    counts = weights @ targets                           # the weighted soft class counts
    table = np.log(counts) - bias[0]
    np.testing.assert_allclose(soft.table_, table - table.mean(), atol=1e-12)
    np.testing.assert_allclose(softmax(soft.table_ + bias[0]), counts / counts.sum(), atol=1e-12)
    f_d, b_d, y_d = duplicated(weights, features, bias, labels)
    np.testing.assert_allclose(Constant().fit(features, bias, labels, weights).table_,
                               Constant().fit(f_d, b_d, y_d).table_, atol=1e-12)


def test_constant_by_lbfgs_with_weights_and_soft_targets():
    features, bias, labels, targets, weights = make_problem()
    weighted = Constant(l2=0.3, tol=1e-11).fit(features, bias, labels, weights)
    copies = Constant(l2=0.3, tol=1e-11).fit(*duplicated(weights, features, bias, labels))
    np.testing.assert_allclose(weighted.table_, copies.table_, atol=1e-6)
    soft = Constant(l2=0.3, tol=1e-11).fit(features, bias, targets, weights)
    f_e, b_e, y_e, w_e = expanded(targets, weights, features, bias)
    np.testing.assert_allclose(soft.table_, Constant(l2=0.3, tol=1e-11).fit(f_e, b_e, y_e, w_e).table_, atol=1e-6)


def test_zero_takes_weights_and_targets_and_its_loss_weighs_them():
    features, bias, _, targets, weights = make_problem()
    zero = Zero().fit(features, bias, targets, weights)
    assert zero.loss(features, bias, targets, weights) == pytest.approx(
        biased_logistic_loss(np.zeros_like(bias), bias, targets, weights)[0], rel=1e-14)


# --------------------------------------------------------------------------- MLP
def mlp_step_gradient(model, features, bias, targets, weights):
    """d(weighted mean loss)/d(params) at the model's parameters, in float64 with numpy."""
    v, c, w, e = (np.asarray(a, dtype=np.float64) for a in model._split(model.params_))
    x = (features - model.input_mean_) / model.input_scale_
    hidden = np.tanh(x @ v.T + c)
    delta = weights[:, None] * (softmax(hidden @ w.T + e + bias, axis=1) - targets) / weights.sum()
    back = (delta @ w) * (1.0 - hidden**2)
    return np.concatenate([(back.T @ x).ravel(), back.sum(axis=0), (delta.T @ hidden).ravel(), delta.sum(axis=0)])


def test_mlp_one_full_batch_step_is_the_weighted_soft_gradient():
    features, bias, _, targets, weights = make_problem()
    settings = dict(n_hidden=5, batch_size=len(weights), momentum=0.0, learning_rate=0.5,
                    standardize=False, random_state=0)
    start = MLP(n_epochs=1, **settings).fit(features, bias, targets, weights)
    stepped = copy.deepcopy(start).fit(features, bias, targets, weights)   # one step from start
    step = (start.params_.astype(np.float64) - stepped.params_) / 0.5
    np.testing.assert_allclose(step, mlp_step_gradient(start, features, bias, targets, weights), atol=2e-6)


def test_mlp_weights_equal_duplicated_rows_for_a_full_batch():
    features, bias, labels, _, weights = make_problem()
    settings = dict(n_hidden=5, batch_size=10**6, n_epochs=3, momentum=0.5, random_state=0)
    weighted = MLP(**settings).fit(features, bias, labels, weights)
    copies = MLP(**settings).fit(*duplicated(weights, features, bias, labels))
    # the weighted standardisation is that of the copies; the steps agree to float32 rounding
    np.testing.assert_allclose(weighted.input_mean_, copies.input_mean_, atol=1e-12)
    np.testing.assert_allclose(weighted.input_scale_, copies.input_scale_, atol=1e-12)
    np.testing.assert_allclose(weighted.params_, copies.params_, atol=1e-5)


def test_mlp_one_hot_targets_reproduce_labels():
    features, bias, labels, _, _ = make_problem()
    hard = MLP(n_hidden=5, random_state=0).fit(features, bias, labels)
    soft = MLP(n_hidden=5, random_state=0).fit(features, bias, np.eye(3)[labels])
    np.testing.assert_allclose(soft.params_, hard.params_, atol=1e-6)


# --------------------------------------------------------------------------- BoostedTrees
TREE_VARIANTS = [dict(splitter="exact"), dict(splitter="hist"),
                 dict(splitter="exact", tree="per_class"), dict(splitter="hist", tree="per_class")]


def trees(**kwargs):
    return BoostedTrees(n_rounds=3, subsample=1.0, random_state=0, **kwargs)


@pytest.mark.parametrize("variant", TREE_VARIANTS, ids=lambda v: "-".join(v.values()))
def test_trees_integer_weights_equal_duplicated_rows(variant):
    features, bias, labels, _, weights = make_problem(n=150)
    weighted = trees(**variant).fit(features, bias, labels, weights)
    copies = trees(**variant).fit(*duplicated(weights, features, bias, labels))
    kept = weights > 0   # thresholds may differ next to rows of weight 0, which no copy has
    np.testing.assert_allclose(weighted.decision_function(features[kept]),
                               copies.decision_function(features[kept]), atol=1e-9)
    np.testing.assert_allclose(weighted.subset_loss_, copies.subset_loss_, rtol=1e-12)
    np.testing.assert_array_equal(weighted.training_scores_, weighted.decision_function(features))


@pytest.mark.parametrize("variant", TREE_VARIANTS, ids=lambda v: "-".join(v.values()))
def test_trees_soft_targets_equal_the_weighted_one_hot_expansion(variant):
    features, bias, _, targets, weights = make_problem(n=150)
    soft = trees(**variant).fit(features, bias, targets, weights)
    f_e, b_e, y_e, w_e = expanded(targets, weights, features, bias)
    onehot = trees(**variant).fit(f_e, b_e, y_e, w_e)
    kept = weights > 0
    np.testing.assert_allclose(soft.decision_function(features[kept]),
                               onehot.decision_function(features[kept]), atol=1e-9)
    assert soft.loss(features, bias, targets, weights) == pytest.approx(
        onehot.loss(f_e, b_e, y_e, w_e), rel=1e-10)


@pytest.mark.parametrize("variant", TREE_VARIANTS, ids=lambda v: "-".join(v.values()))
def test_trees_one_hot_targets_reproduce_labels(variant):
    features, bias, labels, _, _ = make_problem(n=150)
    hard = trees(**variant).fit(features, bias, labels)
    soft = trees(**variant).fit(features, bias, np.eye(3)[labels])
    np.testing.assert_allclose(soft.decision_function(features), hard.decision_function(features), atol=1e-12)


def test_weighted_split_search_is_the_brute_force_weighted_least_squares_split():
    features, bias, _, targets, weights = make_problem(n=60)
    residual = targets - softmax(bias, axis=1)
    min_leaf = 5.5
    feature, threshold, gain = find_best_split(features, weights[:, None] * residual, min_leaf, weights)

    def sse(mask):   # weighted squared distance to the weighted mean
        w = weights[mask]
        mean = w @ residual[mask] / w.sum()
        return float(w @ np.sum((residual[mask] - mean) ** 2, axis=1))

    best = (-1, None, 0.0)
    for f in range(features.shape[1]):
        values = np.unique(features[:, f])
        for low, high in zip(values[:-1], values[1:]):
            left = features[:, f] <= low
            if min(weights[left].sum(), weights[~left].sum()) < min_leaf:
                continue
            candidate = sse(np.ones(len(weights), bool)) - sse(left) - sse(~left)
            if candidate > best[2] + 1e-12:
                best = (f, (low + high) / 2, candidate)
    assert feature == best[0]
    assert threshold == pytest.approx(best[1])
    assert gain == pytest.approx(best[2], rel=1e-9)


@pytest.mark.parametrize("tree", ["vector", "per_class"])
def test_trees_single_leaf_is_the_weighted_soft_optimum(tree):
    features, bias, _, targets, weights = make_problem(n=80)
    model = BoostedTrees(n_rounds=1, subsample=1.0, max_leaf_nodes=1, learning_rate=1.0, tree=tree,
                         l2_regularization=0.0, newton_steps=50).fit(features, bias, targets, weights)
    scores = model.decision_function(features[:1])[0]
    if tree == "vector":   # one leaf vector: the best constant shift (up to softmax's invariance)
        def objective(v):
            return biased_logistic_loss(np.tile(v, (len(weights), 1)), bias, targets, weights)[0]
        expected = minimize(objective, np.zeros(3), method="BFGS", options={"gtol": 1e-10}).x
        np.testing.assert_allclose(scores - scores.mean(), expected - expected.mean(), atol=1e-6)
    else:                  # class c's leaf: the best shift of class c alone, scaled by (K - 1) / K
        for c in range(3):
            def objective(v):
                shift = np.zeros_like(bias)
                shift[:, c] = v[0]
                return biased_logistic_loss(shift, bias, targets, weights)[0]
            best = minimize(objective, np.zeros(1), method="BFGS", options={"gtol": 1e-10})
            # Newton stops once its decrement is below 1e-9 per unit of weight
            assert objective([scores[c] * 3 / 2]) <= best.fun + 1e-9 * weights.sum()
            assert scores[c] * 3 / 2 == pytest.approx(best.x[0], abs=1e-4)


def test_trees_minimum_leaf_counts_weight():
    """A child must weigh min_leaf_fraction of the subset's weight: a split that isolates
    many rows of tiny weight is refused, one of few rows of large weight is allowed."""
    n = 100
    features = np.arange(n, dtype=np.float64)[:, None]
    labels = (features[:, 0] >= 90).astype(int)          # rows 90-99 differ
    bias = np.zeros((n, 2))
    heavy = np.where(labels == 1, 10.0, 1.0)             # the 10 rows weigh 100 of 190
    light = np.where(labels == 1, 0.01, 1.0)             # the 10 rows weigh 0.1 of 90.1
    settings = dict(n_rounds=1, subsample=1.0, max_leaf_nodes=2, min_leaf_fraction=0.2)
    split = BoostedTrees(**settings).fit(features, bias, labels, heavy)
    assert split.node_feature_[0] == 0 and split.node_threshold_[0] == 89.5
    refused = BoostedTrees(**settings).fit(features, bias, labels, light)
    # the separating split leaves 0.1 < 0.2 * 90.1 on the right: the root splits elsewhere
    assert refused.node_threshold_[0] != 89.5


def test_trees_rounds_whose_rows_all_weigh_zero_add_nothing():
    features, bias, labels, _, _ = make_problem(n=12)
    weights = np.zeros(12)
    weights[:2] = 1.0
    model = BoostedTrees(n_rounds=10, subsample=2, random_state=0).fit(features, bias, labels, weights)
    empty = model.subset_loss_ == 0.0       # the rounds that drew two rows of weight 0
    assert empty.any() and not empty.all()
    for r in np.flatnonzero(empty):
        values = model.node_value_[model.tree_offsets_[r]:model.tree_offsets_[r + 1]]
        assert np.all(values == 0.0)
    assert model.loss(features, bias, labels, weights) < Zero().fit(features, bias, labels).loss(
        features, bias, labels, weights)


# --------------------------------------------------------------------------- LightGBM
def lightgbm_leaf_check(model, features, bias, targets, weights):
    """Each class tree's leaf values are -learning_rate * sum(w g) / sum(w h) over the leaf's
    rows, with g, h LightGBM's multiclass gradient and Hessian at the bias, g = p - q."""
    k = bias.shape[1]
    p = softmax(bias, axis=1)
    grad, hess = weights[:, None] * (p - targets), weights[:, None] * p * (1 - p) * k / (k - 1)
    leaves = model.booster_.predict(features, pred_leaf=True)
    scores = model.decision_function(features)
    for c in range(k):
        for leaf in np.unique(leaves[:, c]):
            rows = leaves[:, c] == leaf
            expected = -0.25 * grad[rows, c].sum() / hess[rows, c].sum()
            np.testing.assert_allclose(scores[rows, c], expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("soft", [False, True])
def test_lightgbm_first_round_leaves_are_the_weighted_newton_steps(soft):
    pytest.importorskip("lightgbm")
    features, bias, labels, targets, weights = make_problem(n=200)
    truth = targets if soft else np.eye(3)[labels]
    model = LightGBM(n_rounds=1, subsample=1.0, max_leaf_nodes=4, random_state=0).fit(
        features, bias, truth if soft else labels, weights)
    assert model.booster_ is not None
    lightgbm_leaf_check(model, features, bias, truth, weights)


def test_lightgbm_one_hot_targets_reproduce_labels():
    pytest.importorskip("lightgbm")
    features, bias, labels, _, weights = make_problem(n=200)
    for w in (None, weights):
        hard = LightGBM(n_rounds=3, random_state=0).fit(features, bias, labels, w)
        soft = LightGBM(n_rounds=3, random_state=0).fit(features, bias, np.eye(3)[labels], w)
        np.testing.assert_allclose(soft.decision_function(features), hard.decision_function(features), atol=1e-9)


def test_lightgbm_without_features_fits_the_weighted_soft_constant():
    pytest.importorskip("lightgbm")
    _, bias, _, targets, weights = make_problem(n=60)
    no_features = np.empty((60, 0))
    model = LightGBM(n_rounds=40, learning_rate=0.5, subsample=1.0, l2_regularization=0.0).fit(
        no_features, bias, targets, weights)
    reference = Constant(tol=1e-12).fit(no_features, bias, targets, weights)
    assert model.loss(no_features, bias, targets, weights) == pytest.approx(
        reference.loss(no_features, bias, targets, weights), rel=1e-8)


# --------------------------------------------------------------------------- bad input
ALL_ORACLES = {
    "Zero": Zero, "Constant": Constant, "Linear": Linear,
    "MLP": lambda: MLP(n_hidden=3, n_epochs=1, random_state=0),
    "BoostedTrees": lambda: BoostedTrees(n_rounds=2, random_state=0),
    "LightGBM": lambda: LightGBM(n_rounds=2, random_state=0),
}
N = 30


def bad_weights():
    good = np.ones(N)
    nan, negative = good.copy(), good.copy()
    nan[3], negative[4] = np.nan, -1.0
    return {"NaN": nan, "negative": negative, "too short": good[:-1], "2-D": good[:, None],
            "all zero": np.zeros(N), "infinite": np.full(N, np.inf), "strings": np.array(["1"] * N)}


def bad_targets():
    good = np.full((N, 3), 1 / 3)
    nan, negative, unnormalised = good.copy(), good.copy(), good.copy()
    nan[0, 0] = np.nan
    negative[1] = [1.5, -0.5, 0.0]
    unnormalised[2] = [0.5, 0.5, 0.5]
    return {"NaN": nan, "negative": negative, "not summing to 1": unnormalised,
            "too many classes": np.full((N, 4), 0.25), "too few rows": good[:-1], "3-D": good[:, :, None]}


@pytest.mark.parametrize("name", list(ALL_ORACLES))
def test_bad_weights_and_targets_raise_naming_the_argument(name):
    if name == "LightGBM":
        pytest.importorskip("lightgbm")
    features, bias, labels, _, _ = make_problem(n=N)
    for case, weights in bad_weights().items():
        with pytest.raises(ValueError, match="sample_weight"):
            ALL_ORACLES[name]().fit(features, bias, labels, weights)
    for case, targets in bad_targets().items():
        with pytest.raises(ValueError, match="labels"):
            ALL_ORACLES[name]().fit(features, bias, targets)
    fitted = ALL_ORACLES[name]().fit(features, bias, labels)
    with pytest.raises(ValueError, match="sample_weight"):
        fitted.loss(features, bias, labels, -np.ones(N))
    with pytest.raises(ValueError, match="labels"):
        fitted.loss(features, bias, bad_targets()["not summing to 1"])


def test_targets_within_the_tolerance_are_renormalised():
    features, bias, _, targets, _ = make_problem(n=N)
    nudged = targets * (1 + 5e-7)
    a = Linear(l2=1.0).fit(features, bias, targets)
    b = Linear(l2=1.0).fit(features, bias, nudged)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-12)
