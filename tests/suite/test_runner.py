"""The one driver of every experiment (slr_suite/runner.py), on two toy experiments that plug into
the protocol the way a new experiment does: one class each, no change to the runner."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from slr.suite import runner
from slr.suite.common import Logger, RunContext
from slr.suite.experiment import Cell, ExperimentBase, Profile, Table
from slr.suite.provenance import PROVENANCE_COLUMNS, RunInfo, config_hash
from slr.suite.registry import EXPERIMENTS, REPORTED, with_needs
from slr.suite.store import CellRecord


@dataclass(frozen=True)
class PowersSpec:
    n: int
    power: int

    def config(self) -> dict:
        """The setting every cell shares (the ``config`` column); ``n`` only says which cells there are."""
        return dict(power=self.power)


class Powers(ExperimentBase):
    """Cell x computes x ** power; the cells of one parity share a task."""

    name = "powers"
    help = "x ** power"
    tables = (Table("powers.csv", ["config", "x", "y", *PROVENANCE_COLUMNS], ("config", "x")),)
    failing: set[int] = set()

    def cells(self, profile, selection, done, ctx):
        spec = self.spec(profile)
        return [Cell(label=str(x), identity=dict(x=x), config=dict(power=spec.power), seed=0, args=(x,),
                     group=f"parity {x % 2}", cost=float(x % 2)) for x in range(spec.n)]

    def compute(self, spec, cells, info, *, n_threads):
        xs = [c.args[0] for c in cells]
        return [CellRecord(row=dict(config="c", x=x, y="" if x in self.failing else x ** spec.power,
                                    **info.row_fields())) for x in xs]

    def keep(self, record):
        return record.row["y"] != ""

    def describe(self, record):
        return f"x={record.row['x']}"


class Total(ExperimentBase):
    """One cell: the sum of every power, listed once all of them are answered."""

    name = "total"
    needs = ("powers",)
    tables = (Table("total.csv", ["config", "total", *PROVENANCE_COLUMNS], ("config",)),)

    def spec(self, profile):
        return profile.spec("powers")

    def cells(self, profile, selection, done, ctx):
        records = list(done["powers"].values())
        if len(records) < self.spec(profile).n:
            return []
        total = sum(int(r.row["y"] or 0) for r in records)
        return [Cell(label="total", identity={}, config=dict(total=total), seed=0, args=(total,))]

    def compute(self, spec, cells, info, *, n_threads):
        return [CellRecord(row=dict(config="c", total=cells[0].args[0], **info.row_fields()))]

    def describe(self, record):
        return f"total={record.row['total']}"


def _run(tmp_path, power=2, n=5):
    profile = Profile("tiny", {"powers": PowersSpec(n=n, power=power)})
    log = Logger(quiet=True)
    ctx = RunContext(log=log, info=RunInfo.collect("tiny", ["test"]), cache_dir=tmp_path / "cache")
    records = runner.run([(Powers(), None), (Total(), None)], profile, tmp_path / "out", ctx)
    return log, records


def test_cells_computed_cached_and_written_in_their_order(tmp_path):
    log, records = _run(tmp_path)
    # the total waited for the powers (listed in a later round), which ran one task per parity, odd first
    assert log.computed == ["powers:1", "powers:3", "powers:0", "powers:2", "powers:4", "total:total"]
    df = pd.read_csv(tmp_path / "out" / "powers.csv")
    assert df.x.tolist() == [0, 1, 2, 3, 4] and df.y.tolist() == [x ** 2 for x in range(5)]
    assert pd.read_csv(tmp_path / "out" / "total.csv").total.tolist() == [sum(x ** 2 for x in range(5))]
    assert len(records["powers"]) == 5 and len(records["total"]) == 1
    # a rerun answers every cell from the cache; a changed setting recomputes the cells that use it
    assert _run(tmp_path)[0].computed == []
    assert sorted(_run(tmp_path, power=3)[0].computed) == sorted([f"powers:{x}" for x in range(5)] + ["total:total"])
    totals = pd.read_csv(tmp_path / "out" / "total.csv", dtype={"config": str})
    # the total of the former config stays as its history
    assert totals.total.tolist() == [sum(x ** 2 for x in range(5)), sum(x ** 3 for x in range(5))]
    assert totals.config.tolist() == [config_hash(dict(power=2)), config_hash(dict(power=3))]


def test_a_record_the_experiment_does_not_keep_is_computed_again(tmp_path, monkeypatch):
    monkeypatch.setattr(Powers, "failing", {2})
    assert "powers:2" in _run(tmp_path)[0].computed
    monkeypatch.setattr(Powers, "failing", set())
    assert _run(tmp_path)[0].computed == ["powers:2", "total:total"]


def test_registry_lists_the_needs_first_and_reports_the_named_experiments():
    assert [e.name for e in with_needs(["baselines"])] == ["tuning", "baselines"]
    assert REPORTED == ("denoising", "baselines", "bound", "calibration", "generalisation", "partial_labels",
                        "nlp") and set(EXPERIMENTS) == {*REPORTED, "tuning"}
    with pytest.raises(ValueError, match="experiment must be one of"):
        with_needs(["snakes"])


class Timed(ExperimentBase):
    """Cell x took ``SECONDS[x]`` seconds (as its row says); its own estimate is ``x``."""

    name = "timed"
    SECONDS = (3.0, 1.0, 4.0, 0.5, 2.0)
    tables = (Table("timed.csv", ["config", "x", "seconds", *PROVENANCE_COLUMNS], ("config", "x")),)

    def cells(self, profile, selection, done, ctx):
        spec = self.spec(profile)
        return [Cell(label=str(x), identity=dict(x=x), config=dict(power=spec.power), seed=0, args=(x,),
                     cost=float(x)) for x in range(spec.n)]

    def compute(self, spec, cells, info, *, n_threads):
        return [CellRecord(row=dict(config=str(spec.power), x=c.args[0], seconds=self.SECONDS[c.args[0]],
                                    **info.row_fields())) for c in cells]

    def describe(self, record):
        return f"x={record.row['x']}"


def test_cells_run_the_longest_first_by_the_seconds_the_output_directory_records(tmp_path):
    """Without earlier rows the experiment's own estimate orders the cells; once the results CSV
    holds a cell's seconds (from any configuration) that orders them, so that experiments whose
    estimates are in different units share the engine well."""
    def run(power):
        profile = Profile("tiny", {"timed": PowersSpec(n=5, power=power)})
        log = Logger(quiet=True)
        ctx = RunContext(log=log, info=RunInfo.collect("tiny", ["test"]), cache_dir=tmp_path / "cache")
        runner.run([(Timed(), None)], profile, tmp_path / "out", ctx)
        return log.computed

    assert run(2) == ["timed:4", "timed:3", "timed:2", "timed:1", "timed:0"]
    assert run(3) == ["timed:2", "timed:0", "timed:4", "timed:1", "timed:3"]


class Chained(ExperimentBase):
    """Cell x doubles timed's row x; it is listed once that row is answered and costs more than
    any timed cell."""

    name = "chained"
    needs = ("timed",)
    tables = (Table("chained.csv", ["config", "x", "twice", *PROVENANCE_COLUMNS], ("config", "x")),)

    def spec(self, profile):
        return profile.spec("timed")

    def cells(self, profile, selection, done, ctx):
        return [Cell(label=str(r.row["x"]), identity=dict(x=r.row["x"]), config=dict(x=r.row["x"]), seed=0,
                     args=(r.row["x"],), cost=10.0) for r in done["timed"].values()]

    def compute(self, spec, cells, info, *, n_threads):
        return [CellRecord(row=dict(config="c", x=c.args[0], twice=2 * c.args[0], **info.row_fields())) for c in cells]

    def describe(self, record):
        return f"twice={record.row['twice']}"


def test_cells_that_wait_on_others_join_the_queue_as_soon_as_those_are_answered(tmp_path):
    """A cell listed once another experiment's cell is answered runs before the cheaper cells
    still waiting (it no longer waits for every task listed before it to finish)."""
    profile = Profile("tiny", {"timed": PowersSpec(n=4, power=2)})
    log = Logger(quiet=True)
    ctx = RunContext(log=log, info=RunInfo.collect("tiny", ["test"]), cache_dir=tmp_path / "cache")
    records = runner.run([(Timed(), None), (Chained(), None)], profile, tmp_path / "out", ctx)
    assert log.computed == ["timed:3", "chained:3", "timed:2", "chained:2", "timed:1", "chained:1",
                            "timed:0", "chained:0"]
    assert sorted(r.row["twice"] for r in records["chained"].values()) == [0, 2, 4, 6]
    # the CSV lists the cells in the order the experiment lists them, not the order they ran
    assert pd.read_csv(tmp_path / "out" / "chained.csv").x.tolist() == [3, 2, 1, 0]


class Prepared(Chained):
    """Chained, with a preparation that lasts until timed's cell 0 has been computed (False in
    ``prepared_after`` when it gave up waiting: the runner did not compute beside it)."""

    name = "prepared"
    tables = (Table("prepared.csv", ["config", "x", "twice", *PROVENANCE_COLUMNS], ("config", "x")),)

    def __init__(self):
        super().__init__()
        self.timed_done, self.prepared_after = threading.Event(), []

    def prepare(self, profile, selection, ctx):
        self.prepared_after.append(self.timed_done.wait(timeout=30.0))


class TimedSignal(Timed):
    """Timed, setting ``done`` once its cell 0 is computed."""

    def __init__(self, done):
        super().__init__()
        self.done = done

    def compute(self, spec, cells, info, *, n_threads):
        records = super().compute(spec, cells, info, n_threads=n_threads)
        if any(c.args[0] == 0 for c in cells):
            self.done.set()
        return records


def test_an_experiment_is_prepared_while_the_others_cells_are_computed(tmp_path):
    """Its preparation waits for a cell of another experiment, which the runner computes
    meanwhile (a runner that prepared first would wait 30 s in vain); its cells, which need
    that experiment's, are listed once it is prepared, and each of them is computed."""
    prepared = Prepared()
    profile = Profile("tiny", {"timed": PowersSpec(n=3, power=2)})
    log = Logger(quiet=True)
    ctx = RunContext(log=log, info=RunInfo.collect("tiny", ["test"]), cache_dir=tmp_path / "cache")
    records = runner.run([(TimedSignal(prepared.timed_done), None), (prepared, None)], profile, tmp_path / "out", ctx)
    assert prepared.prepared_after == [True]
    assert log.computed[:3] == ["timed:2", "timed:1", "timed:0"]
    assert sorted(log.computed[3:]) == ["prepared:0", "prepared:1", "prepared:2"]
    assert sorted(r.row["twice"] for r in records["prepared"].values()) == [0, 2, 4]


