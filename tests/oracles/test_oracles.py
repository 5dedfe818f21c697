"""Tests of the logistic oracles Zero, Constant, Linear and MLP against independent computations."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.linear_model import LogisticRegression

import slr.oracles.linear as linear_module
from slr.oracles.base import biased_logistic_loss
from slr.oracles.linear import Linear, _ClassMajorLoss
from slr.oracles.mlp import MLP
from slr.oracles.simple import Constant, Zero


def make_problem(n=400, d=3, k=3, bias_scale=0.0, seed=0):
    """Noisy linear multiclass data (not separable, so the unpenalised optimum is finite)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    w = rng.normal(size=(k, d))
    y = np.array([rng.choice(k, p=p) for p in softmax(x @ w.T, axis=1)])
    bias = bias_scale * rng.normal(size=(n, k))
    return x, bias, y


def objective(coef, x, bias, y, l2, intercept=None):
    """The penalised objective, written independently with the row-major reference loss."""
    scores = x @ coef.T + (0.0 if intercept is None else intercept)
    return biased_logistic_loss(scores, bias, y)[0] + 0.5 * l2 * np.sum(coef**2)


def numerical_gradient(f, theta, h=1e-5):
    grad = np.zeros_like(theta)
    for i in range(theta.size):
        step = np.zeros_like(theta)
        step.flat[i] = h
        grad.flat[i] = (f(theta + step) - f(theta - step)) / (2 * h)
    return grad


# --- Linear ----------------------------------------------------------------------------------
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_linear_matches_sklearn_multinomial(fit_intercept):
    x, bias, y = make_problem(n=500, d=4, k=3)
    l2 = 0.5
    ours = Linear(l2=l2, fit_intercept=fit_intercept, tol=1e-10).fit(x, bias, y)
    ref = LogisticRegression(C=1.0 / l2, fit_intercept=fit_intercept, tol=1e-12, max_iter=10_000)
    ref.fit(x, y)
    assert ref.coef_.shape == (3, 4)  # multinomial
    np.testing.assert_allclose(ours.coef_, ref.coef_, atol=1e-4)
    if fit_intercept:
        # sklearn's multinomial intercept is centred; ours is determined only up to a shift
        np.testing.assert_allclose(
            ours.intercept_ - ours.intercept_.mean(), ref.intercept_ - ref.intercept_.mean(),
            atol=1e-4,
        )
    ref_scores = ref.decision_function(x)
    ref_loss = biased_logistic_loss(ref_scores, bias, y)[0]
    assert ours.loss(x, bias, y) == pytest.approx(ref_loss, rel=1e-7)


def test_linear_binary_matches_sklearn_binomial():
    # With K = 2 the penalised softmax solution is W = (w/2, -w/2) up to order, and
    # 0.5*l2*(2*||w/2||^2) = 0.25*l2*||w||^2: the binomial problem with C = 2 / l2.
    x, bias, y = make_problem(n=500, d=3, k=2, seed=1)
    l2 = 0.8
    ours = Linear(l2=l2, tol=1e-10).fit(x, bias, y)
    ref = LogisticRegression(C=2.0 / l2, fit_intercept=False, tol=1e-12, max_iter=10_000)
    ref.fit(x, y)
    np.testing.assert_allclose(ours.coef_[1] - ours.coef_[0], ref.coef_[0], atol=1e-4)


def test_linear_with_bias_is_stationary_by_finite_differences():
    x, bias, y = make_problem(n=300, d=3, k=4, bias_scale=2.0, seed=2)
    l2 = 0.3
    est = Linear(l2=l2, fit_intercept=True).fit(x, bias, y)
    k, d = est.coef_.shape
    theta = np.concatenate([est.coef_.ravel(), est.intercept_])

    def f(t):
        return objective(t[: k * d].reshape(k, d), x, bias, y, l2, t[k * d:])

    grad = numerical_gradient(f, theta)
    assert np.max(np.abs(grad)) / len(y) < 1e-5
    # ...whereas it is not stationary for the same problem without the bias
    f0 = lambda t: objective(t[: k * d].reshape(k, d), x, 0 * bias, y, l2, t[k * d:])  # noqa: E731
    assert np.max(np.abs(numerical_gradient(f0, theta))) / len(y) > 1e-2


