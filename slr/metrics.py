"""Scores of labellings over all nodes of all examples, and scorers for scikit-learn's model selection.

Node metrics (:func:`node_accuracy`, :func:`node_f1`, the per-label :func:`classification_report`),
whole-example :func:`sequence_accuracy`, entity metrics of IOB1 / IOB2 / IOBES tags with
conlleval's reading of them (:func:`entity_spans`, :func:`entity_scores`, per type
:func:`entity_scores_by_type`, :func:`entity_f1` micro or macro, :func:`entity_report`; they agree
with seqeval's default mode), and calibration of node marginals.

Every metric leaves out the unlabelled nodes of the true labellings: a label ``-1`` (integer
labels), ``None`` (labels of other types, such as strings), or a masked entry of a numpy masked
array (the partial labels ``StructuredLogisticRegression.fit`` takes). Labels may be of any type
the learners take (:mod:`slr.labels`): what ``predict`` returns is compared with ``Y`` as it is.

scikit-learn's string scorers (``scoring="f1_macro"``) cannot read structured labels (a list of
per-example arrays is of an "unknown" target type to them). The scorers here flatten the true and
predicted labellings over all nodes and then apply scikit-learn's metric, so
``GridSearchCV(model, grid, scoring=node_f1_scorer)`` and ``cross_val_score(..., scoring=...)``
work with every slr learner; :data:`entity_f1_scorer` and :data:`sequence_accuracy_scorer` score
whole examples (a learner fitted on string tags predicts them).

>>> import numpy as np
>>> node_accuracy([np.array([0, 1]), np.array([2])], [np.array([0, 0]), np.array([2])])
0.6666666666666666
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import accuracy_score, f1_score, precision_recall_fscore_support

from slr.labels import split_tag
from slr.validation import check_option

__all__ = ["CalibrationCurve", "EntityScores", "calibration_curve", "classification_report", "entity_f1",
           "entity_f1_scorer", "entity_report", "entity_scores", "entity_scores_by_type", "entity_spans",
           "expected_calibration_error", "make_node_scorer", "node_accuracy", "node_accuracy_scorer",
           "node_brier_score", "node_f1", "node_f1_scorer", "node_log_loss", "sequence_accuracy",
           "sequence_accuracy_scorer"]


def _truth(y: Any) -> tuple[np.ndarray, np.ndarray]:
    """One example's true labels, flattened, and which of its nodes are labelled: not ``-1`` (integer
    labels), not ``None`` (labels of other types) and not a masked entry of a masked array
    (whatever value it hides)."""
    if np.ma.isMaskedArray(y):
        values, labelled = np.ravel(np.ma.getdata(y)), ~np.ravel(np.ma.getmaskarray(y))
    else:
        values = np.ravel(np.asarray(y))
        labelled = np.ones(values.shape, dtype=bool)
    if values.dtype.kind in "iuf":
        labelled &= values != -1
    elif values.dtype == object:
        labelled &= np.fromiter((value is not None for value in values), dtype=bool, count=values.size)
    return values, labelled


def _check_pairs(Y_true: Sequence, Y_pred: Sequence) -> None:
    """Refuse labellings that do not pair up: as many examples, each of one shape."""
    if len(Y_true) != len(Y_pred):
        raise ValueError(f"Y_true and Y_pred must hold as many examples, got {len(Y_true)} and {len(Y_pred)}")
    if len(Y_true) == 0:
        raise ValueError("Y_true must hold at least one example")
    for k, (truth, guess) in enumerate(zip(Y_true, Y_pred)):
        if np.shape(truth) != np.shape(guess):
            raise ValueError(f"example {k}: Y_true has shape {np.shape(truth)}, Y_pred {np.shape(guess)}")


def _flatten(Y_true: Sequence, Y_pred: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """The true and predicted labels of every labelled node of every example."""
    _check_pairs(Y_true, Y_pred)
    truths, guesses = [], []
    for truth, guess in zip(Y_true, Y_pred):
        values, labelled = _truth(truth)
        truths.append(values[labelled])
        guesses.append(np.ravel(np.asarray(guess))[labelled])
    truth, guess = np.concatenate(truths), np.concatenate(guesses)
    if truth.size == 0:
        raise ValueError("Y_true has no labelled node (every node is -1, None or masked): nothing to score")
    return truth, guess


def node_accuracy(Y_true: Sequence, Y_pred: Sequence) -> float:
    """The fraction of the labelled nodes (of all examples) labelled correctly.

    Unlabelled nodes of ``Y_true`` (``-1``, or a masked entry of a masked array) are left out,
    as in every metric here.
    """
    truth, guess = _flatten(Y_true, Y_pred)
    return float(accuracy_score(truth, guess))


def node_f1(Y_true: Sequence, Y_pred: Sequence, average: str | None = "macro",
            **kwargs: Any) -> float | np.ndarray:
    """scikit-learn's ``f1_score`` over the labelled nodes; ``average="macro"``: the mean of the
    states' F1, ``average=None``: the array of the states' F1 (as ``f1_score`` returns it)."""
    truth, guess = _flatten(Y_true, Y_pred)
    score = f1_score(truth, guess, average=average, **kwargs)
    return np.asarray(score) if average is None else float(score)


def sequence_accuracy(Y_true: Sequence, Y_pred: Sequence) -> float:
    """The fraction of the examples whose labelled nodes are all labelled correctly (whole-sequence
    accuracy); examples without a labelled node are left out.

    Raises
    ------
    ValueError
        For mismatched examples, or no example with a labelled node.
    """
    _check_pairs(Y_true, Y_pred)
    right = []
    for truth, guess in zip(Y_true, Y_pred):
        values, labelled = _truth(truth)
        if labelled.any():
            right.append(bool(np.all(values[labelled] == np.ravel(np.asarray(guess))[labelled])))
    if not right:
        raise ValueError("Y_true has no labelled node (every node is -1, None or masked): nothing to score")
    return float(np.mean(right))


def classification_report(Y_true: Sequence, Y_pred: Sequence, *, labels: Sequence | None = None,
                          zero_division: float = 0.0) -> pd.DataFrame:
    """Per label precision, recall, F1 and support over the labelled nodes (scikit-learn's
    ``classification_report`` as a table), then the rows ``"micro avg"`` (node accuracy, for
    every label counted), ``"macro avg"`` and ``"weighted avg"`` (weighted by support).

    Parameters
    ----------
    Y_true, Y_pred : sequences of label arrays
    labels : sequence, optional
        The labels to report, in order; those of ``Y_true`` and ``Y_pred`` (sorted) when None.
    zero_division : float, default=0.0
        The value of a precision or recall without any prediction or true node of its label.

    Returns
    -------
    pandas.DataFrame
        Indexed by label (then the averages), columns ``precision``, ``recall``, ``f1``, ``support``.
    """
    truth, guess = _flatten(Y_true, Y_pred)
    names = np.unique(np.concatenate([truth, guess])) if labels is None else np.asarray(labels)
    precision, recall, f1, support = precision_recall_fscore_support(truth, guess, labels=names,
                                                                     zero_division=zero_division)
    rows = pd.DataFrame({"precision": precision, "recall": recall, "f1": f1, "support": support},
                        index=pd.Index(names.tolist(), dtype=object))
    return _with_averages(rows, micro=precision_recall_fscore_support(
        truth, guess, labels=names, average="micro", zero_division=zero_division)[:3])


def _with_averages(rows: pd.DataFrame, micro: tuple[float, float, float]) -> pd.DataFrame:
    """``rows`` (per label or type) followed by its micro, macro and support-weighted averages."""
    columns = ["precision", "recall", "f1"]
    support = rows["support"].to_numpy()
    total = int(support.sum())
    weighted = (rows[columns].to_numpy().T @ support / total) if total else np.zeros(3)
    averages = pd.DataFrame([[*micro, total], [*rows[columns].mean().to_numpy(), total], [*weighted, total]],
                            columns=[*columns, "support"], index=["micro avg", "macro avg", "weighted avg"])
    table = pd.concat([rows, averages]) if len(rows) else averages
    return table.astype({"support": np.int64})


# ----------------------------------------------------------------------------------------
# entities of IOB / IOBES tags (conlleval)
# ----------------------------------------------------------------------------------------
_PREFIXES = ("B", "I", "E", "S", "O")


def _split_tag(tag: Any) -> tuple[str, str]:
    """``"B-PER"`` -> ``("B", "PER")``; ``"O"`` -> ``("O", "")``; refuses a tag whose prefix is
    not one of B, I, E, S, O."""
    prefix, kind = split_tag(tag)
    if prefix not in _PREFIXES:
        raise ValueError(f"tags must be O or B-, I-, E-, S- and a type (IOB1, IOB2 or IOBES), got {tag!r}")
    return prefix, kind


def _entity_ends(prefix: str, kind: str, prev_prefix: str, prev_kind: str) -> bool:
    """conlleval's ``endOfChunk``: an entity open at the previous token ends before this one."""
    if prev_prefix in ("E", "S"):
        return True
    if prev_prefix in ("B", "I") and prefix in ("B", "S", "O"):
        return True
    return prev_prefix != "O" and prev_kind != kind


