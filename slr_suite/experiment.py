"""What an experiment is to the suite: its cells, how one batch of cells is computed, its CSVs, its report.

Every experiment (:mod:`slr.suite.denoising`, :mod:`slr.suite.tuning`, :mod:`slr.suite.baselines`,
:mod:`slr.suite.bound`, ...) is an object satisfying :class:`Experiment`; :mod:`slr.suite.runner`
drives them all the same way (cache, tasks, CSVs) and :mod:`slr.suite.registry` lists them.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from slr.suite.common import Logger, RunContext
from slr.suite.provenance import RunInfo, cache_key
from slr.suite.results import ResultsTable
from slr.suite.store import CellRecord, RecordSpec

__all__ = ["Cell", "Experiment", "ExperimentBase", "Profile", "Report", "Table", "time_curve_table"]


@dataclass(frozen=True)
class Profile:
    """The settings of every experiment for one run size (:mod:`slr.suite.profiles` holds them).

    Attributes
    ----------
    name : str
        ``tiny``, ``quick`` or ``full``.
    specs : mapping
        ``{experiment name: its spec}`` (:class:`slr.suite.denoising.DenoisingSpec`,
        :class:`slr.suite.methods.BaselinesSpec`, :class:`slr.suite.bound.BoundSpec`, ...).
    """

    name: str
    specs: Mapping[str, Any]

    def spec(self, experiment: str) -> Any:
        """The spec of ``experiment``."""
        try:
            return self.specs[experiment]
        except KeyError:
            raise ValueError(f"experiment: profile {self.name!r} has no settings for {experiment!r}") from None

    def with_spec(self, experiment: str, spec: Any) -> Profile:
        """This profile with ``experiment``'s spec replaced by ``spec``."""
        return replace(self, specs={**self.specs, experiment: spec})


@dataclass(frozen=True)
class Cell:
    """One cell of an experiment: what identifies it, what its result depends on, how to compute it.

    Attributes
    ----------
    label : str
        What the log calls it (``"Boost-MLP"``).
    identity : mapping
        The cell within its experiment (``{"unary": "Boost", "pairwise": "MLP"}``).
    config : mapping
        The settings the cell's result depends on, and only those: with ``identity``, the
        experiment's name and ``seed`` they make the cell's cache key.
    seed : int
    args : tuple
        What :meth:`Experiment.compute` needs of the cell besides the experiment's spec; small
        and picklable.
    group : str or None
        Cells of one group that are not cached are computed by one task (e.g. the eps values of
        one graph share its exact MAP and LP); None: a task of its own.
    cost : float
        Relative cost; the costliest tasks start first, so that no worker idles at the end.
    record : CellRecord or None
        A record known without computing (a cell that cannot run here: its row says why). It is
        written when the cell is not cached, and never cached itself.
    """

    label: str
    identity: Mapping[str, Any]
    config: Mapping[str, Any]
    seed: int
    args: tuple = ()
    group: str | None = None
    cost: float = 0.0
    record: CellRecord | None = None

    def key(self, experiment: str) -> str:
        """The cell's cache key in ``experiment``."""
        return cache_key(experiment, self.identity, self.config, self.seed)


@dataclass(frozen=True)
class Table:
    """A results CSV of an experiment: its file, columns, key columns and the rows of one record."""

    file: str
    columns: Sequence[str]
    key: Sequence[str]
    rows: Callable[[CellRecord], Iterable[Mapping[str, Any]]] = field(default=lambda record: [record.row])

    def open(self, out: Path, log: Callable[[str], None]) -> ResultsTable:
        """The table in report directory ``out``."""
        return ResultsTable(out / self.file, list(self.columns), list(self.key), log)



def time_curve_table(file: str, key: str) -> Table:
    """The test error against time of each cell: a record's ``seconds`` and ``test_error`` arrays
    as rows ``config, <key>, method, point, seconds, test_error`` (``key`` names the data set column)."""

    def rows(record: CellRecord) -> list[dict]:
        row, arrays = record.row, record.arrays
        return [{"config": row["config"], key: row[key], "method": row["method"], "point": i,
                 "seconds": float(s), "test_error": float(e)}
                for i, (s, e) in enumerate(zip(arrays.get("seconds", ()), arrays.get("test_error", ())))]

    return Table(file, ["config", key, "method", "point", "seconds", "test_error"], ("config", key, "method", "point"),
                 rows)

