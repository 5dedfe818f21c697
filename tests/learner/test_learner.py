"""StructuredLogisticRegression: the reduction (Theorem 1.4), monotone objective, learning, API."""
import copy
import pickle

import numpy as np
import pytest
from scipy.special import logsumexp

from slr import StructuredLogisticRegression
from slr.data import GraphBatch
from slr.datasets import make_denoising
from slr.inference import batch_dual_values, batch_sweeps
from slr.learner import pairwise_bias, structured_objective, unary_bias
from slr.oracles import MLP, BoostedTrees, Constant, Linear, Zero

EPS = 0.1


@pytest.fixture(scope="module")
def tiny():
    return make_denoising(n_images=3, size=7, sigma=1.5, random_state=0)


@pytest.fixture(scope="module")
def denoise():
    """Small denoising problem on which structured learning clearly pays off."""
    train = make_denoising(n_images=2, size=60, sigma=6.0, random_state=0)
    test = make_denoising(n_images=2, size=60, sigma=6.0, random_state=1)
    return train, test


def _flat(X, Y, n_states=2):
    batch = GraphBatch.from_dataset(X, n_states)
    return (
        batch,
        np.concatenate([x[0] for x in X]),
        np.concatenate([x[2] for x in X]),
        np.concatenate(Y),
    )


def _independent_R(batch, theta_nodes, theta_edges, lam, labels, eps):
    """R from the smoothed dual values plus the energy of the truth, computed here."""
    duals = batch_dual_values(batch, theta_nodes, theta_edges, lam, eps)
    i, j = batch.edges[:, 0], batch.edges[:, 1]
    truth = theta_nodes[np.arange(len(labels)), labels].sum()
    truth += theta_edges[np.arange(len(i)), labels[i], labels[j]].sum()
    return duals.sum() - truth


# ----------------------------------------------------------------------------------------
# the reduction
# ----------------------------------------------------------------------------------------
def test_dual_value_is_the_sum_of_local_log_partitions(tiny):
    """structured_objective agrees with a direct numpy evaluation of A(lambda, theta)."""
    X, Y = tiny
    batch, _, _, labels = _flat(X, Y)
    rng = np.random.default_rng(0)
    tn = rng.normal(size=(batch.n_nodes, 2))
    te = rng.normal(size=(batch.n_edges, 2, 2))
    lam = rng.normal(size=(batch.n_edges, 2, 2))
    sums = np.zeros((batch.n_nodes, 2))
    np.add.at(sums, batch.edges[:, 0], lam[:, 0])
    np.add.at(sums, batch.edges[:, 1], lam[:, 1])
    node_b = tn - sums
    edge_b = te + lam[:, 0, :, None] + lam[:, 1, None, :]
    A = EPS * (logsumexp(node_b / EPS, axis=1).sum() + logsumexp(edge_b.reshape(-1, 4) / EPS, axis=1).sum())
    i, j = batch.edges.T
    F = tn[np.arange(len(labels)), labels].sum() + te[np.arange(len(i)), labels[i], labels[j]].sum()
    assert structured_objective(batch, tn, te, lam, labels, EPS) == pytest.approx(A - F, rel=1e-12)


def _fd_gradient(fun, w, h=1e-5):
    grad = np.zeros_like(w)
    for idx in np.ndindex(w.shape):
        step = np.zeros_like(w)
        step[idx] = h
        grad[idx] = (fun(w + step) - fun(w - step)) / (2 * h)
    return grad


