"""Sequence metrics (slr.metrics): entity scores against seqeval and conlleval's rules worked by hand,
the per-label report against scikit-learn's, whole-sequence accuracy, unlabelled nodes left out,
and the scorers in GridSearchCV on string tags."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.metrics import precision_recall_fscore_support
from sklearn.model_selection import GridSearchCV, KFold, cross_val_predict

from slr import StructuredLogisticRegression
from slr.formats import chain_example
from slr.metrics import (classification_report, entity_f1, entity_f1_scorer, entity_report, entity_scores,
                         entity_scores_by_type, entity_spans, node_f1, sequence_accuracy, sequence_accuracy_scorer)
from slr.oracles import Linear

seqeval_metrics = pytest.importorskip("seqeval.metrics")

TAGS = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "S-LOC", "B-ORG", "I-ORG", "E-ORG"]


def _seqeval(T, P, average):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return seqeval_metrics.f1_score(T, P, average=average, zero_division=0)


def _random_tags(rng, n_sentences, tags=TAGS):
    lengths = rng.integers(1, 9, n_sentences)
    return [[tags[i] for i in rng.integers(0, len(tags), n)] for n in lengths]


# ------------------------------------------------------------------ conlleval's rules by hand
@pytest.mark.parametrize("tags, spans", [
    # a stray I- opens an entity, after O and at the start
    (["O", "I-PER", "I-PER", "O"], {("PER", 1, 2)}),
    (["I-LOC", "O"], {("LOC", 0, 0)}),
    # adjacent entities of one type: B-X B-X are two, B-X I-X B-X too
    (["B-PER", "B-PER"], {("PER", 0, 0), ("PER", 1, 1)}),
    (["B-PER", "I-PER", "B-PER", "I-PER"], {("PER", 0, 1), ("PER", 2, 3)}),
    # IOB1: B only between two entities of one type
    (["I-ORG", "I-ORG", "B-ORG", "O", "I-MISC"], {("ORG", 0, 1), ("ORG", 2, 2), ("MISC", 4, 4)}),
    # a change of type inside a run of I closes one entity and opens another
    (["B-PER", "I-LOC", "I-LOC"], {("PER", 0, 0), ("LOC", 1, 2)}),
    # IOBES: E closes, S is one token, E after O opens (and closes) one
    (["B-PER", "E-PER", "S-PER", "E-LOC", "I-LOC", "E-LOC"], {("PER", 0, 1), ("PER", 2, 2), ("LOC", 3, 3),
                                                              ("LOC", 4, 5)}),
    (["B-PER", "S-PER"], {("PER", 0, 0), ("PER", 1, 1)}),
    (["O", "O"], set()),
])
def test_entity_spans_follow_conlleval(tags, spans):
    assert entity_spans(tags) == spans
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = seqeval_metrics.sequence_labeling.get_entities(tags)
    assert {(kind, a, b) for kind, a, b in found} == spans


def test_iob1_and_iob2_of_a_corpus_give_the_same_entities():
    """IOB2 tags rewritten as IOB1 (B only where an entity of the same type ends just before)
    name the same entities, sentence by sentence, on the hironsan corpus."""
    from slr.datasets.tagged_text import load_tagged_corpus

    corpus = load_tagged_corpus("hironsan")
    for tags in corpus.train.tags:
        iob1 = [("I" if tag.startswith("B-") and (i == 0 or tags[i - 1][2:] != tag[2:]) else tag[0]) + tag[1:]
                for i, tag in enumerate(tags)]
        assert entity_spans(iob1) == entity_spans(tags)


def test_bad_tags_are_refused():
    with pytest.raises(ValueError, match=r"tags must be O or B-, I-, E-, S- and a type .* got 'PER'"):
        entity_spans(["O", "PER"])
    with pytest.raises(ValueError, match=r"tags_pred\[0\] has 1 tags"):
        entity_report([["O", "O"]], [["O"]])
    with pytest.raises(ValueError, match="average must be one of"):
        entity_f1([["O"]], [["O"]], average="samples")


def test_report_worked_by_hand():
    """True PER(0-1), LOC(3-4), LOC(6); predicted PER(0-1) right, LOC(3-3) wrong, LOC(6) right and a
    spurious ORG(5): PER 1/1/1, LOC P = R = 1/2, ORG 0/1 predicted, no true one."""
    true = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "B-LOC"]]
    pred = [["B-PER", "I-PER", "O", "B-LOC", "O", "B-ORG", "B-LOC"]]
    report = entity_report(true, pred)
    assert list(report.index) == ["LOC", "ORG", "PER", "micro avg", "macro avg", "weighted avg"]
    assert report.loc["LOC", ["precision", "recall", "f1"]].tolist() == [0.5, 0.5, 0.5]
    assert report.loc["ORG"].tolist() == [0.0, 0.0, 0.0, 0, 1, 0]
    assert report.loc["PER", "f1"] == 1.0
    assert report.loc["micro avg", ["support", "n_predicted", "n_correct"]].tolist() == [3, 4, 2]
    assert report.loc["micro avg", "f1"] == pytest.approx(2 * (2 / 4) * (2 / 3) / (2 / 4 + 2 / 3))
    assert report.loc["macro avg", "f1"] == pytest.approx(1.5 / 3)
    assert report.loc["weighted avg", "f1"] == pytest.approx((2 * 0.5 + 1 * 1.0) / 3)
    assert entity_scores_by_type(true, pred)["LOC"].n_correct == 1
    assert entity_scores(true, pred).f1 == report.loc["micro avg", "f1"]


# ------------------------------------------------------------------ against seqeval
def test_entity_scores_agree_with_seqeval_on_random_tags():
    rng = np.random.default_rng(0)
    for _ in range(300):
        T = _random_tags(rng, int(rng.integers(1, 5)))
        P = [[TAGS[i] for i in rng.integers(0, len(TAGS), len(t))] for t in T]
        for average in ("micro", "macro", "weighted"):
            assert entity_f1(T, P, average=average) == pytest.approx(_seqeval(T, P, average), abs=1e-12)
        np.testing.assert_allclose(entity_f1(T, P, average=None), _seqeval(T, P, None), atol=1e-12)


def test_entity_report_agrees_with_seqeval_on_the_corpus():
    """The hironsan corpus's test tags against a corruption of them (a fifth of the tokens retagged
    at random): every type's precision, recall, F1 and support as seqeval's report gives them."""
    from slr.datasets.tagged_text import load_tagged_corpus

    corpus = load_tagged_corpus("hironsan")
    rng = np.random.default_rng(1)
    true = corpus.train.tags + corpus.test.tags
    pred = [[corpus.tag_names[rng.integers(len(corpus.tag_names))] if rng.random() < 0.2 else tag for tag in tags]
            for tags in true]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = seqeval_metrics.classification_report(true, pred, output_dict=True, zero_division=0)
    report = entity_report(true, pred)
    assert set(report.index) == set(expected)
    for row, values in expected.items():
        assert report.loc[row, "precision"] == pytest.approx(values["precision"], abs=1e-12)
        assert report.loc[row, "recall"] == pytest.approx(values["recall"], abs=1e-12)
        assert report.loc[row, "f1"] == pytest.approx(values["f1-score"], abs=1e-12)
        assert report.loc[row, "support"] == values["support"]
    assert 0.3 < report.loc["micro avg", "f1"] < 0.95   # the corruption is neither nothing nor everything


# ------------------------------------------------------------------ node-level, whole sequences, unlabelled
def test_classification_report_is_sklearns_per_label():
    rng = np.random.default_rng(2)
    T = [np.array(t) for t in _random_tags(rng, 20, ["O", "B-PER", "I-PER", "B-LOC"])]
    P = [np.where(rng.random(t.size) < 0.3, "O", t) for t in T]
    report = classification_report(T, P)
    flat_t, flat_p = np.concatenate(T), np.concatenate(P)
    labels = sorted(set(flat_t) | set(flat_p))
    p, r, f, s = precision_recall_fscore_support(flat_t, flat_p, labels=labels, zero_division=0)
    assert list(report.index[:-3]) == labels
    np.testing.assert_allclose(report.loc[labels, ["precision", "recall", "f1"]].to_numpy(), np.c_[p, r, f])
    np.testing.assert_array_equal(report.loc[labels, "support"], s)
    assert report.loc["micro avg", "f1"] == pytest.approx(np.mean(flat_t == flat_p))
    assert report.loc["macro avg", "f1"] == pytest.approx(f.mean())
    assert report.loc["weighted avg", "f1"] == pytest.approx(np.average(f, weights=s))
    np.testing.assert_allclose(node_f1(T, P, average=None), f)   # the per-label array, not a float cast


def test_unlabelled_nodes_are_left_out_of_every_metric():
    true = [np.array(["B-PER", "I-PER", None, "O", "B-LOC", "O", "B-ORG"], dtype=object),
            np.ma.masked_array(["O", "B-LOC", "O"], mask=[True, False, False]),
            np.array([None, None], dtype=object)]
    pred = [np.array(["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "O", "B-LOC"]),
            np.array(["B-ORG", "B-LOC", "O"]), np.array(["O", "B-PER"])]
    # nodes: the labelled ones only (7 - 1 + 3 - 1 = 8 nodes, the last example none)
    report = classification_report(true, pred)
    assert report.loc["micro avg", "support"] == 8
    assert report.loc["micro avg", "f1"] == pytest.approx(6 / 8)
    # whole examples: the first has a wrong labelled node, the second none, the third no labelled node
    assert sequence_accuracy(true, pred) == 0.5
    # entities: PER(0-1) borders the unlabelled node 2 and predicted LOC(3-3) too: both left out; true
    # LOC(4) found, ORG(6) missed (LOC predicted); in the second example LOC(1) borders the masked node 0
    scores = entity_scores(true, pred)
    assert (scores.n_true, scores.n_predicted, scores.n_correct) == (2, 2, 1)
    with pytest.raises(ValueError, match="no labelled node"):
        sequence_accuracy(true[2:], pred[2:])


def test_sequence_accuracy_by_hand():
    true = [np.array([0, 1, 1]), np.array([2]), np.array([0, -1])]
    assert sequence_accuracy(true, [np.array([0, 1, 1]), np.array([1]), np.array([0, 2])]) == pytest.approx(2 / 3)


# ------------------------------------------------------------------ scorers on string tags
def _tagging_data(n=30, seed=0):
    """Chains whose tags depend on a noisy one-hot feature: B-X opens runs of X, O between."""
    rng = np.random.default_rng(seed)
    names = np.array(["B-LOC", "B-PER", "I-LOC", "I-PER", "O"])
    X, Y = [], []
    for _ in range(n):
        kinds = rng.integers(0, 3, 8)   # 0: O, 1: PER, 2: LOC, a run continues with I
        tags = [("O" if k == 0 else ("I-" if i and kinds[i - 1] == k else "B-") + ("PER" if k == 1 else "LOC"))
                for i, k in enumerate(kinds)]
        codes = np.searchsorted(names, tags)
        X.append(chain_example(np.eye(5)[codes] + rng.normal(scale=0.5, size=(8, 5))))
        Y.append(np.array(tags))
    return X, Y


def test_scorers_in_grid_search_on_string_tags():
    """GridSearchCV's fold scores with the entity-F1 and sequence-accuracy scorers are seqeval's F1
    and the whole-sequence accuracy of each fold's predictions, computed here from the folds."""
    X, Y = _tagging_data()
    model = StructuredLogisticRegression(Linear(), Linear(), max_iter=3, n_jobs=1, random_state=0)
    cv = KFold(3)
    search = GridSearchCV(model, {"epsilon": [1.0]}, cv=cv, refit=False,
                          scoring={"entity": entity_f1_scorer, "sequence": sequence_accuracy_scorer}).fit(X, Y)
    pred = cross_val_predict(model.set_params(epsilon=1.0), X, Y, cv=cv)
    for fold, (_, test) in enumerate(cv.split(X)):
        truth, guess = [list(Y[i]) for i in test], [list(pred[i]) for i in test]
        assert search.cv_results_[f"split{fold}_test_entity"][0] == pytest.approx(_seqeval(truth, guess, "micro"))
        whole = np.mean([np.array_equal(Y[i], pred[i]) for i in test])
        assert search.cv_results_[f"split{fold}_test_sequence"][0] == pytest.approx(whole)
    assert search.cv_results_["mean_test_entity"][0] > 0.5   # the features do tell the tags
