"""StructuredLogisticRegression(solver=...): the joint solver inside the learner, the choice of
"auto", and the safeguard and trace on J = R + eps * penalties."""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from slr import StructuredLogisticRegression
from slr._joint import joint_objective
from slr.data import FlatData
from slr.datasets import make_denoising
from slr.inference.batch import batch_sweeps
from slr.learner import structured_objective
from slr.models import PairwiseModel, class_weights, hamming_margin
from slr.oracles import MLP, Constant, Linear, Zero, get_oracle_tags

EPS = 0.5


@pytest.fixture(scope="module")
def grid():
    return make_denoising(n_images=2, size=5, sigma=2.0, random_state=3)


def _oracles(tol=1e-10):
    return Linear(l2=1.0, fit_intercept=True, tol=tol), Linear(l2=1.0, tol=tol)


def _J(model, X, Y, **weights):
    """J at the model's functions and kept messages, computed by slr._joint (checked against the
    learner's R plus the oracles' ridge in tests/learner/test_joint.py)."""
    data = FlatData(X, Y)
    return joint_objective(data, model.epsilon, model.unary_, model.pairwise_, model._train_messages, **weights)[1]


@pytest.fixture(scope="module")
def converged_alternation(grid):
    """Algorithm 1.1 to convergence (100 over-relaxed iterations, fits to 1e-10: J within 1e-7 of its
    minimum, tests/learner/test_joint.py)."""
    X, Y = grid
    model = StructuredLogisticRegression(*_oracles(), epsilon=EPS, max_iter=100, max_sweeps=200, tol=0,
                                         sweep_tol=0, solver="alternation", monitor=False, n_jobs=1).fit(X, Y)
    return model, _J(model, X, Y)


def test_joint_reaches_the_objective_of_algorithm_1_1(grid, converged_alternation):
    X, Y = grid
    _, J_alt = converged_alternation
    model = StructuredLogisticRegression(*_oracles(), epsilon=EPS, max_iter=1000, tol=1e-12, solver="joint",
                                         n_jobs=1).fit(X, Y)
    assert model.solver_ == "joint"
    J = _J(model, X, Y)
    assert J == pytest.approx(J_alt, rel=1e-7)
    # the trace's last J is that of the committed functions and messages
    assert model.objective_trace_["penalised"].iloc[-1] == pytest.approx(J, rel=1e-10)
    trace = model.objective_trace_
    assert trace["stage"].iloc[-1] == "joint_mp"
    assert trace["stage"].iloc[1] == "unary_fit"   # the first iteration: the unary fit alone
    assert (trace["stage"].iloc[2:-1] == "joint").all()
    assert model.n_iter_ == len(trace) - 2 - 1 + 1 == model.history_["iteration"].iloc[-1]


def test_default_rule_stops_the_joint_solver_near_the_minimum(grid, converged_alternation):
    X, Y = grid
    _, J_alt = converged_alternation
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = StructuredLogisticRegression(*_oracles(tol=1e-6), epsilon=EPS, n_jobs=1).fit(X, Y)
    assert model.solver_ == "joint" and model.stop_reason_ == "tol"
    assert model.n_iter_ < model.max_iter
    J = _J(model, X, Y)
    assert J_alt * (1 - 1e-9) <= J <= J_alt * (1 + 1e-3)
    # J is what the rule reads: the last three iterations gained less than 3 tol J
    per_iteration = model.objective_trace_.groupby("iteration")["penalised"].last().to_numpy()
    assert per_iteration[-4] - per_iteration[-1] < 3 * model.tol * per_iteration[-4]


def _crf_minimum(X, Y, L, eps, l2):
    """min over linear unary and pairwise weights of R + eps l2 / 2 ||w||^2, the smoothed LP solved
    afresh per evaluation by a nested scipy minimisation (tests/smoothed_reference.py)."""
    from smoothed_reference import independent_minimum

    return independent_minimum(X, Y, L, eps, l2)[0]


def test_joint_learner_matches_a_nested_scipy_minimisation():
    rng = np.random.default_rng(5)
    L, eps, l2 = 2, 0.5, 0.3
    X, Y = [], []
    for edges in ([(0, 1), (1, 2)], [(0, 1), (0, 2), (0, 3)]):
        edges = np.array(edges)
        n = edges.max() + 1
        X.append((rng.normal(size=(n, 2)), edges, rng.normal(size=(len(edges), 1)) + 1.0))
        Y.append(rng.integers(L, size=n))
    expected = _crf_minimum(X, Y, L, eps, l2)
    model = StructuredLogisticRegression(Linear(l2=l2), Linear(l2=l2), epsilon=eps, max_iter=2000, tol=1e-13,
                                         solver="joint", max_sweeps=50, n_jobs=1).fit(X, Y)
    assert _J(model, X, Y) == pytest.approx(expected, rel=1e-7)


