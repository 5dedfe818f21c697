"""Dependencies point one way: ``slr.baselines`` (``baselines/``) and ``slr.suite`` (``slr_suite/``)
may import the library; the library imports neither, and the baselines do not import the suite."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _layer(module: str) -> str:
    """The layer of a dotted module name: ``slr.baselines``, ``slr.suite`` or its top-level package."""
    for layer in ("slr.baselines", "slr.suite"):
        if module == layer or module.startswith(layer + "."):
            return layer
    return module.split(".")[0]


def _imported_packages(directory: str) -> dict[str, set[str]]:
    """The layers each module under ``directory`` imports (anywhere in its code)."""
    found = {}
    for path in sorted((ROOT / directory).rglob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {_layer(alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names |= {_layer(f"{node.module}.{alias.name}") for alias in node.names}
        found[str(path.relative_to(ROOT))] = names
    return found


@pytest.mark.parametrize("directory, forbidden", [("slr", {"slr.baselines", "slr.suite"}),
                                                  ("baselines", {"slr.suite"})])
def test_no_import_against_the_layering(directory, forbidden):
    offenders = {module: sorted(names & forbidden) for module, names in _imported_packages(directory).items()
                 if names & forbidden}
    assert offenders == {}


def test_slr_imports_with_baselines_and_the_suite_absent():
    code = ("import sys, pkgutil, importlib\n"
            "sys.modules['slr.baselines'] = None; sys.modules['slr.suite'] = None\n"
            "import slr\n"
            "for info in pkgutil.walk_packages(slr.__path__, 'slr.'):\n"
            "    importlib.import_module(info.name)\n"
            "print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_the_core_needs_none_of_the_extras():
    """Every module of slr imports, and the learner fits and predicts, with the extras' packages
    (exact: cvxpy, clarabel, highspy; suite: matplotlib) and tqdm absent."""
    code = ("import sys, pkgutil, importlib\n"
            "for name in ('cvxpy', 'clarabel', 'highspy', 'matplotlib', 'tqdm', 'baselines', 'slr_suite'):\n"
            "    sys.modules[name] = None\n"
            "import slr\n"
            "for info in pkgutil.walk_packages(slr.__path__, 'slr.'):\n"
            "    importlib.import_module(info.name)\n"
            "from slr.datasets import make_denoising\n"
            "X, Y = make_denoising(n_images=1, size=6, sigma=1.0, random_state=0)\n"
            "model = slr.StructuredLogisticRegression(max_iter=1, verbose=1).fit(X, Y)\n"
            "print(sum(len(y) for y in model.predict(X)))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "36", proc.stderr
    assert proc.stderr.startswith("[StructuredLogisticRegression] iteration    1  R ")


def _imported_names(path: Path) -> dict[str, set[str]]:
    """Per module imported from (absolute ``from X import ...``), the names ``path`` imports."""
    found: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.setdefault(node.module, set()).update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                found.setdefault(alias.name, set())
    return found


# the learner's parts, below the estimators that run them (docs/developer/modules.md)
_FIT_LOOP = ["reduction", "_relaxation", "_setup", "_prediction", "_fit_data", "_alternation", "_progress",
             "_solvers"]


@pytest.mark.parametrize("module", _FIT_LOOP)
def test_the_fit_loops_parts_know_neither_estimator(module):
    """The one fit loop's modules import neither estimator (slr.learner, slr.distributed): the local
    and the Dask learner sit on top of them."""
    imported = _imported_names(ROOT / "slr" / f"{module}.py")
    assert not [name for name in imported if name == "slr.learner" or name.startswith("slr.distributed")]


def test_the_dask_learner_uses_only_the_learners_public_names():
    """slr.distributed takes StructuredLogisticRegression from slr.learner and nothing private: the
    loop's parts it needs come from their own modules."""
    for path in sorted((ROOT / "slr" / "distributed").glob("*.py")):
        names = _imported_names(path).get("slr.learner", set())
        assert not [name for name in names if name.startswith("_")], path.name


#: What each layer below the models may import from slr (docs/developer/modules.md): the input
#: checks, then the data layer on them, then the kernels on the data layer.
_LOWER_LAYERS = {
    "slr/graph.py": {"slr._features", "slr.validation"},
    "slr/data.py": {"slr._features", "slr.graph", "slr.validation"},
    "slr/inference": {"slr._features", "slr._optional", "slr.data", "slr.graph", "slr.inference", "slr.validation"},
}


@pytest.mark.parametrize("where", sorted(_LOWER_LAYERS))
def test_the_layers_below_the_models_import_only_from_below(where):
    """The data layer (GraphBatch, FlatData) sits between the input checks and the kernels: it knows
    neither the kernels nor the models and learners above them, and the kernels know no model."""
    path = ROOT / where
    modules = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    imported = {name for module in modules for name in _imported_names(module) if name.split(".")[0] == "slr"}
    allowed = _LOWER_LAYERS[where]
    assert sorted(name for name in imported if not any(name == a or name.startswith(a + ".") for a in allowed)) == []