def test_an_experiment_with_only_prepared_cells_waits_for_them_and_a_failed_preparation_stops_the_run(tmp_path):
    """With nothing else to compute the run waits for the preparation, then computes the cells;
    an exception in a preparation is raised in the run's thread."""

    class Alone(Prepared):
        name = "alone"
        needs = ()
        error: Exception | None = None

        def prepare(self, profile, selection, ctx):
            if self.error is not None:
                raise self.error
            time.sleep(0.2)

        def cells(self, profile, selection, done, ctx):
            return [Cell(label=str(x), identity=dict(x=x), config=dict(x=x), seed=0, args=(x,)) for x in range(2)]

    profile = Profile("tiny", {"timed": PowersSpec(n=2, power=2)})
    ctx = RunContext(log=Logger(quiet=True), info=RunInfo.collect("tiny", ["test"]), cache_dir=tmp_path / "cache")
    records = runner.run([(Alone(), None)], profile, tmp_path / "out", ctx)
    assert sorted(r.row["twice"] for r in records["alone"].values()) == [0, 2]
    failing = Alone()
    failing.error = RuntimeError("no interpreter")
    with pytest.raises(RuntimeError, match="no interpreter"):
        runner.run([(Timed(), None), (failing, None)], profile, tmp_path / "out2", ctx)


