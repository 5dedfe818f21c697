"""Monitoring's schedule (``monitor="auto"``): where the training decode costs sweeps, the training
error of iterations 1, 2, 4, 8, ... and of the kept model, each exactly ``predict``'s; every iteration
on chains; no effect on the fit."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from slr import StructuredLogisticRegression
from slr.datasets import make_denoising
from slr.datasets.synthetic import make_structured
from slr._alternation import _KEPT_DECODES
from slr.oracles import Linear


def _fit(X, Y, *fit_args, **params):
    """A fit, and 1 - its Iterate's score of (X, Y) after every iteration (predict's decode at each)."""
    scores = {}
    model = StructuredLogisticRegression(Linear(l2=0.1), Linear(l2=0.1), n_jobs=1, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, Y, *fit_args, callback=lambda it: scores.update({it.iteration: 1.0 - it.score(X, Y)}))
    return model, scores


@pytest.mark.parametrize("solver", ["joint", "alternation"])
def test_auto_measures_powers_of_two_and_the_last_iteration_on_grids(solver):
    X, Y = make_denoising(n_images=2, size=10, sigma=2.0, random_state=0)
    model, scores = _fit(X, Y, max_iter=6, tol=0, early_stopping=False, solver=solver)
    history = model.history_.set_index("iteration")["train_error"]
    assert history.index.tolist() == list(range(7))
    measured = history.dropna()
    assert measured.index.tolist() == [1, 2, 4, 6]
    for iteration, error in measured.items():   # predict's error of the model then, independently
        assert error == pytest.approx(scores[iteration], abs=1e-12)
    assert measured[6] == pytest.approx(1.0 - model.score(X, Y), abs=1e-12)


def test_auto_measures_every_iteration_on_chains():
    X, Y = make_structured(8, graph="chain", n_nodes=7, n_states=3, coupling=1.5, random_state=0)
    model, scores = _fit(X, Y, max_iter=5, tol=0, early_stopping=False)
    rows = model.history_[model.history_["iteration"] > 0]
    np.testing.assert_allclose(rows["train_error"], [scores[i] for i in rows["iteration"]], rtol=0, atol=1e-12)


def _loopy(n: int, seed: int):
    return make_structured(n, graph="random", n_nodes=12, n_states=3, coupling=1.5, noise=0.8, random_state=seed)


@pytest.mark.parametrize("solver", ["joint", "alternation"])
def test_monitoring_changes_no_fit_and_the_kept_row_is_predicts(solver):
    X, Y = _loopy(12, 0)
    Xv, Yv = _loopy(6, 1)
    # early stopping on the validation data (its decodes exact in every mode) keeps an earlier model
    params = dict(epsilon=0.1, max_iter=40, tol=0, n_iter_no_change=2, solver=solver)
    fits = {monitor: _fit(X, Y, Xv, Yv, monitor=monitor, **params)[0] for monitor in ("auto", True, False)}
    auto = fits["auto"]
    assert auto.best_iteration_ < auto.n_iter_
    for other in (fits[True], fits[False]):
        np.testing.assert_array_equal(auto.unary_.coef_, other.unary_.coef_)
        np.testing.assert_array_equal(auto.pairwise_.coef_, other.pairwise_.coef_)
        np.testing.assert_array_equal(auto.objective_trace_["penalised"], other.objective_trace_["penalised"])
        np.testing.assert_array_equal(auto.history_["val_error"], other.history_["val_error"])
        assert (auto.n_iter_, auto.stop_reason_, auto.best_iteration_) == \
            (other.n_iter_, other.stop_reason_, other.best_iteration_)
    assert fits[False].history_["train_error"].isna().all()
    exact = fits[True].history_["train_error"]
    measured = auto.history_["train_error"].notna()
    np.testing.assert_array_equal(auto.history_["train_error"][measured], exact[measured])
    kept = auto.history_["iteration"] == auto.best_iteration_
    assert measured[kept].item()
    assert auto.history_.loc[kept, "train_error"].item() == pytest.approx(1.0 - auto.score(X, Y), abs=1e-12)


def test_the_kept_row_scores_the_labelled_nodes_only():
    X, Y = make_denoising(n_images=2, size=10, sigma=2.0, random_state=0)
    Y = [np.where(np.arange(y.size) % 3 == 0, -1, y) for y in Y]
    model = StructuredLogisticRegression(max_iter=3, tol=0, n_jobs=1, early_stopping=False,
                                         max_sweeps=20).fit(X, Y)
    predicted, truth = np.concatenate(model.predict(X)), np.concatenate(Y)
    labelled = truth >= 0
    assert model.history_["train_error"].iloc[-1] == pytest.approx(
        np.mean(predicted[labelled] != truth[labelled]), abs=1e-12)
    assert np.isnan(model.history_["train_error"].iloc[0])


@pytest.mark.parametrize("monitor", ["every", 1, None])
def test_monitor_is_checked(monitor):
    X, Y = make_denoising(n_images=1, size=6, sigma=2.0, random_state=0)
    with pytest.raises(ValueError, match="monitor"):
        StructuredLogisticRegression(monitor=monitor, max_iter=1).fit(X, Y)


def test_the_monitor_and_an_iterate_decode_each_data_set_from_its_last_decodes_messages(monkeypatch):
    import slr.models

    X, Y = make_denoising(n_images=2, size=12, sigma=3.0, random_state=0)
    Xv, Yv = make_denoising(n_images=1, size=8, sigma=3.0, random_state=1)
    Xc, Yc = make_denoising(n_images=1, size=10, sigma=3.0, random_state=2)   # an Iterate's
    starts, ends = [], {}
    decode = slr.models.batch_map

    def checked(batch, theta_nodes, theta_edges, messages, **kwargs):
        # every decode starts where the last decode of the same data ended (zeros at first)
        np.testing.assert_array_equal(messages, ends.get(batch.n_nodes, np.zeros_like(messages)))
        starts.append((batch.n_nodes, messages.copy()))
        result = decode(batch, theta_nodes, theta_edges, messages, **kwargs)
        ends[batch.n_nodes] = messages.copy()
        return result

    scores = []
    monkeypatch.setattr(slr.models, "batch_map", checked)
    model = StructuredLogisticRegression(Linear(), Linear(), n_jobs=1, max_iter=4, tol=0, monitor=True,
                                         early_stopping=False)
    model.fit(X, Y, Xv, Yv, callback=lambda it: scores.append(it.score(Xc, Yc)))
    assert sorted({n for n, _ in starts}) == [64, 100, 288]
    assert len(starts) == 3 * 4 and any(m.any() for n, m in starts[3:])
    monkeypatch.undo()
    last = model.history_.iloc[-1]   # predict's labels, from zero messages (the LP certifies them here)
    assert last["train_error"] == pytest.approx(1.0 - model.score(X, Y), abs=1e-12)
    assert last["val_error"] == pytest.approx(1.0 - model.score(Xv, Yv), abs=1e-12)
    assert scores[-1] == pytest.approx(model.score(Xc, Yc), abs=1e-12)


def test_an_iterate_keeps_the_messages_of_a_few_data_sets_only():
    # a callback that builds its X afresh every iteration is a new data set each time: the messages
    # kept for warm starts stay bounded, the most recent ones kept
    X, Y = make_denoising(n_images=2, size=8, sigma=3.0, random_state=0)
    Xc, Yc = make_denoising(n_images=1, size=8, sigma=3.0, random_state=2)
    kept = []

    def callback(it):
        it.score(list(Xc), Yc)
        state = it._live[0]
        kept.append([source for source, _ in state._decoded])

    model = StructuredLogisticRegression(Linear(), Linear(), n_jobs=1, max_iter=8, tol=0, monitor=True,
                                         early_stopping=False)
    model.fit(X, Y, callback=callback)
    assert max(len(sources) for sources in kept) == _KEPT_DECODES
    assert all(not isinstance(sources[-2], list) for sources in kept[1:])   # the monitor's training data, in use
