"""Small fits, where the learner's fixed and per-iteration costs (checks, set-up, monitoring, the
solvers' Python around the kernels) weigh more than its arithmetic: the held-out grid's smallest
problem, chain L5 (``slr.suite.generalisation``: 20 training chains of 20 nodes, 5 states, 10
features; 30 test chains), with the library's defaults and ``Linear(l2=.1)`` both factors, eps = .1,
one thread, as ``slr generalisation`` fits its ``slr:Linear`` row at C = 1 (the report chooses C and
eps on validation examples; this fixed model keeps the benchmark's history comparable).

``SmallChain`` times the whole ``fit`` (monitoring on, as by default) and ``predict`` on the test
chains. ``SmallChainAgainstCRFsuite`` is the side-by-side ratio of that experiment's *to peer*
column: the fit time (``history_["seconds"]``, monitoring excluded) at which slr's test error first
comes within .005 of CRFsuite's, over CRFsuite's fit time, both measured back to back in one
process (NaN if slr never gets there), the curve and the first time on it taken by the
experiment's own functions. ``StrongChainAgainstCRFsuite`` is the same ratio on the full grid's
chain L20 strong in its two draws (80 training and 800 test chains of 20 nodes, 20 strongly coupled
states, 20 features), the model the full report chooses for both (C = 1, eps = .1): side by side
in one process it took 0.55-0.60x and 0.62-0.70x (medians of 7, when the test sets held 80 chains),
the full report on one Dask worker 0.58x and 0.65x; on workers started with
``MALLOC_TRIM_THRESHOLD_``, which doubled slr's fit, it had put slr behind CRFsuite in the second
draw (1.13x; docs/design.md section 5).
``asv_benchmarks/compare_overhead.py`` compares the same fits between two builds.
"""
from __future__ import annotations

from . import common


def _chain_l5():
    """``(X, Y, X_test, Y_test)`` of chain L5 at the quick size, and its slr:Linear learner factory."""
    from slr.oracles import Linear
    from slr.suite.generalisation import SPECS
    from slr.suite.oracles import defaults_learner

    def make():
        return defaults_learner(unary=Linear(l2=0.1), pairwise=Linear(l2=0.1), epsilon=0.1, n_jobs=1, random_state=0)

    return SPECS["quick"].problem("chain L5").load(), make


class SmallChain(common.Estimator, common.Benchmark):
    """slr:Linear with the library's defaults on chain L5 (400 training nodes)."""

    params = ["defaults"]
    param_names = ["settings"]

    def setup_cache(self):
        return self.fit_all()

    def make_data(self, settings):
        return _chain_l5()[0]

    def make_estimator(self, settings):
        return _chain_l5()[1]()


def _ratio_to_crfsuite(profile: str, problem: str, C: float, epsilon: float) -> float:
    """slr:Linear's fit time (the experiment's learner: ``l2 = eps / C`` both factors, the library's
    defaults, one thread) to CRFsuite's test error plus the profile's tolerance, over CRFsuite's fit
    time at the same C, both fitted back to back here."""
    from threadpoolctl import threadpool_limits

    from slr.baselines.crfsuite_peer import CRFsuiteChain
    from slr.suite.generalisation import SPECS, learner
    from slr.suite.methods import crfsuite_c2, fit_slr
    from slr.suite.render_baselines import time_to_target

    spec = SPECS[profile]
    chosen = spec.problem(problem)
    X, Y, X_test, Y_test = chosen.load()
    with threadpool_limits(1):
        crfsuite = CRFsuiteChain(c2=crfsuite_c2(C)).fit(X, Y)
        slr = learner(spec, "slr:Linear", dict(C=C, epsilon=epsilon), chosen.n_states, 1)
        _, seconds, errors = fit_slr(slr, (X, Y, X_test, Y_test, None))
    target = 1.0 - crfsuite.score(X_test, Y_test) + spec.tolerance
    return time_to_target(seconds, errors, target) / crfsuite.fit_seconds_


class SmallChainAgainstCRFsuite(common.Benchmark):
    """slr's fit time to CRFsuite's test error (within the experiment's tolerance) over CRFsuite's
    fit time, on chain L5 (slr at l2 = .1, eps = .1; CRFsuite at C = 1)."""

    def track_slr_to_crfsuite_error_over_crfsuite_seconds(self):
        return _ratio_to_crfsuite("quick", "chain L5", C=1.0, epsilon=0.1)

    track_slr_to_crfsuite_error_over_crfsuite_seconds.unit = "ratio"


class StrongChainAgainstCRFsuite(common.Benchmark):
    """The same ratio on the full grid's chain L20 strong, in both draws, both at C = 1 (slr at
    eps = .1)."""

    params = ["chain L20 strong", "chain L20 strong (draw 2)"]
    param_names = ["problem"]

    def track_slr_to_crfsuite_error_over_crfsuite_seconds(self, problem):
        return _ratio_to_crfsuite("full", problem, C=1.0, epsilon=0.1)

    track_slr_to_crfsuite_error_over_crfsuite_seconds.unit = "ratio"