def test_task_queue_takes_the_costliest_first_and_grows_while_drained():
    from slr.suite.engine import Task, TaskQueue

    def task(name, cost):
        return Task(name, (name,), print, (), cost=cost)

    queue = TaskQueue([task("a", 1.0), task("b", 3.0), task("c", 1.0)])
    taken = [queue.pop().name]
    queue.add([task("d", 2.0), task("e", 0.5)])
    taken += [t.name for t in queue.take()]
    assert taken == ["b", "d", "a", "c", "e"] and len(queue) == 0 and queue.added == 5


@dataclass(frozen=True)
class GridSpec:
    """Cells ``(d, v)``: ``v`` from ``values`` (the shared setting, the ``config`` column) or from
    the data set's own part of it in ``values_of``; each cell's curve has the data set's ``points``
    (per-cell settings: in the cells' keys only, as a profile's per-data-set budgets and grids)."""

    values: tuple[int, ...] = (1, 2, 3)
    values_of: tuple[tuple[str, tuple[int, ...]], ...] = ()
    points: tuple[tuple[str, int], ...] = ()

    def config(self) -> dict:
        return dict(values=self.values)


def _curve_rows(record):
    row = record.row
    return [dict(config=row["config"], d=row["d"], v=row["v"], point=i, value=row["v"] * i)
            for i in range(len(record.arrays["curve"]))]