class Experiment(Protocol):
    """An experiment of the suite.

    Attributes
    ----------
    name : str
        Its ``slr`` subcommand, cache namespace and registry key.
    help : str
        The subcommand's one-line help; "" for an experiment without a report of its own, run
        only as what another needs (the regularisation tuning).
    needs : tuple of str
        Experiments whose records :meth:`cells` reads; the runner runs them too.
    specs : mapping
        Its settings (a frozen dataclass) in each profile, by profile name (``tiny``, ``quick``,
        ``full``); empty for an experiment that reads another's (:meth:`spec`).
    tables : tuple of Table
        Its CSVs; each record's rows go to every table.
    record : RecordSpec or None
        What its cached records hold: an entry that does not fit (a forged or foreign one) is
        set aside and recomputed; None accepts any record of the right key.
    prepare : callable or None
        ``prepare(profile, selection, ctx)``: what must be established before :meth:`cells`
        and may take a while, such as building an outside library's environment. The runner
        calls it on a thread while the cells of the other experiments are computed, and lists
        the experiment's cells once it has returned. None: nothing to prepare.
    """

    name: str
    help: str
    needs: tuple[str, ...]
    specs: Mapping[str, Any]
    tables: tuple[Table, ...]
    record: RecordSpec | None
    prepare: Callable[[Profile, Any, RunContext], None] | None

    def spec(self, profile: Profile) -> Any:
        """Its settings in ``profile`` (:meth:`Profile.spec`)."""

    def select(self, profile: Profile, options: Mapping[str, Any]) -> Any:
        """The part of the experiment the command-line ``options`` ask for (e.g. ``--cells``),
        checked before any work starts: a ValueError naming the option if it is bad."""

    def covers(self, selection: Any, row: Mapping[str, str]) -> bool:
        """Whether a row of its results files (text, as read) is of a cell in ``selection``
        (:meth:`select`): a run of that selection leaves under the current config only the rows
        of such cells that it writes itself (:mod:`slr.suite.runner`)."""

    def cells(self, profile: Profile, selection: Any, done: Mapping[str, Mapping[str, CellRecord]],
              ctx: RunContext) -> Iterable[Cell]:
        """Its cells that can be defined now. ``done`` holds, for each experiment in ``needs``,
        the records answered so far (by cache key); the runner asks again after computing, until
        no new cell comes, so a cell that waits for another experiment's records is listed later."""

    def compute(self, spec: Any, cells: Sequence[Cell], info: RunInfo, *, n_threads: int | None) -> list[CellRecord]:
        """The records of ``cells`` (one task, run on a worker), in order."""

    def keep(self, record: CellRecord) -> bool:
        """Whether a computed record is cached (a failure is not: a rerun tries again)."""

    def describe(self, record: CellRecord) -> str:
        """One log line about a computed record."""

    def render(self, profile: Profile, out: Path, info: RunInfo, log: Logger,
               records: Mapping[str, CellRecord] | None = None) -> dict | None:
        """Write its report from its CSVs in ``out`` (``records``: this run's, with their arrays);
        return its headline numbers for the index (None: no report of its own)."""


#: A report writer, ``(profile, out, info, log, records) -> headline numbers``: an experiment's
#: ``render_*`` module, given to the experiment where it is registered (:mod:`slr.suite.registry`),
#: so that the module computing the cells never imports the one drawing them.
Report = Callable[[Profile, Path, RunInfo, Logger, Mapping[str, CellRecord] | None], dict]


class ExperimentBase:
    """The defaults of :class:`Experiment` for an experiment class: it needs no other experiment,
    takes no command-line option, has nothing to prepare, caches every record, and renders with
    the ``report`` it is given."""

    name: str
    help = ""
    needs: tuple[str, ...] = ()
    specs: Mapping[str, Any] = {}
    tables: tuple[Table, ...] = ()
    record: RecordSpec | None = None
    prepare: Callable[[Profile, Any, RunContext], None] | None = None

    def __init__(self, report: Report | None = None) -> None:
        self.report = report

    def spec(self, profile: Profile) -> Any:
        return profile.spec(self.name)

    def select(self, profile: Profile, options: Mapping[str, Any]) -> Any:
        return None

    def covers(self, selection: Any, row: Mapping[str, str]) -> bool:
        return selection is None

    def keep(self, record: CellRecord) -> bool:
        return True

    def render(self, profile: Profile, out: Path, info: RunInfo, log: Logger,
               records: Mapping[str, CellRecord] | None = None) -> dict | None:
        return None if self.report is None else self.report(profile, out, info, log, records)
