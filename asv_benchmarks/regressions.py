"""Regression check between two commits of asv results (``make bench-compare``).

``python regressions.py [--factor 1.2] [--bench REGEX] [--reruns 1] [BASE [HEAD]]`` runs
``asv continuous`` between two revisions and then judges the selected benchmarks from asv's
result JSON (``results/<machine>/<commit>-<env>.json``, column names in ``result_columns``;
units in ``results/benchmarks.json``):

* benchmarks whose unit is ``ratio`` (the ``Ratios``-style ``track_`` benchmarks: ours against
  a floor or a peer, timed back to back in one process) are judged on that ratio, which a
  busy machine slows on both sides alike;
* other benchmarks are judged on ``head / base`` of their values;
* floor and peer measurements themselves (a benchmark or parameter naming ``floor`` or
  ``LightGBM``) are reported but never fail the check: numpy or LightGBM getting slower is
  not a regression of ours;
* a benchmark beyond the factor is a *suspect*: it is rerun on both commits (``--reruns``
  times) and fails only when every measurement is beyond the factor. Noise on a shared
  machine rarely repeats; a real slowdown does.

Without revisions: the working tree against ``main`` when the tree has changes (committed as
a snapshot object that no branch, index or file refers to, its results removed afterwards),
else ``HEAD~1`` against ``HEAD``. Exit status: 0 no regression, 1 regression, 2 usage error
or missing results.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
#: The inference benchmarks, the tree times and memory, and the ratios: not the scores and losses
#: (higher or lower is better, not a time) nor the 200-round loss tracking. The single sweeps of
#: ``GridSweep`` (a few hundred microseconds, moved by any load) are judged by their ratios to the
#: floor timed in the same process (``SweepRatios``), not by their own times.
DEFAULT_BENCH = (r"^bench_inference\.(?!GridSweep\.)"
                 r"|^bench_trees\.(BoostingRound\.(time|peakmem)_|Ratios\.)")
#: Floor and peer measurements: reported, never a regression of ours.
REFERENCE = re.compile(r"floor|LightGBM")


class CheckError(Exception):
    """Results missing or unreadable, or a revision git does not know (exit status 2)."""


@dataclass
class Finding:
    """One benchmark at one parameter combination, measured on both commits."""

    name: str
    params: tuple[str, ...]
    kind: str                      # "ratio", "reference" or "value"
    base: float | None
    head: float | None
    attempts: list[float] = field(default_factory=list)   # head / base, first run then reruns

    @property
    def label(self) -> str:
        return f"{self.name}({', '.join(self.params)})" if self.params else self.name

    @property
    def change(self) -> float | None:
        return self.attempts[-1] if self.attempts else None


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def load_values(results_dir: Path, machine: str, commit: str) -> dict[tuple[str, str, tuple], float | None]:
    """``{(env, benchmark, params): value}`` from every result file of ``commit`` on ``machine``.

    A failed or skipped measurement has the value ``None``.
    """
    found: dict[tuple[str, str, tuple], float | None] = {}
    machine_dir = results_dir / machine
    for path in sorted(machine_dir.glob("*.json")) if machine_dir.is_dir() else []:
        if path.name == "machine.json":
            continue
        try:
            data = json.loads(path.read_text())
            if data.get("commit_hash") != commit:
                continue
            columns = data["result_columns"]
            for name, row in data["results"].items():
                row = dict(zip(columns, row))
                params = row.get("params") or []
                combos = list(itertools.product(*params)) if params else [()]
                values = row.get("result")
                values = values if isinstance(values, list) else [values] * len(combos)
                for combo, value in zip(combos, values):
                    found[(data["env_name"], name, combo)] = _number(value)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CheckError(f"cannot read asv results file {path}: {exc}") from exc
    if not found:
        raise CheckError(f"no asv results for commit {commit[:8]} in {machine_dir}")
    return found


def load_units(results_dir: Path) -> dict[str, str]:
    """Benchmark name -> unit, from asv's ``benchmarks.json``."""
    path = results_dir / "benchmarks.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CheckError(f"cannot read {path}: {exc}") from exc
    return {name: b.get("unit", "") for name, b in data.items() if isinstance(b, dict)}


