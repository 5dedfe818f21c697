"""CRFsuite's model file: write a chain model that CRFsuite's taggers load, and read one back.

CRFsuite (``crf1d``, the model python-crfsuite and sklearn-crfsuite train) scores a labelling
``y`` of a sequence by ``sum_i sum_a v_ia w(a, y_i) + sum_i t(y_i, y_{i+1})``: a weight per
(attribute, label) times the attribute's value at the item, and one transition table, with no
per-label intercept and no start or end transitions. Its model file (``crf1d_model.c``) holds
the features (state features ``(attribute, label, weight)`` and transitions
``(label, label, weight)``), the labels' and the attributes' names in two CQDB string tables
(``cqdb.c``, hashed by Bob Jenkins' ``hashlittle``), and for every label and every attribute
the features it takes part in.

:func:`save_crfsuite` writes a fitted slr chain model with a linear unary function
(:mod:`slr.feature_weights`) as such a file, so that ``pycrfsuite.Tagger().open(path)`` (or
CRFsuite's C, Java, Rust and Node taggers) tags the feature dicts the model's
:class:`~slr.formats.SequenceVectorizer` took as slr's ``predict`` does: both take the
labelling of highest score (Viterbi), and CRFsuite's marginals are those of slr's
``predict_marginals(method="exact")``. :func:`load_crfsuite` reads any such file, CRFsuite's own
included, into a :class:`CRFsuiteModel`, which can also write it (:meth:`CRFsuiteModel.save`).

What cannot be exported, and is refused with a ``ValueError``: a unary function that is not
linear in the node features (MLP, trees, LightGBM), a unary intercept unless it is folded into an
attribute every item carries with value 1 (``intercept_attribute``, sklearn-crfsuite's
``"bias": 1.0``), edge features of more than one column (one table per edge direction, or
features that vary per edge: CRFsuite has one transition table), hidden states, feature columns
without a name (a hashing vectoriser), and, when examples are given to check, graphs that are
not chains, and start or end constraints of ``allowed_transitions`` without an attribute that
marks a sequence's first or last item (``start_attribute``, ``end_attribute``). A model does not
remember the graphs it was fitted on: a model fitted on grids with a constant edge feature would
be written as a chain model, so pass ``X`` to have it checked.
"""
from __future__ import annotations

import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from slr.feature_weights import _labels, chain_parts, transition_table, unary_weights
from slr.transitions import check_transitions

__all__ = ["FORBIDDEN_WEIGHT", "CRFsuiteModel", "crfsuite_model", "hashlittle", "load_crfsuite", "save_crfsuite"]

#: The weight written for a transition (or a start or end label) that ``allowed_transitions``
#: forbids: far below what any sequence's attributes and allowed transitions can add up to, and
#: far above where a double loses the allowed labellings' scores (they never include it).
FORBIDDEN_WEIGHT = -1e9

_MAGIC, _MODEL_TYPE, _VERSION = b"lCRF", b"FOMC", 100
_HEADER = struct.Struct("<4sI4sIIIIIIIII")            # 48 bytes
_CHUNK = struct.Struct("<4sII")                      # chunk id, size, number of items
# a feature: its type (state or transition), source (attribute or label), target label, weight
_FEATURE = np.dtype([("type", "<u4"), ("source", "<u4"), ("target", "<u4"), ("weight", "<f8")])   # 20 bytes
_STATE, _TRANSITION = 0, 1

_CQDB_HEADER = struct.Struct("<4sIIIII")             # id, size, flag, byte order, backlinks, their offset
_CQDB_BYTE_ORDER = 0x62445371
_CQDB_TABLES = 256
_CQDB_DATA = _CQDB_HEADER.size + 8 * _CQDB_TABLES    # the first key/value record


# ------------------------------------------------------------------------------- CQDB
_WORD = 0xFFFFFFFF