def test_theorem_1_4_linear_oracle_is_stationary_for_R(tiny):
    """At fixed messages, the logistic fits on the biased problems minimise R over the weights.

    R(W) is evaluated from the smoothed dual values A(lambda, theta(W)) at the fixed
    (random) messages, not from the oracle's loss or gradient; the messages are not
    re-optimised because the theorem is about the learning step at fixed lambda.
    """
    X, Y = tiny
    batch, node_f, edge_f, labels = _flat(X, Y)
    L = 2
    rng = np.random.default_rng(1)
    lam = rng.normal(scale=0.3, size=(batch.n_edges, 2, L))
    delta = 1.0 - np.eye(L)[labels]
    pair_labels = labels[batch.edges[:, 0]] * L + labels[batch.edges[:, 1]]
    theta_edges0 = 0.2 * rng.normal(size=(batch.n_edges, L, L))

    # unary: theta_i = eps * W x_i + Delta, pairwise fixed
    unary = Linear(l2=0.0, tol=1e-11, max_iter=5000).fit(node_f, unary_bias(batch, lam, labels, EPS), labels)

    def R_unary(w):
        return _independent_R(batch, EPS * node_f @ w.T + delta, theta_edges0, lam, labels, EPS)

    g = _fd_gradient(R_unary, unary.coef_)
    g0 = _fd_gradient(R_unary, np.zeros_like(unary.coef_))
    assert np.abs(g0).max() > 1.0  # the check can fail: R is not flat at W = 0
    assert np.abs(g).max() < 1e-5 * np.abs(g0).max()
    # and it is a minimum, not just a stationary point
    w_star = unary.coef_
    for _ in range(5):
        assert R_unary(w_star + 0.05 * rng.normal(size=w_star.shape)) > R_unary(w_star)

    # pairwise: theta_e = eps * V x_e (classes a*L+b), unary fixed at the fit above
    theta_nodes = EPS * node_f @ w_star.T + delta
    pairwise = Linear(l2=0.0, tol=1e-11, max_iter=5000).fit(edge_f, pairwise_bias(lam, EPS), pair_labels)

    def R_pair(v):
        theta_edges = (EPS * edge_f @ v.T).reshape(-1, L, L)
        return _independent_R(batch, theta_nodes, theta_edges, lam, labels, EPS)

    g = _fd_gradient(R_pair, pairwise.coef_)
    g0 = _fd_gradient(R_pair, np.zeros_like(pairwise.coef_))
    assert np.abs(g0).max() > 1.0
    assert np.abs(g).max() < 1e-5 * np.abs(g0).max()


def test_wrong_bias_sign_would_not_be_stationary(tiny):
    """Guard for the test above: the bias with the message sign flipped is not the reduction."""
    X, Y = tiny
    batch, node_f, _, labels = _flat(X, Y)
    rng = np.random.default_rng(2)
    lam = rng.normal(scale=0.3, size=(batch.n_edges, 2, 2))
    delta = 1.0 - np.eye(2)[labels]
    wrong = unary_bias(batch, -lam, labels, EPS)
    unary = Linear(l2=0.0, tol=1e-11, max_iter=5000).fit(node_f, wrong, labels)
    te = np.zeros((batch.n_edges, 2, 2))
    g = _fd_gradient(lambda w: _independent_R(batch, EPS * node_f @ w.T + delta, te, lam, labels, EPS), unary.coef_)
    assert np.abs(g).max() > 1e-2


# ----------------------------------------------------------------------------------------
# the alternation
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "unary, pairwise",
    [
        (Constant(tol=1e-10), Constant(tol=1e-10)),
        (Linear(tol=1e-10), Linear(tol=1e-10)),
        (Linear(tol=1e-10), Zero()),
    ],
    ids=["constant", "linear", "linear-zero"],
)
def test_objective_never_increases(tiny, unary, pairwise):
    X, Y = tiny
    model = StructuredLogisticRegression(unary, pairwise, epsilon=EPS, max_iter=5, max_sweeps=10, n_jobs=1,
                                         solver="alternation").fit(X, Y)
    trace = model.objective_trace_
    assert len(trace) == 1 + 4 * 5
    R = trace["objective"].to_numpy()
    assert np.all(np.diff(R) <= 1e-9 * np.abs(R[:-1]))
    assert R[-1] < R[0] - 1.0
    # R at the start (lambda = 0, g = 0) in closed form: nodes eps*log(1 + e^{1/eps}), edges eps*log 4
    batch, _, _, labels = _flat(X, Y)
    R0 = batch.n_nodes * EPS * np.logaddexp(0, 1 / EPS) + batch.n_edges * EPS * np.log(4)
    assert R[0] == pytest.approx(R0, rel=1e-12)
    np.testing.assert_allclose(model.history_["objective"].to_numpy(), R[::4][: len(model.history_)])


@pytest.mark.parametrize("unary, pairwise", [(Linear(), Linear()), (Constant(), Constant())],
                         ids=["linear", "constant"])
