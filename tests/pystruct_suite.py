"""Shared pieces of the port of pystruct 0.3.2's test suite (tests/baseline/test_pystruct_suite_*.py).

pystruct's data reach us through :mod:`slr.baselines.peer.suite` (made by pystruct's own generators in
the peer environment, cached); this module turns them into slr's examples, turns pystruct's weight
vectors into the baselines' layout, decodes with the baselines' inference and with slr's prediction
inference, and enumerates labellings for brute-force references.
"""
from __future__ import annotations

import functools
import itertools

import numpy as np

from slr.baselines.features import StructuredData
from slr import StructuredLogisticRegression
from slr.formats import from_graph_crf, from_grid_crf
from slr.reduction import SWEEP_TOL
from slr.models import PairwiseModel


# ------------------------------------------------------------------ data
def grids(data: dict, name: str, directional: bool = False, neighbourhood: int = 4):
    """pystruct's grid data set ``name`` as slr examples (``DirectionalGridCRF`` with ``directional``)."""
    return from_grid_crf(data[name + "/X"], data[name + "/Y"], neighbourhood=neighbourhood,
                         edge_features="direction" if directional else "constant")


def make_grid_edges(height: int, width: int) -> list[np.ndarray]:
    """pystruct's ``make_grid_edges(x, return_lists=True)``: right edges, then down edges."""
    ids = np.arange(height * width).reshape(height, width)
    return [np.c_[ids[:, :-1].ravel(), ids[:, 1:].ravel()], np.c_[ids[:-1].ravel(), ids[1:].ravel()]]


def trimmed_blocks_graphs(data: dict):
    """The graph tests' data: ``generate_blocks(3)`` with the first image's last column and the
    second image's last row deleted, as ``GraphCRF`` examples with explicit grid edges."""
    X, Y = data["blocks3/X"], data["blocks3/Y"]
    images = [X[0][:, :-1], X[1][:-1], X[2]]
    labels = [Y[0][:, :-1], Y[1][:-1], Y[2]]
    examples = [(x.reshape(-1, x.shape[-1]), np.vstack(make_grid_edges(*x.shape[:2]))) for x in images]
    return from_graph_crf(examples, [y.ravel() for y in labels])


def one_node_graphs(features: np.ndarray, labels: np.ndarray | None = None):
    """Every row its own graph of one node and no edges (pystruct's SVMs as CRFs)."""
    examples = [(row[None, :], np.empty((0, 2), dtype=np.int64)) for row in np.asarray(features, float)]
    return from_graph_crf(examples, None if labels is None else [np.atleast_1d(y) for y in labels])


def with_ones(features: np.ndarray) -> np.ndarray:
    """pystruct's tests add the constant feature by hand."""
    return np.hstack([features, np.ones((features.shape[0], 1))])


# ------------------------------------------------------------------ weights
def symmetric_table(compressed: np.ndarray, n_states: int) -> np.ndarray:
    """pystruct's compressed symmetric pairwise weights (lower triangle, row-major) as a table."""
    table = np.zeros((n_states, n_states))
    table[np.tril_indices(n_states)] = compressed
    return table + table.T - np.diag(np.diag(table))


def ours(unary: np.ndarray, pairwise: np.ndarray) -> np.ndarray:
    """The baselines' weight vector from ``unary (L, d_u)`` and ``pairwise (d_e, L, L)`` tables
    (the pairwise potential of edge e is ``edge_features[e] @ pairwise[:, a, b]``)."""
    pairwise = np.asarray(pairwise, dtype=float)
    d_e, L = pairwise.shape[0], pairwise.shape[1]
    return np.concatenate([np.asarray(unary, float).ravel(), pairwise.reshape(d_e, L * L).T.ravel()])


def from_pystruct(w: np.ndarray, n_states: int, n_features: int, *, directed: bool = False,
                  n_edge_features: int = 1) -> np.ndarray:
    """A pystruct weight vector (``GraphCRF``/``GridCRF``: symmetric pairwise weights unless
    ``directed``; ``EdgeFeatureGraphCRF``/``DirectionalGridCRF``: one full table per edge feature)
    in the baselines' layout."""
    w = np.asarray(w, dtype=float)
    L, d = n_states, n_features
    unary, rest = w[: L * d].reshape(L, d), w[L * d:]
    if directed or n_edge_features > 1:
        pairwise = rest.reshape(n_edge_features, L, L)
    else:
        pairwise = symmetric_table(rest, L)[None]
    return ours(unary, pairwise)


# ------------------------------------------------------------------ inference
def baseline_decode(X, w: np.ndarray, n_states: int) -> list[np.ndarray]:
    """MAP labellings by the baselines' inference (their default settings)."""
    data = StructuredData(X, None, n_states)
    return data.split(data.decode(*data.potentials(w)))


def slr_decode(X, w: np.ndarray, n_states: int) -> list[np.ndarray]:
    """MAP labellings by slr's prediction inference at ``StructuredLogisticRegression``'s defaults
    (Viterbi on chains, ``predict_max_sweeps`` max-product star sweeps otherwise)."""
    defaults = StructuredLogisticRegression().get_params()
    data = StructuredData(X, None, n_states)
    predictor = PairwiseModel(1.0, inference="auto", epsilon=defaults["predict_epsilon"],
                              max_sweeps=defaults["predict_max_sweeps"], tol=SWEEP_TOL)
    return data.split(predictor.decode(data, *data.potentials(w), warn=True))


DECODERS = {"baseline": baseline_decode, "slr": slr_decode}


def potentials_examples(unary: np.ndarray, pairwise: np.ndarray, edges: np.ndarray):
    """An example whose potentials are given: one-hot node and edge features, so that the weights
    ``ours(unary.T, pairwise)`` reproduce ``unary (n, L)`` and ``pairwise (m, L, L)`` exactly."""
    n, m = unary.shape[0], edges.shape[0]
    example = (np.eye(n), np.asarray(edges, dtype=np.int64), np.eye(m))
    return example, ours(unary.T, pairwise)


@functools.lru_cache(maxsize=8)
def _labellings(n_nodes: int, n_states: int) -> np.ndarray:
    labellings = np.array(list(itertools.product(range(n_states), repeat=n_nodes)))
    labellings.flags.writeable = False
    return labellings


def brute_force(unary: np.ndarray, pairwise: np.ndarray, edges: np.ndarray,
                truth: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """The best labelling (and its score) by enumeration; with ``truth``, of score + Hamming loss."""
    n, L = unary.shape
    labellings = _labellings(n, L)
    scores = unary[np.arange(n), labellings].sum(axis=1)
    for e, (i, j) in enumerate(np.asarray(edges)):
        scores += pairwise[e][labellings[:, i], labellings[:, j]]
    if truth is not None:
        scores = scores + (labellings != np.asarray(truth).ravel()).sum(axis=1)
    best = int(np.argmax(scores))
    return labellings[best], float(scores[best])
