"""``baselines.md`` and ``baselines_time.png``, drawn from the baselines CSVs of a report directory."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from dataclasses import asdict

from slr.suite import baselines, tuning
from slr.suite.figures import plt, save_fig
from slr.suite.markdown import fmt, provenance_block, table
from slr.suite.methods import (CRFSUITE_METHOD, DATASETS, EPSILON, RIDGED, SMOOTHED, BaselinesSpec, crfsuite_c2,
                               default_regularisation, grid, methods_of, tuned)
from slr.suite.experiment import Profile
from slr.suite.provenance import RunInfo, config_hash
from slr.suite.store import write_output

__all__ = ["write_report", "time_to_target"]


#: tab20's colours, the ten dark ones first (tab10's hues), then their light twins; markers cycle
#: beside them, so that no two of up to 20 series share a colour and neighbours differ in both.
_COLOURS = [*range(0, 20, 2), *range(1, 20, 2)]
_MARKERS = "osD^v<>phX*d"


def _series_style(k: int) -> dict:
    """Colour and marker of a figure's ``k``-th series."""
    return dict(color=plt().get_cmap("tab20")(_COLOURS[k % 20]), marker=_MARKERS[k % len(_MARKERS)])


def _legend_beside(ax) -> None:
    """The legend right of the axes (it covers no curve), where something labelled was drawn."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def time_to_target(seconds: np.ndarray, errors: np.ndarray, target: float) -> float:
    """First time at which the test-error curve is at or below ``target`` (NaN if never)."""
    hit = np.flatnonzero(np.asarray(errors) <= target + 1e-12)
    return float(np.asarray(seconds)[hit[0]]) if hit.size else float("nan")


def write_report(profile: Profile, out: Path, info: RunInfo, log, records: dict | None = None) -> dict:
    """Write ``baselines.md`` and ``baselines_time.png`` from the CSVs in ``out``; return headline
    numbers (``records``, this run's cells, add nothing to the CSVs)."""
    spec = profile.spec(baselines.NAME)
    results, curves_table = (t.open(out, log) for t in baselines.TABLES)
    (tuning_table,) = (t.open(out, log) for t in tuning.TABLES)
    config = config_hash(spec.config())
    df = results.frame(config=config)
    curves = curves_table.frame(config=config)
    tuning_rows = _current_tuning_rows(spec, tuning_table.frame(config=config))
    chosen = _chosen(spec, tuning_rows)
    used = _regularisation_used(df, chosen)
    text = [
        "# Baselines: slr against structured SVMs, perceptron, piecewise training, pystruct and CRFsuite\n\n",
        provenance_block(df, info),
        "\nPer-node error rates of MAP predictions. Our baselines and slr:Linear share the same linear "
        "joint feature map (unary: node features x states; pairwise: edge features x state pairs) "
        "and the same inference (Viterbi on chains, LP star updates on grids). `pystruct:*` rows "
        "run pystruct 0.3.2 in its own Python 3.6 environment (ChainCRF for letters, "
        "EdgeFeatureGraphCRF with AD3 inference for denoising and snakes) with the iteration budget of our "
        "learner of the same name (both FrankWolfeSSVMs get SubgradientSSVM's) and their own C, chosen the same "
        "way as ours; the iterations column shows max_iter for them, "
        "their own stopping rules may end earlier (the cutting-plane SSVMs': the iterations they ran)."
        f"{_peer_params_text(spec)}{_own_params_text(spec)}\n\n"
        "*Stopped*: why a learner with a stopping test ended, `tol` (its tolerance) or `max_iter` (its "
        "budget), and its certified *gap*: the primal `0.5 ||w||^2 + C sum slack` of the returned weights "
        "minus a lower bound on the optimum (the cutting-plane SSVMs' best working-set QP objective, "
        "pystruct's last one; FrankWolfeSSVM's dual), so that the returned primal is within the gap of the "
        "optimum where inference is exact (on letters' chains; on grids the loss-augmented labellings come "
        "from the LP and the primal is a lower bound). A cutting-plane fit stopped by `tol` has a gap of at "
        "most about `C n tol` (n examples).\n\n"
        f"*Regularisation*: {_regularisation_text(spec)} A C is the same ridge on the weights of the "
        "potentials for every method: `0.5 ||w||^2 + C sum slack` for the SSVMs, `l2 = eps / C` on slr's "
        "Linear oracles (slr's objective is `eps` times their logistic losses), `l2 = 1 / C` for "
        "GradientAlternation and for PiecewiseTraining's Linear oracles, `c2 = 1 / (2 C)` for CRFsuite. "
        "SubgradientSSVM takes online steps (batch size 1); FrankWolfeSSVM one block-coordinate Frank-Wolfe "
        "step per example with line search on the dual, returning the weighted average, and stops at a "
        "duality gap of 1e-3 C per example.\n"
        f"{_slr_solver_text(spec)}{_crfsuite_text(spec, used)}{_slr_cells_text(spec)}\n"
        f"*Sizes*: denoising {asdict(spec.denoise)}, letters {asdict(spec.letters)} "
        f"(train words drawn at random from fold 1, test words from the other folds){_snakes_text(spec)}; "
        f"iterations per baseline {dict(spec.max_iter)}{_budgets_text(spec)}.{_skipped(spec)}\n",
        "\n*Time to target*: the target is 1.1 x the best final test error on that data set, read off "
        "each learner's per-iteration test-error curve against its cumulative fit time (the time "
        "spent measuring the test error excluded, the same clock for slr and every baseline; the "
        "seconds column is the same clock at the last iteration); pystruct rows have only their "
        "final point (pystruct's own fit time).\n",
    ]
    skipped = df[df["status"].astype(str).str.startswith("skipped")]
    for reason, rows in skipped.groupby("status"):
        text.append(f"\n*Not run on the machine that computed them*: {', '.join(sorted(set(rows['method'])))} "
                    f"({reason.split(': ', 1)[-1]}).\n")
    summary: dict = {}
    present = [d for d in spec.datasets() if (df["dataset"] == d).any()] or list(DATASETS[:1])
    fig, axes = plt().subplots(1, len(present), figsize=(7.5 * len(present), 4), squeeze=False,
                              layout="constrained")
    for ax, dataset in zip(axes[0], present):
        sub = _in_method_order(df[df["dataset"] == dataset], spec, dataset)
        if not len(sub):
            continue
        ok = sub[sub["status"] == "ok"].copy()
        ok["test_error"] = ok["test_error"].astype(float)
        target = 1.1 * float(ok["test_error"].min()) if len(ok) else float("nan")
        rows = []
        fastest: tuple[float, str] | None = None   # (seconds to target, method)
        for k, r in enumerate(sub.itertuples()):
            ttt = float("nan")
            curve = curves[(curves["dataset"] == dataset) & (curves["method"] == r.method)].sort_values("point")
            if len(curve) and r.status == "ok":
                ttt = time_to_target(curve["seconds"].to_numpy(), curve["test_error"].to_numpy(), target)
                ax.plot(curve["seconds"], curve["test_error"], ls="-" if len(curve) > 1 else "none",
                        label=r.method, ms=4, **_series_style(k))
            if not np.isnan(ttt) and (fastest is None or ttt < fastest[0]):
                fastest = (float(ttt), r.method)
            reached = "not reached" if r.status == "ok" and np.isnan(ttt) else fmt(ttt, 2)
            reg = used.get((dataset, r.method)) if r.status == "ok" else None
            rows.append([r.group, r.method, _reg_text(r.method, reg), _num(r.train_error),
                         _num(r.test_error), fmt(_num(r.seconds), 2), reached, r.iterations,
                         _text(getattr(r, "stopped", "")), _gap_text(getattr(r, "gap", "")), r.status])
        ax.axhline(target, color="k", ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("seconds")
        ax.set_ylabel("test error")
        ax.set_title(dataset)
        _legend_beside(ax)
        text += [f"\n## {dataset}\n\nTarget test error: {target:.3f}\n\n",
                 table(["group", "method", "regularisation", "train error", "test error", "seconds",
                        "time to target (s)", "iterations", "stopped", "gap", "status"], rows)]
        text += _tuning_section(spec, dataset, tuning_rows, chosen, out)
        if len(ok):
            best = ok.sort_values("test_error").iloc[0]
            summary[dataset] = dict(best=best["method"], best_test=float(best["test_error"]), target=target,
                                    fastest=None if fastest is None else fastest[1],
                                    fastest_seconds=None if fastest is None else fastest[0])
    save_fig(fig, out / "baselines_time.png")
    text += ["\n## Test error against wall time\n\n![test error vs time](baselines_time.png)\n",
             "\nRaw results: [baselines_results.csv](baselines_results.csv) (one row per cell, with the run "
             "that computed it), [baselines_curves.csv](baselines_curves.csv) (test error against time).\n"]
    write_output(out / "baselines.md", "".join(text))
    summary["cells"] = len(df)
    summary["fit_seconds"] = float(np.nansum([_num(v) for v in df["seconds"]]))
    return summary


def _in_method_order(rows, spec: BaselinesSpec, dataset: str):
    """``rows`` in the order the profile lists the methods (slr, our baselines, pystruct,
    CRFsuite), whatever order the cells finished in; methods it no longer runs last."""
    order = {method: i for i, (_, method) in enumerate(methods_of(dataset, spec))}
    rank = rows["method"].map(lambda m: order.get(m, len(order)))
    return rows.iloc[np.argsort(rank.to_numpy(), kind="stable")]


def _crfsuite_text(spec: BaselinesSpec, used: dict) -> str:
    """What the ``crfsuite:`` rows are and how their L2 follows from C."""
    crfsuite = spec.crfsuite
    if not crfsuite:
        return ""
    settings = "".join(f", {_kw(kw)} on {d}" for d, kw in crfsuite.items() if kw)
    c2 = ", ".join(f"c2 = {crfsuite_c2(used.get((d, CRFSUITE_METHOD), default_regularisation(d))['C']):g} on {d}"
                   for d in crfsuite)
    return ("\n*CRFsuite*: the `crfsuite:lbfgs` row is python-crfsuite's linear-chain CRF trained by "
            "CRFsuite's L-BFGS on the same pixel features and split, every (feature, state) and "
            "(state, state) weight generated (our linear model exactly), to CRFsuite's own stopping rule "
            f"(relative objective change below 1e-5 over 10 iterations{settings}). Its objective is the "
            "negative log-likelihood "
            "plus `c2 ||w||^2`; the same ridge as the SSVMs' `0.5 ||w||^2 + C sum slack` divided by C "
            f"is `c2 = 1 / (2 C)`: {c2}. Its seconds are CRFsuite's training call (1 thread).{_chain_only(spec)}\n")


def _chain_only(spec: BaselinesSpec) -> str:
    """The data sets CRFsuite does not apply to (its CRF is a linear chain)."""
    grids = [dataset for dataset in spec.datasets() if dataset not in spec.crfsuite]
    return f" Not applicable on {' and '.join(grids)} (grids; CRFsuite's CRF is a linear chain)." if grids else ""


def _current_tuning_rows(spec: BaselinesSpec, rows):
    """The tuning rows of the profile's current grids (a report directory may hold rows of
    earlier grids under the same config: the grids are not part of it)."""
    keep = [tuned(spec, r.dataset, r.method)
            and dict(C=float(r.C), epsilon=float(r.epsilon)) in grid(spec, r.dataset, r.method)
            for r in rows.itertuples()]
    return rows[np.asarray(keep, dtype=bool)] if len(rows) else rows


def _chosen(spec: BaselinesSpec, tuning_rows) -> dict:
    """``{(data set, method): {"C", "epsilon"}}`` that the tuning rows choose (the rule of
    :func:`slr.suite.tuning.choose`); methods whose every fit failed are left out."""
    chosen = {}
    for (dataset, method), rows in tuning_rows.groupby(["dataset", "method"]):
        reg = tuning.choose(grid(spec, dataset, method), rows.to_dict("records"))
        if reg is not None:
            chosen[dataset, method] = reg
    return chosen


def _regularisation_used(df, chosen: dict) -> dict:
    """``{(data set, method): {"C", "epsilon"}}`` each test row was fitted with: its own ``C`` and
    ``epsilon`` columns; for rows written before those were recorded, the tuning's choice where
    the data set was tuned (same run), else the data set's default."""
    used = {}
    for r in df.itertuples():
        C, eps = _num(getattr(r, "C", "")), _num(getattr(r, "epsilon", ""))
        if np.isfinite(C) and np.isfinite(eps):
            used[r.dataset, r.method] = dict(C=C, epsilon=eps)
        else:
            used[r.dataset, r.method] = chosen.get((r.dataset, r.method), default_regularisation(r.dataset))
    return used


def _regularisation_text(spec: BaselinesSpec) -> str:
    """Where C was chosen by validation and where it is the converted default."""
    parts = []
    for dataset in spec.datasets():
        grids = spec.tune.get(dataset)
        if grids:
            parts.append(f"on {dataset} the C of each method with a ridge is chosen on a validation split of "
                         "the training examples (a seeded random fifth held out) from C in "
                         f"{_values(grids.C)}{_C_of_text(grids)}, and the eps of slr:Linear and "
                         "GradientAlternation from "
                         f"{_values(grids.epsilon)}, each fit "
                         "with the method's own iteration budget (slr's rows: as in the test fit, until the "
                         "stopping rule ends it); the lowest final validation error wins "
                         "(section below)")
        else:
            parts.append(f"on {dataset} every method takes C = {default_regularisation(dataset)['C']:g}, "
                         f"eps = {EPSILON:g} (not tuned; {_UNTUNED_WHY[dataset]})")
    text = "; ".join(parts)
    return text[:1].upper() + text[1:] + "."


#: Why a data set's regularisation is not tuned where a profile does not tune it.
_UNTUNED_WHY = {"denoising": "docs/design.md section 6 says why", "letters": "docs/design.md section 6 says why",
                "snakes": "pystruct's example's C"}


def _C_of_text(grids) -> str:
    """The methods that try only part of the C grid, and which part."""
    parts = [f"{method} from {_values(Cs)}" for method, Cs in grids.C_of.items()]
    return f" ({', '.join(parts)}: the costliest fits skip values that did not change their choice)" if parts else ""


def _values(values) -> str:
    return "{" + ", ".join(f"{v:g}" for v in values) + "}"


def _reg_text(method: str, reg: dict | None) -> str:
    """``C=..`` (and ``eps=..`` for the smoothed methods) of a method with a ridge; "" for the
    others, "—" for a row that did not run."""
    if reg is None:
        return "—"
    if method not in RIDGED:
        return ""
    return f"C={reg['C']:g}" + (f", eps={reg['epsilon']:g}" if method in SMOOTHED else "")


def _tuning_section(spec: BaselinesSpec, dataset: str, tuning_rows, chosen: dict, out: Path) -> list[str]:
    """The validation errors of every grid value, the values chosen, and their plot."""
    rows_here = tuning_rows[tuning_rows["dataset"] == dataset]
    if not len(rows_here):
        return []
    Cs = list(spec.tune[dataset].C)
    header = ["method", "eps"] + [f"C={C:g}" for C in Cs] + ["chosen", "validation fits (s)"]
    body = []
    fig, ax = plt().subplots(figsize=(8, 4), layout="constrained")
    series = 0
    for method, rows in rows_here.groupby("method", sort=False):
        n_grid = len(grid(spec, dataset, method))
        failed = n_grid - int((rows["status"] == "ok").sum())
        reg = chosen.get((dataset, method))
        verdict = "none: the default C is kept" if reg is None else _reg_text(method, reg)
        if failed:
            verdict += f" ({failed} of {n_grid} fits failed or missing)"
        for eps, sub in rows.groupby("epsilon", sort=True):
            sub = sub[sub["status"] == "ok"]
            errors = {float(C): float(e) for C, e in zip(sub["C"], sub["val_error"])}
            smoothed = method in SMOOTHED
            label = f"{method} (eps {float(eps):g})" if smoothed else method
            body.append([method, f"{float(eps):g}" if smoothed else "",
                         *[errors.get(float(C), float("nan")) for C in Cs],
                         verdict, fmt(_num(sub["seconds"].astype(float).sum()), 1)])
            xs = [C for C in Cs if float(C) in errors]
            ax.plot(xs, [errors[float(C)] for C in xs], ls="-", ms=3, label=label, **_series_style(series))
            series += 1
    ax.set_xscale("log")
    ax.set_xlabel("C")
    ax.set_ylabel("validation error")
    ax.set_title(f"{dataset}: validation error against C")
    _legend_beside(ax)
    name = f"baselines_tuning_{dataset}.png"
    save_fig(fig, out / name)
    return [f"\n### {dataset}: regularisation chosen on a validation split\n\n"
            "Validation error (per node, MAP) after each method's full iteration budget on four fifths of "
            "the training examples, for every value of the grid; the test row above uses the chosen value. "
            "Raw rows: [tuning_results.csv](tuning_results.csv).\n\n",
            table(header, body), f"\n![validation error against C]({name})\n"]


def _slr_solver_text(spec: BaselinesSpec) -> str:
    """How every slr row is fitted: the library's defaults, only the model set here."""
    cap = ("the library's cap" if spec.slr_max_iter is None
           else f"a cap of {spec.slr_max_iter} iterations in this profile")
    return ("\n*slr's solver*: every slr row runs `StructuredLogisticRegression` with the library's defaults "
            "(the stopping rule on the objective, `tol`, with " + cap + "; progress-based sweeps; over-relaxed "
            "steps; `solver=\"auto\"`, the joint L-BFGS solver for Linear oracles and Algorithm 1.1 for the "
            "others; `early_stopping=\"auto\"`: for MLP, which memorises the training examples, early "
            "stopping on a tenth of them held out where there are at least 20), fitted on the "
            "training examples alone, its test curve recorded by `fit`'s callback (the test examples choose "
            "nothing); only its model is set here: its oracles, their ridge and eps. Its iterations column is the "
            "iterations the rules let it run (docs/design.md, sections 1 and 6)." + _slr_validated_text(spec) + "\n")


def _slr_validated_text(spec: BaselinesSpec) -> str:
    """The rows whose iteration count a data set chooses on held-out examples, if any."""
    parts = [f"{method} on {dataset}" for dataset, methods in spec.slr_validated.items()
             if dataset in spec.datasets() for method in methods]
    if not parts:
        return ""
    return (" Iteration count chosen on validation examples, because the rule does not stop these rows "
            "before they overfit (their test error rises while R still falls) and their data sets have too "
            "few examples for early stopping to hold some out: " + "; ".join(parts) + ". A fit on four "
            "fifths of the training examples, the other fifth its validation examples, keeps the iteration "
            "with the lowest validation error; the row refits all training examples with that many iterations "
            "as its cap (the validation fit's time, like the ridge choices', is not in the row's).")


def _slr_cells_text(spec: BaselinesSpec) -> str:
    """The function classes of the nonlinear slr rows."""
    parts = []
    for dataset, methods in spec.slr_cells.items():
        for method, own in methods.items():
            unary, pairwise = own.unary, own.pairwise
            eps = EPSILON if own.epsilon is None else own.epsilon
            parts.append(f"`{method}` on {dataset}: unary {unary.name}({_kw(unary.keywords)}), pairwise "
                         f"{pairwise.name}({_kw(pairwise.keywords)}), eps = {eps}")
    if not parts:
        return ""
    return ("\n*Nonlinear slr rows* (settings chosen on a validation split of the training words only, "
            "docs/design.md, section 6): " + "; ".join(parts) + ".\n")


def _snakes_text(spec: BaselinesSpec) -> str:
    """The snakes' part of the sizes sentence."""
    if spec.snakes is None:
        return ""
    data = spec.snakes
    images = ", ".join(f"{'all' if n is None else f'the first {n}'} {split} images"
                       for n, split in ((data.n_train, "training"), (data.n_test, "test")))
    return (f", snakes {images} of pystruct's split (200 / 100), 11 states, the 3x3-neighbourhood node and "
            "edge features of pystruct's example (180 edge columns, apart for horizontal and vertical edges)"
            + (", each image cut to its snake's bounding box (only background cells go)" if data.crop else ""))


def _budgets_text(spec: BaselinesSpec) -> str:
    """The iteration budgets that a data set sets for itself."""
    parts = [f"on {dataset} {_kw(budget)}" for dataset, budget in spec.budgets.items() if budget]
    return f" ({'; '.join(parts)})" if parts else ""


def _peer_params_text(spec: BaselinesSpec) -> str:
    """The further keywords pystruct's learners take on a data set."""
    parts = [f"pystruct:{learner} on {dataset} takes {_kw(keywords)}"
             for dataset, learners in spec.peer_params.items() for learner, keywords in learners.items()
             if dataset in spec.datasets() and learner in spec.peer.get(dataset, ())]
    return (" " + "; ".join(parts) + " (the settings of pystruct's own examples for such problems).") if parts else ""


def _own_params_text(spec: BaselinesSpec) -> str:
    """The further keywords our baselines take on a data set."""
    parts = [f"Our {learner} on {dataset} takes {_kw(keywords)}"
             for dataset, learners in spec.params.items() for learner, keywords in learners.items()
             if dataset in spec.datasets()]
    return (" " + "; ".join(parts) + " (as pystruct's learner of that name there).") if parts else ""


def _text(value) -> str:
    """A CSV cell as text: empty for a missing value."""
    return "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def _gap_text(value) -> str:
    """A certified gap, blank where the learner has none."""
    gap = _num(value)
    return "" if np.isnan(gap) else fmt(gap, 3)


def _kw(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _skipped(spec: BaselinesSpec) -> str:
    """The sentence naming the methods this profile does not run, if any."""
    skip = {dataset: methods for dataset, methods in spec.skip.items() if methods}
    if not skip:
        return ""
    parts = "; ".join(f"{', '.join(methods)} on {dataset}" for dataset, methods in skip.items())
    reason = spec.skip_reason
    return f" Not run in this profile: {parts}" + (f" ({reason})." if reason else ".")


def _num(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")