def test_linear_bias_linear_in_features_shifts_the_solution_exactly():
    # If b_k = A x_k then g = W x + A x, so the optimum over W moves by exactly -A
    # (up to adding one vector to every row, which softmax ignores when l2 = 0).
    x, bias0, y = make_problem(n=600, d=3, k=3, seed=3)
    a = 3.0 * np.random.default_rng(4).normal(size=(3, 3))
    plain = Linear(tol=1e-10).fit(x, bias0, y)
    biased = Linear(tol=1e-10).fit(x, x @ a.T, y)
    def centred(w):
        return w - w.mean(axis=0)

    np.testing.assert_allclose(centred(biased.coef_), centred(plain.coef_ - a), atol=1e-4)
    assert np.max(np.abs(centred(biased.coef_ - plain.coef_))) > 1.0  # the bias matters


@pytest.mark.parametrize("k, d, block", [(3, 2, 64), (7, 2, 100), (30, 2, 1 << 16), (2, 6, 64)])
def test_class_major_kernel_agrees_with_reference_loss(monkeypatch, k, d, block):
    # fewer classes than columns (k=2, d=6) takes the per-class rank updates of the Hessian blocks
    monkeypatch.setattr(linear_module, "_BLOCK_ELEMENTS", block)  # several ragged blocks
    x, bias, y = make_problem(n=257, d=d, k=k, bias_scale=5.0, seed=k)
    rng = np.random.default_rng(5)
    coef = rng.normal(size=(k, d + 1))  # last column: intercept
    problem = _ClassMajorLoss(x, bias, y, fit_intercept=True)
    loss, grad = problem(coef)
    ref_loss, ref_grad = biased_logistic_loss(x @ coef[:, :d].T + coef[:, d], bias, y)
    assert loss == pytest.approx(ref_loss, rel=1e-12)
    np.testing.assert_allclose(grad[:, :d], ref_grad.T @ x, atol=1e-9)
    np.testing.assert_allclose(grad[:, d], ref_grad.sum(axis=0), atol=1e-9)
    # diagonal Hessian blocks: sum_k p(1-p) x x^T with x = (x_k, 1)
    p = softmax(x @ coef[:, :d].T + coef[:, d] + bias, axis=1)
    xa = np.column_stack([x, np.ones(len(y))])
    ref_blocks = np.einsum("nk,na,nb->kab", p * (1 - p), xa, xa)
    np.testing.assert_allclose(problem.hessian_blocks(coef), ref_blocks, atol=1e-9)


@pytest.mark.parametrize("indefinite", [False, True])
def test_preconditioner_whitens_the_hessian_blocks(indefinite):
    """M^T (B + floor I) M = I, M^-1 is M's inverse and the eigenvalue estimate is B's largest; a
    block that is not positive definite beyond the floor takes the eigendecomposition, which
    treats its negative eigenvalues as 0."""
    rng = np.random.default_rng(3)
    a = rng.normal(size=(4, 5, 12))
    blocks = a @ a.transpose(0, 2, 1)   # positive definite
    blocks[2] = np.outer(a[2, :, 0], a[2, :, 0])   # rank one: positive semidefinite
    floor = 1e-6
    if indefinite:
        blocks[1] -= 2e-6 * np.eye(5) + blocks[1]   # eigenvalues -2e-6
    scale, unscale, largest = linear_module._preconditioner(blocks, floor)
    values, vectors = np.linalg.eigh(blocks)
    clipped = (vectors * np.maximum(values, 0.0)[:, None, :]) @ vectors.transpose(0, 2, 1)
    whitened = scale.transpose(0, 2, 1) @ (clipped + floor * np.eye(5)) @ scale
    np.testing.assert_allclose(whitened, np.broadcast_to(np.eye(5), whitened.shape), atol=1e-7)
    np.testing.assert_allclose(scale @ unscale, np.broadcast_to(np.eye(5), scale.shape), atol=1e-9)
    assert largest == pytest.approx(values.max(), rel=1e-6)


