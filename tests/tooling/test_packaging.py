"""The release artefacts install into fresh virtual environments and work there.

As a release would: ``python -m build --sdist`` on a clean copy of the checkout, then the
wheel built from the unpacked sdist (as pip does for users who install the sdist). Both
pass ``twine check --strict`` and hold what they should. Each is installed with pip into
its own new virtual environment -- the sdist as a user installing it from an index would,
compiling the kernels -- and runs there a smoke inference (``smoothed_lp`` on a small grid,
against ``exact_smoothed`` of the checkout) and a two-iteration learner fit (against the same
fit in this process). The sdist install and the wheel build (each compiling the kernels)
run in parallel. And ``setup.py`` refuses to build without one of its kernel sources.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 1800  # seconds for one build or install (cold caches download ~200 MB)
KERNEL_SUFFIXES = (".pyx", ".pxd", ".h")  # sources and the declarations or C headers they include
# What a fresh clone does not have (build products) or the sdist does not take (large).
_TOP_LEVEL_NOT_COPIED = {".git", ".venv", ".cache", ".hypothesis", ".pytest_cache", "build",
                         "dist", "reports", "asv_benchmarks"}
_GENERATED = (".so", ".pyd", ".c", ".pyc", ".egg-info")
#: What make docs generates inside docs/ (gitignored; pruned from the sdist by MANIFEST.in)
_DOCS_GENERATED = ("docs/_build/", "docs/api/", "docs/auto_examples/", "docs/sg_execution_times.rst")

SMOKE = r"""
import json, sys
import numpy as np
import slr
from slr import StructuredLogisticRegression
from slr.datasets import make_denoising
from slr.inference import smoothed_lp
from slr.oracles import Linear

problem = np.load(sys.argv[1])
inference = smoothed_lp(problem["theta_nodes"], problem["theta_edges"], problem["edges"],
                        float(problem["epsilon"]), max_sweeps=10_000, tol=1e-12)
X, Y = make_denoising(n_images=2, size=6, sigma=1.0, random_state=0)
model = StructuredLogisticRegression(unary=Linear(), pairwise=Linear(), max_iter=2,
                                     n_jobs=1, random_state=0).fit(X, Y)
print(json.dumps({
    "slr_file": slr.__file__,
    "value": inference.value,
    "converged": bool(inference.converged),
    "objective": model.history_["objective"].tolist(),
    "prediction": np.concatenate(model.predict(X)).tolist(),
}))
"""


def _not_copied(directory: str, names: list) -> set:
    """``shutil.copytree`` filter: the checkout as a fresh clone has it, less large extras."""
    ignored = {n for n in names if n == "__pycache__" or n.endswith(_GENERATED)}
    if Path(directory) == ROOT:
        ignored |= _TOP_LEVEL_NOT_COPIED.intersection(names)
    elif Path(directory) == ROOT / "docs":   # what a docs build in another test process rewrites now
        ignored |= {Path(p).name for p in _DOCS_GENERATED}.intersection(names)
    return ignored


def _run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    """Run ``cmd`` isolated from this process's Python setup; fail with its output if it fails."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env,
                            timeout=TIMEOUT, **kwargs)
    if result.returncode != 0:
        output = (result.stdout + result.stderr)[-4000:]
        pytest.fail(f"{' '.join(map(str, cmd))} exited with {result.returncode}:\n{output}")
    return result


def _python(env_dir: Path) -> Path:
    return env_dir / ("Scripts" if os.name == "nt" else "bin") / "python"


def _fresh_env(env_dir: Path, requirement: str) -> Path:
    """A new virtual environment with ``requirement`` installed by pip; its python."""
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = _python(env_dir)
    # --no-compile: byte-compiling the ~700 MB of dependencies would double the install time
    _run([python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
          "--progress-bar", "off", "--no-compile", requirement])
    return python


def _sdist_requirement(sdist: Path) -> str:
    """A pip requirement for the sdist file.

    The hash in the URL keys pip's cache of wheels built from sdists, so a later run with
    the same path (``--basetemp``) and other contents is never served a stale build.
    """
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    return f"slr @ {sdist.as_uri()}#sha256={digest}"


