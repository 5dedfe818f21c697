"""Synthetic structured problems of many shapes, drawn from a known pairwise model.

:func:`make_structured` samples examples on chains, grids or random loopy graphs, with any
number of states, weak or strong coupling, narrow or wide node features and, optionally, edges
whose interaction depends on the input. They serve as problems that no setting of the library
was tuned on: the defaults are chosen on letters and denoising, and checked here.

The generating model, per example:

1. A graph: a chain of ``n_nodes`` nodes, a near-square 4-connected grid of ``n_nodes`` nodes, or
   a random connected graph (a random spanning tree plus ``extra_edges * n_nodes`` further edges,
   which close cycles).
2. Labels from the Gibbs distribution ``p(y) ~ exp(sum_e s_e W[y_i, y_j])`` with one random
   ``L x L`` table ``W`` (diagonal ``+1``, off-diagonal ``N(0, 1/4)``, so neighbours tend to agree)
   and strengths ``s_e = coupling``; with ``edge_input=True`` each edge is also of a random type
   ``t_e`` in {0, 1}, observed in its features, and type-1 edges get ``-W`` (neighbours tend to
   differ), so only a pairwise function of the input can use them. Sampled by
   ``gibbs_sweeps`` sweeps of Gibbs sampling from uniform labels (on loopy graphs an approximate
   sample of ``p``, which the learners need not know).
3. Node features: ``x_i = mean[y_i] + noise * N(0, I)`` over ``n_informative`` columns, followed by
   ``n_features - n_informative`` columns of pure noise; ``mean`` are random unit vectors.
   Edge features: a constant 1, and with ``edge_input`` the one-hot of ``t_e`` too.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from slr.graph import chain_edges, grid_edges
from slr.validation import check_bool, check_generator, check_int, check_option, check_real

__all__ = ["make_structured"]

Example = tuple[np.ndarray, np.ndarray, np.ndarray]


def _graph(kind: str, n_nodes: int, extra_edges: float, rng: np.random.Generator) -> tuple[int, np.ndarray]:
    if kind == "chain":
        return n_nodes, chain_edges(n_nodes)
    if kind == "grid":
        height = max(1, int(round(np.sqrt(n_nodes))))
        width = max(1, int(round(n_nodes / height)))
        return height * width, grid_edges(height, width)
    order = rng.permutation(n_nodes)
    tree = [(int(order[k]), int(order[rng.integers(k)])) for k in range(1, n_nodes)]
    present = {tuple(sorted(e)) for e in tree}
    wanted = len(tree) + int(round(extra_edges * n_nodes))
    max_edges = n_nodes * (n_nodes - 1) // 2
    while len(present) < min(wanted, max_edges):
        i, j = rng.choice(n_nodes, size=2, replace=False)
        present.add((int(min(i, j)), int(max(i, j))))
    edges = np.array(sorted(present), dtype=np.int64).reshape(-1, 2)
    return n_nodes, edges


def _gibbs(n: int, edges: np.ndarray, tables: np.ndarray, n_states: int, sweeps: int,
           rng: np.random.Generator) -> np.ndarray:
    """Labels after ``sweeps`` Gibbs sweeps of ``p(y) ~ exp(sum_e tables[e][y_i, y_j])``."""
    labels = rng.integers(n_states, size=n)
    incident: list[list[tuple[int, Any, int]]] = [[] for _ in range(n)]
    for e, (i, j) in enumerate(edges):
        incident[i].append((e, j, 0))
        incident[j].append((e, i, 1))
    for _ in range(sweeps):
        for v in rng.permutation(n):
            score = np.zeros(n_states)
            for e, other, side in incident[v]:
                score += tables[e][:, labels[other]] if side == 0 else tables[e][labels[other], :]
            cumulative = np.cumsum(np.exp(score - score.max()))
            labels[v] = min(int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right")),
                            n_states - 1)
    return labels


def make_structured(
    n_examples: int = 20,
    graph: str = "chain",
    n_nodes: int = 30,
    n_states: int = 5,
    coupling: float = 1.0,
    n_features: int = 10,
    n_informative: int | None = None,
    noise: float = 1.0,
    edge_input: bool = False,
    extra_edges: float = 0.5,
    gibbs_sweeps: int = 50,
    random_state: Any = None,
) -> tuple[list[Example], list[np.ndarray]]:
    """Sample a structured problem from a known pairwise model (see the module docstring).

    Parameters
    ----------
    n_examples : int, default=20
    graph : {"chain", "grid", "random"}, default="chain"
    n_nodes : int, default=30
        Nodes per example (a grid takes the nearest ``height x width``).
    n_states : int, default=5
    coupling : float, default=1.0
        Strength ``>= 0`` of the pairwise interactions (0: independent labels).
    n_features : int, default=10
    n_informative : int, optional
        Columns that carry the label (all when None); the rest are noise.
    noise : float, default=1.0
        Standard deviation of the feature noise around the label's mean (unit distance).
    edge_input : bool, default=False
        Give every edge a random type, observed in its features, that flips its interaction.
    extra_edges : float, default=0.5
        Random graphs: further edges per node beyond the spanning tree.
    gibbs_sweeps : int, default=50
    random_state : None, int or numpy.random.Generator
        The same seed gives the same problem.

    Returns
    -------
    X : list of (node_features (n, n_features), edges (m, 2), edge_features (m, 1 or 3))
    Y : list of int64 arrays (n,)
    """
    n_examples = check_int(n_examples, "n_examples", 1)
    graph = check_option(graph, "graph", ("chain", "grid", "random"))
    n_nodes = check_int(n_nodes, "n_nodes", 2 if graph == "random" else 1)
    n_states = check_int(n_states, "n_states", 2)
    coupling = check_real(coupling, "coupling", 0.0)
    n_features = check_int(n_features, "n_features", 1)
    n_informative = n_features if n_informative is None else check_int(n_informative, "n_informative", 1,
                                                                        n_features)
    noise = check_real(noise, "noise", 0.0)
    edge_input = check_bool(edge_input, "edge_input")
    extra_edges = check_real(extra_edges, "extra_edges", 0.0)
    gibbs_sweeps = check_int(gibbs_sweeps, "gibbs_sweeps", 0)
    rng = check_generator(random_state)

    table = rng.normal(scale=0.5, size=(n_states, n_states))
    np.fill_diagonal(table, 1.0)
    means = rng.normal(size=(n_states, n_informative))
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    X, Y = [], []
    for _ in range(n_examples):
        n, edges = _graph(graph, n_nodes, extra_edges, rng)
        kinds = rng.integers(2, size=len(edges)) if edge_input else np.zeros(len(edges), dtype=np.int64)
        tables = coupling * np.where(kinds[:, None, None] == 1, -table, table)
        labels = _gibbs(n, edges, tables, n_states, gibbs_sweeps, rng)
        features = rng.normal(scale=noise, size=(n, n_features))
        features[:, :n_informative] += means[labels]
        on_edges = np.ones((len(edges), 1))
        if edge_input:
            on_edges = np.column_stack([on_edges, kinds == 0, kinds == 1]).astype(np.float64)
        X.append((features, edges, on_edges))
        Y.append(labels.astype(np.int64))
    return X, Y