def test_linear_converges_with_many_rare_classes():
    # 200 classes with Zipf-like frequencies: plain L-BFGS crawls here (see the class docstring)
    rng = np.random.default_rng(16)
    n, k = 3000, 200
    y = np.minimum(rng.zipf(1.3, size=n) - 1, k - 1)
    y[:k] = np.arange(k)  # every class occurs, so the bounded optimum exists with l2 > 0
    x = np.column_stack([rng.uniform(size=n), np.ones(n)])
    bias = np.zeros((n, k))
    est = Linear(l2=1.0, tol=1e-8, max_iter=400).fit(x, bias, y)
    assert est.converged_
    _, ref_grad = biased_logistic_loss(x @ est.coef_.T, bias, y)
    assert np.max(np.abs(ref_grad.T @ x + 1.0 * est.coef_)) / n < 1e-7


def test_linear_warm_start_refit_is_cheap_and_never_worse():
    x, bias, y = make_problem(n=400, d=3, k=3, bias_scale=1.0, seed=6)
    est = Linear(l2=0.1).fit(x, bias, y)
    first_iters, first_loss = est.n_iter_, est.loss(x, bias, y)
    est.fit(x, bias, y)
    assert est.n_iter_ <= 2 < first_iters
    assert est.loss(x, bias, y) <= first_loss + 1e-9
    # one iteration on a new bias starts from the old solution and cannot increase the objective
    new_bias = bias + np.random.default_rng(7).normal(size=bias.shape)
    before = objective(est.coef_, x, new_bias, y, 0.1)
    est.max_iter = 1
    est.fit(x, new_bias, y)
    assert objective(est.coef_, x, new_bias, y, 0.1) <= before


def test_linear_shape_change_resets_the_state():
    x, bias, y = make_problem(k=3)
    est = Linear().fit(x, bias, y)
    x2, bias2, y2 = make_problem(k=5, d=2, seed=8)
    est.fit(x2, bias2, y2)
    assert est.coef_.shape == (5, 2)
    np.testing.assert_allclose(est.coef_, Linear().fit(x2, bias2, y2).coef_)


# --- Zero and Constant -----------------------------------------------------------------------
def test_zero_scores_and_loss():
    x, bias, y = make_problem(n=50, k=4)
    est = Zero().fit(x, bias, y)
    assert np.array_equal(est.decision_function(x), np.zeros((50, 4)))
    assert est.loss(x, bias, y) == pytest.approx(50 * np.log(4))


def test_constant_closed_form_matches_class_frequencies():
    x, bias, y = make_problem(n=300, k=4, seed=9)
    est = Constant().fit(x, bias, y)
    freq = np.bincount(y, minlength=4) / len(y)
    np.testing.assert_allclose(softmax(est.table_), freq, atol=1e-12)
    # the same optimum found iteratively by Linear on a constant feature (centred table)
    via_linear = Linear(tol=1e-10).fit(np.ones((len(y), 1)), bias, y)
    np.testing.assert_allclose(est.table_, via_linear.coef_[:, 0], atol=1e-6)
    # identical bias rows are absorbed: softmax(g + b) still matches the frequencies
    shift = np.array([3.0, -1.0, 0.5, 2.0])
    est2 = Constant().fit(x, np.tile(shift, (len(y), 1)), y)
    np.testing.assert_allclose(softmax(est2.table_ + shift), freq, atol=1e-12)


@pytest.mark.parametrize("l2", [0.0, 2.0])
def test_constant_with_bias_equals_linear_on_constant_feature(l2):
    x, bias, y = make_problem(n=300, k=4, bias_scale=2.0, seed=10)
    est = Constant(l2=l2).fit(x, bias, y)
    ref = Linear(l2=l2, tol=1e-10).fit(np.ones((len(y), 1)), bias, y)
    np.testing.assert_allclose(est.table_, ref.coef_[:, 0], atol=1e-6)
    np.testing.assert_allclose(est.decision_function(x[:5]), np.tile(est.table_, (5, 1)))
    # stationarity of the independent objective
    grad = numerical_gradient(lambda g: objective(g[:, None], np.ones((len(y), 1)), bias, y, l2),
                              est.table_)
    assert np.max(np.abs(grad)) / len(y) < 1e-6
    # a refit from the solution stays there
    est.fit(x, bias, y)
    np.testing.assert_allclose(est.table_, ref.coef_[:, 0], atol=1e-6)


