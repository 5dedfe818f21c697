"""Command line: ``slr report|denoising|baselines|bound [--tiny|--quick|--full] [--out DIR]``."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

__all__ = ["main", "build_parser", "run_experiments"]

EXPERIMENTS = ("denoising", "baselines", "bound")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and docs)."""
    parser = argparse.ArgumentParser(
        prog="slr",
        description="Reproduce Domke's structured learning via logistic regression experiments.")
    sub = parser.add_subparsers(dest="command", required=True)
    helps = {
        "report": "run every experiment (denoising, baselines, bound) and write reports/",
        "denoising": "Table 1: every unary x pairwise function class on synthetic denoising",
        "baselines": "compare slr with SSVMs, perceptron, piecewise training and pystruct",
        "bound": "check Theorem 1.1 on random small graphs against exact solvers",
    }
    for name, text in helps.items():
        p = sub.add_parser(name, help=text, description=text)
        size = p.add_mutually_exclusive_group()
        size.add_argument("--tiny", dest="profile", action="store_const", const="tiny",
                          help="seconds; for tests")
        size.add_argument("--quick", dest="profile", action="store_const", const="quick",
                          help="about 10 minutes on 2 cores (default)")
        size.add_argument("--full", dest="profile", action="store_const", const="full",
                          help="the paper's configuration (hours)")
        p.add_argument("--out", default="reports", type=Path, help="output directory (default: reports)")
        p.add_argument("--threads", type=int, default=None, help="message-passing threads (default: all cores)")
        p.add_argument("--quiet", action="store_true", help="no progress output")
        p.set_defaults(profile="quick")
        if name == "denoising":
            p.add_argument("--cells", default=None, metavar="U/P,...",
                           help="compute only these unary/pairwise cells, e.g. Boost/Boost,Linear/Linear "
                                "(the report shows every cell computed so far)")
        if name == "baselines":
            p.add_argument("--datasets", default=None, metavar="NAME,...",
                           help="run only these data sets, e.g. letters (default: denoising,letters)")
    return parser


def run_experiments(names, profile_name: str, out: Path, *, threads: int | None = None,
                    quiet: bool = False, argv: list[str] | None = None, cells: str | None = None,
                    datasets: str | None = None):
    """Run the named experiments (resuming from cached cells) and write their reports.

    ``cells`` (``"U/P,..."``) restricts the denoising experiment to those cells, ``datasets``
    (``"letters,..."``) the baselines experiment to those data sets.

    Returns
    -------
    Logger
        Its ``computed`` list names every cell computed in this call.
    """
    from slr.reports import get_profile
    from slr.reports import baselines, bound, denoising
    from slr.reports.common import Logger
    from slr.reports.index import write_index
    from slr.reports.meta import collect_meta

    profile = get_profile(profile_name)
    denoising_cells = denoising.parse_cells(cells, profile.denoise["classes"]) if cells is not None else None
    baseline_datasets = baselines.parse_datasets(datasets) if datasets is not None else None
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    log = Logger(quiet=quiet)
    meta = collect_meta(profile.name, argv)
    modules = {"denoising": denoising, "baselines": baselines, "bound": bound}
    summaries = {}
    t0 = time.perf_counter()
    for name in names:
        log(f"== {name} ({profile.name} profile) -> {out}")
        if name == "denoising":
            modules[name].run(profile, out, log, n_threads=threads, cells=denoising_cells)
        elif name == "baselines":
            modules[name].run(profile, out, log, datasets=baseline_datasets)
        else:
            modules[name].run(profile, out, log)
        summaries[name] = modules[name].write_report(profile, out, meta)
        log(f"== {name}: wrote {out / (name + '.md')}")
    # The index always lists every report present, with headlines from those re-read now.
    for name in EXPERIMENTS:
        if name not in summaries and (out / f"{name}.md").exists():
            try:
                summaries[name] = modules[name].write_report(profile, out, meta)
            except Exception:   # a report from an incompatible older run: leave it as is
                pass
    write_index(out, meta, summaries, time.perf_counter() - t0 if set(names) == set(EXPERIMENTS) else None)
    log(f"done in {time.perf_counter() - t0:.1f}s; index: {out / 'README.md'}")
    return log


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``slr`` console script."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    cells = getattr(args, "cells", None)
    datasets = getattr(args, "datasets", None)
    from slr.reports.baselines import parse_datasets
    from slr.reports.denoising import parse_cells
    from slr.reports.profiles import FUNCTION_CLASSES

    try:
        if cells is not None:
            parse_cells(cells, FUNCTION_CLASSES)
        if datasets is not None:
            parse_datasets(datasets)
    except ValueError as exc:
        parser.error(str(exc))
    names = EXPERIMENTS if args.command == "report" else (args.command,)
    run_experiments(names, args.profile, args.out, threads=args.threads, quiet=args.quiet,
                    argv=["slr", *argv], cells=cells, datasets=datasets)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
