"""The learner's fit as a transaction, its renamed parameters and the oracle tag training_scores."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from slr import StructuredLogisticRegression
from slr.data import FlatData, GraphBatch
from slr.datasets import make_denoising
from slr.estimator import FitHistory, StructuredEstimator
from slr.inference import batch_dual_parts, batch_dual_values, batch_sweeps
from slr.inference.batch import resolve_threads
from slr.learner import structured_objective
from slr.models import PairwiseModel
from slr.oracles import Linear

# Algorithm 1.1 (the transactions below fail at its second oracle fit);
# tests/learner/test_learner_solver.py has the joint solver's
KW = dict(max_iter=2, max_sweeps=6, n_jobs=1, random_state=0, solver="alternation")


@pytest.fixture(scope="module")
def data():
    return make_denoising(n_images=2, size=6, sigma=1.0, random_state=0)


def _five_features(X):
    """The same graphs with 5 node features instead of the data's own."""
    rng = np.random.default_rng(1)
    return [(rng.normal(size=(x[0].shape[0], 5)), x[1], x[2]) for x in X]


def _snapshot(model, X):
    return dict(vars(model)), model.predict(X), model.unary_.decision_function(X[0][0])


def _assert_unchanged(model, X, snapshot):
    attributes, predictions, scores = snapshot
    assert vars(model).keys() == attributes.keys()
    for name, value in attributes.items():
        if name.endswith("_") and not name.startswith("_"):
            assert getattr(model, name) is value, name     # the very objects of the last fit
    for got, want in zip(model.predict(X), predictions):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(model.unary_.decision_function(X[0][0]), scores)


# ----------------------------------------------------------------------------------------
# a failed fit leaves the model as it was
# ----------------------------------------------------------------------------------------
def test_bad_validation_data_leave_the_fitted_model_as_it_was(data):
    """The issue's first reproducer: the training data have 5 node features, X_val 2."""
    X, Y = data
    model = StructuredLogisticRegression(Linear(), Linear(), **KW).fit(X, Y)
    before = _snapshot(model, X)
    with pytest.raises(ValueError, match="X_val has 2 node features, the model expects 5"):
        model.fit(_five_features(X), Y, X_val=X, Y_val=Y)
    _assert_unchanged(model, X, before)
    assert model.n_node_features_ == 2


def test_a_failed_refit_with_more_states_keeps_the_old_states(data):
    """The issue's second reproducer: the same with n_states=3."""
    X, Y = data
    model = StructuredLogisticRegression(Linear(), Linear(), **KW).fit(X, Y)
    before = _snapshot(model, X)
    with pytest.raises(ValueError, match="X_val has 2 node features"):
        model.set_params(n_states=3).fit(_five_features(X), Y, X_val=X, Y_val=Y)
    _assert_unchanged(model, X, before)
    assert model.n_states_ == 2 and model.unary_.decision_function(X[0][0]).shape == (36, 2)


class _FailingLinear(Linear):
    """Linear whose second fit raises, as an oracle that fails mid-fit."""

    def fit(self, features, bias, labels):
        self.n_fits = getattr(self, "n_fits", 0) + 1
        if self.n_fits == 2:
            raise RuntimeError("the oracle failed at its second fit")
        return super().fit(features, bias, labels)


@pytest.mark.parametrize("change, error", [
    (dict(unary=_FailingLinear()), RuntimeError),          # raises in iteration 2
    (dict(pairwise=_FailingLinear(), max_iter=3), RuntimeError),
    (dict(max_iter=0), ValueError),
    (dict(predict_epsilon=-1.0), ValueError),
    (dict(unary="linear"), ValueError),
])
def test_a_fit_that_raises_midway_or_at_the_start_changes_nothing(data, change, error):
    X, Y = data
    model = StructuredLogisticRegression(Linear(), Linear(), **KW).fit(X, Y)
    before = _snapshot(model, X)
    trace = model.objective_trace_.copy()
    params = model.get_params(deep=False)
    with pytest.raises(error):
        model.set_params(**change).fit(X, Y)
    # predict reads the prediction settings as they are now: the fitted state is compared under the old ones
    model.set_params(**{name: params[name] for name in change})
    _assert_unchanged(model, X, before)
    assert model.objective_trace_.equals(trace)


