"""Reproducers of the third reliability probe: converters and metrics that keep masks and shapes,
partial labels with a hold-out, errors that name their cause, one edge per pair of nodes."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.metrics import f1_score

from slr import StructuredLogisticRegression
from slr.formats import from_chain_crf, from_graph_crf, from_grid_crf
from slr.graph import chain_edges, check_dataset, check_edges, check_labels
from slr.metrics import (node_accuracy, node_accuracy_scorer, node_brier_score, node_f1, node_f1_scorer,
                         node_log_loss)
from slr.oracles import MLP


def _partial_chains(n_examples: int, n: int = 6, seed: int = 0) -> tuple[list, list]:
    """Chains whose label is the sign of the first feature, one node per example unlabelled."""
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for k in range(n_examples):
        x = rng.normal(size=(n, 2))
        y = (x[:, 0] > 0).astype(np.int64)
        y[k % n] = -1
        X.append((x, chain_edges(n), np.ones((n - 1, 1))))
        Y.append(y)
    return X, Y


# ---------------------------------------------------------------- converters: masks, integrality, shapes
def test_converters_keep_a_mask_as_unlabelled_in_every_format():
    hidden_seven = np.ma.masked_array([[0, 1], [1, 7]], mask=[[0, 0], [0, 1]])
    _, Y = from_grid_crf([np.zeros((2, 2, 1))], [hidden_seven])
    assert Y[0].tolist() == [0, 1, 1, -1]
    _, Y = from_chain_crf([np.zeros((3, 1))], [np.ma.masked_array([2, 5, 0], mask=[0, 1, 0])])
    assert Y[0].tolist() == [2, -1, 0]
    _, Y = from_graph_crf([(np.zeros((3, 1)), np.array([[0, 1], [1, 2]]))],
                          [np.ma.masked_array([4, 0, 1], mask=[1, 0, 0])])
    assert Y[0].tolist() == [-1, 0, 1]
    # the learner reads the masked array itself the same way
    _, checked, _ = check_dataset([(np.zeros((4, 1)), np.zeros((0, 2)), np.zeros((0, 1)))],
                                  [hidden_seven.ravel()], allow_unlabelled=True)
    assert checked[0].tolist() == [0, 1, 1, -1]


@pytest.mark.parametrize("labels, word", [([0.2, 1.7, 0.9], "whole numbers"), ([0, np.nan, 1], "whole numbers"),
                                          ([0, -3, 1], "negative")])
def test_converters_refuse_labels_the_learner_refuses(labels, word):
    with pytest.raises(ValueError, match=rf"Y\[0\].*{word}"):
        from_chain_crf([np.zeros((3, 1))], [labels])
    with pytest.raises(ValueError, match=rf"Y\[0\].*{word}"):
        check_labels(np.asarray(labels), 3, None, name="Y[0]", allow_unlabelled=True)


def test_whole_float_labels_pass_as_the_learner_takes_them():
    assert from_chain_crf([np.zeros((3, 1))], [[2.0, 0.0, 1.0]])[1][0].tolist() == [2, 0, 1]


def test_grid_labels_must_have_the_image_shape_not_only_its_size():
    with pytest.raises(ValueError, match=r"Y\[0\] must have shape \(2, 3\)"):
        from_grid_crf([np.zeros((2, 3, 1))], [np.zeros((3, 2), dtype=int)])
    with pytest.raises(ValueError, match=r"Y\[0\] must have shape \(2, 3\)"):
        from_grid_crf([np.zeros((2, 3, 1))], [np.zeros(6, dtype=int)])
    _, Y = from_grid_crf([np.zeros((2, 3, 1))], [np.arange(6).reshape(2, 3)])
    assert Y[0].tolist() == list(range(6))   # row-major, as the nodes


def test_graph_converter_refuses_an_edge_index_instead_of_reshaping_it():
    nodes = np.zeros((4, 1))
    with pytest.raises(ValueError, match=r"\(2, m\) edge index.*transpose"):
        from_graph_crf([(nodes, np.array([[0, 1, 3], [2, 3, 0]]))])
    with pytest.raises(ValueError, match=r"shape \(m, 2\).*\(6,\)"):
        from_graph_crf([(nodes, np.array([0, 1, 1, 2, 2, 3]))])
    with pytest.raises(ValueError, match="not whole numbers"):
        from_graph_crf([(nodes, np.array([[0, 1.9], [1, 2]]))])
    X, _ = from_graph_crf([(nodes, np.array([[0, 1, 3], [2, 3, 0]]).T)])
    assert X[0][1].tolist() == [[0, 2], [1, 3], [3, 0]]   # the graph given, as (m, 2) rows


def test_graph_converter_refuses_an_m_by_3_array():
    with pytest.raises(ValueError, match=r"shape \(m, 2\).*\(4, 3\)"):
        from_graph_crf([(np.zeros((5, 1)), np.array([[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 0]]))])


def test_empty_chain_names_its_example():
    with pytest.raises(ValueError, match=r"X\[1\] is an empty sequence"):
        from_chain_crf([np.zeros((3, 1)), np.zeros((0, 1))])


# ---------------------------------------------------------------- metrics leave unlabelled nodes out
def test_metrics_leave_unlabelled_and_masked_nodes_out():
    assert node_accuracy([[0, 1, -1, -1]], [[0, 1, 1, 0]]) == 1.0
    masked = np.ma.masked_array([0, 1, 1, 0], mask=[0, 0, 1, 1])
    assert node_accuracy([masked], [[0, 1, 0, 1]]) == 1.0
    truth, guess = [np.array([0, 2, -1, 1]), np.array([1, -1])], [np.array([0, 1, 2, 1]), np.array([1, 0])]
    expected = f1_score([0, 2, 1, 1], [0, 1, 1, 1], average="macro")
    assert node_f1(truth, guess) == pytest.approx(expected)
    assert node_f1([masked], [[0, 1, 0, 1]]) == 1.0
    per_state = node_f1(truth, guess, average=None)
    np.testing.assert_allclose(per_state, f1_score([0, 2, 1, 1], [0, 1, 1, 1], average=None))
    with pytest.raises(ValueError, match="no labelled node"):
        node_accuracy([[-1, -1]], [[0, 1]])


def test_marginal_metrics_do_not_read_under_a_mask():
    marginals = [np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5], [1.0, 0.0]])]
    hidden = np.ma.masked_array([0, 1, 7, 1], mask=[0, 0, 1, 0])
    expected = -(np.log(0.9) + np.log(0.8) + np.log(1e-15)) / 3
    assert node_log_loss([hidden], marginals) == pytest.approx(expected)
    assert node_log_loss([np.array([0, 1, -1, 1])], marginals) == pytest.approx(expected)
    brier = ((0.1**2 * 2) + (0.2**2 * 2) + (1.0 + 1.0)) / 3
    assert node_brier_score([hidden], marginals) == pytest.approx(brier)


def test_scorers_rank_on_the_labelled_nodes():
    X, Y = _partial_chains(12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StructuredLogisticRegression(max_iter=3).fit(X, Y)
    predicted = model.predict(X)
    truth = np.concatenate(Y)
    guess = np.concatenate(predicted)
    labelled = truth >= 0
    assert node_f1_scorer(model, X, Y) == pytest.approx(f1_score(truth[labelled], guess[labelled], average="macro"))
    assert node_accuracy_scorer(model, X, Y) == pytest.approx(np.mean(truth[labelled] == guess[labelled]))


# ---------------------------------------------------------------- partial labels with a hold-out
def test_early_stopping_holds_out_partially_labelled_examples():
    X, Y = _partial_chains(24)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StructuredLogisticRegression(max_iter=4, early_stopping=True, random_state=0).fit(X, Y)
    train, val = model._validation_split
    assert len(val) == 3 and len(train) == 21
    assert model.best_iteration_ is not None


def test_default_mlp_fit_on_twenty_partially_labelled_examples():
    X, Y = _partial_chains(20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StructuredLogisticRegression(unary=MLP(), max_iter=2, random_state=0).fit(X, Y)
    assert model.n_iter_ >= 1
    assert node_accuracy(Y, model.predict(X)) > 0.5


# ---------------------------------------------------------------- labels: messages naming the cause
def test_fractional_label_message_says_whole_numbers():
    with pytest.raises(ValueError, match=r"Y\[0\] must contain integer labels \(whole numbers\), got 0.5 at node 3"):
        check_labels(np.array([0, 1, 0, 0.5]), 4, None, name="Y[0]")
    assert check_labels(np.array([0, 2.0]), 2, None).tolist() == [0, 2]


def test_huge_unsigned_labels_are_too_large_not_negative():
    labels = np.array([0, 2**63 + 5], dtype=np.uint64)
    with pytest.raises(ValueError, match="too large for int64"):
        check_labels(labels, 2, None, name="Y[1]", allow_unlabelled=True)


# ---------------------------------------------------------------- one edge per pair of nodes
@pytest.mark.parametrize("edges", [[[0, 1], [1, 2], [1, 0]], [[0, 1], [1, 2], [0, 1]]])
def test_a_pair_joined_twice_is_refused_naming_it(edges):
    with pytest.raises(ValueError, match=r"joins nodes 0 and 1 twice \(rows 0 and 2"):
        check_edges(np.array(edges), 3, unique_pairs=True)
    X = [(np.zeros((3, 1)), chain_edges(3), np.ones((2, 1))), (np.zeros((3, 1)), np.array(edges), np.ones((3, 1)))]
    with pytest.raises(ValueError, match=r"X\[1\] edges joins nodes 0 and 1 twice"):
        check_dataset(X, [np.zeros(3, int), np.zeros(3, int)])


def test_a_symmetric_adjacency_is_refused_and_its_upper_triangle_taken():
    scipy_sparse = pytest.importorskip("scipy.sparse")
    adjacency = scipy_sparse.coo_matrix(np.array([[0, 1, 1], [1, 0, 0], [1, 0, 0]]))
    both = np.stack([adjacency.row, adjacency.col], axis=1)
    with pytest.raises(ValueError, match="twice"):
        check_edges(both, 3, unique_pairs=True)
    upper = scipy_sparse.triu(adjacency, k=1)
    assert sorted(map(tuple, check_edges(np.stack([upper.row, upper.col], axis=1), 3).tolist())) == [(0, 1), (0, 2)]


def test_the_same_pair_in_different_examples_is_no_duplicate():
    X = [(np.zeros((2, 1)), np.array([[0, 1]]), np.ones((1, 1))),
         (np.zeros((2, 1)), np.array([[1, 0]]), np.ones((1, 1)))]
    checked, _, _ = check_dataset(X)
    assert [x[1].tolist() for x in checked] == [[[0, 1]], [[1, 0]]]


# ---------------------------------------------------------------- inference: NaN, complex, bad shapes
def test_viterbi_refuses_nan_potentials_as_map_lp_does():
    from slr.inference import map_lp, viterbi

    theta_nodes, theta_edges = np.zeros((3, 2)), np.zeros((2, 2, 2))
    theta_nodes[1, 0] = np.nan
    with pytest.raises(ValueError, match="theta_nodes contains NaN"):
        map_lp(theta_nodes, theta_edges, chain_edges(3))
    with pytest.raises(ValueError, match="theta_nodes contains NaN"):
        viterbi(theta_nodes, theta_edges)
    theta_edges[0, 1, 1] = np.inf
    with pytest.raises(ValueError, match="theta_edges contains NaN or infinite"):
        viterbi(np.zeros((3, 2)), theta_edges)


@pytest.mark.parametrize("nodes, edges, message", [
    (np.zeros(3), np.zeros((2, 2, 2)), "theta_nodes must be 2-D"),
    (np.zeros((3, 0)), np.zeros((2, 0, 0)), "at least one node and one state"),
    (np.zeros((0, 2)), np.zeros((0, 2, 2)), "at least one node and one state"),
    (np.zeros((3, 2)), np.zeros((3, 2, 2)), r"theta_edges must have shape .* \(1, 2, 2, 2\)"),
])
def test_viterbi_names_a_bad_shape(nodes, edges, message):
    from slr.inference import viterbi

    with pytest.raises(ValueError, match=message):
        viterbi(nodes, edges)


def test_viterbi_of_one_node_and_of_a_chain_against_brute_force():
    from itertools import product

    from slr.inference import viterbi

    assert viterbi(np.array([[0.0, 2.0, 1.0]]), np.zeros(0)).tolist() == [1]
    rng = np.random.default_rng(3)
    theta_nodes, theta_edges = rng.normal(size=(4, 3)), rng.normal(size=(3, 3, 3))
    best = max(product(range(3), repeat=4), key=lambda y: sum(theta_nodes[i, y[i]] for i in range(4))
               + sum(theta_edges[i, y[i], y[i + 1]] for i in range(3)))
    assert viterbi(theta_nodes, theta_edges).tolist() == list(best)


def test_complex_features_and_potentials_are_refused():
    from slr.inference import smoothed_lp, viterbi

    X = [(np.ones((3, 2)) + 1j, chain_edges(3), np.ones((2, 1)))]
    with pytest.raises(ValueError, match=r"X\[0\] node_features must be real, got complex"):
        check_dataset(X, [np.zeros(3, int)])
    with pytest.raises(ValueError, match=r"X\[0\] edge_features must be real"):
        check_dataset([(np.ones((3, 2)), chain_edges(3), np.ones((2, 1), dtype=complex))])
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # no ComplexWarning on the way either
        with pytest.raises(ValueError, match="theta_nodes must be real"):
            viterbi(np.zeros((3, 2), dtype=complex), np.zeros((2, 2, 2)))
        with pytest.raises(ValueError, match="theta_edges must be real"):
            smoothed_lp(np.zeros((3, 2)), np.zeros((2, 2, 2), dtype=complex), chain_edges(3), 1.0)


@pytest.mark.parametrize("epsilon", [0.0, 1.0])
@pytest.mark.parametrize("where", ["node", "edge"])
def test_unchecked_sweeps_never_report_nan_messages_converged(epsilon, where):
    from slr.data import GraphBatch
    from slr.inference import batch_sweeps

    batch = GraphBatch.from_graphs([(3, chain_edges(3)), (2, chain_edges(2))], 2)
    theta_nodes, theta_edges = np.zeros((5, 2)), np.zeros((3, 2, 2))
    if where == "node":
        theta_nodes[1, 0] = np.nan
    else:
        theta_edges[0, 1, 1] = np.nan
    run = batch_sweeps(batch, theta_nodes, theta_edges, epsilon, max_sweeps=50, tol=1e-9, check_input=False)
    assert not np.isfinite(run.messages[:2]).all()
    assert run.converged.tolist() == [False, True]   # the clean second example still converged
    with pytest.raises(ValueError, match="NaN"):
        batch_sweeps(batch, theta_nodes, theta_edges, epsilon, max_sweeps=50)


# ---------------------------------------------------------------- exact marginals of a star
def test_forest_edge_marginals_of_a_wide_star_against_its_closed_form():
    """A star's marginals in closed form: the centre's belief is its potential plus one log-sum
    per leaf; an edge's joint is the centre's belief without that leaf's term, plus the leaf's
    potential and the edge's table (once linear in the degree, the kernel was quadratic)."""
    from scipy.special import logsumexp

    from slr.inference.sum_product import forest_marginals

    n_leaves, L, temperature = 3000, 3, 0.7
    rng = np.random.default_rng(5)
    edges = np.stack([np.zeros(n_leaves, np.int64), np.arange(1, n_leaves + 1)], axis=1)
    edges[::2] = edges[::2, ::-1]   # the centre on either side of its edges
    theta_nodes, theta_edges = rng.normal(size=(n_leaves + 1, L)), rng.normal(size=(n_leaves, L, L))
    result = forest_marginals(theta_nodes, theta_edges, edges, temperature)
    centre_first = edges[:, 0] == 0
    tables = np.where(centre_first[:, None, None], theta_edges, theta_edges.transpose(0, 2, 1))   # [centre, leaf]
    leaves = edges.max(axis=1)
    joint_terms = (tables + theta_nodes[leaves][:, None, :]) / temperature          # (m, centre, leaf)
    from_leaf = logsumexp(joint_terms, axis=2)                                      # (m, centre)
    centre = theta_nodes[0] / temperature + from_leaf.sum(axis=0)
    np.testing.assert_allclose(result.node_marginals[0], np.exp(centre - logsumexp(centre)), rtol=1e-9)
    log_joint = (centre - from_leaf)[:, :, None] + joint_terms
    expected = np.exp(log_joint - logsumexp(log_joint, axis=(1, 2), keepdims=True))
    expected = np.where(centre_first[:, None, None], expected, expected.transpose(0, 2, 1))
    np.testing.assert_allclose(result.edge_marginals, expected, rtol=1e-8, atol=1e-15)
    assert result.log_partition[0] == pytest.approx(logsumexp(centre), rel=1e-12)


