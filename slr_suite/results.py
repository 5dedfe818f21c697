"""The results CSVs of a report directory: one row per cell, merged by key, written atomically,
read tolerantly.

The CSVs are outputs (the cache of computed cells lives elsewhere, see
:mod:`slr.suite.store`), so a damaged CSV never costs a result: its intact rows are read (a read
never moves the file), and the next write sets the original aside under a fresh ``.damaged-*``
name with a message naming both paths and writes a clean file with those rows. Every row ends
with a ``check`` column (CRC-32 of its other fields), so a row altered in place is recognised as
damaged rather than read as a wrong number.
"""
from __future__ import annotations

import csv
import io
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from slr.suite.store import NotARegularFile, check_ours, read_regular, set_aside, write_output

__all__ = ["ResultsTable", "format_value", "CHECK_COLUMN"]

CHECK_COLUMN = "check"


def _check(fields: Sequence[str]) -> str:
    return f"{zlib.crc32(chr(31).join(fields).encode('utf-8')):08x}"


def format_value(value: Any) -> str:
    """A cell as CSV text: floats with every digit (``repr``), the rest with ``str``."""
    if isinstance(value, float):
        return repr(value)
    if hasattr(value, "dtype") and getattr(value, "shape", None) == ():
        return format_value(value.item())
    return str(value)


def _csv_lines(text: str) -> list[list[str] | None]:
    """The records of a CSV text, None for each one the csv module cannot read (e.g. a field over
    its size limit); the reader goes on with the next line."""
    reader = csv.reader(io.StringIO(text, newline=""))
    lines: list[list[str] | None] = []
    while True:
        try:
            lines.append(next(reader))
        except StopIteration:
            return lines
        except csv.Error:
            lines.append(None)


class ResultsTable:
    """A CSV of rows identified by some of their columns.

    Parameters
    ----------
    path : path-like
        The CSV file (created on the first :meth:`upsert`).
    columns : sequence of str
        All columns, in order.
    key : sequence of str
        The columns that identify a row; a newer row replaces an older one with the same key.
    log : callable
        Receives the messages about damaged files.
    """

    def __init__(self, path: Path, columns: Sequence[str], key: Sequence[str],
                 log: Callable[[str], None]) -> None:
        missing = set(key) - set(columns)
        if missing:
            raise ValueError(f"key columns {sorted(missing)} are not in columns")
        self.path = Path(path)
        self.columns = list(columns)
        self.key = list(key)
        self.log = log
        self._said: str | None = None

    def _key_of(self, row: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(format_value(row[k]) for k in self.key)

    def rows(self) -> list[dict[str, str]]:
        """The intact rows of the file, in file order, the last of each key kept.

        A read never moves or changes the file (a run that renders only, or computes some cells,
        may write nothing back): what is wrong with it is said, and the next :meth:`upsert` sets
        the file aside before it writes. A file that is not UTF-8 text, or whose header (before
        the check column) names a column not in :attr:`columns` or lacks a key column, gives no
        rows; a header of an earlier version that lacks columns added since is read with those
        columns empty (the next write adds them). A file with damaged lines (wrong number of
        fields, a field the csv module cannot read, a check that does not match, or a last line
        cut before its newline) gives its intact rows. Something other than a regular file at the
        CSV's name (a directory, a FIFO) gives no rows.
        """
        rows, problem = self._read()
        if problem is not None and problem != self._said:   # once, not at every read of a run
            self.log(f"{self.path}: {problem}; left as it is until results are written to it")
            self._said = problem
        return rows

    def _read(self) -> tuple[list[dict[str, str]], str | None]:
        """The intact rows and what is wrong with the file (None when nothing is)."""
        try:
            raw = read_regular(self.path)
        except NotARegularFile as exc:
            return [], f"{exc.strerror} at the results file's name"
        if not raw:
            return [], None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return [], "not a text file"
        lines = _csv_lines(text)
        header = lines[0][:-1] if lines and lines[0] and lines[0][-1:] == [CHECK_COLUMN] else None
        # a file of an earlier version that lacks columns added since is read with those empty
        if header is None or len(set(header)) != len(header) or not set(header) <= set(self.columns) \
                or not set(self.key) <= set(header):
            return [], "its columns are not those of this version of the suite"
        body = lines[1:]
        damaged = [i for i, fields in enumerate(body)
                   if fields is None or len(fields) != len(header) + 1 or _check(fields[:-1]) != fields[-1]]
        if body and not text.endswith("\n") and (len(body) - 1) not in damaged:
            damaged.append(len(body) - 1)   # a last line cut before its newline may hold a cut number
        by_key: dict[tuple[str, ...], dict[str, str]] = {}
        for i, fields in enumerate(body):
            if i not in damaged:
                row = dict.fromkeys(self.columns, "") | dict(zip(header, fields[:-1]))
                by_key.pop(self._key_of(row), None)
                by_key[self._key_of(row)] = row
        problem = (f"{len(damaged)} damaged line(s); the {len(body) - len(damaged)} intact rows are kept"
                   if damaged else None)
        return list(by_key.values()), problem

    def upsert(self, new_rows: Iterable[Mapping[str, Any]],
               drop: Callable[[Mapping[str, str]], bool] | None = None) -> None:
        """Add ``new_rows``, replacing rows with the same key, and rewrite the file atomically.

        A file slr did not write at the table's name is never replaced (``FileExistsError``,
        :func:`slr.suite.store.write_output`).

        ``drop(row)`` (a row of the file, as :meth:`rows` reads it) True removes that row.
        """
        new_rows = list(new_rows)
        for row in new_rows:
            unknown = set(row) - set(self.columns)
            if unknown:
                raise ValueError(f"row has unknown columns {sorted(unknown)}")
        check_ours(self.path)
        rows, problem = self._read()
        if problem is not None:   # the original is kept, under a fresh name
            set_aside(self.path, self.log, problem)
        merged = {self._key_of(r): r for r in rows if drop is None or not drop(r)}
        for row in new_rows:
            merged.pop(self._key_of(row), None)
            merged[self._key_of(row)] = row
        buffer = io.StringIO(newline="")
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([*self.columns, CHECK_COLUMN])
        for row in merged.values():
            fields = [format_value(row.get(c, "")) for c in self.columns]
            writer.writerow([*fields, _check(fields)])
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_output(self.path, buffer.getvalue().encode("utf-8"))

    def frame(self, **where: Any) -> pd.DataFrame:
        """The intact rows whose columns equal ``where``, as a DataFrame with parsed numbers."""
        rows = [r for r in self.rows() if all(r[c] == format_value(v) for c, v in where.items())]
        if not rows:
            return pd.DataFrame(columns=self.columns)
        buffer = io.StringIO(newline="")
        writer = csv.DictWriter(buffer, fieldnames=self.columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        buffer.seek(0)
        # a float NaN is written as repr(nan) = "nan": it must read back as a number, or the
        # whole column turns into text (and a plot of it into a categorical axis)
        return pd.read_csv(buffer, dtype={c: str for c in ("config", "commit", "code", *where)},
                           keep_default_na=False, na_values=["", "nan"])
