"""Hostile inputs to the public API: each gives a clear ValueError
naming the argument, or the right number, checked against an independent computation."""
from __future__ import annotations

import dataclasses
import itertools
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slr import StructuredLogisticRegression
from slr.data import GraphBatch
from slr.graph import chain_edges, check_dataset, grid_edges
from slr.inference import (
    batch_dual_values,
    batch_edge_beliefs,
    batch_marginals,
    batch_node_beliefs,
    batch_sweeps,
    hmax,
    map_lp,
    smoothed_lp,
)
from slr.inference.exact import exact_lp, exact_smoothed
from slr.oracles import Constant, Linear

FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def grid_problem(n_states: int = 2, seed: int = 0, size: int = 3):
    rng = np.random.default_rng(seed)
    edges = grid_edges(size, size)
    theta_nodes = rng.normal(size=(size * size, n_states))
    theta_edges = rng.normal(size=(len(edges), n_states, n_states))
    return theta_nodes, theta_edges, edges


def numpy_node_beliefs(theta_nodes, edges, messages):
    """``theta_i - sum_{e at i} lambda_e`` computed here, without the kernels."""
    beliefs = theta_nodes.copy()
    np.subtract.at(beliefs, edges[:, 0], messages[:, 0])
    np.subtract.at(beliefs, edges[:, 1], messages[:, 1])
    return beliefs


# ---------------------------------------------------------------------------------------
# 6. wrong shapes never reach the kernels
# ---------------------------------------------------------------------------------------
def test_issue_reproducer_node_beliefs_with_too_few_messages_raises():
    batch = GraphBatch.from_graphs([(100, grid_edges(10, 10))], 2)
    with pytest.raises(ValueError, match=r"messages must have shape \(180, 2, 2\), got \(1, 2, 2\)"):
        batch_node_beliefs(batch, np.zeros((100, 2)), np.zeros((1, 2, 2)))
    with pytest.raises(ValueError, match="messages must have shape"):
        batch_marginals(batch, np.zeros((100, 2)), np.zeros((180, 2, 2)), np.zeros((1, 2, 2)), 0.1)


def _public_calls(batch, tn, te, lam):
    """One call per public inference function and array argument, as (name, call(arrays))."""
    return {
        "batch_sweeps": lambda a: batch_sweeps(batch, a["tn"], a["te"], 0.1, messages=a["lam"], max_sweeps=3),
        "batch_sweeps_unchecked": lambda a: batch_sweeps(
            batch, a["tn"], a["te"], 0.1, messages=a["lam"], max_sweeps=3, check_input=False),
        "batch_sweeps_out": lambda a: batch_sweeps(batch, a["tn"], a["te"], 0.1, out=a["lam"], max_sweeps=3),
        "batch_dual_values": lambda a: batch_dual_values(batch, a["tn"], a["te"], a["lam"], 0.1),
        "batch_dual_values_unchecked": lambda a: batch_dual_values(
            batch, a["tn"], a["te"], a["lam"], 0.1, check_input=False),
        "batch_node_beliefs": lambda a: batch_node_beliefs(batch, a["tn"], a["lam"]),
        "batch_edge_beliefs": lambda a: batch_edge_beliefs(a["te"], a["lam"]),
        "batch_marginals": lambda a: batch_marginals(batch, a["tn"], a["te"], a["lam"], 0.1),
        "smoothed_lp": lambda a: smoothed_lp(a["tn"], a["te"], grid_edges(3, 3), 0.1, messages=a["lam"]),
        "map_lp": lambda a: map_lp(a["tn"], a["te"], grid_edges(3, 3), messages=a["lam"]),
    }


# wrong for every function; for one graph theta_nodes fixes n and L, so a wrong one is
# reported through the edges or theta_edges that no longer fit it
WRONG = {
    "tn": [np.zeros((8, 2)), np.zeros((9, 3)), np.zeros(18), np.zeros((9, 0))],
    "te": [np.zeros((11, 2, 2)), np.zeros((12, 2, 3)), np.zeros((12, 3, 2)), np.zeros((12, 4))],
    "lam": [np.zeros((1, 2, 2)), np.zeros((12, 1, 2)), np.zeros((12, 2, 3)), np.zeros((13, 2, 2)),
            np.zeros((24, 2))],
}