# --- MLP -------------------------------------------------------------------------------------
def xor_problem(n=2000, seed=11):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(n, 2))
    y = (x[:, 0] * x[:, 1] > 0).astype(int)
    return x, np.zeros((n, 2)), y


def test_mlp_is_reproducible_with_a_seed():
    x, bias, y = xor_problem(n=500)
    a = MLP(n_hidden=10, n_epochs=3, random_state=0).fit(x, bias, y).fit(x, bias, y)
    b = MLP(n_hidden=10, n_epochs=3, random_state=0).fit(x, bias, y).fit(x, bias, y)
    c = MLP(n_hidden=10, n_epochs=3, random_state=1).fit(x, bias, y).fit(x, bias, y)
    assert np.array_equal(a.decision_function(x), b.decision_function(x))
    assert not np.allclose(a.decision_function(x), c.decision_function(x))
    g1 = MLP(n_hidden=10, n_epochs=3, random_state=np.random.default_rng(5)).fit(x, bias, y)
    g2 = MLP(n_hidden=10, n_epochs=3, random_state=np.random.default_rng(5)).fit(x, bias, y)
    assert np.array_equal(g1.params_, g2.params_)


def test_mlp_learns_xor_where_linear_cannot():
    x, bias, y = xor_problem()
    linear_loss = Linear(fit_intercept=True).fit(x, bias, y).loss(x, bias, y)
    assert linear_loss > 0.95 * len(y) * np.log(2)  # no better than chance
    est = MLP(n_hidden=20, n_epochs=5, random_state=0)
    losses = [est.fit(x, bias, y).loss(x, bias, y) for _ in range(6)]
    assert losses[-1] < losses[0]
    assert losses[-1] < 0.4 * linear_loss
    assert est.n_iter_ == 6 * 5 * 20


def _forward64(params64, est, x):
    """Independent float64 forward pass from a flat parameter vector."""
    v, c, w, e = est._split(params64)
    return np.tanh(x @ v.T + c) @ w.T + e


def test_mlp_sgd_step_follows_backprop_and_momentum_rule():
    # Full-batch steps: step_t = m*step_{t-1} + (1-m)*mean_grad, params -= eta*step_t,
    # with mean_grad checked against finite differences of the biased loss.
    rng = np.random.default_rng(12)
    n = 40
    x = rng.normal(size=(n, 2))
    bias = 2.0 * rng.normal(size=(n, 3))
    y = rng.integers(0, 3, size=n)
    est = MLP(n_hidden=5, n_epochs=0, batch_size=n, learning_rate=0.5, momentum=0.3,
              random_state=0, standardize=False).fit(x, bias, y)
    p0 = est.params_.astype(np.float64)

    def mean_grad(p):
        return numerical_gradient(
            lambda t: biased_logistic_loss(_forward64(t, est, x), bias, y)[0] / n, p, h=1e-6)

    est.n_epochs = 1
    est.fit(x, bias, y)
    step1 = 0.7 * mean_grad(p0)
    p1 = p0 - 0.5 * step1
    np.testing.assert_allclose(est.params_, p1, atol=2e-5)
    step2 = 0.3 * step1 + 0.7 * mean_grad(est.params_.astype(np.float64))
    est.fit(x, bias, y)
    np.testing.assert_allclose(est.params_, p1 - 0.5 * step2, atol=5e-5)
    np.testing.assert_allclose(est.decision_function(x), _forward64(est.params_.astype(np.float64),
                                                                     est, x), atol=1e-5)


def test_mlp_standardisation_is_a_reparametrisation():
    rng = np.random.default_rng(15)
    x = np.column_stack([rng.uniform(0, 0.2, 300), 5 + 3 * rng.normal(size=300), np.ones(300)])
    bias = rng.normal(size=(300, 3))
    y = rng.integers(0, 3, 300)
    auto = MLP(n_hidden=6, n_epochs=2, random_state=0).fit(x, bias, y)
    scaled = x.copy()
    scaled[:, :2] = (x[:, :2] - x[:, :2].mean(axis=0)) / x[:, :2].std(axis=0)
    manual = MLP(n_hidden=6, n_epochs=2, random_state=0, standardize=False).fit(scaled, bias, y)
    np.testing.assert_allclose(auto.params_, manual.params_, atol=1e-5)
    np.testing.assert_allclose(auto.decision_function(x), manual.decision_function(scaled),
                               atol=1e-5)
    assert auto.input_scale_[2] == 1.0 and auto.input_mean_[2] == 0.0  # constant kept


