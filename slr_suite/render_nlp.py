"""``nlp.md``, drawn from ``nlp_results.csv`` and ``nlp_curves.csv``."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from slr.suite.experiment import Profile
from slr.suite.markdown import provenance_block, table
from slr.suite.nlp import NAME, SLR_METHODS, TABLES
from slr.suite.provenance import RunInfo, config_hash
from slr.suite.store import write_output

__all__ = ["entity_f1_table", "time_to_score", "write_report"]

#: How close to the best peer's test score counts as reaching it, as in the other reports.
TOLERANCE = 0.005


def time_to_score(seconds: np.ndarray, scores: np.ndarray, target: float) -> float | None:
    """The fit time of the first point of a curve whose score reaches ``target``; None if none does."""
    reached = np.flatnonzero(np.asarray(scores) >= target)
    return float(np.asarray(seconds)[reached[0]]) if len(reached) else None


def entity_f1_table(ok: pd.DataFrame) -> str:
    """Per method (the rows of ``ok``) its test entity F1 of every type, then micro (conlleval's
    overall figure) and macro (the types' mean); a type a method neither predicts nor meets in the
    truth is blank."""
    by_method = {r["method"]: json.loads(r["test_entity_f1"]) for _, r in ok.iterrows()}
    types = sorted({kind for scores in by_method.values() for kind in scores})
    rows = [[method, *(scores.get(kind, "") for kind in types), float(micro),
             float(np.mean(list(scores.values()))) if scores else ""]
            for (method, scores), micro in zip(by_method.items(), ok["test_score"])]
    return table(["method", *types, "micro", "macro"], rows, digits=3)


def _seconds(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.2f}"


def write_report(profile: Profile, out: Path, info: RunInfo, log, records: dict | None = None) -> dict:
    """Write ``out/nlp.md``; return headline numbers."""
    results_table, curves_table = (t.open(out, log) for t in TABLES)
    spec = profile.spec(NAME)
    config = config_hash(spec.config())
    results = results_table.frame(config=config)
    curves = curves_table.frame(config=config)
    from slr.datasets.tagged_text import TAGGED_CORPORA

    text = ["# Text tagging with sparse token features\n\n", provenance_block(results, info), "\n"]
    text.append(
        "Token features of sklearn-crfsuite's tutorial (lower-cased word, last 3 and 2 characters, case and digit "
        f"flags, part of speech and its first two characters where the corpus has them as input; the same for the "
        f"neighbours up to {spec.window} away; BOS / EOS), vectorised on the training sentences. Each method is "
        "fitted on the training sentences at every point of its grid; the point with the best validation score "
        "is reported on the test sentences. Score: entity F1 (conlleval) for IOB-tagged corpora, token accuracy "
        "otherwise. Fit time is the best point's fit alone (slr: its fit clock, the per-iteration test scoring "
        "excluded); memory is that fit's peak resident set above the process's at the fit's start (Linux "
        "`VmHWM` reset at the start), measured the same way for every method, C libraries included. "
        f"Corpora kept out of every choice of the library's defaults: {', '.join(spec.held_out)}.\n")
    headline = {}
    for cut in spec.corpora:
        sub = results[results["corpus"] == cut.name]
        source = TAGGED_CORPORA[cut.name]
        text.append(f"\n## {cut.name}: {source.description}\n\n")
        text.append(f"{source.requirement}, {source.language}, licence: {source.licence}. "
                    f"Cut: {cut.n_train or 'all'} / {cut.n_validation or 'all'} / {cut.n_test or 'all'} "
                    "training / validation / test sentences.\n\n")
        ok = sub[sub["status"] == "ok"]
        peers = ok[~ok["method"].isin(SLR_METHODS)]
        best_peer = float(peers["test_score"].max()) if len(peers) else None
        rows = []
        for _, r in sub.iterrows():
            if r["status"] != "ok":
                rows.append([r["method"], "", "", "", "", "", "", "", r["status"]])
                continue
            reach = ""
            if r["method"] in SLR_METHODS and best_peer is not None:
                curve = curves[(curves["corpus"] == cut.name) & (curves["method"] == r["method"])].sort_values("point")
                reach = _seconds(time_to_score(curve["seconds"].to_numpy(), curve["test_score"].to_numpy(),
                                               best_peer - TOLERANCE))
            rows.append([r["method"], r["params"], float(r["test_score"]), float(r["test_accuracy"]),
                         float(r["seconds"]), float(r["fit_mb"]), reach, int(r["n_fits"]), "ok"])
        metric = "entity F1" if source.scheme == "iob2" else "accuracy"
        text.append(table(["method", "chosen", f"test {metric}", "test token accuracy", "fit s", "fit MB",
                           f"s to best peer - {TOLERANCE}", "grid fits", "status"], rows, digits=3))
        if len(ok):
            features = int(ok["n_features"].iloc[0])
            tokens = int(ok["n_train_tokens"].iloc[0])
            text.append(f"\n{tokens:,} training tokens, {features:,} features.")
            if best_peer is not None:
                text.append(f" Best peer's test {metric}: {best_peer:.4f}.")
            text.append("\n")
        if source.scheme == "iob2" and len(ok):
            text.append("\nTest entity F1 per type (conlleval), of the same fits; macro: the mean over the types.\n\n")
            text.append(entity_f1_table(ok))
        slr_row = ok[ok["method"] == "slr:Linear"]
        headline[cut.name] = dict(best_peer=best_peer,
                                  slr_linear=float(slr_row["test_score"].iloc[0]) if len(slr_row) else None)
    text.append("\nRaw results: [nlp_results.csv](nlp_results.csv), curves: [nlp_curves.csv](nlp_curves.csv)\n")
    write_output(out / "nlp.md", "".join(text))
    return dict(cells=len(results), corpora=headline)