def _entity_starts(prefix: str, kind: str, prev_prefix: str, prev_kind: str) -> bool:
    """conlleval's ``startOfChunk``: an entity starts at this token."""
    if prefix in ("B", "S"):
        return True
    if prefix in ("I", "E") and prev_prefix in ("E", "S", "O"):
        return True
    return prefix != "O" and prev_kind != kind


def entity_spans(tags: Sequence[Any]) -> set[tuple[str, int, int]]:
    """The entities of one sentence's tags, as conlleval reads them: ``{(type, first, last)}``.

    IOB1, IOB2 and IOBES alike: an entity starts at a ``B`` or ``S``, at an ``I`` or ``E`` after
    ``O``, ``E`` or ``S`` (a stray ``I-`` opens one), and wherever the type changes; it ends after
    an ``E`` or ``S``, before a ``B``, ``S`` or ``O``, and before a change of type (conlleval's
    ``startOfChunk`` and ``endOfChunk``, with IOBES as seqeval's default mode reads it). ``B-X B-X``
    are two entities.

    Raises
    ------
    ValueError
        For a tag that is not ``O`` or a prefix ``B``, ``I``, ``E``, ``S`` with a type.
    """
    spans = set()
    start, prev_prefix, prev_kind = None, "O", ""
    for i, tag in enumerate([*tags, "O"]):
        prefix, kind = _split_tag(tag)
        if start is not None and _entity_ends(prefix, kind, prev_prefix, prev_kind):
            spans.add((prev_kind, start, i - 1))
            start = None
        if _entity_starts(prefix, kind, prev_prefix, prev_kind):
            start = i
        prev_prefix, prev_kind = prefix, kind
    return spans