# ----------------------------------------------------------------------------------------
# what "auto" picks, and what "joint" refuses
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("unary, pairwise, expected", [
    (None, None, "joint"),
    (Linear(l2=1.0), Constant(l2=0.5), "joint"),
    (Constant(), Zero(), "joint"),
    (MLP(n_hidden=3, n_epochs=1), Constant(), "alternation"),
    (Linear(), MLP(n_hidden=3, n_epochs=1), "alternation"),
])
def test_auto_picks_joint_only_for_linear_oracles(grid, unary, pairwise, expected):
    X, Y = grid
    model = StructuredLogisticRegression(unary, pairwise, max_iter=2, tol=0, n_jobs=1, random_state=0).fit(X, Y)
    assert model.solver_ == expected


def test_auto_takes_the_alternation_for_unlabelled_nodes(grid):
    X, Y = grid
    Y = [y.copy() for y in Y]
    Y[0][:3] = -1
    assert StructuredLogisticRegression(max_iter=2, tol=0, n_jobs=1).fit(X, Y).solver_ == "alternation"
    with pytest.raises(ValueError, match="solver='joint' does not learn latent labels"):
        StructuredLogisticRegression(max_iter=2, solver="joint").fit(X, Y)


@pytest.mark.parametrize("params, message", [
    (dict(solver="newton"), "solver"),
    (dict(solver="joint", unary=MLP()), "solver='joint' needs oracles linear in their parameters with a ridge"),
    (dict(solver="joint", max_sweeps=0), "solver='joint' eliminates the messages by sweeps"),
])
def test_bad_solver_is_refused_and_changes_nothing(grid, params, message):
    X, Y = grid
    model = StructuredLogisticRegression(max_iter=2, tol=0, n_jobs=1).fit(X, Y)
    history = model.history_.copy()
    model.set_params(**params)
    with pytest.raises(ValueError, match=message):
        model.fit(X, Y)
    assert model.history_.equals(history)


def test_alternation_is_unchanged_by_the_solver_parameter(grid):
    """``solver="alternation"`` runs Algorithm 1.1 as the learner always has: MLP oracles (which
    "auto" leaves to it) give the same trace with either setting."""
    X, Y = grid
    fits = [StructuredLogisticRegression(MLP(n_hidden=3, n_epochs=1), Constant(), max_iter=3, n_jobs=1,
                                         random_state=0, solver=solver).fit(X, Y) for solver in ("auto", "alternation")]
    assert fits[0].objective_trace_.equals(fits[1].objective_trace_)


# ----------------------------------------------------------------------------------------
# the bookkeeping: certificate, weights, early stopping, warm start, the cap
# ----------------------------------------------------------------------------------------
def test_certificate_bounds_hold_and_belong_to_the_kept_messages(grid):
    X, Y = grid
    model = StructuredLogisticRegression(*_oracles(tol=1e-6), epsilon=0.1, solver="joint", n_jobs=1).fit(X, Y)
    certificate = model.certificate_
    assert certificate.bounds_hold and certificate.sweeps_converged
    assert certificate.lp_loss_lower <= certificate.objective <= certificate.lp_loss_upper + certificate.entropy_bound
    assert certificate.stop_reason == model.stop_reason_ and certificate.n_iter == model.n_iter_
    data = FlatData(X, Y)
    energy = PairwiseModel(0.1)
    theta_nodes = energy.unary_potentials(data, model.unary_) + hamming_margin(data.labels, 2)
    theta_edges = energy.pairwise_potentials(data, model.pairwise_)
    R = structured_objective(data.batch, theta_nodes, theta_edges, model._train_messages, data.labels, 0.1)
    assert certificate.objective == pytest.approx(R, rel=1e-12)
    assert model.objective_trace_["objective"].iloc[-1] == pytest.approx(R, rel=1e-12)
    # the kept messages are settled: one more sweep moves no message vector beyond a constant shift
    # (a shift changes no belief; the certificate's raw residual also counts the shifts' drift)
    swept = batch_sweeps(data.batch, theta_nodes, theta_edges, 0.1, messages=model._train_messages, max_sweeps=1,
                         tol=0.0, n_jobs=1).messages
    change = swept - model._train_messages
    assert np.max(np.ptp(change, axis=2)) < 1e-6


