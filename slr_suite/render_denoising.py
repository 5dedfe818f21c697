"""``denoising.md`` and its figures, drawn from the denoising CSVs of a report directory."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from slr.suite.figures import plt, save_fig
from slr.suite.denoising import NAME, SHOWCASE, TABLES, DenoisingSpec
from slr.suite.experiment import Profile
from slr.suite.markdown import fmt, provenance_block, table
from slr.suite.provenance import RunInfo, config_hash
from slr.suite.store import write_output

__all__ = ["write_report", "PAPER_TEST_ERROR", "far_from_paper"]

#: NIPS 2013 Table 1 (denoising, test error), rows = unary class, columns = pairwise class.
#:
#: The PDF's text layer lists the table as five column blocks, none labelled:
#: B1 .502/.502/.034/.007/.008, B2 .502/.502/.059/.015/.015, B3 .502/.502/.444/.444/.445,
#: B4 .502/.502/.077/.034/.032, B5 .511/.510/.049/.009/.009 (rows Zero, Constant, Linear,
#: Boost, MLP). They are placed as follows.
#: - B3 is pairwise Zero: .444 is the one-pixel Bayes error of the unary-only models.
#: - B4 is pairwise Constant: the worst structured column (Linear pairwise contains Constant).
#: - B1 is pairwise MLP: it is the only block that shares a text box with the header line, and
#:   pdfminer joins a box to the header only when it is aligned with the header's end, the
#:   rightmost column.
#: - B5 is pairwise Boost: its zero/constant-unary entries (.511/.510) are the only ones off
#:   .502, and our runs show the same anomaly only in the Boost pairwise column (pairwise trees
#:   without unary information overfit whole blobs: Zero/Boost train error .30, test .47-.48).
#: - B2 is then pairwise Linear.
PAPER_TEST_ERROR = {
    "Zero": {"Zero": .502, "Constant": .502, "Linear": .502, "Boost": .511, "MLP": .502},
    "Constant": {"Zero": .502, "Constant": .502, "Linear": .502, "Boost": .510, "MLP": .502},
    "Linear": {"Zero": .444, "Constant": .077, "Linear": .059, "Boost": .049, "MLP": .034},
    "Boost": {"Zero": .444, "Constant": .034, "Linear": .015, "Boost": .009, "MLP": .007},
    "MLP": {"Zero": .445, "Constant": .032, "Linear": .015, "Boost": .009, "MLP": .008},
}
#: A cell "differs from the paper" when its test error is this far from the paper's, or more.
PAPER_TOLERANCE = 0.01
#: The unary feature is U[0, .9] for label 0 and U[.1, 1] for label 1: on [.1, .9], 8/9 of each
#: label's mass, it carries no information (see docs/design.md, the denoising protocol).
_OVERLAP = 8.0 / 9.0


def far_from_paper(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``df`` whose test error is more than :data:`PAPER_TOLERANCE` from the paper's."""
    paper = np.array([PAPER_TEST_ERROR[u][p] for u, p in zip(df["unary"], df["pairwise"])], dtype=float)
    diff = df["test_error"].to_numpy(dtype=float) - paper
    return df.assign(paper=paper, diff=diff)[np.abs(diff) > PAPER_TOLERANCE + 1e-12]


def _paper_size(cfg: DenoisingSpec) -> bool:
    """True when ``cfg`` is the paper's configuration (16 + 16 images of 100 x 100, 25 iterations, 200 rounds)."""
    return (cfg.data.n_train, cfg.data.n_test, cfg.data.size, cfg.n_iter, cfg.trees.get("n_rounds")) == \
        (16, 16, 100, 25, 200)


def _label_shares(cfg: DenoisingSpec) -> tuple[float, float]:
    """Share of label 1 among the train and the test pixels."""
    _, Ytr, _, Yte = cfg.data.load()
    return float(np.mean(np.concatenate(Ytr))), float(np.mean(np.concatenate(Yte)))


def _tail_drop(history: pd.DataFrame, u: str, p: str, window: int = 5) -> float | None:
    """How much the test error fell over the last ``window`` iterations (None without a curve)."""
    curve = history[(history["unary"] == u) & (history["pairwise"] == p)].sort_values("iteration")
    values = curve["val_error"].to_numpy(dtype=float)
    values = values[~np.isnan(values)]
    if values.size <= window:
        return None
    return float(values[-window - 1] - values[-1])


