"""The cutting-plane SSVMs as the reports configure them end within their tolerance of the exact optimum.

Each learner is built by the report's own code (``slr.suite``: the baselines report's letters rows,
the held-out problems' ``OneSlackSSVM``, the text-tagging rows), with every ``C`` its grid tries, and
fitted on small data of the report's graph type where exact inference exists: chains (Viterbi in
the learner) and the held-out problems' grids and random loopy graphs (exact MAP by integer
programming in the learner, being small). The references are independent: the primal at the
returned weights by enumerating every labelling, and the SSVM's optimum as the QP with every
labelling as a constraint (:mod:`chain_reference`). A cutting-plane loop that stops by its tolerance
``tol`` (per unit of example weight) has a primal within ``C n tol`` of the optimum: its last QP's
objective is at most the optimum, and no constraint outside the working set is violated by more.

The learners' certified lower bound (``lower_bound_``, the working-set dual) is checked against the
exact optimum on the same small data. On the real OCR words of the baselines report's letters cells
(its quick profile's 100 training words, every C its grid tries) the OneSlackSSVM the report
configures is fitted as the report fits it: it must stop by its tolerance, its reported primal must
be the primal by an independent Viterbi (:func:`chain_reference.viterbi_primal`), and its certified
gap must be within ``C n tol``. The report runs no NSlackSSVM on letters (its QP takes minutes to
reach the tolerance there).

The report cells on data too large for exact inference (denoising's 32 x 32 images, the snakes'
grids) are not covered here.
"""
from __future__ import annotations

import numpy as np
import pytest

from chain_reference import brute_primal, chain_example, exact_ssvm_optimum, viterbi_primal
from slr.datasets.synthetic import make_structured

#: Nodes of the small stand-ins: enumeration of every labelling stays below a few thousand.
_SMALL = {"chain": 4, "grid": 9, "random": 5}


def _letters_rows():
    """The baselines report's cutting-plane rows on OCR letters (chains), quick profile."""
    from slr.suite.methods import SPECS, grid

    spec = SPECS["quick"]
    for method in ("OneSlackSSVM", "NSlackSSVM"):
        if method in spec.skip.get("letters", ()):
            continue
        for reg in grid(spec, "letters", method):
            yield (f"baselines letters {method} C={reg['C']:g}", "chain",
                   lambda L, method=method, reg=reg: _report_letters_learner(method, reg, L))


def _report_letters_learner(method: str, reg: dict, n_states: int):
    """``method`` as the quick baselines report fits it on letters with the regularisation ``reg``."""
    from slr.suite.methods import SPECS, _baseline

    spec = SPECS["quick"]
    return _baseline(method, reg, spec.budget(method, "letters"), n_states, spec.own_keywords("letters", method))


def _generalisation_rows():
    """The held-out report's OneSlackSSVM (library defaults, its C) on each of its graph types."""
    from slr.suite.generalisation import SPECS, learner

    spec = SPECS["quick"]
    graphs = sorted({problem.graph for problem in spec.problems})
    for reg in spec.candidates("OneSlackSSVM"):
        for graph in graphs:
            yield (f"generalisation OneSlackSSVM C={reg['C']:g} {graph}", graph,
                   lambda L, reg=reg: learner(spec, "OneSlackSSVM", reg, L, 1))


def _nlp_rows():
    """The text-tagging report's OneSlackSSVM (chains), quick profile."""
    from slr.suite.nlp import SPECS, _learner

    spec = SPECS["quick"]
    for point in spec.grid("OneSlackSSVM"):
        yield (f"nlp OneSlackSSVM C={point['C']:g}", "chain",
               lambda L, point=point: _learner("OneSlackSSVM", point, spec, 1, None))


ROWS = {name: (graph, make) for rows in (_letters_rows, _generalisation_rows, _nlp_rows)
        for name, graph, make in rows()}


def _data(graph: str):
    n_states = 2 if graph == "grid" else 3
    X, Y = make_structured(6, graph=graph, n_nodes=_SMALL[graph], n_states=n_states, coupling=1.5, n_features=3,
                           noise=1.0, random_state=7)
    return X, Y, n_states


