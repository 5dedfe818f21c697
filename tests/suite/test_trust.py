"""Numbers a reader can rely on: the paper's table, a cell cache that knows the code, the
provenance of every row and report, and seeded results that do not depend on threads or CPU."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from slr.suite.cli import run_experiments
from slr.suite import provenance, store
from slr.suite.render_denoising import PAPER_TEST_ERROR, far_from_paper

REPO = Path(__file__).resolve().parents[2]


def test_paper_table_is_the_papers():
    """Table 1 of the NIPS paper, placed as the comment above the constant argues."""
    classes = ["Zero", "Constant", "Linear", "Boost", "MLP"]
    rows = {
        "Zero": [.502, .502, .502, .511, .502],
        "Constant": [.502, .502, .502, .510, .502],
        "Linear": [.444, .077, .059, .049, .034],
        "Boost": [.444, .034, .015, .009, .007],
        "MLP": [.445, .032, .015, .009, .008],
    }
    assert PAPER_TEST_ERROR == {u: dict(zip(classes, values)) for u, values in rows.items()}


def test_far_from_paper_uses_the_tolerance():
    df = pd.DataFrame(dict(unary=["Boost", "Boost", "MLP"], pairwise=["Boost", "MLP", "MLP"],
                           test_error=[0.019, 0.0165, 0.0181]))
    far = far_from_paper(df)
    assert list(zip(far.unary, far.pairwise)) == [("MLP", "MLP")]   # .0181 - .008 > .01; .019 - .009 is not
    assert far["paper"].iloc[0] == 0.008


# ------------------------------------------------------------------------------------ cache
def _one_cell(out: Path, **kwargs):
    return run_experiments(["denoising"], "tiny", out, quiet=True, cells="Linear/Constant", **kwargs)


def test_cell_reused_then_recomputed_when_code_config_or_dependency_changes(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    name = "denoising:Linear-Constant"
    assert _one_cell(tmp_path / "a", cache_dir=cache).computed == [name]
    assert _one_cell(tmp_path / "b", cache_dir=cache).computed == []          # reused, other output dir
    first = pd.read_csv(tmp_path / "a" / "denoising_results.csv")
    assert first.equals(pd.read_csv(tmp_path / "b" / "denoising_results.csv"))
    assert _one_cell(tmp_path / "b", cache_dir=cache, read_cache=False).computed == [name]   # --no-cache

    # another code fingerprint
    monkeypatch.setattr(provenance, "code_fingerprint", lambda: "0123456789ab")
    assert _one_cell(tmp_path / "c", cache_dir=cache).computed == [name]
    assert _one_cell(tmp_path / "c", cache_dir=cache).computed == []
    assert pd.read_csv(tmp_path / "c" / "denoising_results.csv", dtype={"code": str}).code.tolist() == ["0123456789ab"]
    monkeypatch.undo()

    # another version of a dependency
    versions = dict(provenance.dependency_versions(), numpy="0.0.1")
    monkeypatch.setattr(provenance, "dependency_versions", lambda: versions)
    assert _one_cell(tmp_path / "d", cache_dir=cache).computed == [name]
    monkeypatch.undo()

    # another configuration of the experiment
    import slr.suite.profiles as profiles

    tiny = profiles.PROFILES["tiny"]
    monkeypatch.setitem(profiles.PROFILES, "tiny",
                        tiny.with_spec("denoising", replace(tiny.spec("denoising"), n_iter=3)))
    assert _one_cell(tmp_path / "e", cache_dir=cache).computed == [name]
    df = pd.read_csv(tmp_path / "e" / "denoising_results.csv")
    assert df.n_iter.tolist() == [3]


def _copy_install(dest: Path) -> None:
    """The package as a wheel installs it (the baselines and the suite inside ``slr``): sources,
    compiled kernels and their build record."""
    for directory, installed in (("slr", "slr"), ("baselines", "slr/baselines"), ("slr_suite", "slr/suite")):
        shutil.copytree(REPO / directory, dest / installed, ignore=shutil.ignore_patterns("*.c", "__pycache__"))


_PROBE = """
import importlib.util, json, pathlib, sys, warnings
assert importlib.util.find_spec('slr').origin.startswith(sys.argv[1]), 'the copy is not found first'
spec = importlib.util.spec_from_file_location('prov', pathlib.Path(sys.argv[1]) / 'slr/suite/provenance.py')
prov = sys.modules['prov'] = importlib.util.module_from_spec(spec); spec.loader.exec_module(prov)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    try:
        print(json.dumps(dict(code=prov.code_fingerprint(), warnings=[str(w.message) for w in caught])))
    except prov.StaleKernelsError as exc:
        print(json.dumps(dict(refused=str(exc))))