def compare(results_dir: Path, machine: str, base: str, head: str, bench: str) -> list[Finding]:
    """Pair the selected benchmarks' values on ``base`` and ``head`` (same environment)."""
    units = load_units(results_dir)
    before = load_values(results_dir, machine, base)
    after = load_values(results_dir, machine, head)
    pattern = re.compile(bench)
    findings = []
    for key in sorted(before.keys() & after.keys()):
        _, name, params = key
        if not pattern.search(name):
            continue
        if REFERENCE.search(name) or any(REFERENCE.search(p) for p in params):
            kind = "reference"
        else:
            kind = "ratio" if units.get(name) == "ratio" else "value"
        finding = Finding(name, params, kind, before[key], after[key])
        if finding.base and finding.head is not None:
            finding.attempts.append(finding.head / finding.base)
        findings.append(finding)
    if not findings:
        raise CheckError(f"no benchmark matching {bench!r} was measured on both commits")
    return findings


def suspect(finding: Finding, factor: float) -> bool:
    """Beyond the factor (or failing on head only), and one of ours."""
    if finding.kind == "reference":
        return False
    if finding.head is None:
        return finding.base is not None
    return finding.change is not None and finding.change > factor


def check(results_dir: Path, machine: str, base: str, head: str, bench: str, factor: float,
          rerun: Callable[[list[str]], None], reruns: int = 1) -> list[Finding]:
    """Every selected benchmark, suspects rerun: the regressions are those still ``suspect``.

    ``rerun(names)`` measures the named benchmarks again on both commits, writing asv results;
    a suspect stays one only if its rerun is beyond the factor too.
    """
    findings = compare(results_dir, machine, base, head, bench)
    for _ in range(reruns):
        suspects = [f for f in findings if suspect(f, factor)]
        if not suspects:
            break
        rerun(sorted({f.name for f in suspects}))
        again = {(f.name, f.params): f for f in compare(results_dir, machine, base, head, bench)}
        for f in suspects:
            new = again.get((f.name, f.params))
            if new is not None:
                f.base, f.head = new.base, new.head
                if new.attempts:
                    f.attempts += new.attempts
    return findings


def report(findings: list[Finding], factor: float) -> str:
    """A table of every compared benchmark and its verdict."""
    def fmt(x):
        return "failed" if x is None else f"{x:.4g}"

    lines = [f"{'benchmark':70} {'kind':9} {'base':>10} {'head':>10}  head/base (runs)  verdict"]
    for f in findings:
        runs = ", ".join(f"{a:.2f}" for a in f.attempts) or "-"
        if suspect(f, factor):
            verdict = f"REGRESSION (> {factor})"
        elif f.kind == "reference":
            verdict = "reference (not judged)"
        elif len(f.attempts) > 1:
            verdict = "ok after rerun"
        else:
            verdict = "ok"
        lines.append(f"{f.label:70} {f.kind:9} {fmt(f.base):>10} {fmt(f.head):>10}  {runs:16} {verdict}")
    return "\n".join(lines)


def _git(*args: str, repo: Path = HERE.parent, env: dict | None = None,
         stdin: str | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env=env,
                          input=stdin)
    if proc.returncode:
        raise CheckError(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def snapshot_worktree(repo: Path = HERE.parent) -> str:
    """A commit object of the working tree (tracked and untracked, not ignored files).

    It goes through a temporary index file, so the repository's index, branches and files
    are untouched; the commit is referred to by nothing and git's gc removes it in time.
    """
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git("read-tree", "HEAD", repo=repo, env=env)
        paths = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard", repo=repo,
                     env=env)
        _git("update-index", "--add", "--remove", "-z", "--stdin", repo=repo, env=env,
             stdin=paths)
        tree = _git("write-tree", repo=repo, env=env)
    return _git("commit-tree", tree, "-p", "HEAD", "-m", "bench-compare: working tree snapshot",
                repo=repo)


