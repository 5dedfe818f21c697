"""One learner contract for slr and every baseline (slr.estimator), and scikit-learn conventions
for the oracles."""
import inspect

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from slr import StructuredLogisticRegression
from slr.datasets import make_denoising
from slr.estimator import HISTORY_COLUMNS
from slr.oracles import MLP, BoostedTrees, Constant, LightGBM, Linear, Zero

from learners import LEARNERS

CONTRACT = ("max_iter", "n_states", "random_state", "verbose")


@pytest.fixture(scope="module")
def data():
    X, Y = make_denoising(n_images=3, size=6, sigma=1.5, random_state=0)
    return X[:2], Y[:2], X[2:], Y[2:]


def make(name, **kw):
    return LEARNERS[name](max_iter=2, n_states=3, random_state=0, **kw)


@pytest.fixture(scope="module")
def fitted(data):
    X, Y, Xv, Yv = data
    return {name: make(name).fit(X, Y, Xv, Yv) for name in LEARNERS}


@pytest.mark.parametrize("name", LEARNERS)
def test_constructor_names_and_clone_round_trip(name):
    model = make(name)
    params = model.get_params(deep=False)
    assert set(CONTRACT) <= set(params)
    assert "n_states" not in inspect.signature(model.fit).parameters
    fit_params = list(inspect.signature(model.fit).parameters)
    assert fit_params[:5] == ["X", "Y", "X_val", "Y_val", "sample_weight"]
    assert fit_params[5:] == (["callback"] if name.startswith("slr") else [])   # slr's observer, keyword-only use
    twin = clone(model)
    assert type(twin) is type(model) and twin.get_params(deep=False).keys() == params.keys()
    assert {k: v for k, v in twin.get_params().items() if not hasattr(v, "fit")} == {
        k: v for k, v in model.get_params().items() if not hasattr(v, "fit")}


@pytest.mark.parametrize("name", LEARNERS)
def test_not_fitted_error_before_fit(name, data):
    X, Y, _, _ = data
    with pytest.raises(NotFittedError):
        make(name).predict(X)
    with pytest.raises(NotFittedError):
        make(name).score(X, Y)


@pytest.mark.parametrize("name", LEARNERS)
def test_fit_history_predict_score(name, fitted, data):
    X, Y, Xv, Yv = data
    model = fitted[name]
    assert model.n_states_ == 3  # from the constructor: the labels only reach 1
    hist = model.history_
    # the contract's columns first; a learner may add its own after them
    own = {"FrankWolfeSSVM": ["dual", "duality_gap"]}.get(name, [])
    assert list(hist.columns) == [*HISTORY_COLUMNS, *own] and len(hist) >= 1
    seconds = hist["seconds"].to_numpy()
    assert np.all(seconds >= 0) and np.all(np.diff(seconds) >= 0)
    assert np.all(hist["eval_seconds"] >= 0)
    assert hist["val_error"].notna().any()  # measured on the validation data
    pred = model.predict(Xv)
    assert [p.shape for p in pred] == [y.shape for y in Yv]
    assert all(p.dtype == np.int64 and p.min() >= 0 and p.max() < 3 for p in pred)
    assert 0.0 <= model.score(Xv, Yv) <= 1.0


@pytest.mark.parametrize("name", LEARNERS)
def test_fit_returns_self_and_a_fixed_random_state_reproduces_it(name, fitted, data):
    X, Y, Xv, _ = data
    model = make(name)
    assert model.fit(X, Y) is model
    for a, b in zip(model.predict(Xv), fitted[name].predict(Xv)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(model.history_["objective"], fitted[name].history_["objective"])


@pytest.mark.parametrize("name", LEARNERS)
def test_set_params_keeps_the_fit_and_clone_drops_it(name, fitted, data):
    model = clone(fitted[name]).fit(*data)
    before = model.predict(data[2])
    model.set_params(verbose=0 if isinstance(model.verbose, int) else False)
    for a, b in zip(model.predict(data[2]), before):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(NotFittedError):
        clone(model).predict(data[2])


ORACLES = [Zero(), Constant(l2=0.5), Linear(l2=0.5), MLP(n_hidden=3, random_state=0),
           BoostedTrees(n_rounds=2, random_state=0), LightGBM(n_rounds=2, random_state=0)]


@pytest.mark.parametrize("oracle", ORACLES, ids=lambda o: type(o).__name__)
def test_oracles_are_scikit_learn_estimators(oracle):
    rng = np.random.default_rng(0)
    features, bias, labels = rng.normal(size=(40, 2)), rng.normal(size=(40, 3)), rng.integers(0, 3, 40)
    with pytest.raises(NotFittedError):
        clone(oracle).decision_function(features)
    fitted = clone(oracle).fit(features, bias, labels)
    scores = fitted.decision_function(features)
    params = fitted.get_params(deep=True)
    fitted.set_params(**params)  # keeps the fitted state
    np.testing.assert_array_equal(fitted.decision_function(features), scores)
    assert clone(fitted).get_params() == params and not hasattr(clone(fitted), "n_classes_")


def test_learner_get_params_reaches_into_oracles():
    model = StructuredLogisticRegression(unary=Linear(l2=0.5))
    assert model.get_params(deep=True)["unary__l2"] == 0.5
    assert clone(model).get_params()["unary__l2"] == 0.5
