"""Small fits, where the learner's fixed and per-iteration costs (checks, set-up, monitoring, the
solvers' Python around the kernels) weigh more than its arithmetic: the held-out grid's smallest
problem, chain L5 (``slr_suite.generalisation``: 20 training chains of 20 nodes, 5 states, 10
features; 30 test chains), with the library's defaults and ``Linear(l2=.1)`` both factors, eps = .1,
one thread, as ``slr generalisation`` fits its ``slr:Linear`` row at C = 1 (the report chooses C and
eps on validation examples; this fixed model keeps the benchmark's history comparable).

``SmallChain`` times the whole ``fit`` (monitoring on, as by default) and ``predict`` on the test
chains. ``SmallChainAgainstCRFsuite`` is the side-by-side ratio of that experiment's *to peer*
column: the fit time (``history_["seconds"]``, monitoring excluded) at which slr's test error first
comes within .005 of CRFsuite's, over CRFsuite's fit time, both measured back to back in one
process (NaN if slr never gets there), the curve and the first time on it taken by the
experiment's own functions. ``asv_benchmarks/compare_overhead.py`` compares the same
fits between two builds.
"""
from __future__ import annotations

from . import common


def _chain_l5():
    """``(X, Y, X_test, Y_test)`` of chain L5 at the quick size, and its slr:Linear learner factory."""
    from slr.oracles import Linear
    from slr_suite.generalisation import SPECS
    from slr_suite.oracles import defaults_learner

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


class SmallChainAgainstCRFsuite(common.Benchmark):
    """slr's fit time to CRFsuite's test error (within the experiment's tolerance) over CRFsuite's
    fit time, on chain L5."""

    def track_slr_to_crfsuite_error_over_crfsuite_seconds(self):
        from threadpoolctl import threadpool_limits

        from baselines.crfsuite_peer import CRFsuiteChain
        from slr_suite.generalisation import SPECS
        from slr_suite.methods import crfsuite_c2, fit_slr
        from slr_suite.render_baselines import time_to_target

        (X, Y, X_test, Y_test), make = _chain_l5()
        with threadpool_limits(1):
            crfsuite = CRFsuiteChain(c2=crfsuite_c2(1.0)).fit(X, Y)
            _, seconds, errors = fit_slr(make(), (X, Y, X_test, Y_test, None))
        target = 1.0 - crfsuite.score(X_test, Y_test) + SPECS["quick"].tolerance
        return time_to_target(seconds, errors, target) / crfsuite.fit_seconds_

    track_slr_to_crfsuite_error_over_crfsuite_seconds.unit = "ratio"
