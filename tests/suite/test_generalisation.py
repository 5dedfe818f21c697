"""The held-out grid's report logic (time to the best linear peer) on hand-made rows, and its problems."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from slr.baselines import OneSlackSSVM
from slr.suite import get_profile
from slr.suite.common import Logger, validation_splits
from slr.suite.generalisation import (NAME, REPEAT_BELOW, REPEATS, RIDGED, SPECS, TABLES, GeneralisationSpec, Problem,
                                      _fit, cell, choose_model, example_errors, fastest_fit, learner, methods_of)
from slr.suite.methods import TuningGrid
from slr.suite.provenance import RunInfo, config_hash
from slr.suite.render_baselines import time_to_target
from slr.suite.render_generalisation import paired_difference, write_report


def test_time_to_target_is_the_first_time_the_curve_reaches_it():
    seconds, errors = np.array([0.5, 1.0, 2.0, 3.0]), np.array([0.30, 0.21, 0.19, 0.22])
    assert time_to_target(seconds, errors, 0.21) == 1.0
    assert time_to_target(seconds, errors, 0.195) == 2.0
    assert math.isnan(time_to_target(seconds, errors, 0.1))


def test_crfsuite_runs_on_chains_only():
    spec = get_profile("quick").spec(NAME)
    chain, grid = spec.problem("chain L5"), spec.problem("grid L2 strong")
    assert "crfsuite:lbfgs" in methods_of(spec, chain) and "crfsuite:lbfgs" not in methods_of(spec, grid)


def test_the_problems_are_those_make_structured_draws():
    problem = Problem("p", "grid", 9, 3, 1.0, n_train=2, n_test=1, seed=4)
    Xtr, Ytr, Xte, Yte = problem.load()
    from slr.datasets.synthetic import make_structured

    X, Y = make_structured(3, graph="grid", n_nodes=9, n_states=3, coupling=1.0, random_state=4)
    np.testing.assert_array_equal(Xte[0][0], X[2][0])
    np.testing.assert_array_equal(Ytr[1], Y[1])


def test_the_paired_difference_of_equal_examples_is_the_mean_of_their_differences():
    """With the same nodes in every example the ratio estimator is the plain mean of the
    per-example differences of error rates, and its standard error theirs."""
    rng = np.random.default_rng(3)
    errors, peer = rng.integers(0, 9, 40), rng.integers(0, 9, 40)
    rates = (errors - peer) / 8
    difference, error = paired_difference(errors, peer, np.full(40, 8))
    assert difference == pytest.approx(rates.mean())
    assert error == pytest.approx(rates.std(ddof=1) / np.sqrt(40))
    assert paired_difference(errors, errors, np.full(40, 8)) == (0.0, 0.0)
    assert math.isnan(paired_difference([1], [0], [4])[1])


def test_the_report_counts_the_problems_where_slr_reaches_the_best_peer_in_its_time(tmp_path):
    """Two problems: on the first slr:Linear comes within .005 of the better peer (CRFsuite, .20)
    at 1 s against the peer's 2 s and ends below it; on the second it reaches it only after the
    peer's time, and ends .01 above it. Only the first has per-example errors: slr:Linear's are
    CRFsuite's less one node in one of four examples of 5 nodes, a difference of -1/20 whose
    standard error is 1/20 (residuals .25, -.75, .25, .25: sqrt(4/3 * .75) / 20)."""
    spec = GeneralisationSpec((Problem("a", "chain", 5, 2, 1.0), Problem("b", "grid", 9, 2, 1.0)),
                              tune=TuningGrid(C=(0.1, 1.0), epsilon=(0.1,)), slr_methods=("slr:Linear",), folds=3,
                              note="Problem b came late.")
    profile = get_profile("tiny").with_spec(NAME, spec)
    config = config_hash(spec.config())
    info = RunInfo.collect("tiny", ["slr", "generalisation", "--tiny"])
    provenance = info.row_fields()
    results = [dict(config=config, problem=p, method=m, C=1.0, epsilon=0.1 if m.startswith("slr") else "",
                    train_error=0.1, test_error=e, seconds=s, tuning_seconds=0.5, iterations=3,
                    stopped="tol" if m.startswith("slr") else "", status="ok", **provenance)
               for p, m, e, s in [("a", "slr:Linear", 0.19, 3.0), ("a", "OneSlackSSVM", 0.25, 1.0),
                                  ("a", "crfsuite:lbfgs", 0.20, 2.0), ("b", "slr:Linear", 0.31, 5.0),
                                  ("b", "OneSlackSSVM", 0.30, 1.5)]]
    curves = [dict(config=config, problem=p, method="slr:Linear", point=i, seconds=s, test_error=e)
              for p, points in [("a", [(0.5, 0.4), (1.0, 0.204), (3.0, 0.19)]),
                                ("b", [(1.0, 0.5), (4.0, 0.30), (5.0, 0.31)])]
              for i, (s, e) in enumerate(points)]
    examples = [dict(config=config, problem="a", method=m, example=k, errors=e, nodes=5)
                for m, errors in (("slr:Linear", (1, 0, 1, 2)), ("crfsuite:lbfgs", (1, 1, 1, 2)),
                                  ("OneSlackSSVM", (2, 2, 2, 2)))
                for k, e in enumerate(errors)]
    log = Logger(quiet=True)
    for table, rows in zip(TABLES, (results, curves, examples)):
        table.open(tmp_path, log).upsert(rows)
    headline = write_report(profile, tmp_path, info, log)
    assert headline == dict(problems=2, reached=1, ended=1, rule=2)
    text = (tmp_path / "generalisation.md").read_text()
    assert "| a | slr:Linear | 1 | 0.1 | 0.190 | 3.000 | 0.50 | 3 | tol | 1.00 | 0.50 | -0.0500 ± 0.0500 |" in text
    assert "| b | slr:Linear | 1 | 0.1 | 0.310 | 5.000 | 0.50 | 3 | tol | 4.00 | 2.67 |  |" in text
    assert "| a | crfsuite:lbfgs | 1 |  | 0.200 |" in text
    assert "are chosen by 3-fold cross-validation on the training examples" in text
    assert "then fitted on all of them; the nonlinear slr rows keep eps = 0.1. Problem b came late." in text


@pytest.mark.parametrize("folds", [1, 3])
def test_the_model_is_chosen_by_the_lowest_mean_validation_error(folds):
    """slr:Linear's (C, eps) and CRFsuite's C: each candidate fitted here, directly, on the fit part
    of every split (a held-out fifth, or 3-fold cross-validation) and scored on the rest; the
    choice is the first lowest mean error."""
    from slr.baselines.crfsuite_peer import CRFsuiteChain
    from slr import StructuredLogisticRegression
    from slr.oracles import Linear

    problem = Problem("p", "chain", 8, 3, 1.5, noise=1.0, n_train=15, n_test=1, seed=7)
    grid = TuningGrid(C=(0.01, 1.0, 100.0), epsilon=(0.1, 1.0), C_of={"crfsuite:lbfgs": (0.01, 100.0)})
    spec = GeneralisationSpec((problem,), tune=grid, slr_methods=("slr:Linear",), folds=folds)
    X, Y, _, _ = problem.load()
    splits = validation_splits(X, Y, folds, 0)

    def first_lowest(errors: dict) -> dict:
        best = min(errors.values())
        C, eps = next(key for key, error in errors.items() if error == best)
        return dict(C=C, epsilon=eps)

    def mean_error(make) -> float:
        return float(np.mean([1 - make().fit(Xf, Yf).score(Xv, Yv) for Xf, Yf, Xv, Yv in splits]))

    slr_errors = {(C, eps): mean_error(lambda: StructuredLogisticRegression(
        unary=Linear(l2=eps / C), pairwise=Linear(l2=eps / C), epsilon=eps, n_states=3, random_state=0))
        for C in grid.C for eps in grid.epsilon}
    crf_errors = {(C, 0.1): mean_error(lambda: CRFsuiteChain(c2=1 / (2 * C), n_states=3)) for C in (0.01, 100.0)}
    assert len(set(slr_errors.values())) > 1     # the grid spans models that differ on these splits

    chosen, seconds = choose_model(spec, "slr:Linear", X, Y, 3, 1)
    assert chosen == first_lowest(slr_errors) and seconds > 0
    assert choose_model(spec, "crfsuite:lbfgs", X, Y, 3, 1)[0] == first_lowest(crf_errors)
    untuned = GeneralisationSpec((problem,), C=0.5, epsilon=0.3)
    assert choose_model(untuned, "slr:Linear", X, Y, 3, 1) == (dict(C=0.5, epsilon=0.3), None)


def test_a_short_fit_is_timed_as_the_fastest_of_its_runs_and_a_long_one_runs_once():
    for clocks, kept, runs in (([0.3, 0.1, 0.2, 0.05, 0.4, 0.01], 0.05, 5), ([0.7, 0.1], 0.7, 1),
                               ([0.3, 0.6, 0.2, 0.9, 0.25], 0.2, 5)):
        calls = iter(clocks)
        made = []

        def fit():
            made.append(next(calls))
            return dict(seconds=made[-1]), np.array([made[-1]]), np.zeros(1)

        row, seconds, _ = fastest_fit(fit)
        assert (row["seconds"], seconds[0], len(made)) == (kept, kept, runs)
    assert REPEAT_BELOW > 0 and REPEATS == 5


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_runs_of_one_cell_differ_in_their_clocks_only():
    """What the fastest run keeps is the run's clocks: errors, iterations and curves repeat. The
    linear methods' wrong nodes per test example add up to the test error that ``score`` gives."""
    spec = SPECS["tiny"]
    for problem in spec.problems:
        data = (*problem.load(), problem.n_states)
        for method in methods_of(spec, problem):
            reg = spec.candidates(method)[0]
            (row1, s1, e1, model1), (row2, s2, e2, model2) = (_fit(spec, method, data, reg, 1) for _ in range(2))
            assert {k: v for k, v in row1.items() if k != "seconds"} == {k: v for k, v in row2.items()
                                                                          if k != "seconds"}, (problem.name, method)
            np.testing.assert_array_equal(e1, e2)
            assert len(s1) == len(s2)
            assert method in RIDGED
            x1, x2 = (example_errors(model, data[2], data[3]) for model in (model1, model2))
            np.testing.assert_array_equal(x1, x2)
            nodes = sum(len(y) for y in data[3])
            assert x1.sum() / nodes == pytest.approx(row1["test_error"]), (problem.name, method)


def test_the_peer_ssvm_runs_at_the_specs_tolerance_and_its_cells_and_config_say_so():
    """quick's OneSlackSSVM stops at tol .1 (its cell's key holds it), full's at the learner's own
    default; a spec without a tolerance keeps the config of the committed full reports' rows."""
    quick, full = SPECS["quick"], SPECS["full"]
    problem = quick.problems[0]
    assert learner(quick, "OneSlackSSVM", dict(C=1.0, epsilon=0.1), 3, 1).tol == 0.1
    assert learner(full, "OneSlackSSVM", dict(C=1.0, epsilon=0.1), 3, 1).tol == OneSlackSSVM().tol
    assert cell(quick, problem, "OneSlackSSVM").config["tol"] == 0.1
    assert "tol" not in cell(full, problem, "OneSlackSSVM").config
    assert "tol" not in cell(quick, problem, "slr:Linear").config
    assert config_hash(quick.config()) != config_hash(GeneralisationSpec(quick.problems, tune=quick.tune,
                                                                         slr_methods=quick.slr_methods).config())
    committed = pd.read_csv(Path(__file__).resolve().parents[2] / "reports" / "full" / "generalisation_results.csv",
                            dtype=str)
    assert config_hash(full.config()) in set(committed.config)
