"""Our OneSlackSSVM against pystruct 0.3.2's on a small chain problem (needs the peer env)."""

import numpy as np
import pytest

from slr.baselines.features import StructuredData
from slr.baselines.peer import run_peer, unpack_weights
from slr.baselines.ssvm import OneSlackSSVM

L = 4
C = 0.5


@pytest.fixture(scope="module")
def chain_problem():
    """Noisy chains from a random linear model (ChainCRF layout: one constant edge feature)."""
    rng = np.random.default_rng(11)
    X = []
    for _ in range(20):
        n = int(rng.integers(3, 8))
        X.append((rng.normal(size=(n, 5)), np.column_stack([np.arange(n - 1), np.arange(1, n)]),
                  np.ones((n - 1, 1))))
    data = StructuredData(X, None, L)
    w_true = rng.normal(size=data.size)
    y = data.decode(*data.potentials(w_true))
    flip = rng.random(y.shape) < 0.2
    y[flip] = rng.integers(0, L, size=int(flip.sum()))
    return X, data.split(y)


@pytest.mark.peer
def test_one_slack_matches_pystruct_primal(peer_env, chain_problem):
    X, Y = chain_problem
    ours = OneSlackSSVM(C=C, tol=1e-5, n_states=L).fit(X, Y)
    theirs = run_peer("OneSlackSSVM", X, Y, model="chain", n_states=L,
                      params={"C": C, "tol": 1e-5, "max_iter": 10000})
    assert ours.converged_
    ours_primal = ours.primal_objective(X, Y)
    assert theirs["primal_objective"] == pytest.approx(ours_primal, rel=0.01)
    # pystruct's weights, scored by our objective, give pystruct's own number (same model)
    parts = unpack_weights(theirs)
    w_theirs = np.concatenate([parts["unary"].ravel(), parts["pairwise"][0].reshape(L * L, 1).ravel()])
    ours.w_, saved = w_theirs, ours.w_
    try:
        assert ours.primal_objective(X, Y) == pytest.approx(theirs["primal_objective"], rel=1e-6)
    finally:
        ours.w_ = saved
    # and the training accuracies of the two (near-identical) optima agree closely
    assert ours.score(X, Y) == pytest.approx(theirs["train_accuracy"], abs=0.05)
