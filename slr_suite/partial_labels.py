"""Partial labels: test error with a share of the training nodes' labels hidden, three ways.

For each data set and each share of hidden labels (drawn per node with a fixed seed, the same
nodes for both methods that see them), ``slr:Linear`` (Linear oracles on both factors, ridge
``l2 = eps / C`` with the comparison's ``C``, eps .1) is fitted

* ``full``: on every label (once per data set);
* ``drop``: on the labelled subgraphs (the unlabelled nodes and their edges removed);
* ``latent``: on every node, the unlabelled ones as latent variables (label ``-1``; :mod:`slr.latent`).

Every fit runs the same ``max_iter`` iterations (the stopping rule off), so the three are compared
at equal work; each row holds the per-node test error on fully labelled test examples. Rows go to
``partial_labels_results.csv``; :mod:`slr.suite.render_partial_labels` draws the report.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from slr.suite.common import RunContext, reuse_data
from slr.suite.denoising import DenoisingData
from slr.suite.experiment import Cell, ExperimentBase, Table
from slr.suite.methods import C_VALUE, LettersData
from slr.suite.provenance import PROVENANCE_COLUMNS, RunInfo, config_hash
from slr.suite.store import CellRecord, RecordSpec

__all__ = ["PartialLabels", "PartialLabelsSpec", "COLUMNS", "METHODS", "NAME", "SPECS", "TABLES",
           "hide_labels", "labelled_subgraphs"]

SEED = 0
EPSILON = 0.1
METHODS = ("full", "drop", "latent")
DATASETS = ("denoising", "letters")
COLUMNS = ["config", "dataset", "hidden", "method", "test_error", "labelled", "seconds", *PROVENANCE_COLUMNS]
_TEXT = ("config", "dataset", "method", "commit", "code", "command", "machine", "computed_at")
RECORD = RecordSpec(row={c: (str,) if c in _TEXT else (bool,) if c == "dirty" else (int, float) for c in COLUMNS})


@dataclass(frozen=True)
class PartialLabelsSpec:
    """The data, hidden shares and budget of one profile.

    Attributes
    ----------
    denoise, letters : DenoisingData, LettersData
    hidden : tuple of float
        Shares of the training nodes whose labels are hidden.
    max_iter : int
        Iterations of every fit (``tol=0``: equal work for the three methods).
    """

    denoise: DenoisingData
    letters: LettersData
    hidden: tuple[float, ...]
    max_iter: int

    def config(self) -> dict[str, Any]:
        """Every setting, as the ``config`` column hashes it."""
        return dict(denoise=asdict(self.denoise), letters=asdict(self.letters), hidden=self.hidden,
                    max_iter=self.max_iter)

    def data(self, dataset: str) -> DenoisingData | LettersData:
        """The settings of ``dataset``'s data."""
        return {"denoising": self.denoise, "letters": self.letters}[dataset]


SPECS = {
    "tiny": PartialLabelsSpec(DenoisingData(n_train=2, n_test=2, size=6, sigma=0.6),
                              LettersData(n_train=8, n_test=8), hidden=(0.5,), max_iter=2),
    "quick": PartialLabelsSpec(DenoisingData(n_train=8, n_test=8, size=32, sigma=3.2),
                               LettersData(n_train=100, n_test=300), hidden=(0.25, 0.5, 0.75), max_iter=25),
    "full": PartialLabelsSpec(DenoisingData(n_train=16, n_test=16, size=32, sigma=3.2),
                              LettersData(n_train=300, n_test=500), hidden=(0.25, 0.5, 0.75), max_iter=25),
}


def hide_labels(Y: Sequence[np.ndarray], hidden: float, seed: int = SEED) -> list[np.ndarray]:
    """``Y`` with each node's label replaced by -1 with probability ``hidden`` (seeded)."""
    rng = np.random.default_rng(seed)
    return [np.where(rng.random(np.shape(y)) < hidden, -1, y) for y in Y]


