"""Tiny markdown helpers (no tabulate dependency)."""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["table", "fmt"]


def fmt(value: Any, digits: int = 3) -> str:
    """Format a cell: floats with ``digits`` decimals, NaN/None as an em dash."""
    if value is None:
        return "—"
    if isinstance(value, (bool,)):
        return "yes" if value else "**no**"
    if isinstance(value, float) or hasattr(value, "dtype"):
        try:
            v = float(value)
        except (TypeError, ValueError):
            return str(value)
        if math.isnan(v):
            return "—"
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 10 ** (-digits)):
            return f"{v:.{digits}g}" if abs(v) >= 1e5 else f"{v:.2e}"
        return f"{v:.{digits}f}"
    return str(value)


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 3,
          align: str | None = None) -> str:
    """A GitHub-flavoured markdown table."""
    head = "| " + " | ".join(str(h) for h in header) + " |"
    align = align or ("l" + "r" * (len(header) - 1))
    sep = "| " + " | ".join("---:" if a == "r" else ":---" for a in align) + " |"
    body = ["| " + " | ".join(fmt(c, digits) for c in row) + " |" for row in rows]
    return "\n".join([head, sep, *body]) + "\n"


def provenance_block(df, rendered) -> str:
    """Markdown naming the run(s) that computed the rows of ``df`` and the render ``rendered``.

    ``df`` holds the provenance columns (:data:`slr.suite.provenance.PROVENANCE_COLUMNS`);
    ``rendered`` is the :class:`slr.suite.provenance.RunInfo` of the process writing the report.
    """
    lines = []
    if len(df):
        runs = df.assign(label=[f"{c}{'+dirty' if str(d) == 'True' else ''}"
                                for c, d in zip(df["commit"], df["dirty"])])
        groups = runs.groupby(["command", "label", "code", "machine"], sort=False, dropna=False)
        lines.append("Computed by:\n")
        for (command, label, code, machine), rows in groups:
            dates = sorted(str(d) for d in rows["computed_at"])
            when = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
            lines.append(f"- `{command}` at commit `{label}` (code `{code}`) on {machine}, {when}: "
                         f"{len(rows)} row(s)\n")
        commits = runs["label"].unique()
        codes = runs["code"].unique()
        if len(commits) > 1 or len(codes) > 1:
            lines.append(f"\n**The rows below come from {len(commits)} commits and {len(codes)} code "
                         "versions**: compare them knowing that.\n")
    else:
        lines.append("Computed by: no rows yet.\n")
    lines.append(f"\nRendered by `{rendered.command}` at commit `{rendered.commit_label}` on "
                 f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}.\n")
    return "".join(lines)
