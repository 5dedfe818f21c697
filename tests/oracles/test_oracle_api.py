"""The oracles' public contract: declared tags, the training
scores of BoostedTrees, the renamed parameters, ``n_jobs``, one validation mechanism, and bias
rows too wide for float64 refused by name (or, when only their magnitude is large, handled exactly)."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from slr.oracles import (MLP, BoostedTrees, Constant, LightGBM, Linear, OracleTags, Zero, biased_logistic_loss,
                         get_oracle_tags)
from slr.oracles.base import MAX_BIAS_SPAN, check_logistic_problem
from slr.oracles.pair_bias import PairBias

pytest.importorskip("lightgbm")


def make_problem(n=300, d=3, k=3, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    features = rng.normal(size=(n, d))
    features[:, 0] += labels
    return features, rng.normal(size=(n, k)), labels


SHIPPED = {
    "Zero": lambda: Zero(),
    "Constant": lambda: Constant(),
    "Linear": lambda: Linear(),
    "Linear+intercept": lambda: Linear(fit_intercept=True),
    "MLP": lambda: MLP(n_hidden=4, n_epochs=1, random_state=0),
    "BoostedTrees": lambda: BoostedTrees(n_rounds=3, random_state=0),
    "BoostedTrees/per_class": lambda: BoostedTrees(n_rounds=3, tree="per_class", random_state=0),
    "LightGBM": lambda: LightGBM(n_rounds=3, random_state=0),
}


# --- tags ------------------------------------------------------------------------------------
def test_every_oracle_declares_its_tags():
    expected = {
        Zero: OracleTags(factored_pair_bias=True, sparse_features=True),
        Constant: OracleTags(factored_pair_bias=True, linear_parameters=("table_",), penalty=True,
                             sparse_features=True),
        Linear: OracleTags(factored_pair_bias=True, linear_parameters=("coef_", "intercept_"), penalty=True,
                           sparse_features=True),
        MLP: OracleTags(training_scores=True, validation_stopping=True, sparse_features=True),
        BoostedTrees: OracleTags(training_scores=True),
        LightGBM: OracleTags(training_scores=True, sparse_features=True),
    }
    for cls, tags in expected.items():
        assert get_oracle_tags(cls()) == tags, cls.__name__


@pytest.mark.parametrize("name", ["Zero", "Constant", "Linear"])
def test_linear_parameters_name_fitted_arrays(name):
    features, bias, labels = make_problem()
    oracle = SHIPPED[name]().fit(features, bias, labels)
    for attribute in get_oracle_tags(oracle).linear_parameters:
        assert isinstance(getattr(oracle, attribute), np.ndarray)


def test_zero_takes_the_factored_bias_as_is():
    rng = np.random.default_rng(1)
    pair = PairBias(rng.normal(size=(40, 3)), rng.normal(size=(40, 3)))
    labels = rng.integers(0, 9, 40)
    oracle = Zero().fit(np.ones((40, 1)), pair, labels)
    assert oracle.n_classes_ == 9
    assert oracle.loss(np.ones((40, 1)), pair, labels) == biased_logistic_loss(
        np.zeros((40, 9)), np.asarray(pair), labels)[0]


# --- BoostedTrees' training scores -------------------------------------------------------------
@pytest.mark.parametrize("tree", ["vector", "per_class"])
@pytest.mark.parametrize("subsample", [1.0, 150])
def test_training_scores_are_the_decision_function_bit_for_bit(tree, subsample):
    features, bias, labels = make_problem(n=400, k=4, seed=2)
    model = BoostedTrees(n_rounds=4, tree=tree, subsample=subsample, random_state=0)
    model.fit(features, bias, labels)
    assert model.training_scores_.shape == (400, 4)
    np.testing.assert_array_equal(model.training_scores_, model.decision_function(features))
    # warm start: the second fit boosts on from the first ensemble's scores
    model.set_params(warm_start=True).fit(features, bias + 0.5, labels)
    assert model.n_trees_ == 8 * (4 if tree == "per_class" else 1)
    np.testing.assert_array_equal(model.training_scores_, model.decision_function(features))
    # a fit on other rows: their scores, and the decision function simply computes
    other = features[::2] + 0.1
    model.fit(other, bias[::2], labels[::2])
    np.testing.assert_array_equal(model.training_scores_, model.decision_function(other))
    # the decision function walks the trees even on the training rows (no recognition of them)
    model.node_value_ *= 2.0
    np.testing.assert_array_equal(model.decision_function(other), 2.0 * model.training_scores_)


def test_training_scores_without_boosting_and_after_pickling():
    features, bias, labels = make_problem(n=50, k=1)
    single = BoostedTrees(n_rounds=3).fit(features, bias, labels)
    np.testing.assert_array_equal(single.training_scores_, np.zeros((50, 1)))
    features, bias, labels = make_problem(n=80)
    model = BoostedTrees(n_rounds=2, random_state=0).fit(features, bias, labels)
    restored = pickle.loads(pickle.dumps(model))
    assert not hasattr(restored, "training_scores_")    # large and recomputable: not pickled
    np.testing.assert_array_equal(restored.decision_function(features), model.training_scores_)


def test_lightgbm_training_scores_are_its_decision_function_after_continued_fits():
    """The adapter keeps the scores its rounds accumulate instead of predicting the ensemble again:
    they are the decision function's, also when a fit boosts on from the function it replaces."""
    features, bias, labels = make_problem(n=400, k=4, seed=2)
    model = LightGBM(n_rounds=20, random_state=0).fit(features, bias, labels)
    np.testing.assert_allclose(model.training_scores_, model.decision_function(features), rtol=1e-9, atol=1e-9)
    for _ in range(2):     # one round from f = 0 ends above the replaced function: boosting continues
        model.set_params(n_rounds=1).fit(features, bias, labels)
        assert model.continued_
        np.testing.assert_allclose(model.training_scores_, model.decision_function(features), rtol=1e-9,
                                   atol=1e-9)


