"""Entity precision, recall and F1 with conlleval's reading of IOB tags, on hand-worked sentences."""
import pytest

from slr.metrics import entity_scores, entity_spans


def test_spans_of_iob2_and_iob1_tags():
    # IOB2: every entity opens with B
    assert entity_spans(["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC"]) == {
        ("PER", 0, 1), ("LOC", 3, 3), ("LOC", 4, 5)}
    # IOB1: an I after O opens an entity; B only separates two of one type
    assert entity_spans(["I-ORG", "I-ORG", "B-ORG", "O", "I-MISC"]) == {("ORG", 0, 1), ("ORG", 2, 2), ("MISC", 4, 4)}
    # a change of type inside a run of I tags closes one entity and opens another
    assert entity_spans(["B-PER", "I-PER", "I-LOC", "I-LOC"]) == {("PER", 0, 1), ("LOC", 2, 3)}
    # an entity running to the sentence's end is closed there
    assert entity_spans(["O", "B-DAT", "I-DAT"]) == {("DAT", 1, 2)}
    assert entity_spans(["O", "O"]) == set()


def test_scores_worked_by_hand():
    """Two sentences: 4 true entities, 5 predicted, 2 of them right.

    Sentence 1, true PER(0-1), LOC(3-4); predicted PER(0-1) right, then I-LOC after O opens
    LOC(3-3) and B-LOC opens LOC(4-4): both wrong (the true LOC is 3-4).
    Sentence 2, true ORG(0-2), MISC(4); predicted ORG(0-1) (too short: wrong), MISC(4) right.
    P = 2/5, R = 2/4, F1 = 2 (.4)(.5) / .9 = 4/9."""
    true = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC"], ["B-ORG", "I-ORG", "I-ORG", "O", "B-MISC"]]
    pred = [["B-PER", "I-PER", "O", "I-LOC", "B-LOC"], ["B-ORG", "I-ORG", "O", "O", "B-MISC"]]
    scores = entity_scores(true, pred)
    assert (scores.n_true, scores.n_predicted, scores.n_correct) == (4, 5, 2)
    assert scores.precision == pytest.approx(0.4) and scores.recall == pytest.approx(0.5)
    assert scores.f1 == pytest.approx(4 / 9)


def test_unequal_precision_and_recall():
    """One true entity found, plus two spurious ones: P = 1/3, R = 1, F1 = 2 (1/3) / (4/3) = 0.5."""
    scores = entity_scores([["B-PER", "O", "O"]], [["B-PER", "B-LOC", "I-ORG"]])
    assert scores.precision == pytest.approx(1 / 3) and scores.recall == 1.0
    assert scores.f1 == pytest.approx(0.5)
    assert entity_scores([["O"]], [["O"]]).f1 == 0.0


def test_mismatched_input_is_refused():
    with pytest.raises(ValueError, match="tags_pred"):
        entity_scores([["O"]], [])
    with pytest.raises(ValueError, match=r"tags_pred\[0\] has 2 tags"):
        entity_scores([["O"]], [["O", "O"]])