def _rotate(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & _WORD


def _mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    """lookup3's ``mix``: six steps ``a -= c; a ^= rot(c, k); c += b``, the roles of a, b, c turning."""
    for k in (4, 6, 8, 16, 19, 4):
        a = ((a - c) & _WORD) ^ _rotate(c, k)
        c = (c + b) & _WORD
        a, b, c = b, c, a
    return a, b, c


def _final(a: int, b: int, c: int) -> int:
    """lookup3's ``final``: seven steps ``c ^= b; c -= rot(b, k)``, the roles turning; returns c."""
    x, y, z = c, b, a
    for k in (14, 11, 25, 16, 4, 14, 24):
        x = ((x ^ y) - _rotate(y, k)) & _WORD
        x, y, z = z, x, y
    return y


def hashlittle(key: bytes, initval: int = 0) -> int:
    """Bob Jenkins' ``hashlittle`` (lookup3.c) of ``key``: the hash CQDB files are indexed by."""
    m = _WORD
    a = b = c = (0xDEADBEEF + len(key) + initval) & m
    rest = len(key)
    offset = 0
    while rest > 12:
        x, y, z = struct.unpack_from("<III", key, offset)
        a, b, c = _mix((a + x) & m, (b + y) & m, (c + z) & m)
        offset += 12
        rest -= 12
    if rest == 0:
        return c
    x, y, z = struct.unpack("<III", key[offset:] + bytes(12 - rest))   # the last block, zero-padded
    return _final((a + x) & m, (b + y) & m, (c + z) & m)


def _cqdb(strings: Sequence[bytes]) -> bytes:
    """A CQDB chunk mapping ``strings[i]`` to ``i`` and back (cqdb.c's writer, byte for byte)."""
    records, backlinks = bytearray(), []
    tables: list[list[tuple[int, int]]] = [[] for _ in range(_CQDB_TABLES)]   # (hash, record offset)
    position = _CQDB_DATA
    for identifier, string in enumerate(strings):
        key = string + b"\0"
        value = hashlittle(key)
        records += struct.pack("<II", identifier, len(key)) + key
        tables[value % _CQDB_TABLES].append((value, position))
        backlinks.append(position)
        position += 8 + len(key)
    buckets, references = bytearray(), bytearray()
    for table in tables:
        n = 2 * len(table)   # half of every bucket array stays empty (open addressing)
        slots = [(0, 0)] * n
        for value, record in table:
            k = (value >> 8) % n
            while slots[k][1] != 0:
                k = (k + 1) % n
            slots[k] = (value, record)
        references += struct.pack("<II", position if n else 0, n)
        position += 8 * n
        buckets += b"".join(struct.pack("<II", *slot) for slot in slots)
    backlink_offset = position if strings else 0
    size = position + 4 * len(backlinks)
    header = _CQDB_HEADER.pack(b"CQDB", size, 0, _CQDB_BYTE_ORDER, len(strings), backlink_offset)
    return header + bytes(references) + bytes(records) + bytes(buckets) + struct.pack(f"<{len(backlinks)}I", *backlinks)


def _read_cqdb(buffer: bytes, start: int, what: str) -> list[str]:
    """The strings of the CQDB chunk at ``start``, by identifier (through its backlinks)."""
    chunk, size, _, order, count, backlinks = _CQDB_HEADER.unpack_from(buffer, start)
    if chunk != b"CQDB" or order != _CQDB_BYTE_ORDER or start + size > len(buffer):
        raise ValueError(f"path is not a CRFsuite model: its {what} table is damaged")
    if count and not backlinks:
        raise ValueError(f"path is not a CRFsuite model: its {what} table cannot be read by identifier")
    strings = []
    for offset in struct.unpack_from(f"<{count}I", buffer, start + backlinks):
        _, length = struct.unpack_from("<II", buffer, start + offset)
        strings.append(buffer[start + offset + 8: start + offset + 7 + length].decode("utf-8"))
    return strings


# ------------------------------------------------------------------------------- the model file
@dataclass(frozen=True)
class CRFsuiteModel:
    """A linear-chain CRF as CRFsuite holds it.

    Attributes
    ----------
    labels : tuple of str
        Label ``k``'s name.
    attributes : tuple of str
        Attribute ``a``'s name.
    state_weights : scipy.sparse.csr_array of shape (n_attributes, n_labels)
        ``w(a, k)``: added ``value * w(a, k)`` to label ``k``'s score where an item has
        attribute ``a`` with that value. Its stored entries are the file's state features.
    transitions : ndarray of shape (n_labels, n_labels)
        ``t(j, k)``: added where label ``k`` follows label ``j``.
    """

    labels: tuple[str, ...]
    attributes: tuple[str, ...]
    state_weights: sp.csr_array
    transitions: np.ndarray

    def __post_init__(self) -> None:
        L, A = len(self.labels), len(self.attributes)
        for what, names in (("labels", self.labels), ("attributes", self.attributes)):
            if len(set(names)) != len(names):
                raise ValueError(f"{what} must be distinct")
            bad = next((n for n in names if not isinstance(n, str) or "\0" in n), None)
            if bad is not None:
                raise ValueError(f"{what} must be strings without NUL characters, got {bad!r}")
        if self.state_weights.shape != (A, L):
            raise ValueError(f"state_weights must have shape ({A}, {L}), got {self.state_weights.shape}")
        if np.shape(self.transitions) != (L, L):
            raise ValueError(f"transitions must have shape ({L}, {L}), got {np.shape(self.transitions)}")

    def save(self, path: str | os.PathLike) -> None:
        """Write the model file (the layout of ``crf1de_save_model``): the header, the features
        (state features attribute by attribute, then the transitions, zero weights left out), the
        label and attribute tables, and every label's and attribute's feature references."""
        weights = sp.csr_array(self.state_weights, dtype=np.float64)
        weights.sum_duplicates()
        weights.eliminate_zeros()
        rows, columns = np.nonzero(np.asarray(self.transitions) != 0)
        L, A, n_state = len(self.labels), len(self.attributes), weights.nnz
        features = np.zeros(n_state + len(rows), dtype=_FEATURE)
        features["type"][n_state:] = _TRANSITION
        features["source"] = np.concatenate([np.repeat(np.arange(A), np.diff(weights.indptr)), rows])
        features["target"] = np.concatenate([weights.indices, columns])
        features["weight"] = np.concatenate([weights.data, np.asarray(self.transitions)[rows, columns]])
        n_features = features.size

        out = bytearray(_HEADER.size)
        off_features = len(out)
        out += _CHUNK.pack(b"FEAT", _CHUNK.size + features.nbytes, n_features) + features.tobytes()
        off_labels = len(out)
        out += _cqdb([name.encode("utf-8") for name in self.labels])
        off_attributes = len(out)
        out += _cqdb([name.encode("utf-8") for name in self.attributes])
        # a label's references: its transitions to the next label (CRFsuite reserves two more slots)
        by_label = [n_state + np.flatnonzero(rows == j) for j in range(L)] + [None, None]
        off_labelrefs = _references(out, b"LFRF", by_label)
        by_attribute = [np.arange(weights.indptr[a], weights.indptr[a + 1]) for a in range(A)]
        off_attrrefs = _references(out, b"AFRF", by_attribute)
        # CRFsuite's writer leaves the header's feature count at 0: the feature chunk holds it
        out[:_HEADER.size] = _HEADER.pack(_MAGIC, len(out), _MODEL_TYPE, _VERSION, 0, L, A, off_features,
                                          off_labels, off_attributes, off_labelrefs, off_attrrefs)
        with open(path, "wb") as file:
            file.write(out)


def _references(out: bytearray, chunk: bytes, lists: Sequence[np.ndarray | None]) -> int:
    """Append a feature-reference chunk (aligned to 4 bytes): the offset of every item's list of
    feature ids (0 for None), then the lists. Returns the chunk's offset."""
    out += bytes(-len(out) % 4)
    begin = len(out)
    body, offsets = bytearray(), []
    position = begin + _CHUNK.size + 4 * len(lists)
    for ids in lists:
        if ids is None:
            offsets.append(0)
            continue
        offsets.append(position + len(body))
        body += struct.pack(f"<I{len(ids)}I", len(ids), *map(int, ids))
    size = _CHUNK.size + 4 * len(lists) + len(body)
    out += _CHUNK.pack(chunk, size, len(lists)) + struct.pack(f"<{len(lists)}I", *offsets) + body
    return begin


def load_crfsuite(path: str | os.PathLike) -> CRFsuiteModel:
    """Read a CRFsuite model file (``crf1d``, as CRFsuite and :meth:`CRFsuiteModel.save` write it).

    Raises
    ------
    ValueError
        When the file is not a CRFsuite chain model.
    """
    with open(path, "rb") as file:
        buffer = file.read()
    if len(buffer) < _HEADER.size:
        raise ValueError(f"path is not a CRFsuite model: {len(buffer)} bytes")
    (magic, size, model_type, _, _, L, A, off_features, off_labels, off_attributes, _,
     _) = _HEADER.unpack_from(buffer)
    if magic != _MAGIC or model_type != _MODEL_TYPE or size != len(buffer):
        raise ValueError(f"path is not a CRFsuite chain model (magic {magic!r}, type {model_type!r}, "
                         f"{size} bytes stated, {len(buffer)} read)")
    chunk, _, n_features = _CHUNK.unpack_from(buffer, off_features)
    if chunk != b"FEAT":
        raise ValueError("path is not a CRFsuite model: no feature chunk where its header says")
    if off_features + _CHUNK.size + _FEATURE.itemsize * n_features > len(buffer):
        raise ValueError("path is not a CRFsuite model: its feature chunk is cut short")
    features = np.frombuffer(buffer, dtype=_FEATURE, count=n_features, offset=off_features + _CHUNK.size)
    labels, attributes = _read_cqdb(buffer, off_labels, "label"), _read_cqdb(buffer, off_attributes, "attribute")
    if (len(labels), len(attributes)) != (L, A):
        raise ValueError(f"path is not a CRFsuite model: {len(labels)} labels and {len(attributes)} attributes "
                         f"in its tables, {L} and {A} in its header")
    state, moves = features[features["type"] == _STATE], features[features["type"] == _TRANSITION]
    transitions = np.zeros((L, L))
    transitions[moves["source"], moves["target"]] = moves["weight"]
    state_weights = sp.csr_array((state["weight"], (state["source"], state["target"])), shape=(A, L))
    state_weights.sum_duplicates()
    return CRFsuiteModel(tuple(labels), tuple(attributes), state_weights, transitions)


# ------------------------------------------------------------------------------- from slr's models
def _attribute_columns(model: Any, attributes: Any, n_features: int) -> dict[str, int]:
    """``{attribute: column}`` from ``attributes`` (see :func:`save_crfsuite`) or the model's vectoriser."""
    if attributes is None:
        vectorizer = getattr(model, "vectorizer_", None)
        if vectorizer is None and hasattr(model, "steps") and len(model.steps) > 1:
            vectorizer = model[-2]
        if not hasattr(vectorizer, "crfsuite_attributes_"):
            raise ValueError("attributes are unknown: pass attributes= (the fitted SequenceVectorizer, or the "
                             "attribute of every node-feature column), or a Pipeline whose SequenceVectorizer comes "
                             "just before the learner")
        attributes = vectorizer
    if hasattr(attributes, "crfsuite_attributes_"):
        columns = attributes.crfsuite_attributes_
        if columns is None:
            raise ValueError("attributes are unknown: a hashing SequenceVectorizer gives its columns no names")
    elif isinstance(attributes, Mapping):
        columns = dict(attributes)
    else:
        names = list(attributes)
        if len(names) != n_features:
            raise ValueError(f"attributes must name the model's {n_features} node-feature columns, got {len(names)}")
        if len(set(names)) != len(names):
            raise ValueError("attributes must be distinct: CRFsuite has one weight per attribute and label")
        columns = {name: j for j, name in enumerate(names)}
    bad = [(name, j) for name, j in columns.items() if not (isinstance(j, (int, np.integer)) and -1 <= j < n_features)]
    if bad:
        raise ValueError(f"attributes must map to node-feature columns 0 .. {n_features - 1}, got {bad[:3]}")
    return columns


def _check_chains(X: Sequence) -> None:
    """Refuse examples that are not chains with the one constant edge feature 1."""
    for k, example in enumerate(X):
        nodes, edges, on_edges = example[0], np.asarray(example[1]), example[2]
        n = nodes.shape[0]
        if edges.shape != (max(n - 1, 0), 2) or np.any(edges != np.column_stack([np.arange(n - 1), np.arange(1, n)])):
            raise ValueError(f"X[{k}] is not a chain (edges (i, i + 1) in order): CRFsuite models chains only")
        on_edges = on_edges.toarray() if sp.issparse(on_edges) else np.asarray(on_edges)
        if on_edges.size and (on_edges.shape[1] != 1 or np.any(on_edges != 1)):
            raise ValueError(f"X[{k}] has edge features other than the constant 1: CRFsuite has one transition "
                             "table for every edge")


def crfsuite_model(model: Any, *, attributes: Any = None, labels: Sequence | None = None,
                   intercept_attribute: str | None = None, start_attribute: str | None = None,
                   end_attribute: str | None = None, X: Sequence | None = None) -> CRFsuiteModel:
    """The :class:`CRFsuiteModel` of a fitted slr chain model; parameters as in :func:`save_crfsuite`."""
    learner, _ = chain_parts(model)
    coef, intercept = unary_weights(learner)
    table = transition_table(learner).copy()
    L, d = coef.shape
    names = tuple(str(label) for label in _labels(learner, labels))
    if X is not None:
        _check_chains(X)
    columns = _attribute_columns(model, attributes, d)
    used = np.flatnonzero(np.any(coef != 0, axis=0))
    named = np.zeros(d, dtype=bool)
    named[[j for j in columns.values() if j >= 0]] = True
    if not named[used].all():
        missing = used[~named[used]]
        raise ValueError(f"{missing.size} node-feature columns with weights have no attribute (columns "
                         f"{missing[:5].tolist()}): CRFsuite would ignore them")
    shared = [name for name, j in columns.items() if j == -1]
    if shared:
        raise ValueError(f"attributes fed to two feature columns have no single weight: {shared[:5]}")
    items = sorted((j, name) for name, j in columns.items() if coef[:, j].any())
    order = np.array([j for j, _ in items], dtype=np.int64)
    attribute_names = [name for _, name in items]
    weights = coef[:, order].T
    constraint = check_transitions(learner.get_params().get("allowed_transitions"), L, names)
    if constraint is not None:
        table[~constraint.pairs] = FORBIDDEN_WEIGHT
    if intercept.any():
        if intercept_attribute is None:
            raise ValueError("the unary function has an intercept, which CRFsuite's model has no place for: fit with "
                             "Linear(fit_intercept=False) and a feature every token carries with value 1 (as "
                             "sklearn-crfsuite's 'bias': 1.0), or pass intercept_attribute= naming such a feature")
        if intercept_attribute in attribute_names:
            at = attribute_names.index(intercept_attribute)
            weights[at] += intercept
        else:
            attribute_names.append(intercept_attribute)
            weights = np.vstack([weights, intercept])
    for side, allowed, attribute in (("start", None if constraint is None else constraint.starts, start_attribute),
                                     ("end", None if constraint is None else constraint.ends, end_attribute)):
        if allowed is None or allowed.all():
            continue
        if attribute is None:
            raise ValueError(f"allowed_transitions forbids some labels at a sequence's {side}, which CRFsuite's "
                             f"model has no transition for: pass {side}_attribute= naming an attribute only the "
                             f"{side} item of every sequence carries, with value 1 (sklearn-crfsuite's "
                             f"{'BOS' if side == 'start' else 'EOS'!r})")
        if attribute not in attribute_names:
            attribute_names.append(attribute)
            weights = np.vstack([weights, np.zeros(L)])
        weights[attribute_names.index(attribute), ~allowed] = FORBIDDEN_WEIGHT
    return CRFsuiteModel(names, tuple(attribute_names), sp.csr_array(weights), table)


def save_crfsuite(model: Any, path: str | os.PathLike, *, attributes: Any = None, labels: Sequence | None = None,
                  intercept_attribute: str | None = None, start_attribute: str | None = None,
                  end_attribute: str | None = None, X: Sequence | None = None) -> CRFsuiteModel:
    """Write a fitted slr chain model as a CRFsuite model file.

    python-crfsuite's ``Tagger().open(path)`` then tags a sequence of feature dicts (the dicts
    the model's :class:`~slr.formats.SequenceVectorizer` took) as slr's ``predict`` does with
    ``predict_epsilon=0`` (the default): Viterbi on the same scores.

    Parameters
    ----------
    model : fitted learner, Pipeline or SequenceTagger
        A :class:`~slr.StructuredLogisticRegression` (or a Pipeline ending in one, or a
        :class:`slr.tagging.SequenceTagger`) with a ``Linear``, ``Constant`` or ``Zero`` unary
        function and a pairwise function of one constant edge feature.
    path : path-like
    attributes : SequenceVectorizer, mapping or sequence of str, optional
        The CRFsuite attribute of the node-feature columns: a fitted SequenceVectorizer (its
        ``crfsuite_attributes_``, python-crfsuite's names for its dicts), a mapping
        ``{attribute: column}``, or one attribute per column. From the Pipeline's vectoriser (the
        step before the learner) or the tagger's when None.
    labels : sequence, optional
        The tag of each state, in the order of the integer labels; the model's ``classes_`` when
        None and it has them, else ``"0"``, ``"1"``, ... Written as strings.
    intercept_attribute : str, optional
        An attribute every item carries with value 1 (sklearn-crfsuite's ``"bias"``), whose weights
        take the unary intercept. Required when the intercept is not zero.
    start_attribute, end_attribute : str, optional
        An attribute only the first (last) item of every sequence carries, with value 1
        (sklearn-crfsuite's ``"BOS"`` and ``"EOS"``), whose weights keep the labels a sequence may
        not start (end) with out of CRFsuite's tags. Required when the model's
        ``allowed_transitions`` constrains a sequence's first (last) label (``"BIO"`` does:
        no sequence starts with ``I-X``). Forbidden pairs need nothing: they are written as
        transitions of weight :data:`FORBIDDEN_WEIGHT`.
    X : sequence of examples, optional
        Examples to check the model is meant for: refused unless every one is a chain with the
        constant edge feature 1.

    Returns
    -------
    CRFsuiteModel
        What was written.

    Raises
    ------
    ValueError
        For a model CRFsuite cannot hold (see the module's docstring).
    """
    crf = crfsuite_model(model, attributes=attributes, labels=labels, intercept_attribute=intercept_attribute,
                         start_attribute=start_attribute, end_attribute=end_attribute, X=X)
    crf.save(path)
    return crf
