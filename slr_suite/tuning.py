"""Each method's regularisation chosen on a validation split of the training data.

A C converted by formula into every method's ridge (``C_VALUE`` in :mod:`slr_suite.baselines`)
is not fair to methods whose losses differ in shape. Where a profile names a data set in its
``tune`` entry, every method with a ridge is fitted once per value of the same grid of C (slr
and GradientAlternation, whose losses are entropy-smoothed, also per value of the eps grid) on
four fifths of the training examples, a seeded random fifth held out; each gets its own
iteration budget, the same as in its test run. The value with the lowest final validation error
is chosen (ties: the first in grid order, i.e. the strongest ridge); the test cells then fit
all training examples with it. The test examples are never looked at. Rows go to
``tuning_results.csv`` (one per method and grid value), which the report draws as validation
curves (docs/design.md section 6).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from slr_suite.baselines import (CRFSUITE_METHOD, EPSILON, SEED, cell_config, config_key, default_regularisation,
                                 failure_status, fit_method, load_dataset)
from slr_suite.common import RunContext, reuse_data, unique
from slr_suite.engine import Task
from slr_suite.profiles import Profile
from slr_suite.provenance import PROVENANCE_COLUMNS, RunInfo, cache_key
from slr_suite.results import ResultsTable
from slr_suite.store import CellCache, CellRecord, RecordSpec

__all__ = ["TUNING_COLUMNS", "RIDGED", "SMOOTHED", "Tuning", "choose", "grid", "tuned", "tuning_table",
           "validation_split"]

TUNING_COLUMNS = ["config", "dataset", "method", "C", "epsilon", "val_error", "train_error", "seconds",
                  "iterations", "status", *PROVENANCE_COLUMNS]
#: What a cached validation fit holds (a stored entry that does not fit is set aside and refitted).
RECORD = RecordSpec(row={c: (int, float) if c in ("C", "epsilon", "val_error", "train_error", "seconds", "iterations")
                         else (bool,) if c == "dirty" else (str,) for c in TUNING_COLUMNS})
#: Methods whose loss is entropy-smoothed: their eps is tuned with C.
SMOOTHED = ("slr:Linear", "GradientAlternation")
#: Methods whose ridge comes from C (the perceptrons have none; the nonlinear slr rows' settings
#: were chosen on the same split by hand, docs/design.md section 6).
RIDGED = ("slr:Linear", "OneSlackSSVM", "NSlackSSVM", "SubgradientSSVM", "PiecewiseTraining",
           "GradientAlternation", CRFSUITE_METHOD, "pystruct:OneSlackSSVM", "pystruct:NSlackSSVM",
           "pystruct:SubgradientSSVM", "pystruct:FrankWolfeSSVM")
#: One example in this many is held out for validation.
_HOLD_OUT = 5


def validation_split(X: list, Y: list, seed: int = 0) -> tuple[list, list, list, list]:
    """``(X_fit, Y_fit, X_val, Y_val)``: a random fifth of the examples (seed ``seed``) held out."""
    order = np.random.default_rng(seed).permutation(len(X))
    n_val = len(X) // _HOLD_OUT
    if n_val < 1:
        raise ValueError(f"X: {len(X)} examples are too few to hold out a fifth for validation")
    fit, val = order[:-n_val], order[-n_val:]
    return [X[i] for i in fit], [Y[i] for i in fit], [X[i] for i in val], [Y[i] for i in val]


def tuned(profile: Profile, dataset: str, method: str) -> bool:
    """Whether the profile chooses ``method``'s regularisation on ``dataset`` by validation."""
    return bool(dict(profile.baselines.get("tune", {})).get(dataset)) and method in RIDGED


def grid(profile: Profile, dataset: str, method: str) -> list[dict[str, float]]:
    """The ``{"C", "epsilon"}`` values tried for a tuned method, in grid order (C, then eps).

    Raises
    ------
    ValueError
        If the profile's ``tune`` grids are not positive and strictly increasing (grid order
        breaks ties: the first is the strongest ridge).
    """
    spec = profile.baselines["tune"][dataset]
    for name in ("C", "epsilon"):
        values = np.asarray(spec[name], dtype=float)
        if not (values.ndim == 1 and values.size and np.all(values > 0) and np.all(np.diff(values) > 0)):
            raise ValueError(f"tune[{dataset!r}][{name!r}] must be positive and strictly increasing, got {spec[name]}")
    epsilons = spec["epsilon"] if method in SMOOTHED else (EPSILON,)
    return [dict(C=float(C), epsilon=float(eps)) for C in spec["C"] for eps in epsilons]


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


