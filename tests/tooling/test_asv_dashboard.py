"""asv in its own virtualenv, the published dashboard, and the dashboard looked at in Chromium.

The slow tests run one benchmark on one commit (``HEAD``) the way ``make bench-history`` does:
asv builds slr into its virtualenv under ``asv_benchmarks/.asv/env`` (shared with the make
targets, so only the first run on a machine creates it) with the results and the HTML in a
temporary directory; then ``asv publish`` and ``asv_benchmarks/dashboard.py`` load the
dashboard in headless Chromium (skipped where none is installed).
"""
from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ASV = ROOT / "asv_benchmarks"
_spec = importlib.util.spec_from_file_location("dashboard", ASV / "dashboard.py")
dashboard = sys.modules["dashboard"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dashboard)

BENCHMARK = "bench_inference.OCRChain.time_chain_sweeps"
ASV_WWW = Path(importlib.util.find_spec("asv").origin).parent / "www"


def asv(*args: str, cwd: Path, timeout: float = 1500) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "asv", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"asv {' '.join(args)}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """One commit, one benchmark, in asv's virtualenv; the HTML published. (dir, seconds)"""
    tmp = tmp_path_factory.mktemp("asv")
    conf = json.loads(re.sub(r"^\s*//.*$", "", (ASV / "asv.conf.json").read_text(), flags=re.M))
    conf.update(repo=str(ROOT), benchmark_dir=str(ASV / "benchmarks"),
                env_dir=str(ASV / ".asv" / "env"), results_dir=str(tmp / "results"),
                html_dir=str(tmp / "html"))
    (tmp / "asv.conf.json").write_text(json.dumps(conf))
    asv("machine", "--yes", cwd=tmp)
    start = time.perf_counter()
    asv("run", "--quick", "--show-stderr", "--bench", f"^{re.escape(BENCHMARK)}$", "HEAD^!", cwd=tmp)
    seconds = time.perf_counter() - start
    asv("publish", cwd=tmp)
    return tmp, seconds


@pytest.mark.slow
def test_one_commit_runs_in_asv_virtualenv(published):
    tmp, seconds = published
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    (result,) = [json.loads(p.read_text()) for p in (tmp / "results").glob(f"*/{head[:8]}-*.json")]
    assert result["env_name"].startswith("virtualenv-py")
    value = dict(zip(result["result_columns"], result["results"][BENCHMARK]))["result"]
    assert 0 < value[0] < 1, value          # seconds for ten sweeps of a 10-node chain
    print(f"one-commit asv run in a virtualenv: {seconds:.0f} s")


@pytest.mark.slow
def test_published_dashboard_renders_in_chromium(published, tmp_path):
    if dashboard.find_chromium() is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    html = published[0] / "html"
    assert dashboard.vendor(html) > 0
    png = tmp_path / "dashboard.png"
    summary, graph = dashboard.look(html, screenshot=png)
    assert BENCHMARK.split(".", 1)[1] in summary.facts["benchmarks"]
    assert graph.facts["title"].strip() == BENCHMARK and graph.facts["tick_labels"] > 0
    assert "bench_inference" in graph.facts["tree"]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_vendor_rewrites_every_cdn_tag_of_asvs_page(tmp_path):
    source = tmp_path / "vendor-src"
    source.mkdir()
    for name in dashboard.VENDOR_FILES.values():
        (source / name).write_text(f"/* {name} */")
    html = tmp_path / "html"
    html.mkdir()
    (html / "index.html").write_text((ASV_WWW / "index.html").read_text())
    assert dashboard.vendor(html, source) == len(dashboard.VENDOR_FILES)
    page = (html / "index.html").read_text()
    assert "https://" not in re.sub(r'<a [^>]*>', "", page) and "integrity=" not in page
    for name in dashboard.VENDOR_FILES.values():
        assert f'"vendor/{name}"' in page and (html / "vendor" / name).is_file()
    assert dashboard.vendor(html, source) == 0          # already self-contained


def test_vendor_names_an_unknown_cdn_address(tmp_path):
    (tmp_path / "index.html").write_text('<script src="https://cdn.example/new-lib.js"></script>')
    with pytest.raises(dashboard.DashboardError, match="no local copy known for https://cdn.example/new-lib.js"):
        dashboard.vendor(tmp_path, tmp_path)


def test_problems_are_exceptions_console_errors_and_failed_loads():
    events = [
        {"method": "Runtime.exceptionThrown",
         "params": {"exceptionDetails": {"exception": {"description": "TypeError: x is undefined"}}}},
        {"method": "Runtime.consoleAPICalled", "params": {"type": "log", "args": [{"value": "fine"}]}},
        {"method": "Runtime.consoleAPICalled", "params": {"type": "error", "args": [{"value": "bad"}]}},
        {"method": "Log.entryAdded", "params": {"entry": {
            "level": "error", "text": "Failed to load resource: the server responded with a status of 404",
            "url": "http://h/vendor/jquery.js"}}},
        {"method": "Log.entryAdded", "params": {"entry": {
            "level": "error", "text": "Failed to load resource: the server responded with a status of 404",
            "url": "http://h/graphs/summary/bench_x.Y.time_z.json?timestamp=1"}}},
        {"method": "Network.loadingFailed", "params": {"errorText": "net::ERR_FAILED"}},
        {"method": "Network.loadingFailed", "params": {"errorText": "net::ERR_ABORTED", "canceled": True}},
    ]
    assert dashboard.problems(events) == [
        "exception: TypeError: x is undefined", "console.error: bad",
        "log: Failed to load resource: the server responded with a status of 404 http://h/vendor/jquery.js",
        "load failed: net::ERR_FAILED"]


def test_serve_answers_on_a_free_port_and_stops(tmp_path):
    (tmp_path / "index.html").write_text("hello")
    with dashboard.serve(tmp_path) as root:
        with urllib.request.urlopen(root + "index.html", timeout=10) as response:
            assert response.read() == b"hello"
    with pytest.raises(OSError):
        urllib.request.urlopen(root + "index.html", timeout=2)


def test_look_without_data_or_browser_says_what_to_do(tmp_path, monkeypatch):
    with pytest.raises(dashboard.DashboardError, match="holds no benchmark data"):
        dashboard.look(tmp_path, executable="chromium")
    monkeypatch.setattr(dashboard, "find_chromium", lambda: None)
    with pytest.raises(dashboard.DashboardError, match="no Chromium found"):
        dashboard.look(tmp_path)
