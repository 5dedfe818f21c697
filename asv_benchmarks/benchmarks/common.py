"""Fixed small problems shared by the learner, oracle and baseline benchmarks."""
from __future__ import annotations

import numpy as np


def denoising(n_images: int, size: int, seed: int = 0):
    """Denoising examples with the blur scaled to the image (``sigma = 10 * size / 100``)."""
    from slr.datasets.denoising import make_denoising

    return make_denoising(n_images, size, sigma=max(1.0, 10.0 * size / 100), random_state=seed)


def letters(n_train: int, n_test: int):
    """The first OCR words of fold 1 (train) and of the other folds (test)."""
    from slr.datasets import load_letters

    X, Y, folds = load_letters()
    tr = np.flatnonzero(folds == 1)[:n_train]
    te = np.flatnonzero(folds != 1)[:n_test]
    return [X[i] for i in tr], [Y[i] for i in tr], [X[i] for i in te], [Y[i] for i in te]


def biased_problem(n_rows: int, n_classes: int, seed: int = 0):
    """A denoising-like biased logistic problem: features ``(phi, 1)``, normal biases.

    ``n_classes = 2``: unary rows (``phi ~ U[0, .9]`` for label 0, ``U[.1, 1]`` for 1);
    ``n_classes = 4``: pair labels ``2a + b`` with equal ends 90% of the time.
    """
    rng = np.random.default_rng(seed)
    if n_classes == 2:
        labels = rng.integers(0, 2, n_rows)
        phi = rng.uniform(0.0, 0.9, n_rows) + 0.1 * labels
    else:
        a = rng.integers(0, 2, n_rows)
        b = np.where(rng.random(n_rows) < 0.9, a, 1 - a)
        labels = 2 * a + b
        phi = rng.uniform(0.0, 0.8, n_rows) + 0.2 * (a != b)
    features = np.column_stack([phi, np.ones(n_rows)])
    bias = rng.normal(size=(n_rows, n_classes))
    return features, bias, labels