def tuning_table(out: Path, log) -> ResultsTable:
    """The tuning CSV of a report directory."""
    return ResultsTable(out / "tuning_results.csv", TUNING_COLUMNS, ["config", "dataset", "method", "C", "epsilon"],
                        log)


def compute_tuning_cell(profile: Profile, dataset: str, group: str, method: str, info: RunInfo, reg: dict, *,
                        n_threads: int | None) -> list[CellRecord]:
    """Fit one method with one grid value on the fit part of the training data; the row holds
    its error on the held-out part (a task, like :func:`slr_suite.baselines.compute_cell`)."""
    cfg = profile.baselines
    try:
        data = reuse_data(f"baselines-validation/{dataset} " + json.dumps(cfg, sort_keys=True, default=str),
                          lambda: _split(load_dataset(dataset, profile)))
        fitted, _, _ = fit_method(group, method, dataset, data, cfg, reg, n_threads)
        row = dict(val_error=fitted["test_error"], train_error=fitted["train_error"], seconds=fitted["seconds"],
                   iterations=fitted["iterations"], status=fitted["status"])
    except Exception as exc:
        row = dict(val_error="", train_error="", seconds="", iterations="", status=failure_status(exc))
    return [CellRecord(row=dict(config=config_key(cfg), dataset=dataset, method=method, C=reg["C"],
                                epsilon=reg["epsilon"], **row, **info.row_fields()))]


def _split(data: tuple) -> tuple:
    X_train, Y_train, _, _, n_states = data
    return (*validation_split(X_train, Y_train, SEED), n_states)


class Tuning:
    """The validation fits of one data set and the values they choose.

    ``tasks`` are the fits not cached (empty when the profile does not tune the data set or
    every fit is cached); the engine's records come back through :meth:`receive`, and
    :meth:`choices` gives ``{method: {"C", "epsilon"}}`` for the test cells of ``methods``
    (``(group, method)`` pairs): the chosen values where the data set is tuned, the data set's
    default otherwise.
    """

    def __init__(self, profile: Profile, dataset: str, methods: list[tuple[str, str]], out: Path,
                 ctx: RunContext, cache: CellCache) -> None:
        cfg = profile.baselines
        self.profile, self.dataset, self.ctx, self.cache = profile, dataset, ctx, cache
        self.methods = [m for _, m in methods]
        self.cells = [(g, m, reg) for g, m in methods if tuned(profile, dataset, m)
                      for reg in grid(profile, dataset, m)]
        self.keys = [cache_key("baselines-tuning", dict(dataset=dataset, method=m, **reg),
                               dict(cell_config(cfg, dataset, m, reg), hold_out=_HOLD_OUT), SEED)
                     for _, m, reg in self.cells]
        self.records = [cache.load(key, RECORD.check) for key in self.keys]
        self.table = tuning_table(out, ctx.log) if self.cells else None
        self.tasks = [Task(f"tuning:{dataset}:{m}:C={reg['C']:g},eps={reg['epsilon']:g}", (key,), compute_tuning_cell,
                           (profile, dataset, g, m, ctx.info, reg))
                      for (g, m, reg), key, record in zip(self.cells, self.keys, self.records) if record is None]
        if self.cells:
            ctx.log(f"tuning/{dataset}: {len(self.cells) - len(self.tasks)} of {len(self.cells)} "
                    "validation fits cached")

    def receive(self, task: Task, record: CellRecord) -> None:
        self.records[self.keys.index(task.keys[0])] = record
        row = record.row
        if row["status"] == "ok":
            self.cache.save(task.keys[0], record)
            self.ctx.log(f"tuning/{self.dataset}: {row['method']} C={row['C']:g} eps={row['epsilon']:g}: "
                         f"validation error {row['val_error']:.3f} ({row['seconds']:.1f}s)")
        else:
            self.ctx.log(f"tuning/{self.dataset}: {row['method']} C={row['C']:g} eps={row['epsilon']:g}: "
                         f"{row['status']}")
        self.table.upsert([row])

    def choices(self) -> dict[str, dict[str, float]]:
        regs = {method: default_regularisation(self.dataset) for method in self.methods}
        if not self.cells:
            return regs
        self.table.upsert(record.row for record in self.records if record is not None)
        for method in unique(m for _, m, _ in self.cells):
            rows = [r.row for (_, m, _), r in zip(self.cells, self.records) if m == method and r is not None]
            chosen = choose(grid(self.profile, self.dataset, method), rows)
            if chosen is None:
                self.ctx.log(f"tuning/{self.dataset}: {method}: no validation fit succeeded; the default C is kept")
            else:
                regs[method] = chosen
                self.ctx.log(f"tuning/{self.dataset}: {method}: chose C={chosen['C']:g}"
                             + (f", eps={chosen['epsilon']:g}" if method in SMOOTHED else ""))
        return regs
