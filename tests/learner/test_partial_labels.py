"""Partial labels (-1 or masked entries) in StructuredLogisticRegression: the label checks, the
clamped LP's soft targets against enumeration, and the CCCP objective computed with the library's
own dual (it never increases)."""

import numpy as np
import pytest
from scipy.special import entr, logsumexp

from slr import StructuredLogisticRegression
from slr.data import FlatData
from slr.datasets import make_denoising
from slr.formats import chain_example
from slr.graph import check_labels
from slr.inference import batch_dual_values, batch_sweeps
from slr.latent import LatentTargets
from slr.models import PairwiseModel, hamming_margin

EPS = 0.1


@pytest.fixture(scope="module")
def images():
    X, Y = make_denoising(n_images=2, size=8, sigma=1.0, random_state=0)
    rng = np.random.default_rng(0)
    hidden = [rng.random(y.shape) < 0.5 for y in Y]
    return X, Y, hidden


def _model(**kwargs):
    kwargs = {"epsilon": EPS, "max_iter": 4, "max_sweeps": 40, "monitor": False, "random_state": 0, **kwargs}
    return StructuredLogisticRegression(**kwargs)


def _monotone(values):
    values = np.asarray(values)
    return bool(np.all(np.diff(values) <= 1e-9 * np.maximum(1.0, np.abs(values[:-1]))))


# ----------------------------------------------------------------------------------------
# the label checks
# ----------------------------------------------------------------------------------------
def test_masked_array_is_honoured(images):
    """A masked entry is an unlabelled node whatever it hides (the issue's hidden 7)."""
    X, Y, hidden = images
    masked = [np.ma.masked_array(np.where(h, 7, y), mask=h) for y, h in zip(Y, hidden)]
    minus_one = [np.where(h, -1, y) for y, h in zip(Y, hidden)]
    a, b = _model().fit(X, masked), _model().fit(X, minus_one)
    assert a.n_states_ == 2
    np.testing.assert_array_equal(a.objective_trace_["objective"], b.objective_trace_["objective"])
    assert (a.objective_trace_["stage"] == "targets").sum() == 3


def test_mask_refused_where_partial_labels_are_not_taken(images):
    X, Y, hidden = images
    model = _model(max_iter=1).fit(X, Y)
    masked = [np.ma.masked_array(y, mask=h) for y, h in zip(Y, hidden)]
    with pytest.raises(ValueError, match=r"Y\[0\] is a masked array with \d+ masked"):
        model.score(X, masked)
    with pytest.raises(ValueError, match="negative labels"):
        model.score(X, [np.where(h, -1, y) for y, h in zip(Y, hidden)])
    # a mask that masks nothing is a labelling like any other
    assert check_labels(np.ma.masked_array([0, 1]), 2, 2).tolist() == [0, 1]


@pytest.mark.parametrize("labels, message", [
    ([0, -2, 1], "negative labels below -1"),
    ([0, 2, 1], r"outside \[0, 2\)"),
    ([0.5, -1, 1], "integer labels"),
])
def test_invalid_partial_labels(labels, message):
    assert check_labels(np.array([0, -1, 1]), 3, 2, allow_unlabelled=True).tolist() == [0, -1, 1]
    with pytest.raises(ValueError, match=message):
        check_labels(np.array(labels), 3, 2, allow_unlabelled=True)


def test_invalid_partial_labels_in_fit(images):
    X, Y, _ = images
    with pytest.raises(ValueError, match=r"Y\[0\] contains negative labels below -1"):
        _model().fit(X, [np.full_like(Y[0], -2), Y[1]])
    with pytest.raises(ValueError, match="no labelled node"):
        _model().fit(X, [np.full_like(y, -1) for y in Y])


def test_an_example_without_labels(images):
    """An example with every node unlabelled is allowed; its targets are the free model's
    beliefs (nothing clamped) and R still never rises."""
    X, Y, _ = images
    model = _model().fit(X, [np.full_like(Y[0], -1), Y[1]])
    assert model.n_states_ == 2
    assert model.certificate_ is None
    assert _monotone(model.objective_trace_["objective"])
    everything_hidden = _model(n_states=2, max_iter=2).fit(X, [np.full_like(y, -1) for y in Y])
    assert _monotone(everything_hidden.objective_trace_["objective"])


