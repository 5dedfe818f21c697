"""Damaged and foreign files, locks and writes that fail: every one is set aside or
ignored with a message naming it, no run waits for itself or for another in a cycle, and a write
that fails names its file or, in the cache, costs nothing but the caching."""
from __future__ import annotations

import errno
import fcntl
import io
import json
import os
import tempfile
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slr.suite import denoising
from slr.suite.cli import main, run_experiments
from slr.suite.results import ResultsTable
from slr.suite.store import CellCache, CellRecord, DirLock, run_locks
from waits import TIMEOUT, finishes

KEY = "ab" * 32


def _valid_record() -> CellRecord:
    """A denoising record of the form a showcase cell stores."""
    row = dict(config="c0ffee1234", unary="Linear", pairwise="Linear", train_error=0.25, test_error=0.5,
               objective=73.6, n_iter=2, seconds=1.5, commit="abcdef1234", dirty=False, code="0123456789ab",
               command="slr denoising --tiny", machine="Linux", computed_at="2026-01-01 00:00:00 UTC")
    arrays = {f"hist_{c}": np.arange(3, dtype=np.float64) for c in denoising._HISTORY}
    arrays.update(grid=np.linspace(0, 1, 101), f_unary=np.zeros((101, 2)), f_pairwise=np.zeros((101, 4)),
                  example_input=np.zeros((8, 8)), example_truth=np.zeros((8, 8), dtype=np.int64),
                  example_pred=np.ones((8, 8), dtype=np.int64))
    return CellRecord(row=row, arrays=arrays)


def _write_entry(cache: CellCache, meta, arrays: dict) -> Path:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, __meta__=np.asarray(meta if isinstance(meta, str) else json.dumps(meta)), **arrays)
    cache.directory.mkdir(parents=True, exist_ok=True)
    path = cache.directory / f"{KEY[:32]}.npz"
    path.write_bytes(buffer.getvalue())
    return path


def _set_aside_and_said(path: Path, messages: list[str]) -> None:
    assert not os.path.lexists(path), "the entry is still in place"
    assert len(list(path.parent.glob(path.name + ".damaged-*"))) == 1
    assert messages and str(path) in messages[-1]


# ---------------------------------------------------------------------------- cache entries
def test_valid_record_round_trips_and_passes_its_check(tmp_path):
    cache = CellCache(tmp_path, "denoising", print)
    record = _valid_record()
    cache.save(KEY, record)
    loaded = cache.load(KEY, denoising.RECORD.check)
    assert loaded.row == record.row
    assert all(np.array_equal(loaded.arrays[k], v) and loaded.arrays[k].dtype == v.dtype
               for k, v in record.arrays.items())


def test_fifo_at_an_entry_name_does_not_block(tmp_path):
    messages = []
    cache = CellCache(tmp_path, "denoising", messages.append)
    cache.directory.mkdir()
    path = cache.directory / f"{KEY[:32]}.npz"
    os.mkfifo(path)
    assert finishes(cache.load, KEY) is None
    _set_aside_and_said(path, messages)
    assert "not a regular file" in messages[-1]


def test_directory_at_an_entry_name_is_set_aside(tmp_path):
    messages = []
    cache = CellCache(tmp_path, "denoising", messages.append)
    path = cache.directory / f"{KEY[:32]}.npz"
    (path / "inner").mkdir(parents=True)
    assert cache.load(KEY) is None
    _set_aside_and_said(path, messages)
    # --no-cache does not look at entries; storing over a directory sets it aside too
    (path / "inner").mkdir(parents=True)
    CellCache(tmp_path, "denoising", messages.append, read=False).save(KEY, _valid_record())
    assert path.is_file() and cache.load(KEY, denoising.RECORD.check) is not None


@pytest.mark.parametrize("meta", ["[1, 2]", '"text"', "17", f'{{"key": "{KEY}", "row": [1]}}',
                                  f'{{"key": "{KEY}", "row": {{"a": [1, 2]}}}}'])
def test_meta_that_is_not_a_record_is_set_aside(tmp_path, meta):
    messages = []
    cache = CellCache(tmp_path, "denoising", messages.append)
    path = _write_entry(cache, meta, {})
    assert cache.load(KEY) is None
    _set_aside_and_said(path, messages)


