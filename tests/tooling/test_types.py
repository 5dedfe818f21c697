"""The package passes ``mypy`` with the configuration in pyproject.toml (every module of ``slr``)."""
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_passes():
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"mypy found problems:\n{result.stdout}{result.stderr}"