def _why(row, history: pd.DataFrame, shares: tuple[float, float]) -> str:
    """The measured reason a cell is far from the paper, as one sentence."""
    train_share, test_share = shares
    if row.unary in ("Zero", "Constant"):
        constant = {1 - test_share: 1, test_share: 0}
        hit = [label for error, label in constant.items() if abs(row.test_error - error) < 0.002]
        both = f"{min(test_share, 1 - test_share):.3f} / {max(test_share, 1 - test_share):.3f}"
        if hit:
            return (f"no unary information: the model predicts label {hit[0]} everywhere (its error equals "
                    f"the test share of label {1 - hit[0]}; the test images hold {test_share:.1%} label 1), "
                    "where the paper's test images were near balance (.502).")
        return (f"no unary information: the error lies near the two constant predictions ({both}); "
                f"train error {row.train_error:.3f}"
                + (" (pairwise trees overfit whole blobs)." if row.pairwise == "Boost" else "."))
    if row.pairwise == "Zero":
        majority = 1 if train_share >= 0.5 else 0
        minority = 1 - test_share if majority == 1 else test_share
        return (f"unary only: on the uninformative overlap a threshold rule errs on {_OVERLAP / 2:.3f} of "
                f"the pixels whatever the balance, a model of the flat posterior predicts the training "
                f"majority (label {majority}) and errs on {_OVERLAP:.3f} x {minority:.3f} = "
                f"{_OVERLAP * minority:.3f} of these test images ({test_share:.1%} label 1).")
    if row.diff < 0:
        return ("lower than the paper's: our test images are another draw of the same protocol; "
                "not explained further here.")
    drop = _tail_drop(history, row.unary, row.pairwise)
    if drop is not None and drop > 0.002:
        return (f"still learning: the test error fell by {drop:.3f} over the last 5 of "
                f"{int(row.n_iter)} iterations (the paper ran 25; the budget of each oracle fit sets the pace).")
    return "the test error has levelled off (within .002 over the last 5 iterations): not explained here."


def _plot_curves(out: Path, classes, history: pd.DataFrame) -> None:
    k = len(classes)
    pyplot = plt()
    fig, axes = pyplot.subplots(k, k, figsize=(2.2 * k, 1.9 * k), sharex=True, sharey=True, squeeze=False)
    for r, u in enumerate(classes):
        for c, p in enumerate(classes):
            ax = axes[r][c]
            curve = history[(history["unary"] == u) & (history["pairwise"] == p)].sort_values("iteration")
            if len(curve):
                ax.plot(curve["iteration"], curve["train_error"], "b--", lw=1.2, label="train")
                ax.plot(curve["iteration"], curve["val_error"], "b-", lw=1.2, label="test")
            ax.set_ylim(0, 0.55)
            if r == 0:
                ax.set_title(f"pairwise {p}", fontsize=8)
            if c == 0:
                ax.set_ylabel(f"unary {u}\nerror", fontsize=8)
            if r == k - 1:
                ax.set_xlabel("iteration", fontsize=8)
            ax.tick_params(labelsize=7)
    _legend(axes[0][0])
    fig.suptitle("Denoising: train (dashed) and test (solid) error per learning iteration", fontsize=9)
    save_fig(fig, out / "denoising_curves.png")