def _mutations(record: CellRecord):
    """Strategies for forged entries of the right key: every one is a record the experiment
    cannot use (a field or array missing or unknown, a wrong type, dtype or shape)."""
    row_fields = sorted(record.row)
    arrays = sorted(record.arrays)
    optional = sorted(denoising.RECORD.optional)

    def drop_field(name):
        return {k: v for k, v in record.row.items() if k != name}, record.arrays

    def retype_field(name, value):
        return dict(record.row, **{name: value}), record.arrays

    def drop_array(name):
        return record.row, {k: v for k, v in record.arrays.items() if k != name}

    def recast_array(name, dtype):
        return record.row, dict(record.arrays, **{name: record.arrays[name].astype(dtype)})

    def reshape_array(name, extra):
        array = record.arrays[name]
        shape = (array.shape[0] + extra, *array.shape[1:]) if extra else (*array.shape, 1)
        return record.row, dict(record.arrays, **{name: np.zeros(shape, dtype=array.dtype)})

    wrong_values = {str: 3, float: "0.5", int: 2.5, bool: 1}
    return st.one_of(
        st.sampled_from(row_fields).map(drop_field),
        st.sampled_from(row_fields).map(lambda name: retype_field(name, wrong_values[type(record.row[name])])),
        st.sampled_from(row_fields).map(lambda name: retype_field(name, None)),
        st.text(min_size=1, max_size=8).filter(lambda n: n not in record.row).map(
            lambda name: (dict(record.row, **{name: 1}), record.arrays)),
        st.sampled_from([a for a in arrays if a not in optional] + optional[:1]).map(drop_array),
        st.tuples(st.sampled_from(arrays), st.sampled_from([np.int32, np.float32, np.bool_, "U3"])).filter(
            lambda t: np.dtype(t[1]).kind not in denoising.RECORD.arrays.get(
                t[0], denoising.RECORD.optional.get(t[0], ("",)))[0]).map(lambda t: recast_array(*t)),
        st.tuples(st.sampled_from(arrays), st.sampled_from([0, 1, 5])).map(lambda t: reshape_array(*t)),
        st.sampled_from(["extra", "hist_loss"]).map(
            lambda name: (record.row, dict(record.arrays, **{name: np.zeros(3)}))),
    )


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_forged_entries_of_the_right_key_are_set_aside(tmp_path, data):
    """A valid npz under the right key whose record has missing or unknown fields, or
    arrays of the wrong dtype or shape, is not counted as cached."""
    record = _valid_record()
    row, arrays = data.draw(_mutations(record))
    messages = []
    cache = CellCache(Path(tempfile.mkdtemp(dir=tmp_path)), "denoising", messages.append)
    path = _write_entry(cache, {"key": KEY, "row": row}, arrays)
    assert cache.load(KEY, denoising.RECORD.check) is None
    _set_aside_and_said(path, messages)
    assert "foreign cache entry" in messages[-1]


def test_forged_entry_is_recomputed_by_the_run(tmp_path, capsys):
    """The reproducer: a forged entry with the cell's key counted as cached, then crashed after
    the CSV was written. Now it is set aside, named, and the cell computed."""
    from slr.suite import get_profile

    key = denoising.cell(get_profile("tiny").spec("denoising"), "Zero", "Zero").key("denoising")
    cache = CellCache(tmp_path / "cache", "denoising", print)
    cache.directory.mkdir(parents=True)
    forged = _valid_record()
    del forged.row["objective"]
    np.savez(cache.directory / f"{key[:32]}.npz", __meta__=np.asarray(json.dumps({"key": key, "row": forged.row})),
             hist_iteration=np.zeros((2, 2)))
    log = run_experiments(["denoising"], "tiny", tmp_path / "out", cells="Zero/Zero", cache_dir=tmp_path / "cache")
    assert log.computed == ["denoising:Zero-Zero"]
    assert f"{cache.directory / key[:32]}.npz: foreign cache entry" in capsys.readouterr().err
    df = pd.read_csv(tmp_path / "out" / "denoising_results.csv")
    assert df.unary.tolist() == ["Zero"] and np.isfinite(df.objective).all()


# ---------------------------------------------------------------------------- results CSVs
def _table(path: Path, messages: list) -> ResultsTable:
    return ResultsTable(path, ["cell", "note"], ["cell"], messages.append)


def test_csv_field_over_the_csv_limit_is_one_damaged_line(tmp_path):
    path = tmp_path / "r.csv"
    _table(path, []).upsert([dict(cell="a", note="x"), dict(cell="b", note="y")])
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + lines[1] + f"c,{'z' * 200_000},00000000\n" + lines[2])
    messages = []
    assert [r["cell"] for r in _table(path, messages).rows()] == ["a", "b"]
    assert str(path) in messages[-1] and "1 damaged line(s)" in messages[-1]


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_csv_that_is_not_a_file_is_set_aside_by_the_next_write(tmp_path, kind):
    path = tmp_path / "r.csv"
    _table(path, []).upsert([dict(cell="b", note="y")])
    path.unlink()
    if kind == "directory":
        (path / "inner").mkdir(parents=True)
    else:
        os.mkfifo(path)
    messages = []
    table = _table(path, messages)
    assert finishes(table.rows) == []
    assert str(path) in messages[-1] and not list(tmp_path.glob("r.csv.damaged-*"))   # a read moves nothing
    table.upsert([dict(cell="a", note="x")])
    assert len(list(tmp_path.glob("r.csv.damaged-*"))) == 1
    assert [r["cell"] for r in table.rows()] == ["a"]


