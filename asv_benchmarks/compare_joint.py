"""The joint L-BFGS solver (``slr._joint``) against Algorithm 1.1 and CRFsuite, side by side.

Run from the repository root::

    .venv/bin/python asv_benchmarks/compare_joint.py [--problem letters|denoising|both] [--repeats 2]

``letters``: fold 1 trains (704 words), the other folds test; ``Linear(l2 = eps / C)`` for both
factors with slr's C and eps (``--slr-C``, ``--slr-eps``; .1 and .1, what its validation fits chose,
docs/design.md section 6), CRFsuite's L-BFGS with ``c2 = 1 / (2 C)`` at its own C (``--crfsuite-C``;
1, its validation fits' choice). ``denoising``: the quick profile's data (8 + 8 images of 32 x 32,
sigma 3.2), ``Linear(l2=.1)`` both factors (C = 1), ``eps = .1``. Modes (``--modes``): ``sweeps``
and ``joint`` (see ``slr._joint``), ``hybrid`` (one iteration of Algorithm 1.1, then ``sweeps``),
``defaults`` (the learner with the library's defaults: ``solver="auto"``, the stopping rule),
``alternation`` (the defaults with ``solver="alternation"``) and ``suite`` (the solver settings the
suite's letters row had before 0.3: 6 sweeps per half step, 10 L-BFGS iterations per fit, omega 1.9).
Every run has one thread (``n_jobs=1`` and BLAS limited to one thread), as CRFsuite.

Each solver runs in this process one after the other (alternating over repeats); for each it
prints the curve of R (without ridge), J (with it) and the test error against the solver's own
clock (monitoring left out), and the first time at which the test error is at most the target
(CRFsuite's error on letters). The machine's load average is printed with every repeat: timings on
a shared machine are indicative only.

Measured 2026-11-25 (joint-fast; ``--problem letters --modes defaults,suite --relaxations "" --repeats
2 --quiet``, load 3 to 10 on 2 cores): the defaults reach CRFsuite's .1968 in 0.52x and 0.57x
CRFsuite's time (they stop by the rule after 33 iterations at .1957), the former suite settings in
0.88x and 0.57x.
"""
from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from slr import StructuredLogisticRegression
from slr._joint import joint_minimise, joint_objective
from slr.data import FlatData
from slr.models import PairwiseModel
from slr.oracles import Linear


#: --modes values that run the learner itself (the others run slr._joint.joint_minimise directly)
LIBRARY_MODES = ("defaults", "alternation", "suite")


def letters_problem(C: float = 0.1, epsilon: float = 0.1):
    from slr.datasets import load_letters

    X, Y, folds = load_letters()
    train, test = np.flatnonzero(folds == 1), np.flatnonzero(folds != 1)
    return ([X[k] for k in train], [Y[k] for k in train], [X[k] for k in test], [Y[k] for k in test],
            dict(l2=epsilon / C, epsilon=epsilon))


def denoising_problem():
    from slr.datasets import make_denoising

    Xtr, Ytr = make_denoising(8, 32, 3.2, random_state=0)
    Xte, Yte = make_denoising(8, 32, 3.2, random_state=1)
    return Xtr, Ytr, Xte, Yte, dict(l2=0.1, epsilon=0.1)


def test_error(model: PairwiseModel, data: FlatData, unary, pairwise) -> float:
    labels = model.decode(data, model.unary_potentials(data, unary), model.pairwise_potentials(data, pairwise))
    return float(np.mean(labels != data.labels))


def run_joint(problem, mode: str, max_iter: int, every: int, max_sweeps: int):
    """The joint solver from zeros, or with ``mode="hybrid"`` from one iteration of Algorithm 1.1
    (its time included), then the sweeps mode."""
    Xtr, Ytr, Xte, Yte, reg = problem
    train = FlatData(Xtr, Ytr)
    test = FlatData(Xte, Yte, train.n_states)
    eps = reg["epsilon"]
    unary, pairwise, messages, offset = Linear(l2=reg["l2"]), Linear(l2=reg["l2"]), None, 0.0
    if mode == "hybrid":
        start = time.perf_counter()
        first = StructuredLogisticRegression(unary, pairwise, epsilon=eps, max_iter=1, monitor=False,
                                             solver="alternation").fit(Xtr, Ytr)
        unary, pairwise, messages = first.unary_, first.pairwise_, first._train_messages
        offset, mode = time.perf_counter() - start, "sweeps"
    predictor = PairwiseModel(eps, inference="auto", max_sweeps=100, tol=1e-9)
    errors = {}

    def monitor(iteration, messages, objective, penalised):
        if iteration % every == 0:
            errors[iteration] = test_error(predictor, test, unary, pairwise)

    start = time.perf_counter()
    result = joint_minimise(train, eps, unary, pairwise, messages, messages_mode=mode, max_iter=max_iter, tol=1e-7,
                            max_sweeps=max_sweeps, callback=monitor)
    total = time.perf_counter() - start
    final = test_error(predictor, test, unary, pairwise)
    rows = [(i, offset + t, R, J, errors.get(i, np.nan)) for i, (t, R, J) in enumerate(result.trace)]
    rows.append(("end", offset + result.trace[-1][0], result.objective, result.penalised, final))
    return rows, dict(n_iter=result.n_iter, evaluations=result.n_evaluations, converged=result.converged,
                      wall=total)


def run_learner(problem, relaxation: float, max_iter: int):
    Xtr, Ytr, Xte, Yte, reg = problem
    model = StructuredLogisticRegression(Linear(l2=reg["l2"]), Linear(l2=reg["l2"]), epsilon=reg["epsilon"],
                                         max_iter=max_iter, relaxation=relaxation, solver="alternation")
    model.fit(Xtr, Ytr, Xte, Yte)
    return learner_rows(model, problem), {}


