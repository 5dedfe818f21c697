"""``distributed/README.md`` and ``distributed/workers.png``: the data-parallel learner's scale
figures, drawn from the CSVs that ``asv_benchmarks/distributed_scale.py`` writes to a report
directory's ``distributed/`` (``workers.csv``; ``memory.csv`` and ``limit.csv`` where present).

Render only: the measurements need a cluster of worker processes and a quiet machine, so ``slr
report`` never reruns them; it redraws the page from the CSVs committed with the reports.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from slr.suite.figures import plt, save_fig
from slr.suite.markdown import table
from slr.suite.provenance import RunInfo
from slr.suite.store import write_output

__all__ = ["COMMAND", "OUTPUTS", "write_report"]

#: The command that measures the figures (and renders this page after it).
COMMAND = "python asv_benchmarks/distributed_scale.py memory workers limit --out reports/distributed"
#: The page and its figure, written in the CSVs' directory.
PAGE, FIGURE = "README.md", "workers.png"
OUTPUTS = (PAGE, FIGURE)


def write_report(directory: Path, info: RunInfo) -> dict:
    """Write ``directory/README.md`` and ``directory/workers.png`` from the CSVs in ``directory``.

    Returns
    -------
    dict
        Headline numbers for the index: ``max_workers`` and ``bytes_per_worker`` (kB per iteration
        and worker at the most workers measured), and with ``limit.csv`` the distributed run that
        trained and the single-process one (``trained``, ``single``: each its ``run``, ``n_images``
        and ``test_error``) and the runs that failed (``failed``).

    Raises
    ------
    FileNotFoundError
        Naming ``workers.csv`` when it is missing.
    """
    directory = Path(directory)
    workers = pd.read_csv(directory / "workers.csv").sort_values("n_workers").reset_index(drop=True)
    memory = _optional_csv(directory / "memory.csv")
    limit = _optional_csv(directory / "limit.csv")
    _draw_workers(workers, directory / FIGURE)

    kilobytes = workers["bytes_per_iteration"] / 1e3
    text = [
        "# The data-parallel learner at scale (`slr.distributed`)\n\n",
        f"Measured by `{COMMAND}` on a quiet machine (the CSVs beside this page; `git log` on them names "
        "the commit), on synthetic denoising images of 100 x 100 (sigma 10) with Linear unary and "
        "pairwise functions and Algorithm 1.1, on local clusters of worker processes of one thread each. "
        "Times are the machine's under its load at the time; the bytes are the fit's own tally "
        "(`transfer_`: what the client sent to and received from the workers).\n\n",
        f"Rendered by `{info.command}` at commit `{info.commit_label}` on {info.started}.\n\n",
        "## Time and traffic per iteration against workers\n\n",
        "One partition per worker, the same images on every count of workers.\n\n",
        f"![seconds and kilobytes per iteration against workers]({FIGURE})\n\n",
        table(["workers", "images", "s / iteration", "kB / iteration", "kB / iteration and worker",
               "tasks / iteration", "loading (bytes)"],
              [[int(r.n_workers), int(r.n_images), r.seconds_per_iteration, kb, kb / r.n_workers,
                r.tasks_per_iteration, int(r.load_bytes)]
               for r, kb in zip(workers.itertuples(), kilobytes)], digits=2),
    ]
    if memory is not None:
        text += [
            "\n## Memory per worker against images\n\n",
            "Peak resident memory of the busiest of 2 workers after 3 iterations, of an idle worker before the "
            "fit, and of one process fitting the same images with `StructuredLogisticRegression`.\n\n",
            table(["images", "nodes", "peak per worker (MB)", "idle worker (MB)", "one process (MB)"],
                  [[int(r.n_images), int(r.n_nodes), r.worker_peak_mb, r.worker_idle_mb, r.single_process_peak_mb]
                   for r in memory.itertuples()], digits=1),
        ]
    if limit is not None:
        text += [
            "\n## A data set too large for one worker\n\n",
            "The learner's goal: a data set whose training needs more memory than one worker's `memory_limit` "
            "(a worker is killed above 95% of it, never paused or spilled first) trains on 2 workers of that "
            "limit, to the test error of a smaller single-process run of the same protocol.\n\n",
            table(["run", "images", "outcome", "test error", "worker peak (MB)", "seconds"],
                  [[r.run, int(r.n_images), r.outcome, r.test_error, r.worker_peak_mb, r.seconds]
                   for r in limit.itertuples()], digits=3),
        ]
    text.append("\nRaw results: " + ", ".join(f"[{name}]({name})" for name in ("workers.csv", "memory.csv", "limit.csv")
                                             if (directory / name).exists()) + "\n")
    write_output(directory / PAGE, "".join(text))
    return _summary(workers, limit)


def _optional_csv(path: Path) -> pd.DataFrame | None:
    return pd.read_csv(path) if path.exists() else None


def _draw_workers(workers: pd.DataFrame, path: Path) -> None:
    """Seconds and kilobytes per iteration against the number of workers, side by side."""
    fig, (time_ax, bytes_ax) = plt().subplots(1, 2, figsize=(8, 3.2))
    counts = workers["n_workers"]
    time_ax.plot(counts, workers["seconds_per_iteration"], marker="o")
    time_ax.set_ylabel("seconds per iteration")
    time_ax.set_ylim(bottom=0)
    bytes_ax.plot(counts, workers["bytes_per_iteration"] / 1e3, marker="o")
    bytes_ax.set_ylabel("kB moved per iteration")
    bytes_ax.set_ylim(bottom=0)
    for ax in (time_ax, bytes_ax):
        ax.set_xlabel("workers (one partition each)")
        ax.set_xticks(counts.tolist())
    images = sorted(set(workers["n_images"].astype(int)))
    fig.suptitle(f"slr.distributed on {', '.join(map(str, images))} denoising images of 100 x 100")
    save_fig(fig, path)


def _summary(workers: pd.DataFrame, limit: pd.DataFrame | None) -> dict:
    most = workers.iloc[-1]
    summary = dict(max_workers=int(most["n_workers"]),
                   bytes_per_worker=float(most["bytes_per_iteration"]) / 1e3 / int(most["n_workers"]))
    if limit is not None:
        trained = limit[limit["outcome"] == "trained"]
        on_workers = trained["run"].str.contains("worker")
        for key, rows in (("trained", trained[on_workers]), ("single", trained[~on_workers])):
            if len(rows):
                row = rows.iloc[-1]
                summary[key] = dict(run=str(row["run"]), n_images=int(row["n_images"]),
                                    test_error=float(row["test_error"]))
        summary["failed"] = [f"{r.run}: {r.outcome}" for r in limit.itertuples() if r.outcome != "trained"]
    return summary