class Grid(ExperimentBase):
    """Data sets ``a`` and ``b`` (``--datasets`` selects some); a cell's row and its curve."""

    name = "grid"
    tables = (Table("grid.csv", ["config", "d", "v", "y", *PROVENANCE_COLUMNS], ("config", "d", "v")),
              Table("grid_curves.csv", ["config", "d", "v", "point", "value"], ("config", "d", "v", "point"),
                    _curve_rows))
    raising: set[tuple[str, int]] = set()

    def select(self, profile, options):
        return options.get("datasets")

    def covers(self, selection, row):
        return selection is None or row["d"] in selection

    def cells(self, profile, selection, done, ctx):
        spec = self.spec(profile)
        values, points = dict(spec.values_of), dict(spec.points)
        return [Cell(label=f"{d}:{v}", identity=dict(d=d, v=v), config=dict(points=points.get(d, 3)), seed=0,
                     args=(d, v, points.get(d, 3)))
                for d in (selection or ("a", "b")) for v in values.get(d, spec.values)]

    def compute(self, spec, cells, info, *, n_threads):
        records = []
        for c in cells:
            d, v, n = c.args
            if (d, v) in self.raising:
                raise RuntimeError("killed")
            records.append(CellRecord(row=dict(config=config_hash(spec.config()), d=d, v=v, y=10 * v + n,
                                               **info.row_fields()), arrays=dict(curve=np.arange(n, dtype=float))))
        return records

    def describe(self, record):
        return f"{record.row['d']}:{record.row['v']}"


def _grid_run(tmp_path, spec, datasets=None, log=None):
    """Run Grid; return the cells computed and the rows of its two tables, each of which verifies
    (a row whose check column does not match would be set aside with a message)."""
    log = Logger(quiet=True) if log is None else log
    ctx = RunContext(log=log, info=RunInfo.collect("tiny", ["test"]), cache_dir=tmp_path / "cache")
    profile = Profile("tiny", {"grid": spec})
    runner.run([(Grid(), Grid().select(profile, dict(datasets=datasets)))], profile, tmp_path / "out", ctx)
    return log.computed, _grid_rows(tmp_path)