@pytest.fixture(scope="module")
def artefacts(tmp_path_factory) -> dict:
    """Build both artefacts and install each into its own fresh virtual environment."""
    tmp = tmp_path_factory.mktemp("packaging")
    source, dist = tmp / "source", tmp / "dist"
    shutil.copytree(ROOT, source, ignore=_not_copied)
    _run([sys.executable, "-m", "build", "--sdist", "--outdir", dist, source])
    (sdist,) = dist.glob("*.tar.gz")
    with ThreadPoolExecutor(max_workers=1) as pool:
        sdist_env = pool.submit(_fresh_env, tmp / "env-sdist", _sdist_requirement(sdist))
        with tarfile.open(sdist) as archive:
            if hasattr(tarfile, "data_filter"):
                archive.extractall(tmp / "unpacked", filter="data")
            else:  # Python < 3.10.12 / 3.11.4; the archive is our own
                archive.extractall(tmp / "unpacked")
        (unpacked,) = (tmp / "unpacked").iterdir()
        _run([sys.executable, "-m", "build", "--wheel", "--outdir", dist, unpacked])
        (wheel,) = dist.glob("*.whl")
        wheel_python = _fresh_env(tmp / "env-wheel", str(wheel))
        sdist_python = sdist_env.result()
    return {"sdist": sdist, "wheel": wheel, "tmp": tmp,
            "python": {"sdist": sdist_python, "wheel": wheel_python}}


def _checkout_files(suffixes: tuple, *roots: str) -> set:
    """Paths (relative, POSIX) of the checkout's files under ``roots`` ending in ``suffixes``."""
    return {
        path.relative_to(ROOT).as_posix()
        for root in roots
        for path in (ROOT / root).rglob("*")
        if path.is_file() and path.suffix in suffixes
    }