@dataclass(frozen=True)
class EntityScores:
    """Entity-level precision, recall and F1 over a corpus (conlleval's overall figures, or one
    type's)."""

    precision: float
    recall: float
    f1: float
    n_true: int
    n_predicted: int
    n_correct: int

    @classmethod
    def from_counts(cls, n_true: int, n_predicted: int, n_correct: int) -> "EntityScores":
        """The scores of the counts: precision and recall 0 without predicted or true entities, F1
        their harmonic mean (0 when no entity is correct)."""
        precision = n_correct / n_predicted if n_predicted else 0.0
        recall = n_correct / n_true if n_true else 0.0
        f1 = 2 * precision * recall / (precision + recall) if n_correct else 0.0
        return cls(precision, recall, f1, n_true, n_predicted, n_correct)


def _touches(span: tuple[str, int, int], nodes: np.ndarray) -> bool:
    """Whether an entity ``(type, first, last)`` covers one of ``nodes`` or ends or starts beside one."""
    return bool(np.any((nodes >= span[1] - 1) & (nodes <= span[2] + 1)))


def _overall(counts: dict[str, tuple[int, int, int]]) -> EntityScores:
    """The scores of :func:`_entity_counts` summed over the types (conlleval's overall figures)."""
    return EntityScores.from_counts(*(int(sum(c[i] for c in counts.values())) for i in range(3)))


