"""Sparse features end to end: the checker, the Linear oracle's diagonal solver (against the block
solver and the dense data), the L1 penalty (against the optimality conditions computed
independently), the learner on sparse and dense copies of the same data, and memory that grows with
the stored entries."""
import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

from slr import StructuredLogisticRegression
from slr.data import FlatData
from slr.datasets.sparse_chains import make_sparse_chains
from slr.datasets.synthetic import make_structured
from slr.graph import check_dataset
from slr.oracles import MLP, BoostedTrees, Constant, LightGBM, Linear, OracleTags, Zero
from slr.oracles.base import biased_logistic_loss


def _problem(n=300, d=25, k=4, density=0.2, seed=0):
    rng = np.random.default_rng(seed)
    features = rng.standard_normal((n, d)) * (rng.random((n, d)) < density)
    features[:, 2] *= 300.0   # a column beyond [-1, 1]: the fit rescales it
    return features, rng.standard_normal((n, k)), rng.integers(0, k, n)


def _objective(oracle, features, bias, labels):
    return biased_logistic_loss(oracle.decision_function(features), bias, labels)[0] + oracle.penalty()


def _centred(oracle, features):
    """The coefficients in the units of features scaled into [-1, 1], less their mean over the classes:
    the loss ignores a shift shared by all classes, which the scaled column's tiny ridge barely pins."""
    coef = oracle.coef_ * np.abs(features).max(axis=0)
    return coef - coef.mean(axis=0)


def _sparse_copy(X):
    return [(sp.csr_array(nodes), edges, sp.csr_array(on_edges)) for nodes, edges, on_edges in X]


def test_the_checker_keeps_sparse_features_sparse_and_refuses_bad_ones():
    X, Y = make_structured(4, "chain", 6, 3, n_features=5, random_state=0)
    checked, _, _ = check_dataset(_sparse_copy(X), Y)
    assert all(sp.issparse(x[0]) and sp.issparse(x[2]) for x in checked)
    data = FlatData(_sparse_copy(X), Y)
    assert sp.issparse(data.node_features) and data.node_features.shape == (24, 5)
    np.testing.assert_array_equal(data.node_features.toarray(), FlatData(X, Y).node_features)
    bad = sp.csr_array(X[1][0])
    bad.data[0] = np.nan
    with pytest.raises(ValueError, match=r"X\[1\] node_features contains NaN"):
        check_dataset([X[0], (bad, X[1][1], X[1][2])])
    with pytest.raises(ValueError, match=r"X\[0\] node_features must be real, got complex"):
        check_dataset([(sp.csr_array(X[0][0].astype(complex)), X[0][1], X[0][2])])


@pytest.mark.parametrize("rows", [sp.csr_array((6, 0)), sp.csr_array((np.zeros(2), ([0, 1], [0, 1])), shape=(6, 4))],
                         ids=["no columns", "stored zeros only"])
def test_empty_sparse_features_fit(rows):
    X, Y = make_structured(5, "chain", 6, 3, n_features=4, random_state=0)
    model = StructuredLogisticRegression(Linear(l2=1.0), Linear(l2=1.0), max_iter=3, tol=0)
    model.fit([(rows, edges, on_edges) for _, edges, on_edges in X], Y)
    assert np.all(np.isfinite(model.unary_.coef_)) and not model.unary_.coef_.any()


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_diagonal_solver_agrees_with_the_block_solver_and_sparse_with_dense(fit_intercept):
    features, bias, labels = _problem()
    weights = np.random.default_rng(3).random(features.shape[0])
    fits = {
        "block": Linear(l2=1.0, fit_intercept=fit_intercept, solver="block", tol=1e-9),
        "diagonal": Linear(l2=1.0, fit_intercept=fit_intercept, solver="diagonal", tol=1e-9),
        "sparse": Linear(l2=1.0, fit_intercept=fit_intercept, tol=1e-9),
    }
    for name, oracle in fits.items():
        rows = sp.csr_array(features) if name == "sparse" else features
        oracle.fit(rows, bias, labels, sample_weight=weights)
    reference = fits["block"]
    for oracle in fits.values():
        np.testing.assert_allclose(_centred(oracle, features), _centred(reference, features), atol=1e-4)
        assert _objective(oracle, features, bias, labels) == pytest.approx(
            _objective(reference, features, bias, labels), rel=1e-9)


def test_l1_solution_meets_the_optimality_conditions():
    features, bias, labels = _problem(seed=1)
    l1, l2 = 3.0, 0.1
    oracle = Linear(l1=l1, l2=l2, tol=1e-8, max_iter=5000).fit(sp.csr_array(features), bias, labels)
    coef = oracle.coef_
    # the gradient of the smooth part, from the loss's own gradient in the scores (other code)
    _, score_grad = biased_logistic_loss(features @ coef.T, bias, labels)
    grad = score_grad.T @ features + l2 * coef
    zero = coef == 0
    assert 0.2 < zero.mean() < 1.0 and oracle.converged_
    # in the units of the fit's columns (scaled into [-1, 1]), where tol applies: both sides / scale
    scale = np.abs(features).max(axis=0)
    grad, bound = grad / scale, np.broadcast_to(l1 / scale, coef.shape)
    allowed = 1e-8 * features.shape[0] * 2   # tol on the mean objective, and the rounding of the check
    assert np.all(np.abs(grad[zero]) <= bound[zero] + allowed)
    np.testing.assert_allclose(grad[~zero], -bound[~zero] * np.sign(coef[~zero]), atol=allowed)
    dense = Linear(l1=l1, l2=l2, tol=1e-8, max_iter=5000).fit(features, bias, labels)
    np.testing.assert_allclose(_centred(dense, features), _centred(oracle, features), atol=1e-4)
    with pytest.raises(ValueError, match="solver='block' needs dense features and l1=0"):
        Linear(l1=1.0, solver="block").fit(features, bias, labels)


