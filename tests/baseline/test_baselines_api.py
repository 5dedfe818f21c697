"""The baselines' parameters (one name for one idea, declarative checks), their
transactional fit and their optional dependencies."""
import sys

import numpy as np
import pytest
from sklearn.base import clone

from slr.baselines import (
    GradientAlternation,
    NSlackSSVM,
    OneSlackSSVM,
    PiecewiseTraining,
    StructuredPerceptron,
    SubgradientSSVM,
)
from slr.baselines.features import StructuredData
from slr.datasets import make_denoising
from slr.inference.batch import batch_sweeps
from slr.models import hamming_margin
from slr.oracles import Linear
from chain_reference import random_chains

# the learners of the shared contract (slr.estimator); each takes max_iter, n_states, random_state
LEARNERS = {
    "OneSlackSSVM": OneSlackSSVM,
    "NSlackSSVM": NSlackSSVM,
    "SubgradientSSVM": lambda **kw: SubgradientSSVM(batch_size=1, **kw),
    "StructuredPerceptron": StructuredPerceptron,
    "PiecewiseTraining": lambda **kw: PiecewiseTraining(Linear(l2=0.5), Linear(l2=0.5), **kw),
    "GradientAlternation": lambda **kw: GradientAlternation(sweeps_per_round=4, **kw),
}
CLASSES = {name: type(make()) for name, make in LEARNERS.items()}


@pytest.fixture(scope="module")
def data():
    X, Y = make_denoising(n_images=4, size=5, sigma=1.5, random_state=0)
    return X[:2], Y[:2], X[2:], Y[2:]


def make(name, **kw):
    return LEARNERS[name](**{"max_iter": 2, "n_states": 2, "random_state": 0, **kw})


def _wider(X):
    """The same examples with one more node feature."""
    return [(np.column_stack([f, f[:, :1]]), e, ef) for f, e, ef in X]


def _fitted_state(model):
    return {k: v for k, v in vars(model).items() if k.endswith("_") and not k.startswith("__")}


# ------------------------------------------------------------------ transactional fit
def _bad_width_val(model, X, Y, Xv, Yv):
    model.fit(X, Y, X_val=_wider(Xv), Y_val=Yv)


def _bad_parameter(model, X, Y, Xv, Yv):
    model.set_params(max_iter=0).fit(X, Y, X_val=Xv, Y_val=Yv)


def _bad_inference_parameter(model, X, Y, Xv, Yv):
    model.set_params(max_sweeps=0).fit(X, Y)


def _more_states_bad_val(model, X, Y, Xv, Yv):
    # a refit that would change n_states_ and the widths, failing on the validation data
    model.set_params(n_states=3).fit(_wider(X), Y, X_val=Xv, Y_val=Yv)


def _val_labels_out_of_range(model, X, Y, Xv, Yv):
    model.fit(X, Y, X_val=Xv, Y_val=[y + 5 for y in Yv])


def _failure_inside_the_loop(model, X, Y, Xv, Yv):
    # every learner records its iterations through _log; raising there fails the fit after
    # the learner has built part of its new state (weights, oracles, mistake counts)
    calls = []

    def failing_log(self, *args, **kwargs):
        calls.append(1)
        raise RuntimeError("interrupted")

    original = type(model)._log
    type(model)._log = failing_log
    try:
        model.fit(X, Y, X_val=Xv, Y_val=Yv)
    finally:
        type(model)._log = original
    assert calls


FAILURES = [_bad_width_val, _bad_parameter, _bad_inference_parameter, _more_states_bad_val,
            _val_labels_out_of_range, _failure_inside_the_loop]