def test_weighted_joint_fit_reaches_the_weighted_minimum(grid):
    X, Y = grid
    weights, cw = np.array([2.0, 0.5]), {0: 2.0}
    fits = {solver: StructuredLogisticRegression(
        *_oracles(), epsilon=EPS, max_iter=100 if solver == "alternation" else 1000, tol=0 if solver == "alternation"
        else 1e-12, max_sweeps=200, sweep_tol=0, solver=solver, class_weight=cw, monitor=False,
        n_jobs=1).fit(X, Y, sample_weight=weights) for solver in ("alternation", "joint")}
    assert fits["joint"].solver_ == "joint"
    data = FlatData(X, Y)
    extra = dict(sample_weight=weights, class_weight=class_weights(cw, data.labels, 2))
    J = {solver: _J(model, X, Y, **extra) for solver, model in fits.items()}
    assert J["joint"] == pytest.approx(J["alternation"], rel=1e-7)
    # and not the unweighted minimum
    plain = StructuredLogisticRegression(*_oracles(), epsilon=EPS, max_iter=1000, tol=1e-12, solver="joint",
                                         n_jobs=1).fit(X, Y)
    assert _J(plain, X, Y, **extra) > J["joint"] * (1 + 1e-4)


def test_early_stopping_keeps_the_best_iteration():
    X, Y = make_denoising(n_images=3, size=12, sigma=3.0, random_state=0)
    X_val, Y_val = make_denoising(n_images=2, size=12, sigma=3.0, random_state=1)
    model = StructuredLogisticRegression(Linear(l2=0.01), Linear(l2=0.01), epsilon=0.1, n_iter_no_change=3, tol=0,
                                         max_iter=300, n_jobs=1).fit(X, Y, X_val, Y_val)
    assert model.solver_ == "joint"
    history = model.history_
    errors = history["val_error"].iloc[1:]
    best = int(errors[errors == errors.min()].index.max())   # the last of the lowest
    assert model.best_iteration_ == history["iteration"].iloc[best]
    if model.stop_reason_ == "early_stopping":
        assert model.n_iter_ == model.best_iteration_ + 3
    kept_error = 1.0 - model.score(X_val, Y_val)
    assert kept_error == pytest.approx(history["val_error"].iloc[best], abs=1e-12)


@pytest.mark.parametrize("solver, capped", [("auto", True), ("alternation", False)])
def test_first_iteration_fits_are_capped_only_before_the_joint_solver(grid, monkeypatch, solver, capped):
    """Under the joint solver the first iteration is one unary Linear fit of at most FIRST_FIT_ITER
    L-BFGS iterations (a start the solver refines); the alternation's fits are not capped, and the
    fitted oracles keep the user's max_iter."""
    import slr._solvers as solvers

    X, Y = grid
    seen = []
    fit = Linear.fit

    def recording(self, *args, **kwargs):
        seen.append(self.max_iter)
        result = fit(self, *args, **kwargs)
        seen[-1] = (seen[-1], self.n_iter_)
        return result

    monkeypatch.setattr(Linear, "fit", recording)
    monkeypatch.setattr(solvers, "FIRST_FIT_ITER", 2)
    model = StructuredLogisticRegression(*_oracles(tol=1e-12), epsilon=EPS, max_iter=3, tol=0, solver=solver,
                                         n_jobs=1).fit(X, Y)
    first_fits = seen[:2]   # the first iteration's unary and pairwise fits (the unary fit alone if joint)
    if capped:
        assert seen == [(2, 2)]
    else:
        assert all(cap == 1000 and n_iter > 2 for cap, n_iter in first_fits)
    assert model.unary_.max_iter == model.pairwise_.max_iter == 1000
    assert model.get_params()["unary__max_iter"] == 1000


def test_joint_solvers_first_iteration_is_the_model_of_the_nodes_alone(grid):
    """After one iteration under the joint solver: the unary function is the node-only logistic
    regression (bias Delta / eps, zero messages) fitted by Linear with the first fit's cap, the
    pairwise function is absent (zero), R is the smoothed objective there, and prediction labels
    each node by its own best state."""
    from slr._solvers import FIRST_FIT_ITER

    X, Y = grid
    model = StructuredLogisticRegression(*_oracles(), epsilon=EPS, max_iter=1, solver="joint", n_jobs=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, Y)
    data = FlatData(X, Y)
    alone = _oracles()[0].set_params(max_iter=FIRST_FIT_ITER)
    alone.fit(data.node_features, hamming_margin(data.labels, data.n_states) / EPS, data.labels)
    np.testing.assert_array_equal(model.unary_.coef_, alone.coef_)
    np.testing.assert_array_equal(model.unary_.intercept_, alone.intercept_)
    assert not hasattr(model.pairwise_, "coef_")
    assert not model._train_messages.any()
    theta_nodes = PairwiseModel(EPS).unary_potentials(data, alone) + hamming_margin(data.labels, data.n_states)
    theta_edges = np.zeros((data.batch.n_edges, data.n_states, data.n_states))
    R = structured_objective(data.batch, theta_nodes, theta_edges, model._train_messages, data.labels, EPS)
    assert model.history_["objective"].iloc[-1] == pytest.approx(R, rel=1e-12)
    node_best = alone.decision_function(data.node_features).argmax(axis=1)
    np.testing.assert_array_equal(np.concatenate(model.predict(X)), node_best)


