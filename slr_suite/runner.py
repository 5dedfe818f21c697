"""The one driver of every experiment: cells answered from the cache or computed as engine tasks, CSVs written.

For each experiment asked for (and those it needs, first), :func:`run` lists the cells the
experiment can define now, answers each from the cell cache when its key matches, writes the
rows of a cell that cannot run here, and queues the others for the engine (serial or Dask) as
tasks, the costliest first (by the seconds the cell took when its row was last written to the
output directory's CSV, else by the experiment's own estimate). Records come back here as the
tasks finish: this process alone caches them (those the experiment keeps) and upserts their rows
into the experiment's CSVs. After each finished task the experiments that need the finished
one's results are asked again, with the records answered so far: an experiment whose cells
depend on another's results (the test cells of tuned methods on the tuning fits) lists them once
those are in, and they join the queue while the other tasks run, so that no worker waits for a
round of tasks to end. An experiment with something slow to establish first (building pystruct's
environment: :attr:`Experiment.prepare`) is prepared on a thread meanwhile, and its cells join the
queue once that is done. The run ends when the queue is empty, nothing is running and nothing is
being prepared. Last, each CSV gets the run's rows again in the order the experiment lists its cells.

Every row stands under the ``config`` of the spec that lists its cell now: a record answered from
the cache is written under the current spec's config (:func:`slr.suite.provenance.config_hash` of
its ``config()``) whatever config it was computed under, since its cell's key holds every setting
its result depends on. And a row of the current config is one the current spec produces: when a
run has listed and answered every cell of an experiment, the last write leaves under that config
exactly the rows of those cells and drops the others (cells the spec no longer lists, points past
the end of a curve that is now shorter), whichever run wrote them; rows of other configs stay as
the history they are. A run of part of an experiment (``--cells``, ``--datasets``) does the same
within its part (:meth:`Experiment.covers`: the data sets of ``--datasets``) and for every row of
each cell it lists, and leaves the rows of the other cells as they are. Nothing is dropped before
the end of a run: a run killed midway has only added rows, and its rerun (the cells it computed
come from the cache) drops them.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from queue import SimpleQueue
from typing import Any

from slr.suite.common import RunContext
from slr.suite.engine import Task, TaskQueue
from slr.suite.experiment import Cell, Experiment
from slr.suite.provenance import config_hash
from slr.suite.registry import with_needs
from slr.suite.results import ResultsTable, format_value
from slr.suite.store import CellCache, CellRecord

__all__ = ["plan", "run"]


class _Answers:
    """One experiment's state during a run: its spec and config, cache, tables and records by cache key."""

    def __init__(self, experiment: Experiment, profile: Any, selection: Any, out: Path, ctx: RunContext) -> None:
        self.experiment, self.profile, self.selection = experiment, profile, selection
        self.spec = experiment.spec(profile)
        self.config = config_hash(self.spec.config())
        self.cache = CellCache(ctx.cache_dir, experiment.name, ctx.log, read=ctx.read_cache)
        self.tables = [table.open(out, ctx.log) for table in experiment.tables]
        self.records: dict[str, CellRecord] = {}
        self.listed: dict[str, Cell] = {}   # by cache key, in the order the experiment lists its cells
        self.last_seconds = _last_seconds(self.tables[0]) if self.tables else {}

    def current(self, record: CellRecord) -> CellRecord:
        """``record`` with the current spec's config (a cached one may have been computed under
        another config that its cell's key does not depend on)."""
        if record.row.get("config", self.config) == self.config:
            return record
        return CellRecord(row={**record.row, "config": self.config}, arrays=record.arrays)

    def expected_cost(self, cell: Cell) -> float:
        """Seconds ``cell`` took when its row was last written to the results CSV, else
        ``cell.cost`` (then a relative estimate, from an experiment new to the directory)."""
        identity = tuple(sorted((k, format_value(v)) for k, v in cell.identity.items()))
        return self.last_seconds.get(identity, cell.cost)

    def write(self, records: Sequence[CellRecord]) -> None:
        if not records:   # nothing to add: the files stay as they are
            return
        for table, spec in zip(self.tables, self.experiment.tables):
            table.upsert(row for record in records for row in spec.rows(record))

    def finish(self) -> None:
        """Write the run's rows in the experiment's order, and drop each row of the current config
        that the run replaces but does not write again: a row of a cell in the run's selection
        (:meth:`Experiment.covers`: the whole experiment when nothing was selected) or of a cell
        the run listed (all of its rows: a curve may have become shorter)."""
        answered = [(cell, self.records[key]) for key, cell in self.listed.items()]
        replaced = self._replaced(answered)
        for table, spec in zip(self.tables, self.experiment.tables):
            rows = [row for _, record in answered for row in spec.rows(record)]
            if rows or any(replaced(row) for row in table.rows()):   # else the file stays as it is
                table.upsert(rows, drop=replaced)

    def _replaced(self, answered: Sequence[tuple[Cell, CellRecord]]) -> Callable[[Mapping[str, str]], bool]:
        """Whether a row of a results file (text, as read) is one this run replaces."""
        # the identity of each listed cell as its rows write it (a row's field, else the cell's value)
        listed: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
        for cell, record in answered:
            names = tuple(sorted(cell.identity))
            listed.setdefault(names, set()).add(
                tuple(format_value(record.row.get(name, cell.identity[name])) for name in names))

        def replaced(row: Mapping[str, str]) -> bool:
            return row.get("config") == self.config and (
                self.experiment.covers(self.selection, row)
                or any(tuple(row.get(name) for name in names) in values for names, values in listed.items()))

        return replaced


