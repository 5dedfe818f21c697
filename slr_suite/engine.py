"""Where the cells of an experiment are computed: in this process, or as tasks on a Dask cluster.

An experiment hands the engine :class:`Task` objects (a module-level function and small,
picklable arguments: a profile's settings and a cell's name; workers make or load the data
themselves) in a :class:`TaskQueue` and receives each task's records back *in this process*, as
the tasks finish. The queue runs the costliest task first and may grow while the engine runs
it: the runner adds the cells that wait on others (the baselines' test cells on their tuning
fits) as soon as those are answered, so that they share the workers with the rest instead of
running after everything else. Only this process writes the cell cache and the results files,
so resume, provenance and the locks work the same with either engine.

- :class:`SerialEngine` runs the tasks one after the other, here.
- :class:`DaskEngine` submits them to a ``dask.distributed`` cluster: a ``LocalCluster`` of
  worker processes on this machine (``slr --workers N``) or an existing scheduler
  (``slr --scheduler ADDRESS``). A task whose worker dies is run again elsewhere (Dask's own
  rescheduling), so a lost worker costs only its cells.

Every wait on the cluster is bounded and said: connecting gives up after a timeout naming the
address, a cluster without workers is reported after :data:`WORKER_WAIT` seconds, and a run
whose cluster loses every worker stops after as long. Each task returns the code fingerprint
and dependency versions of the worker that ran it (:func:`slr.suite.provenance.worker_identity`);
a worker whose identity is not this process's is refused before its results are used.
"""
from __future__ import annotations

import heapq
import os
import resource
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from slr.suite.store import CellRecord

__all__ = ["DaskEngine", "SerialEngine", "Task", "TaskQueue", "connect", "WORKER_WAIT"]

