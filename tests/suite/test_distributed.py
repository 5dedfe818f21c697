"""The suite on a Dask cluster: the same rows as a serial run, a killed worker costs nothing,
bad cluster arguments fail fast with one line."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pandas as pd
import pytest

distributed = pytest.importorskip("distributed")

from slr.suite.cli import run_experiments  # noqa: E402
from waits import finishes  # noqa: E402

CELLS = "Linear/Constant,Boost/Zero,MLP/Linear,Constant/Boost"
SCIENCE = {"denoising_results.csv": ["unary", "pairwise", "train_error", "test_error", "objective", "code"],
           "bound_results.csv": ["graph", "eps", "l0", "l1", "l", "l_mp", "upper", "holds", "code"],
           "baselines_results.csv": ["dataset", "method", "train_error", "test_error", "status", "code"]}


def _science(out, name: str) -> pd.DataFrame:
    """The computed columns of a results CSV (provenance times and machines left out)."""
    cols = SCIENCE[name]
    df = pd.read_csv(out / name, dtype={"code": str})
    return df[cols].sort_values(cols[:2]).reset_index(drop=True)


@pytest.fixture(scope="module")
def serial_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("serial")
    run_experiments(["denoising", "bound", "baselines"], "tiny", root / "out", quiet=True, cells=CELLS,
                    datasets="denoising", cache_dir=root / "cache")
    return root / "out"


@pytest.mark.slow
def test_local_cluster_gives_the_serial_rows(serial_run, tmp_path):
    log = run_experiments(["denoising", "bound", "baselines"], "tiny", tmp_path / "out", quiet=True, cells=CELLS,
                          datasets="denoising", cache_dir=tmp_path / "cache", workers=2)
    assert len(log.computed) == 4 + 6 + 9   # denoising cells, bound cells, baselines methods
    for name in SCIENCE:
        pd.testing.assert_frame_equal(_science(tmp_path / "out", name), _science(serial_run, name))


@pytest.mark.slow
def test_a_worker_killed_mid_run_costs_only_a_retry(serial_run, tmp_path):
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      silence_logs=50) as cluster, Client(cluster) as client:
        killed = []

        def kill_a_busy_worker():
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not killed:
                busy = [addr for addr, tasks in client.processing().items() if tasks]
                if busy:
                    pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
                    os.kill(pid, 9)
                    killed.append(busy[0])
                time.sleep(0.2)

        killer = threading.Thread(target=kill_a_busy_worker, daemon=True)
        killer.start()
        run_experiments(["denoising"], "tiny", tmp_path / "out", quiet=True, cells=CELLS,
                        cache_dir=tmp_path / "cache", scheduler=cluster.scheduler_address)
        killer.join()
    assert killed, "no worker was killed"
    df = pd.read_csv(tmp_path / "out" / "denoising_results.csv")
    assert len(df) == 4 and not df.duplicated(["unary", "pairwise"]).any()
    pd.testing.assert_frame_equal(_science(tmp_path / "out", "denoising_results.csv"),
                                  _science(serial_run, "denoising_results.csv"))


def test_unreachable_scheduler_fails_fast_with_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "slr.suite", "bound", "--tiny", "--out", str(tmp_path / "o"),
                           "--scheduler", "tcp://127.0.0.1:9"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "--scheduler: cannot reach a Dask scheduler at 'tcp://127.0.0.1:9'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_workers_and_scheduler_exclude_each_other(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "slr.suite", "bound", "--tiny", "--workers", "2", "--scheduler",
                           "tcp://x:1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr


def test_missing_dask_says_which_extra_to_install(monkeypatch):
    from slr.suite.engine import connect

    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ValueError, match=r"need Dask: pip install 'slr\[distributed\]'"):
        connect(2, None)


# ------------------------------------------------------------------ bounded waits
def test_a_port_that_is_not_a_scheduler_times_out_naming_it():
    """A listener that accepts and never answers (the dashboard's port, say) hung the run."""
    import socket

    from slr.suite.engine import connect

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(ValueError, match=f"--scheduler: cannot reach a Dask scheduler at '{address}' within 2 s"):
            finishes(lambda: connect(None, address, timeout=2))


def test_a_cluster_without_workers_is_reported(monkeypatch):
    from distributed import LocalCluster

    from slr.suite import engine

    monkeypatch.setattr(engine, "WORKER_WAIT", 2.0)
    with LocalCluster(n_workers=0, processes=False, dashboard_address=":0", silence_logs=50) as cluster:
        with pytest.raises(RuntimeError, match=f"the Dask scheduler at {cluster.scheduler_address} has had no worker "
                                               "for 2 s"):
            finishes(lambda: engine.connect(None, cluster.scheduler_address))


def _nap(seconds: float, *, n_threads: int | None) -> list:
    from slr.suite.store import CellRecord

    time.sleep(seconds)
    return [CellRecord(row=dict(slept=seconds))]


@pytest.fixture(scope="module")
def one_thread_cluster():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=50) as cluster, Client(cluster) as client:
        yield client