def test_only_one_of_x_val_and_y_val_changes_nothing(data):
    X, Y = data
    model = StructuredLogisticRegression(Linear(), Linear(), **KW).fit(X, Y)
    before = _snapshot(model, X)
    with pytest.raises(ValueError, match="X_val and Y_val must be given together"):
        model.fit(_five_features(X), Y, X_val=X)
    _assert_unchanged(model, X, before)


def test_a_refit_that_succeeds_replaces_everything(data):
    """After a successful refit on other data the model is the one a fresh fit gives."""
    X, Y = data
    X5 = _five_features(X)
    refit = StructuredLogisticRegression(Linear(), Linear(), **KW).fit(X, Y).fit(X5, Y, X_val=X5, Y_val=Y)
    fresh = StructuredLogisticRegression(Linear(), Linear(), **KW).fit(X5, Y, X_val=X5, Y_val=Y)
    assert refit.n_node_features_ == 5
    np.testing.assert_array_equal(refit.objective_trace_["objective"], fresh.objective_trace_["objective"])
    columns = ["objective", "train_error", "val_error"]
    np.testing.assert_array_equal(refit.history_[columns], fresh.history_[columns])


def test_commit_fit_removes_what_the_previous_fit_left():
    class Estimator(StructuredEstimator):
        pass

    estimator = Estimator()
    estimator._commit_fit({"a_": 1, "b_": 2, "_private": 3})
    estimator._commit_fit({"a_": 4})
    assert vars(estimator) == {"a_": 4, "_fitted_names": ("a_",)}


def test_fit_history_measures_errors_with_the_decoder_it_is_given(data):
    X, Y = data
    train, val = FlatData(X, Y), FlatData(X[:1], Y[:1])
    history = FitHistory(train, val)
    history.record(0, 5.0)
    zeros = history.record(1, 4.0, decode=lambda d: np.zeros(d.labels.shape[0], dtype=np.int64),
                           monitor_train=True)
    assert zeros["train_error"] == np.mean(train.labels != 0) and zeros["val_error"] == np.mean(val.labels != 0)
    frame = history.frame()
    assert frame["objective"].tolist() == [5.0, 4.0] and np.isnan(frame["train_error"].iloc[0])
    assert np.all(np.diff(frame["seconds"]) >= 0)


# ----------------------------------------------------------------------------------------
# threads
# ----------------------------------------------------------------------------------------
def test_the_inference_functions_take_n_jobs():
    rng = np.random.default_rng(0)
    batch = GraphBatch.from_graphs([(3, [[0, 1], [1, 2]]), (2, [[0, 1]])], 2)
    tn, te = rng.normal(size=(5, 2)), rng.normal(size=(3, 2, 2))
    labels = np.array([0, 1, 1, 0, 1])
    new = batch_sweeps(batch, tn, te, 0.5, n_jobs=1).messages
    calls = {
        "batch_sweeps": lambda **kw: batch_sweeps(batch, tn, te, 0.5, **kw).messages,
        "batch_dual_values": lambda **kw: batch_dual_values(batch, tn, te, new, 0.5, **kw),
        "batch_dual_parts": lambda **kw: np.stack(batch_dual_parts(batch, tn, te, new, 0.5, **kw)),
        "structured_objective": lambda **kw: structured_objective(batch, tn, te, new, labels, 0.5, **kw),
    }
    for name, call in calls.items():
        np.testing.assert_array_equal(call(n_jobs=1), call(n_jobs=2))
        np.testing.assert_array_equal(call(n_jobs=-1), call(n_jobs=None))
        with pytest.raises(ValueError, match=r"^n_jobs must be None, -1 \(all cores\) or an integer"):
            call(n_jobs=0)
    assert resolve_threads(-1) == resolve_threads(None) >= 1 and resolve_threads(np.int64(3)) == 3


