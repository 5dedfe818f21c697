"""Provenance of a report: command, profile, commit, machine, time."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["RunMeta", "collect_meta"]


@dataclass
class RunMeta:
    """What produced a report (printed at the top of every markdown file)."""

    command: str
    profile: str
    commit: str
    machine: str
    started: str = field(default_factory=lambda: time.strftime("%Y-%m-%d %H:%M:%S %Z"))

    def markdown(self) -> str:
        """A short provenance block."""
        return (
            f"- command: `{self.command}`\n"
            f"- profile: `{self.profile}`\n"
            f"- commit: `{self.commit}`\n"
            f"- machine: {self.machine}\n"
            f"- generated: {self.started}\n"
        )


def _git_commit() -> str:
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        commit = out.stdout.strip() or "unknown"
        # "dirty" means edited code; the reports being (re)written do not count
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no",
                                "--", ".", ":(exclude)reports"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def collect_meta(profile: str, argv: list[str] | None = None) -> RunMeta:
    """Gather the provenance of the current run."""
    argv = sys.argv if argv is None else argv
    command = "slr " + " ".join(argv[1:]) if argv else "slr"
    machine = (f"{platform.system()} {platform.machine()}, {_cpu_name()}, "
               f"{os.cpu_count()} logical cores, Python {platform.python_version()}")
    return RunMeta(command=command, profile=profile, commit=_git_commit(), machine=machine)
