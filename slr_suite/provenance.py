"""Where a number comes from: the code fingerprint, the dependency versions, the git commit and
the machine of a run, and the cache key of a cell built from them.

A cell of an experiment is answered from the cache only when its key matches, and the key is
made of everything that can change its result: the profile's settings for the experiment, the
cell's name, the seed, the code fingerprint and the versions of the numerical dependencies.
The machine and the thread count are deliberately not part of it: seeded results are identical
across x86-64 machines and thread counts (tested in ``tests/suite/test_trust.py``).

The code fingerprint (:func:`code_fingerprint`) hashes the ``.py`` sources of ``slr``,
``slr.baselines`` and ``slr.suite`` (render-only modules left out) and the *build record* of the
compiled kernels, ``slr/_build_record.json``. ``setup.py`` writes that record when it compiles
them: the digest of the kernel sources (``.pyx``, ``.pxd``, ``.h``), the compile and link flags,
the Cython directives, the versions of Cython and NumPy and the compiler it built with, and the
SHA-256 of every extension module it produced. At run time the extension modules that are
loaded are hashed from their files and must be those of the record, and where the kernel
sources are installed (an editable checkout) they must be those the record names: a kernel
edited but not rebuilt, or a binary from elsewhere, is refused (:class:`StaleKernelsError`)
before any cell is computed or cached. An editable install and a wheel of the same commit,
built with the same Cython, NumPy, compiler and flags, have one fingerprint (tested in
``tests/tooling/test_packaging.py``): the binaries themselves differ between two builds (they need not
be byte-identical), so the key names what they were built from, and the check names the binaries.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

__all__ = ["RunInfo", "StaleKernelsError", "cache_key", "code_fingerprint", "config_hash", "dependency_versions",
           "git_state", "kernel_sources_digest", "machine_description", "worker_identity", "BUILD_RECORD",
           "PROVENANCE_COLUMNS"]

#: Packages whose version is part of every cache key.
KEY_DEPENDENCIES = ("numpy", "scipy", "scikit-learn", "lightgbm", "cvxpy", "clarabel")
#: Modules that only render reports from results: editing them recomputes nothing.
RENDER_ONLY = frozenset({
    "slr.suite/markdown.py", "slr.suite/index.py", "slr.suite/render_denoising.py",
    "slr.suite/render_baselines.py", "slr.suite/render_bound.py", "slr.suite/render_distributed.py",
})
#: Columns every results CSV carries after its own: which run computed the row.
PROVENANCE_COLUMNS = ("commit", "dirty", "code", "command", "machine", "computed_at")
#: The packages whose code computes the cells.
PACKAGES = ("slr", "slr.baselines", "slr.suite")
#: Sources the kernels are compiled from, and the packages holding them (``setup.py``'s
#: ``SOURCE_ROOTS``; it hashes the same files).
KERNEL_SOURCE_SUFFIXES = (".pyx", ".pxd", ".h")
KERNEL_PACKAGES = ("slr",)
#: The build record, in the ``slr`` package (written by ``setup.py``'s ``build_ext``).
BUILD_RECORD = "_build_record.json"
_REBUILD = "run make venv (or pip install again)"


class StaleKernelsError(RuntimeError):
    """The compiled kernels are not those built from the sources installed beside them."""


def config_hash(config: Mapping[str, Any]) -> str:
    """A short stable hash of the settings an experiment's cells share (the ``config`` column of
    its CSVs). Settings of some cells only (a data set's budgets or part of a grid) enter those
    cells' keys (:func:`cache_key`), not this hash: the runner writes every row under the current
    spec's config and leaves under it only the rows of cells that spec lists
    (:mod:`slr.suite.runner`)."""
    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _package_roots() -> dict[str, Path]:
    """The directory of each of :data:`PACKAGES` that is installed (located; a subpackage's
    parent ``slr`` is imported to locate it). In a checkout the subpackages live beside ``slr/``
    (``baselines/``, ``slr_suite/``), in a wheel inside it."""
    roots = {}
    for package in PACKAGES:
        try:
            spec = importlib.util.find_spec(package)
        except ModuleNotFoundError:
            spec = None
        if spec is not None and spec.origin is not None:
            roots[package] = Path(spec.origin).resolve().parent
    return roots


def _source_files(roots: Mapping[str, Path], suffixes: tuple[str, ...]) -> list[tuple[str, Path]]:
    """``(package/relative/path, path)`` of the source files with ``suffixes`` under ``roots``, sorted.

    A name starting with ``.`` or ``#`` (an editor's lock or backup, e.g. Emacs's dangling
    symlink ``.#learner.py``) or one that is not a regular file is no source (none is importable
    or built): it is left out with a warning naming it.
    """
    files = []
    for package, root in sorted(roots.items()):
        nested = [other for other in roots.values() if other != root and other.is_relative_to(root)]
        for path in root.rglob("*"):
            if path.suffix not in suffixes or "__pycache__" in path.parts:
                continue
            if any(path.is_relative_to(inner) for inner in nested):   # another package's file
                continue
            if path.name.startswith((".", "#")) or not path.is_file():
                warnings.warn(f"{path}: not a source file (an editor's lock or backup?); left out of the "
                              "code fingerprint", stacklevel=3)
                continue
            files.append((f"{package}/{path.relative_to(root).as_posix()}", path))
    return sorted(files)


def _digest(files: list[tuple[str, Path]]) -> str:
    digest = hashlib.sha256()
    for rel, path in files:
        digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def kernel_sources_digest(roots: Mapping[str, Path]) -> str | None:
    """SHA-256 of the kernel sources (``.pyx``, ``.pxd``, ``.h``) of the packages at ``roots``
    (``{"slr": path, ...}``), or None where none is installed (a wheel).

    ``setup.py`` records it when it compiles the kernels; :func:`code_fingerprint` compares it
    with the sources present at run time.
    """
    files = _source_files({p: r for p, r in roots.items() if p in KERNEL_PACKAGES}, KERNEL_SOURCE_SUFFIXES)
    return _digest(files) if files else None


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _build_record(roots: Mapping[str, Path]) -> dict[str, Any]:
    """The kernels' build record, checked against the sources and the loaded binaries.

    Raises
    ------
    StaleKernelsError
        When there is no readable record, the kernel sources present are not those the
        kernels were built from, or an extension module's file is not the one the build made.
    """
    if "slr" not in roots:
        raise StaleKernelsError("slr is not installed")
    path = roots["slr"] / BUILD_RECORD
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        inputs, binaries = record["inputs"], record["binaries"]
        if not isinstance(inputs, dict) or not isinstance(binaries, dict) or not binaries:
            raise ValueError("not a build record")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StaleKernelsError(f"{path}: no build record of the kernels ({type(exc).__name__}); "
                                f"{_REBUILD}") from None
    sources = kernel_sources_digest(roots)
    if sources is not None and sources != inputs.get("sources"):
        raise StaleKernelsError(f"the kernels are older than their sources in {roots['slr']}: {_REBUILD}")
    for module, expected in sorted(binaries.items()):
        origin = getattr(sys.modules.get(module), "__file__", None)
        if origin is None:     # not imported yet: the file an import would load, found without importing
            top, *inner = module.split(".")[:-1]
            spec = PathFinder.find_spec(module, [str(roots[top].joinpath(*inner))]) if top in roots else None
            origin = spec.origin if spec is not None else None
        if origin is None or not os.path.isfile(origin):
            raise StaleKernelsError(f"the kernel {module} is missing: {_REBUILD}")
        if file_sha256(Path(origin)) != expected:
            raise StaleKernelsError(f"{origin}: the kernel {module} is not the one the build recorded in "
                                    f"{path}: {_REBUILD}")
    return record


@functools.cache
def code_fingerprint() -> str:
    """Hash of the code that computes a cell: the ``.py`` sources of ``slr``, ``slr.baselines`` and
    ``slr.suite`` (render-only modules, :data:`RENDER_ONLY`, left out) and what the compiled
    kernels were built from (their build record's inputs).

    Reads the files of the packages wherever they are installed (an editable checkout, a wheel,
    an sdist build), so an edited module, kernel source, compile flag or Cython version changes
    it.

    Raises
    ------
    StaleKernelsError
        When the kernels loaded are not those built from the installed sources (edited and not
        rebuilt, or another binary): no cell may be computed or cached with them.
    """
    roots = _package_roots()
    record = _build_record(roots)
    python = [(rel, path) for rel, path in _source_files(roots, (".py",)) if rel not in RENDER_ONLY]
    payload = json.dumps(dict(python=_digest(python), kernels=record["inputs"]), sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


@functools.cache
def dependency_versions() -> dict[str, str]:
    """Versions of :data:`KEY_DEPENDENCIES` (``"absent"`` where not installed) and Python's."""
    versions = {"python": ".".join(platform.python_version_tuple()[:2])}
    for name in KEY_DEPENDENCIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def worker_identity() -> dict[str, Any]:
    """The code fingerprint and dependency versions of this process (a Dask worker reports its
    own with every task, and the run refuses results from a worker whose identity differs)."""
    return dict(code=code_fingerprint(), versions=dependency_versions())


def cache_key(experiment: str, cell: Mapping[str, Any], config: Mapping[str, Any], seed: int) -> str:
    """The key under which a cell's result is cached (hex sha256).

    Parameters
    ----------
    experiment : str
        ``"denoising"``, ``"baselines"``, ``"baselines-tuning"`` (the validation fits) or ``"bound"``.
    cell : mapping
        What names the cell in the experiment (e.g. ``{"unary": "Boost", "pairwise": "MLP"}``).
    config : mapping
        The profile's settings for the experiment.
    seed : int
        The experiment's base seed.
    """
    payload = dict(experiment=experiment, cell=dict(cell), config=dict(config), seed=seed,
                   code=code_fingerprint(), versions=dependency_versions())
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def git_state() -> tuple[str, bool]:
    """``(short commit, dirty)`` of the checkout the code runs from (``("unknown", False)``
    outside a git checkout). Dirty means edited code; the reports being written do not count."""
    root = Path(__file__).resolve().parents[1]   # the checkout holding slr_suite/
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=10", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        if out.returncode != 0 or not out.stdout.strip():
            return "unknown", False
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no",
                                "--", ".", ":(exclude)reports"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip(), bool(dirty)
    except (OSError, subprocess.SubprocessError):
        return "unknown", False


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine_description() -> str:
    """OS, architecture, CPU model, logical cores and Python version of this machine."""
    return (f"{platform.system()} {platform.machine()}, {_cpu_name()}, {os.cpu_count()} logical cores, "
            f"Python {platform.python_version()}")


@dataclass(frozen=True)
class RunInfo:
    """The run in progress: what every row it computes records, and what a report names."""

    command: str
    profile: str
    commit: str
    dirty: bool
    code: str
    machine: str
    started: str = field(default_factory=lambda: time.strftime("%Y-%m-%d %H:%M:%S %Z"))

    @classmethod
    def collect(cls, profile: str, argv: list[str] | None = None, computing: bool = True) -> "RunInfo":
        """Gather the provenance of the current process (``argv`` defaults to ``sys.argv``).

        A run that only renders (``computing=False``) records the code as ``"stale"`` where
        :func:`code_fingerprint` refuses the kernels; a computing run lets the refusal through.
        """
        argv = sys.argv if argv is None else argv
        command = "slr " + " ".join(argv[1:]) if argv else "slr"
        commit, dirty = git_state()
        try:
            code = code_fingerprint()
        except StaleKernelsError:
            if computing:
                raise
            code = "stale"
        return cls(command=command, profile=profile, commit=commit, dirty=dirty, code=code,
                   machine=machine_description())

    @property
    def commit_label(self) -> str:
        """The commit with ``+dirty`` when the code had uncommitted edits."""
        return self.commit + ("+dirty" if self.dirty else "")

    def row_fields(self) -> dict[str, Any]:
        """The provenance columns of a row computed now, here: the run's commit and command, and
        the code fingerprint, machine and time of the process computing it (a Dask worker's own)."""
        return dict(commit=self.commit, dirty=self.dirty, code=code_fingerprint(), command=self.command,
                    machine=machine_description(), computed_at=time.strftime("%Y-%m-%d %H:%M:%S %Z"))