# ----------------------------------------------------------------------------------------
# the soft targets: the clamped LP
# ----------------------------------------------------------------------------------------
def _graph(n, edges, labels, L=3, seed=0):
    rng = np.random.default_rng(seed)
    edges = np.array(edges).reshape(-1, 2)
    X = [(np.zeros((n, 1)), edges, np.zeros((len(edges), 1)))]
    data = FlatData(X, [np.array(labels)], L, allow_unlabelled=True)
    theta_nodes = rng.normal(scale=0.3, size=(n, L)) + hamming_margin(data.labels, L)
    theta_edges = rng.normal(scale=0.3, size=(len(edges), L, L))
    return data, theta_nodes, theta_edges


def _targets(data, theta_nodes, theta_edges):
    targets = LatentTargets(data, EPS, max_sweeps=2000, tol=1e-13, threads=1)
    targets.update(theta_nodes, theta_edges)
    return targets


@pytest.mark.parametrize("n, edges, labels, node", [
    (3, [[0, 1], [1, 2]], [1, 0, -1], 2),             # an unlabelled leaf of a chain
    (4, [[0, 1], [0, 2], [3, 0]], [-1, 2, 0, 1], 0),  # the unlabelled centre of a star
])
def test_targets_of_one_unlabelled_node_by_enumeration(n, edges, labels, node):
    """With one unlabelled node j, its target is, by enumerating its states, the conditional
    marginal given the labelled nodes at temperature eps (1 + degree(j)): the clamped edges'
    entropies equal j's, so the LP (all counting numbers 1) weighs j's entropy 1 + degree times."""
    L = 3
    data, theta_nodes, theta_edges = _graph(n, edges, labels, L)
    targets = _targets(data, theta_nodes, theta_edges)
    degree = int((np.array(edges) == node).sum())
    energy = np.empty(L)
    for b in range(L):
        y = np.array(labels)
        y[node] = b
        energy[b] = data.labelling_scores(y, theta_nodes, theta_edges)[0]
    temperature = EPS * (1 + degree)
    expected = np.exp(energy / temperature - logsumexp(energy / temperature))
    np.testing.assert_allclose(targets.nodes[node], expected, rtol=1e-9, atol=1e-12)
    for i in range(n):   # labelled nodes: one-hot
        if i != node:
            np.testing.assert_array_equal(targets.nodes[i], np.eye(L)[labels[i]])
    for e, (i, j) in enumerate(edges):   # q_j on the labelled end's row / column; one-hot if both labelled
        q = targets.edges[e].reshape(L, L)
        want = np.zeros((L, L))
        if i == node:
            want[:, labels[j]] = expected
        elif j == node:
            want[labels[i], :] = expected
        else:
            want[labels[i], labels[j]] = 1.0
        np.testing.assert_allclose(q, want, rtol=1e-9, atol=1e-12)
    assert targets.node_entropy[node] == pytest.approx(EPS * entr(expected).sum(), rel=1e-9)


def test_targets_solve_the_clamped_lp():
    """On a loopy graph with several unlabelled nodes, <theta, q> + eps H(q) equals the clamped
    LP's dual at its converged messages (the clamped states put far below the others): q is its optimum."""
    edges = [[0, 1], [1, 2], [2, 3], [3, 0], [0, 2], [3, 4]]
    data, theta_nodes, theta_edges = _graph(5, edges, [0, -1, -1, 2, -1], seed=1)
    targets = _targets(data, theta_nodes, theta_edges)
    primal = targets.node_truth(theta_nodes).sum() + targets.edge_truth(theta_edges).sum()
    clamped = np.where(targets.allowed, theta_nodes, theta_nodes - 200.0)
    run = batch_sweeps(data.batch, clamped, theta_edges, EPS, max_sweeps=5000, tol=1e-13)
    dual = batch_dual_values(data.batch, clamped, theta_edges, run.messages, EPS).sum()
    assert primal == pytest.approx(dual, abs=1e-8)
    np.testing.assert_allclose(targets.nodes.sum(1), 1.0)
    np.testing.assert_allclose(targets.edges.sum(1), 1.0)


