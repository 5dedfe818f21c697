"""The Python examples of the README and the user guide run as written, with warnings as errors
(a ConvergenceWarning), and print what the text says they print."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
BLOCKS = [block for page in PAGES for block in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)]


def _run(code: str, *allowed: str) -> list[str]:
    """Run ``code`` with every warning an error, except those ``-W`` filters in ``allowed`` admit."""
    filters = [arg for spec in allowed for arg in ("-W", spec)]
    proc = subprocess.run([sys.executable, "-W", "error", *filters, "-c", code], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()


def _block(marker: str) -> str:
    (block,) = [b for b in BLOCKS if marker in b]
    return block


def test_every_python_block_is_checked_below():
    assert len(BLOCKS) == 8


def test_quick_start_stops_on_held_out_training_images():
    lines = _run(_block("early_stopping=True"))
    n_iter, reason, accuracy = lines[0].split()
    assert reason in ("tol", "early_stopping") and float(accuracy) > 0.7
    assert "val_error" in lines[1]


def test_learning_example_learns():
    # the validation images' MAP decoding may stop at its sweep budget on a loopy grid (a warning
    # the library gives for a non-tight LP); the example's point is the stopping rules
    lines = _run(_block("X_val=X_val"), "ignore:MAP decoding stopped:UserWarning")
    assert float(lines[0]) > 0.7          # per-node accuracy on the test images
    n_iter, reason, best = lines[1].split()
    assert reason in ("tol", "early_stopping") and int(best) <= int(n_iter)   # stopped by a rule, not the cap


def test_tagging_example_agrees_with_crfsuite():
    pytest.importorskip("pycrfsuite")
    f1_and_tags, *table, same = _run(_block("SequenceTagger(learner)"))
    f1, tags = f1_and_tags.split(" ", 1)
    assert float(f1) > 0.5 and tags.startswith("['")   # entity F1 on the test sentences; string tags
    assert table[0].split() == ["feature", "label", "weight"] and len(table) == 4
    assert same == "True"


def test_marginals_formats_and_scoring_example():
    last = _run(_block("predict_marginals"))[-1]
    assert "(6, 2, 2) {'unary__l2': " in last and last.endswith(" 30")   # edge marginals, one labelling each


def test_sparse_features_example():
    kind, fitted = _run(_block("make_sparse_chains"))
    assert kind.startswith("csr_array (4, ")
    accuracy, n_iter, solver = fitted.split()
    assert float(accuracy) > 0.9 and int(n_iter) < 200 and solver == "joint"   # stopped by the rule


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