def labelled_subgraphs(X: Sequence, Y: Sequence[np.ndarray]) -> tuple[list, list]:
    """Each example restricted to its labelled nodes (label >= 0) and the edges between them;
    examples without a labelled node are left out."""
    X_out, Y_out = [], []
    for (nodes, edges, edge_features), y in zip(X, Y):
        keep = y >= 0
        if not keep.any():
            continue
        index = np.cumsum(keep) - 1
        kept = keep[edges[:, 0]] & keep[edges[:, 1]]
        X_out.append((nodes[keep], index[edges[kept]], edge_features[kept]))
        Y_out.append(y[keep])
    return X_out, Y_out


def cells_of(spec: PartialLabelsSpec) -> list[tuple[str, float, str]]:
    """``(data set, hidden share, method)`` of every cell: ``full`` once (share 0), the others per share."""
    return [(d, 0.0, "full") for d in DATASETS] + [(d, float(h), m) for d in DATASETS for h in spec.hidden
                                                   for m in METHODS[1:]]


def cell(spec: PartialLabelsSpec, dataset: str, hidden: float, method: str) -> Cell:
    """The (data set, share, method) cell."""
    return Cell(label=f"{dataset}:{hidden:g}:{method}", identity=dict(dataset=dataset, hidden=hidden, method=method),
                config=dict(data=asdict(spec.data(dataset)), max_iter=spec.max_iter, C=C_VALUE[dataset],
                            epsilon=EPSILON),
                seed=SEED, args=(dataset, hidden, method), cost=2.0 if dataset == "letters" else 1.0)


def learner(dataset: str, n_states: int, max_iter: int, n_jobs: int | None):
    """``slr:Linear`` with the data set's ridge, ``max_iter`` iterations of Algorithm 1.1 (equal work for
    every method: the latent fits cannot take the joint solver) and the stopping rule off."""
    from slr.learner import StructuredLogisticRegression
    from slr.oracles import Linear

    l2 = EPSILON / C_VALUE[dataset]
    return StructuredLogisticRegression(Linear(l2=l2), Linear(l2=l2), epsilon=EPSILON, max_iter=max_iter, tol=0,
                                        n_states=n_states, monitor=False, n_jobs=n_jobs, random_state=SEED,
                                        solver="alternation")


def compute_cell(spec: PartialLabelsSpec, dataset: str, hidden: float, method: str, info: RunInfo,
                 n_threads: int | None) -> CellRecord:
    """Fit one cell on its share of the labels and score it on the test examples."""
    data = spec.data(dataset)
    Xtr, Ytr, Xte, Yte = reuse_data(f"partial_labels/{dataset} {data}", data.load)
    n_states = 2 if dataset == "denoising" else 26
    Y = hide_labels(Ytr, hidden)
    X = Xtr
    if method == "drop":
        X, Y = labelled_subgraphs(Xtr, Y)
    model = learner(dataset, n_states, spec.max_iter, n_threads)
    start = time.perf_counter()
    model.fit(X, Y)
    seconds = time.perf_counter() - start
    labelled = float(np.mean(np.concatenate(Y) >= 0)) if method != "drop" else 1.0
    row = dict(config=config_hash(spec.config()), dataset=dataset, hidden=hidden, method=method,
               test_error=1.0 - float(model.score(Xte, Yte)), labelled=labelled, seconds=seconds,
               **info.row_fields())
    return CellRecord(row=row)


NAME = "partial_labels"
TABLES = (Table("partial_labels_results.csv", COLUMNS, ("config", "dataset", "hidden", "method")),)


class PartialLabels(ExperimentBase):
    """Partial labels as an :class:`slr.suite.experiment.Experiment`."""

    name = NAME
    record = RECORD
    help = "test error with 25, 50 and 75 percent of the training labels hidden: dropped or latent nodes"
    specs = SPECS
    tables = TABLES

    def cells(self, profile, selection, done, ctx: RunContext) -> list[Cell]:
        spec = self.spec(profile)
        return [cell(spec, *c) for c in cells_of(spec)]

    def compute(self, spec: PartialLabelsSpec, cells: Sequence[Cell], info: RunInfo, *,
                n_threads: int | None) -> list[CellRecord]:
        return [compute_cell(spec, *c.args, info, n_threads) for c in cells]

    def describe(self, record: CellRecord) -> str:
        row = record.row
        return (f"{row['dataset']} {row['hidden']:.0%} hidden, {row['method']}: test={row['test_error']:.4f} "
                f"({row['seconds']:.1f}s)")
