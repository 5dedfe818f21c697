"""pystruct 0.3.2's model and inference tests (``pystruct/tests/test_models``, ``test_inference``),
ported to the baselines' model and slr's prediction inference.

Every case takes pystruct's data (its generators, in the peer environment; see
``tests/pystruct_suite.py``) and pystruct's weights, turned into the baselines' layout, and checks
pystruct's expectation: the labelling pystruct's test expects, or the brute-force optimum. Column
``baseline`` decodes with the baselines' inference (:class:`slr.baselines.features.StructuredData`,
whose loss-augmented inference the SSVMs use); column ``slr`` with the inference of
``StructuredLogisticRegression.predict`` at its defaults. Cases about loss-augmented inference or
the joint feature map have the baseline column only (slr has neither).

Not ported (GAP), with the reason:

=============================================================  ==========================================
pystruct test                                                   why
=============================================================  ==========================================
test_grid_crf: continuous_y, energy_lp                          relaxed ``y`` as pystruct's (marginals,
test_graph_crf: continuous_inference, energy_lp_integral,       edge-marginal) pair and ``return_energy``:
energy_lp_relaxed; test_directional_crf: joint_feature_         no such API; the LP's own tests cover it
continuous, energy; test_edge_feature_graph_crf: energy_
continuous, joint_feature_continuous
test_graph_crf / test_chain_crf: initialize;                    ``model.initialize`` (our ``n_states`` may
test_edge_feature_graph_crf: initialization                     exceed the labels used: no error to port)
test_edge_feature_graph_crf: inference, joint_feature_discrete  the same data and model for us as
                                                                test_directional_crf's (ported there)
test_maxprod: iterative_max_product_chain/_tree,                one MAP decoder here: the same as
max_product_binary_blocks                                       tree_max_product_* and binary_blocks_crf
test_maxprod: is_chain, is_forest                               slr's graph predicates are not public
test_latent_crf (14), test_latent_node_crf (5)                  hidden states with their own state space
                                                                (``LatentGridCRF``, ``LatentNodeCRF``)
test_multilabel_problem (3)                                     multi-label models
test_node_type_edge_feature_graph_crf (12)                      node types
test_utils_inference: symmetric_tools_*                         symmetric pairwise tying
test_libraries (3), test_datasets                               pystruct's optional libraries and scene
=============================================================  ==========================================
"""
import numpy as np
import pytest

from slr.baselines.features import StructuredData
from pystruct_suite import (DECODERS, brute_force, from_pystruct, grids, make_grid_edges, ours,
                            potentials_examples)
from slr.formats import chain_example, from_graph_crf

pytestmark = pytest.mark.peer

BOTH = ["baseline", "slr"]

def _columns(case: str, columns=BOTH):
    return [pytest.param(column, id=column) for column in columns]


# pystruct's hand-set weights of the grid tests: unary identity, attractive pairwise
W_BINARY = np.array([1, 0, 0, 1, 0, -4, 0])
W_MULTINOMIAL = np.array([1., 0., 0., 0., 1., 0., 0., 0., 1., .4, -.3, .3, -.5, -.1, .3])


def _assert_labellings(predicted, expected):
    for k, (p, e) in enumerate(zip(predicted, expected)):
        np.testing.assert_array_equal(p, np.ravel(e), err_msg=f"example {k}")


# ------------------------------------------------------------------ test_grid_crf
@pytest.mark.parametrize("column", _columns("grid_binary_blocks"))
def test_grid_binary_blocks(pystruct_data, column):
    """test_grid_crf.test_binary_blocks_crf: the hand-set weights recover generate_blocks' labels."""
    X, Y = grids(pystruct_data, "blocks1")
    _assert_labellings(DECODERS[column](X, from_pystruct(W_BINARY, 2, 2), 2), Y)


