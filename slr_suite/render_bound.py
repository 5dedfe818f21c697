"""``bound.md`` and ``bound.png``, drawn from ``bound_results.csv`` of a report directory."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from slr.suite.bound import NAME, TABLES, TOL
from slr.suite.experiment import Profile
from slr.suite.figures import plt, save_fig
from slr.suite.markdown import provenance_block, table
from slr.suite.provenance import RunInfo, config_hash
from slr.suite.store import write_output

__all__ = ["write_report"]


def write_report(profile: Profile, out: Path, info: RunInfo, log, records: dict | None = None) -> dict:
    """Write ``out/bound.md`` and ``out/bound.png`` from ``bound_results.csv``; return headline numbers
    (``records``, this run's cells, add nothing to the CSV)."""
    (results,) = (table.open(out, log) for table in TABLES)
    df = results.frame(config=config_hash(profile.spec(NAME).config()))
    df = df.sort_values(["graph", "eps"]).reset_index(drop=True)
    holds = df["holds"].astype(str) == "True"
    trees = df[df["kind"] == "tree"]
    tight = (trees["tree_tight"].astype(str) == "True").all() if len(trees) else True
    gap = (df["l"] - df["l1"]) / df["eps_hmax"]
    mp_err = float(np.max(np.abs(df["l_mp"] - df["l"]))) if len(df) else float("nan")
    loose = df.drop_duplicates("graph")
    n_loose = int(np.sum(loose["l1"] - loose["l0"] > TOL))

    fig, ax = plt().subplots(figsize=(5, 3.5))
    for kind, sub in df.assign(gap=gap).groupby("kind"):
        ax.scatter(sub["eps"], sub["gap"], label=kind, alpha=0.7)
    ax.axhline(1.0, color="k", ls="--", lw=1, label="upper bound (eps*Hmax)")
    ax.axhline(0.0, color="k", ls=":", lw=1, label="lower bound (l1)")
    ax.set_xscale("log")
    ax.set_xlabel("eps")
    ax.set_ylabel("(l - l1) / (eps * Hmax)")
    ax.set_title("Theorem 1.1: smoothing gap within [0, 1]")
    ax.legend(fontsize=7)
    save_fig(fig, out / "bound.png")

    rows = [[r.graph, r.kind, r.n, r.m, r.L, r.eps, r.l0, r.l1, r.l, r.l_mp, r.upper,
             str(r.holds) == "True"] for r in df.itertuples()]
    text = [
        "# Theorem 1.1 on random small graphs\n\n",
        provenance_block(df, info),
        "\nFor each graph, random potentials `F`, a random labelling `y` and the node Hamming loss "
        "`Delta`: `l0` = brute-force MAP loss, `l1` = LP relaxation (HiGHS), `l` = smoothed LP "
        "(Clarabel), `l_mp` = slr's star-update message passing on the same smoothed problem, "
        "`upper = l1 + eps * Hmax`. The theorem: `l0 <= l1 <= l <= l1 + eps * Hmax`, with "
        "`l0 = l1` on trees.\n",
        f"\n**Bound holds in {int(holds.sum())} / {len(df)} cells**; `l0 = l1` on every tree: "
        f"{'yes' if tight else '**no**'}; LP strictly looser than MAP (`l1 > l0`) on {n_loose} of "
        f"{len(loose)} graphs; largest |l_mp - l| = {mp_err:.2e}; "
        f"(l - l1)/(eps*Hmax) ranges over [{gap.min():.3f}, {gap.max():.3f}].\n",
        "\n![smoothing gap](bound.png)\n\n",
        table(["graph", "kind", "n", "m", "L", "eps", "l0", "l1", "l", "l_mp", "l1+eps*Hmax", "holds"],
              rows, digits=4),
        "\nRaw results: [bound_results.csv](bound_results.csv)\n",
    ]
    write_output(out / "bound.md", "".join(text))
    return dict(cells=len(df), holds=int(holds.sum()), tree_tight=bool(tight), loose=n_loose,
                graphs=len(loose), mp_err=mp_err)
