"""The one driver of every experiment (slr_suite/runner.py), on two toy experiments that plug into
the protocol the way a new experiment does: one class each, no change to the runner."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pytest

from slr_suite import runner
from slr_suite.common import Logger, RunContext
from slr_suite.experiment import Cell, ExperimentBase, Profile, Table
from slr_suite.provenance import PROVENANCE_COLUMNS, RunInfo
from slr_suite.registry import EXPERIMENTS, REPORTED, with_needs
from slr_suite.store import CellRecord


@dataclass(frozen=True)
class PowersSpec:
    n: int
    power: int


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
    assert pd.read_csv(tmp_path / "out" / "total.csv").total.tolist() == [sum(x ** 3 for x in range(5))]


def test_a_record_the_experiment_does_not_keep_is_computed_again(tmp_path, monkeypatch):
    monkeypatch.setattr(Powers, "failing", {2})
    assert "powers:2" in _run(tmp_path)[0].computed
    monkeypatch.setattr(Powers, "failing", set())
    assert _run(tmp_path)[0].computed == ["powers:2", "total:total"]


def test_registry_lists_the_needs_first_and_reports_the_named_experiments():
    assert [e.name for e in with_needs(["baselines"])] == ["tuning", "baselines"]
    assert REPORTED == ("denoising", "baselines", "bound", "calibration", "generalisation", "partial_labels") and set(EXPERIMENTS) == {*REPORTED, "tuning"}
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


def test_task_queue_takes_the_costliest_first_and_grows_while_drained():
    from slr_suite.engine import Task, TaskQueue

    def task(name, cost):
        return Task(name, (name,), print, (), cost=cost)

    queue = TaskQueue([task("a", 1.0), task("b", 3.0), task("c", 1.0)])
    taken = [queue.pop().name]
    queue.add([task("d", 2.0), task("e", 0.5)])
    taken += [t.name for t in queue.take()]
    assert taken == ["b", "d", "a", "c", "e"] and len(queue) == 0 and queue.added == 5
