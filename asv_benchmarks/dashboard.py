"""The published asv dashboard, made self-contained and looked at in headless Chromium.

``python dashboard.py HTML_DIR [--screenshot PNG] [--optional-browser]``:

1. **vendor**: asv 0.6's ``index.html`` loads jQuery, flot, bootstrap, stupidtable and md5
   from public CDNs, so without those hosts the page shows asv's "failed to load" error.
   The same libraries ship inside the asv 0.5.1 source distribution on PyPI (``www/vendor``);
   they are fetched once with pip (kept in ``~/.cache/slr/asv-vendor``), copied to
   ``HTML_DIR/vendor`` and the CDN tags rewritten to them. A CDN address this script does not
   know (a newer asv) is an error naming it.
2. **serve** the directory with ``http.server`` on a free local port, in a thread;
3. **look** at it with Chromium over the DevTools protocol (``websocket-client``): the summary
   page must list the benchmarks, one benchmark's page must draw its graph (flot's canvas and
   axis labels), and neither may log a JavaScript exception, a console error or a failed load;
4. **screenshot** the graph page (1400 x 900) when ``--screenshot`` is given.

Exit status 0 when the dashboard renders, 1 with the problems listed otherwise, 2 on bad
usage; without a Chromium it is 1 too, or 0 with a note under ``--optional-browser``.
"""
from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

#: PyPI release whose sdist carries the libraries asv 0.6 loads from CDNs.
VENDOR_RELEASE = "asv==0.5.1"
VENDOR_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "slr" / "asv-vendor"
#: CDN address (a regex on its end) -> file of www/vendor in that release.
VENDOR_FILES = {
    r"/jquery-3\.3\.1\.min\.js": "jquery-3.3.1.min.js",
    r"/flot/0\.8\.3/jquery\.flot\.min\.js": "jquery.flot-0.8.3.min.js",
    r"/flot/0\.8\.3/jquery\.flot\.time\.min\.js": "jquery.flot-0.8.3.time.min.js",
    r"/flot/0\.8\.3/jquery\.flot\.selection\.min\.js": "jquery.flot-0.8.3.selection.min.js",
    r"/flot/0\.8\.3/jquery\.flot\.categories\.min\.js": "jquery.flot-0.8.3.categories.min.js",
    r"/jquery\.flot\.orderBars\.js": "jquery.flot.orderBars.js",
    r"/stupidtable/[\d.]+/stupidtable\.min\.js": "stupidtable.js",
    r"/blueimp-md5/[\d.]+/js/md5\.min\.js": "md5.js",
    r"/bootstrap@3\.[\d.]+/dist/js/bootstrap\.min\.js": "bootstrap-3.1.0.min.js",
    r"/bootstrap@3\.[\d.]+/dist/css/bootstrap\.min\.css": "bootstrap-3.1.0.min.css",
}
EXTERNAL_TAG = re.compile(r'<(script|link)\b[^>]*?(?:src|href)="(https?://[^"]+)"[^>]*>')
#: Summary data of a benchmark never measured: asv lists it all the same and its page shows
#: an empty cell, so its 404 is no error.
UNMEASURED = re.compile(r"status of 404 .*/graphs/summary/[^/]+\.json")
CHROMIUMS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WINDOW = (1400, 900)


class DashboardError(Exception):
    """The dashboard cannot be prepared or does not render (exit status 1)."""


# -- 1. vendor ------------------------------------------------------------------------------

def vendor_dir(cache: Path = VENDOR_CACHE) -> Path:
    """The directory of vendored libraries, fetched with pip on first use."""
    target = cache / VENDOR_RELEASE.replace("==", "-")
    if all((target / name).is_file() for name in VENDOR_FILES.values()):
        return target
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
             "--dest", tmp, VENDOR_RELEASE], capture_output=True, text=True)
        sdists = list(Path(tmp).glob("asv-*.tar.gz"))
        if proc.returncode or not sdists:
            raise DashboardError(f"pip download {VENDOR_RELEASE} failed (the dashboard's "
                                 f"JavaScript libraries come from it): {proc.stderr.strip()}")
        staging = Path(tmp) / "vendor"
        staging.mkdir()
        with tarfile.open(sdists[0]) as sdist:
            for member in sdist.getmembers():
                if "/asv/www/vendor/" in member.name and member.isfile():
                    source = sdist.extractfile(member)
                    (staging / Path(member.name).name).write_bytes(source.read())
        missing = sorted(set(VENDOR_FILES.values()) - {p.name for p in staging.iterdir()})
        if missing:
            raise DashboardError(f"{sdists[0].name} lacks {', '.join(missing)}")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(staging, target)
    return target


