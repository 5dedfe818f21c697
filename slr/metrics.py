"""Scores of labellings over all nodes of all examples, and scorers for scikit-learn's model selection.

Every metric leaves out the unlabelled nodes of the true labellings: a label ``-1`` (integer
labels), ``None`` (labels of other types, such as strings), or a masked entry of a numpy masked
array (the partial labels ``StructuredLogisticRegression.fit`` takes). Labels may be of any type
the learners take (:mod:`slr.labels`): what ``predict`` returns is compared with ``Y`` as it is.

scikit-learn's string scorers (``scoring="f1_macro"``) cannot read structured labels (a list of
per-example arrays is of an "unknown" target type to them). The scorers here flatten the true and
predicted labellings over all nodes and then apply scikit-learn's metric, so
``GridSearchCV(model, grid, scoring=node_f1_scorer)`` and ``cross_val_score(..., scoring=...)``
work with every slr learner.

>>> import numpy as np
>>> node_accuracy([np.array([0, 1]), np.array([2])], [np.array([0, 0]), np.array([2])])
0.6666666666666666
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.metrics import accuracy_score, f1_score

__all__ = ["CalibrationCurve", "EntityScores", "calibration_curve", "entity_scores", "entity_spans",
           "expected_calibration_error", "make_node_scorer", "node_accuracy", "node_accuracy_scorer",
           "node_brier_score", "node_f1", "node_f1_scorer", "node_log_loss"]


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


def _flatten(Y_true: Sequence, Y_pred: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """The true and predicted labels of every labelled node of every example."""
    if len(Y_true) != len(Y_pred):
        raise ValueError(f"Y_true and Y_pred must hold as many examples, got {len(Y_true)} and {len(Y_pred)}")
    if len(Y_true) == 0:
        raise ValueError("Y_true must hold at least one example")
    truths, guesses = [], []
    for k, (truth, guess) in enumerate(zip(Y_true, Y_pred)):
        if np.shape(truth) != np.shape(guess):
            raise ValueError(f"example {k}: Y_true has shape {np.shape(truth)}, Y_pred {np.shape(guess)}")
        values, labelled = _truth(truth)
        truths.append(values[labelled])
        guesses.append(np.ravel(np.asarray(guess))[labelled])
    truth, guess = np.concatenate(truths), np.concatenate(guesses)
    if truth.size == 0:
        raise ValueError("Y_true has no labelled node (every node is -1 or masked): nothing to score")
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


def _split_tag(tag: str) -> tuple[str, str]:
    """``"B-PER"`` -> ``("B", "PER")``; a tag without a type (``"O"``) -> ``(tag, "")``."""
    prefix, _, kind = str(tag).partition("-")
    return prefix, kind


def entity_spans(tags: Sequence[str]) -> set[tuple[str, int, int]]:
    """The entities of one sentence's IOB tags, as conlleval reads them: ``{(type, first, last)}``.

    IOB1 and IOB2 alike: an entity starts at a ``B``, at an ``I`` after ``O`` and wherever the
    type changes, and ends before a ``B`` or ``O`` or a change of type (conlleval's
    ``startOfChunk`` and ``endOfChunk``).
    """
    spans = set()
    start, prev_prefix, prev_kind = None, "O", ""
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, kind = _split_tag(tag)
        ends = (prev_prefix in ("B", "I") and (prefix in ("B", "O") or kind != prev_kind))
        starts = prefix == "B" or (prefix == "I" and (prev_prefix == "O" or kind != prev_kind))
        if ends and start is not None:
            spans.add((prev_kind, start, i - 1))
            start = None
        if starts:
            start = i
        prev_prefix, prev_kind = prefix, kind
    return spans


@dataclass(frozen=True)
class EntityScores:
    """Entity-level precision, recall and F1 over a corpus (conlleval's overall figures)."""

    precision: float
    recall: float
    f1: float
    n_true: int
    n_predicted: int
    n_correct: int


def entity_scores(tags_true: Sequence[Sequence[str]], tags_pred: Sequence[Sequence[str]]) -> EntityScores:
    """Entity precision, recall and F1 of predicted IOB tags, with conlleval's semantics.

    An entity is correct when a predicted one has the same type, first and last token as a true
    one (:func:`entity_spans`, per sentence); precision and recall are over all entities of all
    sentences, and F1 their harmonic mean (0 when no entity is correct).

    Parameters
    ----------
    tags_true, tags_pred : sequence of sequences of str
        Per sentence its tags (``"B-PER"``, ``"I-PER"``, ``"O"``, ...).

    Returns
    -------
    EntityScores

    Raises
    ------
    ValueError
        When the two do not hold as many sentences, or a sentence's tag counts differ.
    """
    if len(tags_true) != len(tags_pred):
        raise ValueError(f"tags_pred must hold one sentence per sentence of tags_true ({len(tags_true)}), "
                         f"got {len(tags_pred)}")
    n_true = n_pred = n_correct = 0
    for k, (truth, guess) in enumerate(zip(tags_true, tags_pred)):
        if len(truth) != len(guess):
            raise ValueError(f"tags_pred[{k}] has {len(guess)} tags, tags_true[{k}] {len(truth)}")
        true_spans, pred_spans = entity_spans(truth), entity_spans(guess)
        n_true += len(true_spans)
        n_pred += len(pred_spans)
        n_correct += len(true_spans & pred_spans)
    precision = n_correct / n_pred if n_pred else 0.0
    recall = n_correct / n_true if n_true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if n_correct else 0.0
    return EntityScores(precision, recall, f1, n_true, n_pred, n_correct)


def make_node_scorer(metric: Callable[..., float], **kwargs: Any) -> Callable[[Any, Sequence, Sequence], float]:
    """A scorer ``scorer(estimator, X, Y)`` (greater is better) from a node metric.

    Parameters
    ----------
    metric : callable
        ``metric(Y_true, Y_pred, **kwargs)`` on lists of labellings, e.g. :func:`node_f1`.
    **kwargs
        Passed to ``metric``.
    """
    def scorer(estimator: Any, X: Sequence, Y: Sequence) -> float:
        return metric(Y, estimator.predict(X), **kwargs)

    scorer.__name__ = f"{getattr(metric, '__name__', 'metric')}_scorer"
    return scorer


#: Per-node accuracy (what ``score`` returns), as a scorer.
node_accuracy_scorer = make_node_scorer(node_accuracy)
#: Macro F1 over the states of all nodes, as a scorer.
node_f1_scorer = make_node_scorer(node_f1, average="macro")


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
