"""warm_start: a fit continued from the last one ends where one longer fit would."""
from __future__ import annotations

import numpy as np
import pytest

from slr import StructuredLogisticRegression
from slr.datasets import make_denoising
from slr.oracles import MLP, BoostedTrees, Constant, Linear


@pytest.fixture(scope="module")
def data():
    X, Y = make_denoising(n_images=3, size=10, sigma=1.5, random_state=0)
    Xv, Yv = make_denoising(n_images=2, size=10, sigma=1.5, random_state=1)
    return X, Y, Xv, Yv


ORACLES = {
    # Algorithm 1.1 (a continued joint solver restarts L-BFGS's memory: tests/learner/test_learner_solver.py)
    "linear-relaxed": lambda: dict(unary=Linear(l2=0.1), pairwise=Linear(l2=0.1), relaxation=1.8,
                                   solver="alternation"),
    "constant": lambda: dict(unary=Linear(), pairwise=Constant(), solver="alternation"),
    "trees": lambda: dict(unary=BoostedTrees(n_rounds=3, warm_start=True), pairwise=Constant()),
    "mlp": lambda: dict(unary=MLP(n_hidden=5, n_epochs=1), pairwise=Linear()),
}


@pytest.mark.parametrize("name", ORACLES)
def test_ten_then_ten_more_equal_twenty(name, data):
    _ten_then_ten(StructuredLogisticRegression, name, data)


@pytest.mark.parametrize("name", ["linear-relaxed", "constant"])
def test_the_dask_learners_ten_then_ten_more_equal_twenty(name, data, client):
    from slr.distributed import DaskStructuredLogisticRegression

    _ten_then_ten(DaskStructuredLogisticRegression, name, data)


def _ten_then_ten(learner, name, data):
    X, Y, Xv, Yv = data
    rule = dict(tol=0, early_stopping=False)   # the sweeps stop on progress, as by default
    whole = learner(**ORACLES[name](), **rule, max_iter=8, n_jobs=1, random_state=0)
    whole.fit(X, Y, X_val=Xv, Y_val=Yv)
    parts = learner(**ORACLES[name](), **rule, max_iter=4, n_jobs=1, random_state=0)
    parts.fit(X, Y, X_val=Xv, Y_val=Yv).set_params(max_iter=8, warm_start=True).fit(X, Y, X_val=Xv, Y_val=Yv)
    for column in ("iteration", "objective", "train_error", "val_error"):
        np.testing.assert_array_equal(parts.history_[column], whole.history_[column])
    np.testing.assert_array_equal(parts.objective_trace_["objective"], whole.objective_trace_["objective"])
    assert parts.history_["seconds"].is_monotonic_increasing
    assert parts.n_iter_ == whole.n_iter_ == 8 and parts.stop_reason_ == whole.stop_reason_ == "max_iter"
    assert parts.certificate_ == whole.certificate_
    for a, b in zip(parts.predict(Xv), whole.predict(Xv)):
        np.testing.assert_array_equal(a, b)


def test_continuing_on_other_data_keeps_the_functions_and_restarts_the_messages(data, learner_class):
    X, Y, Xv, Yv = data
    model = learner_class(Linear(), Linear(), max_iter=3, n_jobs=1).fit(X, Y)
    coef = model.unary_.coef_.copy()
    model.set_params(max_iter=4, warm_start=True).fit(Xv, Yv)
    assert len(model.history_) == 5 and model.history_["iteration"].tolist() == [0, 1, 2, 3, 4]
    # the continued fit starts from the fitted functions: its first unary fit warm-starts from them
    fresh = learner_class(Linear(), Linear(), max_iter=1, n_jobs=1).fit(Xv, Yv)
    assert not np.array_equal(model.unary_.coef_, fresh.unary_.coef_) and not np.array_equal(model.unary_.coef_, coef)


def test_a_warm_start_cannot_go_back_and_a_failed_one_changes_nothing(data, learner_class):
    X, Y, Xv, Yv = data
    model = learner_class(Linear(), Constant(), max_iter=3, n_jobs=1).fit(X, Y)
    before = [p.copy() for p in model.predict(Xv)]
    with pytest.raises(ValueError, match="max_iter must be at least the 3 iterations done"):
        model.set_params(max_iter=2, warm_start=True).fit(X, Y)
    with pytest.raises(ValueError, match="X_val"):
        model.set_params(max_iter=5).fit(X, Y, X_val=[(x[0][:, :1], x[1], x[2]) for x in Xv], Y_val=Yv)
    assert len(model.history_) == 4
    for a, b in zip(model.predict(Xv), before):
        np.testing.assert_array_equal(a, b)


def test_a_warm_start_with_nothing_left_to_do_changes_nothing(data, learner_class):
    X, Y, Xv, Yv = data
    model = learner_class(Linear(), Constant(), max_iter=3, n_jobs=1).fit(X, Y)
    certificate, history = model.certificate_, model.history_
    model.set_params(warm_start=True).fit(X, Y)
    assert model.certificate_ is certificate and model.history_ is history