def vendor(html_dir: Path, source: Path | None = None) -> int:
    """Point ``html_dir/index.html``'s CDN tags at local copies; the number of tags rewritten."""
    index = html_dir / "index.html"
    if not index.is_file():
        raise DashboardError(f"{index} not found: run `asv publish` first")
    text = index.read_text()
    external = EXTERNAL_TAG.findall(text)
    if not external:
        return 0
    source = source or vendor_dir()
    (html_dir / "vendor").mkdir(exist_ok=True)

    def local(match: re.Match) -> str:
        kind, url = match.groups()
        name = next((n for pattern, n in VENDOR_FILES.items() if re.search(pattern + "$", url)), None)
        if name is None:
            raise DashboardError(f"{index}: no local copy known for {url} (a newer asv? extend "
                                 "VENDOR_FILES in asv_benchmarks/dashboard.py)")
        shutil.copy2(source / name, html_dir / "vendor" / name)
        if kind == "script":
            return f'<script src="vendor/{name}">'
        return f'<link rel="stylesheet" href="vendor/{name}">'

    index.write_text(EXTERNAL_TAG.sub(local, text))
    return len(external)


# -- 2. serve -------------------------------------------------------------------------------

class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(directory: Path):
    """``http://127.0.0.1:PORT/`` serving ``directory`` from a thread, on a free port."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# -- 3. look --------------------------------------------------------------------------------

def find_chromium() -> str | None:
    """``$CHROMIUM`` or the first Chromium/Chrome on ``PATH``."""
    if os.environ.get("CHROMIUM"):
        return shutil.which(os.environ["CHROMIUM"])
    return next((path for name in CHROMIUMS if (path := shutil.which(name))), None)


@dataclass
class Page:
    """What one load of a URL showed: the checked facts, its problems, a screenshot."""

    url: str
    facts: dict = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    png: bytes | None = None


class Browser:
    """A headless Chromium driven over the DevTools protocol (one page, one websocket)."""

    def __init__(self, executable: str, timeout: float = 30.0):
        import websocket   # websocket-client, in the bench and test extras

        self.timeout = timeout
        self._profile = tempfile.TemporaryDirectory()
        self._proc = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
             f"--user-data-dir={self._profile.name}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True)   # its helper processes share the group: close() ends them all
        try:
            port = self._devtools_port()
            deadline = time.monotonic() + timeout
            while True:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page"]
                if pages or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            if not pages:
                raise DashboardError("Chromium opened no page")
            self._ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=timeout,
                                                   suppress_origin=True)
        except BaseException:
            self.close()
            raise
        self._id = 0
        self.events: list[dict] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=WINDOW[0], height=WINDOW[1],
                  deviceScaleFactor=1, mobile=False)

    def _devtools_port(self) -> int:
        """The port from Chromium's ``DevTools listening on ws://127.0.0.1:PORT/...`` line."""
        seen = []
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            line = self._proc.stderr.readline()
            if not line and self._proc.poll() is not None:
                break
            seen.append(line)
            match = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if match:
                threading.Thread(target=self._proc.stderr.read, daemon=True).start()  # drain
                return int(match.group(1))
        raise DashboardError("Chromium did not start its DevTools server:\n" + "".join(seen[-20:]))

    def call(self, method: str, **params) -> dict:
        """Send one DevTools command and return its result, keeping the events that arrive."""
        self._id += 1
        self._ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") == self._id:
                if "error" in message:
                    raise DashboardError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise DashboardError(f"evaluating {expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def load(self, url: str, ready: str, facts: str, screenshot: bool = False) -> Page:
        """Open ``url``, wait until the JavaScript ``ready`` is true, then read ``facts``."""
        self.events.clear()
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + self.timeout
        while not self.evaluate(f"document.readyState === 'complete' && Boolean({ready})"):
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        time.sleep(0.5)                     # let late handlers run and report
        self.evaluate("0")                  # collect the events sent meanwhile
        page = Page(url, facts=self.evaluate(facts) or {}, errors=problems(self.events))
        if screenshot:
            page.png = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        return page

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._ws.close()
        self._signal_group(signal.SIGTERM)
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._signal_group(signal.SIGKILL)
            self._proc.wait()
        # a helper may still be writing its last files into the profile for a moment after the
        # browser exits ("Directory not empty" from the removal, seen in CI): retry briefly
        for attempt in range(20):
            try:
                self._profile.cleanup()
                break
            except OSError:
                if attempt == 19:
                    raise
                time.sleep(0.1)

    def _signal_group(self, sig: int) -> None:
        """Send ``sig`` to Chromium and every helper process it started."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, sig)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def problems(events: list[dict]) -> list[str]:
    """JavaScript exceptions, console errors and failed loads among DevTools events.

    A 404 on a never measured benchmark's summary data is left out (see ``UNMEASURED``).
    """
    found = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            found.append("exception: " + details.get("exception", {}).get("description", details.get("text", "")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            found.append("console.error: " + " ".join(str(a.get("value", a.get("description", "")))
                                                      for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            text = f"{params['entry'].get('text', '')} {params['entry'].get('url', '')}".strip()
            if not UNMEASURED.search(text):
                found.append(f"log: {text}")
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            found.append(f"load failed: {params.get('errorText', '')}")
    return found


#: The summary page: benchmark names and their small plots.
SUMMARY_READY = "document.querySelectorAll('.benchmark-text').length > 0"
SUMMARY_FACTS = """({benchmarks: [...document.querySelectorAll('.benchmark-text')].map(e => e.textContent.trim()),
  error_page: document.title.includes('error')})"""
#: One benchmark's page: flot's canvas and axis labels in #main-graph, the benchmark tree.
GRAPH_READY = "document.querySelectorAll('#main-graph canvas.flot-base').length > 0"
GRAPH_FACTS = """({canvases: document.querySelectorAll('#main-graph canvas.flot-base').length,
  tick_labels: document.querySelectorAll('#main-graph .flot-tick-label').length,
  tree: [...document.querySelectorAll('#graphdisplay-navigation .nav-list label')].map(e => e.textContent.trim()),
  title: (document.getElementById('title') || {}).textContent})"""


def measured(html_dir: Path) -> list[str]:
    """The benchmarks with published data (asv writes ``graphs/summary/<name>.json``)."""
    return sorted(p.stem for p in (html_dir / "graphs" / "summary").glob("*.json"))


def look(html_dir: Path, benchmark: str | None = None, screenshot: Path | None = None,
         executable: str | None = None) -> tuple[Page, Page]:
    """Load the summary page and one benchmark's graph; raise listing what is wrong.

    The graph is ``benchmark``'s, by default the first benchmark with published data.
    """
    executable = executable or find_chromium()
    if executable is None:
        raise DashboardError("no Chromium found (apt-get install chromium, or set $CHROMIUM)")
    benchmark = benchmark or next(iter(measured(html_dir)), None)
    if benchmark is None:
        raise DashboardError(f"{html_dir} holds no benchmark data: run asv, then asv publish")
    with serve(html_dir) as root, Browser(executable) as browser:
        summary = browser.load(root + "index.html", SUMMARY_READY, SUMMARY_FACTS)
        names = summary.facts.get("benchmarks") or []
        wrong = [f"summary page: {e}" for e in summary.errors]
        if not names:
            wrong.append("summary page lists no benchmarks"
                         + (" (asv's error page)" if summary.facts.get("error_page") else ""))
        graph = browser.load(f"{root}index.html#{benchmark}", GRAPH_READY, GRAPH_FACTS,
                             screenshot=screenshot is not None)
        wrong += [f"graph page: {e}" for e in graph.errors]
        if not graph.facts.get("canvases") or not graph.facts.get("tick_labels"):
            wrong.append(f"graph page of {benchmark!r} draws no graph ({graph.facts})")
    if screenshot is not None and graph.png:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        screenshot.write_bytes(graph.png)
    if wrong:
        raise DashboardError("the dashboard does not render:\n  " + "\n  ".join(wrong))
    return summary, graph


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", type=Path, help="asv publish's output directory")
    parser.add_argument("--screenshot", type=Path, help="write the graph page here (PNG)")
    parser.add_argument("--benchmark", help="benchmark whose graph is loaded (default: the first)")
    parser.add_argument("--optional-browser", action="store_true",
                        help="without Chromium, vendor only and exit 0 with a note")
    args = parser.parse_args(argv)
    try:
        vendor(args.html_dir)
        if args.optional_browser and find_chromium() is None:
            print("dashboard: no Chromium; the dashboard was not looked at", file=sys.stderr)
            return 0
        summary, graph = look(args.html_dir, args.benchmark, args.screenshot)
    except DashboardError as exc:
        print(f"dashboard: {exc}", file=sys.stderr)
        return 1
    print(f"dashboard: {len(summary.facts['benchmarks'])} benchmarks listed, graph of "
          f"{graph.facts.get('title', '').strip()!r} drawn, no JavaScript errors"
          + (f"; screenshot {args.screenshot}" if args.screenshot else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
