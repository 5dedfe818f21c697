"""Figures of the reports: matplotlib, imported only when a report draws (the plotting extra)."""
from __future__ import annotations

import io
from pathlib import Path

from slr.suite.store import write_output

__all__ = ["plt", "save_fig"]


def plt():
    """pyplot with the non-interactive Agg backend."""
    from slr._optional import import_optional

    matplotlib = import_optional("matplotlib", "suite", "the reports' figures")
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as pyplot

    return pyplot


def save_fig(fig, path: Path) -> None:
    """Save (atomically) and close a figure."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt().close(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_output(path, buffer.getvalue())
