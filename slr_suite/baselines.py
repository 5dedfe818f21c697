"""Baselines against slr on denoising, OCR letters and snakes: errors, wall time, time to a target error.

A cell is one (data set, method), fitted on all training examples with its regularisation: the
data set's default, or where the profile tunes the data set the value the validation fits of
:mod:`slr.suite.tuning` choose (so those cells wait for them). Rows go to
``baselines_results.csv`` (one per cell) and ``baselines_curves.csv`` (test error against time);
:mod:`slr.suite.render_baselines` draws the report from them. pystruct's rows need its Python
3.6 environment, built on first use, and the crfsuite row needs python-crfsuite; where they
cannot run, they are written with a ``skipped`` status that says why.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from slr.suite import tuning
from slr.suite.common import RunContext, reuse_data
from slr.suite.experiment import Cell, ExperimentBase, Table, time_curve_table
from slr.suite.methods import (SEED, SPECS, BaselinesSpec, default_regularisation, failure_status, fit_method,
                               planned_methods, prepare_peers, selected_datasets)
from slr.suite.provenance import PROVENANCE_COLUMNS, RunInfo, config_hash
from slr.suite.store import CellRecord, RecordSpec

__all__ = ["Baselines", "NAME", "TABLES", "COLUMNS", "cell"]

#: ``C`` and ``epsilon`` are the regularisation the cell was fitted with (empty in rows written
#: before they were recorded: those used ``C_VALUE`` and ``EPSILON``). ``stopped`` and ``gap``:
#: why a learner with a stopping test stopped and its certified gap
#: (:func:`slr.suite.methods.stop_fields`), empty for the others.
COLUMNS = ["config", "dataset", "group", "method", "train_error", "test_error", "seconds", "iterations", "status",
           "C", "epsilon", "stopped", "gap", *PROVENANCE_COLUMNS]
#: What a cached cell holds (a stored entry that does not fit is set aside and recomputed).
RECORD = RecordSpec(row={c: (int, float) if c in ("train_error", "test_error", "seconds", "iterations", "C", "epsilon")
                         else (int, float, str) if c == "gap" else (bool,) if c == "dirty" else (str,)
                         for c in COLUMNS},
                    arrays=dict(seconds=("f", ("n",)), test_error=("f", ("n",))))


def cell(spec: BaselinesSpec, dataset: str, group: str, method: str, reg: Mapping[str, float],
         skipped: CellRecord | None = None) -> Cell:
    """The test cell of ``method`` on ``dataset`` with regularisation ``reg`` (``skipped``: the row of a
    cell that cannot run here)."""
    return Cell(label=f"{dataset}:{method}", identity=dict(dataset=dataset, method=method),
                config=spec.method_config(dataset, group, method, reg), seed=SEED,
                args=(dataset, group, method, dict(reg)), cost=float(group == "pystruct"), record=skipped)


def _compute_cell(spec: BaselinesSpec, dataset: str, group: str, method: str, reg: dict[str, float],
                  info: RunInfo, n_threads: int | None) -> CellRecord:
    """Fit one (data set, method) cell (the data made or loaded here). A failure, e.g. a data set
    that cannot be downloaded, becomes a row whose status says why."""
    try:
        data = reuse_data(f"baselines/{dataset} {spec.data(dataset)}", lambda: spec.load(dataset))
        row, cs, ce = fit_method(group, method, dataset, data, spec, reg, n_threads)
        row = dict(dict(stopped="", gap=""), **row)
    except Exception as exc:
        row = dict(train_error="", test_error="", seconds="", iterations="", status=failure_status(exc), stopped="",
                   gap="")
        cs, ce = np.zeros(0), np.zeros(0)
    row = dict(config=config_hash(spec.config()), dataset=dataset, group=group, method=method, **row, C=reg["C"],
               epsilon=reg["epsilon"], **info.row_fields())
    return CellRecord(row=row, arrays=dict(seconds=np.asarray(cs, dtype=float), test_error=np.asarray(ce, dtype=float)))


NAME = "baselines"
#: The results (one row per cell) and the test error against time.
TABLES = (Table("baselines_results.csv", COLUMNS, ("config", "dataset", "method")),
          time_curve_table("baselines_curves.csv", "dataset"))


class Baselines(ExperimentBase):
    """The comparison's test cells as an :class:`slr.suite.experiment.Experiment`."""

    name = NAME
    record = RECORD
    help = "compare slr with SSVMs, perceptron, piecewise training and pystruct"
    needs = (tuning.NAME,)
    specs = SPECS
    tables = TABLES

    def select(self, profile, options: Mapping[str, Any]) -> list[str] | None:
        return selected_datasets(options, self.spec(profile))

    def covers(self, selection: list[str] | None, row: Mapping[str, str]) -> bool:
        return selection is None or row["dataset"] in selection

    def prepare(self, profile, selection: list[str] | None, ctx: RunContext) -> None:
        """Whether the peers can run here (pystruct's environment is built on first use)."""
        prepare_peers(self.spec(profile), selection, ctx)

    def cells(self, profile, selection, done, ctx: RunContext) -> list[Cell]:
        """The test cells whose regularisation is known: a tuned method's once its validation fits are in."""
        spec = self.spec(profile)
        cells = []
        for dataset, group, method, reason in planned_methods(spec, selection, ctx):
            if reason:
                skipped = CellRecord(row=dict(config=config_hash(spec.config()), dataset=dataset, group=group,
                                              method=method, status=f"skipped: {reason}", **ctx.info.row_fields()))
                cells.append(cell(spec, dataset, group, method, default_regularisation(dataset), skipped))
                continue
            reg = tuning.chosen(spec, dataset, group, method, done[tuning.NAME])
            if reg is not None:
                cells.append(cell(spec, dataset, group, method, reg))
        return cells

    def compute(self, spec: BaselinesSpec, cells: Sequence[Cell], info: RunInfo, *,
                n_threads: int | None) -> list[CellRecord]:
        return [_compute_cell(spec, *c.args, info, n_threads) for c in cells]

    def keep(self, record: CellRecord) -> bool:
        return record.row["status"] == "ok"    # failures are not cached: a rerun tries again

    def describe(self, record: CellRecord) -> str:
        row = record.row
        if row["status"] != "ok":
            return f"{row['dataset']}: {row['method']}: {row['status']}"
        return (f"{row['dataset']}: {row['method']}: train={row['train_error']:.3f} test={row['test_error']:.3f} "
                f"({row['seconds']:.1f}s)")
