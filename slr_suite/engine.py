"""Where the cells of an experiment are computed: in this process, or as tasks on a Dask cluster.

An experiment hands the engine a list of :class:`Task` (a module-level function and small,
picklable arguments: a profile's settings and a cell's name; workers make or load the data
themselves) and receives each task's records back *in this process*, as the tasks finish. Only
this process writes the cell cache and the results files, so resume, provenance and the locks
work the same with either engine.

- :class:`SerialEngine` runs the tasks one after the other, here.
- :class:`DaskEngine` submits them to a ``dask.distributed`` cluster: a ``LocalCluster`` of
  worker processes on this machine (``slr --workers N``) or an existing scheduler
  (``slr --scheduler ADDRESS``). A task whose worker dies is run again elsewhere (Dask's own
  rescheduling), so a lost worker costs only its cells.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from slr_suite.store import CellRecord

__all__ = ["DaskEngine", "SerialEngine", "Task", "connect"]


@dataclass(frozen=True)
class Task:
    """One unit of work: ``fn(*args, n_threads=...)`` returns one record per key in ``keys``.

    Attributes
    ----------
    name : str
        What the log calls it (``"denoising:Boost-MLP"``).
    keys : tuple of str
        Cache keys of the cells the task computes, in the order of its records.
    fn : callable
        A module-level function (workers import it by name).
    args : tuple
        Its arguments besides ``n_threads``; small and picklable.
    """

    name: str
    keys: tuple[str, ...]
    fn: Callable[..., list[CellRecord]]
    args: tuple


class SerialEngine:
    """Run every task here, one after the other, with ``n_threads`` threads each."""

    def __init__(self, n_threads: int | None = None) -> None:
        self.n_threads = n_threads

    def map(self, tasks: Sequence[Task], log: Callable[[str], None]) -> Iterator[tuple[Task, list[CellRecord]]]:
        """Yield ``(task, records)`` as each task finishes."""
        for task in tasks:
            yield task, task.fn(*task.args, n_threads=self.n_threads)

    def describe(self) -> str:
        return "in this process"

    def close(self) -> None:
        """Nothing to release."""


class DaskEngine:
    """Run the tasks on a Dask cluster, ``threads_per_task`` threads each.

    Parameters
    ----------
    client : distributed.Client
    cluster : distributed.LocalCluster or None
        A local cluster started for this run, shut down with the client by :meth:`close`.
    threads_per_task : int or None
        Threads for the message passing and BLAS of one task, chosen so that the tasks running
        at once on a worker machine do not oversubscribe its cores. None: each worker divides
        its machine's cores by the tasks it runs at once (its thread count), which is right when
        each machine runs one ``dask worker``.
    """

    def __init__(self, client: Any, threads_per_task: int | None, cluster: Any = None) -> None:
        self.client = client
        self.cluster = cluster
        self.threads_per_task = threads_per_task

    def map(self, tasks: Sequence[Task], log: Callable[[str], None]) -> Iterator[tuple[Task, list[CellRecord]]]:
        """Submit every task, then yield ``(task, records)`` as each finishes, with progress."""
        from distributed import as_completed

        if not tasks:
            return
        futures = {}
        for task in tasks:
            future = self.client.submit(_run_task, task.fn, task.args, self.threads_per_task,
                                        key=f"slr-{task.name}-{task.keys[0][:12]}", pure=False, retries=1)
            futures[future] = task
        done = 0
        for future in as_completed(futures):
            task = futures[future]
            records = future.result()
            done += 1
            busy = _processing_keys(self.client)
            running = sum(1 for f in futures if f.status == "pending" and f.key in busy)
            log(f"{task.name}: finished on a worker; {done} done, {running} running, "
                f"{len(tasks) - done - running} waiting")
            yield task, records

    def describe(self) -> str:
        workers = self.client.scheduler_info().get("workers", {})
        return f"on a Dask cluster at {self.client.scheduler.address} ({len(workers)} workers)"

    def close(self) -> None:
        """Close the client, and the local cluster if this run started one."""
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def _processing_keys(client: Any) -> set:
    """Keys of the tasks the scheduler is running on its workers now (empty if it cannot say)."""
    try:
        return {key for keys in client.processing().values() for key in keys}
    except Exception:
        return set()


def _run_task(fn: Callable[..., list[CellRecord]], args: tuple, n_threads: int | None) -> list[CellRecord]:
    """The worker side: run ``fn`` with OpenMP and BLAS limited to ``n_threads``."""
    from threadpoolctl import threadpool_limits

    if n_threads is None:
        from distributed import get_worker

        n_threads = max(1, (os.cpu_count() or 1) // max(1, get_worker().state.nthreads))
    with threadpool_limits(limits=n_threads):
        return fn(*args, n_threads=n_threads)


def connect(workers: int | None, scheduler: str | None, threads: int | None = None, timeout: float = 15.0):
    """A Dask client: a fresh ``LocalCluster`` of ``workers`` processes, or ``scheduler``'s cluster.

    ``threads`` (``slr --threads``) fixes the threads of every task; by default a local
    cluster gives each of its single-threaded workers ``cores // workers`` threads.

    Returns
    -------
    DaskEngine
        Its :meth:`DaskEngine.close` shuts the client (and a local cluster) down.

    Raises
    ------
    ValueError
        When ``distributed`` is not installed or the scheduler cannot be reached within
        ``timeout`` seconds; the message says what to do.
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ValueError("--workers/--scheduler need Dask: pip install 'slr[distributed]'") from None
    cores = os.cpu_count() or 1
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout=timeout)
        except (OSError, TimeoutError) as exc:
            raise ValueError(f"--scheduler: cannot reach a Dask scheduler at {scheduler!r} within "
                             f"{timeout:.0f} s ({type(exc).__name__})") from None
        return DaskEngine(client, threads)
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                           silence_logs=40)
    return DaskEngine(Client(cluster), threads or max(1, cores // workers), cluster)
