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

from slr_suite.cli import run_experiments  # noqa: E402

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
    assert len(log.computed) == 4 + 6 + 8
    for name in SCIENCE:
        pd.testing.assert_frame_equal(_science(tmp_path / "out", name), _science(serial_run, name))


@pytest.mark.slow
def test_a_worker_killed_mid_run_costs_only_a_retry(serial_run, tmp_path):
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
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
    proc = subprocess.run([sys.executable, "-m", "slr_suite", "bound", "--tiny", "--out", str(tmp_path / "o"),
                           "--scheduler", "tcp://127.0.0.1:9"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "--scheduler: cannot reach a Dask scheduler at 'tcp://127.0.0.1:9'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_workers_and_scheduler_exclude_each_other(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "slr_suite", "bound", "--tiny", "--workers", "2", "--scheduler",
                           "tcp://x:1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr


def test_missing_dask_says_which_extra_to_install(monkeypatch):
    from slr_suite.engine import connect

    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ValueError, match=r"need Dask: pip install 'slr\[distributed\]'"):
        connect(2, None)