def _by_type(counts: dict[str, tuple[int, int, int]]) -> dict[str, EntityScores]:
    """The scores of every type of :func:`_entity_counts` (conlleval's per-type lines)."""
    return {kind: EntityScores.from_counts(*count) for kind, count in counts.items()}


def _entity_counts(tags_true: Sequence[Sequence[Any]],
                   tags_pred: Sequence[Sequence[Any]]) -> dict[str, tuple[int, int, int]]:
    """Per entity type ``(n_true, n_predicted, n_correct)`` over all sentences.

    An unlabelled token of ``tags_true`` (None or masked) is read as ``O`` there, and every entity,
    true or predicted, that covers it or ends or starts beside it is left out: its extent is unknown.
    """
    if len(tags_true) != len(tags_pred):
        raise ValueError(f"tags_pred must hold one sentence per sentence of tags_true ({len(tags_true)}), "
                         f"got {len(tags_pred)}")
    counts: dict[str, list[int]] = {}
    for k, (truth, guess) in enumerate(zip(tags_true, tags_pred)):
        values, labelled = _truth(truth)
        truth = values.tolist()
        guess = np.ravel(np.asarray(guess, dtype=object)).tolist()
        if len(truth) != len(guess):
            raise ValueError(f"tags_pred[{k}] has {len(guess)} tags, tags_true[{k}] {len(truth)}")
        true_spans = entity_spans([tag if known else "O" for tag, known in zip(truth, labelled)])
        pred_spans = entity_spans(guess)
        if not labelled.all():
            unknown = np.flatnonzero(~labelled)
            true_spans = {span for span in true_spans if not _touches(span, unknown)}
            pred_spans = {span for span in pred_spans if not _touches(span, unknown)}
        for index, spans in enumerate((true_spans, pred_spans, true_spans & pred_spans)):
            for kind, _, _ in spans:
                counts.setdefault(kind, [0, 0, 0])[index] += 1
    return {kind: (n_true, n_pred, n_correct) for kind, (n_true, n_pred, n_correct) in sorted(counts.items())}


def entity_scores(tags_true: Sequence[Sequence[Any]], tags_pred: Sequence[Sequence[Any]]) -> EntityScores:
    """Entity precision, recall and F1 of predicted tags, with conlleval's semantics.

    An entity is correct when a predicted one has the same type, first and last token as a true
    one (:func:`entity_spans`, per sentence); precision and recall are over all entities of all
    sentences (micro), and F1 their harmonic mean (0 when no entity is correct). Unlabelled tokens
    (None or masked in ``tags_true``) leave out the entities they touch (:func:`entity_report`).

    Parameters
    ----------
    tags_true, tags_pred : sequence of sequences of str
        Per sentence its tags (``"B-PER"``, ``"I-PER"``, ``"O"``, ...), IOB1, IOB2 or IOBES.

    Returns
    -------
    EntityScores

    Raises
    ------
    ValueError
        When the two do not hold as many sentences, a sentence's tag counts differ, or a tag is
        not one of the scheme's.
    """
    return _overall(_entity_counts(tags_true, tags_pred))


def entity_scores_by_type(tags_true: Sequence[Sequence[Any]],
                          tags_pred: Sequence[Sequence[Any]]) -> dict[str, EntityScores]:
    """:func:`entity_scores` of every entity type that occurs in ``tags_true`` or ``tags_pred``
    (sorted by type): conlleval's per-type lines."""
    return _by_type(_entity_counts(tags_true, tags_pred))


def entity_f1(tags_true: Sequence[Sequence[Any]], tags_pred: Sequence[Sequence[Any]],
              average: str | None = "micro") -> float | np.ndarray:
    """Entity F1 (conlleval's, :func:`entity_scores`).

    Parameters
    ----------
    tags_true, tags_pred : sequence of sequences of str
    average : {"micro", "macro", "weighted"} or None, default="micro"
        ``"micro"``: over all entities (conlleval's overall F1); ``"macro"``: the mean of the types'
        F1, over the types of ``tags_true`` and ``tags_pred``; ``"weighted"``: that mean weighted by
        each type's true entities; None: the types' F1 in sorted type order (as seqeval's ``f1_score``).

    Returns
    -------
    float, or ndarray of shape (n_types,) with ``average=None``
    """
    average = check_option(average, "average", ("micro", "macro", "weighted", None))
    if average == "micro":
        return entity_scores(tags_true, tags_pred).f1
    report = entity_report(tags_true, tags_pred)
    if average is None:
        return report["f1"].iloc[:-3].to_numpy()
    return float(report.loc[f"{average} avg", "f1"])