@pytest.mark.parametrize("name", list(ROWS))
def test_report_cutting_plane_fit_ends_within_tol_of_the_exact_optimum(name):
    graph, make = ROWS[name]
    X, Y, L = _data(graph)
    model = make(L).fit(X, Y)
    C, tol = model.C, model.tol
    exact = brute_primal(model.w_, X, Y, L, C=C)
    # the primal the fit reports is its weights' exact primal, up to the LP's certificate: a loopy
    # example's labelling counts as certified within GAP_RTOL (1 + |bound|) of the LP's bound
    # (slr.inference.decoding), so its slack may fall that much short of the largest
    assert model.history_["objective"].iloc[-1] == pytest.approx(exact, rel=1e-7 if graph != "chain" else 1e-9)
    assert model.converged_, f"{name} stopped at max_iter={model.max_iter}, not by its tolerance"
    optimum = exact_ssvm_optimum(X, Y, L, C=C)
    solver_accuracy = 1e-5 * max(1.0, optimum)   # cvxpy's interior point on the reference QP
    assert optimum <= exact + solver_accuracy
    assert exact - optimum <= C * len(X) * tol + solver_accuracy
    # the certified bound holds and certifies the stop
    assert model.lower_bound_ <= optimum + solver_accuracy
    assert exact - model.lower_bound_ <= C * len(X) * tol + solver_accuracy


@pytest.fixture(scope="module")
def report_letters():
    """The quick baselines report's letters training words (the test cells fit all of them)."""
    from slr.suite.methods import SPECS

    spec = SPECS["quick"]
    X, Y, _, _ = spec.data("letters").load()
    return X, Y


def _quick_letters_grid():
    from slr.suite.methods import SPECS, grid

    return [reg["C"] for reg in grid(SPECS["quick"], "letters", "OneSlackSSVM")]


@pytest.mark.parametrize("C", _quick_letters_grid())
def test_report_letters_one_slack_ends_by_its_tolerance_on_the_real_words(report_letters, C):
    from slr.suite.methods import N_STATES

    X, Y = report_letters
    L = N_STATES["letters"]
    model = _report_letters_learner("OneSlackSSVM", dict(C=C, epsilon=0.1), L).fit(X, Y)
    assert model.converged_, f"stopped at max_iter={model.max_iter}, not by its tolerance"
    primal = viterbi_primal(model.w_, X, Y, L, C=C)
    assert model.history_["objective"].iloc[-1] == pytest.approx(primal, rel=1e-9)
    assert 0.0 < model.lower_bound_ <= primal
    assert primal - model.lower_bound_ <= C * len(X) * model.tol * (1 + 1e-6)


def test_report_stop_fields_of_a_budget_ended_fit_give_its_certified_gap():
    """A fit that ``max_iter`` ends reports ``max_iter`` and the primal minus its lower bound, which
    brackets the exact optimum; one that its tolerance ends reports ``tol``."""
    from slr.baselines import OneSlackSSVM
    from slr.suite.methods import stop_fields

    X, Y, L = _data("chain")
    C = 10.0
    optimum = exact_ssvm_optimum(X, Y, L, C=C)
    short = OneSlackSSVM(C=C, max_iter=3, n_states=L).fit(X, Y)
    fields = stop_fields(short)
    assert fields["stopped"] == "max_iter"
    exact = brute_primal(short.w_, X, Y, L, C=C)
    assert fields["gap"] == pytest.approx(exact - short.lower_bound_, rel=1e-9)
    assert short.lower_bound_ <= optimum + 1e-5 * optimum <= exact + 2e-5 * optimum
    assert stop_fields(OneSlackSSVM(C=C, n_states=L).fit(X, Y))["stopped"] == "tol"


@pytest.mark.peer
@pytest.mark.parametrize("learner", ["OneSlackSSVM", "NSlackSSVM"])
def test_report_reads_pystruct_cutting_plane_stops_and_gaps(peer_env, learner):
    """A pystruct fit that its test ends reads as ``tol`` before its budget, one that ``max_iter``
    ends as ``max_iter``; either gap leaves a lower bound at most the exact optimum."""
    from slr.baselines.peer import run_peer
    from slr.suite.methods import _PEER_CUTTING_PLANES, _peer_stop_fields

    assert learner in _PEER_CUTTING_PLANES
    rng = np.random.default_rng(3)
    X = []
    for n in rng.integers(2, 5, size=6):
        feats, edges, _ = chain_example(rng, int(n))
        X.append((feats, edges, np.ones((n - 1, 1))))
    Y = [rng.integers(0, 3, size=len(x[0])) for x in X]
    optimum = exact_ssvm_optimum(X, Y, 3, C=1.0)
    for max_iter, tol, stopped in ((200, 1e-4, "tol"), (2, 1e-4, "max_iter")):
        res = run_peer(learner, X, Y, model="chain", n_states=3, params=dict(C=1.0, tol=tol, max_iter=max_iter))
        fields = _peer_stop_fields(res, max_iter)
        assert fields["stopped"] == stopped
        assert fields["iterations"] <= max_iter and (fields["iterations"] < max_iter) == (stopped == "tol")
        assert brute_primal(res["w"], X, Y, 3, C=1.0) == pytest.approx(res["primal_objective"], rel=1e-9)
        lower = res["primal_objective"] - fields["gap"]
        assert lower <= optimum * (1 + 1e-4) <= res["primal_objective"] * (1 + 2e-4)
