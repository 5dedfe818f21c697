"""Baselines: joint features, inference and learners against brute force, cvxpy and scikit-learn."""
import cvxpy as cp
import numpy as np
import pytest

from slr.baselines.features import StructuredData
from slr.baselines.gradient_alternation import GradientAlternation
from slr.baselines.perceptron import StructuredPerceptron
from slr.baselines.piecewise import PiecewiseTraining
from slr.baselines.ssvm import NSlackSSVM, OneSlackSSVM, SubgradientSSVM, solve_ssvm_dual
from slr.inference import viterbi
from slr.oracles import Linear

from chain_reference import brute_primal, chain_example, exact_ssvm_optimum, joint_feature, labelings, random_chains

L = 3
C = 1.0


@pytest.fixture(scope="module")
def tiny_chain():
    return random_chains(np.random.default_rng(0), 8, L)


# ------------------------------------------------------------------ independent numpy side
def _psi(x, y, n_states=L):
    return joint_feature(x, y, n_states)


def _labelings(n, n_states=L):
    return labelings(n, n_states)


def _brute_primal(w, X, Y):
    return brute_primal(w, X, Y, L, C)


@pytest.fixture(scope="module")
def exact_optimum(tiny_chain):
    return exact_ssvm_optimum(*tiny_chain, L, C)


# ------------------------------------------------------------------ features and inference
def test_joint_feature_and_potentials_match_definition(tiny_chain):
    X, Y = tiny_chain
    data = StructuredData(X, Y, L)
    rng = np.random.default_rng(1)
    w = rng.normal(size=data.size)
    per = data.joint_feature_per_example(*data.truth_marginals())
    for k, (x, y) in enumerate(zip(X, Y)):
        np.testing.assert_allclose(per[k], _psi(x, y))
    np.testing.assert_allclose(data.joint_feature(*data.truth_marginals()), per.sum(0))
    # the potentials score a labelling exactly as w . psi
    tn, te = data.potentials(w)
    y = np.concatenate(Y)
    score = tn[np.arange(len(y)), y].sum() + te[np.arange(len(data.batch.edges)),
                                              y[data.batch.edges[:, 0]], y[data.batch.edges[:, 1]]].sum()
    assert score == pytest.approx(sum(w @ _psi(x, yk) for x, yk in zip(X, Y)))


@pytest.mark.parametrize("n", [1, 2, 5])
def test_viterbi_equals_brute_force(n):
    rng = np.random.default_rng(n)
    for _ in range(5):
        tn, te = rng.normal(size=(n, 4)), rng.normal(size=(n - 1, 4, 4))
        ys = _labelings(n, 4)
        scores = [tn[np.arange(n), y].sum() + te[np.arange(n - 1), y[:-1], y[1:]].sum() for y in ys]
        np.testing.assert_array_equal(viterbi(tn, te), ys[int(np.argmax(scores))])


@pytest.mark.parametrize("model", ["chain", "lp"])
def test_loss_augmented_inference_equals_brute_force_on_chains(tiny_chain, model):
    X, Y = tiny_chain
    data = StructuredData(X, Y, L, model=model)
    w = np.random.default_rng(2).normal(size=data.size)
    node_mu, edge_mu, loss, slack = data.loss_augmented(w)
    for k, (x, y) in enumerate(zip(X, Y)):
        ys = _labelings(len(y))
        values = [(yh != y).sum() + w @ _psi(x, yh) for yh in ys]
        assert slack[k] == pytest.approx(max(values) - w @ _psi(x, y), abs=1e-7)
        best = ys[int(np.argmax(values))]
        np.testing.assert_allclose(data.split(node_mu)[k].argmax(1), best)
        assert loss[k] == pytest.approx((best != y).sum())
    assert np.all(node_mu.sum(1) == pytest.approx(1.0))


# ------------------------------------------------------------------ SSVM learners
@pytest.fixture(scope="module")
def fitted_ssvms(tiny_chain):
    X, Y = tiny_chain
    return {
        "one": OneSlackSSVM(C=C, tol=1e-6, n_states=L).fit(X, Y),
        "n": NSlackSSVM(C=C, tol=1e-6, n_states=L).fit(X, Y),
        "sub": SubgradientSSVM(C=C, max_iter=2000, log_every=100, n_states=L).fit(X, Y),
    }