"""


def _probe(tree: Path) -> dict:
    """What ``code_fingerprint()`` says in a process that imports the packages from ``tree``."""
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(tree)], capture_output=True, text=True, timeout=300,
                          cwd=tree)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _edit_record(tree: Path, **inputs) -> None:
    """What a rebuild records: the new inputs of the kernels."""
    path = tree / "slr" / provenance.BUILD_RECORD
    record = json.loads(path.read_text())
    record["inputs"].update(inputs)
    path.write_text(json.dumps(record))


@pytest.fixture(scope="module")
def installed_copy(tmp_path_factory) -> Path:
    tree = tmp_path_factory.mktemp("tree")
    _copy_install(tree)
    return tree


def test_fingerprint_is_the_installs_and_ignores_editor_files(installed_copy, tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(installed_copy, tree, symlinks=True)
    assert _probe(tree) == dict(code=provenance.code_fingerprint(), warnings=[])
    with open(tree / "slr" / "suite" / "markdown.py", "a") as fh:
        fh.write("\n# a render-only edit\n")
    # an Emacs lock file: a dangling symlink with a source's suffix
    os.symlink("root@host.1234:1700000000", tree / "slr" / ".#learner.py")
    os.symlink("root@host.1234:1700000000", tree / "slr" / "inference" / ".#_star.pyx")
    probe = _probe(tree)
    assert probe["code"] == provenance.code_fingerprint()
    assert any(".#learner.py: not a source file" in w for w in probe["warnings"])


@pytest.mark.parametrize("source", ["slr/inference/_star_simd.h", "slr/inference/_star.pyx", "slr/_kernel_utils.pxd"])
def test_kernel_sources_edited_and_not_rebuilt_are_refused(installed_copy, tmp_path, source):
    """An edited header, kernel or declaration with the old binary is refused; once
    rebuilt (the build records the new sources) the key is a new one."""
    tree = tmp_path / "tree"
    shutil.copytree(installed_copy, tree, symlinks=True)
    with open(tree / source, "a") as fh:
        fh.write("\n/* an edit */\n" if source.endswith(".h") else "\n# an edit\n")
    assert "the kernels are older than their sources" in _probe(tree)["refused"]
    roots = {"slr": tree / "slr"}
    _edit_record(tree, sources=provenance.kernel_sources_digest(roots))
    rebuilt = _probe(tree)["code"]
    assert rebuilt != provenance.code_fingerprint()


@pytest.mark.parametrize("change", [dict(cython="0.29.0"), dict(directives={"boundscheck": True}),
                                    dict(compiler=["gcc", "-O0"])])
def test_fingerprint_follows_the_build_settings(installed_copy, tmp_path, change):
    tree = tmp_path / "tree"
    shutil.copytree(installed_copy, tree, symlinks=True)
    _edit_record(tree, **change)
    assert _probe(tree)["code"] != provenance.code_fingerprint()


def test_a_binary_not_from_the_recorded_build_is_refused(installed_copy, tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(installed_copy, tree, symlinks=True)
    (binary,) = (tree / "slr" / "oracles" / "_boosting").glob("growth*.so")
    with open(binary, "ab") as fh:
        fh.write(b"\0")
    refused = _probe(tree)["refused"]
    assert str(binary) in refused and "not the one the build recorded" in refused
    (tree / "slr" / provenance.BUILD_RECORD).unlink()
    assert "no build record of the kernels" in _probe(tree)["refused"]


def test_stale_kernels_never_fill_the_cache(installed_copy, tmp_path):
    """The whole command: an edited kernel source exits 1 with one line before computing, and
    the cache stays empty; ``--render-only`` still renders."""
    tree = tmp_path / "tree"
    shutil.copytree(installed_copy, tree, symlinks=True)
    with open(tree / "slr" / "inference" / "_star.pyx", "a") as fh:
        fh.write("\n# edited, not rebuilt\n")
    cache, out = tmp_path / "cache", tmp_path / "out"
    cmd = [sys.executable, "-m", "slr.suite", "denoising", "--tiny", "--cells", "Zero/Zero", "--out", str(out),
           "--cache-dir", str(cache)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tree)
    assert proc.returncode == 1
    assert "the kernels are older than their sources" in proc.stderr and "run make venv" in proc.stderr
    assert not [p for p in cache.rglob("*") if p.name != ".slr.lock"]
    proc = subprocess.run(cmd + ["--render-only"], capture_output=True, text=True, timeout=300, cwd=tree)
    assert proc.returncode == 0, proc.stderr


def test_fresh_output_dir_in_a_clone_with_committed_csvs_computes(tmp_path):
    """Committed CSVs (older layout, or rows from another commit) never stand in for the cache."""
    out = tmp_path / "reports"
    out.mkdir()
    committed = "config,unary,pairwise,train_error,test_error,objective,n_iter,seconds\nx,Linear,Constant,0,0,0,2,1\n"
    (out / "denoising_results.csv").write_text(committed)
    (out / store.MANIFEST).write_text("denoising_results.csv\n")   # a clone's reports/ lists slr's files
    log = _one_cell(out, cache_dir=tmp_path / "empty-cache")
    assert log.computed == ["denoising:Linear-Constant"]
    backups = list(out.glob("denoising_results.csv.damaged-*"))
    assert len(backups) == 1 and backups[0].read_text() == committed    # set aside, not lost
    df = pd.read_csv(out / "denoising_results.csv", dtype={"code": str})
    assert df.code.tolist() == [provenance.code_fingerprint()]


def test_rows_and_reports_carry_their_provenance(tmp_path):
    out = tmp_path / "r"
    run_experiments(["denoising", "bound"], "tiny", out, quiet=True, cells="Zero/Zero,Boost/Zero",
                    cache_dir=tmp_path / "cache", argv=["slr", "denoising", "--tiny"])
    commit, dirty = provenance.git_state()
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=10", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    assert commit == (head or "unknown")   # the checkout's own commit, read independently
    for csv in ("denoising_results.csv", "bound_results.csv"):
        df = pd.read_csv(out / csv, dtype={"commit": str, "code": str})
        assert (df.commit == commit).all() and (df.dirty == dirty).all()
        assert (df.code == provenance.code_fingerprint()).all()
        assert (df.command == "slr denoising --tiny").all()
        assert df.machine.str.contains(os.uname().machine).all()
    # rows from another run are named as such in the report
    from slr.suite.denoising import TABLES

    results = TABLES[0].open(out, print)
    older = dict(results.rows()[0], commit="abcdef1234", dirty="False", code="feedfeedfeed",
                 command="slr denoising --full")
    results.upsert([older])
    run_experiments(["denoising"], "tiny", out, quiet=True, cells="Boost/Zero", cache_dir=tmp_path / "cache",
                    argv=["slr", "denoising", "--tiny", "--cells", "Boost/Zero"])
    text = (out / "denoising.md").read_text()
    assert "`slr denoising --full` at commit `abcdef1234` (code `feedfeedfeed`)" in text
    assert f"(code `{provenance.code_fingerprint()}`)" in text
    assert "come from 2 commits and 2 code versions" in text
    assert "Rendered by `slr denoising --tiny --cells Boost/Zero`" in text


# ------------------------------------------------------------------------------ determinism
def _fit_cell(unary: str, pairwise: str, n_threads: int) -> tuple[float, float, np.ndarray]:
    from slr import StructuredLogisticRegression
    from slr.datasets import make_denoising
    from slr.suite.profiles import get_profile

    cfg = replace(get_profile("tiny").spec("denoising"), trees=dict(n_rounds=5, subsample=500),
                  mlp=dict(n_hidden=8, n_epochs=1, batch_size=50))
    X, Y = make_denoising(n_images=2, size=12, sigma=2.0, random_state=3)
    model = StructuredLogisticRegression(unary=cfg.oracle(unary, "unary").build(0),
                                         pairwise=cfg.oracle(pairwise, "pairwise").build(0), epsilon=0.1,
                                         max_iter=3, max_sweeps=10, n_jobs=n_threads, random_state=0)
    model.fit(X, Y)
    return float(model.score(X, Y)), float(model.history_["objective"].iloc[-1]), np.asarray(model.predict(X[:1])[0])


@pytest.mark.parametrize("cell", [("Boost", "Boost"), ("MLP", "MLP")])
def test_seeded_cells_identical_across_threads_and_reruns(cell):
    runs = [_fit_cell(*cell, n_threads=t) for t in (1, 2, 1, 2)]
    for score, objective, pred in runs[1:]:
        assert score == runs[0][0] and objective == runs[0][1]
        assert np.array_equal(pred, runs[0][2])


def test_trees_identical_with_ties_across_threads_and_refits():
    """Features full of ties (the constant column of every denoising example, integer pixels)."""
    from slr.oracles import BoostedTrees

    rng = np.random.default_rng(0)
    features = np.column_stack([rng.integers(0, 4, 3000), np.ones(3000), rng.integers(0, 2, 3000)]).astype(float)
    labels = (features[:, 0] + rng.integers(0, 2, 3000) > 2).astype(np.int64)
    bias = rng.normal(size=(3000, 2))
    fits = []
    for n_jobs in (1, 2, 1):
        trees = BoostedTrees(n_rounds=10, subsample=1000, n_jobs=n_jobs, random_state=0)
        trees.fit(features, bias, labels)
        fits.append(trees)
    for other in fits[1:]:
        for attr in ("node_feature_", "node_threshold_", "node_value_", "tree_offsets_"):
            assert np.array_equal(getattr(other, attr), getattr(fits[0], attr)), attr


_CROSS_CPU_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from test_trust import _fit_cell
print(json.dumps({f"{u}/{p}": _fit_cell(u, p, 2)[:2] for u, p in [("Boost", "Boost"), ("Linear", "Linear"),
                                                                  ("MLP", "MLP")]}))
"""


@pytest.mark.slow
def test_results_do_not_depend_on_the_cpus_simd_or_blas_kernels():
    """Emulate an AVX2-only x86-64 machine (an AMD EPYC, say) on this one: numpy without its AVX-512
    loops and OpenBLAS with its Haswell kernels. Trees are bit-identical; BLAS kernels legitimately
    sum in another order, so Linear and MLP objectives agree to 1e-6 relative and errors exactly."""
    env = dict(os.environ, NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR", OPENBLAS_CORETYPE="Haswell")
    results = {}
    for name, environ in (("native", dict(os.environ)), ("avx2", env)):
        proc = subprocess.run([sys.executable, "-c", _CROSS_CPU_SCRIPT, str(Path(__file__).parent)],
                              capture_output=True, text=True, timeout=600, env=environ)
        assert proc.returncode == 0, proc.stderr
        results[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    native, avx2 = results["native"], results["avx2"]
    assert native["Boost/Boost"] == avx2["Boost/Boost"]
    for cell in ("Linear/Linear", "MLP/MLP"):
        assert native[cell][0] == avx2[cell][0]
        assert native[cell][1] == pytest.approx(avx2[cell][1], rel=1e-6)
