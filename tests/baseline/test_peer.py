"""The pystruct 0.3.2 peer: environment, runner and client, checked against numpy/cvxpy.

The peer environment is built on first use (about 40 s, cached in ``$SLR_PEER_ENV`` or
``~/.cache/slr/pystruct-peer``). Tests that need it are marked ``peer`` and skipped where
no CPython 3.6 exists, or when ``SLR_SKIP_PEER=1``.
"""
import itertools
import subprocess
import sys
from pathlib import Path

import cvxpy as cp
import numpy as np
import pytest

from slr.baselines.peer import (
    PeerRunError,
    PeerUnavailableError,
    peer_available,
    run_peer,
    unpack_weights,
)
from slr.baselines.peer import setup_env
from chain_reference import random_chains

REPO = Path(__file__).resolve().parents[2]
L = 3
C = 1.0


@pytest.fixture(scope="module")
def tiny_chain():
    rng = np.random.default_rng(0)
    X, Y = random_chains(rng, 8, L, d_e=None)
    X_test, Y_test = random_chains(rng, 5, L, d_e=None)
    return X, Y, X_test, Y_test


# ------------------------------------------------------------------ independent numpy side
def _psi(x, y, n_states=L):
    """Joint feature: node features summed per label, then transition counts (pystruct order)."""
    feats = x[0]
    unary = np.zeros((n_states, feats.shape[1]))
    np.add.at(unary, y, feats)
    pair = np.zeros((n_states, n_states))
    np.add.at(pair, (y[:-1], y[1:]), 1.0)
    return np.concatenate([unary.ravel(), pair.ravel()])


def _labelings(n, n_states=L):
    return np.array(list(itertools.product(range(n_states), repeat=n)))


def _brute_primal(w, X, Y):
    """0.5 ||w||^2 + C sum_k max_y [Hamming(y_k, y) + w.psi(y)] - w.psi(y_k), by enumeration."""
    total = 0.5 * w @ w
    for x, y in zip(X, Y):
        ys = _labelings(len(y))
        scores = [(yh != y).sum() + w @ _psi(x, yh) for yh in ys]
        total += C * max(0.0, max(scores) - w @ _psi(x, y))
    return total


def _brute_map(w, x, n_states=L):
    ys = _labelings(x[0].shape[0], n_states)
    return ys[int(np.argmax([w @ _psi(x, yh, n_states) for yh in ys]))]


def _exact_ssvm_optimum(X, Y):
    """The n-slack SSVM QP with every labeling as a constraint, solved by cvxpy."""
    w = cp.Variable(len(_psi(X[0], Y[0])))
    xi = cp.Variable(len(X), nonneg=True)
    constraints = []
    for k, (x, y) in enumerate(zip(X, Y)):
        ys = _labelings(len(y))
        dpsi = np.array([_psi(x, y) - _psi(x, yh) for yh in ys])
        constraints.append(xi[k] >= (ys != y).sum(axis=1) - dpsi @ w)
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + C * cp.sum(xi)), constraints)
    problem.solve()
    return problem.value


@pytest.fixture(scope="module")
def exact_optimum(tiny_chain):
    X, Y, _, _ = tiny_chain
    return _exact_ssvm_optimum(X, Y)


# ------------------------------------------------------------------ tests needing the peer
@pytest.mark.peer
def test_one_slack_chain_matches_independent_computation(peer_env, tiny_chain, exact_optimum):
    X, Y, X_test, Y_test = tiny_chain
    res = run_peer("OneSlackSSVM", X, Y, X_test, Y_test, model="chain", n_states=L,
                   params={"C": C, "tol": 1e-6})
    w = res["w"]
    assert w.shape == (L * 3 + L * L,)
    # pystruct's objective at its weights equals ours, recomputed by enumeration
    ours = _brute_primal(w, X, Y)
    assert res["primal_objective"] == pytest.approx(ours, rel=1e-9)
    assert res["primal_objective_exact"] == pytest.approx(ours, rel=1e-9)
    assert res["primal_objective_curve"][-1] == pytest.approx(ours, rel=1e-9)
    # ... and reaches the exact optimum of the SSVM QP (cvxpy over all labelings)
    assert ours >= exact_optimum * (1 - 1e-4)
    assert ours == pytest.approx(exact_optimum, rel=1e-3)
    # accuracies and predictions agree with brute-force MAP under the returned weights
    pred_train = [_brute_map(w, x) for x in X]
    pred_test = [_brute_map(w, x) for x in X_test]
    for ours_y, theirs_y in zip(pred_test, res["y_pred_test"]):
        np.testing.assert_array_equal(ours_y, theirs_y)
    n_train = sum(len(y) for y in Y)
    n_test = sum(len(y) for y in Y_test)
    assert res["train_accuracy"] == pytest.approx(
        sum((p == y).sum() for p, y in zip(pred_train, Y)) / n_train)
    assert res["test_accuracy"] == pytest.approx(
        sum((p == y).sum() for p, y in zip(pred_test, Y_test)) / n_test)
    assert res["fit_seconds"] > 0
    assert res["versions"]["pystruct"] == "0.3.2"


@pytest.mark.peer
def test_edge_feature_graph_path_reaches_same_optimum(peer_env, tiny_chain, exact_optimum):
    """EdgeFeatureGraphCRF with a constant edge feature is the chain model (other data path)."""
    X, Y, _, _ = tiny_chain
    res = run_peer("NSlackSSVM", X, Y, model="edge_feature_graph", n_states=L,
                   params={"C": C, "tol": 1e-6},
                   model_params={"inference_method": "max-product"})
    parts = unpack_weights(res)
    assert parts["unary"].shape == (L, 3) and parts["pairwise"].shape == (1, L, L)
    assert res["primal_objective"] == pytest.approx(_brute_primal(res["w"], X, Y), rel=1e-9)
    assert res["primal_objective"] == pytest.approx(exact_optimum, rel=1e-3)
    assert res["test_accuracy"] is None