@pytest.mark.parametrize("column", _columns("grid_n8"))
def test_grid_n8(pystruct_data, column):
    """test_grid_crf.test_binary_blocks_crf_n8_lp: the 8-neighbourhood grid, repulsive weights."""
    X, Y = grids(pystruct_data, "blocks1_noise1", neighbourhood=8)
    w = from_pystruct(np.array([1, 0, 0, 1, 1, -1.4, 1]), 2, 2)
    _assert_labellings(DECODERS[column](X, w, 2), Y)


@pytest.mark.parametrize("column", _columns("grid_multinomial"))
def test_grid_multinomial(pystruct_data, column):
    """test_grid_crf.test_blocks_multinomial_crf: three states."""
    X, Y = grids(pystruct_data, "bm1_seed0_size9")
    _assert_labellings(DECODERS[column](X, from_pystruct(W_MULTINOMIAL, 3, 3), 3), Y)


@pytest.mark.parametrize("column", _columns("maxprod_multinomial"))
def test_maxprod_multinomial(pystruct_data, column):
    """test_maxprod.test_max_product_multinomial_crf: the same weights on a 10 x 12 grid."""
    X, Y = grids(pystruct_data, "bm1_unseeded")
    _assert_labellings(DECODERS[column](X, from_pystruct(W_MULTINOMIAL, 3, 3), 3), Y)


@pytest.mark.parametrize("column", _columns("grid_binary_unaries"))
def test_grid_binary_unaries(pystruct_data, column):
    """test_grid_crf.test_binary_grid_unaries: unaries alone give each pixel's argmax, which is
    right on most pixels and on all of them without noise, for every binary generator."""
    w = from_pystruct(np.r_[np.eye(2).ravel(), 0, 0, 0], 2, 2)
    for generator in ("generate_blocks", "generate_checker", "generate_big_checker", "generate_easy"):
        X, Y = grids(pystruct_data, "unary_" + generator)
        labels = DECODERS[column](X, w, 2)[0]
        np.testing.assert_array_equal(labels, X[0][0].argmax(axis=1), err_msg=generator)
        assert np.mean(labels == Y[0]) > 0.5, generator
        X, Y = grids(pystruct_data, "unary_" + generator + "_clean")
        _assert_labellings(DECODERS[column](X, w, 2), Y)


@pytest.mark.parametrize("column", _columns("grid_multinomial_unaries"))
def test_grid_multinomial_unaries(pystruct_data, column):
    """test_grid_crf.test_multinomial_grid_unaries: the same for the three-state generators."""
    w = ours(np.eye(3), np.zeros((1, 3, 3)))
    for generator in ("generate_blocks_multinomial", "generate_checker_multinomial"):
        X, _ = grids(pystruct_data, "unary_" + generator)
        np.testing.assert_array_equal(DECODERS[column](X, w, 3)[0], X[0][0].argmax(axis=1), err_msg=generator)
        X, Y = grids(pystruct_data, "unary_" + generator + "_clean")
        _assert_labellings(DECODERS[column](X, w, 3), Y)


def _grid_potentials(x: np.ndarray, w: np.ndarray):
    """Node and edge potentials of a 2-state, 2-feature GridCRF image under pystruct's weights."""
    h, width = x.shape[:2]
    unary = x.reshape(-1, 2) @ w[:4].reshape(2, 2).T
    edges = np.vstack(make_grid_edges(h, width))
    table = from_pystruct(w, 2, 2)[4:].reshape(2, 2)
    return unary, np.repeat(table[None], len(edges), axis=0), edges


@pytest.mark.parametrize("column", _columns("grid_exhaustive"))
def test_grid_exhaustive(pystruct_data, column):
    """test_grid_crf.test_binary_crf_exhaustive: MAP on random 3 x 2 grids equals brute force."""
    for x, w in zip(pystruct_data["exhaustive/X"], pystruct_data["exhaustive/w"]):
        X, _ = grids({"g/X": x[None], "g/Y": np.zeros((1, 3, 2), int)}, "g")
        expected, _ = brute_force(*_grid_potentials(x, w))
        np.testing.assert_array_equal(DECODERS[column](X, from_pystruct(w, 2, 2), 2)[0], expected)


