"""Regularisation chosen on a validation split (slr_suite/tuning.py): the split, the choice, and a
tuned baselines run whose rows are checked against fits made here, outside the suite."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from slr.suite import get_profile, tuning
from slr.suite.common import hold_out, validation_splits
from slr.suite.methods import SMOOTHED


def test_validation_split_holds_out_a_seeded_fifth():
    X = [np.full((2, 1), i) for i in range(23)]
    Y = [np.array([i, i]) for i in range(23)]
    X_fit, Y_fit, X_val, Y_val = hold_out(X, Y, seed=0)
    fit = [int(x[0, 0]) for x in X_fit]
    val = [int(x[0, 0]) for x in X_val]
    assert len(val) == 23 // 5 and sorted(fit + val) == list(range(23))
    assert [int(y[0]) for y in Y_fit] == fit and [int(y[0]) for y in Y_val] == val
    assert val == [int(i) for i in np.random.default_rng(0).permutation(23)[-4:]]
    assert [int(x[0, 0]) for x in hold_out(X, Y, seed=0)[2]] == val
    assert [int(x[0, 0]) for x in hold_out(X, Y, seed=1)[2]] != val
    with pytest.raises(ValueError, match="too few"):
        hold_out(X[:4], Y[:4])


def test_cross_validation_holds_out_every_example_once_in_folds_of_near_equal_size():
    X = [np.full((2, 1), i) for i in range(23)]
    Y = [np.array([i, i]) for i in range(23)]
    splits = validation_splits(X, Y, folds=5, seed=3)
    held_out = []
    for X_fit, Y_fit, X_val, Y_val in splits:
        fit, val = [int(x[0, 0]) for x in X_fit], [int(x[0, 0]) for x in X_val]
        assert sorted(fit + val) == list(range(23))
        assert [int(y[0]) for y in Y_fit] == fit and [int(y[0]) for y in Y_val] == val
        held_out.append(val)
    assert sorted(len(val) for val in held_out) == [4, 4, 5, 5, 5]
    assert sorted(i for val in held_out for i in val) == list(range(23))
    assert [int(x[0, 0]) for x in validation_splits(X, Y, folds=5, seed=4)[0][2]] != held_out[0]
    one = validation_splits(X, Y, folds=1, seed=3)
    assert len(one) == 1 and [int(x[0, 0]) for x in one[0][2]] == [int(x[0, 0]) for x in hold_out(X, Y, 3)[2]]
    for folds in (0, 24):
        with pytest.raises(ValueError, match="folds"):
            validation_splits(X, Y, folds=folds)


def test_choose_takes_the_lowest_error_and_the_first_of_ties():
    grid = [dict(C=c, epsilon=e) for c in (0.1, 1.0, 10.0) for e in (0.1, 1.0)]

    def row(C, eps, err, status="ok"):
        return dict(C=C, epsilon=eps, val_error=err, status=status)

    rows = [row(0.1, 0.1, 0.3), row(0.1, 1.0, 0.2), row(1.0, 0.1, 0.2), row(1.0, 1.0, 0.25),
            row(10.0, 0.1, 0.05, status="failed: boom"), row(10.0, 1.0, 0.4)]
    assert tuning.choose(grid, rows) == dict(C=0.1, epsilon=1.0)      # tie with (1, .1): grid order
    assert tuning.choose(list(reversed(grid)), rows) == dict(C=1.0, epsilon=0.1)
    assert tuning.choose(grid, [row(10.0, 0.1, 0.05, status="failed: boom")]) is None
    assert tuning.choose(grid, [row(0.1, 0.1, float("nan"))]) is None


@pytest.fixture(scope="module")
def tuned_run(tmp_path_factory):
    """Tiny denoising (5 training images: 4 to fit, 1 to validate) with C tuned from {0.1, 10}
    and eps from {0.1, 1}."""
    from slr.suite import render_baselines, runner
    from slr.suite.common import Logger, RunContext
    from slr.suite.methods import TuningGrid
    from slr.suite.provenance import RunInfo

    tiny = get_profile("tiny")
    spec = tiny.spec("baselines")
    profile = tiny.with_spec("baselines", replace(spec, denoise=replace(spec.denoise, n_train=5),
                                                  tune={"denoising": TuningGrid(C=(0.1, 10.0), epsilon=(0.1, 1.0))}))
    out = tmp_path_factory.mktemp("tuned")
    log, info = Logger(quiet=True), RunInfo.collect("tiny", ["slr"])
    runner.run(runner.plan(["baselines"], profile, dict(datasets="denoising")), profile, out,
               RunContext(log=log, info=info, cache_dir=out / "cache", n_threads=1))
    render_baselines.write_report(profile, out, info, log)
    return profile, out


def test_every_ridged_method_is_fitted_on_the_whole_grid(tuned_run):
    profile, out = tuned_run
    rows = pd.read_csv(out / "tuning_results.csv")
    assert (rows.status == "ok").all()
    counts = rows.groupby("method").size().to_dict()
    assert counts == {"slr:Linear": 4, "GradientAlternation": 4, "OneSlackSSVM": 2, "NSlackSSVM": 2,
                      "SubgradientSSVM": 2, "FrankWolfeSSVM": 2, "PiecewiseTraining": 2}
    # the perceptron has no ridge and slr:Boost no C: not tuned
    assert not {"StructuredPerceptron", "slr:Boost"} & set(rows.method)
    assert rows.val_error.between(0, 1).all()


@pytest.mark.parametrize("method, extra", [("OneSlackSSVM", {}), ("SubgradientSSVM", dict(batch_size=1))])
def test_validation_errors_and_test_rows_match_fits_made_here(tuned_run, method, extra):
    """The SSVM refitted here on an independently drawn split gives the CSV's validation errors;
    refitted on all training images with the C of lowest validation error, the test row's error."""
    from slr import baselines

    profile, out = tuned_run
    cfg = profile.spec("baselines")
    Xtr, Ytr, Xte, Yte = cfg.denoise.load()
    order = np.random.default_rng(0).permutation(len(Xtr))
    n_val = len(Xtr) // 5
    fit, val = order[:-n_val], order[-n_val:]
    rows = pd.read_csv(out / "tuning_results.csv")
    ours = rows[rows.method == method].set_index("C")["val_error"]

    def model(C):
        return getattr(baselines, method)(C=C, max_iter=cfg.max_iter[method], n_states=2, random_state=0, **extra)

    errors = {}
    for C in (0.1, 10.0):
        fitted = model(C).fit([Xtr[i] for i in fit], [Ytr[i] for i in fit])
        errors[C] = 1.0 - fitted.score([Xtr[i] for i in val], [Ytr[i] for i in val])
        assert ours[C] == pytest.approx(errors[C], abs=1e-12)
    best = min(errors, key=lambda C: (errors[C], C))
    test = pd.read_csv(out / "baselines_results.csv").set_index("method")
    assert test.loc[method, "test_error"] == pytest.approx(1.0 - model(best).fit(Xtr, Ytr).score(Xte, Yte), abs=1e-12)


