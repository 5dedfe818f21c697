"""Pairwise graphs: constructors, input validation and the flat batch layout.

Data conventions (pystruct-compatible, DESIGN.md section 2):

* an example ``x`` is ``(node_features (n, d_u), edges (m, 2) int, edge_features (m, d_e))``;
* a labelling ``y`` is an int array ``(n,)`` with values in ``[0, L)``;
* potentials are ``theta_nodes (n, L)`` and ``theta_edges (m, L, L)``, where
  ``theta_edges[e, a, b]`` scores ``y_i = a, y_j = b`` for ``edges[e] = (i, j)``.

Inside the kernels many examples are stored flat: nodes and edges of all examples are
concatenated, ``node_ptr`` / ``edge_ptr`` give each example's range (CSR style), edges use
global node indices, and a node-to-edge incidence list in CSR form tells each node which
edges touch it and on which side. :class:`GraphBatch` builds and holds that layout.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = [
    "GraphBatch",
    "chain_edges",
    "check_dataset",
    "check_edges",
    "check_epsilon",
    "check_labels",
    "check_messages",
    "check_potentials",
    "grid_edges",
]


# ----------------------------------------------------------------------------------------
# constructors
# ----------------------------------------------------------------------------------------
def grid_edges(height: int, width: int) -> np.ndarray:
    """Edges of a 4-connected ``height x width`` grid, nodes numbered row-major.

    Horizontal edges come first (row by row), then vertical edges.

    Returns
    -------
    edges : ndarray of shape (height*(width-1) + (height-1)*width, 2), int64
    """
    height, width = _positive_int(height, "height"), _positive_int(width, "width")
    ids = np.arange(height * width, dtype=np.int64).reshape(height, width)
    horizontal = np.stack([ids[:, :-1].ravel(), ids[:, 1:].ravel()], axis=1)
    vertical = np.stack([ids[:-1, :].ravel(), ids[1:, :].ravel()], axis=1)
    return np.concatenate([horizontal, vertical]).reshape(-1, 2)


def chain_edges(n_nodes: int) -> np.ndarray:
    """Edges ``(i, i + 1)`` of a chain of ``n_nodes`` nodes, shape ``(n_nodes - 1, 2)``."""
    n_nodes = _positive_int(n_nodes, "n_nodes")
    left = np.arange(n_nodes - 1, dtype=np.int64)
    return np.stack([left, left + 1], axis=1)


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return int(value)


# ----------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------
def check_edges(edges: Any, n_nodes: int, name: str = "edges") -> np.ndarray:
    """Validate an edge list against a node count.

    Returns
    -------
    edges : ndarray of shape (m, 2), C-contiguous int64

    Raises
    ------
    ValueError
        If the shape is not ``(m, 2)``, entries are not integers, an index is outside
        ``[0, n_nodes)`` or an edge is a self-loop.
    """
    arr = np.asarray(edges)
    if arr.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"{name} must have shape (m, 2), got {arr.shape}")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise ValueError(f"{name} must contain integer node indices, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    if arr.min() < 0 or arr.max() >= n_nodes:
        raise ValueError(f"{name} has node indices outside [0, {n_nodes})")
    if np.any(arr[:, 0] == arr[:, 1]):
        bad = int(np.flatnonzero(arr[:, 0] == arr[:, 1])[0])
        raise ValueError(f"{name} contains a self-loop at row {bad} ({arr[bad, 0]}, {arr[bad, 1]})")
    return arr


def check_epsilon(epsilon: Any, *, allow_zero: bool = True) -> float:
    """Validate the entropy weight ``epsilon`` (finite, ``>= 0``, or ``> 0``)."""
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise ValueError(f"epsilon must be a real number, got {epsilon!r}") from None
    if not np.isfinite(eps) or eps < 0 or (eps == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"epsilon must be finite and {bound}, got {epsilon!r}")
    return eps


def _finite_float_array(value: Any, name: str, ndim: int) -> np.ndarray:
    try:
        arr = np.ascontiguousarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a numeric array") from None
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def check_potentials(
    theta_nodes: Any, theta_edges: Any, edges: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate the potentials and edges of one pairwise graph.

    Parameters
    ----------
    theta_nodes : array-like of shape (n, L)
    theta_edges : array-like of shape (m, L, L)
    edges : array-like of shape (m, 2)

    Returns
    -------
    theta_nodes, theta_edges, edges : ndarray
        float64, float64 and int64, C-contiguous.
    """
    theta_nodes = _finite_float_array(theta_nodes, "theta_nodes", 2)
    n, n_states = theta_nodes.shape
    if n < 1 or n_states < 1:
        raise ValueError(f"theta_nodes must have at least one node and one state, got {theta_nodes.shape}")
    edges = check_edges(edges, n)
    theta_edges = np.asarray(theta_edges, dtype=np.float64)
    if theta_edges.size == 0 and edges.shape[0] == 0:
        theta_edges = np.zeros((0, n_states, n_states))
    theta_edges = _finite_float_array(theta_edges, "theta_edges", 3)
    if theta_edges.shape != (edges.shape[0], n_states, n_states):
        raise ValueError(
            f"theta_edges must have shape (m, L, L) = ({edges.shape[0]}, {n_states}, {n_states}), "
            f"got {theta_edges.shape}"
        )
    return theta_nodes, theta_edges, edges


