"""Shared helpers of the experiment modules: logging, timing, matplotlib setup."""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["Logger", "plt", "save_fig"]


class Logger:
    """Progress output on stderr with elapsed time; ``quiet`` silences it."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.t0 = time.perf_counter()
        self.computed: list[str] = []   # cells computed in this process (for tests / summary)

    def __call__(self, message: str) -> None:
        if not self.quiet:
            print(f"[slr {time.perf_counter() - self.t0:7.1f}s] {message}", file=sys.stderr, flush=True)


def plt():
    """pyplot with the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as pyplot

    return pyplot


def save_fig(fig, path: Path) -> None:
    """Save and close a figure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt().close(fig)


LogFn = Callable[[str], None]
