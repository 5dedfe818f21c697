"""The CRFsuite peer: its decode against our Viterbi and brute force, its objective, its report row."""
import itertools
import re
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("pycrfsuite")

from baselines.crfsuite_peer import CRFsuiteChain  # noqa: E402
from slr.inference import viterbi  # noqa: E402

L = 3


def _chains(seed, n_examples=40, d=4):
    """Chains whose labels depend on the features and on the previous label."""
    rng = np.random.default_rng(seed)
    W, T = rng.normal(size=(L, d)), 2 * rng.normal(size=(L, L))
    X, Y = [], []
    for _ in range(n_examples):
        n = int(rng.integers(1, 5))
        feats = rng.normal(size=(n, d))
        y = [int(np.argmax(W @ feats[0] + rng.gumbel(size=L)))]
        for i in range(1, n):
            y.append(int(np.argmax(W @ feats[i] + T[y[-1]] + rng.gumbel(size=L))))
        X.append((feats, np.column_stack([np.arange(n - 1), np.arange(1, n)]).reshape(-1, 2), np.ones((n - 1, 1))))
        Y.append(np.array(y))
    return X, Y


def _scores(model, x):
    """The score of every labelling of a chain under the exported weights, by enumeration."""
    n = x[0].shape[0]
    ys = np.array(list(itertools.product(range(L), repeat=n)))
    unary = x[0] @ model.unary_weights_.T
    T = model.transition_weights_
    return ys, np.array([unary[np.arange(n), y].sum() + T[y[:-1], y[1:]].sum() for y in ys])


@pytest.fixture(scope="module")
def fitted():
    X, Y = _chains(0)
    return X, Y, CRFsuiteChain(c2=0.5, delta=1e-12, n_states=L).fit(X, Y)


def test_crfsuite_decode_is_viterbi_on_its_exported_weights(fitted):
    X, _, model = fitted
    Xnew, _ = _chains(1, n_examples=30)
    for x, pred in zip(Xnew, model.predict(Xnew)):
        ys, scores = _scores(model, x)
        np.testing.assert_array_equal(pred, ys[int(np.argmax(scores))])
        np.testing.assert_array_equal(pred, viterbi(*model.potentials(x)))
    assert model.score(Xnew, _chains(1, n_examples=30)[1]) == pytest.approx(
        np.mean(np.concatenate(model.predict(Xnew)) == np.concatenate(_chains(1, n_examples=30)[1])))


def test_fitted_weights_are_stationary_for_the_stated_objective(fitted):
    """The gradient of sum_k [log Z - F(y^k)] + c2 ||w||^2, by enumeration, vanishes at CRFsuite's
    weights: c2 multiplies ||w||^2 (not ||w||^2 / 2), the conversion ``c2 = 1 / (2 C)`` relies on it."""
    X, Y, model = fitted
    gW, gT = 2 * model.c2 * model.unary_weights_, 2 * model.c2 * model.transition_weights_
    for x, y in zip(X, Y):
        ys, scores = _scores(model, x)
        p = np.exp(scores - scores.max())
        p /= p.sum()
        for labels, weight in [(y, -1.0), *zip(ys, p)]:
            np.add.at(gW, labels, weight * x[0])
            np.add.at(gT, (labels[:-1], labels[1:]), weight)
    scale = np.abs(2 * model.c2 * model.unary_weights_).max()
    assert np.abs(gW).max() < 1e-3 * scale and np.abs(gT).max() < 1e-3 * scale
    # and the weights are not trivially zero
    assert scale > 0.1


def test_bad_input_raises_value_error(fitted):
    X, Y, _ = fitted
    with pytest.raises(ValueError, match="c2"):
        CRFsuiteChain(c2=-1.0).fit(X, Y)
    star = (np.ones((3, 2)), np.array([[0, 1], [0, 2]]), np.ones((2, 1)))
    with pytest.raises(ValueError, match="chain"):
        CRFsuiteChain().fit([star], [np.zeros(3, int)])
    k = next(k for k, y in enumerate(Y) if len(y) > 1)
    feats, edges, _ = X[k]
    with pytest.raises(ValueError, match="edge features"):
        CRFsuiteChain().fit([(feats, edges, 2 * np.ones((len(edges), 1)))], [Y[k]])
    with pytest.raises(ValueError, match="not fitted"):
        CRFsuiteChain().predict(X)