def test_over_relaxed_steps_keep_R_monotone_and_get_further(unary, pairwise):
    """relaxation = 1.9: R never increases (a relaxed step that would raise it falls back to the
    exact fit) and after the same iterations it is lower than with exact steps; the first
    iteration (nothing to relax from) is the same."""
    X, Y = make_denoising(n_images=4, size=20, sigma=4.0, random_state=1)
    traces = {}
    for omega in (1.0, 1.9):
        model = StructuredLogisticRegression(copy.deepcopy(unary), copy.deepcopy(pairwise), max_iter=8,
                                             n_jobs=1, relaxation=omega, solver="alternation").fit(X, Y)
        R = model.objective_trace_["objective"].to_numpy()
        assert np.all(np.diff(R) <= 1e-9 * np.abs(R[:-1]))
        traces[omega] = R
    np.testing.assert_allclose(traces[1.9][:5], traces[1.0][:5], rtol=1e-12)
    assert traces[1.9][-1] < traces[1.0][-1] - 1e-6 * abs(traces[1.0][-1])


@pytest.mark.parametrize("steep, expected_w", [(1.0, 1.9), (100.0, 1.0)])
def test_relaxed_step_keeps_the_exact_fit_when_R_would_rise(steep, expected_w):
    """R(w) = (w - 1)^2 left of the fitted w = 1 and steep * (w - 1)^2 right of it; from w = 0
    (R = 1) the step to 1.9 gives .81 (kept) or 81 (the exact fit w = 1 is restored)."""
    from slr._relaxation import relaxed_step
    from slr.oracles import OracleTags

    class Oracle:
        w = np.array([1.0])

        def __slr_tags__(self):
            return OracleTags(linear_parameters=("w",))

    oracle = Oracle()
    calls = []

    def objective():
        d = float(oracle.w[0]) - 1.0
        return (steep if d > 0 else 1.0) * d * d

    value = relaxed_step(oracle, ("w",), {"w": np.array([0.0])}, 1.9, calls.append, objective, 1.0)
    assert float(oracle.w[0]) == pytest.approx(expected_w)
    assert value == pytest.approx(objective()) and value <= 1.0
    # potentials of the relaxed point (not the fitted function), then again of the exact fit
    assert calls == ([False] if expected_w != 1.0 else [False, True])


def test_relaxed_step_out_of_range_falls_back_to_the_exact_fit():
    """Potentials that cannot be formed at the relaxed point (ValueError) mean the exact fit."""
    from slr._relaxation import relaxed_step
    from slr.oracles import OracleTags

    class Oracle:
        w = np.array([1.0])

        def __slr_tags__(self):
            return OracleTags(linear_parameters=("w",))

    oracle = Oracle()

    def set_potentials(exact):
        assert exact == (oracle.w[0] == 1.0)
        if oracle.w[0] > 1.5:
            raise ValueError("scores too large")

    value = relaxed_step(oracle, ("w",), {"w": np.array([0.0])}, 1.9, set_potentials,
                          lambda: float(oracle.w[0] - 1.0) ** 2, 1.0)
    assert float(oracle.w[0]) == 1.0 and value == 0.0


def test_relaxation_leaves_other_oracles_exact(tiny):
    """Trees and MLPs are not linear in stored parameters: they take exact steps whatever omega."""
    X, Y = tiny
    fits = [StructuredLogisticRegression(BoostedTrees(n_rounds=3), MLP(n_epochs=1), max_iter=3, n_jobs=1,
                                         random_state=0, relaxation=omega).fit(X, Y) for omega in (1.0, 1.5)]
    np.testing.assert_array_equal(fits[0].objective_trace_["objective"], fits[1].objective_trace_["objective"])


