"""Letters' quick cut against the full test set: CRFsuite and slr:Linear trained on the same words.

Run from the repository root::

    .venv/bin/python asv_benchmarks/compare_letters_cut.py [--n-train 100] [--n-test 300]

The quick profile of ``slr baselines`` trains on ``n_train`` words of fold 1 and tests on ``n_test``
words of the other folds, drawn at random (:class:`slr.suite.methods.LettersData`; consecutive
words of a fold often repeat one word, so the first words of a fold would be a few distinct words):
printed first are the distinct words of each part and how many test letters belong to words seen
in training. Then CRFsuite (``c2 = 1 / 2C``) and slr:Linear (the library's defaults, ``Linear(l2 =
eps / C)`` on both factors) are fitted on those training words at each ``C`` (slr at eps .1, the
quick profile's, and at the default) and scored on the cut's test words and on all 6,173 test
words. One thread; the fit seconds are printed, not compared.
"""
from __future__ import annotations

import argparse
import time
import warnings

from threadpoolctl import threadpool_limits


def word(labels) -> str:
    return "".join(chr(ord("a") + int(a)) for a in labels)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=100)
    parser.add_argument("--n-test", type=int, default=300)
    parser.add_argument("--C", default="0.1,1,10", help="comma-separated C values")
    args = parser.parse_args(argv)

    from benchmarks.common import letters
    from slr import StructuredLogisticRegression
    from slr._setup import resolve_epsilon
    from slr.baselines.crfsuite_peer import CRFsuiteChain
    from slr.oracles import Linear

    X, Y, X_cut, Y_cut = letters(args.n_train, args.n_test)
    tests = {"cut": (X_cut, Y_cut), "all": letters(args.n_train, None)[2:]}
    seen = {word(y) for y in Y}
    for name, (_, Y_test) in tests.items():
        letters_seen = sum(len(y) for y in Y_test if word(y) in seen) / sum(len(y) for y in Y_test)
        print(f"{name} test set: {len(Y_test)} words, {len({word(y) for y in Y_test})} distinct; "
              f"{letters_seen:.0%} of its letters in the {len(seen)} distinct training words")
    default_epsilon = resolve_epsilon(StructuredLogisticRegression().epsilon, (Linear(), Linear()))
    for C in (float(value) for value in args.C.split(",")):
        models = {"CRFsuite": CRFsuiteChain(c2=1.0 / (2.0 * C), n_states=26)}
        for eps in dict.fromkeys((0.1, default_epsilon)):
            models[f"slr eps {eps:g}"] = StructuredLogisticRegression(
                Linear(l2=eps / C), Linear(l2=eps / C), epsilon=eps, n_states=26, n_jobs=1)
        for name, model in models.items():
            start = time.perf_counter()
            model.fit(X, Y)
            seconds = time.perf_counter() - start
            errors = ", ".join(f"{part} {1.0 - model.score(*data):.3f}" for part, data in tests.items())
            print(f"C={C:g} {name}: test error {errors} ({seconds:.1f} s)", flush=True)


if __name__ == "__main__":
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    warnings.simplefilter("ignore")   # a ConvergenceWarning changes no figure here
    with threadpool_limits(1):
        main()
