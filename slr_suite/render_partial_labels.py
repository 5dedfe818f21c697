"""``partial_labels.md`` and ``partial_labels.png``, drawn from ``partial_labels_results.csv``."""
from __future__ import annotations

from pathlib import Path

from slr.suite.experiment import Profile
from slr.suite.figures import plt, save_fig
from slr.suite.markdown import provenance_block, table
from slr.suite.partial_labels import DATASETS, EPSILON, NAME, TABLES
from slr.suite.provenance import RunInfo, config_hash
from slr.suite.store import write_output

__all__ = ["write_report"]


def write_report(profile: Profile, out: Path, info: RunInfo, log, records: dict | None = None) -> dict:
    """Write ``out/partial_labels.md`` and ``out/partial_labels.png``; return headline numbers."""
    (results_table,) = (t.open(out, log) for t in TABLES)
    spec = profile.spec(NAME)
    results = results_table.frame(config=config_hash(spec.config()))

    fig, axes = plt().subplots(1, len(DATASETS), figsize=(4.2 * len(DATASETS), 3.4), squeeze=False)
    rows, wins, shares = [], 0, 0
    for ax, dataset in zip(axes[0], DATASETS):
        sub = results[results["dataset"] == dataset]
        full = sub[sub["method"] == "full"]["test_error"]
        if len(full):
            ax.axhline(float(full.iloc[0]), color="k", ls=":", lw=1, label="full labels")
            rows.append([dataset, "0%", float(full.iloc[0]), "", ""])
        for method, marker in (("drop", "s"), ("latent", "o")):
            curve = sub[sub["method"] == method].sort_values("hidden")
            ax.plot(curve["hidden"], curve["test_error"], marker=marker, label=method)
        for hidden in sorted(sub[sub["method"] != "full"]["hidden"].unique()):
            pair = sub[sub["hidden"] == hidden].set_index("method")["test_error"]
            if {"drop", "latent"} <= set(pair.index):
                shares += 1
                wins += int(pair["latent"] < pair["drop"])
                rows.append([dataset, f"{hidden:.0%}", "", float(pair["drop"]), float(pair["latent"])])
        ax.set_title(dataset)
        ax.set_xlabel("share of training labels hidden")
        ax.set_ylabel("test error")
        ax.legend(fontsize=7)
    save_fig(fig, out / "partial_labels.png")

    text = [
        "# Partial labels: hidden training labels, dropped or latent\n\n",
        provenance_block(results, info),
        "\nOn each data set a share of the training nodes' labels is hidden (per node, seeded; the same "
        "nodes for both methods). `slr:Linear` (Linear oracles on both factors, `l2 = eps / C` with the "
        f"comparison's C, eps = {EPSILON:g}) is fitted on all labels (*full*), on the labelled subgraphs "
        "only (*drop*: the unlabelled nodes and their edges removed) and on every node with the unlabelled "
        "ones as latent variables (*latent*: label -1, CCCP with the clamped LP's marginals as soft "
        f"targets, `docs/design.md` section 1). Every fit runs {spec.max_iter} iterations (equal work); "
        "the test examples are fully labelled.\n",
        f"\nLatent learning has the lower test error than dropping in {wins} of {shares} (data set, share) "
        "cells.\n",
        "\n![test error against the share hidden](partial_labels.png)\n\n",
        table(["data set", "hidden", "full labels", "drop", "latent"], rows, digits=4),
        "\nRaw results: [partial_labels_results.csv](partial_labels_results.csv)\n",
    ]
    write_output(out / "partial_labels.md", "".join(text))
    return dict(cells=len(results), wins=wins, shares=shares)
