"""The documentation site: built by Sphinx with warnings as errors, its internal links whole, every
public name with its API page, and the pages looked at in headless Chromium (an index page that
renders, and a search that finds a public name's API page).

The build runs every example of the gallery with warnings as errors (``docs/gallery_hooks.py``),
as ``make docs`` does: about a minute of examples on 2 cores. sphinx-gallery keeps their output in
``docs/auto_examples`` and reruns only an example whose script changed, so in a checkout where the
site was built before, only the API pages and the changed examples are built again.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytest.importorskip("sphinx")
pytest.importorskip("sphinx_gallery")

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
_spec = importlib.util.spec_from_file_location("dashboard", ROOT / "asv_benchmarks" / "dashboard.py")
dashboard = sys.modules.setdefault("dashboard", importlib.util.module_from_spec(_spec))
if not hasattr(dashboard, "Browser"):
    _spec.loader.exec_module(dashboard)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The built HTML (a fresh build directory; the API pages and gallery regenerate in docs/)."""
    out = tmp_path_factory.mktemp("docs") / "html"
    env = {key: value for key, value in os.environ.items() if not key.startswith("SLR_DOCS_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q",
                           str(DOCS), str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=1500)
    assert proc.returncode == 0, f"sphinx failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return out


class _Links(HTMLParser):
    """The ``href``/``src`` targets and the ``id``s of one page."""

    def __init__(self):
        super().__init__()
        self.targets: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if value and ((tag == "a" and name == "href") or (tag in ("img", "script") and name == "src")
                          or (tag == "link" and name == "href")):
                self.targets.append(value)


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


@pytest.mark.slow
def test_no_broken_internal_link(site):
    pages = {path: _parse(path) for path in site.rglob("*.html") if "_static" not in path.parts}
    assert len(pages) > 100
    broken = []
    for page, links in pages.items():
        for target in links.targets:
            parts = urlsplit(target)
            if parts.scheme or parts.netloc or target.startswith(("mailto:", "javascript:")):
                continue
            file = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if file.is_dir():
                file = file / "index.html"
            if not file.exists():
                broken.append(f"{page.relative_to(site)} -> {target}")
            elif parts.fragment and file.suffix == ".html":
                ids = pages[file].ids if file in pages else _parse(file).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{page.relative_to(site)} -> {target} (no such anchor)")
    assert not broken, "broken internal links:\n" + "\n".join(broken[:50])


@pytest.mark.slow
def test_every_public_name_has_an_api_page(site):
    sys.path.insert(0, str(DOCS))
    try:
        from apigen import canonical_names, public_modules
    finally:
        sys.path.remove(str(DOCS))
    modules = public_modules()
    assert {"slr", "slr.inference", "slr.oracles", "slr.baselines", "slr.distributed"} <= set(modules)
    missing = [f"{module}.{name}" for module, entry in canonical_names(modules).items()
               for name in entry["objects"]
               if not (site / "api" / "generated" / f"{module}.{name}.html").exists()]
    assert not missing, missing
    learner = (site / "api" / "generated" / "slr.StructuredLogisticRegression.html").read_text()
    assert "predict_marginals" in learner and "Parameters" in learner


@pytest.mark.slow
def test_gallery_examples_ran(site):
    for example in ("plot_letters", "plot_dask_learner", "plot_text_tagging"):
        page = (site / "auto_examples" / f"{example}.html").read_text()
        assert "sphx-glr-script-out" in page and "sphx-glr-single-img" in page, example   # output, figure


@pytest.mark.slow
def test_site_renders_and_search_finds_a_public_name(site, tmp_path):
    if dashboard.find_chromium() is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    with dashboard.serve(site) as root, dashboard.Browser(dashboard.find_chromium()) as browser:
        index = browser.load(root + "index.html", "document.querySelector('.bd-content h1') !== null",
                             "({title: document.title, h1: document.querySelector('.bd-content h1').textContent,"
                             " nav: [...document.querySelectorAll('.bd-content .toctree-wrapper a')].length})",
                             screenshot=True)
        search = browser.load(root + "search.html?q=OneSlackSSVM",
                              "document.querySelectorAll('#search-results li a').length > 0",
                              "({hits: [...document.querySelectorAll('#search-results li a')]"
                              ".map(a => a.getAttribute('href'))})")
    # Chromium asks every server for /favicon.ico; the site has none
    errors = [e for e in index.errors + search.errors if "favicon.ico" not in e]
    assert not errors, errors
    assert index.facts["title"].startswith("slr") and "structured learning" in index.facts["h1"]
    assert index.facts["nav"] >= 5
    png = tmp_path / "index.png"
    png.write_bytes(index.png)
    assert index.png[:8] == b"\x89PNG\r\n\x1a\n" and len(index.png) > 20_000
    assert any("slr.baselines.OneSlackSSVM.html" in hit for hit in search.facts["hits"]), search.facts