def _legend(ax) -> None:
    """A small legend, only where something labelled was drawn (cells may be missing)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6)


def _plot_energies(out: Path, classes, energies: pd.DataFrame) -> None:
    show = [c for c in SHOWCASE if c in classes]
    pyplot = plt()
    fig, axes = pyplot.subplots(2, len(show), figsize=(3.2 * len(show), 5), squeeze=False)
    for c, name in enumerate(show):
        cell = energies[(energies["unary"] == name) & (energies["pairwise"] == name)]
        for r, role in enumerate(("unary", "pairwise")):
            ax = axes[r][c]
            part = cell[cell["role"] == role]
            n_states = part["state"].nunique()
            L = int(round(np.sqrt(n_states))) if role == "pairwise" else n_states
            for state, curve in part.groupby("state"):
                label = f"y_i={state}" if role == "unary" else f"y_ij=({state // L},{state % L})"
                ax.plot(curve["phi"], curve["f"], label=label)
            ax.set_xlabel("phi_i" if role == "unary" else "phi_ij", fontsize=8)
            _legend(ax)
        axes[0][c].set_title(name, fontsize=9)
    axes[0][0].set_ylabel("f_i (unary energy)", fontsize=8)
    axes[1][0].set_ylabel("f_ij (pairwise energy)", fontsize=8)
    fig.suptitle("Learned energy functions against the input feature (unary and pairwise of the same class)",
                 fontsize=9)
    save_fig(fig, out / "denoising_energies.png")


def _plot_examples(out: Path, records: dict) -> bool:
    """Example predictions of the showcase cells of this run; False (nothing drawn) without them."""
    by_cell = {(record.row["unary"], record.row["pairwise"]): record.arrays for record in records.values()}
    cells = [(name, by_cell[(name, name)]) for name in SHOWCASE
             if (name, name) in by_cell and "example_pred" in by_cell[(name, name)]]
    if not cells:
        return False
    pyplot = plt()
    fig, axes = pyplot.subplots(1, 2 + len(cells), figsize=(2.4 * (2 + len(cells)), 2.6), squeeze=False)
    axes = axes[0]
    first = cells[0][1]
    axes[0].imshow(first["example_input"], cmap="gray", vmin=0, vmax=1)
    axes[0].set_title("input phi_i", fontsize=8)
    axes[1].imshow(first["example_truth"], cmap="gray", vmin=0, vmax=1)
    axes[1].set_title("true", fontsize=8)
    for ax, (name, cell) in zip(axes[2:], cells):
        err = float(np.mean(cell["example_pred"] != cell["example_truth"]))
        ax.imshow(cell["example_pred"], cmap="gray", vmin=0, vmax=1)
        ax.set_title(f"{name} (err {err:.3f})", fontsize=8)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle("Example predictions on a test image", fontsize=9)
    save_fig(fig, out / "denoising_examples.png")
    return True


def _beside_section(cfg: DenoisingSpec, lookup: dict, beside: pd.DataFrame) -> list[str]:
    """Table 1's ``Boost`` (the NIPS paper's per-class trees) beside the chapter's protocol."""
    if not len(beside):
        return []
    rows = []
    ours = lookup.get(("Boost", "Boost"))
    for r in beside.itertuples():
        rows.append([f"{r.unary}/{r.pairwise}", fmt(r.test_error, 3), fmt(r.train_error, 3), fmt(r.seconds, 1),
                     fmt(ours.test_error, 3) if ours is not None else "—",
                     fmt(ours.seconds, 1) if ours is not None else "—", f"{PAPER_TEST_ERROR['Boost']['Boost']:.3f}"])
    return ["\n## Boosting: the chapter's protocol beside the NIPS paper's\n\n"
            f"Table 1 boosts as the NIPS paper does ({cfg.trees}: one regression tree per class per "
            "round, leaves of at least 5% of the subsample). `ChapterBoost` boosts as the book chapter does "
            f"({cfg.chapter_trees}: one tree with vector leaves for all classes per round, leaves of 1%, "
            "splits of 2.5%).\n\n",
            table(["cell (chapter)", "test error", "train error", "seconds", "Boost/Boost (NIPS) test",
                   "NIPS seconds", "paper"], rows, align="lrrrrrr")]


