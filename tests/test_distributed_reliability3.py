"""The Dask learner takes what the single-process learner takes, and refuses up front what it cannot."""
from __future__ import annotations

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from slr import StructuredLogisticRegression  # noqa: E402
from slr.datasets import make_denoising  # noqa: E402
from slr.distributed import DaskStructuredLogisticRegression  # noqa: E402

from test_distributed_learner import SETTINGS, _assert_same_fit  # noqa: E402


@pytest.fixture(scope="module")
def images():
    return make_denoising(n_images=4, size=10, sigma=3.0, random_state=0)


def test_a_partition_of_zero_weights_is_the_single_process_fit(client, images):
    X, Y = images
    weights = np.array([0.0, 0.0, 1.0, 1.0])
    settings = {**SETTINGS, "max_iter": 2}
    single = StructuredLogisticRegression(**settings).fit(X, Y, sample_weight=weights)
    dist = DaskStructuredLogisticRegression(n_partitions=2, **settings).fit(X, Y, sample_weight=weights)
    _assert_same_fit(single, dist, X)
    with pytest.raises(ValueError, match="sample_weight must have a positive sum"):
        DaskStructuredLogisticRegression(n_partitions=2, **settings).fit(X, Y, sample_weight=np.zeros(4))


def test_score_sources_of_nothing_raises(client, images):
    X, Y = images
    model = DaskStructuredLogisticRegression(n_partitions=2, **{**SETTINGS, "max_iter": 1}).fit(X, Y)
    with pytest.raises(ValueError, match="at least one partition"):
        model.score_sources([])


def test_partial_labels_are_named_as_such(client, images):
    X, Y = images
    partial = [np.ma.masked_array(y, mask=np.arange(y.size) % 3 == 0) for y in Y]
    with pytest.raises(ValueError, match="unlabelled nodes .*takes full labels only"):
        DaskStructuredLogisticRegression(n_partitions=2, max_iter=1).fit(X, partial)


def test_a_bad_checkpoint_dir_is_refused_before_any_iteration(client, images, tmp_path):
    X, Y = images
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for bad in (a_file, tmp_path / "missing"):
        with pytest.raises(ValueError, match="checkpoint_dir=.* is not a writable directory"):
            DaskStructuredLogisticRegression(n_partitions=2, max_iter=1, checkpoint_dir=bad).fit(X, Y)
