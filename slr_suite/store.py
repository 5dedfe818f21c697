"""Files that survive faults: atomic writes, backups that never overwrite, a directory lock and
the cache of computed cells.

- :func:`atomic_write_bytes` writes a temporary file in the target's directory, ``fsync``\\ s it
  and renames it over the target, so a reader (or a rerun after ``kill -9``) sees the old
  file or the new one, never a mix.
- :func:`set_aside` moves a damaged file to ``NAME.damaged-YYYYmmdd-HHMMSS[-K]``, a name that
  no earlier backup holds.
- :class:`DirLock` is one ``flock`` per directory; a second run waits for the first, saying
  which process holds it.
- :class:`CellCache` keeps one ``.npz`` per computed cell, named by its key
  (:func:`slr_suite.provenance.cache_key`), outside the reports: ``$SLR_CACHE_DIR`` or
  ``~/.cache/slr/results`` unless ``--cache-dir`` says otherwise.
"""
from __future__ import annotations

import errno
import fcntl
import io
import json
import os
import tempfile
import time
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CellCache", "CellRecord", "DirLock", "atomic_write_bytes", "atomic_write_text", "default_cache_dir",
           "set_aside"]


def default_cache_dir() -> Path:
    """``$SLR_CACHE_DIR``, else ``$XDG_CACHE_HOME/slr/results``, else ``~/.cache/slr/results``."""
    if os.environ.get("SLR_CACHE_DIR"):
        return Path(os.environ["SLR_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "slr" / "results"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically (temporary file, ``fsync``, ``os.replace``)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def set_aside(path: Path, log: Callable[[str], None], why: str) -> Path:
    """Move ``path`` to a fresh ``.damaged-<time>`` name next to it and say so; return the name."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for k in range(1000):
        backup = path.with_name(f"{path.name}.damaged-{stamp}" + (f"-{k}" if k else ""))
        try:
            # os.link fails if the name exists, so no earlier backup is ever overwritten
            os.link(path, backup)
        except FileExistsError:
            continue
        path.unlink()
        log(f"{path}: {why}; moved to {backup}")
        return backup
    raise RuntimeError(f"no free backup name for {path}")


class DirLock:
    """An exclusive lock on a directory for the lifetime of a run (``with DirLock(d, log):``).

    The lock is ``flock`` on ``DIR/.slr.lock``, released by the kernel when the holder exits
    (even by ``kill -9``), so no stale lock survives a crash. A second run waits and says which
    process holds the lock.
    """

    def __init__(self, directory: Path, log: Callable[[str], None], poll: float = 0.5) -> None:
        self.path = Path(directory) / ".slr.lock"
        self.log = log
        self.poll = poll
        self._fh: io.TextIOWrapper | None = None

    def __enter__(self) -> "DirLock":
        fh = open(self.path, "a+")
        said = False
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    fh.close()
                    raise
                if not said:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    self.log(f"{self.path.parent}: another slr run (pid {holder}) is using it; waiting")
                    said = True
                time.sleep(self.poll)
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


@dataclass
class CellRecord:
    """A computed cell: its results row (scalars) and its arrays (curves, images)."""

    row: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


class CellCache:
    """Computed cells of one experiment, one file per cache key, in ``root/experiment/``.

    Parameters
    ----------
    root : path-like
        The cache directory (see :func:`default_cache_dir`).
    experiment : str
        Subdirectory for the experiment's cells.
    log : callable
        Receives a message when a damaged entry is set aside.
    read : bool, default=True
        False ignores existing entries (``--no-cache``: every cell is recomputed and stored anew).
    """

    def __init__(self, root: Path, experiment: str, log: Callable[[str], None], read: bool = True) -> None:
        self.directory = Path(root) / experiment
        self.log = log
        self.read = read

    def _path(self, key: str) -> Path:
        return self.directory / f"{key[:32]}.npz"

    def load(self, key: str) -> CellRecord | None:
        """The cell stored under ``key``, or None (not stored, ``read=False``, or damaged)."""
        path = self._path(key)
        if not self.read or not path.exists():
            return None
        try:
            with np.load(path, allow_pickle=False) as npz:
                meta = json.loads(str(npz["__meta__"]))
                arrays = {name: npz[name] for name in npz.files if name != "__meta__"}
            if meta.get("key") != key or not isinstance(meta.get("row"), dict):
                raise ValueError("entry belongs to another key")
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, json.JSONDecodeError) as exc:
            set_aside(path, self.log, f"unreadable cache entry ({type(exc).__name__})")
            return None
        return CellRecord(row=meta["row"], arrays=arrays)

    def save(self, key: str, record: CellRecord) -> None:
        """Store ``record`` under ``key`` (atomically)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        meta = json.dumps({"key": key, "row": _plain(record.row)})
        np.savez_compressed(buffer, __meta__=np.asarray(meta), **record.arrays)
        atomic_write_bytes(self._path(key), buffer.getvalue())


def _plain(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with NumPy scalars turned into Python ones (for JSON)."""
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in row.items()}