NAMES = {"tn": "theta_nodes|theta_edges|edges", "te": "theta_edges", "lam": "messages|out"}
CASES = [
    (function, argument)
    for function in sorted(_public_calls(None, None, None, None))
    for argument in sorted(WRONG)
    if not (function == "batch_node_beliefs" and argument == "te")
    and not (function == "batch_edge_beliefs" and argument == "tn")
]


@pytest.mark.parametrize("function,argument", CASES)
def test_every_public_function_refuses_wrong_shapes(function, argument):
    tn, te, edges = grid_problem()
    batch = GraphBatch.from_graphs([(9, edges)], 2)
    call = _public_calls(batch, tn, te, None)[function]
    right = {"tn": tn, "te": te, "lam": np.zeros((12, 2, 2))}
    call(right)  # the right shapes work
    # batch_edge_beliefs has no batch: theta_edges sets m and L, which the messages must match
    name = "theta_edges|messages" if function == "batch_edge_beliefs" else NAMES[argument]
    for bad in WRONG[argument]:
        with pytest.raises(ValueError, match=name):
            call({**right, argument: bad})


@FAST
@given(shape=st.lists(st.integers(0, 14), min_size=0, max_size=4).map(tuple),
       function=st.sampled_from(sorted(_public_calls(None, None, None, None))))
def test_random_message_shapes_never_crash(shape, function):
    """Any message shape: a ValueError naming the messages, or (the one right shape) the
    same numbers as with correctly built messages."""
    tn, te, edges = grid_problem()
    batch = GraphBatch.from_graphs([(9, edges)], 2)
    messages = np.random.default_rng(len(shape)).normal(size=shape)
    call = _public_calls(batch, tn, te, None)[function]
    if shape == (12, 2, 2):
        call({"tn": tn, "te": te, "lam": messages})
        expected = numpy_node_beliefs(tn, edges, messages)
        np.testing.assert_allclose(batch_node_beliefs(batch, tn, messages), expected)
        return
    with pytest.raises(ValueError, match="messages|out"):
        call({"tn": tn, "te": te, "lam": messages})


def test_inconsistent_hand_built_batches_are_refused():
    batch = GraphBatch.from_graphs([(4, chain_edges(4)), (3, chain_edges(3))], 2)
    bad = {
        "max_degree": 1,
        "inc_edge": np.zeros_like(batch.inc_edge),
        "inc_side": 1 - batch.inc_side,
        # an edge from the first example into the second one
        "edges": np.where(np.arange(10).reshape(5, 2) == 5, 4, batch.edges),
        "node_ptr": np.array([0, 4, 6]),
        "edge_ptr": np.array([0, 3]),
        "inc_ptr": batch.inc_ptr[::-1].copy(),
    }
    for field, value in bad.items():
        with pytest.raises(ValueError, match="GraphBatch"):
            dataclasses.replace(batch, **{field: value})
    with pytest.raises(ValueError, match="batch must be a GraphBatch"):
        batch_sweeps({"n_states": 2}, np.zeros((7, 2)), np.zeros((5, 2, 2)), 0.1)
    # the stored arrays cannot be changed behind the validation
    with pytest.raises(ValueError):
        batch.edges[0, 0] = 3
    with pytest.raises(ValueError, match="array must have 7 rows"):
        batch.split_nodes(np.zeros(6))


def test_batch_index_arrays_cannot_be_made_writeable_again():
    """The checked index arrays (and every array beneath them) refuse
    ``flags.writeable = True``, and the caller's arrays are not shared, so nothing changes the
    layout the unchecked kernels index with after the check."""
    reference = GraphBatch.from_graphs([(4, chain_edges(4))], 2)
    fields = ("edges", "node_ptr", "edge_ptr", "inc_ptr", "inc_edge", "inc_side")
    caller = {name: np.array(getattr(reference, name)) for name in fields}   # writeable copies
    batch = GraphBatch(n_states=2, max_degree=2, **caller)
    for name, owned in caller.items():
        stored = getattr(batch, name)
        np.testing.assert_array_equal(stored, getattr(reference, name))
        array = stored
        while isinstance(array, np.ndarray):
            with pytest.raises(ValueError):
                array.flags.writeable = True
            assert not np.shares_memory(array, owned)
            array = array.base
        owned[...] = -1                       # the caller's arrays are the caller's
        np.testing.assert_array_equal(stored, getattr(reference, name))
    # the batch still runs as built: sweeps on it give the reference's messages
    tn = np.random.default_rng(0).normal(size=(4, 2))
    te = np.random.default_rng(1).normal(size=(3, 2, 2))
    np.testing.assert_array_equal(batch_sweeps(batch, tn, te, 0.1).messages,
                                  batch_sweeps(reference, tn, te, 0.1).messages)