#: Seconds to wait for a cluster to have a worker (at the start, or after losing all of them).
WORKER_WAIT = 60.0
#: Seconds between looks at the cluster while waiting for tasks.
_POLL = 1.0
#: The Dask setting by which a nanny starts its worker with ``MALLOC_TRIM_THRESHOLD_=65536``. A
#: fixed trim threshold also stops glibc from raising its mmap threshold, so that every large
#: array is mapped and faulted in afresh: slr's fit of the held-out chain L20 strong took 0.33 s
#: instead of 0.15 s. The local cluster's workers start without it; remote workers need a Dask
#: configuration file that sets it to null (the README shows one).
UNTRIMMED = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"


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
    cost : float
        Its expected cost: of the tasks waiting, the costliest starts first.
    """

    name: str
    keys: tuple[str, ...]
    fn: Callable[..., list[CellRecord]]
    args: tuple
    cost: float = 0.0


class TaskQueue:
    """The tasks waiting for an engine, taken costliest first (ties: first added first); tasks
    may be added while an engine works through it.

    Parameters
    ----------
    tasks : iterable of Task, optional
        The first tasks.
    """

    def __init__(self, tasks: Iterable[Task] = ()) -> None:
        self._waiting: list[tuple[float, int, Task]] = []
        self.added = 0
        self.add(tasks)

    def add(self, tasks: Iterable[Task]) -> None:
        """Queue ``tasks``."""
        for task in tasks:
            heapq.heappush(self._waiting, (-task.cost, self.added, task))
            self.added += 1

    def pop(self) -> Task:
        """The costliest waiting task, taken off the queue."""
        return heapq.heappop(self._waiting)[2]

    def take(self) -> list[Task]:
        """Every waiting task, costliest first; the queue is left empty."""
        return [self.pop() for _ in range(len(self._waiting))]

    def __len__(self) -> int:
        return len(self._waiting)


def as_queue(tasks: TaskQueue | Iterable[Task]) -> TaskQueue:
    """``tasks`` as a :class:`TaskQueue` (a sequence keeps its order among tasks of equal cost)."""
    return tasks if isinstance(tasks, TaskQueue) else TaskQueue(tasks)


class SerialEngine:
    """Run every task here, one after the other, with ``n_threads`` threads each."""

    def __init__(self, n_threads: int | None = None) -> None:
        self.n_threads = n_threads

    def map(self, tasks: TaskQueue | Iterable[Task],
            log: Callable[[str], None]) -> Iterator[tuple[Task, list[CellRecord]]]:
        """Yield ``(task, records)`` as each task finishes, saying its wall and CPU seconds; the
        costliest waiting task runs next, including tasks added to the queue meanwhile."""
        queue = as_queue(tasks)
        while queue:
            task = queue.pop()
            records, wall, cpu = _timed(task.fn, task.args, self.n_threads)
            log(f"{task.name}: finished in {wall:.1f} s ({cpu:.1f} CPU s)")
            yield task, records

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
    worker_wait : float, optional
        Seconds the cluster may be without a worker before the run stops (default
        :data:`WORKER_WAIT`).
    """

    def __init__(self, client: Any, threads_per_task: int | None, cluster: Any = None,
                 worker_wait: float | None = None) -> None:
        from slr.suite.provenance import worker_identity

        self.client = client
        self.cluster = cluster
        self.threads_per_task = threads_per_task
        self.worker_wait = WORKER_WAIT if worker_wait is None else worker_wait
        self.identity = worker_identity()

    def check_identity(self, worker: str, identity: dict) -> None:
        """Refuse a worker whose code fingerprint or dependency versions are not this process's."""
        if identity == self.identity:
            return
        ours, theirs = self.identity, identity
        diffs = [f"code {theirs.get('code')} (here {ours['code']})"] if theirs.get("code") != ours["code"] else []
        diffs += [f"{name} {theirs.get('versions', {}).get(name)} (here {version})"
                  for name, version in ours["versions"].items()
                  if theirs.get("versions", {}).get(name) != version]
        raise RuntimeError(f"the Dask worker {worker} runs other code or dependencies: {', '.join(diffs)}; "
                           "install the same slr and dependency versions on every worker")

    def wait_for_workers(self) -> None:
        """Return once the cluster has a worker; a RuntimeError after :attr:`worker_wait` seconds."""
        try:
            self.client.wait_for_workers(1, timeout=self.worker_wait)
        except TimeoutError:
            raise RuntimeError(f"the Dask scheduler at {self.client.scheduler.address} has had no worker for "
                               f"{self.worker_wait:.0f} s; start workers (dask worker ADDRESS)") from None

    def map(self, tasks: TaskQueue | Iterable[Task],
            log: Callable[[str], None]) -> Iterator[tuple[Task, list[CellRecord]]]:
        """Submit every task, then yield ``(task, records)`` as each finishes, with progress.
        Tasks added to the queue meanwhile are submitted after each finished task; the
        scheduler starts the costliest task submitted whenever a worker is free (its priority)."""
        from distributed import wait

        queue = as_queue(tasks)
        if not queue:
            return
        self.wait_for_workers()
        futures: dict[Any, Task] = {}

        def submit_waiting() -> set:
            submitted = set()
            for task in queue.take():
                future = self.client.submit(_run_task, task.fn, task.args, self.threads_per_task,
                                            key=f"slr-{task.name}-{task.keys[0][:12]}", pure=False, retries=1,
                                            priority=_priority(task.cost))
                futures[future] = task
                submitted.add(future)
            return submitted

        pending, done = submit_waiting(), 0
        while pending:
            try:
                finished, pending = wait(pending, timeout=_POLL, return_when="FIRST_COMPLETED")
            except TimeoutError:
                if not self.client.scheduler_info().get("workers"):
                    log(f"the Dask cluster has no worker; waiting up to {self.worker_wait:.0f} s for one")
                    self.wait_for_workers()
                continue
            for future in finished:
                task = futures[future]
                worker, identity, records, wall, cpu = future.result()
                self.check_identity(worker, identity)
                done += 1
                running = _executing_count(self.client, {f.key for f in pending})
                log(f"{task.name}: finished on a worker in {wall:.1f} s ({cpu:.1f} CPU s); {done} done, "
                    f"{running} running, {len(futures) - done - running} waiting")
                yield task, records
                pending |= submit_waiting()

    def describe(self) -> str:
        workers = self.client.scheduler_info().get("workers", {})
        return f"on a Dask cluster at {self.client.scheduler.address} ({len(workers)} workers)"

    def close(self) -> None:
        """Close the client, and the local cluster if this run started one."""
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def _priority(cost: float) -> int:
    """Dask's priority of a task of ``cost`` (higher starts first; Dask wants an integer): the
    cost in thousandths, so that tasks submitted later still start before cheaper ones."""
    return int(round(cost * 1000))


