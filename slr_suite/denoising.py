"""Table 1 of the NIPS paper: every unary x pairwise function class on synthetic denoising.

A cell is one (unary, pairwise) pair of function classes, fitted on the profile's images; its
rows go to ``denoising_results.csv`` (one per cell), ``denoising_history.csv`` (the learning
curves) and ``denoising_energies.csv`` (the learned energy functions of the showcase cells).
:mod:`slr.suite.render_denoising` draws the report from them.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import time

import numpy as np

from slr.suite.common import RunContext, reuse_data, unique
from slr.suite.experiment import Cell, ExperimentBase, Table
from slr.suite.oracles import OracleSpec, fitted_oracle, suite_learner
from slr.suite.provenance import PROVENANCE_COLUMNS, RunInfo, config_hash
from slr.suite.store import CellRecord, RecordSpec

__all__ = ["DenoisingData", "DenoisingSpec", "Denoising", "NAME", "SPECS", "TABLES", "FUNCTION_CLASSES", "COLUMNS",
           "LEARNING_CURVE_COLUMNS", "ENERGY_COLUMNS", "SHOWCASE", "SEED", "all_cells", "parse_cells", "cell"]

#: The function classes of Table 1, in the paper's order.
FUNCTION_CLASSES = ("Zero", "Constant", "Linear", "Boost", "MLP")
COLUMNS = ["config", "unary", "pairwise", "train_error", "test_error", "objective", "n_iter", "seconds",
           *PROVENANCE_COLUMNS]
#: The learning curves' CSV (the learner's own history columns are :data:`slr.estimator.HISTORY_COLUMNS`).
LEARNING_CURVE_COLUMNS = ["config", "unary", "pairwise", "iteration", "objective", "train_error", "val_error",
                          "seconds"]
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
#: The MLP's SGD step (the paper's): .25 for unary factors, .05 for pairwise ones.
_MLP_RATE = {"unary": 0.25, "pairwise": 0.05}
#: Boosting's shrinkage (the paper's).
_BOOST_STEP = 0.25


@dataclass(frozen=True)
class DenoisingData:
    """Synthetic binary denoising images: ``n_train`` + ``n_test`` of ``size`` x ``size``, blur ``sigma``."""

    n_train: int
    n_test: int
    size: int
    sigma: float = 10.0

    def load(self) -> tuple:
        """``(X_train, Y_train, X_test, Y_test)`` (fixed seeds)."""
        from slr.datasets.denoising import make_denoising

        Xtr, Ytr = make_denoising(self.n_train, self.size, self.sigma, random_state=SEED)
        Xte, Yte = make_denoising(self.n_test, self.size, self.sigma, random_state=SEED + 1)
        return Xtr, Ytr, Xte, Yte


@dataclass(frozen=True)
class DenoisingSpec:
    """Table 1's settings in one profile.

    Attributes
    ----------
    data : DenoisingData
        The ``quick`` profile's smaller images use ``sigma = 10 * size / 100`` so that an image
        holds as many blobs as the paper's 100 x 100 ones and both labels occur in it; it takes
        8 + 8 of them, the comparison's quick denoising data (16 + 16 until `make report` was
        cut towards 5 minutes: Table 1 took a quarter of its CPU time).
    n_iter, max_sweeps, epsilon
        The learner's iterations, star-update sweeps per half step (kernel sweeps: the chapter's
        25 forward-backward iterations are 50), and eps: Table 1 keeps the paper's protocol, 25
        iterations of Algorithm 1.1 with exact steps (:data:`slr.suite.oracles.FIXED_BUDGET`), not
        the library's stopping rule.
    trees : mapping
        BoostedTrees keywords of Table 1's ``Boost``: the NIPS paper's protocol, one tree per
        class per round with leaves of at least 5% of the subsample.
    chapter_trees : mapping
        Those of ``ChapterBoost``, the chapter's protocol: one vector-leaf tree per round,
        leaves of 1%.
    mlp : mapping
        MLP keywords: the model choice alone (the paper's 100 hidden units; tiny's 8). The
        solver is the MLP's defaults: mini-batches of 100 (the chapter's) and
        ``n_epochs="auto"`` (the papers give no epoch count). ``full`` pinned 8 epochs per fit
        (32 pairwise) of batches of 1000 until "auto" was measured with the default batches:
        "auto" counts epochs, and at batch 1000 an epoch of the full data is 160 SGD steps
        (317 pairwise), so it stopped every fit after 2 (MLP/MLP .018 after 25 iterations);
        at batch 100 it runs 2-5 epochs of 1,600 (3,168) steps per fit. Full cells,
        defaults / pinned / paper: MLP/MLP .0081 / .0076 / .008, MLP/Linear .0133 / .0139 /
        .015, MLP/Constant .0268 / .0271 / .032, MLP/Boost .0106 / .0117 / .009, Boost/MLP
        .0072 / .0064 / .007, Linear/MLP .0416 / .0381 / .034 (docs/design.md section 4).
    classes : tuple of str
        Table 1's function classes (rows and columns).
    beside : tuple of (str, str)
        Cells computed beside Table 1, shown in their own section.
    """

    data: DenoisingData
    n_iter: int
    max_sweeps: int
    epsilon: float
    trees: Mapping[str, Any]
    chapter_trees: Mapping[str, Any]
    mlp: Mapping[str, Any]
    classes: tuple[str, ...] = FUNCTION_CLASSES
    beside: tuple[tuple[str, str], ...] = ()

    def config(self) -> dict[str, Any]:
        """Every setting, as the ``config`` column hashes it."""
        return dict(asdict(self.data), n_iter=self.n_iter, max_sweeps=self.max_sweeps, epsilon=self.epsilon,
                    trees=dict(self.trees), chapter_trees=dict(self.chapter_trees), mlp=dict(self.mlp),
                    classes=self.classes, beside=self.beside)

    def oracle(self, name: str, role: str) -> OracleSpec:
        """The oracle of function class ``name`` for the ``"unary"`` or ``"pairwise"`` factor.

        ``Boost`` boosts with ``trees`` and ``ChapterBoost`` with ``chapter_trees``; the MLP
        takes the paper's step for the factor and ``mlp``.
        """
        if name in ("Zero", "Constant", "LightGBM"):
            return OracleSpec(name)
        if name == "Linear":
            return OracleSpec("Linear", dict(l2=0.0))
        if name in ("Boost", "ChapterBoost"):
            trees = self.trees if name == "Boost" else self.chapter_trees
            return OracleSpec("BoostedTrees", dict(learning_rate=_BOOST_STEP, **trees))
        if name == "MLP":
            return OracleSpec("MLP", dict(learning_rate=_MLP_RATE[role], **self.mlp))
        raise ValueError(f"unknown function class {name!r}")

    def learner(self, unary: str, pairwise: str, n_jobs: int | None):
        """The learner of cell ``unary``/``pairwise``, with its two oracles. A cell of Table 1
        measures the training and test error of every iteration (``monitor=True``: the learning
        curves' figure draws them, and the report reads the test curve's last iterations); a
        cell beside it measures neither (``monitor=False``), as nothing draws its curves and
        each measurement is a MAP decode of all its images, which on images where the LP is not
        tight runs thousands of sweeps. Monitoring changes no fit."""
        return suite_learner(
            unary=self.oracle(unary, "unary").build(SEED), pairwise=self.oracle(pairwise, "pairwise").build(SEED),
            epsilon=self.epsilon, max_iter=self.n_iter, max_sweeps=self.max_sweeps, n_jobs=n_jobs,
            random_state=SEED, monitor=(unary, pairwise) not in self.beside)


def _protocols(n_rounds: int, subsample: int) -> dict:
    """``trees`` (NIPS: per-class trees) and ``chapter_trees`` (chapter: one vector tree) of a profile,
    and the cell that compares them beside Table 1."""
    return dict(trees=dict(n_rounds=n_rounds, subsample=subsample, tree="per_class"),
                chapter_trees=dict(n_rounds=n_rounds, subsample=subsample, tree="vector"),
                beside=(("ChapterBoost", "ChapterBoost"),))


#: Table 1's settings in each profile.
SPECS = {
    "tiny": DenoisingSpec(DenoisingData(n_train=2, n_test=2, size=8, sigma=2.0), n_iter=2, max_sweeps=10,
                          epsilon=0.1, **_protocols(3, 1000), mlp=dict(n_hidden=8)),
    "quick": DenoisingSpec(DenoisingData(n_train=8, n_test=8, size=32, sigma=3.2), n_iter=25, max_sweeps=50,
                           epsilon=0.1, **_protocols(20, 5000), mlp=dict(n_hidden=100)),
    "full": DenoisingSpec(DenoisingData(n_train=16, n_test=16, size=100, sigma=10.0), n_iter=25, max_sweeps=50,
                          epsilon=0.1, **_protocols(200, 10000), mlp=dict(n_hidden=100)),
}


def all_cells(spec: DenoisingSpec) -> list[tuple[str, str]]:
    """Table 1's cells (every unary x pairwise class) followed by the cells computed beside it."""
    return [(u, p) for u in spec.classes for p in spec.classes] + [tuple(c) for c in spec.beside]