@pytest.mark.parametrize("failure", FAILURES, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("name", LEARNERS)
def test_a_failed_fit_leaves_the_fitted_model_as_it_was(name, failure, data):
    X, Y, Xv, Yv = data
    model = make(name).fit(X, Y, X_val=Xv, Y_val=Yv)
    state = _fitted_state(model)
    pred = model.predict(Xv)
    _, theta_nodes, theta_edges = model.decision_potentials(Xv)
    with pytest.raises((ValueError, RuntimeError)):
        failure(model, X, Y, Xv, Yv)
    after = _fitted_state(model)
    assert after.keys() == state.keys() and all(after[k] is state[k] for k in state)
    for a, b in zip(model.predict(Xv), pred):
        np.testing.assert_array_equal(a, b)
    _, nodes, edges = model.decision_potentials(Xv)
    np.testing.assert_array_equal(nodes, theta_nodes)
    np.testing.assert_array_equal(edges, theta_edges)
    assert model.score(Xv, Yv) == np.mean(np.concatenate(pred) == np.concatenate(Yv))


@pytest.mark.parametrize("name", LEARNERS)
def test_a_refit_after_a_failed_one_equals_a_fresh_fit(name, data):
    X, Y, Xv, Yv = data
    model = make(name).fit(X, Y)
    with pytest.raises(ValueError, match="X_val has 3 node features, the model expects 2"):
        model.set_params(n_states=3).fit(X, Y, X_val=_wider(Xv), Y_val=Yv)
    model.fit(X, Y, X_val=Xv, Y_val=Yv)
    fresh = make(name, n_states=3).fit(X, Y, X_val=Xv, Y_val=Yv)
    assert model.n_states_ == 3 and set(_fitted_state(model)) == set(_fitted_state(fresh))
    np.testing.assert_array_equal(model.history_["objective"], fresh.history_["objective"])
    np.testing.assert_array_equal(model.history_["val_error"], fresh.history_["val_error"])
    for a, b in zip(model.predict(Xv), fresh.predict(Xv)):
        np.testing.assert_array_equal(a, b)


def test_prediction_keeps_the_inference_settings_of_the_fit(data):
    X, Y, Xv, _ = data
    model = OneSlackSSVM(max_iter=3, model="lp", max_sweeps=200, n_states=2).fit(X, Y)
    before = model.decision_potentials(Xv)[0].energy
    model.set_params(model="chain", max_sweeps=1)  # takes effect at the next fit only
    data_after = model.decision_potentials(Xv)[0]
    assert (data_after.model, data_after.energy.max_sweeps) == ("lp", before.max_sweeps) == ("lp", 200)


# ------------------------------------------------------------------ declarative checks
@pytest.mark.parametrize("name", LEARNERS)
@pytest.mark.parametrize("param, value, message", [
    ("max_iter", 0, "max_iter must be an integer in [1, 2147483647], got 0"),
    ("max_iter", 2.0, "max_iter must be an integer in [1, 2147483647], got 2.0"),
    ("n_states", 1, "n_states must be an integer in [2, 2147483647] or None, got 1"),
    ("model", "grid", "model must be one of ('auto', 'chain', 'lp'), got 'grid'"),
    ("max_sweeps", 0, "max_sweeps must be an integer in [1, 2147483647], got 0"),
    ("inference_tol", -1.0, "inference_tol must be finite and >= 0, got -1.0"),
    ("n_jobs", 0, "n_jobs must be None, -1 (all cores) or an integer in [1, 2147483647], got 0"),
    ("n_jobs", -2, "n_jobs must be None, -1 (all cores) or an integer in [1, 2147483647], got -2"),
    ("verbose", -1, "verbose must be an integer in [0, 2147483647] or True or False, got -1"),
    ("verbose", "yes", "verbose must be an integer in [0, 2147483647] or True or False, got 'yes'"),
    ("random_state", -1, "random_state must be None, a non-negative integer or a numpy Generator, got -1"),
])
def test_every_baseline_refuses_a_bad_shared_parameter_by_name(name, param, value, message, data):
    X, Y, _, _ = data
    with pytest.raises(ValueError) as info:
        make(name, **{param: value}).fit(X, Y)
    assert str(info.value) == message


@pytest.mark.parametrize("make_model, message", [
    (lambda: OneSlackSSVM(C=0), "C must be finite and > 0, got 0"),
    (lambda: NSlackSSVM(tol=-1), "tol must be finite and >= 0, got -1"),
    (lambda: OneSlackSSVM(inactive_window=0), "inactive_window must be an integer in [1, 2147483647], got 0"),
    (lambda: NSlackSSVM(inactive_threshold=float("nan")), "inactive_threshold must be finite and >= 0, got nan"),
    (lambda: OneSlackSSVM(exact_check="no"), "exact_check must be True or False, got 'no'"),
    (lambda: SubgradientSSVM(learning_rate=0), "learning_rate must be one of 'auto' or a real number > 0, got 0"),
    (lambda: SubgradientSSVM(learning_rate="fast"), "learning_rate must be one of 'auto' or a real number > 0"),
    (lambda: SubgradientSSVM(decay_exponent=-0.5), "decay_exponent must be finite and >= 0, got -0.5"),
    (lambda: SubgradientSSVM(averaging="median"), "averaging must be one of (None, 'uniform', 'linear'), got 'median'"),
    (lambda: SubgradientSSVM(batch_size=0), "batch_size must be an integer in [1, 2147483647] or None, got 0"),
    (lambda: SubgradientSSVM(log_every=0), "log_every must be an integer in [1, 2147483647], got 0"),
    (lambda: StructuredPerceptron(average=1), "average must be True or False, got 1"),
    (lambda: StructuredPerceptron(shuffle="no"), "shuffle must be True or False, got 'no'"),
    (lambda: PiecewiseTraining(unary="linear"), "unary must be an slr LogisticOracle, got str"),
    (lambda: GradientAlternation(epsilon=0.0), "epsilon must be finite and > 0, got 0.0"),
    (lambda: GradientAlternation(l2=-1), "l2 must be finite and >= 0, got -1"),
    (lambda: GradientAlternation(sweeps_per_round=0), "sweeps_per_round must be an integer in [1, 2147483647], got 0"),
    (lambda: GradientAlternation(learning_rate=-1.0), "learning_rate must be one of 'auto' or a real number > 0"),
])
def test_each_baseline_refuses_its_own_bad_parameters_by_name(make_model, message, data):
    X, Y, _, _ = data
    with pytest.raises(ValueError) as info:
        make_model().fit(X, Y)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("name", LEARNERS)
def test_verbose_is_an_int_and_a_bool_still_works(name, data, capsys):
    X, Y, _, _ = data
    lines = {}
    for verbose in (0, 1, True, np.int64(2)):
        model = make(name, verbose=verbose).fit(X, Y)
        lines[repr(verbose)] = capsys.readouterr().err.splitlines()
        assert model.verbose is verbose  # the parameter is never rewritten
    assert lines["0"] == []
    assert len(lines["1"]) == len(lines["True"]) == len(lines["np.int64(2)"]) == len(model.history_)
    assert all(line.startswith(f"[{CLASSES[name].__name__}] iter") for line in lines["True"])


@pytest.mark.parametrize("name", LEARNERS)
def test_thread_counts_do_not_change_the_result(name, data):
    X, Y, Xv, Yv = data
    ref = make(name).fit(X, Y, X_val=Xv, Y_val=Yv)
    for n_jobs in (1, 2, -1):
        model = make(name, n_jobs=n_jobs).fit(X, Y, X_val=Xv, Y_val=Yv)
        assert model.inference_["n_jobs"] == n_jobs
        np.testing.assert_array_equal(model.history_["objective"], ref.history_["objective"])
        for a, b in zip(model.predict(Xv), ref.predict(Xv)):
            np.testing.assert_array_equal(a, b)


def test_a_generator_random_state_is_drawn_from_and_advanced(data):
    X, Y, _, _ = data
    rng, twin = np.random.default_rng(5), np.random.default_rng(5)
    first = StructuredPerceptron(max_iter=3, n_states=2, random_state=rng).fit(X, Y)
    again = StructuredPerceptron(max_iter=3, n_states=2, random_state=twin).fit(X, Y)
    assert first.random_state is rng
    # shared with the caller, not copied: the fit advanced the caller's generator
    assert rng.bit_generator.state == twin.bit_generator.state != np.random.default_rng(5).bit_generator.state
    np.testing.assert_array_equal(first.w_, again.w_)


def test_a_failed_crfsuite_fit_leaves_the_fitted_model_as_it_was():
    pytest.importorskip("pycrfsuite")
    from slr.baselines.crfsuite_peer import CRFsuiteChain

    X, Y = random_chains(np.random.default_rng(0), 6, 3, lengths=(2, 6), d_e=None)
    Xt, _ = random_chains(np.random.default_rng(1), 6, 3, lengths=(2, 6), d_e=None)
    model = CRFsuiteChain(c2=0.5, n_states=3).fit(X, Y)
    state, pred = _fitted_state(model), model.predict(Xt)
    grid = [(f, np.array([[0, 1]] * (len(f) - 1)), ef) for f, _, ef in X]
    failures = [lambda: model.set_params(c2=-1.0).fit(X, Y),
                lambda: model.set_params(c2=0.5, n_states=2).fit(X, Y),     # labels reach 2
                lambda: model.set_params(n_states=4).fit(grid, Y)]         # not chains
    for failure in failures:
        with pytest.raises(ValueError):
            failure()
        after = _fitted_state(model)
        assert after.keys() == state.keys() and all(after[k] is state[k] for k in state)
        for a, b in zip(model.predict(Xt), pred):
            np.testing.assert_array_equal(a, b)
    assert clone(model).get_params() == model.get_params() and not hasattr(clone(model), "n_states_")


def test_run_peer_seed_is_the_old_name_of_random_state(monkeypatch, tmp_path):
    """The seed reaches the peer's problem file under either name (a stand-in runner echoes it)."""
    from slr.baselines.peer import client

    runner = tmp_path / "echo_runner.py"
    runner.write_text("import json, pathlib, sys\n"
                      "d = pathlib.Path(sys.argv[1])\n"
                      "seed = json.loads((d / 'problem.json').read_text())['seed']\n"
                      "(d / 'result.json').write_text(json.dumps({'w': [], 'y_pred_test': [], 'seed': seed}))\n")
    monkeypatch.setattr(client, "RUNNER", runner)
    monkeypatch.setattr(client, "peer_python", lambda: sys.executable)
    X, Y = random_chains(np.random.default_rng(0), 6, 3, lengths=(2, 6), d_e=None)
    assert client.run_peer("OneSlackSSVM", X, Y, n_states=3, random_state=7)["seed"] == 7
    assert client.run_peer("OneSlackSSVM", X, Y, n_states=3)["seed"] == 0
    with pytest.raises(ValueError, match="random_state must be an integer in"):
        client.run_peer("OneSlackSSVM", X, Y, n_states=3, random_state=-1)


# ------------------------------------------------------------------ sweeps per round
def test_gradient_alternation_sweeps_per_round_counts_kernel_sweeps(data):
    """One round with zero weights runs exactly ``sweeps_per_round`` sweeps of the kernel."""
    X, Y, _, _ = data
    model = GradientAlternation(epsilon=0.3, max_iter=1, sweeps_per_round=3, n_states=2).fit(X, Y)
    flat = StructuredData(X, Y, 2)
    lam = np.zeros((flat.batch.n_edges, 2, 2))
    theta_nodes, theta_edges = flat.potentials(np.zeros(flat.size))
    batch_sweeps(flat.batch, theta_nodes + hamming_margin(flat.labels, 2), theta_edges, 0.3, out=lam,
                 max_sweeps=3, tol=0.0)
    np.testing.assert_array_equal(model.messages_, lam)
    batch_sweeps(flat.batch, theta_nodes + hamming_margin(flat.labels, 2), theta_edges, 0.3, out=lam,
                 max_sweeps=1, tol=0.0)
    assert not np.array_equal(model.messages_, lam)  # a fourth sweep changes them





# ------------------------------------------------------------------ optional dependencies
def test_cutting_plane_ssvms_without_clarabel_name_the_extra(monkeypatch, data):
    from slr.baselines.ssvm import solve_ssvm_dual

    X, Y, Xv, _ = data
    fitted = OneSlackSSVM(max_iter=2, n_states=2).fit(X, Y)
    pred = fitted.predict(Xv)
    monkeypatch.setitem(sys.modules, "clarabel", None)  # as if not installed
    message = r"""the cutting-plane SSVMs' QP needs clarabel: pip install "slr\[baselines\]\""""
    with pytest.raises(ImportError, match=message):
        solve_ssvm_dual(np.ones((1, 2)), np.ones(1), np.zeros(1, dtype=int), 1.0)
    for model in (fitted, NSlackSSVM(max_iter=2, n_states=2)):
        with pytest.raises(ImportError, match=message):
            model.fit(X, Y)
    for a, b in zip(fitted.predict(Xv), pred):  # predicting needs no QP
        np.testing.assert_array_equal(a, b)
    # the other baselines need no cvxpy
    assert SubgradientSSVM(max_iter=2, n_states=2).fit(X, Y).history_["objective"].notna().all()


def test_the_crfsuite_peer_without_python_crfsuite_names_the_extra(monkeypatch):
    from slr.baselines.crfsuite_peer import CRFsuiteChain, crfsuite_missing

    monkeypatch.setitem(sys.modules, "pycrfsuite", None)
    message = 'the CRFsuite peer needs pycrfsuite: pip install "slr[crfsuite]"'
    assert crfsuite_missing() == message
    X = [(np.ones((3, 2)), np.array([[0, 1], [1, 2]]), np.ones((2, 1)))]
    with pytest.raises(ImportError, match=r"pip install \"slr\[crfsuite\]\""):
        CRFsuiteChain().fit(X, [np.array([0, 1, 0])])


def test_parameters_are_checked_before_the_labels(data):
    """A bad parameter is named even when the labels are bad too: the parameters are checked first."""
    X, Y, _, _ = data
    mixed = [np.array(["a"] + [1] * (len(y) - 1), dtype=object) for y in Y]
    with pytest.raises(ValueError, match="^Y must hold labels that sort together"):
        StructuredPerceptron(max_iter=1).fit(X, mixed)
    with pytest.raises(ValueError, match="^max_iter must be an integer"):
        StructuredPerceptron(max_iter=0).fit(X, mixed)