# ---------------------------------------------------------------- errors naming the right cause
def _small_chains():
    rng = np.random.default_rng(1)
    X = [(rng.normal(size=(n, 2)), chain_edges(n), np.ones((n - 1, 1))) for n in (4, 5)]
    return X, [np.array([0, 1, 0, 1]), np.array([0, 1, 1, 0, 1])]


def test_validation_data_faults_name_x_val_and_y_val():
    X, Y = _small_chains()
    model = StructuredLogisticRegression(max_iter=2)
    with pytest.raises(ValueError, match=r"^Y_val\[1\] contains negative labels"):
        model.fit(X, Y, X_val=X, Y_val=[Y[0], np.array([0, 1, -1, 0, 1])])
    with pytest.raises(ValueError, match=r"^X_val must contain at least one example"):
        model.fit(X, Y, X_val=[], Y_val=[])
    with pytest.raises(ValueError, match=r"^X_val and Y_val must have the same length"):
        model.fit(X, Y, X_val=X, Y_val=Y[:1])
    with pytest.raises(ValueError, match=r"^X_val\[0\] node_features"):
        model.fit(X, Y, X_val=[(np.full((2, 2), np.nan), chain_edges(2), np.ones((1, 1)))], Y_val=[np.zeros(2, int)])


def test_labels_up_to_a_billion_are_refused_before_any_allocation():
    X, Y = _small_chains()
    with pytest.raises(ValueError,
                       match=r"n_states = 1000000001 \(the largest label \+ 1\) needs .* GiB.*LabelEncoder"):
        StructuredLogisticRegression(max_iter=1).fit(X, [Y[0], np.array([0, 1, 1, 0, 10**9])])


