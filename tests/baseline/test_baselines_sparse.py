"""Every baseline learner on sparse node and edge features: the same model as on the dense copy of the
data (weights to tolerance, the same predictions), and memory that does not grow with a dense copy."""
import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from slr.baselines.features import StructuredData
from slr.baselines.gradient_alternation import GradientAlternation
from slr.baselines.perceptron import StructuredPerceptron
from slr.baselines.piecewise import PiecewiseTraining
from slr.baselines.ssvm import NSlackSSVM, OneSlackSSVM, SubgradientSSVM
from slr.graph import grid_edges
from slr.oracles import Linear

from chain_reference import chain_example

L = 3


def _sparsified(rng, X):
    """The examples with most entries zero, an all-zero node column and some all-zero edge rows."""
    out = []
    for nodes, edges, on_edges in X:
        nodes = nodes * (rng.random(nodes.shape) < 0.4)
        nodes[:, 1] = 0.0
        on_edges = on_edges * (rng.random(on_edges.shape) < 0.5)
        out.append((nodes, edges, on_edges))
    return out


def _sparse_copy(X):
    return [(sp.csr_array(nodes), edges, sp.csr_array(on_edges)) for nodes, edges, on_edges in X]


@pytest.fixture(scope="module")
def chains():
    rng = np.random.default_rng(0)
    X = _sparsified(rng, [chain_example(rng, int(rng.integers(2, 6)), d=6, d_e=3) for _ in range(10)])
    Y = [rng.integers(0, L, size=x[0].shape[0]) for x in X]
    return X, Y, rng.uniform(0.5, 2.0, len(X))


@pytest.fixture(scope="module")
def grids():
    rng = np.random.default_rng(1)
    edges = grid_edges(3, 3)
    X = _sparsified(rng, [(rng.normal(size=(9, 4)), edges, rng.normal(size=(len(edges), 2))) for _ in range(4)])
    return X, [rng.integers(0, 2, size=9) for _ in X], rng.uniform(0.5, 2.0, len(X))


LEARNERS = {
    "OneSlackSSVM": lambda: OneSlackSSVM(C=1.0, tol=1e-6, n_states=L),
    "NSlackSSVM": lambda: NSlackSSVM(C=1.0, tol=1e-6, n_states=L),
    "SubgradientSSVM": lambda: SubgradientSSVM(C=1.0, max_iter=50, n_states=L, random_state=0),
    "SubgradientSSVM/batches": lambda: SubgradientSSVM(C=1.0, max_iter=20, batch_size=3, random_state=0, n_states=L),
    "StructuredPerceptron": lambda: StructuredPerceptron(max_iter=20, average=True, random_state=0, n_states=L),
    "GradientAlternation": lambda: GradientAlternation(epsilon=0.5, l2=0.1, max_iter=20, sweeps_per_round=3,
                                                       n_states=L),
}


def _assert_same_fit(dense, sparse, X):
    np.testing.assert_allclose(sparse.w_, dense.w_, rtol=1e-7, atol=1e-9)
    for a, b in zip(dense.predict(X), sparse.predict(_sparse_copy(X))):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", LEARNERS)
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_linear_baselines_fit_the_same_model_on_sparse_and_dense_copies(chains, name, weighted):
    X, Y, weights = chains
    weights = weights if weighted else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the perceptron's and SSVMs' iteration limits
        dense = LEARNERS[name]().fit(X, Y, sample_weight=weights)
        sparse = LEARNERS[name]().fit(_sparse_copy(X), Y, sample_weight=weights)
    assert np.abs(dense.w_).max() > 0.1   # a model, not the zero start
    _assert_same_fit(dense, sparse, X)
    # the perceptron's objective is NaN (it has none): NaN in the same places
    np.testing.assert_allclose(sparse.history_.objective, dense.history_.objective, rtol=1e-9)


@pytest.mark.parametrize("learner", [lambda: OneSlackSSVM(C=1.0, tol=1e-6, model="lp"),
                                     lambda: GradientAlternation(epsilon=0.5, l2=0.1, max_iter=20, sweeps_per_round=3)],
                         ids=["OneSlackSSVM", "GradientAlternation"])
def test_loopy_baselines_fit_the_same_model_on_sparse_and_dense_copies(grids, learner):
    X, Y, weights = grids
    dense, sparse = learner().fit(X, Y, sample_weight=weights), learner().fit(_sparse_copy(X), Y, sample_weight=weights)
    _assert_same_fit(dense, sparse, X)


def test_gradient_alternations_safe_step_is_the_dense_ones(grids):
    """The spectral norms of the weighted sparse rows, against the dense SVD."""
    X, Y, weights = grids
    model = GradientAlternation(epsilon=0.5, l2=0.1)
    steps = []
    for data in (StructuredData(X, Y, 2), StructuredData(_sparse_copy(X), Y, 2)):
        data.weigh(weights)
        steps.append(model._safe_step(data))
    rows = np.sqrt(np.repeat(weights, [x[0].shape[0] for x in X]))[:, None] * np.concatenate([x[0] for x in X])
    on_edges = np.sqrt(np.repeat(weights, [len(x[1]) for x in X]))[:, None] * np.concatenate([x[2] for x in X])
    sigma = max(np.linalg.svd(rows, compute_uv=False)[0], np.linalg.svd(on_edges, compute_uv=False)[0])
    assert steps[1] == pytest.approx(1.0 / (sigma**2 / 0.5 + 0.1), rel=1e-12)
    assert steps[1] == pytest.approx(steps[0], rel=1e-12)