def entity_report(tags_true: Sequence[Sequence[Any]], tags_pred: Sequence[Sequence[Any]]) -> pd.DataFrame:
    """conlleval's figures per entity type, then micro, macro and support-weighted averages
    (seqeval's ``classification_report`` as a table).

    Unlabelled tokens of ``tags_true`` (None, or masked entries of masked arrays) are not scored:
    they are ``O`` to the true entities, and every entity, true or predicted, that covers one or
    ends or starts beside one is left out (whether it is right depends on labels nobody gave).

    Returns
    -------
    pandas.DataFrame
        Indexed by type (sorted), then ``"micro avg"``, ``"macro avg"``, ``"weighted avg"``;
        columns ``precision``, ``recall``, ``f1``, ``support`` (true entities), ``n_predicted``
        and ``n_correct``.
    """
    counts = _entity_counts(tags_true, tags_pred)
    by_type = _by_type(counts)
    rows = pd.DataFrame([[s.precision, s.recall, s.f1, s.n_true] for s in by_type.values()],
                        columns=["precision", "recall", "f1", "support"], index=pd.Index(list(by_type), dtype=object))
    overall = _overall(counts)
    table = _with_averages(rows, micro=(overall.precision, overall.recall, overall.f1))
    predicted = [s.n_predicted for s in by_type.values()] + [overall.n_predicted] * 3
    correct = [s.n_correct for s in by_type.values()] + [overall.n_correct] * 3
    return table.assign(n_predicted=np.array(predicted, dtype=np.int64), n_correct=np.array(correct, dtype=np.int64))


def make_node_scorer(metric: Callable[..., float | np.ndarray],
                     **kwargs: Any) -> Callable[[Any, Sequence, Sequence], float | np.ndarray]:
    """A scorer ``scorer(estimator, X, Y)`` (greater is better) from a node metric.

    Parameters
    ----------
    metric : callable
        ``metric(Y_true, Y_pred, **kwargs)`` on lists of labellings, e.g. :func:`node_f1`.
    **kwargs
        Passed to ``metric``.
    """
    def scorer(estimator: Any, X: Sequence, Y: Sequence) -> float | np.ndarray:
        return metric(Y, estimator.predict(X), **kwargs)

    scorer.__name__ = f"{getattr(metric, '__name__', 'metric')}_scorer"
    return scorer


#: Per-node accuracy (what ``score`` returns), as a scorer.
node_accuracy_scorer = make_node_scorer(node_accuracy)
#: Macro F1 over the states of all nodes, as a scorer.
node_f1_scorer = make_node_scorer(node_f1, average="macro")
#: Whole-example accuracy, as a scorer.
sequence_accuracy_scorer = make_node_scorer(sequence_accuracy)
#: conlleval's overall entity F1 of IOB / IOBES tags (string labels), as a scorer.
entity_f1_scorer = make_node_scorer(entity_f1, average="micro")


