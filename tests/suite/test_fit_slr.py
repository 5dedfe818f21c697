"""The suite's slr rows: fitted on the training examples alone, the test curve recorded by callback."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from slr.datasets.synthetic import make_structured
from slr.oracles import MLP, Constant, Linear
from slr.suite.common import hold_out
from slr.suite.denoising import DenoisingData
from slr.suite.methods import SPECS, default_regularisation, fit_method, fit_slr, validated_iterations
from slr.suite.oracles import defaults_learner


def _data(n_train: int) -> tuple:
    X, Y = make_structured(n_train + 6, graph="chain", n_nodes=8, n_states=3, coupling=1.0, noise=2.0, random_state=3)
    return X[:n_train], Y[:n_train], X[n_train:], Y[n_train:], 3


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")   # max_iter=12: a short fit
@pytest.mark.parametrize("unary, n_train", [(Linear(), 8), (MLP(n_hidden=10), 20)])
def test_the_test_examples_choose_nothing_and_the_curve_is_each_iterations_test_error(unary, n_train):
    data = _data(n_train)
    Xtr, Ytr, Xte, Yte, _ = data
    kw = dict(unary=unary, pairwise=Constant(), n_jobs=1, random_state=0, max_iter=12)
    model = defaults_learner(**kw)
    row, seconds, errors = fit_slr(model, data)
    alone = defaults_learner(**kw).fit(Xtr, Ytr)   # the same fit without the suite's recording
    for a, b in zip(model.predict(Xte), alone.predict(Xte)):
        np.testing.assert_array_equal(a, b)
    assert row["test_error"] == 1.0 - alone.score(Xte, Yte) and row["iterations"] == alone.n_iter_
    assert (model.best_iteration_ is not None) == (n_train == 20)   # MLP with 20 examples: "auto" holds 2 out
    assert len(errors) == len(seconds) == model.n_iter_ and np.all(np.diff(seconds) >= 0)
    np.testing.assert_array_equal(seconds, model.history_["seconds"].iloc[1:])
    for t in (1, model.n_iter_):   # the curve: the test error of the model after iteration t
        stopped = defaults_learner(**{**kw, "max_iter": t}, tol=0, early_stopping=False)
        stopped.fit(*(([Xtr[k] for k in model._validation_split[0]], [Ytr[k] for k in model._validation_split[0]])
                      if model._validation_split is not None else (Xtr, Ytr)))
        assert errors[t - 1] == pytest.approx(1.0 - stopped.score(Xte, Yte), abs=1e-12)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")   # capped fits
def test_a_validated_iteration_count_is_the_last_lowest_validation_error_of_the_fit_on_four_fifths():
    # a validation error that falls, stays at its low from iteration 2 to 11, and rises at 12
    Xtr, Ytr = make_structured(10, graph="chain", n_nodes=8, n_states=3, coupling=1.0, noise=1.0, random_state=3)
    kw = dict(unary=Linear(l2=1e-3), pairwise=Linear(l2=1e-3), n_jobs=1, random_state=0, tol=1e-6,
              n_iter_no_change=3)
    count = validated_iterations(lambda cap: defaults_learner(**kw, max_iter=cap or 20), Xtr, Ytr)
    X_fit, Y_fit, X_val, Y_val = hold_out(Xtr, Ytr, 0)
    errors = []   # the validation error after every iteration of a fit that early stopping does not end
    plain = defaults_learner(**kw, max_iter=20, early_stopping=False)
    plain.fit(X_fit, Y_fit, callback=lambda iterate: errors.append(1.0 - iterate.score(X_val, Y_val)))
    probe = defaults_learner(**kw, max_iter=20).fit(X_fit, Y_fit, X_val, Y_val)
    seen = np.asarray(errors[:probe.n_iter_])
    assert count == 1 + int(np.flatnonzero(seen == seen.min())[-1])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_row_with_a_validated_iteration_count_refits_all_training_examples_with_that_cap():
    spec = dataclasses.replace(SPECS["tiny"], denoise=DenoisingData(n_train=5, n_test=2, size=12, sigma=3.0),
                               slr_max_iter=8, slr_validated=dict(denoising=("slr:Boost",)))
    data = spec.load("denoising")
    Xtr, Ytr, Xte, Yte, n_states = data
    reg = default_regularisation("denoising")
    row, _, _ = fit_method("slr", "slr:Boost", "denoising", data, spec, reg, 1)
    probe = spec.slr_learner("slr:Boost", "denoising", n_states, 1, reg)
    probe.fit(*hold_out(Xtr, Ytr, 0))   # four fifths, the fifth as validation examples
    refit = spec.slr_learner("slr:Boost", "denoising", n_states, 1, reg, max_iter=probe.best_iteration_)
    refit.fit(Xtr, Ytr)
    assert row["iterations"] == refit.n_iter_ <= probe.best_iteration_ < probe.n_iter_   # the choice caps the row
    assert row["test_error"] == 1.0 - refit.score(Xte, Yte)
    assert spec.method_config("denoising", "slr", "slr:Boost", reg) != SPECS["tiny"].method_config(
        "denoising", "slr", "slr:Boost", reg)   # the choice enters the cell's key