def test_report_shows_the_chosen_values_and_the_validation_curves(tuned_run):
    profile, out = tuned_run
    rows = pd.read_csv(out / "tuning_results.csv")
    text = (out / "baselines.md").read_text()
    assert "### denoising: regularisation chosen on a validation split" in text
    assert (out / "baselines_tuning_denoising.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for method, sub in rows.groupby("method"):
        # the lowest error, ties to the smaller C then the smaller eps (the grid's order)
        best = sub.sort_values(["val_error", "C", "epsilon"]).iloc[0]
        chosen = f"C={best.C:g}" + (f", eps={best.epsilon:g}" if method in SMOOTHED else "")
        assert f"| {method} | {chosen} |" in text, method
    assert "On denoising the C of each method with a ridge is chosen on a validation split" in text
    # rows in the profile's order of the methods, whatever order the cells finished in
    from slr.suite.methods import methods_of

    listed = [m for _, m in methods_of("denoising", profile.spec("baselines"))]
    section = text.split("## denoising")[1].split("###")[0]
    shown = [line.split(" | ")[1] for line in section.splitlines() if line.startswith("| ")][2:]
    assert shown == listed
    # the test rows record the values they were fitted with
    test = pd.read_csv(out / "baselines_results.csv").set_index("method")
    for method, sub in rows.groupby("method"):
        best = sub.sort_values(["val_error", "C", "epsilon"]).iloc[0]
        assert (test.loc[method, "C"], test.loc[method, "epsilon"]) == (best.C, best.epsilon), method


def test_report_ignores_tuning_rows_of_another_grid(tuned_run, tmp_path):
    """A row of a grid value the profile no longer tries (left in the directory by an earlier
    run) neither wins the choice nor shows up."""
    import shutil

    from slr.suite import render_baselines
    from slr.suite.common import Logger
    from slr.suite.provenance import RunInfo

    profile, out = tuned_run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    table = tuning.TABLES[0].open(copy, lambda m: None)
    stale = dict(table.rows()[0], C=0.5, val_error=0.0)
    table.upsert([stale])
    render_baselines.write_report(profile, copy, RunInfo.collect("tiny", ["slr"]), Logger(quiet=True))
    text = (copy / "baselines.md").read_text()
    assert "C=0.5" not in text and text.count("| C=0.1 | C=10 |") == 1


def test_a_method_can_try_part_of_the_C_grid():
    """``TuningGrid.C_of``: the named methods try their part of C (with every eps if smoothed),
    the others the whole grid; a part outside the grid is refused; the report says which."""
    from slr.suite.common import Logger, RunContext
    from slr.suite.methods import TuningGrid, grid
    from slr.suite.provenance import RunInfo
    from slr.suite.render_baselines import _regularisation_text

    quick = get_profile("quick")
    spec = quick.spec("baselines")
    tune = TuningGrid(C=(0.1, 1.0, 10.0), epsilon=(0.1, 1.0),
                      C_of={"SubgradientSSVM": (1.0, 10.0), "slr:Linear": (0.1,)})
    spec = replace(spec, tune=dict(spec.tune, letters=tune))
    assert grid(spec, "letters", "SubgradientSSVM") == [dict(C=1.0, epsilon=0.1), dict(C=10.0, epsilon=0.1)]
    assert grid(spec, "letters", "slr:Linear") == [dict(C=0.1, epsilon=0.1), dict(C=0.1, epsilon=1.0)]
    assert [g["C"] for g in grid(spec, "letters", "OneSlackSSVM")] == [0.1, 1.0, 10.0]
    ctx = RunContext(log=Logger(quiet=True), info=RunInfo.collect("quick", ["slr"]), cache_dir=None)
    ctx.memo.update(pystruct=None, crfsuite=None)
    cells = tuning.Tuning().cells(quick.with_spec("baselines", spec), ["letters"], {}, ctx)
    fits = {}
    for c in cells:
        fits.setdefault(c.identity["method"], []).append((c.identity["C"], c.identity["epsilon"]))
    assert fits["SubgradientSSVM"] == [(1.0, 0.1), (10.0, 0.1)] and fits["slr:Linear"] == [(0.1, 0.1), (0.1, 1.0)]
    assert len(fits["GradientAlternation"]) == 6 and len(fits["pystruct:OneSlackSSVM"]) == 3
    assert "C in {0.1, 1, 10} (SubgradientSSVM from {1, 10}, slr:Linear from {0.1}" in _regularisation_text(spec)
    bad = replace(spec, tune=dict(spec.tune, letters=replace(tune, C_of={"SubgradientSSVM": (0.5, 1.0)})))
    with pytest.raises(ValueError, match=r"C_of\['SubgradientSSVM'\] must be part of its C"):
        grid(bad, "letters", "SubgradientSSVM")


def test_quick_letters_leaves_out_only_C_values_that_chose_nothing():
    """The methods that try part of quick's letters C grid choose, on every config's committed
    validation rows over the whole grid, a value of their part: the part chooses the same."""
    from pathlib import Path

    from slr.suite.methods import grid

    spec = get_profile("quick").spec("baselines")
    parts = spec.tune["letters"].C_of
    assert set(parts) == {"GradientAlternation"}
    rows = pd.read_csv(Path(__file__).resolve().parents[2] / "reports" / "tuning_results.csv")
    rows = rows[(rows.dataset == "letters") & (rows.epsilon == 0.1)]
    whole = [dict(C=C, epsilon=0.1) for C in spec.tune["letters"].C]
    checked = 0
    for (config, method), sub in rows[rows.method.isin(list(parts))].groupby(["config", "method"]):
        if set(sub.C) >= set(spec.tune["letters"].C):
            records = sub.to_dict("records")
            assert tuning.choose(whole, records) == tuning.choose(grid(spec, "letters", method), records), method
            checked += 1
    assert checked >= 1