def _assert_valid_constraint(data: StructuredData, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Loss-augmented inference returns a labelling whose loss and score give the returned slack."""
    node_mu, edge_mu, loss, slack = data.loss_augmented(w)
    np.testing.assert_allclose(node_mu.max(axis=1), 1.0, atol=1e-6, err_msg="a fractional node")
    y_hat = node_mu.argmax(axis=1)
    hat_n, hat_e = data.onehot(y_hat)
    np.testing.assert_allclose(edge_mu, hat_e, atol=1e-6, err_msg="edge marginals that are no labelling")
    theta_n, theta_e = data.potentials(w)
    score = data.labelling_scores(y_hat, theta_n, theta_e) - data.labelling_scores(data.labels, theta_n, theta_e)
    hamming = data.per_example_sum((y_hat != data.labels).astype(float))
    np.testing.assert_allclose(loss, hamming, atol=1e-6)
    np.testing.assert_allclose(slack, np.maximum(0.0, hamming + score), atol=1e-6)
    return y_hat, slack


@pytest.mark.parametrize("column", _columns("grid_exhaustive_loss_augmented", ["baseline"]))
def test_grid_exhaustive_loss_augmented(pystruct_data, column):
    """test_grid_crf.test_binary_crf_exhaustive_loss_augmented: loss-augmented MAP equals brute force."""
    d = pystruct_data
    for x, y, w in zip(d["exhaustive_la/X"], d["exhaustive_la/Y"], d["exhaustive_la/w"]):
        X, Y = grids({"g/X": x[None], "g/Y": y[None]}, "g")
        data = StructuredData(X, Y, 2)
        y_hat, _ = _assert_valid_constraint(data, from_pystruct(w, 2, 2))
        expected, _ = brute_force(*_grid_potentials(x, w), truth=y)
        np.testing.assert_array_equal(y_hat, expected)


@pytest.mark.parametrize("column", _columns("grid_loss_augmentation", ["baseline"]))
def test_grid_loss_augmentation(pystruct_data, column):
    """test_grid_crf.test_loss_augmentation: the loss-augmented result's energy is its loss plus its
    score, on a 10 x 12 grid (a labelling, not a fractional point)."""
    X, Y = grids(pystruct_data, "blocks1")
    _assert_valid_constraint(StructuredData(X, Y, 2), from_pystruct(W_BINARY, 2, 2))


# ------------------------------------------------------------------ test_graph_crf
W_GRAPH = np.array([1, 0, 0, 1, .22, 0, .22])
TRIANGLE = (np.array([[0, 1], [1, 0], [.4, .6]]), np.array([[0, 1], [1, 2], [0, 2]]))
CHAIN3 = (np.array([[0, 1], [1, 0], [.4, .6]]), np.array([[0, 1], [1, 2]]))


@pytest.mark.parametrize("column", _columns("graph_inference"))
@pytest.mark.parametrize("directed", [False, True], ids=["undirected", "directed"])
def test_graph_inference(column, directed):
    """test_graph_crf.test_graph_crf_inference and test_directed_graph_crf_inference: a triangle
    and a chain (pystruct's hand-made examples, no generator)."""
    X, _ = from_graph_crf([TRIANGLE, CHAIN3])
    w = (from_pystruct(np.r_[W_GRAPH[:4], .22, 0, 0, .22], 2, 2, directed=True) if directed
         else from_pystruct(W_GRAPH, 2, 2))
    _assert_labellings(DECODERS[column](X, w, 2), [[1, 0, 1], [1, 0, 0]])


@pytest.mark.parametrize("column", _columns("graph_loss_augment", ["baseline"]))
def test_graph_loss_augment(column):
    """test_graph_crf.test_graph_crf_loss_augment: on the triangle, checked against brute force."""
    X, Y = from_graph_crf([TRIANGLE], [np.array([1, 0, 1])])
    w = from_pystruct(W_GRAPH, 2, 2)
    data = StructuredData(X, Y, 2)
    y_hat, _ = _assert_valid_constraint(data, w)
    theta_n, theta_e = data.potentials(w)
    expected, _ = brute_force(theta_n, theta_e, TRIANGLE[1], truth=Y[0])
    np.testing.assert_array_equal(y_hat, expected)


@pytest.mark.parametrize("column", _columns("graph_class_weights", ["baseline"]))
def test_graph_class_weights(column):
    """test_graph_crf.test_graph_crf_class_weights: one node, three states; loss-augmented inference
    picks the last state, and with class weights that make the loss small, the truth."""
    X, Y = from_graph_crf([(np.array([[1, 1.5, 1.1]]), np.empty((0, 2)))], [np.array([1])])
    w = ours(np.eye(3), np.zeros((1, 3, 3)))
    assert DECODERS["baseline"](X, w, 3)[0][0] == 1
    data = StructuredData(X, Y, 3)
    assert data.loss_augmented(w)[0].argmax(axis=1)[0] == 2
    data.weigh(None, {0: 1.0, 1: 0.1, 2: 1.0})
    assert data.loss_augmented(w)[0].argmax(axis=1)[0] == 1


# pystruct's directed three-state chain: states want to follow 0 -> 1 -> 2, evidence in the middle
W_DIRECTED = ours(np.eye(3), np.array([[[0, 1, 0], [0, 0, 1], [0, 0, 0]]]))
X_DIRECTED = np.array([[0., 0, 0], [0, 1, 0], [0, 0, 0]])


@pytest.mark.parametrize("column", _columns("graph_directed_chain"))
def test_graph_directed_chain(column):
    """test_graph_crf.test_directed_graph_chain: a directed model tells the directions apart (LP)."""
    X, _ = from_graph_crf([(X_DIRECTED, np.array([[0, 1], [1, 2]]))])
    X = [(x[0], x[1], x[2]) for x in X]
    data_lp = StructuredData(X, None, 3, model="lp")  # a graph, not declared a chain
    assert data_lp.model == "lp"
    _assert_labellings(DECODERS[column](X, W_DIRECTED, 3), [[0, 1, 2]])


@pytest.mark.parametrize("column", _columns("chain_directed"))
def test_chain_directed(column):
    """test_chain_crf.test_directed_chain: the same through ChainCRF (Viterbi)."""
    _assert_labellings(DECODERS[column]([chain_example(X_DIRECTED)], W_DIRECTED, 3), [[0, 1, 2]])


# ------------------------------------------------------------------ test_directional_crf
def _directional_weights():
    """pystruct's weights: a linear order of the states horizontally, strong agreement vertically."""
    xx, yy = np.indices((3, 3))
    horizontal = -np.eye(3)
    horizontal[xx > yy] = 1
    vertical = -np.eye(3)
    vertical[xx != yy] = 1
    vertical *= 10
    return ours(np.eye(3), np.stack([-horizontal, -vertical]))


@pytest.mark.parametrize("column", _columns("directional_inference"))
def test_directional_inference(pystruct_data, column):
    """test_directional_crf.test_inference (and test_edge_feature_graph_crf.test_inference, the same
    model for us): a table per direction recovers the labels of a very noisy image."""
    X, Y = grids(pystruct_data, "bm1_noise2_seed1", directional=True)
    _assert_labellings(DECODERS[column](X, _directional_weights(), 3), Y)


@pytest.mark.parametrize("column", _columns("directional_joint_feature", ["baseline"]))
def test_directional_joint_feature(pystruct_data, column):
    """test_directional_crf.test_joint_feature_discrete: the per-direction pairwise counts."""
    X, Y = grids(pystruct_data, "bm1_noise2_seed1", directional=True)
    data = StructuredData(X, Y, 3)
    psi = data.joint_feature(*data.onehot(data.labels))
    pairwise = psi[9:].reshape(9, 2).T.reshape(2, 3, 3)  # back to one table per direction
    horizontal = np.diag([30, 30, 30])
    horizontal[0, 1] = horizontal[1, 2] = 10
    np.testing.assert_array_equal(pairwise[0], horizontal)
    np.testing.assert_array_equal(pairwise[1], np.diag([36, 36, 36]))


@pytest.mark.parametrize("column", _columns("edge_feature_energy", ["baseline"]))
def test_edge_feature_energy(pystruct_data, column):
    """test_edge_feature_graph_crf.test_energy_discrete: the energy of the decoded labelling summed
    from its potentials equals ``w . psi``, on random 7 x 8 images and weights."""
    for x, w_py in zip(pystruct_data["energy_discrete/X"], pystruct_data["energy_discrete/w"]):
        X, _ = grids({"g/X": x[None], "g/Y": np.zeros((1, 7, 8), int)}, "g", directional=True)
        w = from_pystruct(w_py, 3, 3, n_edge_features=2)
        data = StructuredData(X, None, 3)
        theta_n, theta_e = data.potentials(w)
        y = data.decode(theta_n, theta_e)
        energy = theta_n[np.arange(len(y)), y].sum() + theta_e[np.arange(len(theta_e)), y[X[0][1][:, 0]],
                                                               y[X[0][1][:, 1]]].sum()
        assert energy == pytest.approx(w @ data.joint_feature(*data.onehot(y)))


# ------------------------------------------------------------------ test_inference
def _decode_each(problems, column: str) -> None:
    """Decode every ``(unary, tables, edges, expected)`` problem (its potentials given through
    one-hot features) and compare with the expected labelling."""
    for k, (unary, tables, edges, expected) in enumerate(problems):
        example, w = potentials_examples(unary, tables, edges)
        np.testing.assert_array_equal(DECODERS[column]([example], w, 3)[0], expected, err_msg=f"problem {k}")


@pytest.fixture(scope="module")
def chain_problems(pystruct_data):
    """test_exact_inference.test_chain's chains with one shared table, forward and backward (the
    table transposed): the brute-force optimum of each."""
    forward = np.c_[np.arange(9), np.arange(1, 10)]
    problems = []
    for unary, table in zip(pystruct_data["chain_shared/unary"], pystruct_data["chain_shared/pairwise"]):
        tables = np.repeat(table[None], 9, axis=0)
        expected, _ = brute_force(unary, tables, forward)
        problems.append((unary, tables, forward, expected))
        problems.append((unary, np.repeat(table.T[None], 9, axis=0), forward[:, ::-1].copy(), expected))
    return problems


@pytest.mark.parametrize("column", _columns("exact_chain"))
def test_exact_chain(chain_problems, column):
    """test_exact_inference.test_chain: on random chains every decoder is exact, and reversing the
    edges is transposing the table."""
    _decode_each(chain_problems, column)


@pytest.fixture(scope="module")
def edge_table_problems(pystruct_data):
    """test_maxprod's random chains (both orientations) and spanning trees, a table per edge."""
    forward = np.c_[np.arange(9), np.arange(1, 10)]
    chains, trees = [], []
    for unary, tables in zip(pystruct_data["chain_edges/unary"], pystruct_data["chain_edges/pairwise"]):
        for edges in (forward, forward[:, ::-1].copy()):
            chains.append((unary, tables, edges, brute_force(unary, tables, edges)[0]))
    d = pystruct_data
    for edges, unary, tables in zip(d["trees/edges"], d["trees/unary"], d["trees/pairwise"]):
        trees.append((unary, tables, edges, brute_force(unary, tables, edges)[0]))
    return {"chains": chains, "trees": trees}


@pytest.mark.parametrize("column", _columns("maxprod_chain"))
def test_maxprod_chain(edge_table_problems, column):
    """test_maxprod.test_tree_max_product_chain: a table per edge, both orientations, brute force."""
    _decode_each(edge_table_problems["chains"], column)


@pytest.mark.parametrize("column", _columns("maxprod_trees"))
def test_maxprod_trees(edge_table_problems, column):
    """test_maxprod.test_tree_max_product_tree: 100 random spanning trees, brute force."""
    _decode_each(edge_table_problems["trees"], column)