def check_messages(messages: Any, n_edges: int, n_states: int) -> np.ndarray:
    """Validate warm-start messages of shape ``(m, 2, L)``; returns a fresh float64 copy."""
    arr = _finite_float_array(messages, "messages", 3)
    if arr.shape != (n_edges, 2, n_states):
        raise ValueError(
            f"messages must have shape (m, 2, L) = ({n_edges}, 2, {n_states}), got {arr.shape}"
        )
    return arr.copy()


def check_labels(y: Any, n_nodes: int, n_states: int | None, name: str = "y") -> np.ndarray:
    """Validate one labelling: integers of shape ``(n_nodes,)`` in ``[0, n_states)``."""
    arr = np.asarray(y)
    if arr.ndim != 1 or arr.shape[0] != n_nodes:
        raise ValueError(f"{name} must have shape ({n_nodes},), got {arr.shape}")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise ValueError(f"{name} must contain integer labels, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    if arr.size and arr.min() < 0:
        raise ValueError(f"{name} contains negative labels")
    if n_states is not None and arr.size and arr.max() >= n_states:
        raise ValueError(f"{name} contains labels outside [0, {n_states})")
    return arr


def check_dataset(
    X: Sequence, Y: Sequence | None = None, n_states: int | None = None
) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], list[np.ndarray] | None, int | None]:
    """Validate a data set in the pystruct format.

    Parameters
    ----------
    X : sequence of (node_features (n, d_u), edges (m, 2), edge_features (m, d_e))
        All examples must share ``d_u`` and ``d_e``.
    Y : sequence of int arrays (n,), optional
    n_states : int, optional
        If given, labels must lie in ``[0, n_states)``; otherwise it is inferred as
        ``max label + 1`` (returned).

    Returns
    -------
    X, Y, n_states
        Converted copies (float64 features, int64 edges and labels).
    """
    if isinstance(X, np.ndarray) and X.dtype != object:
        raise ValueError("X must be a list of (node_features, edges, edge_features) tuples")
    X = list(X)
    if len(X) == 0:
        raise ValueError("X must contain at least one example")
    if Y is not None:
        Y = list(Y)
        if len(Y) != len(X):
            raise ValueError(f"X and Y must have the same length, got {len(X)} and {len(Y)}")
    d_node = d_edge = None
    out_x = []
    for k, example in enumerate(X):
        if not isinstance(example, (tuple, list)) or len(example) != 3:
            raise ValueError(f"X[{k}] must be a tuple (node_features, edges, edge_features)")
        node_f = _finite_float_array(example[0], f"X[{k}] node_features", 2)
        n = node_f.shape[0]
        if n < 1:
            raise ValueError(f"X[{k}] has no nodes")
        edges = check_edges(example[1], n, name=f"X[{k}] edges")
        edge_f = np.asarray(example[2], dtype=np.float64)
        if edge_f.size == 0 and edges.shape[0] == 0:
            edge_f = edge_f.reshape(0, d_edge if d_edge is not None else 0)
        edge_f = _finite_float_array(edge_f, f"X[{k}] edge_features", 2)
        if edge_f.shape[0] != edges.shape[0]:
            raise ValueError(
                f"X[{k}] has {edges.shape[0]} edges but {edge_f.shape[0]} rows of edge_features"
            )
        if d_node is None:
            d_node, d_edge = node_f.shape[1], edge_f.shape[1]
        if node_f.shape[1] != d_node:
            raise ValueError(f"X[{k}] has {node_f.shape[1]} node features, X[0] has {d_node}")
        if edges.shape[0] and edge_f.shape[1] != d_edge:
            raise ValueError(f"X[{k}] has {edge_f.shape[1]} edge features, X[0] has {d_edge}")
        out_x.append((node_f, edges, edge_f))
    out_y = None
    if Y is not None:
        out_y = [
            check_labels(y, x[0].shape[0], n_states, name=f"Y[{k}]") for k, (x, y) in enumerate(zip(out_x, Y))
        ]
        if n_states is None:
            n_states = int(max(int(y.max()) for y in out_y)) + 1
    return out_x, out_y, n_states


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
    """

    n_states: int
    node_ptr: np.ndarray
    edge_ptr: np.ndarray
    edges: np.ndarray
    inc_ptr: np.ndarray
    inc_edge: np.ndarray
    inc_side: np.ndarray
    max_degree: int

    @classmethod
    def from_graphs(cls, graphs: Sequence[tuple[int, Any]], n_states: int) -> "GraphBatch":
        """Build a batch from ``(n_nodes, edges)`` pairs with local node indices.

        Edges are validated (range, self-loops) for each graph.
        """
        n_states = _positive_int(n_states, "n_states")
        graphs = list(graphs)
        if not graphs:
            raise ValueError("a batch needs at least one graph")
        n_nodes = np.array([_positive_int(n, "n_nodes") for n, _ in graphs], dtype=np.int64)
        local_edges = [check_edges(e, n, name=f"edges of graph {k}") for k, (n, e) in enumerate(graphs)]
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
        """Build a batch from a pystruct-format ``X`` (list of (node_features, edges, edge_features))."""
        return cls.from_graphs([(np.asarray(x[0]).shape[0], x[1]) for x in X], n_states)

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

    def split_nodes(self, array: np.ndarray) -> list[np.ndarray]:
        """Split a per-node array (first axis ``n_nodes``) into one array per example."""
        return np.split(array, self.node_ptr[1:-1])

    def split_edges(self, array: np.ndarray) -> list[np.ndarray]:
        """Split a per-edge array (first axis ``n_edges``) into one array per example."""
        return np.split(array, self.edge_ptr[1:-1])

    def check_potentials(self, theta_nodes: Any, theta_edges: Any) -> tuple[np.ndarray, np.ndarray]:
        """Validate flat potentials of shapes ``(n_nodes, L)`` and ``(n_edges, L, L)``."""
        L = self.n_states
        theta_nodes = _finite_float_array(theta_nodes, "theta_nodes", 2)
        if theta_nodes.shape != (self.n_nodes, L):
            raise ValueError(f"theta_nodes must have shape ({self.n_nodes}, {L}), got {theta_nodes.shape}")
        theta_edges = _finite_float_array(theta_edges, "theta_edges", 3)
        if theta_edges.shape != (self.n_edges, L, L):
            raise ValueError(
                f"theta_edges must have shape ({self.n_edges}, {L}, {L}), got {theta_edges.shape}"
            )
        return theta_nodes, theta_edges