def _last_seconds(table: ResultsTable) -> dict[tuple, float]:
    """The ``seconds`` of the last row of each identity in ``table`` (its key columns but the
    config), from whatever configuration wrote it; empty for a table without that column."""
    if "seconds" not in table.columns:
        return {}
    identity = [c for c in table.key if c != "config"]
    seconds = {}
    for row in table.rows():
        try:
            seconds[tuple(sorted((c, row[c]) for c in identity))] = float(row["seconds"])
        except ValueError:   # a failed cell's empty seconds
            continue
    return seconds


def plan(names: Sequence[str], profile: Any, options: Mapping[str, Any] | None = None) -> list[tuple[Experiment, Any]]:
    """The experiments ``names`` and those they need, each after what it needs, with the part of
    it the command-line ``options`` (``cells``, ``datasets``) select.

    Raises
    ------
    ValueError
        For an unknown experiment or a bad option, before any work starts.
    """
    options = {} if options is None else options
    return [(experiment, experiment.select(profile, options)) for experiment in with_needs(names)]


def run(planned: Sequence[tuple[Experiment, Any]], profile: Any, out: Path,
        ctx: RunContext) -> dict[str, dict[str, CellRecord]]:
    """Answer every cell of the ``planned`` experiments (:func:`plan`) and write their CSVs.

    The experiments with something to prepare (:attr:`Experiment.prepare`) are prepared on a
    thread while the others' cells are computed; their cells are listed once that returns.

    Returns
    -------
    dict
        For each experiment, the records of this run's cells by cache key.
    """
    states = {e.name: _Answers(e, profile, selection, out, ctx) for e, selection in planned}
    preparation = _Preparation([state for state in states.values() if state.experiment.prepare is not None], ctx)
    listed: list[_Answers] = []   # the experiments whose cells are listed
    queue, owners, finished = TaskQueue(), {}, 0

    def start(new: Sequence[_Answers]) -> None:
        for state in new:
            listed.append(state)
            queue.add(_tasks(_list(state, states, ctx), owners, ctx))

    new = [state for state in states.values() if state.experiment.prepare is None]
    while new or preparation.pending:
        start(new)
        for task, records in ctx.computed(queue):
            finished += 1
            state, cells = owners.pop(task.keys)
            for key, cell, record in zip(task.keys, cells, records):
                if state.experiment.keep(record):
                    state.cache.save(key, record)
                state.records[key] = state.current(record)
                ctx.log.computed.append(f"{state.experiment.name}:{cell.label}")
            for record in records:
                ctx.log(f"{state.experiment.name} [{finished}/{queue.added}] {state.experiment.describe(record)}")
            state.write([state.records[key] for key in task.keys])
            for waiting in listed:   # the cells that wait on this experiment's results
                if state.experiment.name in waiting.experiment.needs:
                    queue.add(_tasks(_list(waiting, states, ctx), owners, ctx))
            start(preparation.ready())
        new = preparation.ready(wait=True)   # nothing left to compute: wait for the others
    for state in states.values():   # the CSVs list this run's cells in the experiment's order
        state.finish()
    return {name: state.records for name, state in states.items()}