def _executing(dask_worker: Any) -> list:
    """On a worker: the keys of the tasks executing now (not those queued behind them)."""
    return [ts.key for ts in dask_worker.state.executing]


def _executing_count(client: Any, keys: set) -> int:
    """How many of ``keys`` are executing on a worker now (0 if the cluster cannot say)."""
    try:
        executing = client.run(_executing)
    except Exception:
        return 0
    return sum(1 for worker_keys in executing.values() for key in worker_keys if key in keys)


def _cpu_seconds() -> float:
    """CPU seconds of this process (all its threads) and of its children that have ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed(fn: Callable[..., list[CellRecord]], args: tuple,
           n_threads: int | None) -> tuple[list[CellRecord], float, float]:
    """``fn(*args, n_threads=n_threads)``, its wall seconds and the CPU seconds of this process
    and its subprocesses (pystruct's) meanwhile: on a Dask worker, the worker's other threads
    (heartbeats, transfers) count too, a small part."""
    wall, cpu = time.perf_counter(), _cpu_seconds()
    records = fn(*args, n_threads=n_threads)
    return records, time.perf_counter() - wall, _cpu_seconds() - cpu


def _run_task(fn: Callable[..., list[CellRecord]], args: tuple,
              n_threads: int | None) -> tuple[str, dict, list[CellRecord], float, float]:
    """The worker side: run ``fn`` with OpenMP and BLAS limited to ``n_threads``; return this
    worker's address and identity (:func:`slr.suite.provenance.worker_identity`) with the records,
    and the task's wall and CPU seconds (:func:`_timed`)."""
    from distributed import get_worker
    from threadpoolctl import threadpool_limits

    from slr.suite.provenance import worker_identity

    worker = get_worker()
    if n_threads is None:
        n_threads = max(1, (os.cpu_count() or 1) // max(1, worker.state.nthreads))
    with threadpool_limits(limits=n_threads):
        records, wall, cpu = _timed(fn, args, n_threads)
    return worker.address, worker_identity(), records, wall, cpu


def _client_within(address: str, timeout: float) -> Any:
    """``Client(address)``, or a ValueError naming the address when no Dask scheduler answers
    within ``timeout`` seconds (Dask's own timeout does not cover a port that accepts the
    connection and never answers, such as a dashboard's)."""
    from distributed import Client

    box: dict[str, Any] = {}

    def connect_client() -> None:
        try:
            box["client"] = Client(address, timeout=timeout)
        except BaseException as exc:      # handed to the waiting thread
            box["error"] = exc

    thread = threading.Thread(target=connect_client, name="slr-connect", daemon=True)
    thread.start()
    thread.join(timeout + 5.0)
    if "client" in box:
        return box["client"]
    why = type(box["error"]).__name__ if "error" in box else "no answer"
    raise ValueError(f"--scheduler: cannot reach a Dask scheduler at {address!r} within {timeout:.0f} s ({why})")


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
    RuntimeError
        When the cluster has no worker within :data:`WORKER_WAIT` seconds, or a worker runs
        other code or dependency versions than this process.
    """
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        raise ValueError("--workers/--scheduler need Dask: pip install 'slr[distributed]'") from None
    cores = os.cpu_count() or 1
    if scheduler is not None:
        engine = DaskEngine(_client_within(scheduler, timeout), threads)
        try:
            engine.wait_for_workers()
            for worker, identity in engine.client.run(_worker_identity).items():
                engine.check_identity(worker, identity)
        except BaseException:
            engine.close()
            raise
        return engine
    # the scheduler's HTTP server on a free port: the default, 8787, is often taken (a warning)
    with dask.config.set({UNTRIMMED: None}):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                               silence_logs=40)
    return DaskEngine(Client(cluster), threads or max(1, cores // workers), cluster)


def _worker_identity() -> dict:
    from slr.suite.provenance import worker_identity

    return worker_identity()