def test_piecewise_training_fits_the_same_pieces_on_sparse_and_dense_copies(chains):
    """The Linear oracles take the sparse rows with their diagonal solver and the dense ones with the
    block solver: the same optimum to the solvers' tolerance."""
    X, Y, weights = chains
    fits = [PiecewiseTraining(Linear(l2=0.5, tol=1e-10), Linear(l2=0.5, tol=1e-10), n_states=L).fit(
        data, Y, sample_weight=weights) for data in (X, _sparse_copy(X))]
    (_, dense_nodes, dense_edges), (_, sparse_nodes, sparse_edges) = (
        fit.decision_potentials(X) for fit in fits)
    np.testing.assert_allclose(sparse_nodes, dense_nodes, atol=1e-6)
    np.testing.assert_allclose(sparse_edges, dense_edges, atol=1e-6)
    for a, b in zip(fits[0].predict(X), fits[1].predict(_sparse_copy(X))):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("learner", [
    lambda: OneSlackSSVM(C=1.0, max_iter=5), lambda: NSlackSSVM(C=1.0, max_iter=3),
    lambda: SubgradientSSVM(C=1.0, max_iter=3), lambda: StructuredPerceptron(max_iter=3, random_state=0),
    lambda: PiecewiseTraining(Linear(l2=1.0), Linear(l2=1.0)),
    lambda: GradientAlternation(epsilon=0.5, l2=0.1, max_iter=3, sweeps_per_round=2),
], ids=["OneSlackSSVM", "NSlackSSVM", "SubgradientSSVM", "StructuredPerceptron", "PiecewiseTraining",
        "GradientAlternation"])
def test_wide_sparse_features_are_never_made_dense(learner):
    """100,000 indicator columns, 600 nodes: a dense copy of the node features is 480 MB, a weight
    vector 2.4 MB; a fit and prediction hold a few dozen weight-sized vectors (working sets, Linear's
    solver)."""
    n_examples, n, d = 4, 150, 100_000
    rng = np.random.default_rng(2)
    X, Y = [], []
    for _ in range(n_examples):
        columns = rng.integers(0, d, (n, 5))
        nodes = sp.csr_array((np.ones(n * 5), (np.repeat(np.arange(n), 5), columns.ravel())), shape=(n, d))
        X.append((nodes, np.column_stack([np.arange(n - 1), np.arange(1, n)]), sp.csr_array(np.ones((n - 1, 1)))))
        Y.append(columns[:, 0] % L)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tracemalloc.start()
        predicted = learner().fit(X, Y).predict(X)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    weight_bytes = 8 * (L * d + L * L)
    assert peak < 60 * weight_bytes < 8 * n_examples * n * d / 3
    assert [len(p) for p in predicted] == [n] * n_examples


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_joint_feature_entries_and_potentials_of_a_few_sparse_rows_are_the_dense_ones(chains, weighted):
    # a step of one example reads and writes the entries of w its features use, not all of w
    X, Y, weights = chains
    rng = np.random.default_rng(5)
    for examples in ([0], [3, 7], list(range(len(X)))):
        data = StructuredData(_sparse_copy([X[k] for k in examples]), [Y[k] for k in examples], L)
        dense = StructuredData([X[k] for k in examples], [Y[k] for k in examples], L)
        if weighted:
            data.weigh(weights[examples])
            dense.weigh(weights[examples])
        node_mu, edge_mu = data.onehot(rng.integers(0, L, size=data.batch.n_nodes))
        index, values = data.weighted_joint_feature_entries(node_mu, edge_mu)
        full = np.zeros(data.size)
        full[index] = values
        np.testing.assert_allclose(full, dense.weighted_joint_feature(node_mu, edge_mu), rtol=1e-12, atol=1e-12)
        assert isinstance(index, np.ndarray) and index.size < data.size   # the all-zero column is left out
        w = rng.normal(size=data.size)
        for got, expected in zip(data.potentials(w), dense.potentials(w)):
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_the_product_of_a_few_wide_sparse_rows_reads_the_columns_they_use():
    from slr.baselines.features import _times_transposed

    rng = np.random.default_rng(6)
    rows = sp.random(5, 400, density=0.01, random_state=6, format="csr").toarray()
    rows[2] = 0.0   # an empty row
    W = rng.normal(size=(4, 400))
    features = sp.csr_array(rows)
    assert features.nnz * 4 < W.size   # the gathering path
    np.testing.assert_allclose(_times_transposed(features, W), rows @ W.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_times_transposed(sp.csr_array((3, 400)), W), np.zeros((3, 4)))