@pytest.mark.parametrize("name", ["one", "n", "sub"])
def test_ssvm_lowers_primal_and_reports_it_honestly(fitted_ssvms, tiny_chain, name):
    X, Y = tiny_chain
    model = fitted_ssvms[name]
    hist = model.history_
    assert list(hist.columns) == ["iteration", "objective", "train_error", "val_error", "seconds", "eval_seconds"]
    assert hist.objective.iloc[-1] < hist.objective.iloc[0]
    # the reported primal is the true one (brute force over all labellings)
    assert model.primal_objective(X, Y) == pytest.approx(_brute_primal(model.w_, X, Y), rel=1e-9)


def test_ssvms_reach_the_exact_optimum(fitted_ssvms, tiny_chain, exact_optimum):
    X, Y = tiny_chain
    values = {name: _brute_primal(m.w_, X, Y) for name, m in fitted_ssvms.items()}
    for name, value in values.items():
        assert value >= exact_optimum * (1 - 1e-5), name
        assert value == pytest.approx(exact_optimum, rel=0.01), name
    # the cutting-plane methods converge far tighter than 1 %
    assert values["one"] == pytest.approx(exact_optimum, rel=1e-4)
    assert values["n"] == pytest.approx(exact_optimum, rel=1e-4)


def test_lp_inference_on_chain_is_close_to_exact(tiny_chain, exact_optimum):
    X, Y = tiny_chain
    model = OneSlackSSVM(C=C, tol=1e-5, model="lp", n_states=L).fit(X, Y)
    assert _brute_primal(model.w_, X, Y) == pytest.approx(exact_optimum, rel=0.01)


def test_predict_and_score(fitted_ssvms, tiny_chain):
    X, Y = tiny_chain
    model = fitted_ssvms["one"]
    W = model.w_
    pred = model.predict(X)
    for x, p in zip(X, pred):
        ys = _labelings(x[0].shape[0])
        np.testing.assert_array_equal(p, ys[int(np.argmax([W @ _psi(x, yh) for yh in ys]))])
    acc = np.mean(np.concatenate(pred) == np.concatenate(Y))
    assert model.score(X, Y) == pytest.approx(acc)


def test_bad_parameters_raise_value_error(tiny_chain):
    X, Y = tiny_chain
    with pytest.raises(ValueError, match="C"):
        OneSlackSSVM(C=-1).fit(X, Y)
    with pytest.raises(ValueError, match="model"):
        NSlackSSVM(model="grid").fit(X, Y)
    with pytest.raises(ValueError, match="averaging"):
        SubgradientSSVM(averaging="median").fit(X, Y)
    with pytest.raises(ValueError, match="not fitted"):
        OneSlackSSVM().predict(X)
    star = (np.ones((3, 3)), np.array([[0, 1], [0, 2]]), np.ones((2, 2)))
    with pytest.raises(ValueError, match="chain"):
        OneSlackSSVM(model="chain", n_states=2).fit([star], [np.zeros(3, int)])


# ------------------------------------------------------------------ perceptron
def _separable_chain_problem(n_examples=30, n_states=3, d=4, seed=3):
    """Labels are the exact MAP of a random linear chain model: separable by construction."""
    rng = np.random.default_rng(seed)
    X = [chain_example(rng, int(rng.integers(3, 7)), d=d, d_e=1) for _ in range(n_examples)]
    X = [(f, e, np.ones_like(ef)) for f, e, ef in X]
    data = StructuredData(X, None, n_states)
    w_true = 3 * rng.normal(size=data.size)
    Y = data.split(data.decode(*data.potentials(w_true)))
    return X, Y


@pytest.mark.parametrize("average", [False, True])
def test_perceptron_separates_separable_chains(average):
    X, Y = _separable_chain_problem()
    model = StructuredPerceptron(max_iter=200, average=average, random_state=0, n_states=3).fit(X, Y)
    assert model.n_mistakes_[0] > 0
    assert model.score(X, Y) == 1.0
    assert model.history_.train_error.iloc[-1] == 0.0
    if not average:
        assert model.n_mistakes_[-1] == 0  # a clean epoch is what stopped it


