"""FrankWolfeSSVM (block-coordinate and batch Frank-Wolfe) against the exact SSVM optimum by cvxpy on every
labelling, brute-force primals and OneSlackSSVM on a loopy grid."""
import numpy as np
import pytest

from slr.baselines.frank_wolfe import FrankWolfeSSVM
from slr.baselines.ssvm import OneSlackSSVM
from slr.graph import grid_edges

from chain_reference import brute_primal, exact_ssvm_optimum, random_chains

L = 3


@pytest.fixture(scope="module")
def tiny_chain():
    return random_chains(np.random.default_rng(0), 8, L)


@pytest.fixture(scope="module")
def optimum(tiny_chain):
    return exact_ssvm_optimum(*tiny_chain, L, 1.0)


@pytest.mark.parametrize("line_search", [True, False])
@pytest.mark.parametrize("averaging", [True, False])
def test_reaches_the_exact_optimum_with_a_valid_certificate(tiny_chain, optimum, line_search, averaging):
    X, Y = tiny_chain
    model = FrankWolfeSSVM(line_search=line_search, averaging=averaging, max_iter=300, tol=1e-4,
                           n_states=L, random_state=0).fit(X, Y)
    history = model.history_
    assert list(history.columns[-2:]) == ["dual", "duality_gap"]
    assert len(history) == model.n_iter_ + 1
    # weak duality against the exact optimum: every dual below it, every primal above it
    assert np.all(history.dual <= optimum * (1 + 1e-6))
    assert np.all(history.objective >= optimum * (1 - 1e-6))
    np.testing.assert_allclose(history.duality_gap, history.objective - history.dual)
    assert history.duality_gap.iloc[-1] < history.duality_gap.iloc[0] / 100
    # the reported primal is the true one of the returned weights
    primal = brute_primal(model.w_, X, Y, L, 1.0)
    assert history.objective.iloc[-1] == pytest.approx(primal, rel=1e-9)
    assert primal == pytest.approx(optimum, rel=0.01 if line_search else 0.02)


@pytest.mark.parametrize("line_search", [True, False])
def test_batch_mode_reaches_the_exact_optimum_with_a_valid_certificate(tiny_chain, line_search):
    """Full-batch Frank-Wolfe, under example weights: weak duality and the optimum of the weighted primal."""
    X, Y = tiny_chain
    s = np.array([0.0, 2.0, 1.0, 0.5, 1.0, 3.0, 1.0, 1.0])
    exact = exact_ssvm_optimum(X, Y, L, 1.0, s=s)
    model = FrankWolfeSSVM(batch_mode=True, line_search=line_search, max_iter=1000, tol=1e-4,
                           n_states=L).fit(X, Y, sample_weight=s)
    history = model.history_
    assert np.all(history.dual <= exact * (1 + 1e-6))
    assert np.all(history.objective >= exact * (1 - 1e-6))
    assert history.objective.iloc[-1] == pytest.approx(model.primal_objective(X, Y, sample_weight=s), rel=1e-9)
    assert model.primal_objective(X, Y, sample_weight=s) == pytest.approx(exact, rel=0.01 if line_search else 0.02)


def test_line_search_never_lowers_the_dual_and_stops_at_tol(tiny_chain, optimum):
    X, Y = tiny_chain
    model = FrankWolfeSSVM(averaging=False, max_iter=1000, tol=1e-2, n_states=L, random_state=1).fit(X, Y)
    dual = model.history_.dual.to_numpy()
    assert np.all(np.diff(dual) >= -1e-9)
    assert model.converged_
    gap = model.history_.duality_gap.iloc[-1]
    assert 0 <= gap <= 1e-2 * 1.0 * len(X)
    assert brute_primal(model.w_, X, Y, L, 1.0) - optimum <= gap + 1e-9


def test_seeded_passes_are_reproducible(tiny_chain):
    X, Y = tiny_chain
    a = FrankWolfeSSVM(max_iter=5, n_states=L, random_state=3).fit(X, Y)
    b = FrankWolfeSSVM(max_iter=5, n_states=L, random_state=3).fit(X, Y)
    np.testing.assert_array_equal(a.w_, b.w_)


def test_sample_weight_scales_the_blocks(tiny_chain):
    X, Y = tiny_chain
    s = np.array([0.0, 2.0, 1.0, 0.5, 1.0, 3.0, 1.0, 1.0])
    model = FrankWolfeSSVM(max_iter=400, tol=1e-4, n_states=L, random_state=0).fit(X, Y, sample_weight=s)
    exact = exact_ssvm_optimum(X, Y, L, 1.0, s=s)
    assert model.history_.dual.max() <= exact * (1 + 1e-6)
    assert model.primal_objective(X, Y, sample_weight=s) == pytest.approx(exact, rel=0.01)


def test_on_a_loopy_grid_it_agrees_with_the_one_slack_ssvm():
    rng = np.random.default_rng(2)
    edges = grid_edges(3, 3)
    X, Y = [], []
    for _ in range(6):
        y = (rng.random(9) < 0.5).astype(int)
        X.append((np.c_[y + 0.8 * rng.normal(size=9), np.ones(9)], edges, np.ones((len(edges), 1))))
        Y.append(y)
    one = OneSlackSSVM(C=1.0, tol=1e-5).fit(X, Y)
    bcfw = FrankWolfeSSVM(C=1.0, max_iter=300, tol=1e-4, random_state=0).fit(X, Y)
    assert bcfw.model == "auto" and bcfw.inference_["model"] == "auto"
    reference = one.primal_objective(X, Y)
    assert bcfw.primal_objective(X, Y) == pytest.approx(reference, rel=0.01)
    assert bcfw.history_.dual.max() <= reference * (1 + 1e-6)


@pytest.mark.parametrize("params, message", [
    (dict(line_search="yes"), "line_search"),
    (dict(averaging=2), "averaging"),
    (dict(C=0), "C must be finite and > 0"),
    (dict(max_iter=0), "max_iter"),
])
def test_bad_parameters_raise(tiny_chain, params, message):
    with pytest.raises(ValueError, match=message):
        FrankWolfeSSVM(**params).fit(*tiny_chain)
