"""StructuredLogisticRegression.predict_marginals against independent computations: the exact
smoothed LP (cvxpy) on loopy graphs and enumeration of all labellings on chains."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp

from slr import StructuredLogisticRegression
from slr.datasets import make_denoising
from slr.oracles import Constant, Linear
from chain_reference import random_chains


def _potentials(model, example, epsilon):
    nodes, edges, on_edges = example
    L = model.n_states_
    theta_nodes = epsilon * model.unary_.decision_function(nodes)
    theta_edges = epsilon * model.pairwise_.decision_function(on_edges).reshape(-1, L, L)
    return theta_nodes, theta_edges, edges


@pytest.fixture(scope="module")
def grid_model():
    X, Y = make_denoising(n_images=3, size=4, sigma=1.0, random_state=0)
    model = StructuredLogisticRegression(Linear(l2=0.1), Linear(l2=0.1), epsilon=0.5, max_iter=3, n_jobs=1,
                                         random_state=0).fit(X, Y)
    return model, X


def test_lp_marginals_are_the_exact_smoothed_lps(grid_model):
    from slr.inference.exact import exact_smoothed

    model, X = grid_model
    marginals = model.predict_marginals(X[:2], edge_marginals=True)
    for (nodes, edges), example in zip(marginals, X[:2]):
        reference = exact_smoothed(*_potentials(model, example, 0.5), 0.5)
        np.testing.assert_allclose(nodes, reference.node_marginals, atol=1e-5)
        np.testing.assert_allclose(edges.sum(axis=2), nodes[example[1][:, 0]], atol=1e-9)   # locally consistent
    hotter = model.predict_marginals(X[:1], epsilon=2.0)[0]
    reference = exact_smoothed(*_potentials(model, X[0], 0.5), 2.0)
    np.testing.assert_allclose(hotter, reference.node_marginals, atol=1e-5)


def test_exact_marginals_on_chains_are_those_of_the_crf():
    """On chains, method="exact" gives the marginals of p(y) ~ exp(g_u + g_p), by enumeration."""
    rng = np.random.default_rng(1)
    X, Y = random_chains(rng, 3, 3, lengths=(4, 7), d=4, d_e=None)
    model = StructuredLogisticRegression(Linear(l2=1.0), Constant(), epsilon=0.2, max_iter=2, n_jobs=1,
                                         random_state=0).fit(X, Y)
    for (nodes, edges), example in zip(model.predict_marginals(X, method="exact", edge_marginals=True), X):
        theta_nodes, theta_edges, pairs = _potentials(model, example, 0.2)
        n, L = theta_nodes.shape
        labellings = np.array(list(itertools.product(range(L), repeat=n)))
        energy = theta_nodes[np.arange(n), labellings].sum(1) + theta_edges[
            np.arange(len(pairs)), labellings[:, pairs[:, 0]], labellings[:, pairs[:, 1]]].sum(1)
        p = np.exp(energy / 0.2 - logsumexp(energy / 0.2))
        for i in range(n):
            np.testing.assert_allclose(nodes[i], np.bincount(labellings[:, i], weights=p, minlength=L), atol=1e-10)
        first = np.bincount(labellings[:, 0] * L + labellings[:, 1], weights=p, minlength=L * L).reshape(L, L)
        np.testing.assert_allclose(edges[0], first, atol=1e-10)


def _enumerated(theta_nodes, theta_edges, pairs, temperature):
    """Node marginals of p(y) ~ exp(theta(y) / T) by enumerating every labelling."""
    n, L = theta_nodes.shape
    labellings = np.array(list(itertools.product(range(L), repeat=n)))
    energy = theta_nodes[np.arange(n), labellings].sum(1) + theta_edges[
        np.arange(len(pairs)), labellings[:, pairs[:, 0]], labellings[:, pairs[:, 1]]].sum(1)
    p = np.exp(energy / temperature - logsumexp(energy / temperature))
    return np.stack([np.bincount(labellings[:, i], weights=p, minlength=L) for i in range(n)])


def test_exact_marginals_on_a_loopy_grid_are_those_of_the_crf(grid_model):
    """On the 4 x 4 grids, method="exact" eliminates over windows: the CRF's marginals, by enumeration."""
    model, X = grid_model
    nodes = model.predict_marginals(X[:1], method="exact")[0]
    np.testing.assert_allclose(nodes, _enumerated(*_potentials(model, X[0], 0.5), 0.5), atol=1e-10)


def test_exact_marginals_refuse_wide_loopy_graphs_and_bad_arguments(grid_model):
    model, X = grid_model
    wide, _ = make_denoising(n_images=1, size=30, sigma=3.0, random_state=1)
    with pytest.raises(ValueError, match="example 0 has a cycle and bandwidth 30"):
        model.predict_marginals(wide, method="exact")
    with pytest.raises(ValueError, match="method must be one of"):
        model.predict_marginals(X[:1], method="bethe")
    with pytest.raises(ValueError, match="epsilon"):
        model.predict_marginals(X[:1], epsilon=0.0)


def test_an_unconverged_lp_warns(grid_model):
    from sklearn.exceptions import ConvergenceWarning

    model, X = grid_model
    with pytest.warns(ConvergenceWarning, match="raise max_sweeps"):
        nodes = model.predict_marginals(X[:1], max_sweeps=1)[0]
    np.testing.assert_allclose(nodes.sum(axis=1), 1.0)