def test_lightgbm_params_map_the_adapters_names_onto_lightgbms():
    params = LightGBM(max_leaf_nodes=9, l2_regularization=0.5).lightgbm_params(100, 3)
    assert params["num_leaves"] == 9 and params["lambda_l2"] == 0.5


# --- one validation mechanism ------------------------------------------------------------------
@pytest.mark.parametrize("cls", [Zero, Constant, Linear, MLP, BoostedTrees, LightGBM])
def test_every_parameter_has_a_declared_constraint(cls):
    assert set(cls._parameter_constraints) == set(cls().get_params())


# --- n_jobs ------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [BoostedTrees, LightGBM])
@pytest.mark.parametrize("n_jobs", [-1, None, 2, np.int64(3)])
def test_n_jobs_all_cores_or_a_count_gives_the_same_function(cls, n_jobs):
    features, bias, labels = make_problem(n=300, seed=4)
    one = cls(n_rounds=3, n_jobs=1, random_state=0).fit(features, bias, labels)
    many = cls(n_rounds=3, n_jobs=n_jobs, random_state=0).fit(features, bias, labels)
    np.testing.assert_array_equal(many.decision_function(features), one.decision_function(features))


@pytest.mark.parametrize("cls", [BoostedTrees, LightGBM])
@pytest.mark.parametrize("n_jobs", [0, -2, 1.5, "all", True])
def test_bad_n_jobs_is_refused_by_name_in_fit_and_prediction(cls, n_jobs):
    features, bias, labels = make_problem(n=60)
    with pytest.raises(ValueError, match=r"n_jobs must be None, -1 \(all cores\) or an integer in"):
        cls(n_rounds=1, n_jobs=n_jobs).fit(features, bias, labels)
    fitted = cls(n_rounds=1).fit(features, bias, labels).set_params(n_jobs=n_jobs)
    with pytest.raises(ValueError, match="n_jobs"):
        fitted.decision_function(features)


# --- bias spans --------------------------------------------------------------
@pytest.mark.parametrize("span", [1e15, 1e17, 1e100, 1e300])
@pytest.mark.parametrize("name", list(SHIPPED))
def test_bias_rows_wider_than_float64_resolves_are_refused(name, span):
    features, bias, labels = make_problem(n=60)
    wide = bias.copy()
    wide[:, 0] = span           # the reproducer: Constant's loss came out 0.0 here
    with pytest.raises(ValueError, match=r"bias values of one row span .* more than the oracles resolve"):
        SHIPPED[name]().fit(features, wide, labels)
    one_row = bias.copy()
    one_row[7, 1] = -span
    with pytest.raises(ValueError, match="bias"):
        SHIPPED[name]().fit(features, one_row, labels)
    fitted = SHIPPED[name]().fit(features, bias, labels)
    with pytest.raises(ValueError, match="bias"):
        fitted.loss(features, wide, labels)


