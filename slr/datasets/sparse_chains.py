"""Synthetic sequence labelling with sparse indicator features, from a known chain model.

The generative model is a hidden Markov chain with sparse emissions, shaped like text tagging: tags
follow a Markov chain with a strong diagonal (tags persist, as entity spans do), and every token
fires ``active`` indicator features out of ``n_features``. Each feature belongs to one tag; a token
draws each of its features from its own tag's features with probability ``signal`` and from all
features otherwise, with feature frequencies following a Zipf law within a tag, as words do. A
linear-chain CRF on these indicators is well specified up to the Zipf tail, and its memory and time
can be measured at any number of tokens and features.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from slr.graph import chain_edges
from slr.validation import check_generator, check_int, check_real

__all__ = ["make_sparse_chains"]


def make_sparse_chains(
    n_tokens: int = 10_000,
    n_features: int = 10_000,
    n_states: int = 9,
    *,
    sequence_length: int = 20,
    active: int = 10,
    signal: float = 0.5,
    persistence: float = 0.6,
    random_state: Any = None,
) -> tuple[list[tuple[sp.csr_array, np.ndarray, np.ndarray]], list[np.ndarray]]:
    """Sample sequences of sparse indicator features and their tags.

    Parameters
    ----------
    n_tokens : int, default=10_000
        Tokens in all (the last sequence may be shorter than ``sequence_length``).
    n_features : int, default=10_000
        Indicator features (at least ``n_states``).
    n_states : int, default=9
    sequence_length : int, default=20
    active : int, default=10
        Features each token fires (duplicates merged).
    signal : float, default=0.5
        Probability that a fired feature comes from the token's tag (else from any tag).
    persistence : float, default=0.6
        Probability that a tag repeats the previous one (else a uniformly random tag).
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    X : list of (csr_array (n, n_features), edges (n - 1, 2), edge_features (n - 1, 1))
    Y : list of int64 arrays (n,)
    """
    n_tokens = check_int(n_tokens, "n_tokens", 1, None)
    n_states = check_int(n_states, "n_states", 1, None)
    n_features = check_int(n_features, "n_features", n_states, None)
    sequence_length = check_int(sequence_length, "sequence_length", 1, None)
    active = check_int(active, "active", 1, None)
    signal = check_real(signal, "signal", 0.0, 1.0)
    persistence = check_real(persistence, "persistence", 0.0, 1.0)
    rng = check_generator(random_state)

    tags = np.empty(n_tokens, dtype=np.int64)
    tags[0] = rng.integers(n_states)
    repeat = rng.random(n_tokens) < persistence
    fresh = rng.integers(0, n_states, n_tokens)
    for t in range(1, n_tokens):   # a Markov chain across sequence ends too (they are arbitrary cuts)
        tags[t] = tags[t - 1] if repeat[t] else fresh[t]

    # feature f belongs to tag f % n_states; within a tag the j-th feature has weight 1 / (j + 1)
    per_tag = n_features // n_states + 1
    zipf = 1.0 / np.arange(1, per_tag + 1)
    rank = _zipf_draws(zipf, (n_tokens, active), rng)
    from_own_tag = rng.random((n_tokens, active)) < signal
    owner = np.where(from_own_tag, tags[:, None], rng.integers(0, n_states, (n_tokens, active)))
    columns = rank * n_states + owner
    columns = np.where(columns < n_features, columns, owner)   # the tail of the last rank wraps to the top
    features = sp.csr_array((np.ones(columns.size), columns.ravel(), np.arange(0, columns.size + 1, active)),
                            shape=(n_tokens, n_features))
    features.sum_duplicates()
    features.data[:] = 1.0

    X, Y = [], []
    for start in range(0, n_tokens, sequence_length):
        stop = min(n_tokens, start + sequence_length)
        n = stop - start
        X.append((features[start:stop], chain_edges(n), np.ones((n - 1, 1))))
        Y.append(tags[start:stop].copy())
    return X, Y


def _zipf_draws(weights: np.ndarray, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """Indices drawn with probabilities proportional to ``weights``."""
    cumulative = np.cumsum(weights)
    return np.searchsorted(cumulative, rng.random(shape) * cumulative[-1], side="right").clip(0, weights.size - 1)
