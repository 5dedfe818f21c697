"""Sequence tagging the way CRFsuite users do it: feature dicts and string tags in, string tags out.

:class:`SequenceTagger` is a :class:`~slr.formats.SequenceVectorizer` and a structured learner in
one scikit-learn estimator, with sklearn-crfsuite's ``CRF`` interface: ``fit(X, y)`` takes one
list of per-token feature dicts and one list of tags per sentence, ``predict`` returns lists of
tags, and the fitted tagger shows its weights by feature name (``state_features_``,
``transition_features_``) and writes a CRFsuite model file (:meth:`SequenceTagger.save_crfsuite`).
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from slr.crfsuite import CRFsuiteModel, save_crfsuite
from slr.feature_weights import state_features, transition_features
from slr.formats import SequenceVectorizer
from slr.learner import StructuredLogisticRegression
from slr.oracles import Linear

__all__ = ["SequenceTagger"]


class SequenceTagger(BaseEstimator):
    """Tag sequences of feature dicts with string tags (sklearn-crfsuite's ``CRF`` interface).

    Parameters
    ----------
    learner : structured learner, optional
        Fitted on the vectorised sentences (cloned). None:
        ``StructuredLogisticRegression(Linear(l2=0.1), Linear(l2=0.1))``, a linear-chain CRF with
        a ridge on both functions that :meth:`save_crfsuite` can export (an SSVM's ``C = 0.1`` at
        the learner's default ``epsilon``, 0.01 for linear oracles: ``C = epsilon / l2``). Tune it through
        ``learner__...`` parameters (``GridSearchCV(tagger, {"learner__unary__l2": [...]})``).
    vectorizer : SequenceVectorizer, optional
        Turns the dicts into chains (cloned); ``SequenceVectorizer()`` when None.

    Attributes
    ----------
    classes_ : ndarray
        The tags seen at ``fit``, sorted: the learner's ``classes_`` (it is fitted on the tags).
    vectorizer_ : SequenceVectorizer
    learner_ : fitted learner
    state_features_ : pandas.DataFrame
        The unary weights by feature name and tag, zeros left out
        (:func:`slr.feature_weights.state_features`).
    transition_features_ : pandas.DataFrame
        The transition weights by tag pair (:func:`slr.feature_weights.transition_features`).

    Examples
    --------
    >>> from slr.tagging import SequenceTagger
    >>> X = [[{"word": "Anna"}, {"word": "runs"}], [{"word": "Oslo"}, {"word": "sleeps"}]]
    >>> y = [["B-PER", "O"], ["B-LOC", "O"]]
    >>> SequenceTagger().fit(X, y).predict([[{"word": "Oslo"}, {"word": "runs"}]])
    [['B-LOC', 'O']]
    """

    def __init__(self, learner: Any = None, vectorizer: Any = None) -> None:
        self.learner = learner
        self.vectorizer = vectorizer

    def fit(self, X: Sequence, y: Sequence) -> "SequenceTagger":
        """Learn the vocabulary and the model from sentences of feature dicts ``X`` and their tags ``y``.

        A tag ``None`` marks a token whose tag is unknown: the learner treats it as a latent label
        (partial labels, :mod:`slr.latent`) and the transitions around it stay unconstrained by data.
        """
        sentences = list(X)
        vectorizer = clone(self.vectorizer) if self.vectorizer is not None else SequenceVectorizer()
        examples = vectorizer.fit_transform(sentences)
        tags = _checked_tags(y, [len(s) for s in sentences])
        learner = (clone(self.learner) if self.learner is not None
                   else StructuredLogisticRegression(Linear(l2=0.1), Linear(l2=0.1)))
        learner.fit(examples, tags)
        self.vectorizer_, self.learner_, self.classes_ = vectorizer, learner, learner.classes_
        return self

    def predict(self, X: Sequence) -> list[list]:
        """The tags of every sentence, a list per sentence."""
        check_is_fitted(self, "learner_")
        return [np.asarray(tags).tolist() for tags in self.learner_.predict(self.vectorizer_.transform(X))]

    def score(self, X: Sequence, y: Sequence) -> float:
        """Token accuracy of ``predict(X)`` against the tags ``y``."""
        predicted = self.predict(X)
        truth = list(y)
        if [len(t) for t in truth] != [len(p) for p in predicted]:
            raise ValueError("y must have one tag per token of every sentence of X")
        return float(np.mean([a == b for t, p in zip(truth, predicted) for a, b in zip(t, p)]))

    @property
    def state_features_(self) -> pd.DataFrame:
        check_is_fitted(self, "learner_")
        return state_features(self, labels=self.classes_)

    @property
    def transition_features_(self) -> pd.DataFrame:
        check_is_fitted(self, "learner_")
        return transition_features(self, labels=self.classes_)

    def save_crfsuite(self, path: str | os.PathLike, **kwargs: Any) -> CRFsuiteModel:
        """Write the model as a CRFsuite model file (:func:`slr.crfsuite.save_crfsuite`, which takes
        ``kwargs``): ``pycrfsuite.Tagger().open(path)`` then tags the same dicts as :meth:`predict`."""
        check_is_fitted(self, "learner_")
        return save_crfsuite(self, path, **kwargs)


def _checked_tags(y: Sequence, lengths: list[int]) -> list[np.ndarray]:
    """Every sentence's tags as an array (the learner codes them, :mod:`slr.labels`; ``None``, an
    unknown tag, makes it an object array), checked against the sentences' lengths."""
    tags = [list(t) for t in y]
    if len(tags) != len(lengths):
        raise ValueError(f"y must have one tag sequence per sentence ({len(lengths)}), got {len(tags)}")
    for k, (t, n) in enumerate(zip(tags, lengths)):
        if len(t) != n:
            raise ValueError(f"y[{k}] must have one tag per token ({n}), got {len(t)}")
    return [np.array(t, dtype=object) if any(tag is None for tag in t) else np.array(t) for t in tags]
