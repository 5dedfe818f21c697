"""Calibration of node marginals: the smoothed LP's against the exact ones, on letters and denoising.

A cell is one (data set, eps): ``slr:Linear`` (Linear oracles on both factors, ridge
``l2 = eps / C`` with the data set's ``C`` of the comparison, the library's other defaults) is
fitted on the training examples, and on the test examples two kinds of node marginals are taken
at the fit's eps (docs/design.md section 1):

- ``lp``: the entropy-smoothed LP's, the quantities the model was trained with (any graph);
- ``exact``: those of the CRF ``p(y | x) ∝ exp(g(y))`` -- sum-product on the letters' chains,
  elimination over windows on the denoising grids (the calibration images are narrow for it).

Each is scored over all test nodes by its negative log-likelihood, expected calibration error
(15 equal-width confidence bins), Brier score and the accuracy of its most probable label, beside
the MAP labelling's error. Rows go to ``calibration_results.csv`` and the reliability curves to
``calibration_bins.csv``; :mod:`slr.suite.render_calibration` draws the report.
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

__all__ = ["Calibration", "CalibrationSpec", "COLUMNS", "BIN_COLUMNS", "METHODS", "NAME", "SPECS", "TABLES"]

SEED = 0
#: The two kinds of marginals, in report order.
METHODS = ("lp", "exact")
_METRICS = ("nll", "ece", "brier", "marginal_error")
COLUMNS = ["config", "dataset", "epsilon", "method", "nll", "ece", "brier", "marginal_error", "map_error",
           "n_nodes", "fit_seconds", "marginal_seconds", *PROVENANCE_COLUMNS]
BIN_COLUMNS = ["config", "dataset", "epsilon", "method", "bin", "count", "confidence", "accuracy"]
_TEXT = ("config", "dataset", "method", "commit", "code", "command", "machine", "computed_at")
RECORD = RecordSpec(
    row={c: (str,) if c in _TEXT else (bool,) if c == "dirty" else (int,) if c == "n_nodes" else (int, float)
         for c in COLUMNS if c not in ("method", *_METRICS)},
    arrays={f"{method}_{part}": ("fif", (None,)) for method in METHODS
            for part in ("metrics", "count", "confidence", "accuracy")})


@dataclass(frozen=True)
class CalibrationSpec:
    """The data and models of one profile.

    Attributes
    ----------
    letters : LettersData
        Words of fold 1 to train, of the other folds to test.
    denoise : DenoisingData
        Binary denoising images, narrow enough for exact marginals by elimination (an image
        ``size`` pixels wide needs tables of ``2^(size+1)`` entries).
    epsilons : tuple of float
        The temperatures fitted (and at which the marginals are taken).
    max_iter : int or None
        A cap on the learner's iterations (None: the library's; its other settings are the
        library's defaults, so it stops by its rule).
    n_bins : int
        Confidence bins of the calibration error and the reliability curves.
    """

    letters: LettersData
    denoise: DenoisingData
    epsilons: tuple[float, ...]
    max_iter: int | None = None
    n_bins: int = 15

    def config(self) -> dict[str, Any]:
        """Every setting, as the ``config`` column hashes it."""
        return dict(letters=asdict(self.letters), denoise=asdict(self.denoise), epsilons=self.epsilons,
                    max_iter=self.max_iter, n_bins=self.n_bins)

    def data(self, dataset: str) -> LettersData | DenoisingData:
        """The settings of ``dataset``'s data."""
        return {"letters": self.letters, "denoising": self.denoise}[dataset]


#: Quick: 60 training words and 12 x 12 images (bandwidth 12: 2^13-entry tables); full: all of
#: fold 1 and the other folds, and 16 x 16 images.
SPECS = {
    "tiny": CalibrationSpec(LettersData(n_train=10, n_test=10), DenoisingData(n_train=3, n_test=2, size=3, sigma=0.5),
                            epsilons=(0.1,), max_iter=2),
    "quick": CalibrationSpec(LettersData(n_train=60, n_test=200),
                             DenoisingData(n_train=16, n_test=16, size=12, sigma=1.2), epsilons=(0.1, 1.0)),
    "full": CalibrationSpec(LettersData(n_train=None, n_test=None),
                            DenoisingData(n_train=32, n_test=32, size=16, sigma=1.6), epsilons=(0.1, 1.0)),
}
DATASETS = ("letters", "denoising")


def cell(spec: CalibrationSpec, dataset: str, epsilon: float) -> Cell:
    """The (data set, eps) cell."""
    return Cell(label=f"{dataset}:eps={epsilon}", identity=dict(dataset=dataset, epsilon=epsilon),
                config=dict(data=asdict(spec.data(dataset)), max_iter=spec.max_iter, n_bins=spec.n_bins,
                            C=C_VALUE[dataset]),
                seed=SEED, args=(dataset, epsilon), cost=1.0 if dataset == "letters" else 0.5)


