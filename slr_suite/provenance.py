"""Where a number comes from: the code fingerprint, the dependency versions, the git commit and
the machine of a run, and the cache key of a cell built from them.

A cell of an experiment is answered from the cache only when its key matches, and the key is
made of everything that can change its result: the profile's settings for the experiment, the
cell's name, the seed, a hash of the installed ``slr``, ``baselines`` and ``slr_suite`` sources
and the
versions of the numerical dependencies. The machine and the thread count are deliberately not
part of it: seeded results are identical across x86-64 machines and thread counts (tested in
``tests/test_trust.py``).
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
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["RunInfo", "cache_key", "code_fingerprint", "config_hash", "dependency_versions",
           "git_state", "machine_description", "PROVENANCE_COLUMNS"]

#: Packages whose version is part of every cache key.
KEY_DEPENDENCIES = ("numpy", "scipy", "scikit-learn", "lightgbm", "cvxpy")
#: Modules that only render reports from results: editing them recomputes nothing.
RENDER_ONLY = frozenset({
    "slr_suite/markdown.py", "slr_suite/index.py", "slr_suite/render_denoising.py",
    "slr_suite/render_baselines.py", "slr_suite/render_bound.py",
})
#: Columns every results CSV carries after its own: which run computed the row.
PROVENANCE_COLUMNS = ("commit", "dirty", "code", "command", "machine", "computed_at")
_SOURCE_SUFFIXES = (".py", ".pyx", ".pxd")


def config_hash(config: Mapping[str, Any]) -> str:
    """A short stable hash of an experiment's settings (the ``config`` column of a CSV)."""
    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


@functools.cache
def code_fingerprint() -> str:
    """Hash of the installed ``slr``, ``baselines`` and ``slr_suite`` sources (``.py``, ``.pyx``,
    ``.pxd``).

    Reads the files of the packages that are imported, wherever they are installed (an
    editable checkout, a wheel, an sdist build), so an edited kernel or oracle changes it.
    Render-only modules (:data:`RENDER_ONLY`) are left out.
    """
    digest = hashlib.sha256()
    for package in ("slr", "baselines", "slr_suite"):
        spec = importlib.util.find_spec(package)   # located, not imported
        if spec is None or spec.origin is None:
            digest.update(f"{package} absent".encode())
            continue
        root = Path(spec.origin).resolve().parent
        for path in sorted(root.rglob("*")):
            if path.suffix not in _SOURCE_SUFFIXES or "__pycache__" in path.parts:
                continue
            rel = f"{package}/{path.relative_to(root).as_posix()}"
            if rel in RENDER_ONLY:
                continue
            digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


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
    def collect(cls, profile: str, argv: list[str] | None = None) -> "RunInfo":
        """Gather the provenance of the current process (``argv`` defaults to ``sys.argv``)."""
        argv = sys.argv if argv is None else argv
        command = "slr " + " ".join(argv[1:]) if argv else "slr"
        commit, dirty = git_state()
        return cls(command=command, profile=profile, commit=commit, dirty=dirty,
                   code=code_fingerprint(), machine=machine_description())

    @property
    def commit_label(self) -> str:
        """The commit with ``+dirty`` when the code had uncommitted edits."""
        return self.commit + ("+dirty" if self.dirty else "")

    def row_fields(self) -> dict[str, Any]:
        """The provenance columns of a row computed now, here: the run's commit and command, and
        the code fingerprint, machine and time of the process computing it (a Dask worker's own)."""
        return dict(commit=self.commit, dirty=self.dirty, code=code_fingerprint(), command=self.command,
                    machine=machine_description(), computed_at=time.strftime("%Y-%m-%d %H:%M:%S %Z"))
