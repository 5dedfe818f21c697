"""Exact marginals on forests (sum-product) against brute-force enumeration of all labellings."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp

from slr.data import GraphBatch
from slr.inference.sum_product import batch_forest_marginals, forest_marginals


def _brute_force(theta_nodes, theta_edges, edges, temperature):
    n, L = theta_nodes.shape
    labellings = np.array(list(itertools.product(range(L), repeat=n)))
    energy = theta_nodes[np.arange(n), labellings].sum(axis=1)
    if len(edges):
        pairs = theta_edges[np.arange(len(edges)), labellings[:, edges[:, 0]], labellings[:, edges[:, 1]]]
        energy = energy + pairs.sum(axis=1)
    log_z = logsumexp(energy / temperature)
    p = np.exp(energy / temperature - log_z)
    nodes = np.stack([np.bincount(labellings[:, i], weights=p, minlength=L) for i in range(n)])
    pairs = np.stack([np.bincount(labellings[:, i] * L + labellings[:, j], weights=p, minlength=L * L).reshape(L, L)
                      for i, j in edges]) if len(edges) else np.zeros((0, L, L))
    return nodes, pairs, log_z


def _random_tree(rng, n):
    """A random tree: node k > 0 joins a random earlier node, the edge oriented either way."""
    edges = []
    for k in range(1, n):
        parent = int(rng.integers(k))
        edges.append((parent, k) if rng.random() < 0.5 else (k, parent))
    order = rng.permutation(len(edges))
    return np.array(edges, dtype=np.int64).reshape(-1, 2)[order]


@pytest.mark.parametrize("n, L, temperature, scale", [(1, 3, 1.0, 1.0), (2, 2, 0.5, 2.0), (5, 3, 1.0, 1.0),
                                                      (6, 2, 0.1, 3.0), (4, 4, 2.0, 1.0)])
def test_tree_marginals_equal_enumeration(n, L, temperature, scale):
    rng = np.random.default_rng(n * 10 + L)
    edges = _random_tree(rng, n)
    theta_nodes = scale * rng.normal(size=(n, L))
    theta_edges = scale * rng.normal(size=(len(edges), L, L))
    result = forest_marginals(theta_nodes, theta_edges, edges, temperature)
    nodes, pairs, log_z = _brute_force(theta_nodes, theta_edges, edges, temperature)
    np.testing.assert_allclose(result.node_marginals, nodes, atol=1e-12)
    np.testing.assert_allclose(result.edge_marginals, pairs, atol=1e-12)
    assert result.log_partition[0] == pytest.approx(log_z, rel=1e-12)


def test_a_batch_of_forests_of_several_components_in_parallel():
    rng = np.random.default_rng(3)
    graphs, thetas = [], []
    for n in (4, 5, 3, 6):
        parts = [_random_tree(rng, 2), _random_tree(rng, n - 2) + 2]   # two components
        edges = np.concatenate(parts)
        graphs.append((n, edges))
        thetas.append((rng.normal(size=(n, 3)), rng.normal(size=(len(edges), 3, 3))))
    batch = GraphBatch.from_graphs(graphs, 3)
    result = batch_forest_marginals(batch, np.concatenate([t[0] for t in thetas]),
                                    np.concatenate([t[1] for t in thetas]), 0.7, edge_marginals=True, n_jobs=2)
    for k, ((n, edges), (tn, te)) in enumerate(zip(graphs, thetas)):
        nodes, pairs, log_z = _brute_force(tn, te, edges, 0.7)
        np.testing.assert_allclose(result.node_marginals[batch.node_ptr[k]:batch.node_ptr[k + 1]], nodes, atol=1e-12)
        np.testing.assert_allclose(result.edge_marginals[batch.edge_ptr[k]:batch.edge_ptr[k + 1]], pairs, atol=1e-12)
        assert result.log_partition[k] == pytest.approx(log_z, rel=1e-12)


def test_extreme_potentials_and_temperatures_stay_finite():
    """Potentials of 1e4 at T = 1e-3 (exponents of 1e7): the marginals put all mass on the MAP."""
    edges = np.array([[0, 1], [1, 2]])
    theta_nodes = np.array([[1e4, 0.0], [0.0, 0.0], [0.0, -1e4]])
    theta_edges = np.zeros((2, 2, 2))
    theta_edges[:, 0, 0] = theta_edges[:, 1, 1] = 1e4          # neighbours agree
    result = forest_marginals(theta_nodes, theta_edges, edges, 1e-3)
    assert np.all(np.isfinite(result.node_marginals)) and np.isfinite(result.log_partition[0])
    np.testing.assert_allclose(result.node_marginals[:, 0], 1.0)
    assert result.log_partition[0] == pytest.approx(3e4 / 1e-3, rel=1e-12)


def test_cycles_and_repeated_edges_are_refused():
    triangle = np.array([[0, 1], [1, 2], [2, 0]])
    with pytest.raises(ValueError, match="examples 0 have a cycle"):
        forest_marginals(np.zeros((3, 2)), np.zeros((3, 2, 2)), triangle)
    with pytest.raises(ValueError, match="have a cycle"):
        forest_marginals(np.zeros((2, 2)), np.zeros((2, 2, 2)), np.array([[0, 1], [1, 0]]))
    with pytest.raises(ValueError, match="temperature must be finite and > 0"):
        forest_marginals(np.zeros((2, 2)), np.zeros((1, 2, 2)), np.array([[0, 1]]), 0.0)


def test_on_a_chain_the_lp_marginals_differ_from_the_exact_ones():
    """docs/design.md section 1: the smoothed LP counts every entropy once, so even on a chain its
    marginals at eps are not those of exp(F / eps)."""
    from slr.inference import smoothed_lp

    rng = np.random.default_rng(0)
    edges = np.array([[0, 1], [1, 2]])
    theta_nodes, theta_edges = rng.normal(size=(3, 2)), 2 * rng.normal(size=(2, 2, 2))
    exact = forest_marginals(theta_nodes, theta_edges, edges, 1.0).node_marginals
    lp = smoothed_lp(theta_nodes, theta_edges, edges, 1.0, max_sweeps=10_000, tol=1e-12).node_marginals
    assert np.abs(exact - lp).max() > 1e-3
    np.testing.assert_allclose(lp.sum(axis=1), 1.0)


def test_a_subnormal_temperature_is_refused_not_turned_into_nan():
    with pytest.raises(ValueError, match="temperature=1e-320 is subnormal"):
        forest_marginals(np.zeros((2, 2)), np.zeros((1, 2, 2)), np.array([[0, 1]]), 1e-320)
