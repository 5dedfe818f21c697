"""Files that survive faults: atomic writes, backups that never overwrite, a directory lock and
the cache of computed cells.

- :func:`atomic_write_bytes` writes a temporary file in the target's directory, ``fsync``\\ s it
  and renames it over the target, so a reader (or a rerun after ``kill -9``) sees the old
  file or the new one, never a mix; the file gets the usual mode (``0o666`` less the umask).
- :func:`write_output` writes a file of an output directory, and never one slr did not write:
  the directory's :data:`MANIFEST` lists the files slr wrote there.
- :func:`set_aside` moves a damaged or foreign file (or a directory, FIFO, ... where a file
  belongs) to ``NAME.damaged-YYYYmmdd-HHMMSS[-K]``, a name that no earlier backup holds.
- :func:`read_regular` reads a regular file only: a FIFO or device at a file's name never
  blocks a read.
- :class:`DirLock` is one ``flock`` per directory; a second run waits for the first, saying
  which process holds it. :func:`run_locks` takes the locks of several directories in one
  global order (by device and inode), once per directory, so two runs never deadlock.
- :class:`CellCache` keeps one ``.npz`` per computed cell, named by its key
  (:func:`slr.suite.provenance.cache_key`), outside the reports: ``$SLR_CACHE_DIR`` or
  ``~/.cache/slr/results`` unless ``--cache-dir`` says otherwise. An entry is used only when it
  is a regular file holding a record of its key that the experiment's check accepts
  (:class:`RecordSpec`); any other is set aside with a message naming it.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import json
import os
import stat
import tempfile
import time
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MANIFEST", "CellCache", "CellRecord", "DirLock", "NotARegularFile", "RecordSpec", "atomic_write_bytes",
           "atomic_write_text", "check_ours", "default_cache_dir", "read_regular", "run_locks", "set_aside",
           "write_output"]


def default_cache_dir() -> Path:
    """``$SLR_CACHE_DIR``, else ``$XDG_CACHE_HOME/slr/results``, else ``~/.cache/slr/results``."""
    if os.environ.get("SLR_CACHE_DIR"):
        return Path(os.environ["SLR_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "slr" / "results"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically (temporary file, ``fsync``, ``os.replace``).

    Raises
    ------
    OSError
        Naming ``path`` (a full disk, a read-only directory, ...); ``path`` is left as it was.
    """
    path = Path(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, _new_file_mode())   # mkstemp's 0600 would keep reports and cache entries private
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))


