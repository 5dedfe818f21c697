"""The pairwise problem's factored bias: the factored loss against the dense biased logistic loss
computed with scipy, its fallback, and oracles fitted on it against the same fits on the dense
array."""
from __future__ import annotations

import numpy as np
import pytest

from slr.oracles import BoostedTrees, Constant, Linear, biased_logistic_loss, check_logistic_problem
from slr.oracles.pair_bias import PairBias, PairLoss


def problem(n=400, L=4, scale=3.0, seed=0):
    rng = np.random.default_rng(seed)
    bias = PairBias(scale * rng.normal(size=(n, L)), scale * rng.normal(size=(n, L)))
    return bias, rng.integers(0, L * L, n), rng


def test_pair_bias_is_the_sum_of_its_factors():
    bias, labels, _ = problem(n=7, L=3)
    dense = np.asarray(bias)
    assert dense.shape == bias.shape == (7, 9)
    for a in range(3):
        for b in range(3):
            np.testing.assert_array_equal(dense[:, 3 * a + b], bias.left[:, a] + bias.right[:, b])
    np.testing.assert_array_equal(bias.at(labels), dense[np.arange(7), labels])
    np.testing.assert_array_equal(bias.row(2), dense[2])
    np.testing.assert_allclose(bias.row_spans(), np.ptp(dense, axis=1), rtol=1e-14)


@pytest.mark.parametrize("scale", [0.5, 3.0, 20.0])
def test_factored_loss_gradient_and_hessian_match_the_dense_definition(scale):
    bias, labels, rng = problem(scale=scale)
    row = np.array([0.7, -0.3, 1.0])
    coef = rng.normal(size=(16, 3))
    dense = np.asarray(bias)
    scores = np.tile(coef @ row, (len(labels), 1))
    loss, dscores = biased_logistic_loss(scores, dense, labels)       # scipy's logsumexp
    factored = PairLoss(row, bias, labels)
    value, grad = factored(coef)
    assert value == pytest.approx(loss, rel=1e-12)
    np.testing.assert_allclose(grad, np.outer(dscores.sum(axis=0), row), atol=1e-9 * len(labels))
    p = dscores.copy()
    p[np.arange(len(labels)), labels] += 1.0                           # the softmax
    weights = (p * (1 - p)).sum(axis=0)
    np.testing.assert_allclose(factored.hessian_blocks(coef), weights[:, None, None] * np.outer(row, row),
                               rtol=1e-10, atol=1e-12)


def test_factored_loss_only_where_no_partition_function_can_underflow():
    """The factored loss is used on equal rows whose factors span at most 300 nats, however wide
    the scores; elsewhere the dense loss, and the fit is the same either way."""
    from slr.oracles.pair_bias import factorable

    bias, labels, rng = problem(scale=3.0)
    ones = np.ones((len(labels), 1))
    assert factorable(ones, bias)
    assert not factorable(ones, np.asarray(bias)) and not factorable(rng.normal(size=(len(labels), 1)), bias)
    wide = PairBias(bias.left * 100.0, bias.right * 100.0)          # spans of hundreds of nats
    assert not factorable(ones, wide)
    np.testing.assert_allclose(Linear(l2=0.5, tol=1e-9).fit(ones, wide, labels).coef_,
                               Linear(l2=0.5, tol=1e-9).fit(ones, np.asarray(wide), labels).coef_, atol=1e-6)
    # scores spread over thousands of nats: the factored loss stays exact
    coef = np.linspace(-2000.0, 0.0, 16)[:, None]
    value, _ = PairLoss(np.array([1.0]), bias, labels)(coef)
    assert value == pytest.approx(biased_logistic_loss(np.tile(coef[:, 0], (len(labels), 1)), np.asarray(bias),
                                                       labels)[0], rel=1e-12)


