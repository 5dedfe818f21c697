"""The repository passes ``ruff check`` with the rules configured in pyproject.toml."""
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ruff", reason="ruff is not installed (pip install -e '.[test]')")

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_check_passes():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"ruff check . found problems:\n{result.stdout}{result.stderr}"
