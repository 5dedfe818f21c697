"""Keep the asv suite from rotting: import every benchmark module and run each benchmark once.

Each benchmark runs its ``setup`` and body once on the first value of every parameter (the
smallest problem), as asv would, without timing. Classes listed in ``IMPORT_ONLY`` are too
expensive for the test suite (hundreds of boosting rounds on 300k rows) and are only
checked for discoverability.
"""
from __future__ import annotations

import importlib
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1] / "asv_benchmarks"
PREFIXES = ("time_", "peakmem_", "mem_", "track_", "timeraw_")
IMPORT_ONLY = {("bench_trees", "Ratios"), ("bench_trees", "TrainingLoss")}


def _modules() -> list[str]:
    return sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if p.stem != "__init__")


def _import(name: str):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(f"benchmarks.{name}")


def _benchmarks(module):
    """``(class or None, method name)`` for every asv benchmark in the module."""
    found = []
    for obj_name, obj in vars(module).items():
        if inspect.isclass(obj) and obj.__module__ == module.__name__:
            found += [(obj, m) for m in dir(obj) if m.startswith(PREFIXES) and callable(getattr(obj, m))]
        elif inspect.isfunction(obj) and obj_name.startswith(PREFIXES) and obj.__module__ == module.__name__:
            found.append((None, obj_name))
    return found


def _first_params(cls) -> tuple:
    params = getattr(cls, "params", None)
    if params is None:
        return ()
    names = getattr(cls, "param_names", None)
    if names is not None and len(names) > 1:
        return tuple(p[0] for p in params)
    if names is not None and len(names) == 1 and params and isinstance(params[0], (list, tuple)):
        return (params[0][0],)
    return (params[0],)


def test_asv_conf_is_valid_json():
    # asv.conf.json allows // comments; strip them as asv does
    text = re.sub(r"^\s*//.*$", "", (ROOT / "asv.conf.json").read_text(), flags=re.M)
    conf = json.loads(text)
    assert conf["benchmark_dir"] == "benchmarks" and conf["repo"] == ".."
    assert (ROOT / conf["benchmark_dir"] / "__init__.py").exists()


@pytest.mark.parametrize("name", _modules())
def test_benchmark_module_runs_once(name):
    module = _import(name)
    benches = _benchmarks(module)
    if name != "common":
        assert benches, f"{name} defines no asv benchmarks"
    for cls, method in benches:
        if cls is None:
            getattr(module, method)()
            continue
        if (name, cls.__name__) in IMPORT_ONLY:
            continue
        args = _first_params(cls)
        instance = cls()
        if hasattr(instance, "setup_cache"):   # asv passes the cache to setup and the body
            args = (instance.setup_cache(), *args)
        if hasattr(instance, "setup"):
            instance.setup(*args)
        result = getattr(instance, method)(*args)
        if method.startswith("track_"):
            assert isinstance(result, (int, float)) and result == result, (cls.__name__, method, result)
        if hasattr(instance, "teardown"):
            instance.teardown(*args)


def test_asv_check_finds_no_problems():
    """``asv check`` itself discovers every benchmark against the installed build."""
    proc = subprocess.run([sys.executable, "-m", "asv", "check", "--python=same"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No problems found" in proc.stdout + proc.stderr


def test_scalar_floor_is_the_exp_log_sum():
    """The benchmark's compiled scalar floor computes what it claims to time."""
    module = _import("bench_inference")
    rng = np.random.default_rng(0)
    exp_input, log_input = rng.normal(size=1000), rng.uniform(1, 2, size=500)
    expected = np.exp(exp_input).sum() + np.log(log_input).sum()
    assert module.scalar_exp_log(exp_input, log_input) == pytest.approx(expected, rel=1e-12)