# ------------------------------------------------------------------ piecewise training
def test_piecewise_linear_equals_independent_sklearn_logistic_regressions():
    from sklearn.linear_model import LogisticRegression

    X, Y = random_chains(np.random.default_rng(4), 25, 3, lengths=(4, 9))  # >2 classes: sklearn goes multinomial
    l2 = 0.5
    model = PiecewiseTraining(Linear(l2=l2, tol=1e-10, max_iter=2000),
                              Linear(l2=l2, tol=1e-10, max_iter=2000), n_states=3).fit(X, Y)
    nodes = np.concatenate([x[0] for x in X])
    y_nodes = np.concatenate(Y)
    edge_feats = np.concatenate([x[2] for x in X])
    y_pairs = np.concatenate([y[x[1][:, 0]] * 3 + y[x[1][:, 1]] for x, y in zip(X, Y)])
    assert len(np.unique(y_pairs)) == 9  # every pair class present, so the models coincide
    for oracle, feats, labels in ((model.unary_, nodes, y_nodes), (model.pairwise_, edge_feats, y_pairs)):
        ref = LogisticRegression(C=1.0 / l2, fit_intercept=False, tol=1e-12, max_iter=10000)
        ref.fit(feats, labels)
        np.testing.assert_allclose(oracle.decision_function(feats), ref.decision_function(feats), atol=1e-5)
    # prediction: Viterbi on the two pieces' scores
    data, tn, te = model.decision_potentials(X)
    np.testing.assert_allclose(te.reshape(-1, 9), model.pairwise_.decision_function(edge_feats))
    for x, p, k in zip(X, model.predict(X), range(len(X))):
        n = x[0].shape[0]
        ys = _labelings(n, 3)
        tn_k, te_k = data.split(tn)[k], te[data.batch.edge_ptr[k]:data.batch.edge_ptr[k + 1]]
        scores = [tn_k[np.arange(n), y].sum() + te_k[np.arange(n - 1), y[:-1], y[1:]].sum() for y in ys]
        np.testing.assert_array_equal(p, ys[int(np.argmax(scores))])


# ------------------------------------------------------------------ gradient alternation
def _grid_problem(seed=5, n_examples=4, side=3, n_states=2):
    from slr.graph import grid_edges

    rng = np.random.default_rng(seed)
    edges = grid_edges(side, side)
    X = [(rng.normal(size=(side * side, 2)), edges, rng.normal(size=(len(edges), 2)))
         for _ in range(n_examples)]
    Y = [rng.integers(0, n_states, size=side * side) for _ in range(n_examples)]
    return X, Y


def test_gradient_alternation_objective_never_increases_and_gradient_is_exact():
    X, Y = _grid_problem()
    model = GradientAlternation(epsilon=0.5, l2=0.1, max_iter=30, sweeps_per_round=3, log_every=10).fit(X, Y)
    R = model.history_.objective.to_numpy()
    assert np.all(np.diff(R) <= 1e-9 * np.abs(R[:-1]))
    assert R[-1] < 0.9 * R[0]
    assert R[-1] >= 0  # R >= Delta(y, y) = 0
    # the gradient at fixed messages against central finite differences of R
    data = StructuredData(X, Y, 2)
    rng = np.random.default_rng(0)
    w = rng.normal(size=data.size)
    lam = rng.normal(size=model.messages_.shape)
    grad = model.gradient(data, w, lam)
    h = 1e-6
    for j in range(data.size):
        e = np.zeros(data.size)
        e[j] = h
        fd = (model.objective(data, w + e, lam) - model.objective(data, w - e, lam)) / (2 * h)
        assert grad[j] == pytest.approx(fd, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("n_constraints,size", [(60, 5), (10, 40)])
@pytest.mark.parametrize("C", [0.7, np.array([0.7, 0.2, 1.5, 0.05])], ids=["one cap", "a cap per group"])
def test_ssvm_dual_qp_matches_the_primal_working_set_qp(n_constraints, size, C):
    """Both forms of the dual (few features: w as a variable; else the Gram matrix) against
    the primal QP ``min 0.5 ||w||^2 + sum_g C_g xi_g`` over the same working set, solved by
    cvxpy (the dual goes to Clarabel directly)."""
    rng = np.random.default_rng(n_constraints)
    D = rng.normal(size=(n_constraints, size))
    delta = rng.uniform(0.5, 3.0, n_constraints)
    groups = rng.integers(0, 4, n_constraints)
    groups[:4] = np.arange(4)
    alpha = solve_ssvm_dual(D, delta, groups, C)
    assert np.all(alpha >= 0)
    assert np.all(np.bincount(groups, weights=alpha) <= C + 1e-6)
    dual = alpha @ delta - 0.5 * np.sum((D.T @ alpha) ** 2)
    w, xi = cp.Variable(size), cp.Variable(4, nonneg=True)
    primal = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + cp.sum(cp.multiply(C, xi))),
                        [xi[groups] >= delta - D @ w])
    primal.solve()
    assert dual == pytest.approx(primal.value, rel=1e-5)
    np.testing.assert_allclose(D.T @ alpha, w.value, atol=1e-4)