# ----------------------------------------------------------------------------------------
# calibration of node marginals
# ----------------------------------------------------------------------------------------
def _flatten_marginals(Y_true: Sequence, marginals: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """All nodes' true labels ``(N,)`` and marginals ``(N, L)``, checked."""
    if len(Y_true) != len(marginals):
        raise ValueError(f"Y_true and marginals must hold as many examples, got {len(Y_true)} and {len(marginals)}")
    if len(Y_true) == 0:
        raise ValueError("Y_true must hold at least one example")
    truths = [_truth(y) for y in Y_true]
    labels = np.concatenate([values for values, _ in truths])
    labelled = np.concatenate([keep for _, keep in truths])
    if labels.dtype.kind not in "iu" and not (labels.dtype.kind == "f" and np.all(labels == np.round(labels))):
        raise ValueError(f"Y_true must hold integer labels, got dtype {labels.dtype}")
    probabilities = np.concatenate([np.asarray(p, dtype=np.float64) for p in marginals])
    if probabilities.ndim != 2 or probabilities.shape[0] != labels.shape[0]:
        raise ValueError(f"marginals must be one (n, L) array per example matching Y_true's nodes, got "
                         f"{probabilities.shape} for {labels.shape[0]} nodes")
    labels, probabilities = labels[labelled].astype(np.int64), probabilities[labelled]
    if labels.size == 0:
        raise ValueError("Y_true has no labelled node (every node is -1 or masked): nothing to score")
    if not np.all(np.isfinite(probabilities)) or probabilities.min() < 0:
        raise ValueError("marginals must be finite and nonnegative")
    if np.abs(probabilities.sum(axis=1) - 1).max() > 1e-6:
        raise ValueError("marginals: every node's row must sum to 1")
    if labels.min() < 0 or labels.max() >= probabilities.shape[1]:
        raise ValueError(f"Y_true holds labels outside [0, {probabilities.shape[1]})")
    return labels, probabilities


def node_log_loss(Y_true: Sequence, marginals: Sequence, *, floor: float = 1e-15) -> float:
    """Mean negative log marginal of the true label over the labelled nodes (NLL per node).

    Parameters
    ----------
    Y_true : list of int arrays (n,)
    marginals : list of arrays (n, L)
        Node marginals, e.g. from ``predict_marginals``.
    floor : float, default=1e-15
        Marginals are clipped below at ``floor`` (a zero marginal of the truth would be infinite).
    """
    labels, probabilities = _flatten_marginals(Y_true, marginals)
    return float(-np.mean(np.log(np.maximum(probabilities[np.arange(labels.size), labels], floor))))


def node_brier_score(Y_true: Sequence, marginals: Sequence) -> float:
    """Mean over all nodes of ``sum_a (p(a) - [a = y])^2`` (0 is perfect, 2 the worst)."""
    labels, probabilities = _flatten_marginals(Y_true, marginals)
    errors = probabilities.copy()
    errors[np.arange(labels.size), labels] -= 1.0
    return float(np.mean(np.sum(errors**2, axis=1)))


@dataclass(frozen=True)
class CalibrationCurve:
    """The nodes binned by confidence (their largest marginal): per bin its node count, mean
    confidence and accuracy (the fraction whose most probable label is the truth; NaN when empty)."""

    edges: np.ndarray
    count: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray

    @property
    def expected_error(self) -> float:
        """The expected calibration error ``sum_b (n_b / N) |accuracy_b - confidence_b|``."""
        used = self.count > 0
        weights = self.count[used] / self.count.sum()
        return float(np.sum(weights * np.abs(self.accuracy[used] - self.confidence[used])))


def calibration_curve(Y_true: Sequence, marginals: Sequence, *, n_bins: int = 15) -> CalibrationCurve:
    """Reliability diagram of node marginals: ``n_bins`` equal-width confidence bins on ``[0, 1]``.

    The confidence of a node is its largest marginal and its prediction that label (ties: the
    smallest); a calibrated model's accuracy in each bin equals the bin's mean confidence.
    """
    labels, probabilities = _flatten_marginals(Y_true, marginals)
    if not isinstance(n_bins, (int, np.integer)) or isinstance(n_bins, bool) or n_bins < 1:
        raise ValueError(f"n_bins must be an int >= 1, got {n_bins!r}")
    confidence = probabilities.max(axis=1)
    correct = probabilities.argmax(axis=1) == labels
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    bins = np.clip(np.searchsorted(edges, confidence, side="right") - 1, 0, n_bins - 1)
    count = np.bincount(bins, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_confidence = np.bincount(bins, weights=confidence, minlength=n_bins) / count
        accuracy = np.bincount(bins, weights=correct, minlength=n_bins) / count
    return CalibrationCurve(edges, count, mean_confidence, accuracy)


def expected_calibration_error(Y_true: Sequence, marginals: Sequence, *, n_bins: int = 15) -> float:
    """``sum_b (n_b / N) |accuracy_b - confidence_b|`` over the bins of :func:`calibration_curve`."""
    return calibration_curve(Y_true, marginals, n_bins=n_bins).expected_error
