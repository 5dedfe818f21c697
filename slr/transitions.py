"""Allowed transitions: which label may follow which along an edge, and where a sequence may start
and end.

A constraint is a boolean mask ``allowed[a, b]``: label ``a`` at an edge's first node ``i`` may be
followed by label ``b`` at its second node ``j``. On a chain the edges are ``(i, i + 1)``; on any
other graph every edge ``(i, j)`` is read the same way, ``i`` before ``j``. A mask of shape
``(L + 2, L + 2)`` (AllenNLP's layout) also constrains the ends: row ``L`` (START) says which labels
a node without an incoming edge (a chain's first node) may take, column ``L + 1`` (END) which labels
a node without an outgoing edge (a chain's last node) may take; its other entries in row and column
``L`` and ``L + 1`` are ignored. An ``(L, L)`` mask leaves the ends free.

:func:`allowed_transitions` builds the ``(L + 2, L + 2)`` mask of a tagging scheme from the tags:

* ``"BIO"`` (IOB2): ``I-X`` may follow only ``B-X`` or ``I-X``; ``B-X`` and ``O`` may follow
  anything. A sequence may not start with ``I-X`` (an entity opens with ``B-X``) and may end with any
  tag, as in AllenNLP.
* ``"BIOES"``: ``I-X`` and ``E-X`` follow only ``B-X`` or ``I-X``; ``B-X``, ``S-X`` and ``O`` follow
  only ``E-X``, ``S-X``, ``O``. A sequence starts with ``B-X``, ``S-X`` or ``O`` and ends with ``E-X``,
  ``S-X`` or ``O`` (AllenNLP's BIOUL with ``S`` for ``U`` and ``E`` for ``L``).

In the model a forbidden pair's edge potential and a forbidden end state's node potential are put
far below every other (:class:`Transitions`): in the smoothed training problem ``FORBIDDEN_UNITS *
eps`` below, whose exponential is 0 in float64 while R, the messages and the oracles' biases stay
finite (a true minus infinity would give ``inf - inf`` in the star updates); in decoding further
below than any labelling of an example can gain (:func:`exclusion_depth`), so exact inference
(Viterbi, max-product) never decodes a forbidden pair where an allowed labelling exists.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from slr._params import Options, Satisfies
from slr.data import GraphBatch
from slr.graph import shared_table
from slr.labels import split_tag

__all__ = ["FORBIDDEN_UNITS", "SCHEMES", "TRANSITIONS", "Transitions", "add_edge_offset", "allowed_transitions",
           "check_transitions", "exclusion_depth", "resolve_scheme"]

#: How far below 0 a forbidden pair, end state or hidden state (:mod:`slr.hidden`) is put in training, in
#: units of epsilon: 2**26 (exp(-2**26) is 0 in float64, and potentials up to 1e4 are negligible beside
#: it at epsilon >= 1e-3), while the oracles' biases, which carry it divided by epsilon, stay well within
#: the span they resolve (:data:`slr.oracles.base.MAX_BIAS_SPAN`, 2**32).
FORBIDDEN_UNITS = 2.0 ** 26

#: The tagging schemes :func:`allowed_transitions` knows.
SCHEMES = ("BIO", "BIOES")

#: The ``_parameter_constraints`` entry of an ``allowed_transitions`` parameter (the mask's shape and
#: values are checked against the labels by :func:`check_transitions`).
TRANSITIONS = (None, Options(SCHEMES), Satisfies(lambda value: np.ndim(value) == 2 and not isinstance(value, str),
                                                 "a 2-D boolean mask"))

# per scheme: the prefixes a tag may carry, and those of the tags that open and close a sequence
_PREFIXES = {"BIO": ("B", "I"), "BIOES": ("B", "I", "E", "S")}
_STARTS = {"BIO": ("O", "B"), "BIOES": ("O", "B", "S")}
_ENDS = {"BIO": ("O", "B", "I"), "BIOES": ("O", "E", "S")}


def _parse_tag(tag: Any, scheme: str) -> tuple[str, str | None]:
    """``(prefix, entity type)`` of a tag: ``("O", None)`` or e.g. ``("B", "PER")`` for ``"B-PER"``."""
    if not isinstance(tag, str):
        raise ValueError(f"labels must be tag strings for scheme {scheme!r}, got {tag!r}")
    if tag == "O":
        return "O", None
    prefix, entity = split_tag(tag)
    if prefix not in _PREFIXES[scheme] or not entity:
        shown = ", ".join(f"{p}-X" for p in _PREFIXES[scheme])
        raise ValueError(f"labels has the tag {tag!r}, which scheme {scheme!r} does not know: tags are 'O' or {shown}")
    return prefix, entity


def _follows(scheme: str, a: tuple[str, str | None], b: tuple[str, str | None]) -> bool:
    """Whether tag ``b`` may follow tag ``a`` in ``scheme``."""
    (pa, ea), (pb, eb) = a, b
    if scheme == "BIO":
        return pb in ("O", "B") or (pa in ("B", "I") and ea == eb)
    if pb in ("I", "E"):
        return pa in ("B", "I") and ea == eb
    return pa in ("O", "E", "S")


def allowed_transitions(scheme: str, labels: Sequence[str]) -> np.ndarray:
    """The ``(L + 2, L + 2)`` mask of a tagging scheme over the tags ``labels``.

    Parameters
    ----------
    scheme : {"BIO", "BIOES"}
        See the module docstring.
    labels : sequence of str
        The ``L`` tags in label order (label ``k`` is ``labels[k]``): ``"O"`` and tags such as
        ``"B-PER"``, ``"I-PER"``.

    Returns
    -------
    ndarray of bool, shape (L + 2, L + 2)
        ``[a, b]``: tag ``b`` may follow tag ``a``; row ``L`` (START): the tags a sequence may start
        with; column ``L + 1`` (END): those it may end with. Nothing follows END or precedes START.

    Raises
    ------
    ValueError
        Naming ``scheme`` or ``labels``, for an unknown scheme, a tag the scheme does not know, or a
        repeated tag.

    Examples
    --------
    >>> from slr.transitions import allowed_transitions
    >>> mask = allowed_transitions("BIO", ["B-PER", "I-PER", "O"])
    >>> mask[:3, :3].astype(int)   # I-PER only after B-PER or I-PER
    array([[1, 1, 1],
           [1, 1, 1],
           [1, 0, 1]])
    >>> mask[3, :3]                 # no sequence starts with I-PER
    array([ True, False,  True])
    """
    if not isinstance(scheme, str) or scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    labels = list(labels)
    if len(set(labels)) != len(labels):
        raise ValueError("labels must not repeat a tag")
    tags = [_parse_tag(tag, scheme) for tag in labels]
    L = len(tags)
    mask = np.zeros((L + 2, L + 2), dtype=bool)
    for a, tag_a in enumerate(tags):
        for b, tag_b in enumerate(tags):
            mask[a, b] = _follows(scheme, tag_a, tag_b)
    mask[L, :L] = [prefix in _STARTS[scheme] for prefix, _ in tags]
    mask[:L, L + 1] = [prefix in _ENDS[scheme] for prefix, _ in tags]
    return mask


@dataclass(frozen=True)
class Transitions:
    """A checked constraint (see :func:`check_transitions`).

    Attributes
    ----------
    pairs : ndarray of bool, shape (L, L)
        ``pairs[a, b]``: ``b`` may follow ``a`` along an edge.
    starts, ends : ndarray of bool, shape (L,), or None
        The states a node without an incoming (outgoing) edge may take; None: all.
    """

    pairs: np.ndarray
    starts: np.ndarray | None = None
    ends: np.ndarray | None = None

    @property
    def n_states(self) -> int:
        return self.pairs.shape[0]

    def padded(self, n_states: int) -> "Transitions":
        """The constraint on ``n_states >= L`` states, the extra ones (hidden states) unconstrained."""
        extra = n_states - self.n_states
        if extra == 0:
            return self
        starts, ends = (None if mask is None else np.pad(mask, (0, extra), constant_values=True)
                        for mask in (self.starts, self.ends))
        return Transitions(np.pad(self.pairs, (0, extra), constant_values=True), starts, ends)

    def node_mask(self, batch: GraphBatch) -> np.ndarray | None:
        """The states each node may take by the end constraints, shape ``(n_nodes, L)``; None when
        there are none."""
        if self.starts is None and self.ends is None:
            return None
        allowed = np.ones((batch.n_nodes, self.n_states), dtype=bool)
        for mask, side in ((self.starts, 1), (self.ends, 0)):
            if mask is not None:
                # a start has no edge arriving at it (no edge whose second node it is), an end none leaving
                free = np.bincount(batch.edges[:, side], minlength=batch.n_nodes) == 0
                allowed[free] &= mask
        return allowed

    def edge_offset(self, depth: float) -> np.ndarray:
        """``0`` on the allowed pairs, ``-depth`` on the others, shape ``(L, L)``."""
        return np.where(self.pairs, 0.0, -depth)

    def node_offset(self, batch: GraphBatch, depth: float) -> np.ndarray | float:
        """``0`` on the states a node may take by the end constraints, ``-depth`` on the others,
        shape ``(n_nodes, L)``; 0.0 without end constraints."""
        mask = self.node_mask(batch)
        return 0.0 if mask is None else np.where(mask, 0.0, -depth)

    def exclude(self, batch: GraphBatch, theta_nodes: np.ndarray, theta_edges: np.ndarray,
                depth: float) -> tuple[np.ndarray, np.ndarray]:
        """The potentials with every forbidden pair and end state ``depth`` below its score (new arrays;
        edge potentials that repeat one table, :func:`slr.graph.shared_table`, repeat the new one)."""
        edges = add_edge_offset(theta_edges, self.edge_offset(depth))
        return np.ascontiguousarray(theta_nodes + self.node_offset(batch, depth)), edges

    def check_labels(self, batch: GraphBatch, labels: np.ndarray, names: Sequence | None = None,
                     name: str = "Y") -> None:
        """Refuse labels (flat, ``-1`` unlabelled) that use a forbidden pair or end state.

        Raises
        ------
        ValueError
            Naming ``name``, the example, the nodes and the labels (by ``names`` where given).
        """
        show = (lambda label: repr(names[label])) if names is not None else (lambda label: str(int(label)))
        src, dst = batch.edges[:, 0], batch.edges[:, 1]
        a, b = labels[src], labels[dst]
        bad = np.flatnonzero((a >= 0) & (b >= 0) & ~self.pairs[np.maximum(a, 0), np.maximum(b, 0)])
        if bad.size:
            e = bad[0]
            k = int(batch.edge_example[e])
            i, j = int(src[e] - batch.node_ptr[k]), int(dst[e] - batch.node_ptr[k])
            raise ValueError(f"{name}[{k}] has the transition {show(a[e])} -> {show(b[e])} (nodes {i} -> {j}), "
                             f"which allowed_transitions forbids")
        mask = self.node_mask(batch)
        if mask is None:
            return
        labelled = labels >= 0
        bad = np.flatnonzero(labelled & ~mask[np.arange(labels.shape[0]), np.maximum(labels, 0)])
        if bad.size:
            v = int(bad[0])
            k = int(np.searchsorted(batch.node_ptr, v, side="right") - 1)
            where = ("starts" if self.starts is not None and not self.starts[labels[v]] else "ends")
            raise ValueError(f"{name}[{k}] {where} with {show(labels[v])} at node {v - batch.node_ptr[k]}, "
                             f"which allowed_transitions forbids")

    def check_feasible_chains(self, batch: GraphBatch) -> None:
        """Refuse a batch of chains with an example that no labelling satisfies (some chain lengths
        may admit none, e.g. where every allowed path must end within a few steps)."""
        sizes = np.diff(batch.node_ptr)
        sizes = sizes[sizes > 0]
        if not sizes.size:
            return
        longest = int(sizes.max())
        reachable = np.ones(self.n_states, dtype=bool) if self.starts is None else self.starts.copy()
        ends = np.ones(self.n_states, dtype=bool) if self.ends is None else self.ends
        feasible = np.zeros(longest + 1, dtype=bool)
        for n in range(1, longest + 1):
            feasible[n] = bool((reachable & ends).any())
            reachable = (reachable[:, None] & self.pairs).any(axis=0)
        infeasible = ~feasible[sizes]
        if infeasible.any():
            k = int(np.flatnonzero(np.diff(batch.node_ptr) == sizes[infeasible][0])[0])
            raise ValueError(f"allowed_transitions admits no labelling of a chain of {int(sizes[infeasible][0])} "
                             f"nodes (example {k})")


def add_edge_offset(theta_edges: np.ndarray, offset: np.ndarray, *, in_place: bool = False) -> np.ndarray:
    """``theta_edges`` with the ``(L, L)`` table ``offset`` added on every edge: potentials that repeat
    one table (:func:`slr.graph.shared_table`) repeat the new one; others are changed in place
    where ``in_place`` asks and they are writeable, else added into a new array."""
    table = shared_table(theta_edges)
    if table is not None:
        return np.broadcast_to(table + offset, theta_edges.shape)
    if in_place and theta_edges.flags.writeable:
        theta_edges += offset
        return theta_edges
    return theta_edges + offset


def check_transitions(value: Any, n_states: int, classes: Sequence | None = None,
                      name: str = "allowed_transitions") -> Transitions | None:
    """An ``allowed_transitions`` parameter checked and resolved: None, a boolean mask of shape
    ``(L, L)`` or ``(L + 2, L + 2)`` (see the module docstring), or a scheme name resolved against
    ``classes``, the labels' tag strings in label order.

    Raises
    ------
    ValueError
        Naming ``name``: a mask of another shape or not boolean, or a scheme name without tag strings.
    """
    if value is None:
        return None
    if isinstance(value, str):
        if classes is None:
            raise ValueError(f"{name}={value!r} is resolved against string tags, but the labels are integers: "
                             f"pass the mask slr.transitions.allowed_transitions({value!r}, tags), tags[k] "
                             f"being label k's tag")
        return _from_mask(resolve_scheme(value, classes), len(classes))
    mask = np.asarray(value)
    if mask.dtype != bool:
        if mask.dtype.kind not in "iu" or not np.isin(mask, (0, 1)).all():
            raise ValueError(f"{name} must be a boolean mask, a scheme name in {SCHEMES} or None, got an array "
                             f"of dtype {mask.dtype}")
        mask = mask.astype(bool)
    if mask.shape not in ((n_states, n_states), (n_states + 2, n_states + 2)):
        raise ValueError(f"{name} must have shape (L, L) or (L + 2, L + 2) with L = n_states = {n_states}, "
                         f"got {mask.shape}")
    return _from_mask(mask, n_states)


def resolve_scheme(value: Any, classes: Sequence | None) -> Any:
    """An ``allowed_transitions`` value with a scheme name resolved to its mask over the tags
    ``classes`` (labels in order; None: integer labels, where a name stays for
    :func:`check_transitions` to refuse); any other value as it is."""
    if isinstance(value, str) and classes is not None:
        return allowed_transitions(value, list(classes))
    return value


def _from_mask(mask: np.ndarray, n_states: int) -> Transitions:
    pairs = np.array(mask[:n_states, :n_states], dtype=bool)
    if mask.shape[0] == n_states:
        return Transitions(pairs)
    return Transitions(pairs, np.array(mask[n_states, :n_states]), np.array(mask[:n_states, n_states + 1]))


def exclusion_depth(batch: GraphBatch, theta_nodes: np.ndarray, theta_edges: np.ndarray,
                    transitions: Transitions, temperature: float = 0.0) -> float:
    """How far below its score a forbidden pair or end state is put for inference: more than any
    labelling of an example can gain over another that is allowed, so that every labelling that uses
    one scores below every allowed labelling; plus ``FORBIDDEN_UNITS * temperature``, so that at a
    positive temperature its weight ``exp(-depth / temperature)`` is 0 in float64.

    A labelling gains at most ``n (max theta_i - min' theta_i) + m (max theta_e - min' theta_e)`` over
    an allowed one, ``n`` and ``m`` an example's nodes and edges, ``max`` over all entries and ``min'``
    over the allowed ones (a pair or end state already put far below, as in training, adds nothing).
    """
    nodes_per_example = int(np.diff(batch.node_ptr).max(initial=0))
    edges_per_example = int(np.diff(batch.edge_ptr).max(initial=0))
    node_mask = transitions.node_mask(batch)
    depth = 1.0 + FORBIDDEN_UNITS * temperature
    if theta_nodes.size:
        lowest = np.min(theta_nodes, where=True if node_mask is None else node_mask, initial=np.inf)
        depth += nodes_per_example * max(float(theta_nodes.max() - lowest), 0.0)
    if theta_edges.size:
        lowest = np.min(theta_edges, where=np.broadcast_to(transitions.pairs, theta_edges.shape), initial=np.inf)
        depth += edges_per_example * max(float(theta_edges.max() - lowest), 0.0)
    return depth
