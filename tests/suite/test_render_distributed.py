"""The page of the Dask scale figures, drawn from small CSVs (slr.suite.render_distributed), and its
place in ``slr report`` (redrawn from the CSVs, linked from the index, never measured)."""
import itertools
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("matplotlib")

from slr.suite.cli import main  # noqa: E402
from slr.suite.index import write_index  # noqa: E402
from slr.suite.provenance import RunInfo  # noqa: E402
from slr.suite.render_distributed import write_report  # noqa: E402

INFO = RunInfo(command="slr report --render-only", profile="quick", commit="abc1234", dirty=False, code="c" * 12,
               machine="a test machine", started="2000-01-01 00:00:00 UTC")
WORKERS = pd.DataFrame({"n_workers": [4, 1, 2], "n_images": [8, 8, 8], "seconds_per_iteration": [0.5, 1.5, 0.9],
                        "bytes_per_iteration": [48000.0, 12000.0, 24400.0], "tasks_per_iteration": [200.0, 50.0, 100.0],
                        "load_bytes": [500, 125, 250]})
LIMIT = pd.DataFrame({"run": ["1 worker(s) x 450MB", "2 worker(s) x 450MB", "single process"],
                      "n_images": [64, 64, 8], "outcome": ["KilledWorker", "trained", "trained"],
                      "test_error": [float("nan"), 0.0695, 0.0711], "worker_peak_mb": [float("nan"), 390.2, 258.3],
                      "seconds": [17.1, 25.8, float("nan")]})
MEMORY = pd.DataFrame({"n_images": [4, 8], "n_nodes": [40000, 80000], "worker_peak_mb": [188.0, 201.3],
                       "worker_idle_mb": [93.5, 178.7], "single_process_peak_mb": [180.3, 207.6]})


def _directory(tmp_path: Path, *frames: tuple[str, pd.DataFrame]) -> Path:
    directory = tmp_path / "distributed"
    directory.mkdir(parents=True)
    for name, frame in frames:
        frame.to_csv(directory / f"{name}.csv", index=False)
    return directory


def _table_rows(text: str, heading: str) -> list[list[str]]:
    """The cells of the first table after ``heading``, without its header and separator."""
    lines = text.split(heading, 1)[1].splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("|"))
    rows = list(itertools.takewhile(lambda line: line.startswith("|"), lines[start:]))
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def test_the_page_tabulates_and_draws_the_csvs(tmp_path):
    directory = _directory(tmp_path, ("workers", WORKERS), ("memory", MEMORY), ("limit", LIMIT))
    summary = write_report(directory, INFO)

    text = (directory / "README.md").read_text()
    # one row per worker count, in order, kB per iteration and per worker from the bytes
    rows = _table_rows(text, "## Time and traffic per iteration against workers")
    assert [row[0] for row in rows] == ["1", "2", "4"]
    assert [row[3] for row in rows] == ["12.00", "24.40", "48.00"]
    assert [row[4] for row in rows] == ["12.00", "12.20", "12.00"]
    assert [row[6] for row in rows] == ["125", "250", "500"]
    assert [row[0] for row in _table_rows(text, "## Memory per worker against images")] == ["4", "8"]
    limit = _table_rows(text, "## A data set too large for one worker")
    assert [row[2] for row in limit] == ["KilledWorker", "trained", "trained"]
    assert limit[0][3] == "—" and limit[1][3] == "0.070"
    assert "](workers.png)" in text and "Rendered by `slr report --render-only` at commit `abc1234`" in text
    figure = (directory / "workers.png").read_bytes()
    assert figure[:8] == b"\x89PNG\r\n\x1a\n" and len(figure) > 1000

    assert summary == {"max_workers": 4, "bytes_per_worker": 12.0,
                       "trained": {"run": "2 worker(s) x 450MB", "n_images": 64, "test_error": 0.0695},
                       "single": {"run": "single process", "n_images": 8, "test_error": 0.0711},
                       "failed": ["1 worker(s) x 450MB: KilledWorker"]}
    write_index(tmp_path, INFO, {"distributed": summary}, None, 0)
    index = (tmp_path / "README.md").read_text()
    assert "[distributed/README.md](distributed/README.md)" in index
    assert ("- Distributed: 12.0 kB moved per iteration and worker on 4 workers; 64 images trained on 2 worker(s) "
            "x 450MB to test error 0.070 (1 worker(s) x 450MB: KilledWorker), 0.071 for 8 images in one process.\n"
            in index)


def test_the_page_needs_only_the_workers_csv(tmp_path):
    directory = _directory(tmp_path, ("workers", WORKERS.iloc[:1]))
    assert write_report(directory, INFO) == {"max_workers": 4, "bytes_per_worker": 12.0}
    text = (directory / "README.md").read_text()
    assert "## Memory" not in text and "## A data set" not in text
    assert "[workers.csv](workers.csv)\n" in text
    with pytest.raises(FileNotFoundError, match="workers.csv"):
        write_report(_directory(tmp_path / "empty"), INFO)


def test_slr_report_redraws_the_page_and_links_it(tmp_path):
    """A render-only run of any experiment redraws the page from the CSVs it finds in the report
    directory's distributed/, and the index links it; without them there is no page and no link."""
    out = tmp_path / "reports"
    out.mkdir()
    _directory(out, ("workers", WORKERS))
    assert main(["bound", "--tiny", "--quiet", "--render-only", "--out", str(out)]) == 0
    assert "Rendered by `slr bound --tiny" in (out / "distributed" / "README.md").read_text()
    assert "](distributed/README.md)" in (out / "README.md").read_text()
    bare = tmp_path / "bare"
    bare.mkdir()
    assert main(["bound", "--tiny", "--quiet", "--render-only", "--out", str(bare)]) == 0
    assert not (bare / "distributed").exists() and "distributed" not in (bare / "README.md").read_text()