#: Relative cost of fitting each function class (from the full profile's wall times per cell);
#: a pairwise problem has twice the rows and twice the classes of the unary one.
_CLASS_COST = {"Boost": 8.0, "ChapterBoost": 6.0, "MLP": 4.0}


def expected_cost(cell: tuple[str, str]) -> float:
    """A cell's relative cost, for running the costly cells first (cells are independent and
    seeded, so the order changes no result): the unary class's cost plus twice the pairwise's."""
    unary, pairwise = cell
    return _CLASS_COST.get(unary, 1.0) + 2.0 * _CLASS_COST.get(pairwise, 1.0)


def parse_cells(text: str, spec: DenoisingSpec) -> list[tuple[str, str]]:
    """``"Boost/Boost,Linear/Zero"`` -> ``[("Boost", "Boost"), ("Linear", "Zero")]``, checked
    against the cells of ``spec``, repeats dropped."""
    known = all_cells(spec)
    cells = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        u, sep, p = item.partition("/")
        if not sep or (u, p) not in known:
            raise ValueError(f"--cells: {item!r} is not UNARY/PAIRWISE with classes from "
                             f"{list(spec.classes)} (or one of {[f'{a}/{b}' for a, b in spec.beside]})")
        cells.append((u, p))
    if not cells:
        raise ValueError("--cells: no cell given")
    return unique(cells)