def _setup_py_with_kernels(tmp_path: Path, kernels: set) -> subprocess.CompletedProcess:
    """Run ``setup.py --name`` in a directory holding setup.py and the given kernel files."""
    shutil.copy(ROOT / "setup.py", tmp_path)
    for kernel in kernels:
        (tmp_path / kernel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / kernel).write_text("# a kernel\n")
    return subprocess.run([sys.executable, "setup.py", "--name"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("source", ["slr/oracles/_boosting/growth.pyx", "slr/_kernel_utils.pxd"])
def test_setup_py_fails_loudly_without_a_kernel_source(tmp_path, source):
    kernels = _checkout_files(KERNEL_SUFFIXES, "slr", "baselines")
    assert source in kernels
    result = _setup_py_with_kernels(tmp_path, kernels - {source})
    assert result.returncode != 0
    assert f"kernel sources missing: {source}" in result.stderr


@pytest.mark.parametrize("source, listing", [("slr/graph_kernel/_new.pyx", "KERNELS"),
                                             ("slr/graph_kernel/_new.pxd", "DECLARATIONS")])
def test_setup_py_fails_loudly_on_an_unlisted_kernel(tmp_path, source, listing):
    kernels = _checkout_files(KERNEL_SUFFIXES, "slr", "baselines") | {source}
    result = _setup_py_with_kernels(tmp_path, kernels)
    assert result.returncode != 0
    assert f"add {source} to {listing}" in result.stderr


def test_twine_check_passes(artefacts):
    _run([sys.executable, "-m", "twine", "check", "--strict", artefacts["sdist"],
          artefacts["wheel"]])


def test_sdist_holds_the_sources_and_no_generated_code(artefacts):
    with tarfile.open(artefacts["sdist"]) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    required = {"README.md", "pyproject.toml", "setup.py", "MANIFEST.in", "tests/conftest.py"}
    required |= _checkout_files(KERNEL_SUFFIXES, "slr", "baselines")
    required |= {p.name for p in ROOT.glob("LICEN[CS]E*")}
    if (ROOT / "docs").is_dir():
        required |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*")
                     if p.is_file() and "__pycache__" not in p.parts
                     and not p.relative_to(ROOT).as_posix().startswith(_DOCS_GENERATED)}
    assert {"slr/inference/_star.pyx", "slr/oracles/_boosting/growth.pyx"} <= required
    assert required <= names, sorted(required - names)
    generated = sorted(n for n in names if n.endswith((".c", ".so", ".pyd", ".pyc")))
    assert not generated
    assert not any(n.startswith(("build/", "dist/", "reports/", *_DOCS_GENERATED)) for n in names)


def test_wheel_holds_the_package_and_compiled_kernels_only(artefacts):
    with zipfile.ZipFile(artefacts["wheel"]) as archive:
        names = archive.namelist()
        entry_points = next(archive.read(n).decode() for n in names
                            if n.endswith(".dist-info/entry_points.txt"))
    dist_info = "-".join(artefacts["wheel"].name.split("-")[:2]) + ".dist-info"
    # one top-level package: the baselines and the suite (the CLI) install inside it
    assert {name.split("/", 1)[0] for name in names} == {"slr", dist_info}
    assert "slr/baselines/ssvm.py" in names and "slr/suite/cli.py" in names
    # every kernel, and Cython's utility code that they all import (setup.py's SHARED_UTILITY)
    for stem in [k.removesuffix(".pyx") for k in _checkout_files((".pyx",), "slr", "baselines")] + ["slr/_cyutility"]:
        assert any(n.startswith(stem + ".") and n.endswith((".so", ".pyd")) for n in names), stem
    assert not [n for n in names if n.endswith((".c", ".pyx", ".pxd", ".pyc", ".o"))]
    assert "slr = slr.suite.cli:main" in entry_points


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """The smoke problem, with its values computed here from the checkout."""
    from slr import StructuredLogisticRegression
    from slr.datasets import make_denoising
    from slr.graph import grid_edges
    from slr.inference.exact import exact_smoothed
    from slr.oracles import Linear

    rng = np.random.default_rng(7)
    edges = grid_edges(3, 4)
    problem = {
        "theta_nodes": rng.normal(size=(12, 2)),
        "theta_edges": rng.normal(size=(edges.shape[0], 2, 2)),
        "edges": edges,
        "epsilon": 0.5,
    }
    path = tmp_path_factory.mktemp("smoke") / "problem.npz"
    np.savez(path, **problem)
    X, Y = make_denoising(n_images=2, size=6, sigma=1.0, random_state=0)
    model = StructuredLogisticRegression(unary=Linear(), pairwise=Linear(), max_iter=2,
                                         n_jobs=1, random_state=0).fit(X, Y)
    return {
        "path": path,
        "value": exact_smoothed(problem["theta_nodes"], problem["theta_edges"], edges,
                                problem["epsilon"]).value,
        "objective": model.history_["objective"].to_numpy(),
        "prediction": np.concatenate(model.predict(X)),
    }


@pytest.mark.parametrize("kind", ["sdist", "wheel"])
def test_installed_package_infers_and_learns(artefacts, reference, kind):
    python = artefacts["python"][kind]
    env_dir = python.parent.parent.resolve()
    # -I: neither the working directory nor PYTHON* variables can bring in the checkout
    result = _run([python, "-I", "-c", SMOKE, reference["path"]], cwd=artefacts["tmp"])
    smoke = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(smoke["slr_file"]).resolve().is_relative_to(env_dir)
    assert smoke["converged"]
    assert smoke["value"] == pytest.approx(reference["value"], rel=1e-7)
    assert len(smoke["objective"]) == 3  # start and two iterations
    # the same code as the checkout's, up to the dependencies' versions
    np.testing.assert_allclose(smoke["objective"], reference["objective"], rtol=1e-6)
    np.testing.assert_array_equal(smoke["prediction"], reference["prediction"])
    _run([python.parent / "slr", "--help"])


_FINGERPRINT = "from slr.suite.provenance import code_fingerprint; print(code_fingerprint())"


@pytest.mark.parametrize("kind", ["sdist", "wheel"])
def test_installed_package_shares_the_checkouts_cache_keys(artefacts, kind):
    """An editable install (this checkout) and a wheel or sdist install of the same sources,
    built with the same Cython, NumPy, compiler and flags, have one code fingerprint, so one
    cache key per cell: the fingerprint names the kernels' build inputs (the wheel has no
    ``.pyx``), and each install checks its own binaries against its own build record."""
    from slr.suite.provenance import code_fingerprint

    result = _run([artefacts["python"][kind], "-I", "-c", _FINGERPRINT], cwd=artefacts["tmp"])
    assert result.stdout.strip().splitlines()[-1] == code_fingerprint()
