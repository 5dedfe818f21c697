"""The suite's own layering: the modules of ``slr.suite`` (``slr_suite/``) import each other without a cycle (imports
inside functions included), and every module imports without matplotlib (only drawing needs it)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "slr_suite"


def _module_name(path: Path) -> str:
    parts = ("slr", "suite", *path.relative_to(SUITE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _suite_imports() -> dict[str, set[str]]:
    """``{module: suite modules it imports, anywhere in its code}``; ``from slr.suite import x``
    counts as importing ``slr.suite.x`` when that is a module, else ``slr.suite`` itself."""
    modules = {_module_name(path): path for path in sorted(SUITE.rglob("*.py"))}
    graph = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names if alias.name.startswith("slr.suite")}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                    and node.module.startswith("slr.suite"):
                for alias in node.names:
                    child = f"{node.module}.{alias.name}"
                    targets.add(child if child in modules else node.module)
        graph[name] = {target for target in targets if target in modules and target != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` (its modules in order, the first repeated at the end), or []."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = "open"
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        state[node] = "done"
        path.pop()
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def test_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_suite_modules_import_each_other_without_a_cycle():
    graph = _suite_imports()
    assert {"slr.suite.runner", "slr.suite.registry", "slr.suite.baselines", "slr.suite.tuning"} <= set(graph)
    assert "slr.suite.methods" in graph["slr.suite.tuning"]    # the graph sees real edges
    assert _cycle(graph) == []


def test_suite_imports_without_matplotlib():
    """A lean install (no plotting) imports every module; matplotlib is imported where a figure is drawn."""
    code = ("import sys, pkgutil, importlib\n"
            "sys.modules['matplotlib'] = None\n"
            "import slr.suite\n"
            "names = [info.name for info in pkgutil.walk_packages(slr.suite.__path__, 'slr.suite.')]\n"
            "for name in names:\n"
            "    if name != 'slr.suite.__main__':\n"
            "        importlib.import_module(name)\n"
            "assert 'matplotlib' not in sys.modules or sys.modules['matplotlib'] is None\n"
            "print(len(names))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and int(proc.stdout.strip()) >= 15, proc.stderr
