"""Scale figures of the data-parallel learner (slr.distributed) on synthetic denoising.

Three experiments, each on fresh ``LocalCluster`` s of worker processes (one thread each):

- ``memory``: peak resident memory per worker against the number of images (2 workers, 3
  iterations), beside the single-process learner's peak on the same data (a subprocess);
- ``workers``: seconds per iteration and bytes moved per iteration against the number of
  workers (one partition per worker), on one data set;
- ``limit``: the distributed learner's goal. A data set whose training needs more memory than one
  worker's ``memory_limit`` trains on 2 workers of that limit (and kills the one worker that tries
  alone), to the test error of a smaller single-process run of the same protocol.

Usage::

    python asv_benchmarks/distributed_scale.py memory workers limit --out reports/distributed
    python asv_benchmarks/distributed_scale.py --render-only    # the page again, from the CSVs

Each experiment writes ``<name>.csv`` to ``--out`` and prints it; then the page of the figures,
``README.md`` and ``workers.png`` in ``--out`` (:mod:`slr.suite.render_distributed`, which ``slr report``
also runs on the committed CSVs), is drawn again. Times are this machine's under its load at the
time; the bytes are the fit's own tally (``transfer_``).
"""
from __future__ import annotations

import argparse
import functools
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

SIZE, SIGMA = 100, 10.0   # the denoising protocol's images
# Algorithm 1.1 in both modes (the single-process default for Linear oracles is the joint solver)
PROTOCOL = dict(max_iter=3, tol=0, random_state=0, n_jobs=1, monitor=False, solver="alternation")


def _images(n_images: int, seed: int) -> tuple:
    from slr.datasets import make_denoising

    return make_denoising(n_images=n_images, size=SIZE, sigma=SIGMA, random_state=seed)


def _sources(n_images: int, n_partitions: int, seed: int = 0) -> list:
    """``n_images`` images in ``n_partitions`` partitions, each generated on its worker."""
    counts = np.diff(np.linspace(0, n_images, n_partitions + 1).round().astype(int))
    return [functools.partial(_images, int(count), seed * 1000 + p) for p, count in enumerate(counts) if count]


