"""``fit(..., callback=)``: an observer of every iteration that does not steer the fit."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import slr.estimator
from slr import StructuredLogisticRegression
from slr.datasets import make_denoising
from slr.learner import Iterate
from slr.oracles import Linear


@pytest.fixture(scope="module")
def data():
    X, Y = make_denoising(n_images=3, size=8, sigma=1.5, random_state=0)
    Xt, Yt = make_denoising(n_images=2, size=8, sigma=1.5, random_state=1)
    return X, Y, Xt, Yt


def _model(solver, learner=StructuredLogisticRegression, **kw):
    return learner(Linear(), Linear(), tol=0, n_jobs=1, random_state=0, solver=solver, **kw)


def _recorder(Xt, Yt):
    seen = []

    def record(it: Iterate) -> None:
        seen.append((it.iteration, it.objective, it.seconds, it.score(Xt, Yt), it.predict(Xt)))
    return seen, record


@pytest.mark.parametrize("solver", ["alternation", "joint"])
def test_the_callback_sees_every_iterate_as_a_model_stopped_there(data, solver):
    _sees_every_iterate(data, solver, StructuredLogisticRegression)


def test_the_dask_learners_callback_sees_every_iterate_as_a_model_stopped_there(data, client):
    from slr.distributed import DaskStructuredLogisticRegression

    _sees_every_iterate(data, "alternation", DaskStructuredLogisticRegression)


def _sees_every_iterate(data, solver, learner):
    X, Y, Xt, Yt = data
    seen, record = _recorder(Xt, Yt)
    model = _model(solver, learner, max_iter=4).fit(X, Y, callback=record)
    assert [s[0] for s in seen] == [1, 2, 3, 4]
    history = model.history_.set_index("iteration")
    for t, objective, seconds, score, labels in seen:
        assert objective == history["objective"][t] and seconds == history["seconds"][t]
        stopped = _model(solver, learner, max_iter=t).fit(X, Y)   # a fit of t iterations, scored independently
        assert score == stopped.score(Xt, Yt)
        for a, b in zip(labels, stopped.predict(Xt)):
            np.testing.assert_array_equal(a, b)
    unobserved = _model(solver, learner, max_iter=4).fit(X, Y)   # observing changes nothing
    np.testing.assert_array_equal(unobserved.history_["objective"], model.history_["objective"])
    np.testing.assert_array_equal(unobserved.unary_.coef_, model.unary_.coef_)


def test_a_continued_fit_calls_back_for_its_own_iterations(data, learner_class):
    X, Y, Xt, Yt = data
    whole_seen, record = _recorder(Xt, Yt)
    _model("alternation", learner_class, max_iter=5).fit(X, Y, callback=record)
    parts_seen, record = _recorder(Xt, Yt)
    model = _model("alternation", learner_class, max_iter=2).fit(X, Y)
    model.set_params(warm_start=True, max_iter=5).fit(X, Y, callback=record)
    assert [s[0] for s in parts_seen] == [3, 4, 5]
    assert [s[3] for s in parts_seen] == [s[3] for s in whole_seen[2:]]
    assert [s[1] for s in parts_seen] == pytest.approx([s[1] for s in whole_seen[2:]], rel=1e-12)


def test_the_callback_sees_early_stoppings_iterations_and_the_model_keeps_the_best(data, learner_class):
    X, Y, Xt, Yt = data
    Xv, Yv = make_denoising(n_images=2, size=8, sigma=1.5, random_state=2)
    scores = []
    model = _model("alternation", learner_class, max_iter=30, n_iter_no_change=2).fit(
        X, Y, X_val=Xv, Y_val=Yv, callback=lambda it: scores.append(it.score(Xv, Yv)))
    assert len(scores) == model.n_iter_
    assert model.score(Xv, Yv) == scores[model.best_iteration_ - 1] == max(scores)


class _Clock:
    """A stand-in for time.perf_counter: a millisecond per reading, and what a callback spends."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 1e-3
        return self.now


def test_the_callbacks_time_is_left_out_of_the_fit_time(data, monkeypatch):
    X, Y, _, _ = data
    clock = _Clock()
    monkeypatch.setattr(slr.estimator, "time", clock)

    def slow(it: Iterate) -> None:
        clock.now += 1000.0   # a callback that takes 1000 s

    model = _model("alternation", max_iter=3).fit(X, Y, callback=slow)
    history = model.history_
    assert history["seconds"].iloc[-1] < 1.0   # three 1000 s callbacks ran and are not in it
    assert (history["eval_seconds"].iloc[1:] >= 1000.0).all() and history["eval_seconds"].iloc[0] < 1.0


def test_a_bad_callback_is_refused_by_name(data):
    X, Y, _, _ = data
    with pytest.raises(ValueError, match="callback must be a callable taking an Iterate, or None, got 3"):
        _model("alternation", max_iter=2).fit(X, Y, callback=3)


def test_the_callbacks_exception_propagates_and_leaves_the_model_as_it_was(data, learner_class):
    X, Y, _, _ = data
    model = _model("alternation", learner_class, max_iter=2).fit(X, Y)
    before = model.unary_.coef_.copy()

    def failing(it: Iterate) -> None:
        if it.iteration == 2:
            raise KeyError("from the callback")

    with pytest.raises(KeyError, match="from the callback"):
        model.set_params(max_iter=3).fit(X, Y, callback=failing)
    assert model.n_iter_ == 2 and np.array_equal(model.unary_.coef_, before)


def test_an_iterate_predicts_only_during_its_call_and_the_model_does_not_keep_the_callback(data):
    X, Y, Xt, _ = data
    kept = []
    model = _model("alternation", max_iter=2).fit(X, Y, callback=lambda it: kept.append(it))   # a lambda
    with pytest.raises(RuntimeError, match="the Iterate of iteration 1 predicts only during its callback"):
        kept[0].predict(Xt)
    assert "callback" not in model.get_params()
    assert pickle.loads(pickle.dumps(model)).n_iter_ == 2