def test_mlp_uses_the_bias():
    # Labels fully explained by a strong bias: the MLP should learn scores that barely
    # change the already low loss, while fitting the same labels without bias is hard.
    x, _, y = xor_problem(n=1000, seed=13)
    rng = np.random.default_rng(14)
    x_noise = rng.uniform(-1, 1, size=x.shape)  # features carry no information
    bias = np.where(np.eye(2, dtype=bool)[y], 5.0, 0.0)
    est = MLP(n_hidden=10, n_epochs=3, random_state=0).fit(x_noise, bias, y)
    assert est.loss(x_noise, bias, y) < 0.05 * len(y)
    without = MLP(n_hidden=10, n_epochs=3, random_state=0).fit(x_noise, 0 * bias, y)
    assert without.loss(x_noise, 0 * bias, y) > 0.6 * len(y)


# --- common behaviour ------------------------------------------------------------------------
ORACLES = [
    lambda: Zero(),
    lambda: Constant(l2=0.1),
    lambda: Linear(l2=0.1, fit_intercept=True),
    lambda: MLP(n_hidden=4, n_epochs=1, random_state=0),
]


@pytest.mark.parametrize("make", ORACLES)
def test_bad_input_raises_value_error(make):
    x, bias, y = make_problem(n=30, d=3, k=3)
    est = make()
    with pytest.raises(ValueError, match="not fitted"):
        est.decision_function(x)
    bad_x = x.copy()
    bad_x[3, 1] = np.nan
    with pytest.raises(ValueError, match="features"):
        est.fit(bad_x, bias, y)
    with pytest.raises(ValueError, match="bias"):
        est.fit(x, bias[:, :2].ravel(), y)
    with pytest.raises(ValueError, match="rows"):
        est.fit(x, bias[:-1], y)
    with pytest.raises(ValueError, match="labels"):
        est.fit(x, bias, np.where(y == 0, 3, y))
    with pytest.raises(ValueError, match="labels"):
        est.fit(x, bias, y - 1)
    est.fit(x, bias, y)
    with pytest.raises(ValueError, match="features"):
        est.decision_function(x[:, :2])
    with pytest.raises(ValueError, match="features"):
        est.decision_function(bad_x)


@pytest.mark.parametrize(
    "est, name",
    [(Constant(l2=-1.0), "l2"), (Linear(tol=0.0), "tol"), (Linear(max_iter=0), "max_iter"),
     (MLP(n_hidden=0), "n_hidden"), (MLP(momentum=1.0), "momentum"),
     (MLP(learning_rate=float("nan")), "learning_rate"), (MLP(batch_size=2.5), "batch_size"),
     (MLP(random_state="seed"), "random_state")],
)
def test_bad_hyperparameters_raise_value_error(est, name):
    x, bias, y = make_problem(n=20)
    with pytest.raises(ValueError, match=name):
        est.fit(x, bias, y)


@pytest.mark.parametrize("make", ORACLES)
def test_pickle_repr_and_params(make):
    x, bias, y = make_problem(n=60, d=3, k=3, bias_scale=1.0)
    est = make().fit(x, bias, y)
    clone = pickle.loads(pickle.dumps(est))
    assert np.array_equal(clone.decision_function(x), est.decision_function(x))
    assert clone.decision_function(x).shape == (60, 3)
    assert repr(est).startswith(type(est).__name__ + "(")
    assert type(est)(**est.get_params()).get_params() == est.get_params()


def test_mlp_warm_start_survives_pickle():
    x, bias, y = xor_problem(n=300)
    a = MLP(n_hidden=8, n_epochs=2, random_state=3).fit(x, bias, y)
    b = pickle.loads(pickle.dumps(a))
    a.fit(x, bias, y)
    b.fit(x, bias, y)
    assert np.array_equal(a.params_, b.params_)
    assert np.array_equal(a.velocity_, b.velocity_)
