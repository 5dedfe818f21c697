"""``asv_benchmarks/regressions.py`` (``make bench-compare``'s verdict) on synthetic asv results.

The result files are written in asv's own format (``result_columns``, one value per parameter
combination, ``benchmarks.json`` with units), as ``asv run`` writes them.
"""
from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("regressions", ROOT / "asv_benchmarks" / "regressions.py")
regressions = sys.modules["regressions"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regressions)

BASE, HEAD = "a" * 40, "b" * 40
ENV = "virtualenv-py3.11"
MACHINE = "ci"
COLUMNS = ["result", "params", "version", "started_at", "duration"]
BENCHMARKS = {
    "bench_inference.OCRChain.time_chain_sweeps_scalar": ("seconds", []),
    "bench_inference.ScalarFloor.time_scalar_exp_log_floor": ("seconds", []),
    "bench_inference.OCRChain.time_chain_sweeps": ("seconds", []),
    "bench_trees.BoostingRound.time_fit": (
        "seconds", [["'unary'"], ["'BoostedTrees'", "'LightGBM'"]]),
    "bench_trees.Ratios.track_time_ratio": ("ratio", [["'unary'"]]),
    "bench_learner.Learner.time_fit": ("seconds", []),
}
BASE_VALUES = {
    "bench_inference.OCRChain.time_chain_sweeps_scalar": [1e-3],
    "bench_inference.ScalarFloor.time_scalar_exp_log_floor": [4e-4],
    "bench_inference.OCRChain.time_chain_sweeps": [1e-3],
    "bench_trees.BoostingRound.time_fit": [3.0, 2.5],
    "bench_trees.Ratios.track_time_ratio": [1.2],
    "bench_learner.Learner.time_fit": [1.0],
}


def write(results: Path, commit: str, values: dict[str, list]) -> None:
    """One asv result file of ``commit`` with ``values`` (``None`` is a failed benchmark)."""
    (results / MACHINE).mkdir(parents=True, exist_ok=True)
    (results / MACHINE / "machine.json").write_text(json.dumps({"machine": MACHINE, "version": 1}))
    rows = {name: [vals, BENCHMARKS[name][1], "v", 0, 1.0] for name, vals in values.items()}
    data = {"commit_hash": commit, "env_name": ENV, "date": 0, "params": {"machine": MACHINE},
            "python": "3.11", "requirements": {}, "env_vars": {}, "result_columns": COLUMNS,
            "results": rows, "durations": {}, "version": 2}
    (results / MACHINE / f"{commit[:8]}-{ENV}.json").write_text(json.dumps(data))
    bench = {name: {"name": name, "unit": unit, "params": params, "type": "time"}
             for name, (unit, params) in BENCHMARKS.items()}
    (results / "benchmarks.json").write_text(json.dumps({**bench, "version": 2}))


def scaled(name: str, factor: float) -> dict[str, list]:
    """The base values with ``name`` ``factor`` times larger (every parameter)."""
    return {n: [v * factor for v in vals] if n == name else vals for n, vals in BASE_VALUES.items()}


class Rerun:
    """A fake ``asv run`` on both commits: writes the next head values, records the call."""

    def __init__(self, results: Path, *heads: dict[str, list]):
        self.results, self.heads, self.calls = results, list(heads), []

    def __call__(self, names):
        self.calls.append(names)
        write(self.results, HEAD, self.heads.pop(0))


def run_check(tmp_path, head, *reruns, factor=1.2, bench=regressions.DEFAULT_BENCH):
    write(tmp_path, BASE, BASE_VALUES)
    write(tmp_path, HEAD, head)
    rerun = Rerun(tmp_path, *reruns)
    findings = regressions.check(tmp_path, MACHINE, BASE, HEAD, bench, factor, rerun, reruns=1)
    return [f.label for f in findings if regressions.suspect(f, factor)], rerun.calls, findings


SWEEP = "bench_inference.OCRChain.time_chain_sweeps"


def test_slowdown_of_one_and_a_half_is_a_regression_after_its_rerun(tmp_path):
    bad, calls, findings = run_check(tmp_path, scaled(SWEEP, 1.5), scaled(SWEEP, 1.5))
    assert bad == [SWEEP] and calls == [[SWEEP]]
    (sweep,) = [f for f in findings if f.name == SWEEP]
    assert sweep.attempts == pytest.approx([1.5, 1.5])
    assert "REGRESSION" in regressions.report(findings, 1.2)


def test_slowdown_of_one_point_one_passes_without_a_rerun(tmp_path):
    bad, calls, _ = run_check(tmp_path, scaled(SWEEP, 1.1))
    assert bad == [] and calls == []


def test_noise_is_cleared_by_the_rerun(tmp_path):
    bad, calls, findings = run_check(tmp_path, scaled(SWEEP, 1.5), scaled(SWEEP, 1.02))
    assert bad == [] and calls == [[SWEEP]]
    assert "ok after rerun" in regressions.report(findings, 1.2)


