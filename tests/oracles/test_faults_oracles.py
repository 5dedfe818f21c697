"""Hostile inputs to the logistic oracles: each case gives a clear
``ValueError`` naming the argument, or the right function."""
from __future__ import annotations

import numpy as np
import pytest

from slr import StructuredLogisticRegression
from slr.datasets import make_denoising
from slr.oracles import MLP, BoostedTrees, Constant, LightGBM, Linear, Zero
from slr.oracles.base import biased_logistic_loss


def make_problem(n=200, d=2, k=3, seed=0):
    """A small biased problem, every class present (unbalanced without features)."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(n, d))
    if d:
        labels = (np.arange(n) + (features[:, 0] > 0)) % k
    else:
        labels = np.minimum(np.arange(n) % (k + 2), k - 1)  # the last class 3 times as often
    bias = rng.normal(size=(n, k))
    return features, bias, labels


def no_features(n):
    return np.empty((n, 0))


ALL_ORACLES = {
    "Zero": lambda: Zero(),
    "Constant": lambda: Constant(),
    "Linear": lambda: Linear(),
    "Linear+intercept": lambda: Linear(fit_intercept=True),
    "MLP": lambda: MLP(n_hidden=4, n_epochs=2, random_state=0),
    "BoostedTrees": lambda: BoostedTrees(n_rounds=5, random_state=0),
    "LightGBM": lambda: LightGBM(n_rounds=5, random_state=0),
}


# --- zero feature columns --------------------------------------------------------------------
@pytest.mark.parametrize("name", list(ALL_ORACLES))
def test_every_oracle_fits_and_predicts_without_feature_columns(name):
    _, bias, labels = make_problem(n=60, d=0)
    oracle = ALL_ORACLES[name]().fit(no_features(60), bias, labels)
    scores = oracle.decision_function(no_features(7))
    assert scores.shape == (7, 3)
    assert np.all(np.isfinite(scores))
    # nothing to depend on: the function is one row of scores, the same for every input
    np.testing.assert_array_equal(scores, np.tile(scores[0], (7, 1)))
    np.testing.assert_array_equal(oracle.decision_function(no_features(60))[:7], scores)


def test_boosted_trees_without_features_boosts_single_leaves_to_the_best_constant():
    _, bias, labels = make_problem(n=300, d=0)
    trees = BoostedTrees(n_rounds=30, learning_rate=0.5, subsample=1.0, l2_regularization=0.0)
    trees.fit(no_features(300), bias, labels)
    assert np.all(trees.n_leaves_ == 1)
    constant = Constant(tol=1e-12).fit(no_features(300), bias, labels)
    # after 30 rounds at step 0.5, (1/2)^30 of the way is left: the optimum over constants
    # (up to a shift, which softmax ignores; Newton's stopping rule leaves ~1e-6)
    scores = trees.decision_function(no_features(1))[0]
    np.testing.assert_allclose(
        scores - scores.mean(), constant.table_ - constant.table_.mean(), atol=1e-5
    )
    assert trees.loss(no_features(300), bias, labels) == pytest.approx(
        constant.loss(no_features(300), bias, labels), rel=1e-9
    )
    zero_loss = biased_logistic_loss(np.zeros((300, 3)), bias, labels)[0]
    assert trees.loss(no_features(300), bias, labels) < zero_loss - 1.0
    # the same as a feature that admits no split
    flat = BoostedTrees(n_rounds=30, learning_rate=0.5, subsample=1.0, l2_regularization=0.0)
    flat.fit(np.ones((300, 2)), bias, labels)
    np.testing.assert_array_equal(
        flat.decision_function(np.ones((1, 2))), trees.decision_function(no_features(1))
    )


def test_boosted_trees_warm_start_and_subsample_without_features():
    _, bias, labels = make_problem(n=100, d=0)
    trees = BoostedTrees(n_rounds=3, subsample=50, warm_start=True, random_state=1)
    trees.fit(no_features(100), bias, labels).fit(no_features(100), bias, labels)
    assert trees.n_trees_ == 6
    assert trees.decision_function(no_features(2)).shape == (2, 3)


@pytest.mark.parametrize("features", [no_features(120), np.ones((120, 2))],
                         ids=["no columns", "constant columns"])
def test_lightgbm_without_possible_split_returns_the_boosted_trees_constant(features):
    _, bias, labels = make_problem(n=120, d=0)
    ours = LightGBM(n_rounds=8, learning_rate=0.5, l2_regularization=0.01, random_state=3)
    ours.fit(features, bias, labels)
    assert ours.booster_ is None
    trees = BoostedTrees(n_rounds=8, learning_rate=0.5, l2_regularization=0.01, random_state=3)
    trees.fit(no_features(120), bias, labels)
    np.testing.assert_allclose(
        ours.decision_function(features[:4]), trees.decision_function(no_features(4)),
        rtol=1e-12, atol=1e-12,
    )
    # and not LightGBM's zero function
    assert np.ptp(ours.constant_) > 0.01


def test_learner_with_zero_column_edge_features_and_tree_oracles():
    X, Y = make_denoising(n_images=1, size=6, sigma=1.0, random_state=0)
    X = [(nodes, edges, edge_features[:, :0]) for nodes, edges, edge_features in X]
    for pairwise in (BoostedTrees(n_rounds=3, random_state=0),
                     LightGBM(n_rounds=3, random_state=0)):
        model = StructuredLogisticRegression(
            unary=Linear(), pairwise=pairwise, max_iter=2, max_sweeps=4, monitor=False,
        ).fit(X, Y)
        assert model.predict(X)[0].shape == Y[0].shape


# --- features of extreme magnitude ----------------------------------------------------------
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_linear_on_huge_features_fits_the_rescaled_problem(fit_intercept):
    features, bias, labels = make_problem(n=200, d=2)
    features[:, 1] *= 1e-3  # columns on different scales
    reference = Linear(fit_intercept=fit_intercept, tol=1e-10).fit(features, bias, labels)
    for scale in (2.0**1000, 1e300):
        huge = Linear(fit_intercept=fit_intercept, tol=1e-10).fit(features * scale, bias, labels)
        assert huge.converged_
        assert np.all(np.isfinite(huge.coef_))
        # the same optimum (the loss is flat along the small column: scores agree to ~tol)
        assert huge.loss(features * scale, bias, labels) == pytest.approx(
            reference.loss(features, bias, labels), rel=1e-12
        )
        np.testing.assert_allclose(
            huge.decision_function(features * scale), reference.decision_function(features),
            atol=1e-4,
        )


def test_linear_with_l2_is_scale_consistent_on_huge_features():
    # the penalty is on W in the original units, so rescaling x by 2**s and l2 by 2**(2s)
    # gives the same scores
    features, bias, labels = make_problem(n=200, d=2)
    reference = Linear(l2=3.0, tol=1e-10).fit(features, bias, labels)
    huge = Linear(l2=3.0 * 2.0**1000, tol=1e-10).fit(features * 2.0**500, bias, labels)
    np.testing.assert_allclose(
        huge.decision_function(features * 2.0**500), reference.decision_function(features),
        rtol=1e-7, atol=1e-7,
    )


def test_linear_warm_start_from_other_scale_still_descends():
    features, bias, labels = make_problem(n=200, d=2)
    oracle = Linear(tol=1e-10).fit(features * 1e-300, bias, labels)
    oracle.fit(features * 1e300, bias, labels)
    reference = Linear(tol=1e-10).fit(features, bias, labels)
    assert oracle.loss(features * 1e300, bias, labels) == pytest.approx(
        reference.loss(features, bias, labels), rel=1e-9
    )


def test_mlp_standardises_huge_features_exactly():
    features, bias, labels = make_problem(n=120, d=2)
    plain = MLP(n_hidden=5, n_epochs=2, random_state=0).fit(features, bias, labels)
    huge = MLP(n_hidden=5, n_epochs=2, random_state=0).fit(features * 2.0**1000, bias, labels)
    np.testing.assert_array_equal(
        huge.decision_function(features * 2.0**1000), plain.decision_function(features)
    )


def test_mlp_without_standardisation_refuses_features_beyond_single_precision():
    features, bias, labels = make_problem(n=50, d=2)
    with pytest.raises(ValueError, match="features.*standardize=True"):
        MLP(standardize=False, random_state=0).fit(features * 1e300, bias, labels)
    fitted = MLP(n_hidden=3, n_epochs=1, random_state=0).fit(features, bias, labels)
    with pytest.raises(ValueError, match="features are too large"):
        fitted.decision_function(features * 1e300)


@pytest.mark.parametrize("name", list(ALL_ORACLES))
def test_bias_rows_spanning_more_than_float64_are_refused(name):
    features, bias, labels = make_problem(n=30, d=2)
    bias[4] = [1e308, -1e308, 0.0]
    with pytest.raises(ValueError, match="bias"):
        ALL_ORACLES[name]().fit(features, bias, labels)


# --- hyperparameters ------------------------------------------------------------------------
RANDOM = {
    "MLP": lambda **kw: MLP(n_hidden=3, n_epochs=1, **kw),
    "BoostedTrees": lambda **kw: BoostedTrees(n_rounds=2, **kw),
    "LightGBM": lambda **kw: LightGBM(n_rounds=2, **kw),
}


@pytest.mark.parametrize("value", ["abc", True, -1, 1.5, [1, 2]])
@pytest.mark.parametrize("name", list(RANDOM))
def test_bad_random_state_names_random_state(name, value):
    features, bias, labels = make_problem(n=30)
    with pytest.raises(ValueError, match="random_state"):
        RANDOM[name](random_state=value).fit(features, bias, labels)


@pytest.mark.parametrize("name", list(RANDOM))
def test_random_state_generator_and_numpy_int_are_accepted(name):
    features, bias, labels = make_problem(n=60)
    a = RANDOM[name](random_state=np.int64(4)).fit(features, bias, labels)
    b = RANDOM[name](random_state=4).fit(features, bias, labels)
    np.testing.assert_array_equal(a.decision_function(features), b.decision_function(features))
    RANDOM[name](random_state=np.random.default_rng(0)).fit(features, bias, labels)


BOOL_AS_NUMBER = [
    (Linear, "l2"), (Linear, "tol"), (Linear, "max_iter"), (Linear, "refresh"),
    (Constant, "l2"), (Constant, "tol"), (Constant, "max_iter"),
    (MLP, "n_hidden"), (MLP, "learning_rate"), (MLP, "momentum"), (MLP, "batch_size"),
    (MLP, "n_epochs"),
    (BoostedTrees, "n_rounds"), (BoostedTrees, "learning_rate"), (BoostedTrees, "subsample"),
    (BoostedTrees, "min_leaf_fraction"), (BoostedTrees, "min_split_fraction"),
    (BoostedTrees, "max_leaf_nodes"), (BoostedTrees, "l2_regularization"), (BoostedTrees, "newton_steps"),
    (BoostedTrees, "n_jobs"),
    (LightGBM, "n_rounds"), (LightGBM, "learning_rate"), (LightGBM, "max_leaf_nodes"),
    (LightGBM, "subsample"), (LightGBM, "min_leaf_fraction"), (LightGBM, "max_bin"),
    (LightGBM, "l2_regularization"), (LightGBM, "n_jobs"),
]


@pytest.mark.parametrize("value", [True, False, np.True_])
@pytest.mark.parametrize(
    "cls, param", BOOL_AS_NUMBER, ids=[f"{cls.__name__}.{param}" for cls, param in BOOL_AS_NUMBER]
)
def test_bools_are_not_numbers(cls, param, value):
    features, bias, labels = make_problem(n=30)
    with pytest.raises(ValueError, match=param):
        cls(**{param: value}).fit(features, bias, labels)


@pytest.mark.parametrize(
    "cls, param", [(Linear, "fit_intercept"), (MLP, "standardize"), (BoostedTrees, "warm_start")]
)
@pytest.mark.parametrize("value", [1, 0, "yes", None])
def test_bool_parameters_take_only_bools(cls, param, value):
    features, bias, labels = make_problem(n=30)
    with pytest.raises(ValueError, match=param):
        cls(**{param: value}).fit(features, bias, labels)


@pytest.mark.parametrize("cls, param", [(Linear, "l2"), (MLP, "learning_rate"),
                                        (BoostedTrees, "learning_rate"), (LightGBM, "learning_rate")])
def test_numeric_strings_are_not_numbers(cls, param):
    features, bias, labels = make_problem(n=30)
    with pytest.raises(ValueError, match=param):
        cls(**{param: "0.5"}).fit(features, bias, labels)


@pytest.mark.parametrize(
    "cls, param",
    [(BoostedTrees, "newton_steps"), (BoostedTrees, "n_jobs"), (LightGBM, "max_leaf_nodes"),
     (LightGBM, "max_bin"), (LightGBM, "n_jobs")],
)
def test_integers_beyond_c_int_are_refused_by_name(cls, param):
    features, bias, labels = make_problem(n=30)
    with pytest.raises(ValueError,
                       match=rf"{param} must be (None, -1 \(all cores\) or )?an integer in \[\d+, 2147483647\]"):
        cls(n_rounds=1, **{param: 2**31}).fit(features, bias, labels)


def test_huge_caps_mean_no_cap():
    features, bias, labels = make_problem(n=100)
    capped = BoostedTrees(n_rounds=3, max_leaf_nodes=2**70, random_state=0)
    free = BoostedTrees(n_rounds=3, max_leaf_nodes=None, random_state=0)
    for model in (capped, free):
        model.fit(features, bias, labels)
    np.testing.assert_array_equal(
        capped.decision_function(features), free.decision_function(features)
    )
    whole = MLP(n_hidden=3, n_epochs=2, batch_size=2**70, random_state=0)
    batch = MLP(n_hidden=3, n_epochs=2, batch_size=100, random_state=0)
    for model in (whole, batch):
        model.fit(features, bias, labels)
    np.testing.assert_array_equal(
        whole.decision_function(features), batch.decision_function(features)
    )
