"""The cutting-plane SSVMs as the reports configure them end within their tolerance of the exact optimum.

Each learner is built by the report's own code (``slr_suite``: the baselines report's letters rows,
the held-out problems' ``OneSlackSSVM``, the text-tagging rows), with every ``C`` its grid tries, and
fitted on small data of the report's graph type where exact inference exists: chains (Viterbi in
the learner) and the held-out problems' grids and random loopy graphs (exact MAP by integer
programming in the learner, being small). The references are independent: the primal at the
returned weights by enumerating every labelling, and the SSVM's optimum as the QP with every
labelling as a constraint (:mod:`chain_reference`). A cutting-plane loop that stops by its tolerance
``tol`` (per unit of example weight) has a primal within ``C n tol`` of the optimum: its last QP's
objective is at most the optimum, and no constraint outside the working set is violated by more.

The report cells on data too large for exact inference (denoising's 32 x 32 images, the snakes'
grids) are not covered here.
"""
from __future__ import annotations

import pytest

from chain_reference import brute_primal, exact_ssvm_optimum
from slr.datasets.synthetic import make_structured

#: Nodes of the small stand-ins: enumeration of every labelling stays below a few thousand.
_SMALL = {"chain": 4, "grid": 9, "random": 5}


def _letters_rows():
    """The baselines report's cutting-plane rows on OCR letters (chains), quick profile."""
    from slr_suite.methods import SPECS, _baseline, grid

    spec = SPECS["quick"]
    for method in ("OneSlackSSVM", "NSlackSSVM"):
        for reg in grid(spec, "letters", method):
            yield (f"baselines letters {method} C={reg['C']:g}", "chain",
                   lambda L, method=method, reg=reg: _baseline(method, reg, spec.budget(method, "letters"), L))


def _generalisation_rows():
    """The held-out report's OneSlackSSVM (library defaults, its C) on each of its graph types."""
    from slr_suite.generalisation import SPECS, learner

    spec = SPECS["quick"]
    graphs = sorted({problem.graph for problem in spec.problems})
    for reg in spec.candidates("OneSlackSSVM"):
        for graph in graphs:
            yield (f"generalisation OneSlackSSVM C={reg['C']:g} {graph}", graph,
                   lambda L, reg=reg: learner(spec, "OneSlackSSVM", reg, L, 1))


def _nlp_rows():
    """The text-tagging report's OneSlackSSVM (chains), quick profile."""
    from slr_suite.nlp import SPECS, _learner

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
    # the primal the fit reports is its weights' exact primal
    assert model.history_["objective"].iloc[-1] == pytest.approx(exact, rel=1e-9)
    assert model.converged_, f"{name} stopped at max_iter={model.max_iter}, not by its tolerance"
    optimum = exact_ssvm_optimum(X, Y, L, C=C)
    solver_accuracy = 1e-5 * max(1.0, optimum)   # cvxpy's interior point on the reference QP
    assert optimum <= exact + solver_accuracy
    assert exact - optimum <= C * len(X) * tol + solver_accuracy
