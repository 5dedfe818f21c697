"""slr._lbfgs: the L-BFGS of the joint and diagonal solvers against SciPy's L-BFGS-B, an exact
solve, a dense BFGS recursion and the strong Wolfe conditions."""
import numpy as np
import pytest
from scipy.optimize import minimize

from slr._lbfgs import Corrections, history_size, minimise_lbfgs


def _logistic_problem(seed=0, n=300, d=40, k=4, l2=1.0):
    """Multinomial logistic loss with a ridge on badly scaled features: value and gradient."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 10.0, size=d)
    y = rng.integers(0, k, n)

    def f(w):
        z = X @ w.reshape(k, d).T
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        total = p.sum(axis=1)
        p /= total[:, None]
        value = float(np.sum(np.log(total) - z[np.arange(n), y]) + 0.5 * l2 * w @ w)
        p[np.arange(n), y] -= 1.0
        return value, (p.T @ X).ravel() + l2 * w

    diagonal = np.tile((X**2).sum(axis=0) / k, k) + l2   # a Jacobi preconditioner's estimate
    return f, k * d, np.sqrt(diagonal)


def _in_place(f):
    def fun(x, gradient):
        value, gradient[...] = f(x)
        return value
    return fun


@pytest.mark.parametrize("scaled", [False, True])
def test_same_minimum_as_scipy_lbfgsb(scaled):
    f, n, d = _logistic_problem()
    scale = d if scaled else None
    ours = minimise_lbfgs(_in_place(f), np.zeros(n), scale=scale, memory=10, max_iter=2000, gtol=1e-10)
    theirs = minimize(f, np.zeros(n), jac=True, method="L-BFGS-B",
                      options={"maxiter": 2000, "gtol": 1e-10, "ftol": 0.0, "maxcor": 10})
    assert ours.value == pytest.approx(theirs.fun, rel=1e-12)
    np.testing.assert_allclose(ours.x, theirs.x, atol=1e-6)
    assert ours.value == pytest.approx(f(ours.x)[0], rel=1e-15)
    np.testing.assert_array_equal(ours.gradient, f(ours.x)[1])


def test_preconditioned_iterates_are_scipys_on_the_scaled_variables():
    # the same algorithm (two-loop recursion = L-BFGS-B's compact form without bounds, the same
    # first step and line-search constants): the same iterates after as many evaluations, to rounding
    # (and to the zoom's interpolation, which differs from Moré and Thuente's where a step is refined)
    f, n, d = _logistic_problem(seed=1)
    counts = [0, 0]

    def scaled(u):
        counts[0] += 1
        value, gradient = f(u / d)
        return value, gradient / d

    def fun(x, gradient):
        counts[1] += 1
        value, gradient[...] = f(x)
        return value

    theirs, ours = [], []
    minimize(scaled, np.zeros(n), jac=True, method="L-BFGS-B", callback=lambda u: theirs.append((u / d, counts[0])),
             options={"maxiter": 12, "gtol": 0.0, "ftol": 0.0, "maxcor": 5})
    minimise_lbfgs(fun, np.zeros(n), scale=d, memory=5, max_iter=12, gtol=0.0,
                   callback=lambda x: ours.append((x.copy(), counts[1])))
    assert len(ours) == len(theirs) == 12
    for (a, a_count), (b, b_count) in zip(ours, theirs):
        assert a_count == b_count
        assert np.max(np.abs(a - b)) <= 1e-7 * np.max(np.abs(b))


def test_ill_conditioned_quadratic_reaches_the_exact_solution():
    rng = np.random.default_rng(2)
    Q = np.linalg.qr(rng.normal(size=(30, 30)))[0]
    A = Q @ np.diag(np.logspace(0, 3, 30)) @ Q.T   # condition number 1e3
    b = rng.normal(size=30)

    def fun(x, gradient):
        np.subtract(A @ x, b, out=gradient)
        return float(0.5 * x @ A @ x - b @ x)

    result = minimise_lbfgs(fun, np.zeros(30), memory=8, max_iter=5000, gtol=1e-6)
    assert result.status == "converged"
    np.testing.assert_allclose(result.x, np.linalg.solve(A, b), atol=1e-6)   # |x - x*| <= |g| / 1


def test_two_loop_recursion_is_the_bfgs_inverse_update():
    rng = np.random.default_rng(3)
    n, memory = 6, 3
    scale = rng.uniform(0.5, 2.0, n)
    corrections = Corrections(n, memory)
    pairs = []
    for _ in range(5):   # more pairs than memory: the oldest are dropped
        s = rng.normal(size=n)
        y = s + 0.3 * rng.normal(size=n)   # s.y > 0
        slot = corrections.free_slot()
        corrections.s[slot], corrections.y[slot] = s, y
        corrections.add(slot, float(s @ y), float((y / scale) @ (y / scale)))
        pairs.append((s, y))
    kept = pairs[-memory:]
    s, y = kept[-1]
    H = np.diag(float(s @ y) / float((y / scale) @ (y / scale)) / scale**2)
    for s, y in kept:   # H <- (I - rho s y^T) H (I - rho y s^T) + rho s s^T
        rho = 1.0 / float(s @ y)
        E = np.eye(n) - rho * np.outer(s, y)
        H = E @ H @ E.T + rho * np.outer(s, s)
    g = rng.normal(size=n)
    np.testing.assert_allclose(corrections.apply(g, np.empty(n), scale), -H @ g, rtol=1e-12)


def test_accepted_steps_satisfy_the_strong_wolfe_conditions():
    f, n, d = _logistic_problem(seed=4)
    points = [(np.zeros(n), *f(np.zeros(n)))]
    directions = []

    def fun(x, gradient):
        value, gradient[...] = f(x)
        return value

    def callback(x):
        points.append((x.copy(), *f(x)))

    original = Corrections.apply

    def spy(self, gradient, out, scale=None):
        directions.append(original(self, gradient, out, scale).copy())
        return out

    Corrections.apply = spy
    try:
        minimise_lbfgs(fun, np.zeros(n), scale=d, memory=5, max_iter=30, gtol=0.0, callback=callback)
    finally:
        Corrections.apply = original
    assert len(points) == len(directions) + 1 > 10   # one direction per iteration (all descend)
    for (x0, f0, g0), (x1, f1, g1), p in zip(points, points[1:], directions):
        step = float((x1 - x0) @ p / (p @ p))
        np.testing.assert_allclose(x1, x0 + step * p, rtol=1e-12, atol=1e-14)
        assert f1 <= f0 + 1e-3 * step * float(g0 @ p) + 1e-12 * abs(f0)
        assert abs(float(g1 @ p)) <= 0.9 * abs(float(g0 @ p)) * (1 + 1e-9)


def test_buffers_are_reused_and_the_start_is_kept():
    f, n, _ = _logistic_problem(seed=5)
    seen_x, seen_g = set(), set()

    def fun(x, gradient):
        seen_x.add(id(x))
        seen_g.add(id(gradient))
        value, gradient[...] = f(x)
        return value

    x0 = np.zeros(n)
    result = minimise_lbfgs(fun, x0, memory=4, max_iter=50, gtol=0.0)
    assert result.n_iter == 50 and result.status == "max_iter"
    assert len(seen_x) == 2 and len(seen_g) == 2   # the current point's and the trial's
    assert not np.any(x0)


def test_converged_at_the_start_takes_no_step():
    f, n, _ = _logistic_problem(seed=6)
    solution = minimize(f, np.zeros(n), jac=True, method="L-BFGS-B",
                        options={"gtol": 1e-6, "ftol": 0.0, "maxiter": 5000}).x
    result = minimise_lbfgs(_in_place(f), solution, gtol=1e-3)
    assert (result.n_iter, result.n_evaluations, result.status) == (0, 1, "converged")
    np.testing.assert_array_equal(result.x, solution)


def test_history_size_keeps_the_budget():
    assert history_size(1000, 10) == 10
    assert history_size(1_200_000, 20) == 3            # 64 MiB: 3 pairs of 1.2M float64
    assert history_size(100_000_000, 20) == 3          # at least 3 whatever the size
    assert 16 * 1_000_000 * history_size(1_000_000, 20) <= 1 << 26


def test_without_copy_the_start_is_a_buffer_and_the_iterates_the_same():
    f, n, d = _logistic_problem(seed=7)
    kept = minimise_lbfgs(_in_place(f), np.zeros(n), scale=d, memory=4, max_iter=30, gtol=0.0)
    start = np.zeros(n)
    reused = minimise_lbfgs(_in_place(f), start, scale=d, memory=4, max_iter=30, gtol=0.0, copy=False)
    np.testing.assert_array_equal(reused.x, kept.x)
    assert reused.x is start or np.any(start)   # the start's array is the result or held a trial point


def test_a_gradient_that_is_not_finite_ends_without_a_step():
    def fun(x, gradient):
        gradient[...] = np.nan
        return 1.0

    result = minimise_lbfgs(fun, np.ones(5))
    assert (result.n_iter, result.status) == (0, "line_search")
    np.testing.assert_array_equal(result.x, np.ones(5))


def _inexact(f, rng, error):
    """``f`` evaluated as an upper bound, too high by up to ``error[0]`` (uniform, drawn anew at every
    call, as the joint solver's messages after a few sweeps); the gradient exact."""
    def fun(x, gradient):
        value, gradient[...] = f(x)
        return value + error[0] * rng.uniform()
    return fun


def test_refine_makes_an_inexact_objective_reach_the_minimum():
    f, n, d = _logistic_problem(seed=7)
    best = minimize(f, np.zeros(n), jac=True, method="L-BFGS-B",
                    options={"maxiter": 5000, "gtol": 1e-10, "ftol": 0.0, "maxcor": 10}).fun
    # without refine the errors (1e-3 of f) hide the decreases near the minimum: the search fails
    stuck = minimise_lbfgs(_inexact(f, np.random.default_rng(0), [1e-3 * best]), np.zeros(n), scale=d,
                           max_iter=2000, gtol=1e-8)
    assert stuck.status == "line_search"
    assert f(stuck.x)[0] > best + 1e-6 * best
    # refine divides the error by 10 each time a search ends without a strong Wolfe step
    error, calls = [1e-3 * best], []

    def refine():
        calls.append(error[0])
        if error[0] < 1e-13 * best:
            return False
        error[0] /= 10
        return True

    result = minimise_lbfgs(_inexact(f, np.random.default_rng(0), error), np.zeros(n), scale=d, max_iter=2000,
                            gtol=1e-8, refine=refine)
    assert calls
    assert f(result.x)[0] == pytest.approx(best, rel=1e-10)


def test_refine_is_not_called_where_every_search_meets_strong_wolfe():
    f, n, d = _logistic_problem(seed=8)
    plain = minimise_lbfgs(_in_place(f), np.zeros(n), scale=d, max_iter=300, gtol=1e-4)
    calls = []
    refined = minimise_lbfgs(_in_place(f), np.zeros(n), scale=d, max_iter=300, gtol=1e-4,
                             refine=lambda: calls.append(1) or True)
    assert plain.status == "converged" and not calls
    np.testing.assert_array_equal(refined.x, plain.x)
    assert (refined.n_iter, refined.n_evaluations) == (plain.n_iter, plain.n_evaluations)
