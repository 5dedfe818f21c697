"""The Dask learner takes what the single-process learner takes, and refuses up front what it cannot."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from slr import StructuredLogisticRegression  # noqa: E402
from slr.datasets import make_denoising  # noqa: E402
from slr.distributed import DaskStructuredLogisticRegression  # noqa: E402
from slr.oracles.lightgbm_adapter import LightGBM  # noqa: E402

from same_fit import SETTINGS, assert_same_fit  # noqa: E402


@pytest.fixture(scope="module")
def images():
    return make_denoising(n_images=4, size=10, sigma=3.0, random_state=0)


def test_a_partition_of_zero_weights_is_the_single_process_fit(client, images):
    X, Y = images
    weights = np.array([0.0, 0.0, 1.0, 1.0])
    settings = {**SETTINGS, "max_iter": 2}
    single = StructuredLogisticRegression(**settings).fit(X, Y, sample_weight=weights)
    dist = DaskStructuredLogisticRegression(n_partitions=2, **settings).fit(X, Y, sample_weight=weights)
    assert_same_fit(single, dist, X)
    with pytest.raises(ValueError, match="sample_weight must have a positive sum"):
        DaskStructuredLogisticRegression(n_partitions=2, **settings).fit(X, Y, sample_weight=np.zeros(4))


def test_score_sources_of_nothing_raises(client, images):
    X, Y = images
    model = DaskStructuredLogisticRegression(n_partitions=2, **{**SETTINGS, "max_iter": 1}).fit(X, Y)
    with pytest.raises(ValueError, match="at least one partition"):
        model.score_sources([])


@pytest.mark.parametrize("latent_init, checkpoint", [("neighbours", False), ("uniform", False), ("neighbours", True)])
def test_partial_labels_are_the_single_process_fit(client, images, latent_init, checkpoint, tmp_path):
    """With checkpoints after every iteration, every later task runs on partitions rebuilt from
    their checkpoint's messages and targets (targets updated every second iteration: iteration 4
    fits those of iteration 3, restored)."""
    X, Y = images
    # masked and -1 labels; the last partition is fully labelled, one example has no label at all
    partial = [np.ma.masked_array(Y[0], mask=np.arange(Y[0].size) % 3 == 0),
               np.full_like(Y[1], -1), Y[2], Y[3]]
    settings = {**SETTINGS, "max_iter": 4 if checkpoint else 3, "latent_init": latent_init,
                "latent_iter": 2 if checkpoint else 1}
    single = StructuredLogisticRegression(**settings).fit(X, partial)
    dist = DaskStructuredLogisticRegression(n_partitions=2, checkpoint_dir=tmp_path if checkpoint else None,
                                            checkpoint_every=1, **settings).fit(X, partial)
    if checkpoint:
        assert sorted(p.name for p in tmp_path.iterdir()) == ["iteration00004-partition00000.npz",
                                                              "iteration00004-partition00001.npz"]
    assert (dist.objective_trace_["stage"] == single.objective_trace_["stage"]).all()
    # CCCP updates before iterations 2 and 3 (every iteration), or before iteration 3 (every second)
    assert (dist.objective_trace_["stage"] == "targets").sum() == (1 if checkpoint else 2)
    np.testing.assert_allclose(dist.objective_trace_["objective"], single.objective_trace_["objective"],
                               rtol=1e-6, atol=0)
    # the single-process monitor="auto" skips some iterations' training error
    measured = np.isfinite(single.history_["train_error"].to_numpy())
    assert measured.sum() >= 2
    np.testing.assert_allclose(dist.history_["train_error"][measured], single.history_["train_error"][measured],
                               rtol=1e-12)
    for y_single, y_dist in zip(single.predict(X), dist.predict(X)):
        np.testing.assert_array_equal(y_dist, y_single)
    # the unlabelled nodes changed the fit: it is not the fit of the labelled examples alone
    full = DaskStructuredLogisticRegression(n_partitions=2, **settings).fit(X, Y)
    assert not np.allclose(full.history_["objective"], dist.history_["objective"])


def test_partial_labels_refuse_what_needs_them_in_one_place(client, images):
    X, Y = images
    partial = [np.where(np.arange(y.size) % 3 == 0, -1, y) for y in Y]
    refused = [({"latent_init": "kmeans"}, "latent_init='kmeans'"), ({"latent_init": "random"}, "latent_init='random'")]
    if importlib.util.find_spec("lightgbm") is not None:
        refused.append(({"unary": LightGBM()}, "a LightGBM oracle"))
    for extra, what in refused:
        with pytest.raises(ValueError, match=f"unlabelled nodes .*but not with {what}"):
            DaskStructuredLogisticRegression(n_partitions=2, max_iter=1, **extra).fit(X, partial)


def test_a_bad_checkpoint_dir_is_refused_before_any_iteration(client, images, tmp_path):
    X, Y = images
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for bad in (a_file, tmp_path / "missing"):
        with pytest.raises(ValueError, match="checkpoint_dir=.* is not a writable directory"):
            DaskStructuredLogisticRegression(n_partitions=2, max_iter=1, checkpoint_dir=bad).fit(X, Y)


def _edge_free(X, Y, width):
    """The examples without their edges, with empty edge features ``width`` wide."""
    return [(nodes, np.zeros((0, 2), dtype=np.int64), np.zeros((0, width))) for nodes, _, _ in X], list(Y)


def test_edge_free_examples_of_another_edge_width_are_the_single_process_fit(client):
    X, Y = make_denoising(n_images=3, size=10, sigma=3.0, random_state=0)
    X_free, Y_free = _edge_free(*make_denoising(n_images=3, size=10, sigma=3.0, random_state=1), width=5)
    # in three partitions: two grids; two edge-free examples (a partition without edges);
    # a grid with an edge-free example
    X_all = [X[0], X[1], X_free[0], X_free[1], X[2], X_free[2]]
    Y_all = [Y[0], Y[1], Y_free[0], Y_free[1], Y[2], Y_free[2]]
    assert X_all[0][2].shape[1] == 2
    settings = {**SETTINGS, "max_iter": 2}
    single = StructuredLogisticRegression(**settings).fit(X_all, Y_all)
    dist = DaskStructuredLogisticRegression(n_partitions=3, **settings).fit(X_all, Y_all)
    a = single.objective_trace_["objective"].to_numpy()
    b = dist.objective_trace_["objective"].to_numpy()
    assert a.shape == b.shape
    np.testing.assert_allclose(b, a, rtol=1e-6, atol=0)
    for y_single, y_dist in zip(single.predict(X_all), dist.predict(X_all)):
        np.testing.assert_array_equal(y_dist, y_single)
    assert dist.n_edge_features_ == single.n_edge_features_ == 2
    # and the pairwise function learnt something from the grids
    assert np.abs(dist.pairwise_.coef_).max() > 0


def test_partitions_with_edges_must_agree_on_the_edge_width(client):
    X, Y = make_denoising(n_images=2, size=6, sigma=3.0, random_state=0)
    nodes, edges, on_edges = X[1]
    X = [X[0], (nodes, edges, np.c_[on_edges, on_edges])]
    with pytest.raises(ValueError, match=r"different feature widths \(d_edge: \[2, 4\]\)"):
        DaskStructuredLogisticRegression(n_partitions=2, max_iter=1).fit(X, Y)
