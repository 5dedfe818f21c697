"""Rows the current spec would not produce never stand under its config, on the suite's own
experiments: the tuning and test cells of the comparison (tiny letters, two methods), where a
per-data-set grid or budget changes cells without changing the config column (the quick spec's
``C_of``, which left three letters rows of C = 10 beside the new ones, commit 6a7946e)."""
from __future__ import annotations

from dataclasses import replace

from slr.suite import baselines, get_profile, runner, tuning
from slr.suite.common import Logger, RunContext
from slr.suite.methods import TuningGrid, methods_of
from slr.suite.provenance import RunInfo, config_hash

KEPT = ("OneSlackSSVM", "SubgradientSSVM")


def _profile(**changes):
    """tiny with only ``KEPT`` run, on letters only (denoising's methods all skipped), C tuned on {.1, 1}."""
    tiny = get_profile("tiny")
    spec = tiny.spec("baselines")
    skip = {dataset: tuple(m for _, m in methods_of(dataset, spec) if dataset != "letters" or m not in KEPT)
            for dataset in spec.datasets()}
    spec = replace(spec, skip=skip, tune=dict(letters=TuningGrid(C=(0.1, 1.0), epsilon=(0.1,))))
    return tiny.with_spec("baselines", replace(spec, **changes))


def _run(tmp_path, profile, datasets=None):
    log = Logger(quiet=True)
    ctx = RunContext(log=log, info=RunInfo.collect("tiny", ["slr"]), cache_dir=tmp_path / "cache", n_threads=1)
    runner.run(runner.plan(["baselines"], profile, dict(datasets=datasets)), profile, tmp_path / "out", ctx)
    messages = []
    tables = {t.file: t.open(tmp_path / "out", messages.append).rows()
              for t in (*tuning.TABLES, *baselines.TABLES)}
    assert messages == []      # every row's check verifies
    return log.computed, tables


def _fits(rows):
    return {(r["method"], float(r["C"])): r for r in rows}


def test_a_grid_or_budget_of_one_data_set_leaves_no_stale_row_under_the_config(tmp_path):
    first = _profile()
    computed, tables = _run(tmp_path, first)
    config = config_hash(first.spec("baselines").config())
    assert len(computed) == 6
    fits = _fits(tables["tuning_results.csv"])
    assert set(fits) == {(m, C) for m in KEPT for C in (0.1, 1.0)} and {r["config"] for r in fits.values()} == {config}

    # OneSlackSSVM tries only C = 1 on letters, SubgradientSSVM runs 3 iterations there: per-cell
    # settings, so the config column stays
    second = _profile(tune=dict(letters=TuningGrid(C=(0.1, 1.0), epsilon=(0.1,), C_of={"OneSlackSSVM": (1.0,)})),
                      budgets=dict(letters=dict(SubgradientSSVM=3)))
    assert config_hash(second.spec("baselines").config()) == config

    # a run of another data set keeps the letters rows as they were
    computed, tables = _run(tmp_path, second, datasets="denoising")
    assert computed == [] and _fits(tables["tuning_results.csv"]) == fits

    # a run that covers letters leaves only the rows the spec produces now
    computed, tables = _run(tmp_path, second, datasets="letters")
    assert sorted(computed) == ["baselines:letters:OneSlackSSVM", "baselines:letters:SubgradientSSVM",
                                "tuning:letters:SubgradientSSVM:C=0.1,eps=0.1",
                                "tuning:letters:SubgradientSSVM:C=1,eps=0.1"]
    now = _fits(tables["tuning_results.csv"])
    assert set(now) == {("OneSlackSSVM", 1.0), ("SubgradientSSVM", 0.1), ("SubgradientSSVM", 1.0)}
    assert now["OneSlackSSVM", 1.0] == fits["OneSlackSSVM", 1.0]                  # from the cache, as it was
    test_rows = {r["method"]: r for r in tables["baselines_results.csv"]}
    assert set(test_rows) == set(KEPT) and float(test_rows["OneSlackSSVM"]["C"]) == 1.0
    curve_methods = {(r["method"], r["config"]) for r in tables["baselines_curves.csv"]}
    assert curve_methods == {(m, config) for m in KEPT}
    # the test curves have the points of the new fits only (a curve never keeps an older tail)
    for method in KEPT:
        points = sorted(int(r["point"]) for r in tables["baselines_curves.csv"] if r["method"] == method)
        assert points == list(range(len(points)))

    # the complete run after it answers everything from the cache and changes no row
    again, tables_again = _run(tmp_path, second)
    assert again == [] and tables_again == tables
