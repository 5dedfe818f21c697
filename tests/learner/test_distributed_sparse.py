"""Sparse features on a Dask cluster: the partitions keep them sparse, the distributed fit is the
single-process fit on them and the distributed fit on their dense copy, LightGBM's bin summaries
read sparse columns as the dense ones, and a fit with 200,000 features takes memory linear in the
data."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

distributed = pytest.importorskip("distributed")

from slr import StructuredLogisticRegression  # noqa: E402
from slr.datasets.sparse_chains import make_sparse_chains  # noqa: E402
from slr.distributed import DaskStructuredLogisticRegression, _bins, _shard  # noqa: E402
from slr.oracles import Constant, Linear  # noqa: E402
from slr.oracles._diagonal_solver import RowLoss  # noqa: E402

# Algorithm 1.1 on both sides (the single-process "auto" takes the joint solver for linear oracles)
SETTINGS = dict(max_iter=2, tol=0, random_state=0, n_jobs=1, solver="alternation")


@pytest.fixture(scope="module")
def chains():
    """Sparse indicator node features, and sparse edge features: a constant and four indicators."""
    X, Y = make_sparse_chains(400, 300, 3, random_state=0)
    rng = np.random.default_rng(1)
    X = [(nodes, edges, sp.csr_array(np.c_[np.ones(len(edges)), rng.random((len(edges), 4)) < 0.3]))
         for nodes, edges, _ in X]
    return X, Y


def _dense(X):
    return [(nodes.toarray(), edges, on_edges.toarray()) for nodes, edges, on_edges in X]


def test_partitions_keep_sparse_features_sparse(chains):
    X, Y = chains
    shard = _shard.build((X[:5], Y[:5]), 3, None, 5)
    assert sp.issparse(shard.data.node_features) and sp.issparse(shard.data.edge_features)
    for factor, solver in (("unary", "diagonal"), ("pairwise", "diagonal")):
        exponents, sparse = _shard.feature_summary(shard, factor)
        assert sparse
        problem = _shard.linear_problem(shard, factor, 1.0, exponents, False, False, solver)
        assert isinstance(problem, RowLoss) and sp.issparse(problem.features)


@pytest.mark.parametrize("oracles", [dict(unary=Linear(l2=1.0, tol=1e-9), pairwise=Linear(l2=1.0, tol=1e-9)),
                                     dict(unary=Linear(l2=0.5, l1=0.05, fit_intercept=True, tol=1e-9),
                                          pairwise=Constant())],
                         ids=["Linear/Linear", "Linear-l1+intercept/Constant"])
def test_the_distributed_sparse_fit_is_the_local_fit_and_the_dense_one(client, chains, oracles):
    X, Y = chains
    local = StructuredLogisticRegression(**oracles, **SETTINGS).fit(X, Y)
    dist = DaskStructuredLogisticRegression(**oracles, n_partitions=2, **SETTINGS).fit(X, Y)
    dense = DaskStructuredLogisticRegression(**oracles, n_partitions=2, **SETTINGS).fit(_dense(X), Y)
    reference = local.objective_trace_["objective"].to_numpy()
    assert reference[-1] < 0.8 * reference[0]   # the fits did something the comparison can see
    for model in (dist, dense):
        np.testing.assert_allclose(model.objective_trace_["objective"], reference, rtol=1e-6, atol=0)
        for y_local, y_model in zip(local.predict(X), model.predict(X)):
            np.testing.assert_array_equal(y_model, y_local)
    if oracles["unary"].l1:
        # the L1 penalty reached the distributed fit: it zeroed weights, as the local one
        zero = dist.unary_.coef_ == 0
        assert 0.1 < zero.mean() < 1.0 and np.mean(zero == (local.unary_.coef_ == 0)) > 0.99


def test_bin_summaries_of_sparse_columns_are_the_dense_ones():
    rng = np.random.default_rng(0)
    features = rng.integers(-3, 4, (500, 12)).astype(float) * (rng.random((500, 12)) < 0.3)
    features[:, 5] = 0.0                                    # an empty column
    features[:, 7] = rng.standard_normal(500)               # a column without zeros
    features[:, 8] = rng.standard_normal(500) * (rng.random(500) < 0.5)   # many distinct values and zeros
    rows, columns = np.nonzero(features == 0.0)
    stored = sp.coo_array((np.r_[features[features != 0.0], np.zeros(50)],
                           (np.r_[np.nonzero(features)[0], rows[:50]], np.r_[np.nonzero(features)[1], columns[:50]])),
                          shape=features.shape)
    stored_zeros = sp.csr_array(stored)   # explicit zeros count as zeros
    assert stored_zeros.nnz == np.count_nonzero(features) + 50
    for n_points in (5, 1024):
        expected = _bins.column_summaries(features, n_points)
        for matrix in (sp.csr_array(features), stored_zeros):
            for got, want in zip(_bins.column_summaries(matrix, n_points), expected, strict=True):
                for a, b in zip(got, want, strict=True):
                    np.testing.assert_array_equal(a, b)


def test_a_high_dimensional_sparse_fit_uses_memory_linear_in_the_data(client):
    """200,000 features, 5 states: the block solver's Hessian blocks would be 5 x 200,000^2 numbers;
    the workers run in this process, so tracemalloc sees their allocations too."""
    n_features, k = 200_000, 5
    X, Y = make_sparse_chains(2000, n_features, k, active=8, random_state=0)
    nnz = sum(nodes.nnz for nodes, _, _ in X)
    tracemalloc.start()
    try:
        model = DaskStructuredLogisticRegression(Linear(l2=1.0, max_iter=30), Linear(l2=1.0), n_partitions=2,
                                                 max_iter=1, tol=0, random_state=0, n_jobs=1).fit(X, Y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert model.unary_.coef_.shape == (k, n_features) and np.any(model.unary_.coef_)
    # K D^2 would be 2e11 numbers and a dense N x D copy 4e8, about 400 (K D + nnz); L-BFGS's memory
    # and its scaled copies are a few dozen (K, D) arrays (the single-process fit peaks near 45 (K D +
    # nnz) numbers), the client's gathered gradients and Dask's copies of the coefficients a few more
    assert peak < 150 * 8 * (k * n_features + nnz)


def test_lightgbm_on_sparse_partitions_is_the_adapter_on_one_worker(client, chains):
    """Sparse rows through lightgbm.dask (as scipy.sparse matrices): on one worker its training is
    the single-process adapter's on the same sparse rows, R for R."""
    pytest.importorskip("lightgbm")
    from slr.oracles import LightGBM

    X, Y = chains
    settings = dict(unary=LightGBM(n_rounds=5, random_state=0), max_iter=2, tol=0, random_state=0, n_jobs=1)
    # LightGBM's network training needs worker processes
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  silence_logs=50) as cluster, distributed.Client(cluster) as process_client:
        with process_client.as_current():
            model = DaskStructuredLogisticRegression(n_partitions=2, **settings).fit(X, Y)
    single = StructuredLogisticRegression(**settings).fit(X, Y)
    trace = single.objective_trace_["objective"].to_numpy()
    assert trace[-1] < 0.5 * trace[0]
    np.testing.assert_allclose(model.objective_trace_["objective"], trace, rtol=1e-10)
    for y_single, y_dist in zip(single.predict(X), model.predict(X)):
        np.testing.assert_array_equal(y_dist, y_single)
