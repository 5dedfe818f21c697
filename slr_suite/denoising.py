"""Table 1 of the NIPS paper: every unary x pairwise function class on synthetic denoising.

:func:`run` answers each cell from the cell cache when its key (profile settings, seed, code
fingerprint, dependency versions) matches, computes it otherwise, and merges the rows into the
report directory's CSVs: ``denoising_results.csv`` (one row per cell, with the run that
computed it), ``denoising_history.csv`` (the learning curves) and ``denoising_energies.csv``
(the learned energy functions of the showcase cells). :mod:`slr_suite.render_denoising`
draws the report from them.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from slr_suite.common import RunContext, reuse_data, unique
from slr_suite.engine import Task
from slr_suite.oracles import fitted_oracle, make_oracle
from slr_suite.profiles import Profile
from slr_suite.provenance import PROVENANCE_COLUMNS, RunInfo, cache_key, config_hash
from slr_suite.results import ResultsTable
from slr_suite.store import CellCache, CellRecord, RecordSpec

__all__ = ["run", "parse_cells", "all_cells", "load_data", "tables", "COLUMNS", "HISTORY_COLUMNS", "ENERGY_COLUMNS",
           "SHOWCASE", "SEED"]

COLUMNS = ["config", "unary", "pairwise", "train_error", "test_error", "objective", "n_iter", "seconds",
           *PROVENANCE_COLUMNS]
HISTORY_COLUMNS = ["config", "unary", "pairwise", "iteration", "objective", "train_error", "val_error", "seconds"]
ENERGY_COLUMNS = ["config", "unary", "pairwise", "role", "state", "phi", "f"]
SEED = 0
SHOWCASE = ("Linear", "Boost", "MLP")   # the paper's Figures 1 and 3 (same class for both factors)
_HISTORY = ("iteration", "objective", "train_error", "val_error", "seconds")
_TEXT, _NUMBER = (str,), (int, float)
#: What a cached cell holds (a stored entry that does not fit is set aside and recomputed).
RECORD = RecordSpec(
    row={c: _NUMBER if c in ("train_error", "test_error", "objective", "seconds") else (int,) if c == "n_iter" else
         (bool,) if c == "dirty" else _TEXT for c in COLUMNS},
    arrays={f"hist_{c}": ("f", ("n",)) for c in _HISTORY},
    optional=dict(grid=("f", ("g",)), f_unary=("f", ("g", None)), f_pairwise=("f", ("g", None)),
                  example_input=("f", ("s", "s")), example_truth=("iu", ("s", "s")),
                  example_pred=("iu", ("s", "s"))))


def load_data(cfg: dict):
    """Train and test splits for a profile's ``denoise``-like dict (fixed seeds)."""
    from slr.datasets.denoising import make_denoising

    sigma = cfg.get("sigma", 10.0)
    Xtr, Ytr = make_denoising(cfg["n_train"], cfg["size"], sigma, random_state=SEED)
    Xte, Yte = make_denoising(cfg["n_test"], cfg["size"], sigma, random_state=SEED + 1)
    return Xtr, Ytr, Xte, Yte


def tables(out: Path, log) -> tuple[ResultsTable, ResultsTable, ResultsTable]:
    """The results, history and energies CSVs of a report directory."""
    return (ResultsTable(out / "denoising_results.csv", COLUMNS, ["config", "unary", "pairwise"], log),
            ResultsTable(out / "denoising_history.csv", HISTORY_COLUMNS,
                         ["config", "unary", "pairwise", "iteration"], log),
            ResultsTable(out / "denoising_energies.csv", ENERGY_COLUMNS,
                         ["config", "unary", "pairwise", "role", "state", "phi"], log))


def all_cells(cfg: dict) -> list[tuple[str, str]]:
    """Table 1's cells (every unary x pairwise class) followed by the cells computed beside it."""
    return [(u, p) for u in cfg["classes"] for p in cfg["classes"]] + [tuple(c) for c in cfg.get("beside", ())]


#: Relative cost of fitting each function class (from the full profile's wall times per cell);
#: a pairwise problem has twice the rows and twice the classes of the unary one.
_CLASS_COST = {"Boost": 8.0, "ChapterBoost": 6.0, "MLP": 4.0}


def expected_cost(cell: tuple[str, str]) -> float:
    """A cell's relative cost, for running the costly cells first (cells are independent and
    seeded, so the order changes no result): the unary class's cost plus twice the pairwise's."""
    unary, pairwise = cell
    return _CLASS_COST.get(unary, 1.0) + 2.0 * _CLASS_COST.get(pairwise, 1.0)


def parse_cells(text: str, cfg: dict) -> list[tuple[str, str]]:
    """``"Boost/Boost,Linear/Zero"`` -> ``[("Boost", "Boost"), ("Linear", "Zero")]``, checked
    against the cells of the profile's ``denoise`` settings ``cfg``, repeats dropped."""
    known = all_cells(cfg)
    cells = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        u, sep, p = item.partition("/")
        if not sep or (u, p) not in known:
            raise ValueError(f"--cells: {item!r} is not UNARY/PAIRWISE with classes from "
                             f"{list(cfg['classes'])} (or one of {[f'{a}/{b}' for a, b in cfg.get('beside', ())]})")
        cells.append((u, p))
    if not cells:
        raise ValueError("--cells: no cell given")
    return unique(cells)