def _peak_rss() -> int:
    """This process's peak resident set size in bytes (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _cluster(n_workers: int, memory_limit: str | None = None):
    """Worker processes; with ``memory_limit`` a worker is killed above 95% of it, and never paused
    or spilled first (a paused worker would stall the fit instead of failing it)."""
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set({"distributed.worker.memory.target": False, "distributed.worker.memory.spill": False,
                          "distributed.worker.memory.pause": False}):
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                               silence_logs=50, memory_limit=memory_limit)
    return cluster, Client(cluster)


def _distributed_fit(client, sources, **settings):
    from slr.distributed import DaskStructuredLogisticRegression

    return DaskStructuredLogisticRegression(**{**PROTOCOL, **settings}).fit_sources(sources)


def _single_process_peak(n_images: int) -> int:
    """Peak RSS of a fresh interpreter fitting the single-process learner on the same images."""
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import distributed_scale as d; "
            f"from slr import StructuredLogisticRegression as S; import numpy as np; "
            f"parts = [s() for s in d._sources({n_images}, 2)]; "
            f"X = sum((p[0] for p in parts), []); Y = sum((p[1] for p in parts), []); "
            f"S(**d.PROTOCOL).fit(X, Y); print(d._peak_rss())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


def memory(counts=(4, 8, 16, 32)) -> pd.DataFrame:
    rows = []
    for n_images in counts:
        cluster, client = _cluster(2)
        with cluster, client:
            idle = client.run(_peak_rss)
            _distributed_fit(client, _sources(n_images, 2))
            peaks = client.run(_peak_rss)
        rows.append({"n_images": n_images, "n_nodes": n_images * SIZE * SIZE,
                     "worker_peak_mb": max(peaks.values()) / 2**20,
                     "worker_idle_mb": max(idle.values()) / 2**20,
                     "single_process_peak_mb": _single_process_peak(n_images) / 2**20})
    return pd.DataFrame(rows)


def workers(n_images: int = 8, counts=(1, 2)) -> pd.DataFrame:
    rows = []
    for n_workers in counts:
        cluster, client = _cluster(n_workers)
        with cluster, client:
            model = _distributed_fit(client, _sources(n_images, n_workers))
        per_iteration = model.transfer_.iloc[1:]
        moved = per_iteration["bytes_sent"] + per_iteration["bytes_received"]
        rows.append({"n_workers": n_workers, "n_images": n_images,
                     "seconds_per_iteration": float(np.diff(model.history_["seconds"]).mean()),
                     "bytes_per_iteration": float(moved.mean()),
                     "tasks_per_iteration": float(per_iteration["tasks"].mean()),
                     "load_bytes": int(model.transfer_["bytes_sent"].iloc[0])})
    return pd.DataFrame(rows)


def limit(big: int = 64, small: int = 8, memory_limit: str = "450MB", max_iter: int = 10,
          n_test: int = 8) -> pd.DataFrame:
    """Train ``big`` images on 2 workers of ``memory_limit`` (and try 1), and ``small`` images in one process."""
    from slr import StructuredLogisticRegression

    settings = {"max_iter": max_iter}
    test = _sources(n_test, 1, seed=99)
    rows = []
    for n_workers in (1, 2):
        cluster, client = _cluster(n_workers, memory_limit)
        with cluster, client:
            start = time.perf_counter()
            try:
                model = _distributed_fit(client, _sources(big, 2), **settings)
                error, outcome = 1.0 - model.score_sources(test), "trained"
            except Exception as failure:   # the worker over its limit is killed: KilledWorker
                error, outcome = float("nan"), type(failure).__name__
            peaks = client.run(_peak_rss) if outcome == "trained" else {}   # a killed worker's peak is gone
        rows.append({"run": f"{n_workers} worker(s) x {memory_limit}", "n_images": big, "outcome": outcome,
                     "test_error": error, "worker_peak_mb": max(peaks.values(), default=float("nan")) / 2**20,
                     "seconds": time.perf_counter() - start})
    parts = [source() for source in _sources(small, 2)]
    single = StructuredLogisticRegression(**{**PROTOCOL, **settings}).fit(
        sum((p[0] for p in parts), []), sum((p[1] for p in parts), []))
    X_test, Y_test = test[0]()
    rows.append({"run": "single process", "n_images": small, "outcome": "trained",
                 "test_error": 1.0 - single.score(X_test, Y_test), "worker_peak_mb": _peak_rss() / 2**20,
                 "seconds": float("nan")})
    return pd.DataFrame(rows)


EXPERIMENTS = {"memory": memory, "workers": workers, "limit": limit}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # checked below: Python 3.11's argparse refuses an empty list against choices
    parser.add_argument("experiments", nargs="*", metavar="{" + ",".join(sorted(EXPERIMENTS)) + "}")
    parser.add_argument("--out", type=Path, default=Path("reports/distributed"))
    parser.add_argument("--render-only", action="store_true",
                        help="measure nothing: draw the page again from the CSVs in --out")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.experiments) - set(EXPERIMENTS))
    if unknown:
        parser.error(f"experiments must be among {sorted(EXPERIMENTS)}, got {unknown}")
    if not args.experiments and not args.render_only:
        parser.error("name the experiments to run, or --render-only")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.experiments:
        frame = EXPERIMENTS[name]()
        frame.to_csv(args.out / f"{name}.csv", index=False)
        print(f"## {name}\n{frame.to_string(index=False)}\n", flush=True)
    if (args.out / "workers.csv").exists():
        _render(args.out, argv)


def _render(out: Path, argv: list[str] | None) -> None:
    """The page of the figures in ``out``, naming this command as its renderer."""
    import dataclasses

    from slr.suite.provenance import RunInfo
    from slr.suite.render_distributed import write_report

    command = " ".join(["python", "asv_benchmarks/distributed_scale.py", *(sys.argv[1:] if argv is None else argv)])
    write_report(out, dataclasses.replace(RunInfo.collect("distributed", computing=False), command=command))
    print(f"wrote {out / 'README.md'}", flush=True)


if __name__ == "__main__":
    main()