@pytest.mark.parametrize("solver", ["alternation", "joint"])
def test_the_learner_fits_the_same_model_on_sparse_and_dense_copies(solver):
    X, Y = make_structured(20, "chain", 10, 3, n_features=8, random_state=2)
    fits = [StructuredLogisticRegression(Linear(l2=1.0), Linear(l2=1.0), solver=solver, tol=1e-6,
                                         max_iter=300, random_state=0).fit(data, Y) for data in (X, _sparse_copy(X))]
    dense, sparse = fits
    assert np.isclose(dense.history_.objective.iloc[-1], sparse.history_.objective.iloc[-1], rtol=1e-4)
    # the fits stop by the rule on J's relative decrease, not at a gradient tolerance
    np.testing.assert_allclose(dense.unary_.coef_, sparse.unary_.coef_, atol=1e-2)
    for model in fits:   # a model predicts the same on either copy
        np.testing.assert_array_equal(np.concatenate(model.predict(X)), np.concatenate(model.predict(_sparse_copy(X))))
    assert np.mean(np.concatenate(dense.predict(X)) == np.concatenate(sparse.predict(X))) > 0.97


@pytest.mark.parametrize("unary", [Zero(), Constant(l2=1.0), LightGBM(n_rounds=3),
                                   MLP(n_epochs=2, random_state=0, standardize=False), BoostedTrees(n_rounds=3)],
                         ids=lambda o: type(o).__name__)
def test_every_oracle_takes_sparse_features(unary):
    X, Y = make_structured(12, "chain", 8, 3, n_features=6, random_state=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = [StructuredLogisticRegression(clone(unary), Linear(l2=1.0), max_iter=3, random_state=0,
                                             early_stopping=False).fit(data, Y) for data in (X, _sparse_copy(X))]
    assert fits[0].history_.objective.iloc[-1] == pytest.approx(fits[1].history_.objective.iloc[-1], rel=1e-6)


class _DenseOnly(Zero):
    """A third-party oracle: no sparse_features tag."""

    def __slr_tags__(self):
        return OracleTags()


def test_oracles_without_sparse_support_refuse_what_would_not_fit_in_memory():
    rows = sp.csr_array((np.ones(3), ([0, 1, 2], [0, 5, 2**30])), shape=(3, 2**30 + 1))
    bias, labels = np.zeros((3, 2)), [0, 1, 0]
    with pytest.raises(ValueError, match=r"^_DenseOnly needs dense features; .* 24\.0 GiB as a dense array\. Use an "
                                         r"oracle that takes sparse features: Linear, LightGBM, MLP, Constant or Zero"):
        _DenseOnly().fit(rows, bias, labels)
    with pytest.raises(ValueError, match=r"^BoostedTrees needs dense features; .* 24\.0 GiB as a dense array\. "
                                         r"Use LightGBM: boosted trees that take sparse features as they are"):
        BoostedTrees().fit(rows, bias, labels)


def test_a_high_dimensional_fit_uses_memory_linear_in_the_data():
    n, d, k = 2000, 200_000, 5
    rng = np.random.default_rng(0)
    columns = rng.integers(0, d, (n, 8))
    rows = sp.csr_array((np.ones(columns.size), columns.ravel(), np.arange(0, columns.size + 1, 8)), shape=(n, d))
    labels = columns[:, 0] % k
    tracemalloc.start()
    oracle = Linear(l2=1.0, max_iter=30).fit(rows, np.zeros((n, k)), labels)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert oracle.coef_.shape == (k, d)
    # K D^2 would be 1.6e11 numbers; a few dozen (K, D) arrays are 8e6 numbers
    assert peak < 100 * 8 * (k * d + rows.nnz)


def test_sparse_chains_are_reproducible_and_learnable():
    X, Y = make_sparse_chains(3000, 2000, 5, random_state=0)
    X2, Y2 = make_sparse_chains(3000, 2000, 5, random_state=0)
    assert all((a[0] != b[0]).nnz == 0 for a, b in zip(X, X2)) and all(np.array_equal(a, b) for a, b in zip(Y, Y2))
    assert sum(x[0].shape[0] for x in X) == 3000 and X[0][0].shape[1] == 2000
    Xt, Yt = make_sparse_chains(2000, 2000, 5, random_state=1)
    model = StructuredLogisticRegression(Linear(l2=1.0), Linear(l2=1.0), random_state=0).fit(X, Y)
    error = np.mean(np.concatenate(model.predict(Xt)) != np.concatenate(Yt))
    # unary-only and pairwise-only models are far worse: the learner uses both
    assert error < 0.2
