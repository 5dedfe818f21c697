"""pystruct's ``generate_blocks`` grids (its synthetic binary blocks), drawn the same way.

pystruct 0.3.2 (``pystruct/datasets/synthetic_grids.py``) seeds NumPy's global generator and
draws the noise with ``numpy.random.normal``; the legacy ``RandomState`` stream is the same in
every NumPy release, so the images here are pystruct's, number for number.
"""
from __future__ import annotations

import numpy as np

from slr.formats import from_grid_crf


def generate_blocks(n_samples: int = 10, noise: float = 1.5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n_samples`` 10 x 12 images, the left half label 0 and the right half 1; pixel features
    ``(-x, x)`` with ``x`` the label's sign plus ``noise`` times a standard normal."""
    sign = np.ones((n_samples, 10, 12))
    sign[:, :, :6] = -1
    x = sign + noise * np.random.RandomState(seed).normal(size=sign.shape)
    return np.stack([-x, x], axis=-1), (sign > 0).astype(np.int32)


def blocks(n_samples: int = 10) -> tuple[list, list]:
    """:func:`generate_blocks` as slr grid examples (4-connected, one constant edge feature)."""
    X, Y = generate_blocks(n_samples)
    return from_grid_crf(list(X), list(Y))