@pytest.mark.peer
@pytest.mark.parametrize("learner", ["OneSlackSSVM", "NSlackSSVM", "FrankWolfeSSVM", "SubgradientSSVM"])
def test_primal_objective_is_pystructs_objective_at_the_returned_weights(peer_env, tiny_chain, learner):
    """The runner reads the primal each learner's fit computes last instead of computing it again:
    it must be the objective at the weights returned, for a fit its budget stops too."""
    X, Y, _, _ = tiny_chain
    res = run_peer(learner, X, Y, model="chain", n_states=L, params={"C": C, "max_iter": 3})
    assert res["primal_objective"] == pytest.approx(_brute_primal(res["w"], X, Y), rel=1e-9)


@pytest.mark.peer
def test_training_labels_need_not_use_every_state(peer_env, tiny_chain):
    """pystruct's own initialize() would refuse this; the runner sizes the model itself."""
    X, _, _, _ = tiny_chain
    Y = [np.array([i % 2 for i in range(x[0].shape[0])]) for x in X]  # states 0 and 1 only
    res = run_peer("StructuredPerceptron", X, Y, n_states=4, params={"max_iter": 3})
    assert res["w"].shape == (4 * 3 + 16,)
    assert res["primal_objective"] is None  # the perceptron has no C and no objective
    pred = [_brute_map(res["w"], x, n_states=4) for x in X]
    correct = sum((p == y).sum() for p, y in zip(pred, Y))
    assert res["train_accuracy"] == pytest.approx(correct / sum(len(y) for y in Y))


@pytest.mark.peer
def test_pystruct_errors_surface_as_peer_run_error(peer_env, tiny_chain):
    X, Y, _, _ = tiny_chain
    with pytest.raises(PeerRunError, match="no_such_parameter"):
        run_peer("OneSlackSSVM", X, Y, n_states=L, params={"no_such_parameter": 1})


# ------------------------------------------------------------------ tests without the peer
def test_bad_arguments_raise_value_error(tiny_chain):
    X, Y, _, _ = tiny_chain
    with pytest.raises(ValueError, match="learner"):
        run_peer("SVM", X, Y, n_states=L)
    with pytest.raises(ValueError, match="model"):
        run_peer("OneSlackSSVM", X, Y, model="grid", n_states=L)
    with pytest.raises(ValueError, match="Y_train"):
        run_peer("OneSlackSSVM", X, [y + L for y in Y], n_states=L)
    with pytest.raises(ValueError, match="X_test and Y_test"):
        run_peer("OneSlackSSVM", X, Y, X, n_states=L)
    star = (np.ones((3, 3)), np.array([[0, 1], [0, 2]]), np.ones((2, 1)))
    with pytest.raises(ValueError, match="chain"):
        run_peer("OneSlackSSVM", [star], [np.zeros(3, int)], model="chain", n_states=L)
    with pytest.raises(ValueError, match="params"):
        run_peer("OneSlackSSVM", X, Y, n_states=L, params={"C": object()})


def test_missing_env_raises_clear_error(tmp_path, monkeypatch, tiny_chain):
    monkeypatch.setenv("SLR_PEER_ENV", str(tmp_path / "nothing-here"))
    assert not peer_available()
    X, Y, _, _ = tiny_chain
    with pytest.raises(PeerUnavailableError, match="setup_env"):
        run_peer("OneSlackSSVM", X, Y, n_states=L)


def test_setup_env_exits_with_status_3_without_python36(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYENV_ROOT": str(tmp_path / "no"),
           "SLR_PEER_ENV": str(tmp_path / "peer")}
    proc = subprocess.run([sys.executable, "-m", "slr.baselines.peer.setup_env"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == setup_env.EXIT_NO_PYTHON36 == 3
    assert "no CPython 3.6" in proc.stderr
    assert not (tmp_path / "peer").exists()


def test_snakes_reach_the_runner_as_they_are(tmp_path):
    """The snakes' grids (180 edge columns, 11 states) go through the client's packing and the
    runner's reading (the Python 3.6 side's own code, run here) unchanged, image by image."""
    import importlib.util

    from slr.baselines.peer.client import RUNNER, _check_split, _pack
    from slr.datasets.snakes import load_snakes

    X, Y, X_test, Y_test = load_snakes(edge_features="input_by_direction", crop=True)
    X, Y, X_test, Y_test = X[:7], Y[:7], X_test[:5], Y_test[:5]
    dims = _check_split(X, Y, 11, "train", None, chain=False)
    assert dims == (45, 180)
    _check_split(X_test, Y_test, 11, "test", dims, chain=False)
    np.savez(tmp_path / "problem.npz", **_pack(X, Y, "train"), **_pack(X_test, Y_test, "test"))
    spec = importlib.util.spec_from_file_location("peer_runner", RUNNER)
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    data = np.load(tmp_path / "problem.npz", allow_pickle=False)
    for prefix, (sent_X, sent_Y) in (("train", (X, Y)), ("test", (X_test, Y_test))):
        got_X, got_Y = runner._read_split(data, prefix)
        assert len(got_X) == len(sent_X) and len(got_Y) == len(sent_Y)
        for (nodes, edges, on_edges), y, sent, sent_y in zip(got_X, got_Y, sent_X, sent_Y):
            for got, expected in zip((nodes, edges, on_edges, y), (*sent, sent_y)):
                assert got.dtype == np.asarray(expected).dtype
                np.testing.assert_array_equal(got, expected)