def test_thread_counts_far_above_the_cores_run_as_one_thread():
    """OpenMP cannot start 2**31 - 1 threads (it crashed the process): capped at the cores."""
    tn, te, edges = grid_problem(seed=4)
    batch = GraphBatch.from_graphs([(9, edges)] * 3, 2)
    tn3, te3 = np.concatenate([tn] * 3), np.concatenate([te] * 3)
    many = batch_sweeps(batch, tn3, te3, 0.1, n_jobs=2**31 - 1, tol=1e-12, max_sweeps=10_000)
    one = batch_sweeps(batch, tn3, te3, 0.1, n_jobs=1, tol=1e-12, max_sweeps=10_000)
    np.testing.assert_array_equal(many.messages, one.messages)
    assert batch_dual_values(batch, tn3, te3, many.messages, 0.1, n_jobs=2**31 - 1)[0] == pytest.approx(
        smoothed_lp(tn, te, edges, 0.1, tol=1e-12, max_sweeps=10_000).value, rel=1e-12)


# ---------------------------------------------------------------------------------------
# 7. numbers float64 cannot carry: the right value or a clear refusal
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("offset", [1e15, 1e17, -3e200])
def test_huge_constant_warm_start_gives_the_smoothed_optimum(offset):
    """A constant added to every message vector changes nothing (a gauge); it used to bury
    the potentials in rounding (64.0 instead of 6.106, marked converged)."""
    tn, te, edges = grid_problem(seed=1)
    warm = smoothed_lp(tn, te, edges, 1.0, messages=np.full((12, 2, 2), offset), tol=1e-12, max_sweeps=10_000)
    assert warm.converged
    assert warm.value == pytest.approx(exact_smoothed(tn, te, edges, 1.0).value, rel=1e-8)
    cold = smoothed_lp(tn, te, edges, 1.0, tol=1e-12, max_sweeps=10_000)
    np.testing.assert_allclose(warm.node_marginals, cold.node_marginals, atol=1e-10)


def test_huge_constant_warm_start_keeps_map_lp_an_upper_bound():
    tn, te, edges = grid_problem(seed=2)
    lp = exact_lp(tn, te, edges).value
    warm = map_lp(tn, te, edges, messages=np.full((12, 2, 2), 1e17))
    cold = map_lp(tn, te, edges)
    assert warm.value >= lp - 1e-9
    assert warm.value == pytest.approx(cold.value, rel=1e-12)