class _Preparation:
    """The :attr:`Experiment.prepare` calls of ``states``, made one after another (in plan
    order) on a thread; :meth:`ready` hands back each state once its experiment is prepared."""

    def __init__(self, states: Sequence[_Answers], ctx: RunContext) -> None:
        self.pending = len(states)
        self._done: SimpleQueue[tuple[_Answers, BaseException | None]] = SimpleQueue()
        if states:
            threading.Thread(target=self._prepare, args=(list(states), ctx), name="slr-prepare", daemon=True).start()

    def _prepare(self, states: list[_Answers], ctx: RunContext) -> None:
        for state in states:
            try:
                state.experiment.prepare(state.profile, state.selection, ctx)
            except BaseException as exc:   # raised again in the run's thread
                self._done.put((state, exc))
                return
            self._done.put((state, None))

    def ready(self, wait: bool = False) -> list[_Answers]:
        """The states prepared since the last call; with ``wait``, at least one while any is
        pending (an exception of a ``prepare`` is raised here)."""
        states: list[_Answers] = []
        while self.pending and (not self._done.empty() or (wait and not states)):
            state, error = self._done.get()
            if error is not None:
                raise error
            self.pending -= 1
            states.append(state)
        return states


def _list(state: _Answers, states: Mapping[str, _Answers], ctx: RunContext) -> list[tuple[_Answers, str, Cell]]:
    """The new cells of one experiment: the cached and the unrunnable ones written now, the others returned."""
    experiment = state.experiment
    done = {name: states[name].records for name in experiment.needs}
    known, todo, new, cached = [], [], 0, 0
    for cell in experiment.cells(state.profile, state.selection, done, ctx):
        key = cell.key(experiment.name)
        if key in state.listed:
            continue
        state.listed[key] = cell
        new += 1
        record = state.cache.load(key, experiment.record.check if experiment.record is not None else None)
        cached += record is not None
        if record is None and cell.record is not None:
            record = cell.record
        if record is None:
            todo.append((state, key, cell))
        else:
            state.records[key] = state.current(record)
            known.append(state.records[key])
    if new:
        ctx.log(f"{experiment.name}: {cached} of {new} cells cached, {len(todo)} to compute")
    state.write(known)
    return todo


def _tasks(todo: list[tuple[_Answers, str, Cell]], owners: dict, ctx: RunContext) -> list[Task]:
    """The engine tasks of the cells of ``todo`` (one per group), each with the largest expected
    cost of its cells; ``owners`` maps each task's keys to its experiment's state and cells."""
    groups: dict[tuple[str, str], list[tuple[_Answers, str, Cell]]] = {}
    for state, key, cell in todo:
        groups.setdefault((state.experiment.name, cell.group or key), []).append((state, key, cell))
    tasks = []
    for members in groups.values():
        state = members[0][0]
        cells = [cell for _, _, cell in members]
        task = Task(f"{state.experiment.name}:{cells[0].group or cells[0].label}", tuple(key for _, key, _ in members),
                    state.experiment.compute, (state.spec, cells, ctx.info),
                    cost=max(state.expected_cost(cell) for cell in cells))
        owners[task.keys] = (state, cells)
        tasks.append(task)
    return tasks