def test_a_huge_class_weight_names_class_weight():
    X, Y = _small_chains()
    with pytest.raises(ValueError, match=r"^class_weight: the largest weight, 1e\+300"):
        StructuredLogisticRegression(max_iter=1, class_weight={0: 1e300}).fit(X, Y)
    StructuredLogisticRegression(max_iter=1, class_weight={0: 1e3}).fit(X, Y)   # a large ratio that resolves


# ---------------------------------------------------------------- warm_start continues the fitted model only
def _warm(X, Y, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        return StructuredLogisticRegression(max_iter=2, tol=0, random_state=0, **params).fit(X, Y)


def test_warm_start_refuses_a_changed_model():
    from slr.oracles import Constant, Linear

    X, Y = _small_chains()
    model = _warm(X, Y, unary=Linear(l2=1.0)).set_params(warm_start=True, max_iter=4)
    for change, name in (({"n_states": 3}, "n_states"), ({"unary": Linear(l2=2.0)}, "unary"),
                         ({"unary": MLP()}, "unary"), ({"pairwise": Constant()}, "pairwise")):
        before = model.history_.copy()
        with pytest.raises(ValueError, match=rf"warm_start=True continues the fitted .*{name}"):
            model.set_params(**change).fit(X, Y)
        assert before.equals(model.history_)   # the refused fit left the model as it was
        model.set_params(n_states=None, unary=Linear(l2=1.0), pairwise=None)
    model.set_params(n_states=2).fit(X, Y)   # the fitted n_states, given explicitly, is the same model
    assert model.n_iter_ == 4
    wide = [(np.hstack([x[0], x[0]]), x[1], x[2]) for x in X]
    with pytest.raises(ValueError, match="X has 4 node features, the model expects 2"):
        model.set_params(max_iter=6).fit(wide, Y)


def test_warm_start_says_what_a_changed_epsilon_does():
    X, Y = _small_chains()
    model = _warm(X, Y).set_params(warm_start=True, max_iter=4, epsilon=0.5)
    with pytest.warns(UserWarning, match=r"epsilon=0.5, the earlier fit's was 0.01.*changes scale"):
        model.fit(X, Y)
    assert model.n_iter_ == 4


def test_a_continuation_without_edges_keeps_the_edge_feature_width():
    X, Y = _small_chains()
    model = _warm(X, Y).set_params(warm_start=True, max_iter=4)
    edgeless = [(x[0], np.zeros((0, 2), np.int64), np.zeros((0, 1))) for x in X]
    model.fit(edgeless, Y)
    assert model.n_edge_features_ == 1
    assert [y.shape for y in model.predict(X)] == [(4,), (5,)]   # graphs with edges are still taken


@pytest.mark.parametrize("solver", ["alternation", "joint"])
def test_three_plus_three_warm_iterations_against_six(solver):
    from slr.datasets.synthetic import make_structured

    X, Y = make_structured(n_examples=20, graph="grid", n_nodes=16, n_states=3, n_features=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        six = StructuredLogisticRegression(max_iter=6, tol=0, solver=solver, random_state=0).fit(X, Y)
        model = StructuredLogisticRegression(max_iter=3, tol=0, solver=solver, random_state=0).fit(X, Y)
        after_three = model.history_["objective"].iloc[-1]
        model.set_params(max_iter=6, warm_start=True).fit(X, Y)
    continued, uninterrupted = model.history_["objective"].iloc[-1], six.history_["objective"].iloc[-1]
    assert list(model.history_["iteration"]) == list(range(7))
    if solver == "alternation":   # the continuation is the uninterrupted fit
        assert continued == pytest.approx(uninterrupted, rel=1e-9)
    else:   # L-BFGS restarts: near six iterations (as the docstring says), below three
        assert continued < after_three and abs(continued - uninterrupted) < 0.05 * uninterrupted
