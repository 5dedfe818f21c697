"""The star-sweep kernels (scalar, AVX2, AVX-512) against a plain numpy star update, and the order
in which they visit the nodes."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from slr.data import GraphBatch
from slr.graph import chain_edges, grid_edges
from slr.inference import _star, batch_sweeps
from slr.inference.batch import _sweep_order

PATHS = {
    "scalar": (False, False),
    "avx2": (True, False),
    "avx512": (True, True),
}


def _run_on_path(path, fn):
    simd, avx512 = PATHS[path]
    if simd and not _star.simd_supported() or avx512 and not _star.avx512_supported():
        pytest.skip(f"no {path} on this CPU")
    previous_simd, previous_avx512 = _star.use_simd(simd), _star.use_avx512(avx512)
    try:
        return fn()
    finally:
        _star.use_simd(previous_simd)
        _star.use_avx512(previous_avx512)


def reference_sweeps(graphs, theta_nodes, theta_edges, eps, sweeps):
    """Star updates in index order (forward, then backward, ...) written out with numpy, graph by
    graph: mt_e(a) = eps logsumexp_b((theta_e(a, b) + lam[e, o, b]) / eps) (max for eps = 0),
    t = (theta_v + sum_e mt_e) / (1 + deg), lam[e, s, :] = t - mt_e."""
    messages = []
    node_start = edge_start = 0
    for n, edges in graphs:
        tn = theta_nodes[node_start:node_start + n]
        te = theta_edges[edge_start:edge_start + len(edges)]
        node_start, edge_start = node_start + n, edge_start + len(edges)
        lam = np.zeros((len(edges), 2, tn.shape[1]))
        incident = [[(e, s) for s in (0, 1) for e in range(len(edges)) if edges[e][s] == v]
                    for v in range(n)]
        for sweep in range(sweeps):
            for v in (range(n) if sweep % 2 == 0 else reversed(range(n))):
                if not incident[v]:
                    continue
                mt = []
                for e, s in incident[v]:
                    table = te[e] if s == 0 else te[e].T        # rows: the state of v
                    x = table + lam[e, 1 - s][None, :]
                    top = x.max(axis=1)
                    if eps > 0:
                        top = top + eps * np.log(np.exp((x - top[:, None]) / eps).sum(axis=1))
                    mt.append(top)
                t = (tn[v] + np.sum(mt, axis=0)) / (1 + len(incident[v]))
                for (e, s), m in zip(incident[v], mt):
                    lam[e, s] = t - m
        messages.append(lam)
    return np.concatenate(messages)


def _graphs(rng):
    complete = np.array(list(itertools.combinations(range(6), 2)))    # degree 5
    tree = np.array([(k, int(rng.integers(k))) if rng.random() < 0.5 else (int(rng.integers(k)), k)
                     for k in range(1, 10)])
    return [(20, grid_edges(4, 5)), (7, chain_edges(7)), (6, complete), (10, tree),
            (3, np.zeros((0, 2), dtype=np.int64))]


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("n_states", [2, 3])
@pytest.mark.parametrize("eps,scale", [(1e-3, 1.0), (0.1, 1.0), (1.0, 3.0), (1e-3, 1e4), (0.5, 1e4),
                                       (0.0, 1.0), (0.0, 1e4)])
def test_sweeps_match_a_plain_numpy_star_update(path, n_states, eps, scale):
    rng = np.random.default_rng(n_states + int(scale))
    graphs = _graphs(rng)
    batch = GraphBatch.from_graphs(graphs, n_states)
    theta_nodes = scale * rng.normal(size=(batch.n_nodes, n_states))
    theta_edges = scale * rng.normal(size=(batch.n_edges, n_states, n_states))
    ours = _run_on_path(path, lambda: batch_sweeps(batch, theta_nodes, theta_edges, eps, max_sweeps=6,
                                                   tol=0.0, n_jobs=1).messages)
    theirs = reference_sweeps(graphs, theta_nodes, theta_edges, eps, 6)
    assert np.abs(theirs).max() > scale / 10
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12 * np.abs(theirs).max())


@pytest.mark.parametrize("eps", [1e-3, 0.1, 2.0])
def test_avx512_and_avx2_sweeps_agree_bit_for_bit(eps):
    """The AVX-512 code runs the AVX2 operations 8 lanes wide, and in sweep_order; both give the
    same bits (graphs with degrees 1 to 5, so both of its paths; two threads)."""
    rng = np.random.default_rng(7)
    graphs = _graphs(rng) + [(30, grid_edges(5, 6))] * 3
    batch = GraphBatch.from_graphs(graphs, 2)
    theta_nodes = 5.0 * rng.normal(size=(batch.n_nodes, 2))
    theta_edges = 5.0 * rng.normal(size=(batch.n_edges, 2, 2))

    def sweep():
        return batch_sweeps(batch, theta_nodes, theta_edges, eps, max_sweeps=15, tol=0.0, n_jobs=2).messages

    np.testing.assert_array_equal(_run_on_path("avx512", sweep), _run_on_path("avx2", sweep))


@pytest.mark.parametrize("path", ["avx2", "avx512"])
def test_sweeps_in_sweep_order_give_the_index_orders_messages_bit_for_bit(path):
    """The kernel without an order (empty arrays) visits the nodes in index order, one star at a
    time; in sweep_order, groups of independent stars at once: the same bits, both directions."""
    rng = np.random.default_rng(11)
    batch = GraphBatch.from_graphs(_graphs(rng) + [(42, grid_edges(6, 7))] * 2, 2)
    theta_nodes = 2.0 * rng.normal(size=(batch.n_nodes, 2))
    theta_edges = 2.0 * rng.normal(size=(batch.n_edges, 2, 2))
    index_order = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint8))

    def sweep(order):
        lam = np.zeros((batch.n_edges, 2, 2))
        n_sweeps, converged = np.zeros(batch.n_examples, np.int32), np.zeros(batch.n_examples, np.uint8)
        _star.star_sweeps(theta_nodes, theta_edges, lam, batch.node_ptr, *order, batch.inc_ptr,
                          batch.inc_edge, batch.inc_side, batch.max_degree, 0.2, 9, 0.0, 1,
                          n_sweeps, converged)
        return lam

    grouped, single = _run_on_path(path, lambda: (sweep(_sweep_order(batch)), sweep(index_order)))
    np.testing.assert_array_equal(grouped, single)


def test_sweep_order_keeps_each_node_after_its_lower_neighbours_and_groups_independent_nodes():
    rng = np.random.default_rng(3)
    graphs = _graphs(rng) + [(12, grid_edges(3, 4))]
    batch = GraphBatch.from_graphs(graphs, 2)
    order, group = _sweep_order(batch)
    position = np.empty_like(order)
    position[order] = np.arange(len(order))
    for lo, hi in zip(batch.node_ptr[:-1], batch.node_ptr[1:]):
        assert sorted(order[lo:hi]) == list(range(lo, hi))     # each example's nodes, within it
    first, second = batch.edges.min(axis=1), batch.edges.max(axis=1)
    assert (position[first] < position[second]).all()
    # the groups tile the order, their sizes at both ends, and no edge joins two of a group
    member = np.empty(len(order), dtype=np.int64)
    k = 0
    while k < len(order):
        size = int(group[k])
        assert 1 <= size <= 8 and group[k + size - 1] == size
        assert not group[k + 1:k + size - 1].any()
        member[k:k + size] = k
        k += size
    assert (member[position[first]] != member[position[second]]).all()
    # on a grid most nodes are in full groups, diagonals across 8 rows (not at a band's ends)
    grid = GraphBatch.from_graphs([(400, grid_edges(20, 20))], 2)
    sizes = _sweep_order(grid)[1]
    assert 8 * (sizes == 8).sum() / 2 >= 0.7 * 400