def cell(spec: DenoisingSpec, unary: str, pairwise: str) -> Cell:
    """The ``unary``/``pairwise`` cell: its key holds the images, the learner's settings and its two oracles."""
    config = dict(asdict(spec.data), n_iter=spec.n_iter, max_sweeps=spec.max_sweeps, epsilon=spec.epsilon,
                  unary=spec.oracle(unary, "unary").config(), pairwise=spec.oracle(pairwise, "pairwise").config())
    return Cell(label=f"{unary}-{pairwise}", identity=dict(unary=unary, pairwise=pairwise), config=config, seed=SEED,
                args=(unary, pairwise), cost=expected_cost((unary, pairwise)))


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


def compute_cell(spec: DenoisingSpec, unary: str, pairwise: str, info: RunInfo,
                  n_threads: int | None) -> CellRecord:
    """Fit the ``unary``/``pairwise`` cell (the data made here, or kept from the previous cell)."""
    data = spec.data
    Xtr, Ytr, Xte, Yte = reuse_data(f"denoising {data}", data.load)
    model = spec.learner(unary, pairwise, n_threads)
    t0 = time.perf_counter()
    model.fit(Xtr, Ytr, X_val=Xte, Y_val=Yte)
    seconds = time.perf_counter() - t0
    hist = model.history_
    arrays = {f"hist_{col}": np.asarray(hist[col], dtype=np.float64) for col in _HISTORY if col in hist}
    if unary == pairwise and unary in SHOWCASE:
        size = data.size
        arrays.update(_energies(model, model.unary, model.pairwise, spec.epsilon),
                      example_input=Xte[0][0][:, 0].reshape(size, size),
                      example_truth=np.asarray(Yte[0]).reshape(size, size),
                      example_pred=np.asarray(model.predict(Xte[:1])[0]).reshape(size, size))
    row = dict(config=config_hash(spec.config()), unary=unary, pairwise=pairwise,
               train_error=1.0 - float(model.score(Xtr, Ytr)), test_error=1.0 - float(model.score(Xte, Yte)),
               objective=float(hist["objective"].iloc[-1]), n_iter=spec.n_iter, seconds=seconds,
               **info.row_fields())
    return CellRecord(row=row, arrays=arrays)


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


NAME = "denoising"
#: The results (one row per cell), the learning curves and the learned energy functions.
TABLES = (Table("denoising_results.csv", COLUMNS, ("config", "unary", "pairwise")),
          Table("denoising_history.csv", LEARNING_CURVE_COLUMNS, ("config", "unary", "pairwise", "iteration"),
                lambda record: _history_rows(record.row, record.arrays)),
          Table("denoising_energies.csv", ENERGY_COLUMNS, ("config", "unary", "pairwise", "role", "state", "phi"),
                lambda record: _energy_rows(record.row, record.arrays)))


class Denoising(ExperimentBase):
    """Table 1 as an :class:`slr.suite.experiment.Experiment`."""

    name = NAME
    record = RECORD
    help = "Table 1: every unary x pairwise function class on synthetic denoising"
    specs = SPECS
    tables = TABLES

    def select(self, profile, options: Mapping[str, Any]) -> list[tuple[str, str]] | None:
        """The cells of ``--cells`` (None: all)."""
        text = options.get("cells")
        return None if text is None else parse_cells(text, self.spec(profile))

    def cells(self, profile, selection, done, ctx: RunContext) -> list[Cell]:
        spec = self.spec(profile)
        return [cell(spec, u, p) for u, p in (all_cells(spec) if selection is None else selection)]

    def compute(self, spec: DenoisingSpec, cells: Sequence[Cell], info: RunInfo, *,
                n_threads: int | None) -> list[CellRecord]:
        return [compute_cell(spec, *c.args, info, n_threads) for c in cells]

    def describe(self, record: CellRecord) -> str:
        row = record.row
        return (f"unary={row['unary']:8s} pairwise={row['pairwise']:8s} train={row['train_error']:.3f} "
                f"test={row['test_error']:.3f} ({row['seconds']:.1f}s)")