def test_n_jobs_minus_one_is_every_core(data):
    X, Y = data
    everything = StructuredLogisticRegression(Linear(), Linear(), max_iter=2, n_jobs=-1, random_state=0).fit(X, Y)
    one = StructuredLogisticRegression(Linear(), Linear(), max_iter=2, n_jobs=1, random_state=0).fit(X, Y)
    np.testing.assert_array_equal(everything.objective_trace_["objective"], one.objective_trace_["objective"])


@pytest.mark.parametrize("kw, message", [
    (dict(inference="grid"), r"^inference must be one of \('auto', 'chain', 'lp'\), got 'grid'"),
    (dict(max_sweeps=-1), "^max_sweeps must be an integer"),
    (dict(epsilon=-1.0), "^epsilon must be finite and >= 0"),
    (dict(tol=float("nan")), "^tol must be finite"),
    (dict(n_jobs=0), "^n_jobs must be None, -1 \\(all cores\\) or an integer"),
])
def test_pairwise_model_refuses_bad_settings_by_name(kw, message):
    with pytest.raises(ValueError, match=message):
        PairwiseModel(**kw)


# ----------------------------------------------------------------------------------------
# the oracle tag training_scores
# ----------------------------------------------------------------------------------------
class _CountingLinear(Linear):
    """Linear that counts decision_function calls; with ``keep`` it declares and keeps its training scores."""

    keep = False

    def __slr_tags__(self):
        return dataclasses.replace(super().__slr_tags__(), training_scores=self.keep)

    def fit(self, features, bias, labels):
        super().fit(features, bias, labels)
        if self.keep:
            self.training_scores_ = Linear.decision_function(self, features)
        return self

    def decision_function(self, features):
        self.n_predictions = getattr(self, "n_predictions", 0) + 1
        return super().decision_function(features)


class _KeepingLinear(_CountingLinear):
    keep = True


@pytest.mark.parametrize("relaxation", [1.0, 1.9])
def test_training_scores_replace_predicting_the_training_rows(data, relaxation):
    """With the tag the learner takes training_scores_ for the fitted functions (no
    decision_function on the training rows) and gets the same numbers bit for bit; relaxed
    steps, whose functions are not the fitted ones, still predict."""
    X, Y = data
    kw = dict(KW, max_iter=3, relaxation=relaxation)
    kept = StructuredLogisticRegression(_KeepingLinear(), _KeepingLinear(), **kw).fit(X, Y)
    plain = StructuredLogisticRegression(_CountingLinear(), _CountingLinear(), **kw).fit(X, Y)
    np.testing.assert_array_equal(kept.objective_trace_["objective"], plain.objective_trace_["objective"])
    np.testing.assert_array_equal(kept.history_["train_error"], plain.history_["train_error"])
    assert plain.unary_.n_predictions == 3 and plain.pairwise_.n_predictions == 3
    if relaxation == 1.0:
        assert not hasattr(kept.unary_, "n_predictions") and not hasattr(kept.pairwise_, "n_predictions")
    else:   # iteration 1 has nothing to relax from: its exact fit's scores are taken
        assert kept.unary_.n_predictions <= 2 and kept.pairwise_.n_predictions <= 2
    for a, b in zip(kept.predict(X), plain.predict(X)):
        np.testing.assert_array_equal(a, b)


def test_oracles_are_checked_before_anything_is_fitted(data):
    """An oracle's declared constraints are checked, and a malformed tag declaration is refused,
    before the other oracle is fitted."""
    fits = []

    class Recording(Linear):
        def fit(self, features, bias, labels):
            fits.append(1)
            return super().fit(features, bias, labels)

    class Malformed(Linear):
        def __slr_tags__(self):
            return {"training_scores": True}

    X, Y = data
    with pytest.raises(ValueError, match="^l2 must be finite and >= 0, got -1.0"):
        StructuredLogisticRegression(Recording(), Linear(l2=-1.0), **KW).fit(X, Y)
    with pytest.raises(ValueError, match=r"Malformed.__slr_tags__\(\) must return an OracleTags"):
        StructuredLogisticRegression(Recording(), Malformed(), **KW).fit(X, Y)
    assert fits == []
    StructuredLogisticRegression(Recording(), Linear(l2=1.0), **KW).fit(X, Y)
    assert len(fits) == KW["max_iter"]