def test_huge_constant_messages_give_the_values_of_zero_messages():
    tn, te, edges = grid_problem(n_states=3, seed=3)
    batch = GraphBatch.from_graphs([(9, edges)], 3)
    huge, zero = np.full((12, 2, 3), 1e17), np.zeros((12, 2, 3))
    for eps in (0.0, 0.5):
        assert batch_dual_values(batch, tn, te, huge, eps)[0] == pytest.approx(
            batch_dual_values(batch, tn, te, zero, eps)[0], rel=1e-13)
    for got, want in zip(batch_marginals(batch, tn, te, huge, 0.5), batch_marginals(batch, tn, te, zero, 0.5)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_warm_start_beyond_float64_resolution_of_the_potentials_is_refused():
    tn, te, edges = grid_problem(seed=1)
    messages = np.zeros((12, 2, 2))
    messages[:, :, 0] = 1e17  # not a constant per vector: a real belief difference of 1e17
    for call in (
        lambda: smoothed_lp(tn, te, edges, 1.0, messages=messages),
        lambda: map_lp(tn, te, edges, messages=messages),
        lambda: batch_sweeps(GraphBatch.from_graphs([(9, edges)], 2), tn, te, 0.1, messages=messages),
    ):
        with pytest.raises(ValueError, match=r"messages have entries of magnitude 1e\+17.*2\*\*20"):
            call()
    # up to 2**20 times the potentials is still solved exactly
    scale = max(np.abs(tn).max(), np.abs(te).max())
    messages[:, :, 0] = 2.0**19 * scale
    warm = smoothed_lp(tn, te, edges, 1.0, messages=messages, tol=1e-12, max_sweeps=10_000)
    assert warm.converged and warm.value == pytest.approx(exact_smoothed(tn, te, edges, 1.0).value, rel=1e-8)


@pytest.mark.parametrize("eps", [5e-324, 1e-310])
def test_subnormal_epsilon_is_refused(eps):
    tn, te, edges = grid_problem()
    batch = GraphBatch.from_graphs([(9, edges)], 2)
    for call in (
        lambda: smoothed_lp(tn, te, edges, eps),
        lambda: batch_sweeps(batch, tn, te, eps),
        lambda: batch_dual_values(batch, tn, te, np.zeros((12, 2, 2)), eps),
        lambda: batch_marginals(batch, tn, te, np.zeros((12, 2, 2)), eps),
    ):
        with pytest.raises(ValueError, match="epsilon=.* is subnormal"):
            call()


def test_epsilon_below_the_resolution_of_the_potentials_is_refused_for_sweeps():
    tn, te, edges = grid_problem()
    with pytest.raises(ValueError, match=r"epsilon=1e-200 is too small for potentials of magnitude .*e\+200"):
        smoothed_lp(tn * 1e200, te * 1e200, edges, 1e-200)
    # 2**-40 times the potentials is still computed: there the smoothed LP is the LP
    scale = 1e200 * max(np.abs(tn).max(), np.abs(te).max())
    big = smoothed_lp(tn * 1e200, te * 1e200, edges, 1.01 * 2.0**-40 * scale, max_sweeps=10_000)
    assert big.converged
    assert big.value == pytest.approx(exact_lp(tn, te, edges).value * 1e200, rel=1e-9)


def test_marginals_and_dual_values_of_tiny_epsilon_are_finite_limits():
    """(b - max b) / eps underflows to the eps -> 0 limit instead of b / eps overflowing to NaN."""
    tn, te, edges = grid_problem(seed=5)
    batch = GraphBatch.from_graphs([(9, edges)], 2)
    lam = np.random.default_rng(0).normal(size=(12, 2, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tiny = batch_marginals(batch, tn * 1e200, te * 1e200, lam * 1e200, 1e-200)
        limit = batch_marginals(batch, tn, te, lam, 0.0)
        value = batch_dual_values(batch, tn * 1e200, te * 1e200, lam * 1e200, 1e-200)[0]
    for got, want in zip(tiny, limit):
        np.testing.assert_array_equal(got, want)
    assert value == pytest.approx(batch_dual_values(batch, tn, te, lam, 0.0)[0] * 1e200, rel=1e-12)


def test_potentials_whose_sums_overflow_are_refused():
    tn, te, edges = grid_problem()
    batch = GraphBatch.from_graphs([(9, edges)], 2)
    with pytest.raises(ValueError, match=r"theta_nodes has entries of magnitude 1e\+300, above 2\*\*960"):
        smoothed_lp(np.full((9, 2), 1e300), te, edges, 1.0)
    with pytest.raises(ValueError, match=r"messages has entries of magnitude 1e\+300"):
        batch_node_beliefs(batch, tn, np.full((12, 2, 2), 1e300))
    with pytest.raises(ValueError, match="epsilon=1e.300 exceeds 2\\*\\*960"):
        batch_sweeps(batch, tn, te, 1e300)


def test_huge_epsilon_converges_to_the_uniform_limit():
    """eps = 1e12 never converged (tol 1e-9 is below float64 resolution at 1e12); the smoothed
    optimum there is eps * Hmax plus the potentials' means, up to O(theta**2 / eps)."""
    tn, te, edges = grid_problem(seed=6)
    result = smoothed_lp(tn, te, edges, 1e12)
    assert result.converged and result.n_sweeps < 20
    expected = 1e12 * hmax(9, 12, 2) + tn.mean(axis=1).sum() + te.mean(axis=(1, 2)).sum()
    assert result.value == pytest.approx(expected, rel=1e-15)
    np.testing.assert_allclose(result.node_marginals, 0.5, atol=1e-11)


@FAST
@given(log_scale=st.integers(-6, 14), seed=st.integers(0, 3), n_states=st.sampled_from([2, 3]))
def test_smoothed_lp_is_scale_covariant_and_converges_at_every_scale(log_scale, seed, n_states):
    """V(c theta, c eps) = c V(theta, eps): at every scale the sweeps converge (relative
    stopping rule) to c times the unscaled optimum."""
    tn, te, edges = grid_problem(n_states, seed)
    c = 10.0**log_scale
    reference = smoothed_lp(tn, te, edges, 0.3, tol=1e-11, max_sweeps=5_000)
    # tol is absolute: below 1e-9 * c at large scales float64 cannot resolve it (and the
    # relative floor of the stopping rule takes over)
    scaled = smoothed_lp(c * tn, c * te, edges, c * 0.3, tol=min(1e-9, 1e-11 * c), max_sweeps=5_000)
    assert reference.converged and scaled.converged
    assert scaled.value == pytest.approx(c * reference.value, rel=1e-8)
    np.testing.assert_allclose(scaled.node_marginals, reference.node_marginals, atol=1e-7)


def test_tol_zero_still_runs_the_whole_budget():
    """The floor of the stopping rule applies to tol > 0; tol = 0 is a fixed sweep budget."""
    tn, te, edges = grid_problem(seed=7)
    batch = GraphBatch.from_graphs([(9, edges)], 2)
    run = batch_sweeps(batch, tn, te, 0.1, max_sweeps=300, tol=0.0)
    assert run.n_sweeps[0] == 300 or run.converged[0]


# ---------------------------------------------------------------------------------------
# 8. validation does not depend on the order of the examples
# ---------------------------------------------------------------------------------------
def _mixed_dataset():
    rng = np.random.default_rng(0)
    lonely = (rng.normal(size=(1, 3)), np.zeros((0, 2), dtype=int), np.zeros((0, 0)))
    chain = (rng.normal(size=(4, 3)), chain_edges(4), rng.normal(size=(3, 2)))
    grid = (rng.normal(size=(4, 3)), grid_edges(2, 2), rng.normal(size=(4, 2)))
    wide_empty = (rng.normal(size=(2, 3)), np.zeros((0, 2), dtype=int), np.zeros((0, 5)))
    labels = [np.array([1]), np.array([0, 1, 1, 0]), np.array([1, 1, 0, 0]), np.array([0, 1])]
    return [lonely, chain, grid, wide_empty], labels


def test_edge_free_example_first_does_not_fix_the_edge_feature_width():
    X, Y = _mixed_dataset()
    for order in itertools.permutations(range(4)):
        Xo = [X[k] for k in order]
        out, _, n_states = check_dataset(Xo, [Y[k] for k in order])
        assert n_states == 2
        assert [x[2].shape for x in out] == [(X[k][1].shape[0], 2) for k in order]


def test_learner_fits_and_predicts_with_an_edge_free_example_first():
    X, Y = _mixed_dataset()
    model = StructuredLogisticRegression(Constant(), Linear(), max_iter=2, max_sweeps=4, n_jobs=1).fit(X, Y)
    assert model.n_edge_features_ == 2
    predictions = model.predict(X[::-1])
    assert [p.shape for p in predictions] == [y.shape for y in Y[::-1]]
    assert 0.0 <= model.score(X, Y) <= 1.0


def test_edge_width_mismatch_names_the_first_example_with_edges():
    X, Y = _mixed_dataset()
    X[2] = (X[2][0], X[2][1], np.zeros((4, 3)))
    with pytest.raises(ValueError, match=r"X\[2\] has 3 edge features, X\[1\] has 2"):
        check_dataset(X, Y)
    with pytest.raises(ValueError, match=r"X\[0\] has 0 edges but 2 rows of edge_features"):
        check_dataset([(X[0][0], X[0][1], np.zeros((2, 2)))] + X[1:], Y)


# ---------------------------------------------------------------------------------------
# 9. integer and real arguments (inference and learner)
# ---------------------------------------------------------------------------------------
def test_counts_beyond_a_c_int_are_refused_with_their_name():
    tn, te, edges = grid_problem()
    batch = GraphBatch.from_graphs([(9, edges)], 2)
    for call, name in [
        (lambda: map_lp(tn, te, edges, max_sweeps=2**31), "max_sweeps"),
        (lambda: smoothed_lp(tn, te, edges, 0.1, max_sweeps=2**31), "max_sweeps"),
        (lambda: batch_sweeps(batch, tn, te, 0.1, max_sweeps=2**40), "max_sweeps"),
        (lambda: batch_sweeps(batch, tn, te, 0.1, n_jobs=2**31), "n_jobs"),
        (lambda: batch_dual_values(batch, tn, te, np.zeros((12, 2, 2)), 0.1, n_jobs=True), "n_jobs"),
        (lambda: map_lp(tn, te, edges, max_sweeps=np.float64(3)), "max_sweeps"),
    ]:
        with pytest.raises(ValueError,
                           match=name + r" must be (None, -1 \(all cores\) or )?an integer in \[.*2147483647\]"):
            call()
    # the largest C int is a valid budget: a converging problem stops early
    assert map_lp(tn, te, edges, max_sweeps=2**31 - 1).converged


def test_learner_counts_beyond_a_c_int_are_refused_with_their_name():
    X, Y = _mixed_dataset()
    for kw, name in [({"max_sweeps": 2**31}, "max_sweeps"), ({"predict_max_sweeps": 2**31}, "predict_max_sweeps"),
                     ({"max_iter": 2**31}, "max_iter"), ({"n_states": 2**31}, "n_states"),
                     ({"n_jobs": 2**31}, "n_jobs")]:
        with pytest.raises(ValueError, match="^" + name):
            StructuredLogisticRegression(**kw).fit(X, Y)


@pytest.mark.parametrize("value", [True, np.True_, "0.1", None, [0.1]])
def test_bools_and_non_numbers_are_refused_for_real_arguments(value):
    tn, te, edges = grid_problem()
    batch = GraphBatch.from_graphs([(9, edges)], 2)
    X, Y = _mixed_dataset()
    for call, name in [
        (lambda: smoothed_lp(tn, te, edges, value), "epsilon"),
        (lambda: batch_sweeps(batch, tn, te, value), "epsilon"),
        (lambda: batch_marginals(batch, tn, te, np.zeros((12, 2, 2)), value), "epsilon"),
        (lambda: map_lp(tn, te, edges, tol=value), "tol"),
        (lambda: StructuredLogisticRegression(epsilon=value).fit(X, Y), "epsilon"),
        (lambda: StructuredLogisticRegression(predict_epsilon=value).fit(X, Y), "predict_epsilon"),
    ]:
        with pytest.raises(ValueError, match=name + " must be (one of .auto. or )?a real number"):
            call()


@pytest.mark.parametrize("random_state", ["abc", -1, 1.5, object()])
def test_bad_random_state_is_a_value_error_naming_it(random_state):
    X, Y = _mixed_dataset()
    with pytest.raises(ValueError, match="random_state must be None, a non-negative integer or a numpy"):
        StructuredLogisticRegression(max_iter=1, random_state=random_state).fit(X, Y)


def test_oracle_scores_too_large_for_float64_potentials_are_refused():
    class Huge(Constant):
        def decision_function(self, features):
            return np.full((np.shape(features)[0], self.n_classes_), 1e300)

    X, Y = _mixed_dataset()
    with pytest.raises(ValueError, match="the unary oracle returned scores of magnitude 1e\\+300"):
        StructuredLogisticRegression(Huge(), Constant(), max_iter=1, max_sweeps=2).fit(X, Y)


# ---------------------------------------------------------------------------------------
# 10. labels beyond an inferred n_states
# ---------------------------------------------------------------------------------------
def test_labels_beyond_the_inferred_n_states_ask_for_n_states():
    X, Y = _mixed_dataset()
    test_Y = [np.where(y == 1, 2, y) for y in Y]  # label 2 never occurs in training
    model = StructuredLogisticRegression(Constant(), Constant(), max_iter=1, max_sweeps=2).fit(X, Y)
    asks_for_n_states = r"Y\[0\] contains labels outside \[0, 2\) .*pass n_states to the constructor"
    with pytest.raises(ValueError, match=asks_for_n_states):
        model.score(X, test_Y)
    with pytest.raises(ValueError, match="pass n_states to the constructor"):
        StructuredLogisticRegression(Constant(), Constant(), max_iter=1, max_sweeps=2).fit(X, Y, X, test_Y)
    # with n_states given the same data scores, and an explicit n_states keeps the plain message
    fixed = StructuredLogisticRegression(Constant(), Constant(), max_iter=1, max_sweeps=2, n_states=3).fit(X, Y)
    assert 0.0 <= fixed.score(X, test_Y) <= 1.0
    explicit = StructuredLogisticRegression(Constant(), Constant(), max_iter=1, max_sweeps=2, n_states=2).fit(X, Y)
    with pytest.raises(ValueError, match=r"^Y\[0\] contains labels outside \[0, 2\)$"):
        explicit.score(X, test_Y)
