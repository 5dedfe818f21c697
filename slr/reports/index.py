"""``reports/README.md``: the index of the generated reports and their headline findings."""
from __future__ import annotations

from pathlib import Path

from slr.reports.meta import RunMeta

__all__ = ["write_index"]


def write_index(out: Path, meta: RunMeta, summaries: dict[str, dict], wall_seconds: float | None) -> None:
    """Write ``out/README.md`` linking every report that exists in ``out``."""
    lines = ["# slr reports\n\n", meta.markdown()]
    if wall_seconds is not None:
        lines.append(f"- wall time of this run: {wall_seconds:.0f} s (cells cached from earlier runs "
                     "are not recomputed)\n")
    fitted = {name: s["fit_seconds"] for name, s in summaries.items() if s and "fit_seconds" in s}
    if fitted:
        parts = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in fitted.items())
        lines.append(f"- fit time of the cells shown (when they were computed): {parts}\n")
    lines.append("\nRegenerate with `make report` (`slr report --quick --out reports`); "
                 "`slr report --full` runs the paper's configuration. Each finished cell is kept in "
                 "the CSV files, so an interrupted run resumes where it stopped (delete a CSV to "
                 "recompute it).\n\n## Reports\n\n")
    entries = [
        ("denoising.md", "Denoising, Table 1 of the NIPS paper: every unary x pairwise function class, "
                         "learning curves, learned energies, example predictions"),
        ("baselines.md", "slr against SSVMs (1-slack, n-slack, subgradient), perceptron, piecewise "
                         "training and pystruct on denoising and OCR letters"),
        ("bound.md", "Theorem 1.1 (l0 <= l1 <= l <= l1 + eps*Hmax) on random small graphs against exact solvers"),
    ]
    for name, what in entries:
        if (out / name).exists():
            lines.append(f"- [{name}]({name}): {what}\n")
    lines.append("\n## Headline findings\n\n")
    d = summaries.get("denoising")
    if d and d.get("cells"):
        if "best" in d:
            lines.append(f"- Denoising: best combination {d['best']} reaches test error {d['best_test']:.3f} "
                         "(paper: below .01 at full size).\n")
        if "unary_only" in d:
            lines.append(f"- Denoising: unary-only models {d['unary_only'][0]:.3f}-{d['unary_only'][1]:.3f} "
                         "(paper .444-.445); ")
        if "trivial" in d:
            lines.append(f"zero/constant unary {d['trivial'][0]:.3f}-{d['trivial'][1]:.3f} (paper .50-.51).\n")
        else:
            lines.append("\n")
    b = summaries.get("baselines")
    if b:
        for dataset in ("denoising", "letters"):
            if dataset in b:
                lines.append(f"- Baselines on {dataset}: lowest test error {b[dataset]['best_test']:.3f} "
                             f"by {b[dataset]['best']}.\n")
    t = summaries.get("bound")
    if t and t.get("cells"):
        lines.append(f"- Theorem 1.1 holds in {t['holds']} / {t['cells']} (graph, eps) cells; `l0 = l1` on "
                     f"every tree: {'yes' if t['tree_tight'] else 'no'}; the LP is strictly looser than "
                     f"MAP on {t['loose']} of {t['graphs']} graphs; message passing matches the exact "
                     f"smoothed LP to {t['mp_err']:.1e}.\n")
    (out / "README.md").write_text("".join(lines))