def _new_file_mode() -> int:
    """The mode ``open`` gives a new file: ``0o666`` less the process's umask (read without
    changing it where Linux shows it, since ``os.umask`` sets it for every thread)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            umask = next(int(line.split()[1], 8) for line in status if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        umask = os.umask(0o022)
        os.umask(umask)
    return 0o666 & ~umask


#: The file in an output directory that lists the files slr wrote there, one name a line.
MANIFEST = ".slr-written"


def _written_by_slr(directory: Path) -> set[str]:
    data = read_regular(directory / MANIFEST)
    return set(data.decode("utf-8", errors="replace").splitlines()) if data else set()


def check_ours(path: Path) -> None:
    """Raise ``FileExistsError`` naming ``path`` when something is at that name that slr did not
    write (not listed in its directory's :data:`MANIFEST`)."""
    path = Path(path)
    if os.path.lexists(path) and path.name not in _written_by_slr(path.parent):
        raise FileExistsError(errno.EEXIST, f"in the way: slr did not write it (it is not listed in "
                              f"{MANIFEST}) and never replaces a file it did not write; move it, or choose "
                              "another output directory", str(path))


def write_output(path: Path, data: bytes | str) -> None:
    """:func:`atomic_write_bytes` for a file of an output directory (reports, results, figures),
    which never replaces a file slr did not write (:func:`check_ours`).

    The file's name goes into the directory's :data:`MANIFEST` before the file is written, so a
    run killed in between leaves a name listed without its file, never a file of slr's unlisted.
    """
    path = Path(path)
    check_ours(path)
    ours = _written_by_slr(path.parent)
    if path.name not in ours:
        try:
            atomic_write_text(path.parent / MANIFEST, "".join(f"{name}\n" for name in sorted(ours | {path.name})))
        except OSError as exc:   # named as the file it was for
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
    atomic_write_bytes(path, data.encode("utf-8") if isinstance(data, str) else data)


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
    """Move ``path`` (a file, symlink, FIFO or directory) to a fresh ``.damaged-<time>`` name next
    to it and say so; return the name."""
    path = Path(path)
    directory = path.is_dir() and not path.is_symlink()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for k in range(1000):
        backup = path.with_name(f"{path.name}.damaged-{stamp}" + (f"-{k}" if k else ""))
        if directory:
            if os.path.lexists(backup):
                continue
            os.rename(path, backup)
        else:
            try:
                # os.link fails if the name exists, so no earlier backup is ever overwritten
                os.link(path, backup, follow_symlinks=False)
            except FileExistsError:
                continue
            path.unlink()
        log(f"{path}: {why}; moved to {backup}")
        return backup
    raise RuntimeError(f"no free backup name for {path}")


class NotARegularFile(OSError):
    """A directory, FIFO, socket or device where a regular file was expected."""


def read_regular(path: Path) -> bytes | None:
    """The bytes of the regular file ``path``, or None when there is nothing at that name.

    The file is opened without blocking and checked before it is read, so a FIFO at the name
    never hangs the run.

    Raises
    ------
    NotARegularFile
        When something other than a regular file (or a symlink to one) is at ``path``.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        if os.path.lexists(path):     # a dangling symlink
            raise NotARegularFile(errno.ENOENT, "a dangling symbolic link", str(path)) from None
        return None
    except IsADirectoryError:
        raise NotARegularFile(errno.EISDIR, "a directory", str(path)) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotARegularFile(errno.EINVAL, "a directory" if stat.S_ISDIR(mode) else "not a regular file",
                              str(path))
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


class DirLock:
    """An exclusive lock on a directory for the lifetime of a run (``with DirLock(d, log):``).

    The lock is ``flock`` on ``DIR/.slr.lock``, released by the kernel when the holder exits
    (even by ``kill -9``), so no stale lock survives a crash. A second run waits and says which
    process holds the lock. Something other than a regular file at the lock's name (a
    directory, a FIFO) is set aside with a message. Two locks on one directory in one process
    would wait for each other: take several with :func:`run_locks`.
    """

    def __init__(self, directory: Path, log: Callable[[str], None], poll: float = 0.5) -> None:
        self.path = Path(directory) / ".slr.lock"
        self.log = log
        self.poll = poll
        self._fh: io.TextIOWrapper | None = None

    def _open(self) -> io.TextIOWrapper:
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
            except IsADirectoryError:
                set_aside(self.path, self.log, "a directory at the lock's name")
                continue
            if stat.S_ISREG(os.fstat(fd).st_mode):
                os.set_blocking(fd, True)
                return open(fd, "r+")
            os.close(fd)
            set_aside(self.path, self.log, "not a regular file at the lock's name")
        raise OSError(errno.EEXIST, "cannot create the lock file", str(self.path))

    def __enter__(self) -> "DirLock":
        fh = self._open()
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


@contextlib.contextmanager
def run_locks(directories: Iterable[Path], log: Callable[[str], None]) -> Iterator[None]:
    """Hold the :class:`DirLock` of every directory in ``directories`` (which must exist).

    A directory named twice (or by two paths) is locked once, and the locks are taken in one
    global order, by device and inode: two runs that lock the same directories, named in any
    order, never wait for each other in a cycle.
    """
    unique: dict[tuple[int, int], Path] = {}
    for directory in directories:
        st = os.stat(directory)
        unique.setdefault((st.st_dev, st.st_ino), Path(directory))
    with contextlib.ExitStack() as stack:
        for identity in sorted(unique):
            stack.enter_context(DirLock(unique[identity], log))
        yield


@dataclass
class CellRecord:
    """A computed cell: its results row (scalars) and its arrays (curves, images)."""

    row: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


#: A dimension in a :class:`RecordSpec` shape: a length, a name (one length wherever it appears
#: in a record) or None (any length).
Dim = int | str | None


@dataclass(frozen=True)
class RecordSpec:
    """What a cached record of an experiment holds: the check an experiment hands
    :meth:`CellCache.load` (``cache.load(key, validate=spec.check)``), so that an entry of the
    right key but the wrong contents (a forged or foreign file) is set aside, not counted as
    cached.

    Attributes
    ----------
    row : mapping
        Every field of the row -> the types its value may have (JSON's: ``str``, ``int``,
        ``float``, ``bool``); a ``bool`` is never taken for a number.
    arrays : mapping
        The arrays every record holds: name -> ``(kinds, shape)``, ``kinds`` as in
        ``numpy.dtype.kind`` (``"f"``, ``"iu"``), ``shape`` a tuple of :data:`Dim`.
    optional : mapping
        Arrays that a record holds all of or none of, in the same form.
    """

    row: Mapping[str, tuple[type, ...]]
    arrays: Mapping[str, tuple[str, tuple[Dim, ...]]] = field(default_factory=dict)
    optional: Mapping[str, tuple[str, tuple[Dim, ...]]] = field(default_factory=dict)

    def check(self, record: "CellRecord") -> None:
        """Raise ValueError naming the first way ``record`` does not fit."""
        missing, unknown = sorted(set(self.row) - set(record.row)), sorted(set(record.row) - set(self.row))
        if missing or unknown:
            raise ValueError(f"row fields missing {missing}, unknown {unknown}")
        for name, types in self.row.items():
            value = record.row[name]
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                raise ValueError(f"row field {name!r} is a {type(value).__name__}")
        names = set(record.arrays)
        specs = {**self.arrays, **self.optional}
        missing = sorted(set(self.arrays) - names)
        if names & set(self.optional):
            missing += sorted(set(self.optional) - names)
        if missing or names - set(specs):
            raise ValueError(f"arrays missing {missing}, unknown {sorted(names - set(specs))}")
        sizes: dict[str, int] = {}
        for name in sorted(names):
            kinds, shape = specs[name]
            array = record.arrays[name]
            if array.dtype.kind not in kinds or array.ndim != len(shape):
                raise ValueError(f"array {name!r} is {array.dtype} of shape {array.shape}")
            for dim, n in zip(shape, array.shape):
                if (isinstance(dim, int) and n != dim) or (isinstance(dim, str) and sizes.setdefault(dim, n) != n):
                    raise ValueError(f"array {name!r} has shape {array.shape}, other arrays disagree")


class CellCache:
    """Computed cells of one experiment, one file per cache key, in ``root/experiment/``.

    Parameters
    ----------
    root : path-like
        The cache directory (see :func:`default_cache_dir`).
    experiment : str
        Subdirectory for the experiment's cells.
    log : callable
        Receives a message when an entry is set aside or a cell cannot be stored.
    read : bool, default=True
        False ignores existing entries (``--no-cache``: every cell is recomputed and stored anew).
    """

    def __init__(self, root: Path, experiment: str, log: Callable[[str], None], read: bool = True) -> None:
        self.directory = Path(root) / experiment
        self.log = log
        self.read = read

    def _path(self, key: str) -> Path:
        return self.directory / f"{key[:32]}.npz"

    def _discard(self, path: Path, why: str) -> None:
        try:
            set_aside(path, self.log, why)
        except OSError as exc:
            self.log(f"{path}: {why}; ignored (it cannot be moved aside: {exc.strerror or exc})")

    def load(self, key: str, validate: Callable[[CellRecord], None] | None = None) -> CellRecord | None:
        """The cell stored under ``key``, or None (not stored, ``read=False``, damaged or foreign:
        such an entry is set aside with a message naming it).

        ``validate(record)`` raises ValueError when a stored record is not one the experiment
        can use (e.g. :meth:`RecordSpec.check`): that entry is set aside and the cell recomputed.
        """
        path = self._path(key)
        if not self.read:
            return None
        try:
            data = read_regular(path)
            if data is None:
                return None
            record = _parse_entry(data, key)
        except NotARegularFile as exc:
            self._discard(path, f"{exc.strerror} at a cache entry's name")
            return None
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
            self._discard(path, f"unreadable cache entry ({type(exc).__name__}: {exc})")
            return None
        try:
            if validate is not None:
                validate(record)
        except ValueError as exc:
            self._discard(path, f"foreign cache entry, not a record this experiment can use ({exc})")
            return None
        return record

    def save(self, key: str, record: CellRecord) -> None:
        """Store ``record`` under ``key`` (atomically). A cell that cannot be stored (a read-only
        or full cache) is not lost: the run goes on with it and says so."""
        path = self._path(key)
        buffer = io.BytesIO()
        meta = json.dumps({"key": key, "row": _plain(record.row)})
        np.savez_compressed(buffer, __meta__=np.asarray(meta), **record.arrays)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            if os.path.lexists(path) and (path.is_symlink() or not path.is_file()):
                self._discard(path, "not a regular file at a cache entry's name")
            atomic_write_bytes(path, buffer.getvalue())
        except OSError as exc:
            self.log(f"{path}: the computed cell is not cached ({exc.strerror or exc}); its results are "
                     "written, a rerun computes it again")


def _parse_entry(data: bytes, key: str) -> CellRecord:
    """The record in an entry's bytes; ValueError unless it is an npz archive of ``key``'s record."""
    archive = np.load(io.BytesIO(data), allow_pickle=False)
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError("not an npz archive")
    with archive:
        meta = json.loads(str(archive["__meta__"]))
        arrays = {name: archive[name] for name in archive.files if name != "__meta__"}
    if not isinstance(meta, dict) or meta.get("key") != key or not isinstance(meta.get("row"), dict):
        raise ValueError("not a record of this key")
    if not all(isinstance(v, (str, int, float, bool)) or v is None for v in meta["row"].values()):
        raise ValueError("a row field is not a number or text")
    return CellRecord(row=meta["row"], arrays=arrays)


def _plain(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with NumPy scalars turned into Python ones (for JSON)."""
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in row.items()}
