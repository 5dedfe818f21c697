"""Chains tagged in the BIO scheme, shared by the tests of allowed transitions and of string labels."""
from __future__ import annotations

import numpy as np

from slr.formats import chain_example
from slr.transitions import allowed_transitions

TAGS = ["B-PER", "I-PER", "B-LOC", "I-LOC", "O"]


def bio_chains(seed: int, n_examples: int = 30, noise: float = 1.5):
    """Chains of 2 to 8 tags drawn among the pairs BIO allows, each node's features its tag's one-hot
    code plus normal noise of scale ``noise``; with the scheme's mask over :data:`TAGS`."""
    rng = np.random.default_rng(seed)
    mask = allowed_transitions("BIO", TAGS)
    X, Y = [], []
    for _ in range(n_examples):
        n = int(rng.integers(2, 9))
        y, previous = [], None
        for _ in range(n):
            options = np.flatnonzero(mask[5, :5] if previous is None else mask[previous, :5])
            previous = int(rng.choice(options))
            y.append(previous)
        y = np.array(y)
        X.append(chain_example(np.eye(5)[y] + noise * rng.normal(size=(n, 5))))
        Y.append(y)
    return X, Y, mask