def test_objective_matches_independent_recomputation(tiny):
    """history_'s final R equals R recomputed from the fitted oracles after replaying the messages."""
    X, Y = tiny
    batch, node_f, edge_f, labels = _flat(X, Y)
    model = StructuredLogisticRegression(Constant(tol=1e-10), Linear(tol=1e-10), epsilon=EPS, max_iter=1,
                                         max_sweeps=6, sweep_tol=0, n_jobs=1, solver="alternation")
    model.fit(X, Y)
    delta = 1.0 - np.eye(2)[labels]
    # replay iteration 1 by hand: the unary fit depends only on lambda = 0
    lam = np.zeros((batch.n_edges, 2, 2))
    tn = EPS * model.unary_.decision_function(node_f) + delta
    batch_sweeps(batch, tn, np.zeros((batch.n_edges, 2, 2)), EPS, max_sweeps=6, tol=1e-9, out=lam)
    te = (EPS * model.pairwise_.decision_function(edge_f)).reshape(-1, 2, 2)
    batch_sweeps(batch, tn, te, EPS, max_sweeps=6, tol=1e-9, out=lam)
    assert model.history_["objective"].iloc[-1] == pytest.approx(
        _independent_R(batch, tn, te, lam, labels, EPS), rel=1e-10
    )


# ----------------------------------------------------------------------------------------
# learning on denoising data
# ----------------------------------------------------------------------------------------
def _error(model, data):
    X, Y = data
    return 1.0 - model.score(X, Y)


def test_structured_models_beat_unary_only_and_zero_unary(denoise):
    train, test = denoise
    kw = dict(max_iter=10, n_jobs=1, random_state=0, solver="alternation")
    full = StructuredLogisticRegression(Linear(), Linear(), **kw).fit(*train, *test)
    # (both restricted models change little after a few iterations)
    kw.update(max_iter=5, monitor=False)
    unary_only = StructuredLogisticRegression(Linear(), Zero(), **kw).fit(*train)
    zero_unary = StructuredLogisticRegression(Zero(), Linear(), **kw).fit(*train)
    e_full, e_unary, e_zero = _error(full, test), _error(unary_only, test), _error(zero_unary, test)
    # unary-only cannot beat the single-pixel Bayes error (about .44 on balanced labels)
    assert e_unary > 0.38
    # with g_u = 0 the energy is symmetric under swapping the labels: no better than
    # predicting the majority label (about .50 on balanced data)
    y_test = np.concatenate(test[1])
    assert e_zero >= min(y_test.mean(), 1 - y_test.mean()) - 0.01
    print(f"test errors: full {e_full:.3f} unary-only {e_unary:.3f} zero-unary {e_zero:.3f}")
    assert e_full < 0.2
    assert e_full < min(e_unary, e_zero) - 0.15
    h = full.history_
    assert list(h.columns) == ["iteration", "objective", "train_error", "val_error", "seconds", "eval_seconds"]
    assert len(h) == 11 and h["val_error"].iloc[-1] == pytest.approx(e_full)
    assert h["train_error"].iloc[-1] < h["train_error"].iloc[1] - 0.1


def test_mlp_learns_in_a_few_iterations(denoise):
    train, test = denoise
    model = StructuredLogisticRegression(
        MLP(), MLP(learning_rate=0.05), max_iter=10, n_jobs=1, random_state=0
    ).fit(*train)
    assert _error(model, test) < 0.25
    assert model.history_["train_error"].iloc[-1] < model.history_["train_error"].iloc[1] - 0.1


# the trees' learned pairwise terms can leave the LP loose on a few images: MAP decoding says so
@pytest.mark.filterwarnings("ignore:MAP decoding stopped:sklearn.exceptions.ConvergenceWarning")
def test_boosted_trees_learn_the_denoising_data(denoise):
    """Boost/Boost (the paper's best pair) learns, and beats the single-pixel Bayes error."""
    train, test = denoise
    trees = dict(n_rounds=20, subsample=5000, random_state=0)
    model = StructuredLogisticRegression(
        BoostedTrees(**trees), BoostedTrees(**trees), max_iter=4, n_jobs=1, random_state=0
    ).fit(*train)
    error = _error(model, test)
    print(f"Boost/Boost test error {error:.3f}")
    assert error < 0.1
    # the paper's claim: the boosted pair converges fastest (one iteration is nearly enough)
    assert model.history_["train_error"].iloc[1] < 0.1


