"""``calibration.md`` and ``calibration.png``, drawn from the calibration CSVs of a report directory."""
from __future__ import annotations

from pathlib import Path

from slr.suite.calibration import DATASETS, METHODS, NAME, TABLES
from slr.suite.experiment import Profile
from slr.suite.figures import plt, save_fig
from slr.suite.markdown import provenance_block, table
from slr.suite.provenance import RunInfo, config_hash
from slr.suite.store import write_output

__all__ = ["write_report"]

_LABEL = {"lp": "smoothed LP", "exact": "exact (CRF)"}


def write_report(profile: Profile, out: Path, info: RunInfo, log, records: dict | None = None) -> dict:
    """Write ``out/calibration.md`` and ``out/calibration.png``; return headline numbers."""
    results_table, bins_table = (t.open(out, log) for t in TABLES)
    config = config_hash(profile.spec(NAME).config())
    results = results_table.frame(config=config)
    bins = bins_table.frame(config=config)
    results = results.assign(order=results["method"].map(METHODS.index)).sort_values(
        ["dataset", "epsilon", "order"]).reset_index(drop=True)

    epsilons = sorted(results["epsilon"].unique())
    fig, axes = plt().subplots(1, len(DATASETS), figsize=(4.2 * len(DATASETS), 3.8), squeeze=False)
    for ax, dataset in zip(axes[0], DATASETS):
        ax.plot([0, 1], [0, 1], color="k", lw=1, ls=":", label="calibrated")
        for eps in epsilons:
            for method, style in zip(METHODS, ("-", "--")):
                curve = bins[(bins["dataset"] == dataset) & (bins["epsilon"] == eps) & (bins["method"] == method)
                             & (bins["count"] > 0)]
                if len(curve):
                    ax.plot(curve["confidence"], curve["accuracy"], style, marker="o", ms=3,
                            label=f"{_LABEL[method]}, eps={eps:g}")
        ax.set_title(dataset)
        ax.set_xlabel("confidence (largest node marginal)")
        ax.set_ylabel("accuracy")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7)
    save_fig(fig, out / "calibration.png")

    rows = [[r.dataset, r.epsilon, _LABEL[r.method], r.nll, r.ece, r.brier, r.marginal_error, r.map_error]
            for r in results.itertuples()]
    best = {}
    for dataset, sub in results.groupby("dataset"):
        winner = sub.loc[sub["ece"].idxmin()]
        best[dataset] = f"{_LABEL[winner['method']]} at eps={winner['epsilon']:g} (ECE {winner['ece']:.3f})"
    text = [
        "# Calibration of node marginals: smoothed LP against exact\n\n",
        provenance_block(results, info),
        "\nA model per data set and eps: `Linear` oracles on both factors, ridge `l2 = eps / C` with the "
        "comparison's `C`, the library's other defaults. On its test examples, two kinds of node marginals "
        "at the fit's eps: the **smoothed LP's** (`predict_marginals(method=\"lp\")`, what the model is "
        "trained with; locally consistent pseudo-marginals, not those of a distribution) and the **exact** "
        "marginals of the CRF `p(y | x) ∝ exp(g(y))` (`method=\"exact\"`: sum-product on the letters' "
        "chains, elimination over windows on the denoising grids, whose images are kept narrow for it). "
        "Scores over all test nodes: NLL = mean `-log p(y_i)`, ECE = expected calibration error over "
        f"{int(profile.spec(NAME).n_bins)} equal-width confidence bins, Brier = mean `sum_a (p(a) - [a = y_i])^2`, "
        "marginal error = error of each node's most probable label, MAP error = error of the MAP labelling "
        "(`predict`).\n",
        "\nBest calibrated (lowest ECE): " + "; ".join(f"{d}: {w}" for d, w in sorted(best.items())) + ".\n",
        "\n![reliability diagrams](calibration.png)\n\n",
        table(["data set", "eps", "marginals", "NLL", "ECE", "Brier", "marginal error", "MAP error"], rows, digits=4),
        "\nRaw results: [calibration_results.csv](calibration_results.csv), reliability curves: "
        "[calibration_bins.csv](calibration_bins.csv)\n",
    ]
    write_output(out / "calibration.md", "".join(text))
    return dict(cells=len(results) // len(METHODS), best=best)