@pytest.mark.parametrize("features", ["constant", "varying"])
def test_linear_on_the_factored_bias_equals_linear_on_the_dense_bias(features):
    bias, labels, rng = problem()
    x = np.ones((len(labels), 1)) if features == "constant" else rng.normal(size=(len(labels), 2))
    on_pair = Linear(l2=0.5, tol=1e-9).fit(x, bias, labels)
    on_dense = Linear(l2=0.5, tol=1e-9).fit(x, np.asarray(bias), labels)
    np.testing.assert_allclose(on_pair.coef_, on_dense.coef_, atol=1e-6)


def test_constant_on_the_factored_bias_equals_constant_on_the_dense_bias():
    bias, labels, _ = problem()
    for l2 in (0.0, 1.0):
        np.testing.assert_allclose(Constant(l2=l2).fit(np.ones((len(labels), 1)), bias, labels).table_,
                                   Constant(l2=l2).fit(np.ones((len(labels), 1)), np.asarray(bias), labels).table_,
                                   atol=1e-6)
    # equal rows: the closed form, softmax(table + bias) = class frequencies
    same = PairBias(np.tile([0.0, 1.0], (300, 1)), np.tile([2.0, -1.0], (300, 1)))
    labels = np.repeat(np.arange(4), [30, 60, 90, 120])
    table = Constant().fit(np.ones((300, 1)), same, labels).table_
    z = table + same.row(0)
    np.testing.assert_allclose(np.exp(z) / np.exp(z).sum(), [0.1, 0.2, 0.3, 0.4], rtol=1e-12)


def test_other_oracles_receive_the_dense_array():
    bias, labels, rng = problem()
    x = rng.normal(size=(len(labels), 2))
    a = BoostedTrees(n_rounds=3, random_state=0).fit(x, bias, labels).decision_function(x)
    b = BoostedTrees(n_rounds=3, random_state=0).fit(x, np.asarray(bias), labels).decision_function(x)
    np.testing.assert_array_equal(a, b)


def test_bad_factored_bias_raises_value_error():
    with pytest.raises(ValueError, match="NaN or infinite"):
        PairBias(np.array([[0.0, np.nan]]), np.zeros((1, 2)))
    with pytest.raises(ValueError, match="same shape|one shape"):
        PairBias(np.zeros((3, 2)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="overflows"):
        PairBias(np.full((4, 2), 1e308), np.full((4, 2), 1e308))
    bias, labels, _ = problem(n=5, L=2)
    with pytest.raises(ValueError, match="same number of rows"):
        check_logistic_problem(np.ones((4, 1)), bias, labels[:4], pair_bias=True)
    with pytest.raises(ValueError, match="labels must lie"):
        check_logistic_problem(np.ones((5, 1)), bias, np.full(5, 4), pair_bias=True)
    with pytest.raises(ValueError, match="differ by more than float64"):
        Linear().fit(np.ones((1, 1)), PairBias(np.array([[-1e308, 1e308]]), np.zeros((1, 2))), [0])


def test_learner_on_chains_takes_the_same_steps_as_with_the_dense_bias(monkeypatch):
    """slr on chains with one constant edge feature (the factored pairwise loss) against the same
    fit handed the dense pairwise bias: the same objective after every half step."""
    import slr._fit_data as fit_data
    from slr import StructuredLogisticRegression

    rng = np.random.default_rng(3)
    X, Y = [], []
    for n in rng.integers(3, 7, size=12):
        labels = rng.integers(0, 4, n)
        nodes = np.eye(4)[labels] + rng.normal(scale=1.5, size=(n, 4))
        edges = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)
        X.append((nodes, edges, np.ones((n - 1, 1))))
        Y.append(labels)

    def fit():
        model = StructuredLogisticRegression(Linear(l2=0.1), Linear(l2=0.1), max_iter=4, max_sweeps=10,
                                             n_jobs=1, relaxation=1.5)
        return model.fit(X, Y).objective_trace_["objective"].to_numpy()

    factored = fit()
    real = fit_data.pairwise_bias
    monkeypatch.setattr(fit_data, "pairwise_bias", lambda messages, eps, factored=False: real(messages, eps))
    np.testing.assert_allclose(factored, fit(), rtol=1e-9)