# ----------------------------------------------------------------------------------------
# API
# ----------------------------------------------------------------------------------------
def test_sklearn_params_and_oracles_are_cloned(tiny):
    X, Y = tiny
    unary = Linear(l2=0.5)
    model = StructuredLogisticRegression(unary=unary, pairwise=Constant(), max_iter=2, max_sweeps=4)
    params = model.get_params()
    assert params["unary"] is unary and params["epsilon"] == "auto" and params["unary__l2"] == 0.5
    model.fit(X, Y)
    assert not hasattr(unary, "coef_")  # the constructor argument is untouched
    assert model.unary_ is not unary and hasattr(model.unary_, "coef_")
    model.set_params(epsilon=0.2, unary__l2=1.0)
    assert model.epsilon == 0.2 and unary.l2 == 1.0
    from sklearn.base import clone

    cloned = clone(model)
    assert cloned.get_params()["epsilon"] == 0.2 and not hasattr(cloned, "unary_")


def test_defaults():
    model = StructuredLogisticRegression()
    p = model.get_params(deep=False)
    assert p["epsilon"] == "auto" and p["max_iter"] == 200 and p["max_sweeps"] == 50
    assert p["tol"] == 1e-4 and p["sweep_tol"] == 0.1 and p["relaxation"] == 1.9
    assert p["early_stopping"] == "auto" and p["validation_fraction"] == 0.1 and p["n_iter_no_change"] == 10
    assert p["predict_max_sweeps"] == 10_000 and p["n_jobs"] is None and p["verbose"] == 0
    assert p["predict_epsilon"] == 0.0 and p["unary"] is None and p["pairwise"] is None


@pytest.mark.parametrize("oracles, epsilon", [((None, None), 0.01), ((Linear(l2=1.0), Constant()), 0.01),
                                               ((MLP(n_hidden=4), Linear()), 0.1)], ids=["default", "linear", "mlp"])
def test_auto_epsilon_is_small_for_oracles_linear_in_their_parameters_only(tiny, oracles, epsilon):
    """``epsilon="auto"`` fits as .01 where both oracles are linear in their parameters, as .1 where one is not."""
    X, Y = tiny
    settings = dict(max_iter=2, tol=0, max_sweeps=4, random_state=0, n_jobs=1)
    auto = StructuredLogisticRegression(*oracles, **settings).fit(X, Y)
    given = StructuredLogisticRegression(*oracles, epsilon=epsilon, **settings).fit(X, Y)
    other = StructuredLogisticRegression(*oracles, epsilon=0.11 - epsilon, **settings).fit(X, Y)
    np.testing.assert_array_equal(auto.history_["objective"], given.history_["objective"])
    assert auto.epsilon == "auto" and auto.epsilon_ == given.epsilon_ == epsilon
    assert not np.allclose(auto.history_["objective"], other.history_["objective"])


def test_pickle_round_trip_gives_identical_predictions(tiny):
    X, Y = tiny
    model = StructuredLogisticRegression(MLP(n_hidden=8), Linear(), max_iter=2, max_sweeps=6, random_state=3)
    model.fit(X, Y)
    loaded = pickle.loads(pickle.dumps(model))
    for a, b in zip(model.predict(X), loaded.predict(X)):
        np.testing.assert_array_equal(a, b)
    assert loaded.score(X, Y) == model.score(X, Y)
    assert loaded.history_.equals(model.history_)


def test_threads_do_not_change_the_result(tiny):
    X, Y = tiny
    kw = dict(max_iter=3, max_sweeps=8, random_state=0)
    one = StructuredLogisticRegression(Linear(), Linear(), n_jobs=1, **kw).fit(X, Y)
    two = StructuredLogisticRegression(Linear(), Linear(), n_jobs=2, **kw).fit(X, Y)
    np.testing.assert_allclose(one.objective_trace_["objective"], two.objective_trace_["objective"], rtol=1e-12)


def test_random_state_makes_mlp_fits_reproducible(tiny):
    X, Y = tiny
    kw = dict(max_iter=2, max_sweeps=4, random_state=5)
    a = StructuredLogisticRegression(MLP(n_hidden=8), MLP(n_hidden=8), **kw).fit(X, Y)
    b = StructuredLogisticRegression(MLP(n_hidden=8), MLP(n_hidden=8), **kw).fit(X, Y)
    np.testing.assert_array_equal(a.history_["objective"], b.history_["objective"])