def learner_rows(model, problem) -> list[tuple]:
    """A fitted learner's curve (iteration, seconds, R, -, test error) and an ``end`` row with R and
    J recomputed from its functions and kept messages."""
    Xtr, Ytr, _, _, reg = problem
    R, J, _ = joint_objective(FlatData(Xtr, Ytr), reg["epsilon"], model.unary_, model.pairwise_,
                              model._train_messages)
    h = model.history_
    rows = [(int(i), t, R_, np.nan, e) for i, t, R_, e in zip(h["iteration"], h["seconds"], h["objective"],
                                                               h["val_error"])]
    rows.append(("end", float(h["seconds"].iloc[-1]), R, J, float(h["val_error"].iloc[-1])))
    return rows


def run_library(problem, mode: str, max_iter: int):
    """The learner as a user runs it: ``defaults`` (library defaults, ``solver="auto"``),
    ``alternation`` (the same, ``solver="alternation"``) or ``suite`` (the letters row's former
    settings, ``max_iter`` iterations); the test error after every iteration (monitoring excluded
    from the clock)."""
    Xtr, Ytr, Xte, Yte, reg = problem
    if mode == "suite":
        oracles = [Linear(l2=reg["l2"], max_iter=10) for _ in range(2)]
        settings = dict(max_sweeps=6, relaxation=1.9, tol=0.0, sweep_tol=0.0, max_iter=max_iter, solver="alternation")
    else:
        oracles = [Linear(l2=reg["l2"]) for _ in range(2)]
        settings = dict(solver="auto" if mode == "defaults" else "alternation")
    model = StructuredLogisticRegression(*oracles, epsilon=reg["epsilon"], early_stopping=False, n_jobs=1,
                                         **settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(Xtr, Ytr, Xte, Yte)
    return learner_rows(model, problem), dict(solver=model.solver_, n_iter=model.n_iter_,
                                              stop_reason=model.stop_reason_)


def run_crfsuite(problem, C: float):
    from slr.baselines.crfsuite_peer import CRFsuiteChain
    from slr.suite.methods import crfsuite_c2

    Xtr, Ytr, Xte, Yte, _ = problem
    model = CRFsuiteChain(c2=crfsuite_c2(C)).fit(Xtr, Ytr)
    return model.fit_seconds_, 1.0 - model.score(Xte, Yte), model.n_iter_


def first_time(rows, target: float) -> float:
    times = [t for _, t, _, _, e in rows if e == e and e <= target]
    return min(times) if times else float("nan")


def show(name: str, rows, info: dict, target: float | None, seconds: float | None, quiet: bool) -> None:
    print(f"\n{name} {info}")
    if not quiet:
        print(f"{'iter':>6} {'seconds':>8} {'R':>14} {'J':>14} {'test error':>10}")
        for i, t, R, J, e in rows:
            print(f"{i!s:>6} {t:8.2f} {R:14.6f} {J:14.6f} {e:10.4f}")
    end = rows[-1]
    print(f"end: {end[1]:.2f} s, J {end[3]:.6f}, test error {end[4]:.4f}")
    if target is not None:
        reached = first_time(rows, target)
        print(f"first time at test error <= {target:.4f}: {reached:.2f} s = {reached / seconds:.2f} x CRFsuite's")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problem", choices=("letters", "denoising", "both"), default="both")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--max-iter", type=int, default=200)
    parser.add_argument("--learner-iter", type=int, default=25)
    parser.add_argument("--modes", default="sweeps,hybrid,joint")
    parser.add_argument("--max-sweeps", type=int, default=8, help="sweeps per evaluation (sweeps mode)")
    parser.add_argument("--relaxations", default="1.0,1.9", help="Algorithm 1.1's runs ('' for none)")
    parser.add_argument("--slr-C", type=float, default=0.1, help="letters: slr's C (l2 = eps / C)")
    parser.add_argument("--slr-eps", type=float, default=0.1, help="letters: slr's eps")
    parser.add_argument("--crfsuite-C", type=float, default=1.0, help="letters: CRFsuite's C (c2 = 1 / (2 C))")
    parser.add_argument("--quiet", action="store_true", help="only the summary line of each run")
    args = parser.parse_args()
    problems = ["letters", "denoising"] if args.problem == "both" else [args.problem]
    for name in problems:
        problem = letters_problem(args.slr_C, args.slr_eps) if name == "letters" else denoising_problem()
        for repeat in range(args.repeats):
            print(f"\n=== {name}, repeat {repeat + 1}, load average {os.getloadavg()}")
            target, seconds = None, None
            if name == "letters":
                with threadpool_limits(1):
                    seconds, error, n_iter = run_crfsuite(problem, args.crfsuite_C)
                target = error
                print(f"CRFsuite C={args.crfsuite_C:g}: {seconds:.2f} s, test error {error:.4f}, {n_iter} iterations")
            for mode in filter(None, args.modes.split(",")):
                with threadpool_limits(1):
                    if mode in LIBRARY_MODES:
                        rows, info = run_library(problem, mode, args.learner_iter)
                    else:
                        rows, info = run_joint(problem, mode, args.max_iter, 10 if name == "letters" else 5,
                                               args.max_sweeps)
                show(f"{mode} (max_sweeps={args.max_sweeps})" if mode not in LIBRARY_MODES else mode, rows, info,
                     target, seconds, args.quiet)
            for omega in (float(value) for value in filter(None, args.relaxations.split(","))):
                rows, info = run_learner(problem, omega, args.learner_iter)
                show(f"StructuredLogisticRegression relaxation={omega}", rows, info, target, seconds, args.quiet)


if __name__ == "__main__":
    main()