def test_joint_iterates_training_error_is_that_of_the_iterates_functions():
    """The training error monitored after each joint iteration (decoded from the potentials the
    solver hands over) is the error of that iteration's functions, predicted afresh from the
    oracles (``Iterate.score``), on chains (Viterbi) and on a grid (the LP)."""
    from slr.datasets.synthetic import make_structured

    for graph in ("chain", "grid"):
        X, Y = make_structured(8, graph=graph, n_nodes=16, n_states=3, coupling=2.0, noise=0.8, random_state=5)
        scores = {}
        model = StructuredLogisticRegression(Linear(l2=0.1), Linear(l2=0.1), epsilon=0.1, max_iter=12, tol=0,
                                             solver="joint", n_jobs=1, monitor=True)   # every iteration's
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X, Y, callback=lambda it: scores.__setitem__(it.iteration, 1.0 - it.score(X, Y)))
        history = model.history_.set_index("iteration")["train_error"]
        assert len(scores) == 12
        for iteration, error in scores.items():
            assert history[iteration] == pytest.approx(error, abs=1e-12), (graph, iteration)


def test_warm_start_continues_the_joint_solver(grid):
    X, Y = grid
    first = StructuredLogisticRegression(*_oracles(), epsilon=EPS, max_iter=6, tol=0, solver="joint", n_jobs=1)
    first.fit(X, Y)
    J6 = _J(first, X, Y)
    first.set_params(max_iter=40, warm_start=True).fit(X, Y)
    # on this small grid L-BFGS gets as far as float64 allows before 40 iterations
    assert first.stop_reason_ in ("max_iter", "converged") and 6 < first.n_iter_ <= 40
    assert first.history_["iteration"].tolist() == list(range(first.n_iter_ + 1))
    J40 = _J(first, X, Y)
    assert J40 < J6
    # the stages after the first fit are the joint solver's
    later = first.objective_trace_[first.objective_trace_["iteration"] > 6]
    assert set(later["stage"]) == {"joint", "joint_mp"}


def test_cap_warns_and_says_so(grid):
    X, Y = grid
    with pytest.warns(ConvergenceWarning, match="max_iter=4"):
        model = StructuredLogisticRegression(*_oracles(), epsilon=EPS, max_iter=4, n_jobs=1).fit(X, Y)
    assert model.solver_ == "joint" and model.stop_reason_ == "max_iter" and model.n_iter_ == 4
    assert len(model.history_) == 5


# ----------------------------------------------------------------------------------------
# the penalty and the safeguard on J
# ----------------------------------------------------------------------------------------
def test_penalty_is_the_ridge_the_oracles_fit_adds():
    rng = np.random.default_rng(0)
    features, labels = rng.normal(size=(30, 3)) * 4.0, rng.integers(3, size=30)
    bias = rng.normal(size=(30, 3))
    for oracle in (Linear(l2=0.7, fit_intercept=True), Constant(l2=0.4)):
        assert oracle.penalty() == 0.0
        assert get_oracle_tags(oracle).penalty
        oracle.fit(features, bias, labels)
        weights = oracle.coef_ if isinstance(oracle, Linear) else oracle.table_
        assert oracle.penalty() == pytest.approx(oracle.l2 / 2 * float(np.sum(weights**2)), rel=1e-14)
        # fit minimises loss + penalty: moving the weights off the fit raises the sum
        total = oracle.loss(features, bias, labels) + oracle.penalty()
        name = "coef_" if isinstance(oracle, Linear) else "table_"
        setattr(oracle, name, getattr(oracle, name) * 1.01)
        assert oracle.loss(features, bias, labels) + oracle.penalty() > total
    assert not get_oracle_tags(Zero()).penalty and not get_oracle_tags(MLP()).penalty


def test_relaxed_alternation_never_raises_J(grid):
    """With a ridge the exact fits descend J, and the over-relaxed step's safeguard checks J: J never
    rises at any half step (R alone may)."""
    X, Y = grid
    model = StructuredLogisticRegression(Linear(l2=3.0, tol=1e-12), Linear(l2=3.0, tol=1e-12), epsilon=0.1,
                                         max_iter=15, tol=0, relaxation=1.9, solver="alternation", monitor=False,
                                         n_jobs=1).fit(X, Y)
    J = model.objective_trace_["penalised"].to_numpy()
    assert np.all(np.diff(J) <= 1e-10 * np.abs(J[:-1]))
    R = model.objective_trace_["objective"].to_numpy()
    ridge = 0.1 * (model.unary_.penalty() + model.pairwise_.penalty())
    assert J[-1] == pytest.approx(R[-1] + ridge, rel=1e-12)
    assert J[-1] == pytest.approx(_J(model, X, Y), rel=1e-10)
