"""Fault injection on the results files and the command line: damaged CSVs and cache entries,
concurrent runs, kill -9, unusable directories and bad arguments never cost a result, never
give a wrong number and never end in a raw traceback."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slr.suite.cli import UsageError, main, run_experiments
from slr.suite.results import ResultsTable
from slr.suite.store import MANIFEST

SLR = [sys.executable, "-m", "slr.suite"]
CELLS = "Linear/Constant,Boost/Zero"


def _table(path: Path, log=None) -> ResultsTable:
    return ResultsTable(path, ["config", "cell", "error", "note"], ["config", "cell"], log or (lambda m: None))


ROWS = [dict(config="c1", cell="A/B", error=0.125, note="plain"),
        dict(config="c1", cell="B/C", error=1 / 3, note="a, quoted; note"),
        dict(config="c2", cell="A/B", error=2.5e-7, note="")]


def _plant(path: Path, data: bytes) -> None:
    """``data`` at ``path`` as if it were a file slr wrote and something damaged since."""
    path.write_bytes(data)
    manifest = path.parent / MANIFEST
    names = set(manifest.read_text().splitlines()) if manifest.exists() else set()
    manifest.write_text("".join(f"{name}\n" for name in sorted(names | {path.name})))


def _undamaged(tmp_path: Path) -> bytes:
    table = _table(tmp_path / "ref.csv")
    table.upsert(ROWS)
    return (tmp_path / "ref.csv").read_bytes()


def _check_after_damage(path: Path, damaged: bytes, reference: bytes) -> None:
    """The invariant: intact rows only, the damaged file kept as a backup, a rerun restores the table."""
    messages = []
    table = _table(path, messages.append)
    rows = table.rows()
    originals = [{k: str(v) if not isinstance(v, float) else repr(v) for k, v in r.items()} for r in ROWS]
    assert all(row in originals for row in rows)
    backups = sorted(path.parent.glob(path.name + ".damaged-*"))
    if not (path.exists() and path.read_bytes() == damaged):    # the file was moved: it must be kept
        assert any(b.read_bytes() == damaged for b in backups), "the damaged file was lost"
        assert messages and str(backups[-1]) in messages[-1]
    table.upsert(ROWS)           # the rerun writes every cell again (from the cell cache)
    assert path.read_bytes() == reference


def test_frame_reads_back_missing_numbers_as_nan(tmp_path):
    """A NaN written by a cell (repr "nan") or an empty field reads back as a float NaN, so the
    column stays numeric; text columns keep their text."""
    table = _table(tmp_path / "t.csv")
    table.upsert([dict(config="c1", cell="A", error=float("nan"), note="x"),
                  dict(config="c1", cell="B", error=0.25, note="y"),
                  dict(config="c1", cell="C", error="", note="z")])
    frame = table.frame(config="c1")
    assert frame["error"].dtype == float
    assert frame["error"].isna().tolist() == [True, False, True] and frame["error"][1] == 0.25
    assert frame["note"].tolist() == ["x", "y", "z"]


def test_file_of_an_earlier_version_keeps_its_rows_and_gains_the_new_columns(tmp_path):
    """Rows written before a column was added read back with it empty and are rewritten with the
    new header; a file with a column this version does not know is set aside whole."""
    old = ResultsTable(tmp_path / "t.csv", ["config", "cell", "error"], ["config", "cell"], lambda m: None)
    old.upsert([dict(config="c1", cell="A", error=0.5), dict(config="c1", cell="B", error=0.25)])
    messages = []
    new = _table(tmp_path / "t.csv", messages.append)
    assert new.rows() == [dict(config="c1", cell="A", error="0.5", note=""),
                          dict(config="c1", cell="B", error="0.25", note="")]
    new.upsert([dict(config="c1", cell="B", error=0.125, note="new")])
    assert (tmp_path / "t.csv").read_text().splitlines()[0] == "config,cell,error,note,check"
    assert [r["note"] for r in new.rows()] == ["", "new"] and not messages
    renamed = ResultsTable(tmp_path / "t.csv", ["config", "cell", "err"], ["config", "cell"], messages.append)
    assert renamed.rows() == [] and messages and "not those of this version" in messages[-1]


def test_truncation_at_every_byte_offset(tmp_path):
    reference = _undamaged(tmp_path)
    for offset in range(len(reference)):
        case = tmp_path / f"cut{offset}"
        case.mkdir()
        _plant(case / "r.csv", reference[:offset])
        _check_after_damage(case / "r.csv", reference[:offset], reference)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_never_loses_a_file_or_invents_a_row(tmp_path, data):
    reference = _undamaged(tmp_path)
    kind = data.draw(st.sampled_from(["bytes", "splice", "header"]))
    if kind == "bytes":
        damaged = data.draw(st.binary(max_size=400))
    elif kind == "splice":
        at = data.draw(st.integers(0, len(reference)))
        damaged = reference[:at] + data.draw(st.binary(min_size=1, max_size=20)) + reference[at:]
    else:
        header_end = reference.index(b"\n")
        damaged = data.draw(st.sampled_from([b"config,cell,error", b"config,cell,note,error", b"x"])) + \
            reference[header_end:]
    case = Path(tempfile.mkdtemp(dir=tmp_path))
    _plant(case / "r.csv", damaged)
    messages = []
    rows = _table(case / "r.csv", messages.append).rows()
    # every row returned has the right fields; whatever was dropped is kept in a backup
    assert all(set(r) == {"config", "cell", "error", "note"} for r in rows)
    if not (case / "r.csv").exists():
        assert any(b.read_bytes() == damaged for b in case.glob("r.csv.damaged-*"))
    _table(case / "r.csv").upsert(ROWS)
    assert (case / "r.csv").read_bytes() == reference


def test_two_header_mismatches_keep_both_backups(tmp_path):
    path = tmp_path / "r.csv"
    first, second = b"old,layout\n1,2\n", b"older,layout\n3,4\n"
    _plant(path, first)
    _table(path).upsert(ROWS)
    _plant(path, second)
    _table(path).upsert(ROWS)
    backups = sorted(p.read_bytes() for p in tmp_path.glob("r.csv.damaged-*"))
    assert backups == sorted([first, second])


# ------------------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def reference_run(tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    root = tmp_path_factory.mktemp("reference")
    run_experiments(["denoising"], "tiny", root / "out", quiet=True, cells=CELLS, cache_dir=root / "cache")
    return root / "cache", _results(root / "out")


def _results(out: Path) -> pd.DataFrame:
    df = pd.read_csv(out / "denoising_results.csv")
    return df[["unary", "pairwise", "train_error", "test_error", "objective"]].sort_values(
        ["unary", "pairwise"]).reset_index(drop=True)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "header"])
def test_damaged_results_csv_rerun_gives_the_same_table(reference_run, tmp_path, damage, capsys):
    cache, reference = reference_run
    out = tmp_path / "out"
    assert main(["denoising", "--tiny", "--quiet", "--out", str(out), "--cache-dir", str(cache), "--cells", CELLS]) == 0
    path = out / "denoising_results.csv"
    original = path.read_bytes()
    damaged = {"truncate": original[:len(original) - 40], "garbage": b"\x00\xff\xfe" + os.urandom(200),
               "header": original.replace(b"test_error", b"test_err", 1)}[damage]
    path.write_bytes(damaged)
    assert main(["denoising", "--tiny", "--out", str(out), "--cache-dir", str(cache), "--cells", CELLS]) == 0
    pd.testing.assert_frame_equal(_results(out), reference)
    backups = list(out.glob("denoising_results.csv.damaged-*"))
    assert len(backups) == 1 and backups[0].read_bytes() == damaged
    assert f"moved to {backups[0]}" in capsys.readouterr().err


def test_truncated_cache_entry_is_set_aside_and_recomputed(reference_run, tmp_path, capsys):
    import shutil

    cache = tmp_path / "cache"
    shutil.copytree(reference_run[0], cache)
    entry = sorted((cache / "denoising").glob("*.npz"))[0]
    entry.write_bytes(entry.read_bytes()[:100])
    log = run_experiments(["denoising"], "tiny", tmp_path / "out", cells=CELLS, cache_dir=cache)
    assert len(log.computed) == 1
    pd.testing.assert_frame_equal(_results(tmp_path / "out"), reference_run[1])
    assert "unreadable cache entry" in capsys.readouterr().err
    assert len(list((cache / "denoising").glob("*.damaged-*"))) == 1


def test_repeated_cells_are_computed_once(tmp_path):
    log = run_experiments(["denoising"], "tiny", tmp_path / "out", quiet=True, cells="Boost/Zero,Boost/Zero",
                          cache_dir=tmp_path / "cache")
    assert log.computed == ["denoising:Boost-Zero"]
    assert len(pd.read_csv(tmp_path / "out" / "denoising_results.csv")) == 1


@pytest.mark.slow
def test_concurrent_runs_on_one_directory_write_each_cell_once(tmp_path):
    args = [*SLR, "denoising", "--tiny", "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"),
            "--cells", CELLS]
    procs = [subprocess.Popen(args, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    df = pd.read_csv(tmp_path / "out" / "denoising_results.csv")
    assert len(df) == 2 and not df.duplicated(["config", "unary", "pairwise"]).any()
    # one run computed both cells, the other waited for it and found them cached
    assert sum("0 of 2 cells cached" in e for e in errs) == 1 and sum("2 of 2 cells cached" in e for e in errs) == 1
    assert any("waiting" in e and "pid" in e for e in errs)


@pytest.mark.slow
def test_kill_9_at_random_points_then_resume_gives_the_same_table(reference_run, tmp_path):
    rng = random.Random(0)
    args = [*SLR, "denoising", "--tiny", "--quiet", "--out", str(tmp_path / "out"), "--cache-dir",
            str(tmp_path / "cache"), "--cells", CELLS]
    for _ in range(3):
        proc = subprocess.Popen(args, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(1.0, 6.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert subprocess.run(args, timeout=300).returncode == 0
    pd.testing.assert_frame_equal(_results(tmp_path / "out"), reference_run[1])
    assert not list((tmp_path / "out").glob(".*.tmp")), "temporary files left behind"


# ------------------------------------------------------------------------- command line
@pytest.mark.parametrize("argv, message", [
    (["--threads", "0"], "--threads: must be a positive integer, got 0"),
    (["--threads", "-5"], "--threads: must be a positive integer, got -5"),
    (["--threads", "two"], "--threads: must be a positive integer, got 'two'"),
    (["--cells", "Boost/Boost,Tree/Zero"], "--cells: 'Tree/Zero' is not UNARY/PAIRWISE"),
])
def test_bad_arguments_exit_2_with_one_line_before_any_work(tmp_path, argv, message):
    out = tmp_path / "never"
    proc = subprocess.run([*SLR, "denoising", "--tiny", "--out", str(out), *argv], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()


def test_out_naming_a_file_or_an_unwritable_place_exits_2(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for out, message in ((a_file, "exists and is not a directory"), (a_file / "sub", "cannot create")):
        proc = subprocess.run([*SLR, "bound", "--tiny", "--out", str(out)], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 2 and "--out: " in proc.stderr and message in proc.stderr
        assert "Traceback" not in proc.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_output_directory_exits_2(tmp_path):
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o500)
    try:
        proc = subprocess.run([*SLR, "bound", "--tiny", "--out", str(out)], capture_output=True, text=True, timeout=120)
    finally:
        out.chmod(0o700)
    assert proc.returncode == 2 and "--out: cannot write in" in proc.stderr


def test_failure_during_a_run_is_one_line_with_status_1(tmp_path, monkeypatch, capsys):
    from slr.suite import denoising

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire\nsecond line")

    monkeypatch.setattr(denoising, "compute_cell", broken)
    monkeypatch.delenv("SLR_DEBUG", raising=False)
    assert main(["denoising", "--tiny", "--out", str(tmp_path), "--cache-dir", str(tmp_path / "c"),
                 "--cells", "Zero/Zero"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "slr: error: RuntimeError: disk on fire (SLR_DEBUG=1 shows the traceback)"


def test_missing_peer_environment_is_logged_and_reported(tmp_path, monkeypatch, capsys):
    from dataclasses import replace

    from slr.baselines.peer import client
    import slr.suite.profiles as profiles

    tiny = profiles.PROFILES["tiny"]
    monkeypatch.setitem(profiles.PROFILES, "tiny", tiny.with_spec(
        "baselines", replace(tiny.spec("baselines"), peer={"denoising": ("OneSlackSSVM",)})))
    monkeypatch.setattr(client, "ensure_peer_env", lambda verbose=True: None)
    run_experiments(["baselines"], "tiny", tmp_path, datasets="denoising", cache_dir=tmp_path / "c")
    assert "pystruct rows skipped: no CPython 3.6 interpreter" in capsys.readouterr().err
    df = pd.read_csv(tmp_path / "baselines_results.csv")
    row = df[df.method == "pystruct:OneSlackSSVM"].iloc[0]
    assert row.status.startswith("skipped: no CPython 3.6")
    assert ("*Not run on the machine that computed them*: pystruct:OneSlackSSVM"
            in (tmp_path / "baselines.md").read_text())


def test_threads_option_reaches_every_kernel(tmp_path, monkeypatch):
    """``--threads 1`` holds for slr's fits, for the baselines, which pass no thread count, and for
    subprocesses (the pystruct peer) through the environment."""
    from slr.inference import _star, batch

    seen, environ = [], set()
    real = _star.star_sweeps
    before = os.environ.get("OMP_NUM_THREADS")

    def recording(*args):
        seen.append(args[13])   # star_sweeps(..., max_sweeps, tol, n_threads, n_sweeps, converged)
        environ.add(os.environ.get("OMP_NUM_THREADS"))
        return real(*args)

    monkeypatch.setattr(_star, "star_sweeps", recording)
    run_experiments(["baselines"], "tiny", tmp_path, quiet=True, datasets="denoising", threads=1,
                    cache_dir=tmp_path / "c")
    assert seen and set(seen) == {1} and environ == {"1"}
    assert os.environ.get("OMP_NUM_THREADS") == before
    seen.clear()
    run_experiments(["baselines"], "tiny", tmp_path, quiet=True, datasets="denoising", cache_dir=tmp_path / "c2")
    assert max(seen) == min(2, batch.resolve_threads(None))    # 2 examples per batch at most


# ------------------------------------------------------------------------- reads move nothing; foreign files stay
def test_render_only_twice_keeps_the_intact_rows_of_a_damaged_csv(reference_run, tmp_path, capsys):
    cache, reference = reference_run
    out = tmp_path / "out"
    assert main(["denoising", "--tiny", "--quiet", "--out", str(out), "--cache-dir", str(cache), "--cells", CELLS]) == 0
    path = out / "denoising_results.csv"
    damaged = path.read_bytes() + b"a,damaged,line\n"
    path.write_bytes(damaged)
    for _ in range(2):
        assert main(["denoising", "--tiny", "--out", str(out), "--render-only"]) == 0
        assert path.read_bytes() == damaged and not list(out.glob("*.damaged-*"))
        assert "no rows yet" not in (out / "denoising.md").read_text()
    assert "1 damaged line(s); the 2 intact rows are kept; left as it is" in capsys.readouterr().err
    # the next run that writes results sets the original aside and keeps the intact rows
    assert main(["denoising", "--tiny", "--quiet", "--out", str(out), "--cache-dir", str(cache), "--cells", CELLS]) == 0
    pd.testing.assert_frame_equal(_results(out), reference)
    assert [p.read_bytes() for p in out.glob("denoising_results.csv.damaged-*")] == [damaged]


@pytest.mark.parametrize("option", ["--out", "--cache-dir"])
def test_an_empty_output_path_is_refused(tmp_path, option, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("mine")
    args = {"--out": str(tmp_path / "out"), "--cache-dir": str(tmp_path / "cache"), option: ""}
    with pytest.raises(SystemExit) as exit_:
        main(["denoising", "--tiny", "--cells", CELLS, "--out", args["--out"], "--cache-dir", args["--cache-dir"]])
    assert exit_.value.code == 2 and f"{option} must name a directory, got an empty path" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]
    assert (tmp_path / "README.md").read_text() == "mine"
    with pytest.raises(UsageError, match="--out must name a directory"):
        run_experiments(["denoising"], "tiny", "", cells=CELLS, cache_dir=tmp_path / "cache")


def test_a_file_slr_did_not_write_is_never_replaced(reference_run, tmp_path, capsys):
    cache, reference = reference_run
    out = tmp_path / "out"
    out.mkdir()
    (out / "README.md").write_text("the project's own")
    with pytest.raises(SystemExit) as exit_:   # before any work: a usage error
        main(["denoising", "--tiny", "--quiet", "--out", str(out), "--cache-dir", str(cache), "--cells", CELLS])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "README.md" in err and "slr did not write it" in err
    assert (out / "README.md").read_text() == "the project's own"
    (out / "README.md").unlink()
    (out / "denoising_results.csv").write_text("someone's,data\n1,2\n")   # a CSV slr did not write
    assert main(["denoising", "--tiny", "--quiet", "--out", str(out), "--cache-dir", str(cache), "--cells", CELLS]) == 1
    assert (out / "denoising_results.csv").read_text() == "someone's,data\n1,2\n"
    assert not list(out.glob("*.damaged-*"))
    (out / "denoising_results.csv").unlink()
    # what slr wrote it replaces on the next run
    for _ in range(2):
        assert main(["denoising", "--tiny", "--quiet", "--out", str(out), "--cache-dir", str(cache),
                     "--cells", CELLS]) == 0
    pd.testing.assert_frame_equal(_results(out), reference)
    written = set((out / MANIFEST).read_text().splitlines())
    assert {"README.md", "denoising.md", "denoising_results.csv"} <= written
    assert {p.name for p in out.iterdir()} - written == {MANIFEST, ".slr.lock"}


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_written_files_get_the_usual_mode(tmp_path, umask):
    from slr.suite.store import CellCache, CellRecord, atomic_write_bytes, write_output

    old = os.umask(umask)
    try:
        atomic_write_bytes(tmp_path / "a", b"x")
        write_output(tmp_path / "b.md", "y")
        CellCache(tmp_path / "cache", "e", print).save("k" * 32, CellRecord({"x": 1}))
        atomic_write_bytes(tmp_path / "a", b"again")   # a replacement too
    finally:
        os.umask(old)
    for path in (tmp_path / "a", tmp_path / "b.md", tmp_path / MANIFEST, tmp_path / "cache" / "e" / f"{'k' * 32}.npz"):
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask, path
