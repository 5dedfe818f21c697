"""Exact MAP on forests (max-product) and the LP's MAP labellings with their bounds, against
enumeration of every labelling and the exact LP; honest decoding by the learner."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from slr.data import GraphBatch, _check_batch_layout
from slr.graph import grid_edges
from slr.inference import batch_forest_map, batch_map, decoding, forest_examples, forest_map
from slr.inference.exact import brute_force_map, exact_lp
from slr._prediction import potentials
from slr.learner import StructuredLogisticRegression

from blocks import blocks


def _random_tree(rng, n):
    """A random tree on ``n`` nodes: node k > 0 joins a random earlier one; nodes relabelled, edges
    oriented either way and shuffled."""
    edges = np.array([(int(rng.integers(k)), k) for k in range(1, n)], dtype=np.int64).reshape(-1, 2)
    edges = rng.permutation(n)[edges]
    flip = rng.random(len(edges)) < 0.5
    edges[flip] = edges[flip][:, ::-1]
    return edges[rng.permutation(len(edges))]


def _score(theta_nodes, theta_edges, edges, y):
    return theta_nodes[np.arange(len(y)), y].sum() + theta_edges[np.arange(len(edges)), y[edges[:, 0]],
                                                                 y[edges[:, 1]]].sum()


@pytest.mark.parametrize("n, L, scale", [(1, 3, 1.0), (2, 2, 1.0), (6, 3, 2.0), (8, 2, 1e4), (5, 4, 1e-3)])
def test_forest_map_scores_the_maximum_of_every_labelling(n, L, scale):
    rng = np.random.default_rng(n * 10 + L)
    for _ in range(20):
        edges = _random_tree(rng, n)
        keep = rng.random(len(edges)) < 0.8          # a forest: some edges dropped
        edges = edges[keep]
        tn, te = scale * rng.normal(size=(n, L)), scale * rng.normal(size=(len(edges), L, L))
        best, _ = brute_force_map(tn, te, edges)
        y = forest_map(tn, te, edges)
        assert _score(tn, te, edges, y) == pytest.approx(best, rel=1e-12, abs=1e-9)


def test_batch_forest_map_labels_every_example_and_refuses_cycles():
    rng = np.random.default_rng(3)
    trees = [_random_tree(rng, n) for n in (4, 1, 6)]
    batch = GraphBatch.from_graphs([(len(t) + 1, t) for t in trees], 3)
    tn, te = rng.normal(size=(batch.n_nodes, 3)), rng.normal(size=(batch.n_edges, 3, 3))
    y = batch_forest_map(batch, tn, te)
    for k, edges in enumerate(trees):
        nodes, links = slice(batch.node_ptr[k], batch.node_ptr[k + 1]), slice(batch.edge_ptr[k], batch.edge_ptr[k + 1])
        best, _ = brute_force_map(tn[nodes], te[links], edges)
        assert _score(tn[nodes], te[links], edges, y[nodes]) == pytest.approx(best)
    cyclic = GraphBatch.from_graphs([(3, [(0, 1), (1, 2)]), (3, [(0, 1), (1, 2), (2, 0)])], 2)
    with pytest.raises(ValueError, match="examples 1 have a cycle"):
        batch_forest_map(cyclic, np.zeros((6, 2)), np.zeros((5, 2, 2)))


def test_forest_examples_tells_forests_from_graphs_with_cycles():
    batch = GraphBatch.from_graphs([(3, [(0, 1), (1, 2)]), (3, [(0, 1), (1, 2), (0, 2)]), (2, []),
                                    (3, [(0, 1), (0, 1)]), (4, [(0, 1), (2, 3)])], 2)
    np.testing.assert_array_equal(forest_examples(batch), [True, False, True, False, True])


@pytest.mark.parametrize("coupling", [0.5, 3.0])
def test_lp_map_bounds_every_labelling_and_certifies_only_the_map(coupling):
    rng = np.random.default_rng(int(coupling * 10))
    edges = grid_edges(3, 4)
    graphs, thetas = [], []
    for _ in range(6):
        tn, te = rng.normal(size=(12, 3)), coupling * rng.normal(size=(len(edges), 3, 3))
        graphs.append((12, edges))
        thetas.append((tn, te))
    batch = GraphBatch.from_graphs(graphs, 3)
    tn, te = np.concatenate([t[0] for t in thetas]), np.concatenate([t[1] for t in thetas])
    result = batch_map(batch, tn, te, np.zeros((batch.n_edges, 2, 3)), max_sweeps=2000, tol=1e-9, threads=1)
    for k, (tn_k, te_k) in enumerate(thetas):
        best, _ = brute_force_map(tn_k, te_k, edges)
        y = result.labels[12 * k:12 * (k + 1)]
        assert result.score[k] == pytest.approx(_score(tn_k, te_k, edges, y))
        assert result.score[k] <= best + 1e-9
        assert result.bound[k] >= best - 1e-9
        lp = exact_lp(tn_k, te_k, edges).value
        assert result.bound[k] >= lp - 1e-6
        if result.settled[k]:
            # at the LP's value, or so near it that the sweeps' pace would not close the open gap
            assert result.bound[k] - lp <= 1e-3 * result.gap[k] + 1e-6
        if result.certified[k]:
            assert result.score[k] == pytest.approx(best)
    assert result.settled.all()


def test_lp_map_stops_at_the_budget_and_says_so():
    edges = grid_edges(6, 6)
    rng = np.random.default_rng(0)
    tn = rng.normal(size=(36, 2))
    te = np.tile(4.0 * np.eye(2), (len(edges), 1, 1))     # strongly attractive: labels move slowly
    batch = GraphBatch.from_graphs([(36, edges)], 2)
    result = batch_map(batch, tn, te, np.zeros((len(edges), 2, 2)), max_sweeps=1, tol=1e-9, threads=1)
    assert result.n_sweeps[0] == 1 and not result.settled[0]
    assert result.gap[0] > 0


def _potts_grids(n_examples, seed):
    """3 x 4 grids of 3 states with integer node potentials and attractive or repulsive Potts edges:
    frustrated cycles (the LP is often not tight) and ties between labellings."""
    rng = np.random.default_rng(seed)
    edges = grid_edges(3, 4)
    thetas = []
    for _ in range(n_examples):
        theta_nodes = rng.integers(-2, 3, size=(12, 3)).astype(float)
        coupling = rng.choice([-2.0, 2.0], size=len(edges))
        thetas.append((theta_nodes, coupling[:, None, None] * (2.0 * np.eye(3) - 1.0)))
    batch = GraphBatch.from_graphs([(12, edges)] * n_examples, 3)
    return batch, edges, thetas


def test_lp_map_stops_where_the_lp_is_not_tight_and_certifies_what_it_did_without_the_pace_test(monkeypatch):
    batch, edges, thetas = _potts_grids(40, seed=0)
    tn, te = np.concatenate([t[0] for t in thetas]), np.concatenate([t[1] for t in thetas])
    budget = 3000
    paced = batch_map(batch, tn, te, np.zeros((batch.n_edges, 2, 3)), max_sweeps=budget, tol=1e-9, threads=1)
    monkeypatch.setattr(decoding, "PACE_HORIZON", np.inf)    # the pace test never fires
    unpaced = batch_map(batch, tn, te, np.zeros((batch.n_edges, 2, 3)), max_sweeps=budget, tol=1e-9, threads=1)
    assert (unpaced.n_sweeps == budget).sum() >= 2        # without it, some examples run to the budget
    assert paced.settled.all() and paced.n_sweeps.max() <= budget // 3
    # the pace test stops only examples that are not certified: the certified ones are the same,
    # with the same labels after the same sweeps
    np.testing.assert_array_equal(paced.certified, unpaced.certified)
    assert 0 < paced.certified.sum() < len(thetas)
    for k in np.flatnonzero(paced.certified):
        nodes = slice(batch.node_ptr[k], batch.node_ptr[k + 1])
        np.testing.assert_array_equal(paced.labels[nodes], unpaced.labels[nodes])
        assert paced.n_sweeps[k] == unpaced.n_sweeps[k]
    for k, (tn_k, te_k) in enumerate(thetas):
        best, _ = brute_force_map(tn_k, te_k, edges)
        y = paced.labels[batch.node_ptr[k]:batch.node_ptr[k + 1]]
        assert paced.score[k] == pytest.approx(_score(tn_k, te_k, edges, y))
        # the MAP's score lies between the labelling's and the bound: within the reported gap
        assert paced.score[k] - 1e-9 <= best <= paced.bound[k] + 1e-9
        if paced.certified[k]:
            assert paced.score[k] == pytest.approx(best)


@pytest.fixture(scope="module")
def blocks_model():
    X, Y = blocks(10)
    return X, Y, StructuredLogisticRegression(epsilon=0.1).fit(X, Y)


def test_predict_decodes_strongly_coupled_grids_to_the_map_without_warning(blocks_model):
    X, Y, model = blocks_model
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        labels = model.predict(X)
    data = model._data(X)
    tn, te = potentials(model._current_predictor(), data, model.unary_, model.pairwise_)
    for k, (x, y) in enumerate(zip(X, labels)):
        nodes = slice(data.batch.node_ptr[k], data.batch.node_ptr[k + 1])
        links = slice(data.batch.edge_ptr[k], data.batch.edge_ptr[k + 1])
        lp = exact_lp(tn[nodes], te[links], x[1])
        # the LP is tight here (an integral optimum), so its value is the MAP's
        np.testing.assert_allclose(lp.node_marginals, lp.node_marginals.round(), atol=1e-6)
        assert _score(tn[nodes], te[links], x[1], y) == pytest.approx(lp.value, rel=1e-9)
    assert np.array_equal(np.concatenate(labels), np.concatenate(Y))


def test_prediction_settings_changed_after_fit_apply_to_predict(blocks_model):
    X, _, model = blocks_model
    try:
        model.set_params(predict_max_sweeps=8)
        with pytest.warns(ConvergenceWarning, match="raise predict_max_sweeps"):
            model.predict(X)
        model.set_params(predict_max_sweeps=-1)
        with pytest.raises(ValueError, match="predict_max_sweeps"):
            model.predict(X)
    finally:
        model.set_params(predict_max_sweeps=StructuredLogisticRegression().predict_max_sweeps)


def test_lp_map_of_a_batch_is_each_examples_own_decode():
    # settled examples stop sweeping while the others go on, as a batch of their own: each
    # example's outcome is the one it gets decoded alone (examples that settle at different times)
    rng = np.random.default_rng(7)
    graphs, thetas = [], []
    for k, (rows, cols) in enumerate([(4, 5), (3, 3), (6, 6), (2, 7), (5, 5)]):
        edges = grid_edges(rows, cols)
        coupling = (0.3, 4.0, 2.0, 0.5, 3.0)[k]
        graphs.append((rows * cols, edges))
        thetas.append((rng.normal(size=(rows * cols, 2)), coupling * rng.normal(size=(len(edges), 2, 2))))
    batch = GraphBatch.from_graphs(graphs, 2)
    tn, te = np.concatenate([t[0] for t in thetas]), np.concatenate([t[1] for t in thetas])
    whole = batch_map(batch, tn, te, np.zeros((batch.n_edges, 2, 2)), max_sweeps=3000, tol=1e-9, threads=1)
    assert len(set(whole.n_sweeps.tolist())) > 1   # the examples settled after different sweeps
    for k, (graph, (tn_k, te_k)) in enumerate(zip(graphs, thetas)):
        alone = batch_map(GraphBatch.from_graphs([graph], 2), tn_k, te_k, np.zeros((len(graph[1]), 2, 2)),
                          max_sweeps=3000, tol=1e-9, threads=1)
        nodes = slice(batch.node_ptr[k], batch.node_ptr[k + 1])
        np.testing.assert_array_equal(whole.labels[nodes], alone.labels)
        for field in ("score", "bound", "certified", "settled", "n_sweeps"):
            assert getattr(whole, field)[k] == getattr(alone, field)[0], field


def test_a_batch_of_some_examples_is_the_batch_of_their_graphs():
    rng = np.random.default_rng(1)
    graphs = [(n, _random_tree(rng, n)) for n in (3, 1, 5, 4, 2)] + [(4, grid_edges(2, 2))]
    batch = GraphBatch.from_graphs(graphs, 3)
    for examples in ([0, 2, 5], [1], [3, 4], list(range(6))):
        part, nodes, edges = batch.take(np.array(examples))
        _check_batch_layout(part)   # built without the constructor's check: consistent all the same
        assert not part.inc_edge.flags.writeable
        expected = GraphBatch.from_graphs([graphs[k] for k in examples], 3)
        for name in ("node_ptr", "edge_ptr", "edges", "inc_ptr", "inc_edge", "inc_side"):
            np.testing.assert_array_equal(getattr(part, name), getattr(expected, name), err_msg=name)
        assert part.max_degree == expected.max_degree
        np.testing.assert_array_equal(nodes, np.concatenate(
            [np.arange(batch.node_ptr[k], batch.node_ptr[k + 1]) for k in examples]))
        np.testing.assert_array_equal(batch.edges[edges], nodes[part.edges])
