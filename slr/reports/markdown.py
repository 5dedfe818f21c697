"""Tiny markdown helpers (no tabulate dependency)."""
from __future__ import annotations

import math
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
