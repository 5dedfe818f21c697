"""Scores of labellings over all nodes of all examples, and scorers for scikit-learn's model selection.

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
from typing import Any

import numpy as np
from sklearn.metrics import accuracy_score, f1_score

__all__ = ["make_node_scorer", "node_accuracy", "node_accuracy_scorer", "node_f1", "node_f1_scorer"]


def _flatten(Y_true: Sequence, Y_pred: Sequence) -> tuple[np.ndarray, np.ndarray]:
    if len(Y_true) != len(Y_pred):
        raise ValueError(f"Y_true and Y_pred must hold as many examples, got {len(Y_true)} and {len(Y_pred)}")
    for k, (truth, guess) in enumerate(zip(Y_true, Y_pred)):
        if np.shape(truth) != np.shape(guess):
            raise ValueError(f"example {k}: Y_true has shape {np.shape(truth)}, Y_pred {np.shape(guess)}")
    if len(Y_true) == 0:
        raise ValueError("Y_true must hold at least one example")
    return (np.concatenate([np.ravel(y) for y in Y_true]), np.concatenate([np.ravel(y) for y in Y_pred]))


def node_accuracy(Y_true: Sequence, Y_pred: Sequence) -> float:
    """The fraction of all nodes (of all examples) labelled correctly."""
    truth, guess = _flatten(Y_true, Y_pred)
    return float(accuracy_score(truth, guess))


def node_f1(Y_true: Sequence, Y_pred: Sequence, average: str = "macro", **kwargs: Any) -> float:
    """scikit-learn's ``f1_score`` over all nodes; ``average="macro"``: the mean of the states' F1."""
    truth, guess = _flatten(Y_true, Y_pred)
    return float(f1_score(truth, guess, average=average, **kwargs))


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
