"""The README's Python examples run as written, with no deprecated name, and print what the
README says they print."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def _run(code: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-W", "error::FutureWarning", "-c", code], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()


def _block(marker: str) -> str:
    (block,) = [b for b in BLOCKS if marker in b]
    return block


def test_every_python_block_is_checked_below():
    assert len(BLOCKS) == 7


@pytest.mark.slow
def test_learning_example_learns():
    lines = _run(_block("BoostedTrees(n_rounds=30)"))
    assert float(lines[0]) > 0.9          # per-node accuracy on the test images
    n_iter, reason, best = lines[1].split()
    assert reason in ("tol", "early_stopping") and int(best) <= int(n_iter)   # stopped by a rule, not the cap


def test_marginals_formats_and_scoring_example():
    last = _run(_block("predict_marginals"))[-1]
    assert "(6, 2, 2) {'unary__l2': " in last and last.endswith(" 30")   # edge marginals, one labelling each


def test_sparse_features_example():
    kind, fitted = _run(_block("make_sparse_chains"))
    assert kind.startswith("csr_array (4, ")
    accuracy, n_iter, solver = fitted.split()
    assert float(accuracy) > 0.9 and int(n_iter) < 200 and solver == "joint"   # stopped by the rule


def test_tagging_example_agrees_with_crfsuite():
    pytest.importorskip("pycrfsuite")
    f1_and_tags, *table, same = _run(_block("SequenceTagger()"))
    f1, tags = f1_and_tags.split(" ", 1)
    assert float(f1) > 0.5 and tags.startswith("['")   # entity F1 on the test sentences; string tags
    assert table[0].split() == ["feature", "label", "weight"] and len(table) == 4
    assert same == "True"


def test_weights_and_partial_labels_example():
    *_, certified, continued = _run(_block("masked_array"))
    assert certified == "9 True True"
    iteration, reason = continued.split()
    assert reason in ("tol", "max_iter") and 10 < int(iteration) <= 15   # continued past the first fit's 10


def test_inference_example_converges():
    first, second = _run(_block("smoothed_lp(theta_nodes"))
    assert first.endswith("(100, 2) True") and second.endswith("True")


def test_distributed_example_trains_on_partitions_loaded_by_the_workers():
    lines = _run(_block("DaskStructuredLogisticRegression"))
    n_partitions, accuracy = lines[0].split()
    assert int(n_partitions) == 4 and float(accuracy) > 0.8
    assert "'bytes_sent'" in lines[1]
