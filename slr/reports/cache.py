"""Results CSV that doubles as the resume cache: one row per finished cell."""
from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["ResultsCSV", "config_hash"]


def config_hash(config: Mapping[str, Any]) -> str:
    """A short stable hash of an experiment's settings, stored with every cell.

    Cells computed under other settings (another profile, or an edited profile) are then
    neither reused nor reported.
    """
    import hashlib
    import json

    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


class ResultsCSV:
    """Append-only CSV of finished cells keyed by some of its columns.

    A cell is "done" when a row with its key exists; rows are appended (and flushed to
    disk) as soon as a cell finishes, so an interrupted run loses at most the cell in
    progress and a rerun computes only what is missing.

    Parameters
    ----------
    path : path-like
        The CSV file (created with a header on the first :meth:`add`).
    columns : sequence of str
        All columns, in order.
    key : sequence of str
        The columns that identify a cell (a subset of ``columns``).
    """

    def __init__(self, path: str | os.PathLike, columns: Sequence[str], key: Sequence[str]) -> None:
        missing = set(key) - set(columns)
        if missing:
            raise ValueError(f"key columns {sorted(missing)} are not in columns")
        self.path = Path(path)
        self.columns = list(columns)
        self.key = list(key)
        self._done: set[tuple[str, ...]] = set()
        if self.path.exists() and self.path.stat().st_size > 0:
            with self.path.open(newline="") as fh:
                reader = csv.DictReader(fh)
                if reader.fieldnames != self.columns:
                    # Different layout (older version of the suite): start afresh.
                    fh.close()
                    self.path.rename(self.path.with_suffix(".csv.old"))
                else:
                    for row in reader:
                        self._done.add(self._key_of(row))

    def _key_of(self, row: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(_fmt(row[k]) for k in self.key)

    def has(self, **key: Any) -> bool:
        """True when the cell with these key values is already in the CSV."""
        return self._key_of(key) in self._done

    def add(self, row: Mapping[str, Any]) -> None:
        """Append one finished cell and flush it to disk."""
        unknown = set(row) - set(self.columns)
        if unknown:
            raise ValueError(f"row has unknown columns {sorted(unknown)}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists() or self.path.stat().st_size == 0
        with self.path.open("a", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=self.columns)
            if new:
                writer.writeheader()
            writer.writerow({c: _fmt(row.get(c, "")) for c in self.columns})
            fh.flush()
            os.fsync(fh.fileno())
        self._done.add(self._key_of(row))

    def frame(self, **where: Any) -> pd.DataFrame:
        """The rows (those whose columns equal ``where``) as a DataFrame."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return pd.DataFrame(columns=self.columns)
        df = pd.read_csv(self.path, dtype={c: str for c in where})
        for col, value in where.items():
            df = df[df[col] == str(value)]
        return df.reset_index(drop=True)

    def __len__(self) -> int:
        return len(self._done)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)


def cells(*axes: Iterable) -> list[tuple]:
    """The cartesian product of the axes, as a list (row-major)."""
    import itertools

    return list(itertools.product(*axes))
