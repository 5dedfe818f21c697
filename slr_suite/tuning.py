"""Each method's regularisation chosen on a validation split of the training data.

A C converted by formula into every method's ridge (``C_VALUE`` in :mod:`slr.suite.methods`)
is not fair to methods whose losses differ in shape. Where a profile names a data set in its
``tune`` entry, every method with a ridge is fitted once per value of the same grid of C (slr
and GradientAlternation, whose losses are entropy-smoothed, also per value of the eps grid) on
four fifths of the training examples, a seeded random fifth held out; each runs as in its test
run (its own iteration budget; slr's rows until the stopping rule of the library's defaults ends
them). The value with the lowest final validation error
is chosen (ties: the first in grid order, i.e. the strongest ridge); the test cells
(:mod:`slr.suite.baselines`) then fit all training examples with it. The test examples are
never looked at. Rows go to ``tuning_results.csv`` (one per method and grid value), which the
baselines report draws as validation curves (docs/design.md section 6).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from slr.suite.common import HOLD_OUT, RunContext, hold_out, reuse_data
from slr.suite.experiment import Cell, ExperimentBase, Table
from slr.suite.methods import (BaselinesSpec, default_regularisation, failure_status, fit_method, grid,
                               planned_methods, prepare_peers, selected_datasets, tuned)
from slr.suite.provenance import PROVENANCE_COLUMNS, RunInfo, config_hash
from slr.suite.store import CellRecord, RecordSpec

__all__ = ["Tuning", "NAME", "TABLES", "TUNING_COLUMNS", "choose", "chosen", "cell"]

TUNING_COLUMNS = ["config", "dataset", "method", "C", "epsilon", "val_error", "train_error", "seconds",
                  "iterations", "status", *PROVENANCE_COLUMNS]
#: What a cached validation fit holds (a stored entry that does not fit is set aside and refitted).
RECORD = RecordSpec(row={c: (int, float) if c in ("C", "epsilon", "val_error", "train_error", "seconds", "iterations")
                         else (bool,) if c == "dirty" else (str,) for c in TUNING_COLUMNS})
SEED = 0


def choose(candidates: list[dict[str, float]], rows: list[dict]) -> dict[str, float] | None:
    """The candidate with the lowest validation error among ``rows`` (fitted without failure);
    ties go to the first in ``candidates``. None if no candidate has a finite error."""
    best, best_error = None, math.inf
    for reg in candidates:
        for row in rows:
            if (row.get("status") == "ok" and float(row["C"]) == reg["C"] and float(row["epsilon"]) == reg["epsilon"]
                    and float(row["val_error"]) < best_error):
                best, best_error = reg, float(row["val_error"])
    return best


def cell(spec: BaselinesSpec, dataset: str, group: str, method: str, reg: dict[str, float]) -> Cell:
    """The validation fit of ``method`` on ``dataset`` with the grid value ``reg``."""
    return Cell(label=f"{dataset}:{method}:C={reg['C']:g},eps={reg['epsilon']:g}",
                identity=dict(dataset=dataset, method=method, **reg),
                config=dict(spec.method_config(dataset, group, method, reg), hold_out=HOLD_OUT), seed=SEED,
                args=(dataset, group, method, reg), cost=float(group == "pystruct"))


def chosen(spec: BaselinesSpec, dataset: str, group: str, method: str,
           records: Mapping[str, CellRecord]) -> dict[str, float] | None:
    """The regularisation the validation fits in ``records`` choose for ``method``: the data
    set's default where it is not tuned or no fit succeeded; None while a fit is not answered."""
    if not tuned(spec, dataset, method):
        return default_regularisation(dataset)
    candidates = grid(spec, dataset, method)
    rows = []
    for reg in candidates:
        record = records.get(cell(spec, dataset, group, method, reg).key(NAME))
        if record is None:
            return None
        rows.append(record.row)
    return choose(candidates, rows) or default_regularisation(dataset)


def _compute_cell(spec: BaselinesSpec, dataset: str, group: str, method: str, reg: dict[str, float],
                  info: RunInfo, n_threads: int | None) -> CellRecord:
    """Fit one method with one grid value on the fit part of the training data; the row holds
    its error on the held-out part."""
    try:
        data = reuse_data(f"baselines-validation/{dataset} {spec.data(dataset)}", lambda: _split(spec.load(dataset)))
        fitted, _, _ = fit_method(group, method, dataset, data, spec, reg, n_threads)
        row = dict(val_error=fitted["test_error"], train_error=fitted["train_error"], seconds=fitted["seconds"],
                   iterations=fitted["iterations"], status=fitted["status"])
    except Exception as exc:
        row = dict(val_error="", train_error="", seconds="", iterations="", status=failure_status(exc))
    return CellRecord(row=dict(config=config_hash(spec.config()), dataset=dataset, method=method, C=reg["C"],
                               epsilon=reg["epsilon"], **row, **info.row_fields()))


def _split(data: tuple) -> tuple:
    X_train, Y_train, _, _, n_states = data
    return (*hold_out(X_train, Y_train, SEED), n_states)


NAME = "tuning"
TABLES = (Table("tuning_results.csv", TUNING_COLUMNS, ("config", "dataset", "method", "C", "epsilon")),)


class Tuning(ExperimentBase):
    """The validation fits as an :class:`slr.suite.experiment.Experiment`; no report of its own
    (the baselines report shows them). A cell is one (data set, method, grid value)."""

    name = NAME
    record = RECORD
    tables = TABLES

    def spec(self, profile) -> BaselinesSpec:
        return profile.spec("baselines")   # it has no settings of its own

    def select(self, profile, options: Mapping[str, Any]) -> list[str] | None:
        return selected_datasets(options, self.spec(profile))

    def covers(self, selection: list[str] | None, row: Mapping[str, str]) -> bool:
        return selection is None or row["dataset"] in selection

    def prepare(self, profile, selection: list[str] | None, ctx: RunContext) -> None:
        """Whether the peers can run here (pystruct's environment is built on first use)."""
        prepare_peers(self.spec(profile), selection, ctx)

    def cells(self, profile, selection, done, ctx: RunContext) -> list[Cell]:
        """Every grid value of every tuned method that can run here."""
        spec = self.spec(profile)
        return [cell(spec, dataset, group, method, reg)
                for dataset, group, method, reason in planned_methods(spec, selection, ctx)
                if not reason and tuned(spec, dataset, method) for reg in grid(spec, dataset, method)]

    def compute(self, spec: BaselinesSpec, cells: Sequence[Cell], info: RunInfo, *,
                n_threads: int | None) -> list[CellRecord]:
        return [_compute_cell(spec, *c.args, info, n_threads) for c in cells]

    def keep(self, record: CellRecord) -> bool:
        return record.row["status"] == "ok"

    def describe(self, record: CellRecord) -> str:
        row = record.row
        result = (f"validation error {row['val_error']:.3f} ({row['seconds']:.1f}s)" if row["status"] == "ok"
                  else row["status"])
        return f"{row['dataset']}: {row['method']} C={row['C']:g} eps={row['epsilon']:g}: {result}"
