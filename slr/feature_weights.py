"""The weights of a fitted chain model by feature name, as sklearn-crfsuite shows them.

For a model whose unary function is linear in the node features (:class:`~slr.oracles.Linear`,
:class:`~slr.oracles.Constant` or :class:`~slr.oracles.Zero`) and whose pairwise function sees one
constant edge feature (chains from :func:`slr.formats.chain_example`, :class:`SequenceVectorizer
<slr.formats.SequenceVectorizer>` and ``from_chain_crf``), the model scores a labelling ``y`` of
a chain ``x`` by

    g(x, y) = sum_i [ sum_j x_ij w(j, y_i) + c(y_i) ] + sum_i t(y_i, y_{i+1}),

with ``w`` the unary ``coef_`` (in the caller's feature units), ``c`` its ``intercept_`` and ``t``
the pairwise function's table. These are the functions of the fit; its potentials are ``epsilon``
times them, and its CRF is ``p(y | x) ∝ exp(g(x, y))``, so they are the weights CRFsuite would
hold for the same model (:mod:`slr.crfsuite` writes them to its model file).

:func:`state_features` and :func:`transition_features` give them as DataFrames (sklearn-crfsuite's
``state_features_`` and ``transition_features_``), :func:`top_weights` the largest or most
negative ones.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from slr.oracles import Constant, Linear, Zero
from slr.validation import check_bool, check_int

__all__ = ["INTERCEPT", "chain_parts", "state_features", "top_weights", "transition_features",
           "transition_table", "unary_weights"]

#: The feature name :func:`state_features` gives the unary intercept ``c``.
INTERCEPT = "<intercept>"


def chain_parts(model: Any) -> tuple[Any, np.ndarray | None]:
    """The fitted learner of ``model`` and its node-feature names where ``model`` knows them.

    ``model`` is a fitted learner (``unary_``, ``pairwise_``), a fitted ``Pipeline`` ending in one
    (names from the steps before it, ``get_feature_names_out``), or a fitted
    :class:`slr.tagging.SequenceTagger`.
    """
    if isinstance(model, Pipeline):
        check_is_fitted(model)
        try:
            names = np.asarray(model[:-1].get_feature_names_out(), dtype=object)
        except AttributeError:
            names = None
        return model[-1], names
    if hasattr(model, "learner_") and hasattr(model, "vectorizer_"):
        return model.learner_, np.asarray(model.vectorizer_.get_feature_names_out(), dtype=object)
    return model, None


def _fitted_learner(learner: Any) -> Any:
    if not hasattr(learner, "unary") or not hasattr(learner, "pairwise"):
        raise ValueError(f"model must be a structured learner with unary and pairwise functions, got "
                         f"{type(learner).__name__}")
    check_is_fitted(learner, "unary_")
    if getattr(learner, "n_hidden_states_", 0):
        raise ValueError(f"model has {learner.n_hidden_states_} hidden states: only models without hidden "
                         "states have weights per label")
    return learner


def unary_weights(model: Any) -> tuple[np.ndarray, np.ndarray]:
    """The unary function's weights ``w`` (L, d) and intercept ``c`` (L,), in the feature units of ``X``.

    Raises
    ------
    ValueError
        When the unary function is not linear in the node features (an MLP, trees, LightGBM).
    """
    learner = _fitted_learner(chain_parts(model)[0])
    unary, L, d = learner.unary_, learner.n_states_, learner.n_node_features_
    if isinstance(unary, Linear):
        return np.array(unary.coef_, dtype=np.float64), np.array(unary.intercept_, dtype=np.float64)
    if isinstance(unary, Constant):
        return np.zeros((L, d)), np.array(unary.table_, dtype=np.float64)
    if isinstance(unary, Zero):
        return np.zeros((L, d)), np.zeros(L)
    raise ValueError(f"the unary function is {type(unary).__name__}, not linear in the node features: it has no "
                     "weight per feature (Linear, Constant and Zero have)")


def transition_table(model: Any) -> np.ndarray:
    """The pairwise function's table ``t[a, b]`` (L, L): label ``a`` at a node followed by ``b`` at the next.

    The pairwise function is evaluated on the constant edge feature 1 of a chain (any function
    class will do); a model fitted on graphs without edges has zeros.

    Raises
    ------
    ValueError
        When the edge features have more than one column, as edge features that vary per edge
        (or a one-hot of the edge's direction) give no single table.
    """
    learner = _fitted_learner(chain_parts(model)[0])
    L, width, pairwise = learner.n_states_, learner.n_edge_features_, learner.pairwise_
    try:
        check_is_fitted(pairwise)
    except NotFittedError:   # no example had an edge
        return np.zeros((L, L))
    if width != 1 and not isinstance(pairwise, (Constant, Zero)):
        raise ValueError(f"the pairwise function takes {width} edge features: only a model of one constant edge "
                         "feature (chain_example's, SequenceVectorizer's) has one transition table")
    return np.asarray(pairwise.decision_function(np.ones((1, width))), dtype=np.float64).reshape(L, L)


def _labels(learner: Any, labels: Sequence | np.ndarray | None) -> np.ndarray:
    """Each state's label: ``labels``, else the learner's ``classes_``, else the states 0 .. L-1."""
    if labels is None:
        labels = getattr(learner, "classes_", None)
    if labels is None:
        return np.arange(learner.n_states_)
    out = np.asarray(list(labels), dtype=object)
    if out.shape != (learner.n_states_,):
        raise ValueError(f"labels must name the model's {learner.n_states_} states, got {len(out)} labels")
    return out


def state_features(model: Any, feature_names: Sequence[str] | None = None,
                   labels: Sequence | np.ndarray | None = None, *,
                   nonzero: bool = True) -> pd.DataFrame:
    """The unary weights as a table: one row per (feature, label).

    Parameters
    ----------
    model : fitted learner, Pipeline or SequenceTagger
        See :func:`chain_parts`.
    feature_names : sequence of str, optional
        One name per node-feature column; from the Pipeline's or tagger's vectoriser when None,
        else ``"x0"``, ``"x1"``, ...
    labels : sequence, optional
        The label of each state (in the order of the integer labels); the learner's ``classes_``
        when None and it has them, else the states' integers.
    nonzero : bool, default=True
        Leave out zero weights (as CRFsuite's model keeps only the features it trained).

    Returns
    -------
    pandas.DataFrame
        Columns ``feature``, ``label``, ``weight``, ordered by feature column then state; the
        intercept's rows (where it is not zero) come first, under the feature :data:`INTERCEPT`.
        A node's score for label ``l`` is the sum of ``weight * value`` over its features' rows
        with label ``l`` plus the intercept's.
    """
    learner, known = chain_parts(model)
    coef, intercept = unary_weights(learner)
    L, d = coef.shape
    names = known if feature_names is None else np.asarray(list(feature_names), dtype=object)
    if names is None:
        names = np.array([f"x{j}" for j in range(d)], dtype=object)
    if names.shape != (d,):
        raise ValueError(f"feature_names must have one name per node-feature column ({d}), got {names.size}")
    label_names = _labels(learner, labels)
    frame = pd.DataFrame({"feature": np.concatenate([np.full(L, INTERCEPT, dtype=object), np.repeat(names, L)]),
                          "label": np.tile(label_names, d + 1),
                          "weight": np.concatenate([intercept, coef.T.ravel()])})
    if check_bool(nonzero, "nonzero"):
        frame = frame[frame["weight"] != 0]
    else:
        frame = frame.iloc[0 if intercept.any() else L:]
    return frame.reset_index(drop=True)


def transition_features(model: Any, labels: Sequence | np.ndarray | None = None) -> pd.DataFrame:
    """The transition table as a table: one row per (label, next label), ``L^2`` rows.

    Returns
    -------
    pandas.DataFrame
        Columns ``from``, ``to``, ``weight``: the score added when label ``to`` follows ``from``.
    """
    learner = chain_parts(model)[0]
    table = transition_table(learner)
    names = _labels(learner, labels)
    L = table.shape[0]
    return pd.DataFrame({"from": np.repeat(names, L), "to": np.tile(names, L), "weight": table.ravel()})


def top_weights(weights: pd.DataFrame, k: int = 20, *, negative: bool = False) -> pd.DataFrame:
    """The ``k`` largest weights of a :func:`state_features` or :func:`transition_features` table,
    largest first, or with ``negative`` the ``k`` most negative, most negative first (ties in
    table order)."""
    if not isinstance(weights, pd.DataFrame) or "weight" not in weights:
        raise ValueError("weights must be a DataFrame with a 'weight' column (state_features, transition_features)")
    k = check_int(k, "k", 0)
    order = weights["weight"] if negative else -weights["weight"]
    return weights.iloc[np.argsort(order.to_numpy(), kind="stable")[:k]].reset_index(drop=True)