def write_report(profile: Profile, out: Path, info: RunInfo, log, records: dict | None = None) -> dict:
    """Write ``denoising.md`` and its figures from the CSVs in ``out``; return headline numbers.

    ``records`` (the cells of this run, with their arrays) supply the example predictions;
    without them an existing ``denoising_examples.png`` is left as it is.
    """
    cfg = profile.spec(NAME)
    classes = list(cfg.classes)
    config = config_hash(cfg.config())
    results, history_table, energies_table = (table.open(out, log) for table in TABLES)
    computed = results.frame(config=config)
    in_table = computed["unary"].isin(classes) & computed["pairwise"].isin(classes)
    df, beside = computed[in_table], computed[~in_table]
    history = history_table.frame(config=config)
    energies = energies_table.frame(config=config)
    lookup = {(r.unary, r.pairwise): r for r in df.itertuples()}

    def grid(col: str, paper: bool, digits: int = 3) -> list[list[str]]:
        rows = []
        for u in classes:
            row = [u]
            for p in classes:
                r = lookup.get((u, p))
                cell = fmt(getattr(r, col), digits) if r is not None else "—"
                row.append(cell + (f" ({PAPER_TEST_ERROR[u][p]:.3f})" if paper else ""))
            rows.append(row)
        return rows

    _plot_curves(out, classes, history)
    _plot_energies(out, classes, energies)
    examples = _plot_examples(out, records or {}) or (out / "denoising_examples.png").exists()
    shares = _label_shares(cfg)
    far = far_from_paper(df) if len(df) else df
    best = df.sort_values("test_error").iloc[0] if len(df) else None
    head = ["unary \\ pairwise", *classes]
    text = [
        "# Denoising: Table 1 of Domke (NIPS 2013)\n\n",
        provenance_block(df, info),
        f"\nSynthetic binary denoising (paper Sec. 8): {cfg.data.n_train} train and {cfg.data.n_test} "
        f"test images of {cfg.data.size} x {cfg.data.size} (blur sigma {cfg.data.sigma}), "
        f"4-connected grid, eps = {cfg.epsilon}, {cfg.n_iter} learning iterations of "
        f"(unary fit, {cfg.max_sweeps} sweeps, pairwise fit, {cfg.max_sweeps} sweeps). "
        f"Boosted trees: {cfg.trees}; MLP: {cfg.mlp}. The paper used 16 + 16 images of "
        "100 x 100, 25 iterations and 200 boosting rounds (profile `full`). Label 1 makes up "
        f"{shares[0]:.1%} of the training pixels and {shares[1]:.1%} of the test pixels.\n",
        "\n## Test error (paper's Table 1 value in parentheses)\n\n",
        table(head, grid("test_error", True)),
        "\nThe paper's PDF lists Table 1 as five unlabelled column blocks; the pairwise-`Zero` "
        "column (unary-only models, .444) is certain, and the other four are placed by the "
        "reasoning in the comment above `PAPER_TEST_ERROR` in `slr_suite/render_denoising.py` "
        "(Constant the worst structured column, MLP the block printed with the header, Boost the "
        "block whose zero/constant-unary entries are .511/.510).\n",
        *_beside_section(cfg, lookup, beside),
        "\n*Reproducibility*: a rerun of this profile gives the same numbers on any x86-64 machine and "
        "thread count; only the Linear and MLP objectives may differ from one CPU model to another in "
        "about the seventh digit (BLAS kernels chosen per CPU sum in another order), never the errors "
        "(`tests/suite/test_trust.py`).\n",
        f"\n## Cells more than {PAPER_TOLERANCE} from the paper\n\n",
    ]
    if not _paper_size(cfg):
        text.append(f"This profile is smaller than the paper's (images of {cfg.data.size} x {cfg.data.size}, "
                    f"boosting {cfg.trees}): the structured cells are not expected to reach the paper's errors "
                    "here; `slr denoising --full` runs the paper's configuration (see `full/denoising.md`).\n\n")
    if len(far):
        rows = [[f"{r.unary}/{r.pairwise}", r.test_error, r.paper, f"{r.diff:+.3f}", _why(r, history, shares)]
                for r in far.itertuples()]
        text.append(table(["cell", "ours", "paper", "difference", "why (measured)"], rows, align="lrrrl"))
    elif len(df):
        text.append("None: every computed cell is within .01 of the paper.\n")
    text += [
        "\n## Train error\n\n",
        table(head, grid("train_error", False)),
        "\n## Wall time per cell (seconds, fit only, on the machine named above)\n\n",
        table(head, grid("seconds", False, 1)),
        "\n## Learning curves (paper Fig. 2)\n\n![learning curves](denoising_curves.png)\n",
        "\n## Learned energy functions (paper Fig. 1)\n\n"
        "`f = eps * g` of the fitted unary function against `phi_i` (top) and pairwise function "
        "against `phi_ij` (bottom), the constant feature held at 1.\n\n"
        "![energy functions](denoising_energies.png)\n",
    ]
    if examples:
        text.append("\n## Example predictions (paper Fig. 3)\n\n![examples](denoising_examples.png)\n")
    text.append("\nRaw results: [denoising_results.csv](denoising_results.csv) (one row per cell, with the run "
                "that computed it), [denoising_history.csv](denoising_history.csv) (learning curves), "
                "[denoising_energies.csv](denoising_energies.csv).\n")
    write_output(out / "denoising.md", "".join(text))
    structured = df[~df["unary"].isin(["Zero", "Constant"]) & (df["pairwise"] != "Zero")]
    summary = dict(cells=len(df), fit_seconds=float(df["seconds"].astype(float).sum()) if len(df) else 0.0,
                   structured=len(structured), paper_size=_paper_size(cfg),
                   structured_far=[f"{r.unary}/{r.pairwise}" for r in far.itertuples()
                                   if r.unary not in ("Zero", "Constant") and r.pairwise != "Zero"])
    if best is not None:
        summary.update(best=f"{best['unary']}/{best['pairwise']}", best_test=float(best["test_error"]))
    return summary
