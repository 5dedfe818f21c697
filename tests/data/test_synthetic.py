"""The synthetic structured problems: the graphs, the coupling and the features they promise."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from slr.datasets.synthetic import make_structured


def _agreement(X, Y, mask=None):
    same = [y[e[:, 0]] == y[e[:, 1]] for (_, e, _), y in zip(X, Y)]
    same = np.concatenate(same)
    if mask is not None:
        same = same[np.concatenate(mask)]
    return same.mean()


@pytest.mark.parametrize("graph", ["chain", "grid", "random"])
def test_graphs_have_the_promised_shape(graph):
    X, Y = make_structured(n_examples=3, graph=graph, n_nodes=16, n_states=3, extra_edges=0.5, random_state=0)
    for (nodes, edges, on_edges), y in zip(X, Y):
        n = nodes.shape[0]
        assert y.shape == (n,) and y.dtype == np.int64 and on_edges.shape == (len(edges), 1)
        assert np.all(edges[:, 0] != edges[:, 1]) and len({tuple(sorted(e)) for e in edges.tolist()}) == len(edges)
        adjacency = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
        assert connected_components(adjacency, directed=False)[0] == 1
        expected = {"chain": n - 1, "grid": 2 * 16 - 4 - 4, "random": n - 1 + 8}[graph]
        assert len(edges) == expected


def test_same_seed_same_problem_and_another_seed_another():
    a = make_structured(n_examples=2, graph="random", random_state=5)
    b = make_structured(n_examples=2, graph="random", random_state=5)
    c = make_structured(n_examples=2, graph="random", random_state=6)
    for (xa, ya), (xb, yb) in zip(zip(*a), zip(*b)):
        assert all(np.array_equal(p, q) for p, q in zip(xa, xb)) and np.array_equal(ya, yb)
    assert not np.array_equal(a[1][0], c[1][0])


def test_strong_coupling_makes_neighbours_agree():
    """Without coupling neighbours agree about as often as two uniform labels (1/L); strongly
    coupled, far more often."""
    free = make_structured(n_examples=10, graph="grid", n_nodes=36, n_states=4, coupling=0.0, random_state=1)
    tied = make_structured(n_examples=10, graph="grid", n_nodes=36, n_states=4, coupling=3.0, random_state=1)
    assert abs(_agreement(*free) - 0.25) < 0.06
    assert _agreement(*tied) > 0.6


def test_edge_types_seen_in_the_input_flip_the_interaction():
    X, Y = make_structured(n_examples=20, graph="chain", n_nodes=30, n_states=3, coupling=3.0, edge_input=True,
                           random_state=2)
    assert X[0][2].shape[1] == 3
    attract = [x[2][:, 1] == 1 for x in X]
    repel = [x[2][:, 2] == 1 for x in X]
    assert _agreement(X, Y, attract) > 0.7 > 0.2 > _agreement(X, Y, repel)


def test_informative_columns_carry_the_label_and_the_rest_is_noise():
    X, Y = make_structured(n_examples=10, n_nodes=40, n_states=3, n_features=30, n_informative=5, noise=0.3,
                           coupling=0.0, random_state=3)
    features, labels = np.concatenate([x[0] for x in X]), np.concatenate(Y)
    centres = np.stack([features[labels == a, :5].mean(axis=0) for a in range(3)])
    nearest = np.argmin(((features[:, None, :5] - centres[None]) ** 2).sum(axis=2), axis=1)
    assert np.mean(nearest == labels) > 0.9
    noise_means = np.stack([features[labels == a, 5:].mean(axis=0) for a in range(3)])
    assert np.abs(noise_means).max() < 0.25 and abs(features[:, 5:].std() - 0.3) < 0.03


@pytest.mark.parametrize("kwargs, message", [
    (dict(graph="tree"), "graph must be one of"),
    (dict(n_states=1), "n_states must be an integer"),
    (dict(n_informative=11), "n_informative must be an integer in [1, 10]"),
    (dict(coupling=-1.0), "coupling must be finite and >= 0"),
    (dict(graph="random", n_nodes=1), "n_nodes must be an integer"),
])
def test_bad_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        make_structured(**kwargs)