def _learner(dataset: str, epsilon: float, max_iter: int | None, n_jobs: int | None):
    from slr.learner import StructuredLogisticRegression
    from slr.oracles import Linear

    l2 = epsilon / C_VALUE[dataset]
    cap = {} if max_iter is None else {"max_iter": max_iter}
    return StructuredLogisticRegression(Linear(l2=l2), Linear(l2=l2), epsilon=epsilon, n_jobs=n_jobs,
                                        random_state=SEED, **cap)


def compute_cell(spec: CalibrationSpec, dataset: str, epsilon: float, info: RunInfo,
                 n_threads: int | None) -> CellRecord:
    """Fit one cell's model and score both kinds of its test marginals."""
    from slr.metrics import calibration_curve, node_accuracy, node_brier_score, node_log_loss

    data = spec.data(dataset)
    Xtr, Ytr, Xte, Yte = reuse_data(f"calibration/{dataset} {data}", data.load)
    model = _learner(dataset, epsilon, spec.max_iter, n_threads)
    start = time.perf_counter()
    model.fit(Xtr, Ytr)
    fit_seconds = time.perf_counter() - start
    arrays: dict[str, np.ndarray] = {}
    seconds = []
    for method in METHODS:
        start = time.perf_counter()
        marginals = model.predict_marginals(Xte, method=method)
        seconds.append(time.perf_counter() - start)
        curve = calibration_curve(Yte, marginals, n_bins=spec.n_bins)
        error = 1.0 - node_accuracy(Yte, [p.argmax(axis=1) for p in marginals])
        arrays[f"{method}_metrics"] = np.array([node_log_loss(Yte, marginals),
                                                curve.expected_error,
                                                node_brier_score(Yte, marginals), error])
        arrays[f"{method}_count"] = curve.count.astype(np.int64)
        arrays[f"{method}_confidence"] = np.nan_to_num(curve.confidence)
        arrays[f"{method}_accuracy"] = np.nan_to_num(curve.accuracy)
    row = dict(config=config_hash(spec.config()), dataset=dataset, epsilon=epsilon,
               map_error=1.0 - float(model.score(Xte, Yte)), n_nodes=int(sum(len(y) for y in Yte)),
               fit_seconds=fit_seconds, marginal_seconds=float(sum(seconds)), **info.row_fields())
    return CellRecord(row=row, arrays=arrays)


def _method_rows(record: CellRecord) -> list[dict]:
    """A record's two rows, one per kind of marginals."""
    shared = {c: record.row[c] for c in COLUMNS if c in record.row}
    return [dict(shared, method=method, **dict(zip(_METRICS, map(float, record.arrays[f"{method}_metrics"]))))
            for method in METHODS]


def _bin_rows(record: CellRecord) -> list[dict]:
    """A record's reliability curves, one row per (kind, bin)."""
    row, arrays = record.row, record.arrays
    return [dict(config=row["config"], dataset=row["dataset"], epsilon=row["epsilon"], method=method, bin=b,
                 count=int(arrays[f"{method}_count"][b]), confidence=float(arrays[f"{method}_confidence"][b]),
                 accuracy=float(arrays[f"{method}_accuracy"][b]))
            for method in METHODS for b in range(len(arrays[f"{method}_count"]))]


NAME = "calibration"
TABLES = (Table("calibration_results.csv", COLUMNS, ("config", "dataset", "epsilon", "method"), _method_rows),
          Table("calibration_bins.csv", BIN_COLUMNS, ("config", "dataset", "epsilon", "method", "bin"), _bin_rows))


class Calibration(ExperimentBase):
    """Calibration of LP and exact node marginals as an :class:`slr.suite.experiment.Experiment`."""

    name = NAME
    record = RECORD
    help = "calibration of the smoothed LP's and the exact node marginals on letters and denoising"
    specs = SPECS
    tables = TABLES

    def cells(self, profile, selection, done, ctx: RunContext) -> list[Cell]:
        spec = self.spec(profile)
        return [cell(spec, dataset, float(eps)) for dataset in DATASETS for eps in spec.epsilons]

    def compute(self, spec: CalibrationSpec, cells: Sequence[Cell], info: RunInfo, *,
                n_threads: int | None) -> list[CellRecord]:
        return [compute_cell(spec, *c.args, info, n_threads) for c in cells]

    def describe(self, record: CellRecord) -> str:
        row, arrays = record.row, record.arrays
        scores = "  ".join(f"{method}: nll {arrays[f'{method}_metrics'][0]:.3f} "
                           f"ece {arrays[f'{method}_metrics'][1]:.3f}"
                           for method in METHODS)
        return (f"{row['dataset']} eps={row['epsilon']}: map error {row['map_error']:.3f}  "
                f"{scores} ({row['fit_seconds']:.1f}s)")
