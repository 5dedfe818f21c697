"""Keep the asv suite from rotting: its structure, and each benchmark run once.

Every benchmark class derives from ``common.Benchmark``; estimator benchmarks fit in their own
``setup_cache`` and no ``track_`` method fits. Each benchmark runs its ``setup`` and body once
on the first value of every parameter (the smallest problem), as asv would, without timing.
Classes listed in ``IMPORT_ONLY`` are too expensive for the test suite (hundreds of boosting
rounds on 300k rows; slr and CRFsuite on all letters words or whole tagged corpora) and are only checked for
discoverability; estimator benchmarks (a fit per
parameter combination in ``setup_cache``) are run through one cheap combination below.
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

ROOT = Path(__file__).resolve().parents[2] / "asv_benchmarks"
PREFIXES = ("time_", "peakmem_", "mem_", "track_", "timeraw_")
IMPORT_ONLY = {("bench_trees", "Ratios"), ("bench_trees", "TrainingLoss"),
               ("bench_learner", "SnakesDefaultsAgainstOneSlack"), ("bench_tagging", "TaggingAgainstCRFsuite")}
ESTIMATOR_SMOKE = {"bench_learner": ("Learner", ("Linear",)),
                   "bench_baselines": ("Baseline", ("denoising", "PiecewiseTraining")),
                   "bench_oracles": ("OracleFit", ("unary_20k_K2", "Linear")),
                   "bench_small": ("SmallChain", ("defaults",)),
                   "bench_sparse": ("SparseChains", (10_000, 10_000)),
                   "bench_trees": ("BoostingRound", ("unary_160k_K2", "LightGBM"))}
#: Module constants the run-once test shrinks: the benchmark's code runs as asv runs it, on less
#: data (the wide problem's 20,000 x 128 rows and 26 classes took 45 of bench_trees' seconds here)
SMOKE_SIZES = {"bench_trees": {"WIDE": (1_000, 16, 12)}}   # 12 classes: still one tree per class


def _modules() -> list[str]:
    return sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if p.stem != "__init__")


def _import(name: str):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(f"benchmarks.{name}")


def _common():
    return _import("common")


def _classes():
    """``(module name, class)`` for every benchmark class asv discovers (abstract ones it skips)."""
    found = {(name, cls) for name in _modules() for cls, _ in _benchmarks(_import(name))
             if cls is not None and not inspect.isabstract(cls)}
    return sorted(found, key=lambda item: (item[0], item[1].__name__))


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
def test_benchmark_module_runs_once(name, monkeypatch):
    module = _import(name)
    for attribute, value in SMOKE_SIZES.get(name, {}).items():
        assert hasattr(module, attribute), (name, attribute)
        monkeypatch.setattr(module, attribute, value)
    benches = _benchmarks(module)
    if name != "common":
        assert benches, f"{name} defines no asv benchmarks"
    for cls, method in benches:
        if cls is None:
            getattr(module, method)()
            continue
        if (name, cls.__name__) in IMPORT_ONLY or issubclass(cls, _common().Estimator):
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


def test_every_benchmark_class_derives_from_benchmark():
    classes = _classes()
    assert classes
    assert all(issubclass(cls, _common().Benchmark) for _, cls in classes), classes


def test_estimator_benchmarks_fit_in_their_own_setup_cache():
    """asv keys caches by the ``setup_cache`` definition's module and line: one per class."""
    from asv_runner.benchmarks._base import get_setup_cache_key

    estimators = {cls for _, cls in _classes() if issubclass(cls, _common().Estimator)}
    assert {cls.__name__ for cls in estimators} == {c for c, _ in ESTIMATOR_SMOKE.values()}
    keys = [get_setup_cache_key(cls().setup_cache) for cls in estimators]
    assert all(keys) and len(set(keys)) == len(keys), keys
    assert all("setup_cache" in vars(cls) for cls in estimators)


@pytest.mark.parametrize("name", sorted(ESTIMATOR_SMOKE))
def test_estimator_benchmark_runs_once_without_fitting_in_track(name, monkeypatch):
    """``setup_cache`` fits one cheap combination; predict and the scores then read that fit."""
    class_name, params = ESTIMATOR_SMOKE[name]
    cls = getattr(_import(name), class_name)
    bench = cls()
    monkeypatch.setattr(cls, "params", [[value] for value in params])
    cache = bench.setup_cache()
    assert list(cache) == [params]
    bench.setup(cache, *params)
    bench.time_predict(cache, *params)

    def no_fit(*args):
        raise AssertionError("a track_ method fitted")

    monkeypatch.setattr(cls, "fit", staticmethod(no_fit))
    monkeypatch.setattr(cls, "make_estimator", no_fit)
    for method in [m for m in dir(cls) if m.startswith("track_")]:
        value = getattr(bench, method)(cache, *params)
        assert isinstance(value, float) and value == value, (method, value)
        if method.endswith("_score"):
            assert 0.0 <= value <= 1.0, (method, value)