def _grid_rows(tmp_path):
    messages = []
    rows = [t.open(tmp_path / "out", messages.append).rows() for t in Grid.tables]
    assert messages == []
    return rows


def _cells_of(rows, config):
    """``{(d, v): number of rows}`` of ``config`` in one table."""
    counts = {}
    for r in rows:
        if r["config"] == config:
            counts[r["d"], int(r["v"])] = counts.get((r["d"], int(r["v"])), 0) + 1
    return counts


def test_a_complete_run_leaves_under_its_config_only_the_rows_the_spec_produces(tmp_path):
    """A per-cell setting that no longer lists a cell (a data set's own part of the grid) leaves
    the config column as it is; the complete run after it drops that cell's rows of the config, and
    a curve that became shorter loses its points past the end, while the cells still listed (from
    the cache) and the rows of another config stay."""
    first = GridSpec()
    computed, (results, curves) = _grid_run(tmp_path, first)
    config = config_hash(first.config())
    assert len(computed) == 6 and _cells_of(results, config) == {(d, v): 1 for d in "ab" for v in (1, 2, 3)}
    # a row of an earlier config: history, which no run of this config touches
    table = Grid.tables[0].open(tmp_path / "out", print)
    table.upsert([dict(config="0ld0ld0ld0", d="a", v=3, y=0)])

    second = GridSpec(values_of=(("a", (1, 2)),), points=(("b", 2),))
    assert config_hash(second.config()) == config
    computed, (results, curves) = _grid_run(tmp_path, second)
    assert sorted(computed) == ["grid:b:1", "grid:b:2", "grid:b:3"]     # a's cells came from the cache
    assert _cells_of(results, config) == {("a", 1): 1, ("a", 2): 1, ("b", 1): 1, ("b", 2): 1, ("b", 3): 1}
    assert _cells_of(curves, config) == {("a", 1): 3, ("a", 2): 3, ("b", 1): 2, ("b", 2): 2, ("b", 3): 2}
    assert _cells_of(results, "0ld0ld0ld0") == {("a", 3): 1}
    # the rows of b are the new ones (y = 10 v + points), those of a the cached ones
    y = {(r["d"], int(r["v"])): int(r["y"]) for r in table.rows() if r["config"] == config}
    assert y == {("a", 1): 13, ("a", 2): 23, ("b", 1): 12, ("b", 2): 22, ("b", 3): 32}


def test_a_partial_run_replaces_the_rows_of_its_part_and_keeps_the_others(tmp_path):
    """``--datasets a`` after a per-cell change to both data sets: a's rows are the current spec's
    (a cell dropped, every curve at its new length), b's stay as the last run wrote them until a
    run that covers b."""
    config = config_hash(GridSpec().config())
    _grid_run(tmp_path, GridSpec())
    changed = GridSpec(values_of=(("a", (1, 2)), ("b", (1, 2))), points=(("a", 2), ("b", 2)))
    computed, (results, curves) = _grid_run(tmp_path, changed, datasets=["a"])
    assert sorted(computed) == ["grid:a:1", "grid:a:2"]
    assert _cells_of(results, config) == {("a", 1): 1, ("a", 2): 1, ("b", 1): 1, ("b", 2): 1, ("b", 3): 1}
    assert _cells_of(curves, config) == {("a", 1): 2, ("a", 2): 2, ("b", 1): 3, ("b", 2): 3, ("b", 3): 3}
    computed, (results, curves) = _grid_run(tmp_path, changed, datasets=["b"])
    assert _cells_of(results, config) == {(d, v): 1 for d in "ab" for v in (1, 2)}
    assert _cells_of(curves, config) == {(d, v): 2 for d in "ab" for v in (1, 2)}


