"""Saved models know their versions; BoostedTrees' feature importances."""
from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

from slr.baselines import OneSlackSSVM
from slr import StructuredLogisticRegression
from slr._versions import InconsistentVersionWarning
from slr.datasets import make_denoising
from slr.oracles import BoostedTrees, Constant


@pytest.fixture(scope="module")
def fitted():
    X, Y = make_denoising(n_images=2, size=8, sigma=1.0, random_state=0)
    slr_model = StructuredLogisticRegression(BoostedTrees(n_rounds=3), Constant(), max_iter=2, n_jobs=1,
                                             random_state=0).fit(X, Y)
    return X, {"slr": slr_model, "ssvm": OneSlackSSVM(max_iter=3).fit(X, Y), "oracle": slr_model.unary_}


@pytest.mark.parametrize("name", ["slr", "ssvm", "oracle"])
def test_a_pickle_loads_silently_under_the_same_versions(name, fitted):
    X, models = fitted
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = pickle.loads(pickle.dumps(models[name]))
    if name == "oracle":
        np.testing.assert_array_equal(loaded.decision_function(X[0][0]), models[name].decision_function(X[0][0]))
    else:
        for a, b in zip(loaded.predict(X), models[name].predict(X)):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["slr", "ssvm", "oracle"])
def test_other_or_unrecorded_versions_warn(name, fitted):
    model = fitted[1][name]
    state = model.__getstate__()
    assert state["_slr_versions"]["slr"] and state["_slr_versions"]["numpy"] == np.__version__
    older = dict(state, _slr_versions=dict(state["_slr_versions"], slr="0.0.1"))
    with pytest.warns(InconsistentVersionWarning, match=r"pickled under slr 0\.0\.1 and is loaded under slr 0\."):
        type(model).__new__(type(model)).__setstate__(older)
    unrecorded = {k: v for k, v in state.items() if k != "_slr_versions"}
    with pytest.warns(InconsistentVersionWarning, match="did not record its versions"):
        type(model).__new__(type(model)).__setstate__(unrecorded)


def test_feature_importances_count_the_splits_on_each_feature():
    """Labels that depend on feature 0 alone: most splits are on it; the shares are the counts of
    split nodes by feature over the trees, divided by their total."""
    rng = np.random.default_rng(0)
    features = rng.normal(size=(600, 4))
    labels = (features[:, 0] > 0.3).astype(int)
    model = BoostedTrees(n_rounds=5, subsample=1.0, random_state=0).fit(features, np.zeros((600, 2)), labels)
    counts = np.zeros(4)
    for tree in model._unpack_trees():
        for feature in tree.feature[tree.feature >= 0]:
            counts[feature] += 1
    np.testing.assert_allclose(model.feature_importances_, counts / counts.sum())
    assert model.feature_importances_.argmax() == 0 and model.feature_importances_[0] > 0.5
    assert not hasattr(BoostedTrees(), "feature_importances_")