def test_fully_labelled_targets_are_the_labels(images):
    """With every node labelled the targets are one-hot with zero entropy: the latent truth
    term is the labels' score, so the latent objective is the ordinary R."""
    X, Y, _ = images
    data = FlatData(X, Y, 2)
    rng = np.random.default_rng(2)
    theta_nodes = rng.normal(size=(data.batch.n_nodes, 2))
    theta_edges = rng.normal(size=(data.batch.n_edges, 2, 2))
    targets = _targets(data, theta_nodes, theta_edges)
    node_onehot, edge_onehot = data.onehot(data.labels)
    np.testing.assert_array_equal(targets.nodes, node_onehot)
    np.testing.assert_array_equal(targets.edges, edge_onehot.reshape(len(edge_onehot), -1))
    truth = targets.node_truth(theta_nodes).sum() + targets.edge_truth(theta_edges).sum()
    assert truth == pytest.approx(data.labelling_scores(data.labels, theta_nodes, theta_edges).sum(), rel=1e-12)


# ----------------------------------------------------------------------------------------
# CCCP: the latent objective never increases
# ----------------------------------------------------------------------------------------
def _converged_dual(data, theta_nodes, theta_edges):
    run = batch_sweeps(data.batch, theta_nodes, theta_edges, EPS, max_sweeps=20000, tol=1e-12)
    return float(batch_dual_values(data.batch, theta_nodes, theta_edges, run.messages, EPS).sum())


def _latent_objective(model, data):
    """l(theta) = A(theta + Delta) - A_c(theta), both by the library's dual at converged messages."""
    energy = PairwiseModel(EPS)
    theta_nodes = energy.unary_potentials(data, model.unary_) + hamming_margin(data.labels, data.n_states)
    theta_edges = energy.pairwise_potentials(data, model.pairwise_)
    allowed = LatentTargets(data, EPS, 1, 0.0, 1).allowed
    clamped = np.where(allowed, theta_nodes, theta_nodes - 500.0)
    return _converged_dual(data, theta_nodes, theta_edges) - _converged_dual(data, clamped, theta_edges)


def _chains(seed=0, n=4, length=6, hide=0.4):
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for _ in range(n):
        y = rng.integers(0, 3, size=length)
        y[1:] = np.where(rng.random(length - 1) < 0.7, y[:-1], y[1:])
        feats = np.column_stack([np.eye(3)[y] + rng.normal(scale=0.8, size=(length, 3)), np.ones(length)])
        X.append(chain_example(feats))
        Y.append(np.where(rng.random(length) < hide, -1, y))
    return X, Y


def test_cccp_decreases_the_latent_objective():
    """The latent objective of the fits after 1, 2, ... iterations (each iteration one target
    update) never rises, and R bounds it from above."""
    X, Y = _chains()
    data = FlatData(X, Y, 3, allow_unlabelled=True)
    values = []
    for k in range(1, 6):
        model = _model(max_iter=k, max_sweeps=400).fit(X, Y)
        values.append(_latent_objective(model, data))
        assert model.objective_trace_["objective"].iloc[-1] >= values[-1] - 1e-8
        assert _monotone(model.objective_trace_["objective"])
    assert _monotone(values)
    assert values[-1] < values[0]


@pytest.mark.parametrize("latent_iter", [1, 3])
def test_target_updates_never_raise_R(images, latent_iter):
    X, Y, hidden = images
    model = _model(max_iter=7, latent_iter=latent_iter).fit(X, [np.where(h, -1, y) for y, h in zip(Y, hidden)])
    trace = model.objective_trace_
    assert _monotone(trace["objective"])
    updates = trace.index[trace["stage"] == "targets"]
    assert trace.loc[updates, "iteration"].tolist() == list(range(1 + latent_iter, 8, latent_iter))
    assert all(trace["objective"][k] <= trace["objective"][k - 1] for k in updates)
    assert np.isfinite(model.history_["train_error"]).sum() == 0   # monitor=False