def test_a_partial_run_of_listed_cells_replaces_every_row_of_those_cells_only(tmp_path):
    """An experiment whose selection names cells (as ``--cells``), not a part that covers others:
    the rows of the cells it lists are replaced whole (a shorter curve loses its tail), a stale
    cell of the config outside them stays."""
    config = config_hash(GridSpec().config())
    _grid_run(tmp_path, GridSpec())

    class Named(Grid):
        def covers(self, selection, row):
            return selection is None

    spec = GridSpec(values_of=(("a", (1, 2)),), points=(("a", 1),))
    profile = Profile("tiny", {"grid": spec})
    ctx = RunContext(log=Logger(quiet=True), info=RunInfo.collect("tiny", ["test"]), cache_dir=tmp_path / "cache")
    runner.run([(Named(), ["a"])], profile, tmp_path / "out", ctx)
    curves = Grid.tables[1].open(tmp_path / "out", print).rows()
    assert _cells_of(curves, config) == {("a", 1): 1, ("a", 2): 1, ("a", 3): 3, ("b", 1): 3, ("b", 2): 3, ("b", 3): 3}


def test_a_run_killed_midway_loses_nothing_and_its_rerun_drops_the_stale_rows(tmp_path, monkeypatch):
    """Rows are only added while a run goes on: killed after some cells, the files hold the old
    rows with the new ones; the rerun answers those from the cache and then drops the stale rows."""
    config = config_hash(GridSpec().config())
    _grid_run(tmp_path, GridSpec())
    changed = GridSpec(values_of=(("a", (1,)),), points=(("a", 2), ("b", 2)))
    monkeypatch.setattr(Grid, "raising", {("b", 1)})
    log = Logger(quiet=True)
    with pytest.raises(RuntimeError, match="killed"):
        _grid_run(tmp_path, changed, log=log)
    before = set(log.computed)
    results, curves = _grid_rows(tmp_path)
    assert _cells_of(results, config) == {(d, v): 1 for d in "ab" for v in (1, 2, 3)}   # nothing lost
    assert {f"grid:{r['d']}:{r['v']}" for r in results if r["y"] == str(10 * int(r["v"]) + 2)} == before
    monkeypatch.setattr(Grid, "raising", set())
    computed, (results, curves) = _grid_run(tmp_path, changed)
    assert set(computed) == {"grid:a:1", "grid:b:1", "grid:b:2", "grid:b:3"} - before and "grid:b:1" in computed
    assert _cells_of(results, config) == {("a", 1): 1, ("b", 1): 1, ("b", 2): 1, ("b", 3): 1}
    assert _cells_of(curves, config) == {("a", 1): 2, ("b", 1): 2, ("b", 2): 2, ("b", 3): 2}


def test_a_cached_record_of_another_config_is_written_under_the_current_one(tmp_path):
    """The config column names the spec that lists the cell now: a record computed under another
    shared setting that its cell's key does not hold is written, from the cache, under the current
    config (its check verifies), and the rows of the former config stay."""
    _run(tmp_path, power=2, n=3)

    @dataclass(frozen=True)
    class Relabelled(PowersSpec):
        def config(self):
            return dict(power=self.power, label="new")

    profile = Profile("tiny", {"powers": Relabelled(n=3, power=2)})
    log = Logger(quiet=True)
    ctx = RunContext(log=log, info=RunInfo.collect("tiny", ["test"]), cache_dir=tmp_path / "cache")
    runner.run([(Powers(), None)], profile, tmp_path / "out", ctx)
    assert log.computed == []
    messages = []
    rows = Powers.tables[0].open(tmp_path / "out", messages.append).rows()
    assert messages == []
    for config in (config_hash(dict(power=2, label="new")), config_hash(dict(power=2))):
        assert sorted((int(r["x"]), int(r["y"])) for r in rows if r["config"] == config) == [(0, 0), (1, 1), (2, 4)]