@pytest.mark.parametrize("span", [1e15, 1e17, 1e100, 1e300])
def test_factored_bias_rows_wider_than_float64_resolves_are_refused(span):
    rng = np.random.default_rng(5)
    left = rng.normal(size=(30, 3))
    left[4, 0] = span / 2
    pair = PairBias(left, -left)
    labels = rng.integers(0, 9, 30)
    for oracle in (Zero(), Constant(), Linear(), BoostedTrees(n_rounds=1)):
        with pytest.raises(ValueError, match="bias values of one row span"):
            oracle.fit(np.ones((30, 1)), pair, labels)


def test_the_limit_is_far_above_the_learners_biases_and_spans_below_it_are_resolved():
    # the learner's biases (messages / eps) span about 1e3 at eps = 1e-3
    assert MAX_BIAS_SPAN > 1e9
    features, bias, labels = make_problem(n=200, seed=6)
    shifted = bias.copy()
    shifted[:, 0] += 2.0**31            # absorbed by the per-class constant, exactly in real numbers
    for make in (lambda: Constant(), lambda: Linear(fit_intercept=True, tol=1e-8)):
        near = make().fit(features, shifted, labels).loss(features, shifted, labels)
        assert near == pytest.approx(make().fit(features, bias, labels).loss(features, bias, labels), rel=1e-8)
    for name in ("MLP", "BoostedTrees", "BoostedTrees/per_class", "LightGBM"):
        oracle = SHIPPED[name]().fit(features, shifted, labels)
        assert np.isfinite(oracle.loss(features, shifted, labels))


@pytest.mark.parametrize("name", list(SHIPPED))
def test_bias_rows_of_huge_magnitude_but_small_span_are_the_shifted_problem(name):
    # every row shifted by its own huge constant, with entries exactly representable at that scale:
    # the softmax ignores the shift, and the oracle returns what it returns for the rows moved to 0
    # (up to 2**80; beyond 2**84 no two floats of one row are closer than MAX_BIAS_SPAN, so the
    # rows there are constant)
    rng = np.random.default_rng(7)
    features, _, labels = make_problem(n=120, seed=7)
    steps = rng.integers(-3, 4, size=(120, 3)).astype(np.float64)
    offsets = rng.choice([-1.0, 1.0], size=(120, 1)) * 2.0 ** rng.integers(33, 81, size=(120, 1))
    steps[::10] = 0.0
    offsets[::10] = rng.choice([-1e300, 1e300, 1e17], size=(12, 1))
    unit = np.spacing(np.abs(offsets))     # the float spacing above 2**e: exact on both sides
    huge = offsets + steps * unit
    small = (steps - steps.max(axis=1, keepdims=True)) * unit
    np.testing.assert_array_equal(huge - huge.max(axis=1, keepdims=True), small)
    reference = SHIPPED[name]().fit(features, small, labels)
    oracle = SHIPPED[name]().fit(features, huge, labels)
    np.testing.assert_array_equal(oracle.decision_function(features), reference.decision_function(features))
    assert oracle.loss(features, huge, labels) == reference.loss(features, small, labels)


def test_rows_within_the_limit_are_returned_as_given():
    features, bias, labels = make_problem(n=50)
    bias[3] *= 1e6
    _, checked, _ = check_logistic_problem(features, bias, labels)
    assert checked is bias
    pair = PairBias(bias[:, :2], bias[:, 1:])
    _, checked_pair, _ = check_logistic_problem(features, pair, labels % 4, pair_bias=True)
    assert checked_pair is pair


def test_the_learners_biases_at_a_small_epsilon_stay_far_below_the_limit(monkeypatch):
    import slr.oracles.base as base
    from slr import StructuredLogisticRegression
    from slr.datasets import make_denoising

    widest = []

    def recording(bias):
        dense = np.asarray(bias)
        widest.append(float(np.ptp(dense, axis=1).max()))
        return resolvable(bias)

    resolvable = base._resolvable_bias
    monkeypatch.setattr(base, "_resolvable_bias", recording)
    X, Y = make_denoising(n_images=2, size=8, sigma=1.0, random_state=0)
    StructuredLogisticRegression(Linear(), Linear(), epsilon=1e-3, max_iter=4, monitor=False,
                                 solver="alternation").fit(X, Y)
    assert len(widest) >= 8 and 100 < max(widest) < 1e-3 * MAX_BIAS_SPAN