def test_ratio_benchmarks_are_judged_on_their_ratio(tmp_path):
    name = "bench_trees.Ratios.track_time_ratio"
    bad, _, findings = run_check(tmp_path, scaled(name, 1.3), scaled(name, 1.3))
    assert bad == ["bench_trees.Ratios.track_time_ratio('unary')"]
    assert {f.kind for f in findings if f.name == name} == {"ratio"}


def test_floor_and_peer_are_reported_but_never_fail(tmp_path):
    head = scaled("bench_inference.ScalarFloor.time_scalar_exp_log_floor", 2.0)
    head["bench_trees.BoostingRound.time_fit"] = [3.0, 5.0]     # LightGBM twice slower
    bad, calls, findings = run_check(tmp_path, head)
    assert bad == [] and calls == []
    kinds = {f.label: f.kind for f in findings}
    assert kinds["bench_inference.ScalarFloor.time_scalar_exp_log_floor"] == "reference"
    assert kinds["bench_trees.BoostingRound.time_fit('unary', 'LightGBM')"] == "reference"
    assert kinds["bench_trees.BoostingRound.time_fit('unary', 'BoostedTrees')"] == "value"


def test_only_the_selected_benchmarks_are_judged(tmp_path):
    head = scaled("bench_learner.Learner.time_fit", 3.0)
    bad, calls, findings = run_check(tmp_path, head)
    assert bad == [] and calls == []
    assert not any(f.name.startswith("bench_learner") for f in findings)


def test_a_benchmark_failing_on_head_only_is_a_regression(tmp_path):
    head = {**BASE_VALUES, SWEEP: [None]}
    bad, calls, _ = run_check(tmp_path, head, head)
    assert bad == [SWEEP] and calls == [[SWEEP]]


def test_missing_results_are_a_clear_error(tmp_path):
    write(tmp_path, BASE, BASE_VALUES)
    with pytest.raises(regressions.CheckError, match="no asv results for commit bbbbbbbb"):
        regressions.compare(tmp_path, MACHINE, BASE, HEAD, regressions.DEFAULT_BENCH)


def test_cli_judges_existing_results_and_sets_the_exit_status(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(regressions, "HERE", tmp_path)
    monkeypatch.setattr(regressions, "_git", lambda *args, **kw: {"x": BASE, "y": HEAD}[args[1][0]])
    write(tmp_path / "results", BASE, BASE_VALUES)
    write(tmp_path / "results", HEAD, scaled(SWEEP, 1.5))
    assert regressions.main(["--no-run", "--reruns", "0", "x", "y"]) == 1
    assert regressions.main(["--no-run", "--reruns", "0", "--factor", "1.6", "x", "y"]) == 0
    assert regressions.main(["--no-run", "--bench", "^nothing", "x", "y"]) == 2
    assert "no benchmark matching" in capsys.readouterr().err


def test_snapshot_of_the_working_tree_leaves_the_repository_alone(tmp_path):
    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "0")
    (tmp_path / ".gitignore").write_text("ignored\n")
    (tmp_path / "ignored").write_text("x")
    (tmp_path / "new.py").write_text("y")
    status = git("status", "--porcelain")
    commit = regressions.snapshot_worktree(tmp_path)
    assert git("ls-tree", "--name-only", commit).split() == [".gitignore", "new.py"]
    assert git("rev-parse", f"{commit}^") == git("rev-parse", "HEAD")
    assert git("status", "--porcelain") == status and git("branch", "--contains", commit) == ""


def test_cli_reruns_every_parameter_of_a_suspect_and_stops_when_asv_fails(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(regressions, "HERE", tmp_path)
    monkeypatch.setattr(regressions, "_git", lambda *args, **kw: {"x": BASE, "y": HEAD}[args[1][0]])
    name = "bench_trees.BoostingRound.time_fit"
    write(tmp_path / "results", BASE, BASE_VALUES)
    write(tmp_path / "results", HEAD, scaled(name, 1.5))
    calls = []
    monkeypatch.setattr(regressions, "_asv", lambda *args, stdin=None: calls.append((args, stdin)) or 1)
    assert regressions.main(["--no-run", "x", "y"]) == 2
    (args, stdin), = calls
    regex = args[args.index("--bench") + 1]
    assert re.search(regex, f"{name}('unary', 'BoostedTrees')") and not re.search(regex, SWEEP)
    assert stdin.split() == [BASE, HEAD]
    assert "the rerun" in capsys.readouterr().err


def test_default_selection_judges_times_and_ratios_not_scores():
    """Scores are higher-is-better: ``head / base`` beyond the factor would be no regression."""
    selected = re.compile(regressions.DEFAULT_BENCH)
    assert selected.search("bench_trees.BoostingRound.time_fit")
    assert selected.search("bench_trees.Ratios.track_time_ratio")
    assert selected.search("bench_inference.OCRChain.time_chain_sweeps")
    assert selected.search("bench_inference.SweepRatios.track_smoothed_sweep_ratio")
    assert not selected.search("bench_inference.GridSweep.time_max_sweep")   # judged by its ratio
    assert not selected.search("bench_trees.BoostingRound.track_test_score")
    assert not selected.search("bench_trees.TrainingLoss.track_loss_200_rounds")
