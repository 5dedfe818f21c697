"""Tests of the exact reference solvers in slr.inference.exact, against independent computations:
naive enumeration, closed forms, Theorem 1.1 and a Newton solver on the smoothed dual."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp, softmax

import slr.inference.exact as exact_module
from slr.inference.exact import ExactSolution, brute_force_map, exact_lp, exact_smoothed, hmax, ilp_map

EPSILONS = (0.03, 0.1, 0.3, 1.0)


# ----------------------------------------------------------------------------------------
# helpers (independent of the module under test)
# ----------------------------------------------------------------------------------------
def random_graph(rng, n, L, p_edge=0.6, scale=1.0, shuffle_orientation=True):
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < p_edge]
    if not pairs:
        pairs = [(0, 1)]
    edges = np.array(pairs, dtype=np.int64)
    if shuffle_orientation:  # edges with i > j too
        flip = rng.random(len(edges)) < 0.5
        edges[flip] = edges[flip][:, ::-1]
    theta_nodes = rng.normal(size=(n, L)) * scale
    theta_edges = rng.normal(size=(len(edges), L, L)) * scale
    return theta_nodes, theta_edges, edges


def tree_edges(rng, n):
    """A random tree: node k > 0 attaches to a random earlier node, in random orientation."""
    edges = []
    for k in range(1, n):
        parent = int(rng.integers(k))
        edges.append((parent, k) if rng.random() < 0.5 else (k, parent))
    return np.array(edges, dtype=np.int64)


def naive_map(theta_nodes, theta_edges, edges):
    n, L = theta_nodes.shape
    best = -np.inf
    for y in itertools.product(range(L), repeat=n):
        score = sum(theta_nodes[i, y[i]] for i in range(n))
        score += sum(theta_edges[e, y[i], y[j]] for e, (i, j) in enumerate(edges))
        best = max(best, score)
    return best


def labelling_score(theta_nodes, theta_edges, edges, y):
    node_part = theta_nodes[np.arange(len(y)), y].sum()
    return node_part + theta_edges[np.arange(len(edges)), y[edges[:, 0]], y[edges[:, 1]]].sum()


def entropy(p):
    p = p[p > 0]
    return -np.sum(p * np.log(p))


def assert_in_local_polytope(sol: ExactSolution, edges, atol=1e-6):
    mu_n, mu_e = sol.node_marginals, sol.edge_marginals
    assert np.all(mu_n >= -atol) and np.all(mu_e >= -atol)
    np.testing.assert_allclose(mu_n.sum(axis=1), 1.0, atol=atol)
    np.testing.assert_allclose(mu_e.sum(axis=(1, 2)), 1.0, atol=atol)
    np.testing.assert_allclose(mu_e.sum(axis=2), mu_n[edges[:, 0]], atol=atol)
    np.testing.assert_allclose(mu_e.sum(axis=1), mu_n[edges[:, 1]], atol=atol)


class SmoothedDual:
    """The smoothed dual ``min_lam eps * sum_alpha logsumexp(b_alpha / eps)`` of docs/design.md section 1,
    minimised by damped Newton with continuation in eps (an algorithm independent of Clarabel)."""

    def __init__(self, theta_nodes, theta_edges, edges):
        n, L = theta_nodes.shape
        m = len(edges)
        self.n, self.m, self.L = n, m, L
        self.theta = np.concatenate([theta_nodes.ravel(), theta_edges.ravel()])
        # beliefs = theta + M @ lam, lam flattened from shape (m, 2, L)
        M = np.zeros((n * L + m * L * L, m * 2 * L))
        for e, (i, j) in enumerate(edges):
            for a in range(L):
                M[i * L + a, (2 * e) * L + a] -= 1
                M[j * L + a, (2 * e + 1) * L + a] -= 1
                for b in range(L):
                    M[n * L + (e * L + a) * L + b, (2 * e) * L + a] += 1
                    M[n * L + (e * L + a) * L + b, (2 * e + 1) * L + b] += 1
        self.M = M

    def _regions(self, beliefs):
        n, m, L = self.n, self.m, self.L
        return beliefs[: n * L].reshape(n, L), beliefs[n * L :].reshape(m, L * L)

    def value(self, lam, eps):
        bn, be = self._regions(self.theta + self.M @ lam)
        return eps * (logsumexp(bn / eps, axis=1).sum() + logsumexp(be / eps, axis=1).sum())

    def marginals(self, lam, eps):
        bn, be = self._regions(self.theta + self.M @ lam)
        return softmax(bn / eps, axis=1), softmax(be / eps, axis=1).reshape(self.m, self.L, self.L)

    def newton(self, lam, eps, iters=50):
        for _ in range(iters):
            mn, me = self.marginals(lam, eps)
            mu = np.concatenate([mn.ravel(), me.ravel()])
            grad = self.M.T @ mu
            if np.abs(grad).max() < 1e-11:
                break
            D = np.zeros((mu.size, mu.size))
            for off, p in [(k * self.L, p) for k, p in enumerate(mn)] + [
                (self.n * self.L + k * self.L**2, p.ravel()) for k, p in enumerate(me)
            ]:
                D[off : off + p.size, off : off + p.size] = np.diag(p) - np.outer(p, p)
            hess = self.M.T @ D @ self.M / eps
            step = -np.linalg.lstsq(hess, grad, rcond=1e-13)[0]
            v0, t = self.value(lam, eps), 1.0
            while self.value(lam + t * step, eps) > v0 + 1e-4 * t * (grad @ step) and t > 1e-10:
                t /= 2
            lam = lam + t * step
        return lam

    def solve(self, eps):
        lam = np.zeros(self.M.shape[1])
        e = max(np.abs(self.theta).max(), eps)
        while True:
            e = max(e, eps)
            lam = self.newton(lam, e)
            if e == eps:
                return self.value(lam, eps), *self.marginals(lam, eps)
            e /= 2


# ----------------------------------------------------------------------------------------
# brute force and the plain LP
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
def test_brute_force_matches_naive_enumeration(seed):
    rng = np.random.default_rng(seed)
    tn, te, edges = random_graph(rng, n=int(rng.integers(2, 6)), L=int(rng.integers(2, 4)))
    value, labels = brute_force_map(tn, te, edges)
    assert value == pytest.approx(naive_map(tn, te, edges), abs=1e-12)
    assert labels.shape == (tn.shape[0],) and labels.dtype == np.int64
    assert labelling_score(tn, te, edges, labels) == pytest.approx(value, abs=1e-12)


def test_brute_force_no_edges_and_single_node():
    tn = np.array([[0.0, 2.0, 1.0], [3.0, -1.0, 0.0]])
    value, labels = brute_force_map(tn, np.zeros((0, 3, 3)), np.zeros((0, 2), dtype=int))
    assert value == pytest.approx(5.0) and labels.tolist() == [1, 0]
    value, labels = brute_force_map(tn[:1], np.zeros((0, 3, 3)), np.zeros((0, 2), dtype=int))
    assert value == pytest.approx(2.0) and labels.tolist() == [1]


@pytest.mark.parametrize("seed", range(4))
def test_lp_is_tight_on_trees(seed):
    rng = np.random.default_rng(100 + seed)
    n, L = int(rng.integers(3, 8)), int(rng.integers(2, 4))
    edges = tree_edges(rng, n)
    tn, te = rng.normal(size=(n, L)) * 2, rng.normal(size=(n - 1, L, L)) * 2
    sol = exact_lp(tn, te, edges)
    map_value, _ = brute_force_map(tn, te, edges)
    assert sol.value == pytest.approx(map_value, abs=1e-7)
    assert_in_local_polytope(sol, edges)


def test_lp_is_loose_on_frustrated_cycle():
    # anti-ferromagnetic triangle, L = 2: at most two of three edges can disagree (MAP = 2),
    # but mu_i = (1/2, 1/2) with all edge mass off the diagonal is in the local polytope (LP = 3)
    edges = np.array([[0, 1], [1, 2], [2, 0]])
    te = np.tile(np.array([[0.0, 1.0], [1.0, 0.0]]), (3, 1, 1))
    tn = np.zeros((3, 2))
    sol = exact_lp(tn, te, edges)
    map_value, _ = brute_force_map(tn, te, edges)
    assert map_value == pytest.approx(2.0)
    assert sol.value == pytest.approx(3.0, abs=1e-8)
    np.testing.assert_allclose(sol.node_marginals, 0.5, atol=1e-8)
    assert_in_local_polytope(sol, edges)


@pytest.mark.parametrize("seed", range(3))
def test_lp_bounds_map_on_loopy_graphs(seed):
    rng = np.random.default_rng(200 + seed)
    tn, te, edges = random_graph(rng, n=5, L=3, p_edge=0.8, scale=2.0)
    sol = exact_lp(tn, te, edges)
    map_value, _ = brute_force_map(tn, te, edges)
    assert sol.value >= map_value - 1e-7
    linear = np.sum(tn * sol.node_marginals) + np.sum(te * sol.edge_marginals)
    assert sol.value == pytest.approx(linear, abs=1e-9)
    assert_in_local_polytope(sol, edges)


@pytest.mark.parametrize("seed", range(6))
def test_ilp_map_is_the_brute_force_map_on_loopy_graphs(seed):
    """Frustrated loopy graphs (the LP loose on most of them): the integer program finds the MAP."""
    rng = np.random.default_rng(300 + seed)
    tn, te, edges = random_graph(rng, n=int(rng.integers(4, 8)), L=int(rng.integers(2, 4)), p_edge=0.8, scale=3.0)
    value, labels = ilp_map(tn, te, edges)
    assert value == pytest.approx(brute_force_map(tn, te, edges)[0], abs=1e-9)
    assert labels.dtype == np.int64 and labelling_score(tn, te, edges, labels) == pytest.approx(value, abs=1e-12)


def test_ilp_map_where_the_lp_is_loose():
    edges = np.array([[0, 1], [1, 2], [2, 0]])
    te = np.tile(np.array([[0.0, 1.0], [1.0, 0.0]]), (3, 1, 1))
    value, labels = ilp_map(np.zeros((3, 2)), te, edges)
    assert value == pytest.approx(2.0) and len(set(labels.tolist())) == 2


def test_edge_orientation_is_respected():
    # the same model written with an edge reversed (and its table transposed) has the same optimum
    rng = np.random.default_rng(5)
    tn, te, edges = random_graph(rng, n=4, L=3, p_edge=1.0, shuffle_orientation=False)
    edges_r, te_r = edges.copy(), te.copy()
    edges_r[1], te_r[1] = edges[1, ::-1], te[1].T
    assert brute_force_map(tn, te_r, edges_r)[0] == pytest.approx(brute_force_map(tn, te, edges)[0])
    assert exact_lp(tn, te_r, edges_r).value == pytest.approx(exact_lp(tn, te, edges).value, abs=1e-8)
    a, b = exact_smoothed(tn, te, edges, 0.3), exact_smoothed(tn, te_r, edges_r, 0.3)
    assert a.value == pytest.approx(b.value, rel=1e-8)
    np.testing.assert_allclose(a.edge_marginals[1], b.edge_marginals[1].T, atol=1e-6)


# ----------------------------------------------------------------------------------------
# the smoothed LP
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("scale", [1.0, 10.0])
def test_smoothed_without_edges_is_sum_of_logsumexp(eps, scale):
    rng = np.random.default_rng(int(eps * 100 + scale))
    tn = rng.normal(size=(4, 3)) * scale
    sol = exact_smoothed(tn, np.zeros((0, 3, 3)), np.zeros((0, 2), dtype=int), eps)
    expected = eps * logsumexp(tn / eps, axis=1).sum()
    assert sol.value == pytest.approx(expected, rel=1e-9, abs=1e-10)
    np.testing.assert_allclose(sol.node_marginals, softmax(tn / eps, axis=1), atol=1e-8)
    assert sol.edge_marginals.shape == (0, 3, 3)


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("L", [2, 3])
@pytest.mark.parametrize("w", [-5.0, -1.0, 0.5, 5.0])
def test_smoothed_single_potts_edge_closed_form(eps, L, w):
    # theta_e = w * I, zero node potentials. The problem is strictly concave and invariant under
    # relabelling both nodes by one permutation, so the optimum has uniform node marginals and
    # mu_e = p/L on the diagonal, (1-p)/(L(L-1)) off it. Then
    #   value = max_p w p + eps [h(p) + p log L + (1-p) log(L(L-1))] + 2 eps log L
    #         = eps * logaddexp(w/eps + log L, log(L(L-1))) + 2 eps log L.
    te = (w * np.eye(L))[None]
    sol = exact_smoothed(np.zeros((2, L)), te, [[0, 1]], eps)
    expected = eps * np.logaddexp(w / eps + np.log(L), np.log(L * (L - 1))) + 2 * eps * np.log(L)
    assert sol.value == pytest.approx(expected, rel=1e-9)
    p = 1 / (1 + np.exp(-(w / eps + np.log(L) - np.log(L * (L - 1)))))
    mu_e = np.where(np.eye(L, dtype=bool), p / L, (1 - p) / (L * (L - 1)))
    np.testing.assert_allclose(sol.node_marginals, 1 / L, atol=1e-8)
    np.testing.assert_allclose(sol.edge_marginals[0], mu_e, atol=1e-8)


@pytest.mark.parametrize(
    "seed, n, L, eps, scale",
    [(0, 4, 2, 0.1, 1.0), (1, 5, 3, 0.3, 3.0), (2, 4, 3, 1.0, 1.0), (3, 5, 2, 0.03, 1.0)],
)
def test_smoothed_matches_newton_on_the_dual(seed, n, L, eps, scale):
    rng = np.random.default_rng(300 + seed)
    tn, te, edges = random_graph(rng, n=n, L=L, p_edge=0.7, scale=scale)
    dual_value, mn, me = SmoothedDual(tn, te, edges).solve(eps)
    sol = exact_smoothed(tn, te, edges, eps)
    assert sol.value == pytest.approx(dual_value, rel=1e-9)
    np.testing.assert_allclose(sol.node_marginals, mn, atol=1e-8)
    np.testing.assert_allclose(sol.edge_marginals, me, atol=1e-8)


@pytest.mark.parametrize("seed, eps", [(0, 0.03), (1, 0.3), (2, 1.0)])
def test_smoothed_polish_agrees_with_plain_clarabel(seed, eps, monkeypatch):
    # the Newton polish of the marginals must not move the interior-point solution
    rng = np.random.default_rng(600 + seed)
    tn, te, edges = random_graph(rng, n=6, L=3, p_edge=0.6, scale=3.0)
    polished = exact_smoothed(tn, te, edges, eps)
    monkeypatch.setattr(exact_module, "_MAX_POLISH_VARIABLES", 0)
    plain = exact_smoothed(tn, te, edges, eps)
    assert plain.value == pytest.approx(polished.value, rel=1e-8)
    np.testing.assert_allclose(plain.node_marginals, polished.node_marginals, atol=1e-5)
    np.testing.assert_allclose(plain.edge_marginals, polished.edge_marginals, atol=1e-5)
    assert_in_local_polytope(plain, edges)
    # the polished marginals are feasible to round-off
    assert_in_local_polytope(polished, edges, atol=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_smoothed_value_and_polytope(seed):
    rng = np.random.default_rng(400 + seed)
    tn, te, edges = random_graph(rng, n=6, L=3, p_edge=0.5, scale=5.0)
    for eps in EPSILONS:
        sol = exact_smoothed(tn, te, edges, eps)
        assert_in_local_polytope(sol, edges)
        primal = np.sum(tn * sol.node_marginals) + np.sum(te * sol.edge_marginals)
        primal += eps * (entropy(sol.node_marginals) + entropy(sol.edge_marginals))
        assert sol.value == pytest.approx(primal, rel=1e-10)


@pytest.mark.parametrize("seed", range(4))
def test_theorem_1_1_sandwich(seed):
    # l0 <= l1 <= l <= l1 + eps * Hmax, and l does not decrease with eps
    rng = np.random.default_rng(500 + seed)
    n, L = 5, int(rng.integers(2, 4))
    tn, te, edges = random_graph(rng, n=n, L=L, p_edge=0.7, scale=float(rng.choice([1.0, 10.0])))
    l0, _ = brute_force_map(tn, te, edges)
    l1 = exact_lp(tn, te, edges).value
    assert l0 <= l1 + 1e-7
    previous = l1
    for eps in EPSILONS:
        smoothed = exact_smoothed(tn, te, edges, eps).value
        assert previous - 1e-8 <= smoothed <= l1 + eps * hmax(n, len(edges), L) + 1e-8
        previous = smoothed


def test_smoothed_tends_to_lp():
    rng = np.random.default_rng(7)
    tn, te, edges = random_graph(rng, n=4, L=3, p_edge=1.0, scale=2.0)
    l1 = exact_lp(tn, te, edges).value
    eps = 1e-3
    gap = exact_smoothed(tn, te, edges, eps).value - l1
    assert 0 <= gap <= eps * hmax(4, len(edges), 3) + 1e-9


def test_hmax():
    assert hmax(3, 2, 2) == pytest.approx(7 * np.log(2))
    assert hmax(10, 0, 5) == pytest.approx(10 * np.log(5))
    assert hmax(4, 4, 1) == 0.0


# ----------------------------------------------------------------------------------------
# input validation
# ----------------------------------------------------------------------------------------
GOOD = (np.zeros((3, 2)), np.zeros((2, 2, 2)), np.array([[0, 1], [1, 2]]))


@pytest.mark.parametrize("solver", [exact_lp, brute_force_map, lambda *a: exact_smoothed(*a, 0.1)])
@pytest.mark.parametrize(
    "bad, match",
    [
        ((np.zeros(3), GOOD[1], GOOD[2]), "theta_nodes"),
        ((GOOD[0], np.zeros((2, 3, 3)), GOOD[2]), "theta_edges"),
        ((GOOD[0], np.zeros((1, 2, 2)), GOOD[2]), "theta_edges"),
        ((GOOD[0], GOOD[1], np.array([[0, 1], [1, 3]])), "edges"),
        ((GOOD[0], GOOD[1], np.array([[0, 1], [2, 2]])), "self-loop"),
        ((GOOD[0], GOOD[1], np.array([0, 1, 1, 2])), "edges"),
        ((np.array([[0.0, np.nan]] * 3), GOOD[1], GOOD[2]), "theta_nodes"),
        ((GOOD[0], np.full((2, 2, 2), np.inf), GOOD[2]), "theta_edges"),
    ],
)
def test_invalid_inputs_raise(solver, bad, match):
    with pytest.raises(ValueError, match=match):
        solver(*bad)


@pytest.mark.parametrize(
    "eps, match",
    [(0.0, "exact_lp"), (-0.1, "epsilon"), (np.inf, "epsilon"), (np.nan, "epsilon"), ("x", "epsilon")],
)
def test_invalid_epsilon_raises(eps, match):
    with pytest.raises(ValueError, match=match):
        exact_smoothed(*GOOD, eps)


def test_brute_force_refuses_large_graphs():
    n = 21
    edges = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)
    with pytest.raises(ValueError, match="2\\*\\*20"):
        brute_force_map(np.zeros((n, 2)), np.zeros((n - 1, 2, 2)), edges)
    brute_force_map(np.zeros((20, 2)), np.zeros((19, 2, 2)), edges[:19])  # exactly 2**20 is allowed


@pytest.mark.parametrize("args", [(-1, 0, 2), (1, 2, 0), (1.5, 0, 2), (True, 0, 2)])
def test_hmax_invalid(args):
    with pytest.raises(ValueError):
        hmax(*args)


# ----------------------------------------------------------------------------------------
# without the extra "exact"
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("missing, call", [
    ("cvxpy", "exact_lp"), ("highspy", "exact_lp"), ("cvxpy", "exact_smoothed"), ("clarabel", "exact_smoothed"),
])
def test_a_missing_solver_names_the_extra_that_installs_it(monkeypatch, missing, call):
    import sys

    monkeypatch.setitem(sys.modules, missing, None)     # as if not installed
    tn, te, edges = random_graph(np.random.default_rng(0), 3, 2)
    args = (tn, te, edges) if call == "exact_lp" else (tn, te, edges, 0.5)
    with pytest.raises(ImportError, match=rf'^slr\.inference\.exact\.{call} needs {missing}: '
                                          r'pip install "slr\[exact\]"$'):
        getattr(exact_module, call)(*args)
    # brute force needs no solver
    assert brute_force_map(tn, te, edges)[0] == pytest.approx(
        max(tn[np.arange(3), y].sum() + te[np.arange(len(edges)), y[edges[:, 0]], y[edges[:, 1]]].sum()
            for y in map(np.array, itertools.product(range(2), repeat=3))))