def test_full_disk_names_the_file(tmp_path, monkeypatch, capsys):
    import slr.suite.store as store

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    path = tmp_path / "r.csv"
    monkeypatch.setattr(store.os, "fsync", full)
    with pytest.raises(OSError, match="No space left on device") as raised:
        _table(path, []).upsert([dict(cell="a", note="x")])
    assert str(path) in str(raised.value) and not list(tmp_path.iterdir())   # no temporary file left
    # the whole command: the cell cannot be cached (said), then the CSV cannot be written (named)
    out = tmp_path / "out"
    assert main(["denoising", "--tiny", "--cells", "Zero/Zero", "--out", str(out),
                 "--cache-dir", str(tmp_path / "cache")]) == 1
    err = capsys.readouterr().err
    assert "the computed cell is not cached" in err
    assert (f"slr: error: OSError: [Errno {errno.ENOSPC}] No space left on device: "
            f"'{out / 'denoising_results.csv'}'") in err


def test_read_only_cache_subdirectory_keeps_the_computed_cell(tmp_path, monkeypatch, capsys):
    """Writes into the cache's experiment directory fail as in a read-only directory (chmod
    cannot show it: the tests may run as root); the cell still reaches the CSV."""
    import slr.suite.store as store

    cache = tmp_path / "cache"
    real = store.tempfile.mkstemp

    def read_only(*args, dir=None, **kwargs):
        if Path(dir) == cache / "denoising":
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(store.tempfile, "mkstemp", read_only)
    log = run_experiments(["denoising"], "tiny", tmp_path / "out", cells="Zero/Zero", cache_dir=cache)
    assert log.computed == ["denoising:Zero-Zero"]
    assert "the computed cell is not cached (Permission denied)" in capsys.readouterr().err
    assert pd.read_csv(tmp_path / "out" / "denoising_results.csv").unary.tolist() == ["Zero"]
    assert not list((cache / "denoising").glob("*.npz"))


# ---------------------------------------------------------------------------- locks
def _locked(directory: Path) -> bool:
    with open(directory / ".slr.lock", "a") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return False


def test_out_and_cache_one_directory_take_one_lock(tmp_path):
    """``--out D --cache-dir D`` waited forever for itself."""
    log = finishes(lambda: run_experiments(["denoising"], "tiny", tmp_path, quiet=True, cells="Zero/Zero",
                                             cache_dir=tmp_path))
    assert log.computed == ["denoising:Zero-Zero"]
    assert (tmp_path / "denoising_results.csv").is_file()
    # the same directory under two names
    os.symlink(tmp_path, tmp_path.parent / (tmp_path.name + "-link"))
    finishes(lambda: run_experiments(["denoising"], "tiny", tmp_path, quiet=True, cells="Zero/Zero",
                                       cache_dir=tmp_path.parent / (tmp_path.name + "-link")))


def test_locks_are_taken_in_one_order_whatever_the_arguments(tmp_path):
    """``--out A --cache-dir B`` beside ``--out B --cache-dir A`` deadlocked. The run
    that names B first waits for the first directory in the global order, holding nothing."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    first, second = sorted([a, b], key=lambda d: (os.stat(d).st_dev, os.stat(d).st_ino))
    waiting = threading.Event()
    with DirLock(first, print):           # one run holds the first lock of the order
        def other_run():
            with run_locks([second, first], lambda m: waiting.set()):
                return "done"

        thread = threading.Thread(target=other_run, daemon=True)
        thread.start()
        assert waiting.wait(TIMEOUT), "the other run does not wait"
        assert not _locked(second), "the waiting run holds a lock the first run needs"
    thread.join(TIMEOUT)
    assert not thread.is_alive()


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_lock_file_that_is_not_a_file_is_set_aside(tmp_path, kind):
    lock = tmp_path / ".slr.lock"
    if kind == "directory":
        (lock / "inner").mkdir(parents=True)
    else:
        os.mkfifo(lock)
    messages = []
    finishes(lambda: DirLock(tmp_path, messages.append).__enter__().__exit__())
    assert lock.is_file() and str(lock) in messages[-1]
    assert len(list(tmp_path.glob(".slr.lock.damaged-*"))) == 1
