"""End-to-end tests of the ``slr`` command line on the tiny profile, and of resuming."""
from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from slr.suite.cli import build_parser, main, run_experiments
from slr.suite import bound as bound_mod
from slr.suite import get_profile
from slr.suite.profiles import FUNCTION_CLASSES

REPORT_FILES = ["README.md", "denoising.md", "baselines.md", "bound.md", "calibration.md",
                "denoising_results.csv", "baselines_results.csv", "bound_results.csv", "calibration_results.csv",
                "calibration_bins.csv", "partial_labels.md", "partial_labels_results.csv"]
FIGURES = ["denoising_curves.png", "denoising_energies.png", "denoising_examples.png",
           "baselines_time.png", "bound.png", "calibration.png"]


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reports")
    assert main(["report", "--tiny", "--quiet", "--out", str(out)]) == 0
    return out


def test_every_report_file_written(tiny_report):
    for name in REPORT_FILES:
        assert (tiny_report / name).stat().st_size > 0, name
    for name in FIGURES:
        data = (tiny_report / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000, name
    index = (tiny_report / "README.md").read_text()
    for md in ("denoising.md", "baselines.md", "bound.md", "calibration.md", "generalisation.md", "partial_labels.md"):
        assert f"]({md})" in index
        text = (tiny_report / md).read_text()
        # provenance: the run that computed the rows (command, commit, code, machine) and the render
        assert re.search(r"- `slr report --tiny[^`]*` at commit `([0-9a-f]{4,}|unknown)(\+dirty)?` "
                         r"\(code `[0-9a-f]{12}`\) on Linux", text), md
        assert "Rendered by `slr report --tiny" in text


def test_denoising_table_is_complete_and_sane(tiny_report):
    df = pd.read_csv(tiny_report / "denoising_results.csv")
    beside = set(get_profile("tiny").spec("denoising").beside)
    assert beside == {("ChapterBoost", "ChapterBoost")}
    assert len(df) == len(FUNCTION_CLASSES) ** 2 + len(beside)
    assert set(zip(df.unary, df.pairwise)) == {(u, p) for u in FUNCTION_CLASSES for p in FUNCTION_CLASSES} | beside
    for col in ("train_error", "test_error"):
        assert df[col].between(0.0, 1.0).all()
    # An error rate on 2 tiny test images is a multiple of 1 / (number of test pixels).
    data = get_profile("tiny").spec("denoising").data
    n_pix = data.n_test * data.size ** 2
    assert np.allclose(df.test_error * n_pix, np.round(df.test_error * n_pix))
    text = (tiny_report / "denoising.md").read_text()
    assert "0.444" in text and "0.502" in text        # the paper's values beside ours
    # every cell of the markdown table holds a number (ours) and the paper's in parentheses
    rows = [line for line in text.splitlines() if line.startswith("| Linear ")]
    assert rows and len(re.findall(r"\d\.\d{3} \(\d\.\d{3}\)", rows[0])) == len(FUNCTION_CLASSES)
    # the chapter's protocol in its own section, not in Table 1
    assert "## Boosting: the chapter's protocol beside the NIPS paper's" in text
    chapter = df[df.unary == "ChapterBoost"].iloc[0]
    assert re.search(rf"\| ChapterBoost/ChapterBoost \| {chapter.test_error:.3f} \|", text)
    assert not any(line.startswith("| ChapterBoost |") for line in text.splitlines())


def test_baselines_table_is_sane(tiny_report):
    from slr.datasets.letters import letters_cache_path

    df = pd.read_csv(tiny_report / "baselines_results.csv")
    datasets = {"denoising", "letters"} if letters_cache_path().exists() else {"denoising"}
    assert set(df.dataset) == datasets
    ok = df[df.status == "ok"]
    # slr and every one of our baselines ran on each data set
    for dataset in datasets:
        methods = set(ok[ok.dataset == dataset].method)
        assert "slr:Linear" in methods
        assert {"OneSlackSSVM", "SubgradientSSVM", "StructuredPerceptron"} <= methods
    assert ok.train_error.between(0, 1).all() and ok.test_error.between(0, 1).all()
    assert (ok.seconds >= 0).all()
    assert "Target test error" in (tiny_report / "baselines.md").read_text()


def test_bound_holds_and_matches_exact_solvers(tiny_report):
    from slr.inference.exact import brute_force_map, exact_lp

    df = pd.read_csv(tiny_report / "bound_results.csv")
    cfg = get_profile("tiny").spec("bound")
    assert len(df) == cfg.n_graphs * len(cfg.epsilons)
    assert df.holds.all()
    tol = bound_mod.TOL
    assert (df.l0 <= df.l1 + tol).all() and (df.l1 <= df.l + tol).all()
    assert (df.l <= df.l1 + df.eps_hmax + tol).all()
    assert np.allclose(df.l_mp, df.l, atol=1e-6)   # message passing agrees with Clarabel
    trees = df[df.kind == "tree"]
    assert len(trees) and np.allclose(trees.l0, trees.l1, atol=1e-6)
    # recompute one row independently
    row = df.iloc[-1]
    kind, edges, tn, te, y = bound_mod.random_problem(int(row.graph), cfg.max_nodes, cfg.states)
    L = tn.shape[1]
    theta = tn + (np.arange(L)[None, :] != y[:, None])
    f_y = tn[np.arange(len(y)), y].sum() + te[np.arange(len(edges)), y[edges[:, 0]], y[edges[:, 1]]].sum()
    assert math.isclose(brute_force_map(theta, te, edges)[0] - f_y, row.l0, abs_tol=1e-9)
    assert math.isclose(exact_lp(theta, te, edges).value - f_y, row.l1, abs_tol=1e-6)


def test_calibration_scores_match_enumeration_and_the_exact_smoothed_lp(tiny_report):
    """The tiny calibration's 3 x 3 denoising images: its exact marginals' NLL against enumerating
    all 512 labellings, its LP marginals' NLL against the smoothed LP solved by Clarabel."""
    import itertools

    from scipy.special import logsumexp

    from slr.inference.exact import exact_smoothed
    from slr.metrics import node_log_loss
    from slr.suite import calibration

    spec = get_profile("tiny").spec("calibration")
    df = pd.read_csv(tiny_report / "calibration_results.csv")
    bins = pd.read_csv(tiny_report / "calibration_bins.csv")
    assert len(df) == 2 * len(spec.epsilons) * 2
    rows = df[df.dataset == "denoising"].set_index("method")
    counted = bins.groupby(["dataset", "epsilon", "method"])["count"].sum()
    assert counted.to_dict() == df.set_index(["dataset", "epsilon", "method"])["n_nodes"].to_dict()
    eps = spec.epsilons[0]
    Xtr, Ytr, Xte, Yte = spec.denoise.load()
    model = calibration._learner("denoising", eps, spec.max_iter, 1).fit(Xtr, Ytr)
    exact, lp = [], []
    for nodes, edges, on_edges in Xte:
        theta_nodes = eps * model.unary_.decision_function(nodes)
        theta_edges = eps * model.pairwise_.decision_function(on_edges).reshape(-1, 2, 2)
        labellings = np.array(list(itertools.product(range(2), repeat=len(nodes))))
        energy = (theta_nodes[np.arange(len(nodes)), labellings].sum(1) + theta_edges[
            np.arange(len(edges)), labellings[:, edges[:, 0]], labellings[:, edges[:, 1]]].sum(1)) / eps
        p = np.exp(energy - logsumexp(energy))
        exact.append(np.stack([np.bincount(labellings[:, i], weights=p, minlength=2) for i in range(len(nodes))]))
        lp.append(exact_smoothed(theta_nodes, theta_edges, edges, eps).node_marginals)
    assert rows.loc["exact", "nll"] == pytest.approx(node_log_loss(Yte, exact), rel=1e-6)
    assert rows.loc["lp", "nll"] == pytest.approx(node_log_loss(Yte, lp), rel=1e-4)
    assert "calibration.md" in (tiny_report / "README.md").read_text()


def test_resume_computes_only_missing_cells(tiny_report, tmp_path):
    import os
    import shutil

    from slr.suite import denoising
    from slr.suite.store import default_cache_dir

    out = tmp_path / "r"
    shutil.copytree(tiny_report, out)
    # drop one denoising cell and one bound cell from the cell cache
    profile = get_profile("tiny")
    cache = default_cache_dir()
    den = pd.read_csv(out / "denoising_results.csv")
    dropped = den.iloc[7]
    key = denoising.cell(profile.spec("denoising"), dropped.unary, dropped.pairwise).key("denoising")
    os.remove(cache / "denoising" / f"{key[:32]}.npz")
    bnd = pd.read_csv(out / "bound_results.csv")
    first = bnd.iloc[0]
    key = bound_mod.cell(profile.spec("bound"), int(first.graph), float(first.eps)).key("bound")
    os.remove(cache / "bound" / f"{key[:32]}.npz")
    log = run_experiments(["denoising", "bound"], "tiny", out, quiet=True)
    assert sorted(log.computed) == sorted([f"denoising:{dropped.unary}-{dropped.pairwise}",
                                           f"bound:{first.graph}:{first.eps}"])
    again = pd.read_csv(out / "denoising_results.csv")
    assert len(again) == len(den)
    recomputed = again[(again.unary == dropped.unary) & (again.pairwise == dropped.pairwise)].iloc[0]
    assert recomputed.test_error == dropped.test_error and recomputed.objective == dropped.objective
    assert len(pd.read_csv(out / "bound_results.csv")) == len(bnd)
    # a complete cache computes nothing
    assert run_experiments(["denoising", "bound", "baselines"], "tiny", out, quiet=True).computed == []


def test_denoising_cells_option_computes_only_those_cells(tmp_path, capsys):
    out = tmp_path / "cells"
    assert main(["denoising", "--tiny", "--quiet", "--out", str(out), "--cells", "Linear/Zero, Boost/Boost"]) == 0
    df = pd.read_csv(out / "denoising_results.csv")
    assert sorted(zip(df.unary, df.pairwise)) == [("Boost", "Boost"), ("Linear", "Zero")]
    table = (out / "denoising.md").read_text()
    assert "—" in table   # the cells not computed are shown as missing, not invented
    for bad in ("Linear", "Linear/Tree", "/Zero", ""):
        with pytest.raises(SystemExit):
            main(["denoising", "--tiny", "--quiet", "--out", str(out), "--cells", bad])
        assert "--cells" in capsys.readouterr().err


def test_baselines_datasets_option_runs_only_those(tmp_path, capsys):
    out = tmp_path / "datasets"
    (out / "full").mkdir(parents=True)
    (out / "full" / "README.md").write_text("# full-profile reports\n")
    assert main(["baselines", "--tiny", "--quiet", "--out", str(out), "--datasets", "denoising"]) == 0
    df = pd.read_csv(out / "baselines_results.csv")
    assert set(df.dataset) == {"denoising"} and len(df) >= 6
    report = (out / "baselines.md").read_text()
    assert "## denoising" in report and "## letters" not in report
    assert "(full/README.md)" in (out / "README.md").read_text()
    for bad in ("ocr", "denoising,horses", " , "):
        with pytest.raises(SystemExit):
            main(["baselines", "--tiny", "--quiet", "--out", str(out), "--datasets", bad])
        assert "--datasets" in capsys.readouterr().err


def test_profile_skip_leaves_methods_out_and_says_so(tmp_path):
    from dataclasses import replace

    from slr.suite import render_baselines, runner
    from slr.suite.common import Logger, RunContext
    from slr.suite.provenance import RunInfo

    tiny = get_profile("tiny")
    profile = tiny.with_spec("baselines", replace(tiny.spec("baselines"), skip_reason="a test",
                                                  skip={"denoising": ("NSlackSSVM", "slr:Linear")}))
    log = Logger(quiet=True)
    info = RunInfo.collect("tiny", ["slr"])
    runner.run(runner.plan(["baselines"], profile, dict(datasets="denoising")), profile, tmp_path,
               RunContext(log=log, info=info, cache_dir=tmp_path / "cache"))
    methods = set(pd.read_csv(tmp_path / "baselines_results.csv").method)
    assert "OneSlackSSVM" in methods and not methods & {"NSlackSSVM", "slr:Linear"}
    render_baselines.write_report(profile, tmp_path, info, log)
    assert ("Not run in this profile: NSlackSSVM, slr:Linear on denoising (a test)."
            in (tmp_path / "baselines.md").read_text())


def test_interrupted_run_resumes(tmp_path, monkeypatch):
    import slr.inference.exact as exact

    real = exact.exact_smoothed
    calls = {"n": 0}

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(exact, "exact_smoothed", flaky)
    cache = tmp_path / "cache"
    with pytest.raises(KeyboardInterrupt):
        run_experiments(["bound"], "tiny", tmp_path, quiet=True, cache_dir=cache)
    # a graph is one task: graph 0 (two eps) finished, graph 1 was interrupted on its second eps
    assert len(pd.read_csv(tmp_path / "bound_results.csv")) == 2
    monkeypatch.setattr(exact, "exact_smoothed", real)
    log = run_experiments(["bound"], "tiny", tmp_path, quiet=True, cache_dir=cache)
    cfg = get_profile("tiny").spec("bound")
    total = cfg.n_graphs * len(cfg.epsilons)
    assert len(log.computed) == total - 2
    df = pd.read_csv(tmp_path / "bound_results.csv")
    assert len(df) == total and not df.duplicated(["graph", "eps"]).any()


def test_parser_and_bad_arguments(capsys):
    args = build_parser().parse_args(["report", "--quick", "--out", "reports"])
    assert (args.command, args.profile, str(args.out)) == ("report", "quick", "reports")
    assert build_parser().parse_args(["bound"]).profile == "quick"
    assert build_parser().parse_args(["denoising", "--full"]).profile == "full"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bound", "--tiny", "--full"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["nonsense"])
    with pytest.raises(ValueError, match="profile"):
        get_profile("huge")


def test_python_dash_m_help():
    proc = subprocess.run([sys.executable, "-m", "slr.suite", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "denoising" in proc.stdout and "bound" in proc.stdout


def test_table1_oracles_follow_the_profile_protocols():
    """Table 1's Boost is the NIPS per-class booster, ChapterBoost the chapter's vector trees; a
    pairwise MLP takes the paper's pairwise step, a unary one the unary step, and both profiles'
    MLPs the library's default batches and epochs per fit; the learner runs the paper's fixed 25
    iterations of Algorithm 1.1 with exact steps, not the library's stopping rule."""
    from slr.oracles import MLP
    from slr.suite.oracles import FIXED_BUDGET

    assert (MLP().n_epochs, MLP().batch_size) == ("auto", 100)
    for name in ("quick", "full"):
        cfg = get_profile(name).spec("denoising")
        assert cfg.oracle("Boost", "pairwise").build(0).tree == "per_class"
        assert cfg.oracle("ChapterBoost", "pairwise").build(0).tree == "vector"
        unary, pairwise = cfg.oracle("MLP", "unary").build(0), cfg.oracle("MLP", "pairwise").build(0)
        assert (unary.learning_rate, pairwise.learning_rate) == (0.25, 0.05)
        assert (unary.n_epochs, pairwise.n_epochs) == ("auto", "auto")
        assert pairwise.batch_size == unary.batch_size == 100
        assert unary.n_hidden == pairwise.n_hidden == 100
        for role in ("unary", "pairwise"):   # no solver setting of the profile's own
            assert set(cfg.oracle("MLP", role).keywords) == {"learning_rate", "n_hidden"}
        learner = cfg.learner("MLP", "MLP", 1)
        assert learner.max_iter == cfg.n_iter == 25
        assert {key: learner.get_params()[key] for key in FIXED_BUDGET} == FIXED_BUDGET
        assert FIXED_BUDGET["tol"] == 0 and FIXED_BUDGET["solver"] == "alternation"


@pytest.mark.parametrize("name", ["tiny", "quick", "full"])
def test_slr_rows_run_the_library_defaults_with_their_model_only(name):
    """Every slr row of the comparison is StructuredLogisticRegression with the library's solver
    defaults: only its oracles, eps, states, seed and threads are set (early stopping stays "auto":
    the suite hands fit no validation data, fit_slr records the test curve by callback), and only
    ``tiny`` caps the iterations (every row). The denoising slr:Boost row, which overfits before
    the rule stops it on images too few for "auto" to hold some out, gets its cap from validation
    examples at fit time (a choice in its cell's key, tested in test_fit_slr). Its oracles keep their
    own defaults beyond the model (slr:Linear: the ridge of C)."""
    from slr import StructuredLogisticRegression
    from slr.suite import methods as suite
    from slr.suite.render_baselines import _slr_solver_text

    cfg = get_profile(name).spec("baselines")
    defaults = StructuredLogisticRegression().get_params(deep=False)
    model_keys = {"unary", "pairwise", "epsilon", "n_states", "random_state", "n_jobs"}
    reg = dict(C=10.0, epsilon=0.5)
    rows = [(dataset, method) for dataset in cfg.datasets() for _, method in suite.methods_of(dataset, cfg)
            if method.startswith("slr:")]
    assert ("letters", "slr:MLP") in rows and ("denoising", "slr:Boost") in rows
    for dataset, method in rows:
        model = cfg.slr_learner(method, dataset, suite.N_STATES[dataset], 1, reg)
        params = model.get_params(deep=False)
        cap = 2 if name == "tiny" else defaults["max_iter"]
        changed = {key for key in defaults if params[key] != defaults[key]} - model_keys
        assert changed == ({"max_iter"} if cap != defaults["max_iter"] else set()), (dataset, method)
        assert params["early_stopping"] == "auto" and params["max_iter"] == cap
        assert cfg.method_config(dataset, "slr", method, reg)["slr_max_iter"] == (
            None if cap == defaults["max_iter"] else cap)
        assert (params["n_states"], params["random_state"], params["n_jobs"]) == (suite.N_STATES[dataset], 0, 1)
        config = cfg.method_config(dataset, "slr", method, reg)
        assert {"slr_iter", "max_sweeps"}.isdisjoint(config) and config["solver"] == "defaults"
        validated = name != "tiny" and (dataset, method) == ("denoising", "slr:Boost")
        assert cfg.validates_iterations(dataset, method) == validated
        assert (config.get("iterations") == "validation") == validated
        if method == "slr:Linear":
            assert params["epsilon"] == 0.5
            for oracle in (model.unary, model.pairwise):
                assert oracle.get_params() == type(oracle)(l2=0.5 / 10.0).get_params()
        if dataset == "letters" and method != "slr:Linear":
            assert params["epsilon"] == suite.EPSILON
            assert {"max_iter", "max_sweeps"}.isdisjoint(config["cell"])
            assert "n_epochs" not in model.unary.get_params() or model.unary.n_epochs == "auto"
    assert "library's defaults" in _slr_solver_text(cfg)
    assert ("chosen on validation examples" in _slr_solver_text(cfg)) == (name != "tiny")


# ------------------------------------------------------------------ unclear failures
@pytest.mark.parametrize("address", ["foo", "tcp://", "inproc://x", "ucx://10.0.0.1:13337", "tcp://host:port",
                                     "tcp://:8786", "tcp://host:70000"])
def test_malformed_scheduler_exits_2_naming_it(tmp_path, capsys, address):
    with pytest.raises(SystemExit) as exited:
        main(["bound", "--tiny", "--out", str(tmp_path / "o"), "--scheduler", address])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"--scheduler: {address!r} is not a Dask scheduler address" in err
    assert not (tmp_path / "o").exists()


def test_non_utf8_path_exits_2_before_any_work(tmp_path):
    out = os.fsencode(tmp_path) + b"/r\xe9sultats"
    proc = subprocess.run([sys.executable, "-m", "slr.suite", "bound", "--tiny", "--out", out],
                          capture_output=True, timeout=120)
    assert proc.returncode == 2
    assert b"--out: " in proc.stderr and b"is not UTF-8 text" in proc.stderr
    assert not os.path.exists(out)
    proc = subprocess.run([sys.executable, "-m", "slr.suite", "bound", "--tiny", "--out", os.fsencode(tmp_path / "o"),
                           "--cache-dir", out], capture_output=True, timeout=120)
    assert proc.returncode == 2 and b"--cache-dir: " in proc.stderr


def test_render_only_needs_no_writable_cache_and_takes_no_cache_lock(tiny_report, tmp_path):
    import shutil

    out = tmp_path / "r"
    shutil.copytree(tiny_report, out)
    not_a_dir = tmp_path / "cache-file"
    not_a_dir.write_text("x")
    assert main(["bound", "--tiny", "--quiet", "--render-only", "--out", str(out), "--cache-dir", str(not_a_dir)]) == 0
    cache = tmp_path / "cache"
    cache.mkdir()
    assert main(["bound", "--tiny", "--quiet", "--render-only", "--out", str(out), "--cache-dir", str(cache)]) == 0
    assert list(cache.iterdir()) == []
    assert (out / "bound.md").stat().st_size > 0


_QUIET_BOUND = """
import sys
from dataclasses import replace
import slr.suite.profiles as profiles
from slr.suite.cli import main
tiny = profiles.PROFILES["tiny"]
profiles.PROFILES["tiny"] = tiny.with_spec("bound", replace(tiny.spec("bound"), n_graphs=1, epsilons=(0.5,)))
sys.exit(main(["bound", "--tiny", "--quiet", "--out", sys.argv[1], "--cache-dir", sys.argv[2]]))
"""


def test_quiet_prints_nothing_not_even_highs(tmp_path):
    """HiGHS prints its banner from C++ on the first LP of a process; ``--quiet`` silences it."""
    proc = subprocess.run([sys.executable, "-c", _QUIET_BOUND, str(tmp_path / "o"), str(tmp_path / "c")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (proc.stdout, proc.stderr) == ("", "")
    assert len(pd.read_csv(tmp_path / "o" / "bound_results.csv")) == 1


def test_snakes_cells_run_every_learner_and_leave_the_other_data_sets_alone():
    """Every profile plans snakes with slr's rows, our seven baselines and pystruct's peer (quick:
    the example's OneSlackSSVM only) but no CRFsuite (chain-only); both tune C (and full eps) on a
    validation split; the shared config, and so the committed rows of denoising and letters,
    is unchanged by the snakes."""
    from dataclasses import replace

    from slr.suite import baselines, tuning
    from slr.suite.common import Logger, RunContext
    from slr.suite.methods import OUR_BASELINES, PEER_LEARNERS, grid
    from slr.suite.provenance import RunInfo, config_hash

    ctx = RunContext(log=Logger(quiet=True), info=RunInfo.collect("quick", ["slr"]), cache_dir=None)
    ctx.memo.update(pystruct=None, crfsuite=None)     # both peers available, as far as the plan goes
    expected_peer = {"quick": ("OneSlackSSVM",), "full": PEER_LEARNERS}
    for name in ("quick", "full"):
        profile = get_profile(name)
        spec = profile.spec("baselines")
        assert spec.snakes.n_train is None or spec.snakes.n_train < 200
        cells = baselines.Baselines().cells(profile, ["snakes"], {tuning.NAME: {}}, ctx)
        tuning_cells = tuning.Tuning().cells(profile, ["snakes"], {}, ctx)
        planned = {c.identity["method"] for c in cells} | {c.identity["method"] for c in tuning_cells}
        assert planned == {"slr:Linear", "slr:Boost", *OUR_BASELINES,
                           *(f"pystruct:{learner}" for learner in expected_peer[name])}
        assert all(c.identity["dataset"] == "snakes" for c in cells + tuning_cells)
        untuned = {"slr:Boost", "StructuredPerceptron", "pystruct:StructuredPerceptron"} & planned
        assert {c.identity["method"] for c in cells} == untuned     # the others wait for their tuning
        fits = sum(len(grid(spec, "snakes", m)) for m in planned - untuned)
        # full: 4 C x 3 eps for the two smoothed methods, 4 C for the other 9; quick: 2 C for all 8
        assert len(tuning_cells) == fits == {"full": 4 * 3 * 2 + 4 * 9, "quick": 8 * 2}[name]
        if name == "quick":
            one_slack = next(c for c in tuning_cells if c.identity["method"] == "pystruct:OneSlackSSVM")
            assert one_slack.config["params"] == dict(inference_cache=50, tol=0.1)
            assert one_slack.config["max_iter"] == spec.budget("OneSlackSSVM", "snakes") < spec.max_iter["OneSlackSSVM"]
        # no snakes setting enters the config column that the other data sets' rows carry
        without_snakes = replace(spec, snakes=None, budgets={}, peer_params={},
                                 peer={d: p for d, p in spec.peer.items() if d != "snakes"},
                                 tune={d: g for d, g in spec.tune.items() if d != "snakes"})
        assert config_hash(without_snakes.config()) == config_hash(spec.config())
    # the committed quick reports, which `make report` regenerates, carry that config (full's are
    # recomputed by hand, each report naming the run and config of its rows)
    committed = pd.read_csv(Path(__file__).resolve().parents[2] / "reports" / "baselines_results.csv", dtype=str)
    assert config_hash(get_profile("quick").spec("baselines").config()) in set(committed.config)


def test_snakes_rows_are_fits_of_the_protocols_data(tmp_path, capsys):
    """A tiny run on two cropped snakes (the tiny profile itself leaves snakes out): one row per
    learner, the perceptron's errors those of a fit made here on load_snakes' data, the report's
    snakes section with CRFsuite said not to apply; --datasets refuses snakes where a profile has none."""
    from dataclasses import replace

    from slr import baselines as ours
    from slr.datasets.snakes import load_snakes
    from slr.suite import render_baselines, runner
    from slr.suite.common import Logger, RunContext
    from slr.suite.methods import OUR_BASELINES, SnakesData
    from slr.suite.provenance import RunInfo

    with pytest.raises(SystemExit):
        main(["baselines", "--tiny", "--quiet", "--out", str(tmp_path / "none"), "--datasets", "snakes"])
    assert "does not run 'snakes'" in capsys.readouterr().err
    tiny = get_profile("tiny")
    spec = replace(tiny.spec("baselines"), snakes=SnakesData(2, 2, crop=True),
                   budgets=dict(snakes=dict(StructuredPerceptron=3)), slr_max_iter=1)
    profile = tiny.with_spec("baselines", spec)
    log, info = Logger(quiet=True), RunInfo.collect("tiny", ["slr"])
    runner.run(runner.plan(["baselines"], profile, dict(datasets="snakes")), profile, tmp_path,
               RunContext(log=log, info=info, cache_dir=tmp_path / "cache"))
    df = pd.read_csv(tmp_path / "baselines_results.csv")
    assert set(df.dataset) == {"snakes"} and (df.status == "ok").all()
    assert set(df.method) == {"slr:Linear", "slr:Boost", *OUR_BASELINES}
    assert int(df.set_index("method").loc["slr:Linear", "iterations"]) == 1
    X, Y, X_test, Y_test = load_snakes(edge_features="input_by_direction", crop=True)
    model = ours.StructuredPerceptron(max_iter=3, n_states=11, random_state=0).fit(X[:2], Y[:2])
    row = df.set_index("method").loc["StructuredPerceptron"]
    assert row.train_error == pytest.approx(1 - model.score(X[:2], Y[:2]))
    assert row.test_error == pytest.approx(1 - model.score(X_test[:2], Y_test[:2]))
    render_baselines.write_report(profile, tmp_path, info, log)
    report = (tmp_path / "baselines.md").read_text()
    assert "## snakes" in report and "Not applicable on denoising and snakes" in report
    assert "snakes the first 2 training images, the first 2 test images" in report


def test_a_data_set_can_budget_one_row_alone():
    """quick's denoising gives pystruct's OneSlackSSVM and NSlackSSVM alone 25 and 15 iterations
    (ours keep 100 and 20, the other data sets' peers too); on letters our SubgradientSSVM and
    pystruct's FrankWolfeSSVM (which takes SubgradientSSVM's budget) 25 while pystruct's
    SubgradientSSVM keeps 100 by its row's own budget, and both OneSlackSSVMs
    500, which the tolerance of pystruct's letters example, their keyword there, ends; the budget
    enters that cell's key and the report's sizes, and so do the keywords of pystruct's learners
    on denoising and letters and of ours on letters."""
    from slr.suite.methods import methods_of
    from slr.suite.render_baselines import _budgets_text, _own_params_text, _peer_params_text

    spec = get_profile("quick").spec("baselines")
    reg = dict(C=1.0, epsilon=0.1)
    assert spec.budget("OneSlackSSVM", "denoising", "pystruct:OneSlackSSVM") == 25
    assert spec.budget("OneSlackSSVM", "denoising", "OneSlackSSVM") == spec.max_iter["OneSlackSSVM"] == 100
    assert spec.budget("OneSlackSSVM", "letters", "pystruct:OneSlackSSVM") == spec.budget("OneSlackSSVM",
                                                                                          "letters") == 500
    assert spec.budget("OneSlackSSVM", "snakes", "pystruct:OneSlackSSVM") == 15
    assert ("pystruct", "pystruct:NSlackSSVM") not in methods_of("denoising", spec)   # skipped in quick
    assert spec.budget("NSlackSSVM", "denoising", "NSlackSSVM") == spec.max_iter["NSlackSSVM"] == 20
    assert spec.budget("SubgradientSSVM", "letters") == spec.budget("FrankWolfeSSVM", "letters",
                                                                     "pystruct:FrankWolfeSSVM") == 25
    assert spec.budget("SubgradientSSVM", "letters", "pystruct:SubgradientSSVM") == 100
    assert spec.method_config("denoising", "pystruct", "pystruct:OneSlackSSVM", reg)["max_iter"] == 25
    assert spec.method_config("denoising", "baselines", "OneSlackSSVM", reg)["max_iter"] == 100
    assert spec.method_config("letters", "baselines", "SubgradientSSVM", reg)["max_iter"] == 25
    keywords = dict(inference_cache=100, tol=0.1)    # pystruct's grid-CRF examples
    assert spec.method_config("denoising", "pystruct", "pystruct:OneSlackSSVM", reg)["params"] == keywords
    assert "on denoising pystruct:OneSlackSSVM=25, SubgradientSSVM=50" in _budgets_text(spec)
    assert "pystruct:OneSlackSSVM on denoising takes inference_cache=100, tol=0.1" in _peer_params_text(spec)
    assert get_profile("full").spec("baselines").budget("OneSlackSSVM", "denoising", "pystruct:OneSlackSSVM") == 500
    assert get_profile("full").spec("baselines").budget("OneSlackSSVM", "letters", "pystruct:OneSlackSSVM") == 2000
    for group, method in (("baselines", "OneSlackSSVM"), ("pystruct", "pystruct:OneSlackSSVM")):
        assert spec.method_config("letters", group, method, reg)["params"] == dict(tol=0.1)
        assert "params" not in spec.method_config("denoising", "baselines", "OneSlackSSVM", reg)
    assert "params" not in spec.method_config("letters", "baselines", "NSlackSSVM", reg)
    assert "pystruct:OneSlackSSVM on letters takes tol=0.1" in _peer_params_text(spec)
    assert "Our OneSlackSSVM on letters takes tol=0.1" in _own_params_text(spec)