def _energies(model, unary_given, pairwise_given, eps: float) -> dict[str, np.ndarray]:
    """``f = eps * g`` of the fitted unary and pairwise functions on a grid of the feature."""
    grid = np.linspace(0.0, 1.0, 101)
    feats = np.column_stack([grid, np.ones_like(grid)])
    out = {"grid": grid}
    for role, given in (("unary", unary_given), ("pairwise", pairwise_given)):
        oracle = fitted_oracle(model, role, given)
        if oracle is not None:
            out[f"f_{role}"] = eps * np.asarray(oracle.decision_function(feats), dtype=np.float64)
    return out


def compute_cell(cfg: dict, u: str, p: str, info: RunInfo, *, n_threads: int | None) -> list[CellRecord]:
    """Fit the ``u``/``p`` cell of a profile's ``denoise`` settings (a task; data made here)."""
    from slr.learner import StructuredLogisticRegression

    Xtr, Ytr, Xte, Yte = reuse_data("denoising " + json.dumps(cfg, sort_keys=True), lambda: load_data(cfg))
    unary = make_oracle(u, "unary", cfg, SEED)
    pairwise = make_oracle(p, "pairwise", cfg, SEED)
    model = StructuredLogisticRegression(
        unary=unary, pairwise=pairwise, epsilon=cfg["epsilon"], max_iter=cfg["n_iter"],
        mp_sweeps=cfg["mp_sweeps"], n_threads=n_threads, random_state=SEED)
    t0 = time.perf_counter()
    model.fit(Xtr, Ytr, X_val=Xte, Y_val=Yte)
    seconds = time.perf_counter() - t0
    hist = model.history_
    arrays = {f"hist_{col}": np.asarray(hist[col], dtype=np.float64) for col in _HISTORY if col in hist}
    if u == p and u in SHOWCASE:
        size = cfg["size"]
        arrays.update(_energies(model, unary, pairwise, cfg["epsilon"]),
                      example_input=Xte[0][0][:, 0].reshape(size, size),
                      example_truth=np.asarray(Yte[0]).reshape(size, size),
                      example_pred=np.asarray(model.predict(Xte[:1])[0]).reshape(size, size))
    row = dict(config=config_hash(cfg), unary=u, pairwise=p,
               train_error=1.0 - float(model.score(Xtr, Ytr)), test_error=1.0 - float(model.score(Xte, Yte)),
               objective=float(hist["objective"].iloc[-1]), n_iter=cfg["n_iter"], seconds=seconds,
               **info.row_fields())
    return [CellRecord(row=row, arrays=arrays)]


def _history_rows(row: dict, arrays: dict) -> list[dict]:
    if "hist_iteration" not in arrays:
        return []
    n = arrays["hist_iteration"].shape[0]
    cols = {col: arrays.get(f"hist_{col}", np.full(n, np.nan)) for col in _HISTORY}
    return [dict(config=row["config"], unary=row["unary"], pairwise=row["pairwise"],
                 iteration=int(cols["iteration"][i]), **{c: float(cols[c][i]) for c in _HISTORY[1:]})
            for i in range(n)]


def _energy_rows(row: dict, arrays: dict) -> list[dict]:
    rows = []
    for role in ("unary", "pairwise"):
        values = arrays.get(f"f_{role}")
        if values is None:
            continue
        for state in range(values.shape[1]):
            rows += [dict(config=row["config"], unary=row["unary"], pairwise=row["pairwise"], role=role,
                          state=state, phi=float(phi), f=float(f))
                     for phi, f in zip(arrays["grid"], values[:, state])]
    return rows


def run(profile: Profile, out: Path, ctx: RunContext,
        cells: list[tuple[str, str]] | None = None) -> dict[tuple[str, str], CellRecord]:
    """Answer every cell (or only ``cells``) from the cache or by fitting it; write the CSVs.

    Returns
    -------
    dict
        ``(unary, pairwise) -> CellRecord`` of the cells of this run.
    """
    cfg = profile.denoise
    log = ctx.log
    cache = CellCache(ctx.cache_dir, "denoising", log, read=ctx.read_cache)
    results, history, energies = tables(out, log)
    wanted = unique(cells if cells is not None else all_cells(cfg))
    keys = {cell: cache_key("denoising", dict(unary=cell[0], pairwise=cell[1]), cfg, SEED) for cell in wanted}
    records = {cell: cache.load(keys[cell], RECORD.check) for cell in wanted}
    todo = [cell for cell in wanted if records[cell] is None]
    log(f"denoising: {len(wanted) - len(todo)} of {len(wanted)} cells cached, {len(todo)} to compute "
        f"({cfg['n_train']}+{cfg['n_test']} images of {cfg['size']}x{cfg['size']}, {cfg['n_iter']} iterations)")
    todo.sort(key=expected_cost, reverse=True)  # the costliest first: no worker idles at the end
    tasks = [Task(f"denoising:{u}-{p}", (keys[(u, p)],), compute_cell, (cfg, u, p, ctx.info)) for u, p in todo]
    for i, (task, (record,)) in enumerate(ctx.computed(tasks)):
        u, p = record.row["unary"], record.row["pairwise"]
        cache.save(task.keys[0], record)
        records[(u, p)] = record
        log.computed.append(task.name)
        row = record.row
        log(f"denoising [{i + 1}/{len(todo)}] unary={u:8s} pairwise={p:8s} "
            f"train={row['train_error']:.3f} test={row['test_error']:.3f} ({row['seconds']:.1f}s)")
        _write(results, history, energies, [record])
    _write(results, history, energies, records.values())
    return records


def _write(results: ResultsTable, history: ResultsTable, energies: ResultsTable, records) -> None:
    records = list(records)
    results.upsert(r.row for r in records)
    history.upsert(h for r in records for h in _history_rows(r.row, r.arrays))
    energies.upsert(e for r in records for e in _energy_rows(r.row, r.arrays))
