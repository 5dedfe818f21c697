"""The learner's shortcuts give what the long way gives: Viterbi prediction on chains, monitoring
from the training potentials at hand, the Linear preconditioner's per-class products, the timing hook."""
from collections import Counter
from contextlib import contextmanager

import numpy as np
import pytest
from scipy.special import softmax

import slr.oracles.linear as linear_module
from slr import StructuredLogisticRegression
from slr.datasets import make_denoising
from slr.formats import chain_example
from slr.inference.exact import brute_force_map
from slr.oracles import Linear
from slr.oracles.linear import _ClassMajorLoss

EPS = 0.1


def _chains(n_words, length, n_states, seed):
    """Random chains whose labels depend on the node features and on the previous label."""
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for _ in range(n_words):
        y = np.empty(length, dtype=np.int64)
        y[0] = rng.integers(n_states)
        for i in range(1, length):
            y[i] = (y[i - 1] + 1) % n_states if rng.random() < 0.6 else rng.integers(n_states)
        nodes = np.eye(n_states)[y] + rng.normal(scale=1.0, size=(length, n_states))
        X.append(chain_example(np.column_stack([nodes, np.ones(length)])))
        Y.append(y)
    return X, Y


def test_prediction_on_chains_is_the_brute_force_map():
    X, Y = _chains(12, 5, 3, seed=0)
    model = StructuredLogisticRegression(Linear(l2=0.1), Linear(l2=0.1), max_iter=3, n_jobs=1).fit(X, Y)
    predicted = model.predict(X)
    pairs = model.pairwise_.decision_function(np.ones((1, 1)))[0].reshape(3, 3)
    n_nontrivial = 0
    for (nodes, edges, _), y_hat in zip(X, predicted):
        theta_nodes = EPS * model.unary_.decision_function(nodes)
        theta_edges = np.broadcast_to(EPS * pairs, (len(edges), 3, 3))
        _, y_best = brute_force_map(theta_nodes, theta_edges, edges)
        np.testing.assert_array_equal(y_hat, y_best)
        n_nontrivial += np.any(y_best != theta_nodes.argmax(axis=1))
    assert n_nontrivial > 0  # the pairwise terms decide some labels


@pytest.mark.parametrize("max_iter", [1, 3])
def test_monitored_errors_equal_the_fitted_models_scores(max_iter):
    X, Y = make_denoising(n_images=2, size=12, sigma=2.0, random_state=0)
    Xv, Yv = make_denoising(n_images=2, size=12, sigma=2.0, random_state=1)
    model = StructuredLogisticRegression(Linear(), Linear(), max_iter=max_iter, max_sweeps=10, n_jobs=1,
                                         early_stopping=False)
    last = model.fit(X, Y, Xv, Yv).history_.iloc[-1]
    # one label more or less moves an error by 1/288
    assert last["train_error"] == pytest.approx(1.0 - model.score(X, Y), abs=1e-12)
    assert last["val_error"] == pytest.approx(1.0 - model.score(Xv, Yv), abs=1e-12)


def test_hessian_blocks_with_fewer_classes_than_columns(monkeypatch):
    monkeypatch.setattr(linear_module, "_BLOCK_ELEMENTS", 3 * 40)  # several ragged blocks
    rng = np.random.default_rng(3)
    n, d, k = 131, 6, 3
    x = rng.normal(size=(n, d))
    bias = rng.normal(scale=2.0, size=(n, k))
    coef = rng.normal(size=(k, d + 1))
    problem = _ClassMajorLoss(x, bias, rng.integers(k, size=n), fit_intercept=True)
    assert problem.k < problem.n_columns and len(problem.blocks) > 1
    p = softmax(x @ coef[:, :d].T + coef[:, d] + bias, axis=1)
    xa = np.column_stack([x, np.ones(n)])
    reference = np.einsum("nk,na,nb->kab", p * (1 - p), xa, xa)
    np.testing.assert_allclose(problem.hessian_blocks(coef), reference, rtol=1e-12, atol=1e-12)


def test_phase_timer_sees_every_phase_and_changes_nothing():
    X, Y = make_denoising(n_images=2, size=10, sigma=2.0, random_state=0)
    calls = Counter()

    @contextmanager
    def count(name):
        calls[name] += 1
        yield

    kw = dict(max_iter=2, max_sweeps=6, sweep_tol=0, early_stopping=False, n_jobs=1, solver="alternation")
    timed = StructuredLogisticRegression(Linear(), Linear(), **kw)
    timed._phase_timer = count
    timed.fit(X, Y, X, Y)
    plain = StructuredLogisticRegression(Linear(), Linear(), **kw).fit(X, Y, X, Y)
    assert calls == {"objective R": 1 + 4 * 2, "message passing": 2 * 2, "monitor": 2, "unary bias": 2,
                     "unary fit": 2, "unary potentials": 2, "pairwise bias": 2, "pairwise fit": 2,
                     "pairwise potentials": 2, "predict: MAP": 2 * 2, "predict: potentials": 2,
                     "train": 2, "validation": 2, "certificate": 1}
    columns = ["objective", "train_error", "val_error"]
    np.testing.assert_array_equal(timed.history_[columns], plain.history_[columns])
