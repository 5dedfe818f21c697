"""Command line: ``slr report|denoising|baselines|bound [--tiny|--quick|--full] [--out DIR]``.

Arguments are checked before any work starts; a usage error exits with status 2, a failure
during the run with status 1, each as one line on stderr (``SLR_DEBUG=1`` shows the traceback).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

from slr.suite.registry import EXPERIMENTS as REGISTRY
from slr.suite.registry import REPORTED as EXPERIMENTS

__all__ = ["UsageError", "main", "build_parser", "run_experiments"]


class UsageError(ValueError):
    """A bad argument, found before any work starts (``slr`` exits with status 2)."""


def _threads(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and docs)."""
    parser = argparse.ArgumentParser(
        prog="slr",
        description="Reproduce Domke's structured learning via logistic regression experiments.")
    sub = parser.add_subparsers(dest="command", required=True)
    helps = {"report": f"run every experiment ({', '.join(EXPERIMENTS)}) and write reports/",
             **{name: REGISTRY[name].help for name in EXPERIMENTS}}
    for name, text in helps.items():
        p = sub.add_parser(name, help=text, description=text)
        size = p.add_mutually_exclusive_group()
        size.add_argument("--tiny", dest="profile", action="store_const", const="tiny",
                          help="seconds; for tests")
        size.add_argument("--quick", dest="profile", action="store_const", const="quick",
                          help="minutes on 2 cores (default; every experiment: about 4.5)")
        size.add_argument("--full", dest="profile", action="store_const", const="full",
                          help="the paper's configuration (hours)")
        p.add_argument("--out", default="reports", type=_directory_argument("--out"),
                       help="output directory (default: reports); slr never replaces a file there it did not write")
        p.add_argument("--threads", type=_threads, default=None,
                       help="threads for slr's message passing and oracles (default: all cores)")
        p.add_argument("--cache-dir", type=_directory_argument("--cache-dir"), default=None,
                       help="cache of computed cells (default: $SLR_CACHE_DIR or ~/.cache/slr/results)")
        p.add_argument("--no-cache", action="store_true",
                       help="recompute every cell instead of reusing cached ones (the results are cached anew)")
        cluster = p.add_mutually_exclusive_group()
        cluster.add_argument("--workers", type=_threads, default=None, metavar="N",
                             help="compute the cells on a local Dask cluster of N worker processes")
        cluster.add_argument("--scheduler", default=None, metavar="ADDRESS",
                             help="compute the cells on an existing Dask cluster (e.g. tcp://host:8786)")
        p.add_argument("--render-only", action="store_true",
                       help="rewrite the reports from the CSVs in --out without computing or reading any cell")
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


def _utf8_path(path: Path, option: str) -> Path:
    """``path``, or a ValueError naming ``option`` when it is not UTF-8 text (the reports and CSVs
    record paths and commands as UTF-8)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{option}: {str(path)!r} is not UTF-8 text; choose a path that is") from None
    return Path(path)


#: The transports a Dask scheduler on another process or machine can be reached by.
_SCHEDULER_SCHEMES = ("tcp", "tls")


def _scheduler_address(address: str) -> str:
    """``address`` when it names a Dask scheduler as ``[tcp|tls://]HOST:PORT``, else a ValueError
    naming ``--scheduler``."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    host, colon, port = rest.rpartition(":")
    if (scheme not in _SCHEDULER_SCHEMES or not colon or not host.strip("[]") or not port.isdigit()
            or not 0 < int(port) < 65536 or "/" in host):
        raise ValueError(f"--scheduler: {address!r} is not a Dask scheduler address "
                         f"({'|'.join(_SCHEDULER_SCHEMES)}://HOST:PORT, e.g. tcp://127.0.0.1:8786)")
    return f"{scheme}://{rest}"


def _directory_argument(option: str):
    """The argparse type of ``option``: a non-empty path (an empty one would be the current
    directory, e.g. a checkout whose README.md the report index would replace)."""
    def directory(text: str) -> Path:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{option} must name a directory, got an empty path")
        return Path(text)

    directory.__name__ = option.lstrip("-")   # argparse names the option's type in its messages
    return directory


def _writable_dir(path: Path, option: str) -> Path:
    """``path`` created if needed; a ValueError naming ``option`` if it is empty or cannot be
    written to."""
    if not str(path).strip():
        raise ValueError(f"{option} must name a directory, got an empty path")
    path = _utf8_path(path, option).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option}: {path} exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"{option}: cannot create {path} ({exc.strerror})") from None
    try:
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise ValueError(f"{option}: cannot write in {path} ({exc.strerror})") from None
    return path


@contextlib.contextmanager
def _quiet_stdout(quiet: bool):
    """With ``quiet``, send what libraries print on standard output (HiGHS's banner, from C++)
    to /dev/null, in this process and the processes it starts; ``slr`` itself writes only on
    standard error."""
    if not quiet:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


