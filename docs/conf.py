"""Sphinx configuration of slr's documentation (``make docs``; output in ``docs/_build/html``)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS))               # apigen
sys.path.insert(0, str(DOCS.parent))        # the checkout's slr and baselines win

from apigen import write_api  # noqa: E402

import slr  # noqa: E402

project = "slr"
author = "the slr developers"
copyright = "slr developers, BSD-3-Clause"
release = version = slr.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# design.md is the repository's design reference (the code cites its sections); the guide pages
# include its sections, so it is not a page of its own
exclude_patterns = ["_build", "design.md", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.zip", "auto_examples/*.md5", "auto_examples/*.json"]
templates_path = ["_templates"]

write_api(DOCS / "api")
autosummary_generate = True
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"             # numpydoc's Parameters sections say the types
numpydoc_show_class_members = False    # the autoclass template lists the members itself
numpydoc_class_members_toctree = False

myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3
# the design sections are included under their own "## N." headings
suppress_warnings = ["myst.header"]

intersphinx_mapping = {
    "python": ("https://docs.python.org/3", None),
    "numpy": ("https://numpy.org/doc/stable", None),
    "scipy": ("https://docs.scipy.org/doc/scipy", None),
    "sklearn": ("https://scikit-learn.org/stable", None),
}
# no network at build time (CI, offline machines): intersphinx only with SLR_DOCS_INTERSPHINX=1
if not os.environ.get("SLR_DOCS_INTERSPHINX"):
    intersphinx_mapping = {}


sphinx_gallery_conf = {
    "examples_dirs": str(DOCS.parent / "examples"),
    "gallery_dirs": "auto_examples",
    # SLR_DOCS_GALLERY_RUN (a regular expression) runs only the matching examples; the others
    # are rendered with their code and without output (tests/tooling/test_docs.py runs a fast subset)
    "filename_pattern": os.environ.get("SLR_DOCS_GALLERY_RUN", r"/plot_"),
    "within_subsection_order": "gallery_hooks.ExampleOrder",
    "download_all_examples": False,
    "reset_modules": ("matplotlib", "gallery_hooks.warnings_are_errors"),
    "reset_modules_order": "both",
    "remove_config_comments": True,
    # SLR_DOCS_GALLERY=0 builds the pages without running the examples (their code only)
    "plot_gallery": os.environ.get("SLR_DOCS_GALLERY", "1") != "0",
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
}

html_theme = "pydata_sphinx_theme"
html_title = "slr"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path: list[str] = []
# light unless the reader's browser or choice says otherwise (an unset mode logs an error)
html_context = {"default_mode": "light"}
html_show_sourcelink = False


def _own_members_only(app, what, name, obj, skip, options):
    """Document the members slr and baselines define, not those inherited from scikit-learn
    (``get_params``, metadata routing), which scikit-learn documents."""
    module = getattr(getattr(obj, "__func__", obj), "__module__", None) or ""
    if what != "attribute" and module and not module.startswith(("slr", "baselines")):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _own_members_only)