def test_predict_shapes_and_map_on_a_known_energy(tiny):
    X, Y = tiny
    model = StructuredLogisticRegression(Linear(), Linear(), max_iter=2, max_sweeps=4).fit(X, Y)
    pred = model.predict(X)
    assert [p.shape for p in pred] == [y.shape for y in Y]
    assert all(p.dtype == np.int64 and set(np.unique(p)) <= {0, 1} for p in pred)
    # with the pairwise part switched off, MAP is the per-node argmax of the unary energy
    unary_only = copy.deepcopy(model)
    unary_only._fitted_pairwise = False
    for x, p in zip(X, unary_only.predict(X)):
        np.testing.assert_array_equal(p, np.argmax(model.unary_.decision_function(x[0]), axis=1))


def test_n_states_parameter_and_verbose(tiny, capsys):
    X, Y = tiny
    model = StructuredLogisticRegression(Constant(), Constant(), max_iter=2, max_sweeps=2, n_states=3, verbose=True,
                                         solver="alternation")
    model.fit(X, Y)
    assert model.n_states_ == 3 and model.pairwise_.table_.shape == (9,)
    out = capsys.readouterr()
    lines = out.err.splitlines()
    # verbose=True is 1: one line per iteration, and why it stopped
    assert out.out == "" and len(lines) == 3
    assert lines[-1] == "[StructuredLogisticRegression] stopped after 2 iterations (max_iter)"
    for line, (_, row) in zip(lines, model.history_.iloc[1:].iterrows()):
        assert line.startswith(f"[StructuredLogisticRegression] iteration {int(row['iteration']):4d}  "
                               f"R {row['objective']:.6g}  train error {row['train_error']:.4f}")
    model.set_params(verbose=2, max_iter=1).fit(X, Y)
    trace = model.objective_trace_
    line, stop = capsys.readouterr().err.strip().split("\n")
    assert stop.endswith("(max_iter)") and line.endswith("".join(f"  {stage} {value:.6g}" for stage, value in
                                                      zip(trace["stage"][1:], trace["objective"][1:])))
    model.set_params(verbose=0).fit(X, Y)
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda X, Y: (X, Y[:-1]), "same length"),
        (lambda X, Y: (X, [Y[0] + 5] + list(Y[1:])), "labels outside"),
        (lambda X, Y: (X, [-Y[0] - 1] + list(Y[1:])), "negative"),
        (lambda X, Y: ([(X[0][0][:, :1], X[0][1], X[0][2])] + list(X[1:]), Y), "node features"),
        (lambda X, Y: ([(X[0][0], X[0][1], X[0][2][:, :1])] + list(X[1:]), Y), "edge features"),
        (lambda X, Y: ([(X[0][0], X[0][1], X[0][2][:-1])] + list(X[1:]), Y), "rows of edge_features"),
        (lambda X, Y: ([], []), "at least one"),
    ],
)
def test_input_errors(tiny, mutate, message):
    X, Y = tiny
    X2, Y2 = mutate(list(X), list(Y))
    with pytest.raises(ValueError, match=message):
        StructuredLogisticRegression(max_iter=1, max_sweeps=2, n_states=2).fit(X2, Y2)


def test_parameter_and_predict_errors(tiny):
    X, Y = tiny
    for kw in [{"epsilon": 0.0}, {"epsilon": -1}, {"max_iter": 0}, {"max_sweeps": 1.5}, {"n_jobs": 0},
               {"predict_epsilon": -0.1}, {"unary": "linear"}, {"relaxation": 2.0}, {"relaxation": 0.9}]:
        with pytest.raises(ValueError):
            StructuredLogisticRegression(**kw).fit(X, Y)
    with pytest.raises(ValueError, match="not fitted"):
        StructuredLogisticRegression().predict(X)
    with pytest.raises(ValueError, match="together"):
        StructuredLogisticRegression(max_iter=1).fit(X, Y, X_val=X)
    model = StructuredLogisticRegression(Constant(), Constant(), max_iter=1, max_sweeps=2).fit(X, Y)
    bad = [(x[0][:, :1], x[1], x[2]) for x in X]
    with pytest.raises(ValueError, match="node features"):
        model.predict(bad)
    with pytest.raises(ValueError, match="labels outside"):
        model.score(X, [y + 2 for y in Y])
