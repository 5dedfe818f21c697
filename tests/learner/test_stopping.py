"""When learning stops: the stopping rule on R (tol), the cap (max_iter), early stopping on validation
error, and message passing that stops on progress (sweep_tol)."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from slr import StructuredLogisticRegression
from slr.data import GraphBatch
from slr.datasets import make_denoising
from slr.inference import batch_sweeps
from slr._progress import BestIteration
from slr.learner import structured_objective
from slr.oracles import Constant, Linear

EPS = 0.1


@pytest.fixture(scope="module")
def data():
    X, Y = make_denoising(n_images=3, size=10, sigma=1.5, random_state=0)
    Xv, Yv = make_denoising(n_images=2, size=10, sigma=1.5, random_state=1)
    return X, Y, Xv, Yv


def _rule_holds(R, t, tol):
    """The documented rule, written out: over the last three iterations R fell by less than
    3 * tol * max(R_{t-3}, R_t, 1)."""
    return t >= 3 and R[t - 3] - R[t] < 3 * tol * max(R[t - 3], R[t], 1.0)


def test_the_rule_stops_at_the_first_iteration_it_holds_without_a_warning(data):
    X, Y, _, _ = data
    tol = 1e-3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = StructuredLogisticRegression(Linear(l2=0.1), Constant(), tol=tol, n_jobs=1).fit(X, Y)
    # the rule reads J (R plus the ridge terms) after each iteration: the trace's last row of each,
    # leaving out the joint solver's final settling sweeps (after the rule has stopped it)
    trace = model.objective_trace_[model.objective_trace_["stage"] != "joint_mp"]
    R = trace.groupby("iteration", sort=False)["penalised"].last().to_numpy()
    n = model.n_iter_
    assert model.stop_reason_ == "tol" and 3 <= n < model.max_iter and len(R) == n + 1
    assert _rule_holds(R, n, tol) and not any(_rule_holds(R, t, tol) for t in range(n))
    assert model.certificate_.stop_reason == "tol" and model.certificate_.n_iter == n
    assert model.best_iteration_ is None


def test_the_cap_warns_unless_the_rule_is_off(data):
    X, Y, _, _ = data
    model = StructuredLogisticRegression(Linear(), Constant(), max_iter=2, n_jobs=1)
    with pytest.warns(ConvergenceWarning,
                      match="max_iter=2 before the objective's relative decrease fell below tol=0.0001"):
        model.fit(X, Y)
    assert model.stop_reason_ == "max_iter" and model.n_iter_ == 2 and model.certificate_.stop_reason == "max_iter"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.set_params(tol=0).fit(X, Y)
    assert model.stop_reason_ == "max_iter" and model.n_iter_ == 2


def test_early_stopping_keeps_the_iteration_with_the_lowest_validation_error(data):
    X, Y, Xv, Yv = data
    kw = dict(unary=Linear(), pairwise=Linear(), epsilon=EPS, tol=0, n_jobs=1, random_state=0, solver="alternation")
    model = StructuredLogisticRegression(**kw, n_iter_no_change=3).fit(X, Y, X_val=Xv, Y_val=Yv)  # "auto": on
    errors = model.history_.set_index("iteration")["val_error"].iloc[1:]
    best = int(errors[errors == errors.min()].index.max())   # the last of the lowest
    assert model.stop_reason_ == "early_stopping" and model.best_iteration_ == best
    assert model.n_iter_ == best + 3 == model.history_["iteration"].iloc[-1]
    assert 1.0 - model.score(Xv, Yv) == pytest.approx(errors[best], abs=1e-12)
    assert model.certificate_.objective == model.history_["objective"][best]
    short = StructuredLogisticRegression(**kw, max_iter=best, early_stopping=False).fit(X, Y)
    for a, b in zip(model.predict(Xv), short.predict(Xv)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(model.unary_.coef_, short.unary_.coef_)


def _early_stop(errors, patience, plateau=4):
    """The documented rule, written out: the first iteration t (1-based) at which the error has been
    above its lowest for ``patience`` iterations, or has not fallen below the lowest for ``plateau *
    patience`` iterations since it first reached it; with the last iteration at the lowest up to t.
    None when it never holds."""
    for t in range(1, len(errors) + 1):
        seen = errors[:t]
        lowest = min(seen)
        last = max(k + 1 for k, e in enumerate(seen) if e == lowest)
        first = min(k + 1 for k, e in enumerate(seen) if e == lowest)
        if t - last >= patience or t - first >= plateau * patience:
            return t, last
    return None


class _State:
    """What BestIteration snapshots: here the iteration it was taken at."""

    def __init__(self) -> None:
        self.iteration = 0

    def snapshot(self) -> int:
        return self.iteration


@pytest.mark.parametrize("errors, patience, stop, kept", [
    # a plateau at the lowest: 4 * 2 iterations after the lowest was first reached (iteration 3)
    ([.5, .4, .3, .3, .3, .3, .3, .3, .3, .3, .3, .3, .3], 2, 11, 11),
    # a rise: 2 iterations above the lowest of iteration 2
    ([.5, .3, .4, .4, .3], 2, 4, 2),
    # a long plateau, then a late strict improvement (iteration 8) restarts the plateau's count
    ([.5, .3, .3, .3, .3, .3, .3, .2, .2, .2, .2, .2, .2, .2, .2, .2, .2, .2], 2, 16, 16),
    # back to the lowest after each rise: the rise never lasts 3 iterations, the plateau count runs on
    ([.3, .4, .4, .3, .4, .3, .3, .4, .4, .3, .5, .5, .3, .5], 3, 13, 13),
    # the lowest at iteration 1, above it after: patience 1 stops at once
    ([.2, .3], 1, 2, 1),
    # never stops within the sequence: a rise shorter than the patience, a plateau shorter than 4x it
    ([.5, .4, .4, .4, .5, .3, .3], 3, None, None),
])
def test_early_stopping_ends_a_rise_after_the_patience_and_a_plateau_after_four_times_it(errors, patience, stop,
                                                                                        kept):
    expected = _early_stop(errors, patience)
    assert expected == (None if stop is None else (stop, kept))   # the cases, checked against the written-out rule
    best, state = BestIteration(patience), _State()
    for t, error in enumerate(errors, start=1):
        state.iteration = t
        if best.update(t, error, state):
            assert (t, best.iteration, best.snapshot, best.error) == (stop, kept, kept, min(errors[:t]))
            return
    assert stop is None


def test_a_plateau_at_the_lowest_validation_error_stops_the_fit_before_the_cap():
    """The held-out error settles at its lowest and stays there: the fit stops 4 * n_iter_no_change
    iterations after that error was first reached, where a rule waiting for a rise ran to the cap."""
    X, Y = make_denoising(n_images=3, size=10, sigma=0.8, random_state=0)
    Xv, Yv = make_denoising(n_images=2, size=10, sigma=0.8, random_state=1)
    kw = dict(unary=Linear(), pairwise=Linear(), tol=0, n_jobs=1, random_state=0, solver="alternation")
    model = StructuredLogisticRegression(**kw, n_iter_no_change=2, max_iter=60).fit(X, Y, X_val=Xv, Y_val=Yv)
    errors = model.history_["val_error"].iloc[1:].tolist()
    assert model.stop_reason_ == "early_stopping" and model.n_iter_ < 60
    assert (model.n_iter_, model.best_iteration_) == _early_stop(errors, 2)
    first = errors.index(min(errors)) + 1
    assert model.n_iter_ == first + 4 * 2 == model.best_iteration_
    assert errors[first - 1:] == [min(errors)] * (model.n_iter_ - first + 1)   # level at the lowest: no rise
    short = StructuredLogisticRegression(**kw, max_iter=model.n_iter_, early_stopping=False).fit(X, Y)
    np.testing.assert_array_equal(model.unary_.coef_, short.unary_.coef_)


def test_a_held_out_fraction_is_fitting_on_the_rest_and_validating_on_it():
    X, Y = make_denoising(n_images=7, size=8, sigma=1.5, random_state=2)
    kw = dict(unary=Linear(), pairwise=Constant(), tol=0, n_iter_no_change=2, n_jobs=1, random_state=4)
    model = StructuredLogisticRegression(**kw, early_stopping=True, validation_fraction=0.25).fit(X, Y)
    fit_on, held_out = model._validation_split
    assert len(held_out) == math.ceil(0.25 * 7) and sorted({*fit_on, *held_out}) == list(range(7))
    explicit = StructuredLogisticRegression(**kw).fit([X[k] for k in fit_on], [Y[k] for k in fit_on],
                                                      X_val=[X[k] for k in held_out], Y_val=[Y[k] for k in held_out])
    np.testing.assert_array_equal(model.history_["val_error"], explicit.history_["val_error"])
    assert model.best_iteration_ == explicit.best_iteration_
    np.testing.assert_array_equal(model.unary_.coef_, explicit.unary_.coef_)


def test_a_warm_start_continues_from_the_kept_iteration(data):
    X, Y, Xv, Yv = data
    kw = dict(unary=Linear(), pairwise=Linear(), epsilon=EPS, tol=0, n_jobs=1, random_state=0, solver="alternation")
    model = StructuredLogisticRegression(**kw, n_iter_no_change=3).fit(X, Y, X_val=Xv, Y_val=Yv)
    best = model.best_iteration_
    model.set_params(warm_start=True, early_stopping=False, max_iter=best + 2).fit(X, Y, X_val=Xv, Y_val=Yv)
    assert model.history_["iteration"].tolist() == list(range(best + 3))
    longer = StructuredLogisticRegression(**kw, max_iter=best + 2, early_stopping=False).fit(X, Y, X_val=Xv, Y_val=Yv)
    np.testing.assert_array_equal(model.history_["objective"], longer.history_["objective"])
    np.testing.assert_array_equal(model.unary_.coef_, longer.unary_.coef_)


def _chunked_sweeps(batch, tn, te, lam, labels, start, after_fit, sweep_tol, max_sweeps):
    """The documented progress rule, replayed: pairs of sweeps until a pair gains no more than
    sweep_tol times what the half step gained before it. Returns R and the sweeps per example."""
    value, total = after_fit, np.zeros(batch.n_examples, dtype=int)
    for _ in range(0, max_sweeps, 2):
        run = batch_sweeps(batch, tn, te, EPS, max_sweeps=2, tol=1e-9, n_jobs=1, out=lam)
        total += run.n_sweeps
        new = structured_objective(batch, tn, te, lam, labels, EPS, n_jobs=1)
        gained, gain = start - value, value - new
        value = new
        if run.converged.all() or gain <= sweep_tol * max(gained, 0.0):
            break
    return value, total


def test_sweeps_stop_when_a_pair_gains_little_against_the_half_step(data):
    X, Y, _, _ = data
    sweep_tol, max_sweeps = 0.1, 50
    model = StructuredLogisticRegression(Constant(tol=1e-12), Linear(tol=1e-12), epsilon=EPS, max_iter=1, tol=0,
                                         max_sweeps=max_sweeps, sweep_tol=sweep_tol, n_jobs=1,
                                         solver="alternation").fit(X, Y)
    trace = model.objective_trace_.set_index("stage")["objective"]
    batch = GraphBatch.from_dataset(X, 2)
    labels = np.concatenate(Y)
    delta = 1.0 - np.eye(2)[labels]
    lam = np.zeros((batch.n_edges, 2, 2))
    tn = EPS * model.unary_.decision_function(np.concatenate([x[0] for x in X])) + delta
    R, _ = _chunked_sweeps(batch, tn, np.zeros((batch.n_edges, 2, 2)), lam, labels, trace["start"],
                           trace["unary_fit"], sweep_tol, max_sweeps)
    assert R == pytest.approx(trace["unary_mp"], rel=1e-12)
    te = (EPS * model.pairwise_.decision_function(np.concatenate([x[2] for x in X]))).reshape(-1, 2, 2)
    R, sweeps = _chunked_sweeps(batch, tn, te, lam, labels, trace["unary_mp"], trace["pairwise_fit"], sweep_tol,
                                max_sweeps)
    assert R == pytest.approx(trace["pairwise_mp"], rel=1e-12)
    assert model.certificate_.last_sweeps == sweeps.max() < max_sweeps   # the rule, not the cap, stopped them
    assert not model.certificate_.sweeps_converged
    exhaustive = StructuredLogisticRegression(Constant(tol=1e-12), Linear(tol=1e-12), epsilon=EPS, max_iter=1, tol=0,
                                              max_sweeps=max_sweeps, sweep_tol=0, n_jobs=1,
                                              solver="alternation").fit(X, Y)
    assert exhaustive.objective_trace_["objective"].iloc[2] <= trace["unary_mp"]   # more sweeps, lower R


@pytest.mark.parametrize("name, value, message", [
    ("tol", -1e-4, "tol must be finite and >= 0"),
    ("sweep_tol", -0.1, "sweep_tol must be finite and >= 0"),
    ("sweep_tol", float("nan"), "sweep_tol must be finite"),
    ("early_stopping", "yes", "early_stopping"),
    ("validation_fraction", 0.0, "validation_fraction"),
    ("validation_fraction", 1.0, "validation_fraction"),
    ("n_iter_no_change", 0, "n_iter_no_change"),
])
def test_bad_stopping_parameters_are_refused_by_name(data, name, value, message):
    X, Y, _, _ = data
    with pytest.raises(ValueError, match=message):
        StructuredLogisticRegression(**{name: value}).fit(X, Y)


def test_a_fraction_that_leaves_nothing_to_train_on_is_refused(data):
    X, Y, _, _ = data
    model = StructuredLogisticRegression(early_stopping=True, validation_fraction=0.9)
    with pytest.raises(ValueError, match="validation_fraction=0.9 holds out all 3 examples"):
        model.fit(X, Y)
    assert not hasattr(model, "history_")