@contextlib.contextmanager
def _thread_limits(threads: int | None):
    """Limit OpenMP and BLAS threads in this process (threadpoolctl) and in the subprocesses it
    starts (the pystruct peer), for the duration of a run."""
    from threadpoolctl import threadpool_limits

    if threads is None:
        yield
        return
    names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update({name: str(threads) for name in names})
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_experiments(names, profile_name: str, out: Path, *, threads: int | None = None,
                    quiet: bool = False, argv: list[str] | None = None, cells: str | None = None,
                    datasets: str | None = None, cache_dir: Path | None = None, read_cache: bool = True,
                    render_only: bool = False, workers: int | None = None, scheduler: str | None = None):
    """Run the named experiments and write their reports: the cells of all of them go to the
    engine together (each from the cache or computed), then each report is rendered.

    ``cells`` (``"U/P,..."``) restricts the denoising experiment to those cells, ``datasets``
    (``"letters,..."``) the baselines experiment to those data sets. ``cache_dir`` defaults to
    :func:`slr.suite.store.default_cache_dir`; ``read_cache=False`` recomputes every cell;
    ``render_only`` only rewrites the reports from the CSVs in ``out``. ``workers`` (a local
    cluster of that many processes) or ``scheduler`` (an existing cluster's address) compute the
    cells as Dask tasks; this process alone writes the cache and the results. The output and
    cache directories are locked for the run (one lock when they are one directory, taken in a
    fixed order otherwise): a second run on either waits. ``render_only`` neither reads nor
    locks the cache.

    Returns
    -------
    Logger
        Its ``computed`` list names every cell computed in this call.

    Raises
    ------
    UsageError
        For a bad argument (profile, cells, data sets, thread count, unusable directory),
        before any work starts.
    ValueError
        When the Dask cluster cannot be used (not installed, scheduler unreachable).
    """
    from slr.suite import get_profile, render_distributed, runner
    from slr.suite.common import Logger, RunContext
    from slr.suite.index import write_index
    from slr.suite.provenance import RunInfo
    from slr.validation import check_int
    from slr.suite.store import check_ours, default_cache_dir, run_locks

    try:
        profile = get_profile(profile_name)
        planned = runner.plan(names, profile, dict(cells=cells, datasets=datasets))
        if threads is not None:
            check_int(threads, "--threads", 1)
        if scheduler is not None:
            scheduler = _scheduler_address(scheduler)
        out = _writable_dir(out, "--out")
        for name in ("README.md", *(f"{name}.md" for name in names)):
            check_ours(out / name)
        for name in render_distributed.OUTPUTS:
            check_ours(out / "distributed" / name)
        cache_dir = _utf8_path(cache_dir if cache_dir is not None else default_cache_dir(), "--cache-dir")
        if not render_only:
            cache_dir = _writable_dir(cache_dir, "--cache-dir")
    except FileExistsError as exc:
        raise UsageError(f"--out: {exc.filename}: {exc.strerror}") from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    log = Logger(quiet=quiet)
    info = RunInfo.collect(profile.name, argv, computing=not render_only)
    engine = None
    if (workers is not None or scheduler is not None) and not render_only:
        from slr.suite.engine import connect

        engine = connect(workers, scheduler, threads)
    ctx = RunContext(log=log, info=info, cache_dir=cache_dir, read_cache=read_cache, n_threads=threads,
                     engine=engine)
    log(f"computing cells {ctx.engine.describe()}")
    summaries = {}
    t0 = time.perf_counter()
    locked = [out] if render_only else [out, cache_dir]
    with contextlib.closing(ctx.engine), run_locks(locked, log), _thread_limits(threads):
        # one run for all experiments: the engine takes every experiment's cells, the costliest
        # first, instead of idling at the end of each experiment
        if not render_only:
            log(f"== {', '.join(names)} ({profile.name} profile) -> {out}")
        records = {} if render_only else runner.run(planned, profile, out, ctx)
        for name in names:
            summaries[name] = REGISTRY[name].render(profile, out, info, log, records.get(name))
            log(f"== {name}: wrote {out / (name + '.md')}")
        # The index lists every report present, with headlines re-read from their CSVs now.
        for name in EXPERIMENTS:
            if name not in summaries and (out / f"{name}.md").exists():
                summaries[name] = REGISTRY[name].render(profile, out, info, log)
        # measured apart (asv_benchmarks/distributed_scale.py): redrawn from its CSVs, never rerun
        if (out / "distributed" / "workers.csv").exists():
            summaries["distributed"] = render_distributed.write_report(out / "distributed", info)
        wall = time.perf_counter() - t0
        whole_run = set(names) == set(EXPERIMENTS) and not render_only
        write_index(out, info, summaries, wall if whole_run else None, len(log.computed))
    log(f"done in {wall:.1f}s ({len(log.computed)} cells computed); index: {out / 'README.md'}")
    return log


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``slr`` console script."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    names = EXPERIMENTS if args.command == "report" else (args.command,)
    kwargs = dict(threads=args.threads, quiet=args.quiet, argv=["slr", *argv], cells=getattr(args, "cells", None),
                  datasets=getattr(args, "datasets", None), cache_dir=args.cache_dir, read_cache=not args.no_cache,
                  render_only=args.render_only, workers=args.workers, scheduler=args.scheduler)
    try:
        with _quiet_stdout(args.quiet):   # around the whole run: Dask's worker processes inherit it
            run_experiments(names, args.profile, args.out, **kwargs)
    except UsageError as exc:
        parser.error(str(exc))
    except KeyboardInterrupt:
        print("slr: interrupted; finished cells are cached, a rerun resumes", file=sys.stderr)
        return 130
    except Exception as exc:
        if os.environ.get("SLR_DEBUG"):
            raise
        message = str(exc).splitlines()[0] if str(exc) else ""
        print(f"slr: error: {type(exc).__name__}: {message} (SLR_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
