"""Exact marginals by elimination over windows (slr.inference.banded) against enumeration of all
labellings and against sum-product on trees."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp

from slr.data import GraphBatch
from slr.graph import grid_edges
from slr.inference import forest_marginals
from slr.inference.banded import banded_marginals, batch_exact_marginals


def _enumerate(theta_nodes, theta_edges, edges, temperature):
    n, L = theta_nodes.shape
    labellings = np.array(list(itertools.product(range(L), repeat=n)))
    energy = (theta_nodes[np.arange(n), labellings].sum(1)
              + theta_edges[np.arange(len(edges)), labellings[:, edges[:, 0]], labellings[:, edges[:, 1]]].sum(1))
    log_z = logsumexp(energy / temperature)
    p = np.exp(energy / temperature - log_z)
    nodes = np.stack([np.bincount(labellings[:, i], weights=p, minlength=L) for i in range(n)])
    pairs = np.array([np.bincount(labellings[:, i] * L + labellings[:, j], weights=p, minlength=L * L).reshape(L, L)
                      for i, j in edges])
    return nodes, pairs, log_z


def _shuffled_grid(rng, height, width):
    """A grid's edges in random order, each pointing either way."""
    edges = grid_edges(height, width)[rng.permutation((height - 1) * width + height * (width - 1))]
    flip = rng.random(len(edges)) < 0.5
    edges[flip] = edges[flip][:, ::-1]
    return edges


@pytest.mark.parametrize("height, width, L", [(2, 3, 3), (3, 3, 2), (2, 4, 2), (3, 2, 3)])
def test_grid_marginals_are_those_of_every_labelling(height, width, L):
    rng = np.random.default_rng(height * 10 + width + L)
    edges = _shuffled_grid(rng, height, width)
    theta_nodes = rng.normal(0, 3, size=(height * width, L))
    theta_edges = rng.normal(0, 3, size=(len(edges), L, L))
    result = banded_marginals(theta_nodes, theta_edges, edges, 0.7, edge_marginals=True)
    nodes, pairs, log_z = _enumerate(theta_nodes, theta_edges, edges, 0.7)
    np.testing.assert_allclose(result.node_marginals, nodes, atol=1e-12)
    np.testing.assert_allclose(result.edge_marginals, pairs, atol=1e-12)
    assert result.log_partition.shape == (1,)
    assert result.log_partition[0] == pytest.approx(log_z, rel=1e-13)


def test_a_tree_gives_sum_products_marginals_and_large_potentials_stay_finite():
    rng = np.random.default_rng(5)
    edges = np.array([[0, 1], [1, 2], [1, 3], [4, 2]])
    theta_nodes = rng.normal(0, 1e4, size=(5, 3))
    theta_edges = rng.normal(0, 1e4, size=(4, 3, 3))
    result = banded_marginals(theta_nodes, theta_edges, edges, 1e-3, edge_marginals=True)
    reference = forest_marginals(theta_nodes, theta_edges, edges, 1e-3)
    assert np.all(np.isfinite(result.node_marginals)) and np.isfinite(result.log_partition[0])
    np.testing.assert_allclose(result.edge_marginals, reference.edge_marginals, atol=1e-12)
    assert result.log_partition[0] == pytest.approx(reference.log_partition[0], rel=1e-12)


def test_a_batch_mixes_forests_and_loopy_examples():
    rng = np.random.default_rng(7)
    L = 2
    graphs = [(4, np.array([[0, 1], [1, 2], [2, 3]])), (6, _shuffled_grid(rng, 2, 3)), (1, np.zeros((0, 2), int))]
    batch = GraphBatch.from_graphs(graphs, L)
    theta_nodes = rng.normal(size=(batch.n_nodes, L))
    theta_edges = rng.normal(size=(batch.n_edges, L, L))
    result = batch_exact_marginals(batch, theta_nodes, theta_edges, 0.5, edge_marginals=True)
    for k, (n, edges) in enumerate(graphs):
        nodes, pairs, log_z = _enumerate(theta_nodes[batch.node_ptr[k]:batch.node_ptr[k + 1]],
                                         theta_edges[batch.edge_ptr[k]:batch.edge_ptr[k + 1]], edges, 0.5)
        np.testing.assert_allclose(result.node_marginals[batch.node_ptr[k]:batch.node_ptr[k + 1]], nodes, atol=1e-12)
        if len(edges):
            np.testing.assert_allclose(result.edge_marginals[batch.edge_ptr[k]:batch.edge_ptr[k + 1]], pairs,
                                       atol=1e-12)
        assert result.log_partition[k] == pytest.approx(log_z, rel=1e-12)


def test_bad_input_is_refused():
    edges = grid_edges(3, 8)
    theta_nodes, theta_edges = np.zeros((24, 2)), np.zeros((len(edges), 2, 2))
    with pytest.raises(ValueError, match="bandwidth 8 .* max_states=256"):
        banded_marginals(theta_nodes, theta_edges, edges, max_states=256)
    with pytest.raises(ValueError, match="temperature"):
        banded_marginals(theta_nodes, theta_edges, edges, 0.0)
    with pytest.raises(ValueError, match="theta_edges"):
        banded_marginals(theta_nodes, theta_edges[:-1], edges)
    with pytest.raises(ValueError, match="max_states"):
        banded_marginals(theta_nodes, theta_edges, edges, max_states=0)