def default_revisions() -> tuple[str, str, bool]:
    """``(base, head, is_snapshot)``: main against the working tree, or HEAD~1 against HEAD."""
    if _git("status", "--porcelain", "--untracked-files=normal"):
        return _git("rev-parse", "main^{commit}"), snapshot_worktree(), True
    return _git("rev-parse", "HEAD~1^{commit}"), _git("rev-parse", "HEAD^{commit}"), False


def machine_name(results_dir: Path) -> str:
    """The one machine with results, or the name in ``~/.asv-machine.json``."""
    machines = [p.name for p in results_dir.iterdir() if (p / "machine.json").is_file()] \
        if results_dir.is_dir() else []
    if len(machines) == 1:
        return machines[0]
    try:
        return next(iter(json.loads((Path.home() / ".asv-machine.json").read_text()).keys() - {"version"}))
    except (OSError, ValueError, StopIteration) as exc:
        raise CheckError("cannot tell the asv machine: pass --machine") from exc


def _asv(*args: str, stdin: str | None = None) -> int:
    return subprocess.run([sys.executable, "-m", "asv", *args], cwd=HERE, input=stdin, text=True).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", nargs="?", help="reference revision (default: see above)")
    parser.add_argument("head", nargs="?", help="revision checked (default: see above)")
    parser.add_argument("--factor", type=float, default=1.2, help="allowed head/base (default 1.2)")
    parser.add_argument("--bench", default=DEFAULT_BENCH, help="benchmarks judged (regex)")
    parser.add_argument("--reruns", type=int, default=1, help="reruns of a suspect (default 1)")
    parser.add_argument("--machine", help="asv machine name (default: the one with results)")
    parser.add_argument("--no-run", action="store_true", help="judge existing results only")
    args = parser.parse_args(argv)
    if args.factor <= 1 or args.reruns < 0 or (args.head and not args.base):
        parser.error("--factor must exceed 1, --reruns be >= 0, HEAD comes with BASE")
    results_dir = HERE / "results"
    snapshot = False
    try:
        if args.base:
            base = _git("rev-parse", f"{args.base}^{{commit}}")
            head = _git("rev-parse", f"{args.head or 'HEAD'}^{{commit}}")
        else:
            base, head, snapshot = default_revisions()
        print(f"bench-compare: {base[:8]} (base) against {head[:8]}"
              f"{' (working tree)' if snapshot else ''}, factor {args.factor}", flush=True)
        if not args.no_run:
            # asv's own verdict is printed for reading; ours below decides
            _asv("continuous", "--show-stderr", "--factor", str(args.factor), "--bench", args.bench,
                 base, head)
        machine = args.machine or machine_name(results_dir)

        def rerun(names: list[str]) -> None:
            print(f"rerunning {len(names)} suspect benchmark(s): {', '.join(names)}", flush=True)
            # asv matches a parameterized benchmark as "name(param, ...)": every combination
            regex = "|".join(f"^{re.escape(n)}(\\(|$)" for n in names)
            status = _asv("run", "--show-stderr", "--bench", regex, "HASHFILE:-",
                          stdin=f"{base}\n{head}\n")
            if status not in (0, 2):        # 2: a benchmark failed, which the verdict shows
                raise CheckError(f"the rerun (asv run --bench {regex!r}) exited with {status}")

        findings = check(results_dir, machine, base, head, args.bench, args.factor, rerun,
                         args.reruns)
    except CheckError as exc:
        print(f"bench-compare: {exc}", file=sys.stderr)
        return 2
    finally:
        if snapshot:
            for path in results_dir.glob(f"*/{head[:8]}-*.json"):
                path.unlink()
    print(report(findings, args.factor))
    regressions = [f for f in findings if suspect(f, args.factor)]
    if regressions:
        print(f"bench-compare: {len(regressions)} regression(s) beyond {args.factor}x", file=sys.stderr)
        return 1
    print("bench-compare: no regression")
    return 0


if __name__ == "__main__":
    sys.exit(main())