def test_running_count_leaves_out_queued_tasks(one_thread_cluster):
    """A one-thread worker runs one task at a time; the scheduler hands it more."""
    import re

    from slr.suite.engine import DaskEngine, Task

    tasks = [Task(f"nap{i}", (f"key{i}" * 4,), _nap, (0.5,)) for i in range(4)]
    messages = []
    done = finishes(lambda: list(DaskEngine(one_thread_cluster, 1).map(tasks, messages.append)))
    assert len(done) == 4
    counts = [tuple(map(int, re.search(r"(\d+) done, (\d+) running, (\d+) waiting", m).groups())) for m in messages]
    assert [d for d, _, _ in counts] == [1, 2, 3, 4]
    assert all(running <= 1 and d + running + waiting == 4 for d, running, waiting in counts)


def test_a_worker_with_other_dependencies_is_refused(one_thread_cluster):
    """The versions in the key were the client's; a worker reports its own."""
    from slr.suite.engine import DaskEngine, Task

    engine = DaskEngine(one_thread_cluster, 1)
    engine.identity = dict(engine.identity, versions=dict(engine.identity["versions"], lightgbm="3.0.0"))
    with pytest.raises(RuntimeError, match=r"runs other code or dependencies: lightgbm \S+ \(here 3\.0\.0\)"):
        finishes(lambda: list(engine.map([Task("nap", ("k" * 16,), _nap, (0.0,))], print)))
    engine.identity = dict(engine.identity, code="0123456789ab", versions=DaskEngine(one_thread_cluster, 1).identity[
        "versions"])
    with pytest.raises(RuntimeError, match=r"runs other code or dependencies: code [0-9a-f]{12} \(here 0123456789ab\)"):
        finishes(lambda: list(engine.map([Task("nap", ("k" * 16,), _nap, (0.0,))], print)))


def test_local_cluster_says_nothing_when_the_dashboard_port_is_taken():
    """``--quiet`` still printed Dask's "Port 8787 is already in use" warning."""
    import socket
    import warnings

    from slr.suite.engine import connect

    with socket.socket() as squatter, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            squatter.bind(("", 8787))
            squatter.listen(1)
        except OSError:
            pass                         # taken already: the case to test
        finishes(lambda: connect(1, None).close())
    assert not [w for w in caught if "already in use" in str(w.message)]


def test_tasks_added_while_the_cluster_runs_are_submitted_and_say_their_times(one_thread_cluster):
    """A task queued after the first one finished (a dependent cell) still runs; each finished
    task's line gives its wall and CPU seconds."""
    import re

    from slr.suite.engine import DaskEngine, Task, TaskQueue

    queue = TaskQueue([Task("first", ("a" * 16,), _nap, (0.2,), cost=2.0), Task("second", ("b" * 16,), _nap, (0.0,))])
    messages, names = [], []

    def drain():
        for task, records in DaskEngine(one_thread_cluster, 1).map(queue, messages.append):
            names.append(task.name)
            if task.name == "first":
                queue.add([Task("later", ("c" * 16,), _nap, (0.0,), cost=1.0)])
        return names

    assert sorted(finishes(drain)) == ["first", "later", "second"] and names[0] == "first"
    assert all(re.search(r"finished on a worker in \d+\.\d s \(\d+\.\d CPU s\)", m) for m in messages)
    assert len(messages) == 3


def test_local_cluster_workers_keep_glibcs_own_malloc_thresholds(monkeypatch):
    """Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``, which also fixes glibc's
    mmap threshold and doubled the time of slr's short fits on the workers of ``make report``."""
    from slr.suite.engine import connect

    # a nanny also sets it in the process that starts it: an earlier test's cluster may have
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    engine = connect(1, None)
    try:
        seen = engine.client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
    finally:
        engine.close()
    assert list(seen.values()) == [None]
