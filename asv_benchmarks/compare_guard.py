"""What ``BoostedTrees``' guard against a rising loss costs: CPU seconds of guarded and unguarded
rounds, and of a Table 1 Boost cell's oracle fits, for two checkouts side by side.

Run from the repository root, with two built checkouts (the old one's ``slr`` first)::

    OMP_NUM_THREADS=1 .venv/bin/python asv_benchmarks/compare_guard.py OLD NEW [--repeats 2]
        [--rounds 100] [--cell Boost/Boost --iterations 10]

Every measurement runs in its own process, alternating between the checkouts (``PYTHONPATH``),
and prints CPU seconds (``time.process_time``):

* ``round``: ``BoostedTrees._boost`` from ``f = 0`` on each denoising-sized problem of
  ``benchmarks/bench_trees.py`` (160,000 x 2 and 316,800 x 4; the NIPS protocol's per-class trees,
  10,000 rows per round, Table 1's step .25), guarded and not: rounds, ms per round (a guarded
  boost stops at a round that raises the loss at every scale when it takes rounds one by one),
  halvings, and a digest of the scores (a guarded boost none of whose blocks raised the loss has
  the unguarded one's);
* ``cell`` (with ``--cell``): the full Table 1 cell's learner fit for ``--iterations`` iterations
  (no monitor): its CPU seconds, those of its ``BoostedTrees`` fits, how many of them continued,
  the CPU seconds and number of their guarded rounds, and a digest of the final trees' values.

Equal digests mean bitwise equal results.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def one_round(problem: str, guarded: bool, rounds: int) -> str:
    import numpy as np

    sys.path.insert(0, str(HERE / "benchmarks"))
    from bench_trees import make_problem
    from slr.oracles import BoostedTrees
    from slr.oracles.trees import _Ensemble

    features, bias, labels = make_problem(problem)
    n, k = bias.shape
    oracle = BoostedTrees(n_rounds=rounds, subsample=10_000, tree="per_class", learning_rate=0.25, random_state=0)
    settings = oracle._boosting_settings(oracle.get_params(), n, features.shape[1], k)
    oracle.n_halvings_ = 0
    ensemble = _Ensemble(np.zeros((n, k)))
    start = time.process_time()
    oracle._boost(features, bias, labels, None, ensemble, settings, np.random.default_rng(0), time.perf_counter(),
                  guarded=guarded)
    cpu = time.process_time() - start
    done = len(ensemble.round_seconds)
    return (f"{problem} {'guarded' if guarded else 'unguarded'}: {done} rounds, {1e3 * cpu / done:.2f} ms/round, "
            f"{oracle.n_halvings_} halvings, digest {hashlib.md5(ensemble.scores.tobytes()).hexdigest()[:12]}")


def one_cell(cell: str, iterations: int) -> str:
    import numpy as np

    from slr.oracles import BoostedTrees
    from slr.suite.denoising import SPECS

    spec = SPECS["full"]
    features, labels, _, _ = spec.data.load()
    spent, fits, guarded = [0.0], [0, 0], [0.0, 0]
    fit, boost = BoostedTrees._fit, BoostedTrees._boost

    def timed(self, *args, **kwargs):
        start = time.process_time()
        fit(self, *args, **kwargs)
        spent[0] += time.process_time() - start
        fits[0] += 1
        fits[1] += bool(self.continued_)

    def timed_boost(self, *args, **kwargs):
        start, rounds = time.process_time(), len(args[4].round_seconds)
        boost(self, *args, **kwargs)
        if kwargs.get("guarded", False):
            guarded[0] += time.process_time() - start
            guarded[1] += len(args[4].round_seconds) - rounds

    BoostedTrees._fit, BoostedTrees._boost = timed, timed_boost
    unary, pairwise = cell.split("/")
    learner = spec.learner(unary, pairwise, n_jobs=1).set_params(max_iter=iterations, monitor=False)
    start = time.process_time()
    learner.fit(features, labels)
    total = time.process_time() - start
    digest = hashlib.md5()
    for oracle in (learner.unary_, learner.pairwise_):
        if isinstance(oracle, BoostedTrees):
            digest.update(np.ascontiguousarray(oracle.node_value_).tobytes())
    return (f"full {cell}, {iterations} iterations: learner {total:.1f} s, BoostedTrees fits {spent[0]:.1f} s "
            f"({fits[0]} fits, {fits[1]} continued; guarded boosting {guarded[0]:.1f} s in {guarded[1]} rounds), "
            f"digest {digest.hexdigest()[:12]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", help="checkouts to compare, alternating")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--cell", default=None)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--one", nargs="+", help=argparse.SUPPRESS)   # a single measurement, in this process
    args = parser.parse_args()
    if args.one:
        kind, *rest = args.one
        print(one_round(rest[0], rest[1] == "guarded", int(rest[2])) if kind == "round"
              else one_cell(rest[0], int(rest[1])), flush=True)
        return
    jobs = [("round", problem, guarded, str(args.rounds))
            for problem in ("unary_160k_K2", "pairwise_316k_K4") for guarded in ("unguarded", "guarded")]
    if args.cell:
        jobs.append(("cell", args.cell, str(args.iterations)))
    for job in jobs:
        for _ in range(args.repeats):
            for checkout in args.checkouts:
                env = dict(os.environ, PYTHONPATH=str(Path(checkout).resolve()))
                out = subprocess.run([sys.executable, __file__, "--one", *job], env=env, capture_output=True,
                                     text=True, check=True).stdout.strip()
                print(f"{checkout}: {out}", flush=True)


if __name__ == "__main__":
    main()
