"""slr:Linear with the library's defaults against our OneSlackSSVM on pystruct's snakes, side by side.

Run from the repository root::

    .venv/bin/python asv_benchmarks/compare_snakes.py [--n-train 100] [--n-test 50] [--C 0.1]
        [--ridges 0.1,0.03,0.01,0.003,0.001] [--epsilons 0.1,0.03,0.01] [--folds 4] [--l2 L --epsilon E]
        [--settings L/E[/TOL],...] [--target ERROR]

The protocol of the snakes row: the first ``n_train`` training and ``n_test`` test images of
pystruct 0.3.2's snakes, 11 states, the 3x3-neighbourhood input features of pystruct's
``plot_snakes.py`` on nodes and (by direction) on edges. Our ``OneSlackSSVM(C)`` fits first, with
its defaults but ``exact_check=False``, pystruct's default of no exact final phase (with the check
its integer programs, one per image the LP leaves uncertified at each check, did not finish in 55
CPU minutes); then ``StructuredLogisticRegression`` with ``Linear(l2)`` for both factors, smoothing
``eps`` and every other setting at the library's default, with the test set as validation data so
that ``history_`` gives the test error after each iteration against slr's own fit clock
(evaluation excluded). Printed: the SSVM's fit time and test error, slr's curve, and the first time
at which slr's test error is at most the SSVM's, as a ratio of the SSVM's fit time (and with the
cross-validation's time added). Both run in this process, one after the other, single-threaded: on
a shared machine read the ratio, not the seconds.

slr's model, ``(l2, eps)``, is chosen first by K-fold cross-validation on the training images
(``--folds`` consecutive blocks, each held out once; the error pooled over all held-out nodes) over
``--ridges`` x ``--epsilons`` (ties: the first in grid order), with the library's defaults; the
fits' time is printed but not counted in the ratio, as the SSVM's C was chosen beforehand.
``--l2`` with ``--epsilon`` skips it.

Measured 2026-11-25 (a machine loaded by other jobs, load 4 to 11 on 2 cores; one thread). The
4-fold cross-validation errors (rows ridge .1, .03, .01, .003, .001; columns eps .1 / .03 / .01):
.0447 / .0348 / .0338, .0385 / .0340 / .0298, .0401 / .0327 / .0290, .0369 / .0343 / .0284,
.0439 / .0300 / .0253: it chooses ridge .001, eps .01 (eps .01 is best at every ridge; eps .003
at ridge .01 gives .0292). The 60 fits took about 3,000 s (614 s for the chosen setting's four).
Side by side in one process (``--l2 0.001 --epsilon 0.01``): ``OneSlackSSVM(C=.1)`` test error
.0255 after 352 s; slr reaches .0255 at iteration 31 after 33.1 s, **0.09x** the SSVM's fit time
(.0250 at iteration 38, 35.2 s) and stops by the rule (converged) after 154 iterations and 117 s
(0.33x) at .0223 (best .0133 at iteration 99). With the cross-validation slr takes longer than
the SSVM. With eps fixed at .1 (the former protocol) the cross-validation would choose ridge .003
(.0369), which reaches .0239 (.0255 after 48.5 s in a run of its own; the former 75 / 25 split
chose .1). The training error ends at 0 at every setting tried: ridge and eps decide the test
error, not the solver. 50 test images are 1,882 nodes: .0255 is 48 errors, and the final test
errors of the 12 settings fitted on all 100 images lie within 18 nodes (.0218 to .0313).

Measured 2026-11-29 (load 3 on 2 cores; one thread), ``--l2 0.001 --epsilon 0.01``, the SSVM with
``exact_check=False``: ``OneSlackSSVM(C=.1)`` test error .0186 after 414 s (582 iterations; 147 CPU
s in a run of its own); slr reaches .0186 at iteration 39 after 7.9 s, **0.02x**, and stops by the
rule after 101 iterations and 40.6 s at .0159.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

#: The grid the cross-validation searches: ridges (both factors), strongest first, and eps, largest first.
RIDGES = "0.1,0.03,0.01,0.003,0.001"
EPSILONS = "0.1,0.03,0.01"


def load(n_train: int, n_test: int):
    from slr.datasets import load_snakes

    X_train, Y_train, X_test, Y_test = load_snakes(edge_features="input_by_direction")
    return X_train[:n_train], Y_train[:n_train], X_test[:n_test], Y_test[:n_test]


def error(model, X, Y) -> float:
    return 1.0 - float(model.score(X, Y))


def fit_slr(X, Y, l2: float, epsilon: float | None, X_val=None, Y_val=None, monitor: bool = True,
            tol: float | None = None):
    """slr with the library's defaults at ridge ``l2`` (both factors), ``epsilon`` and ``tol`` (None:
    their defaults), single-threaded; ``X_val`` only for ``history_``'s error curve (no early
    stopping on it). ``monitor=False`` skips the per-iteration training error, which only
    ``history_`` shows (the fit is the same)."""
    from slr import StructuredLogisticRegression
    from slr.oracles import Linear

    chosen = {name: value for name, value in dict(epsilon=epsilon, tol=tol).items() if value is not None}
    model = StructuredLogisticRegression(unary=Linear(l2=l2), pairwise=Linear(l2=l2), **chosen,
                                         early_stopping=False, n_jobs=1, monitor=monitor)
    return model.fit(X, Y, X_val=X_val, Y_val=Y_val)


def settings(text: str) -> list[tuple[float, float | None, float | None]]:
    """The ``l2/eps`` or ``l2/eps/tol`` items of ``--settings`` (eps ``default``, or no tol: the
    library's default)."""
    items = []
    for item in text.split(","):
        l2, epsilon, *tol = item.split("/")
        items.append((float(l2), None if epsilon == "default" else float(epsilon), float(tol[0]) if tol else None))
    return items


def report_fit(model, target: float, ssvm_seconds: float, l2: float, epsilon: float | None,
               tol: float | None) -> None:
    """One line for a fit of slr at (``l2``, ``epsilon``) and its test-error curve at a few iterations."""
    history = model.history_.dropna(subset=["val_error"])
    reached = history[history["val_error"] <= target]
    when = "never" if not len(reached) else (
        f"at iteration {int(reached.iloc[0]['iteration'])} after {reached.iloc[0]['seconds']:.1f} s "
        f"({reached.iloc[0]['seconds'] / ssvm_seconds:.2f}x the SSVM's fit time)")
    best = history["val_error"].idxmin()
    print(f"slr l2={l2:g}, eps={model.epsilon_:g}{' (default)' if epsilon is None else ''}"
          f"{'' if tol is None else f', tol={tol:g}'}: stopped by "
          f"{model.stop_reason_} after {model.n_iter_} iterations and {history['seconds'].iloc[-1]:.1f} s, test error "
          f"{history['val_error'].iloc[-1]:.4f} (best {history['val_error'][best]:.4f} at iteration "
          f"{int(history['iteration'][best])}); reaches the SSVM's {target:.4f} {when}", flush=True)
    shown = history[history["iteration"].isin([1, 5, 10, 20, 30, 40, 50, 75, 100, 150, 200])]
    print("  curve (iteration: test error): " + ", ".join(
        f"{int(i)}: {e:.4f}" for i, e in zip(shown["iteration"], shown["val_error"])), flush=True)
    print("  " + rule_margin(model), flush=True)


def rule_margin(model) -> str:
    """How far the fit's end is from the stopping rule: J's fall over its last three iterations
    against the rule's threshold ``3 tol max(J, 1)`` (at the default ``tol`` when the rule was off),
    J as the rule saw it (the joint solver's closing sweeps, trace stage ``"joint_mp"``, left out)."""
    from slr import StructuredLogisticRegression
    from slr._progress import iteration_objectives

    trace = model.objective_trace_
    objectives = iteration_objectives(model.history_, trace[trace["stage"] != "joint_mp"])
    tol = model.tol or StructuredLogisticRegression().tol
    old, new = objectives[-4], objectives[-1]
    return (f"J = {new:.2f} at the end (R {model.history_['objective'].iloc[-1]:.2f}); it fell by {old - new:.3g} "
            f"over the last 3 iterations, {(old - new) / (3 * tol * max(old, new, 1.0)):.1f}x the stopping "
            f"rule's threshold at tol={tol:g}")


def report_cpu_to_target(model, X, Y, l2: float, epsilon: float | None, tol: float | None,
                         target: float) -> None:
    """The CPU seconds of a fit of slr at (``l2``, ``epsilon``, ``tol``) that stops at the first
    iteration at which ``model``'s test error was at most ``target`` (no validation data: its
    evaluation is not in the clock) and the default monitor, printed; nothing if it never was."""
    from slr import StructuredLogisticRegression

    history = model.history_.dropna(subset=["val_error"])
    reached = history[history["val_error"] <= target]
    if not len(reached):
        return
    n_iter = int(reached.iloc[0]["iteration"])
    refit = StructuredLogisticRegression(**{**model.get_params(deep=False), "max_iter": n_iter, "monitor": "auto"})
    start = time.process_time()
    refit.fit(X, Y)
    print(f"  a fit of those {n_iter} iterations alone: {time.process_time() - start:.1f} CPU s", flush=True)


def floats(text: str) -> list[float]:
    """The comma-separated numbers of a command-line grid."""
    return [float(value) for value in text.split(",")]


def cross_validate(X, Y, l2: float, epsilon: float, n_folds: int) -> tuple[float, float]:
    """The per-node error of slr at (``l2``, ``epsilon``) on each of ``n_folds`` consecutive blocks
    of the images, fitted on the others, pooled over all held-out nodes; and the fits' seconds."""
    n_wrong, n_nodes, seconds = 0.0, 0, 0.0
    for fold in range(n_folds):
        lo, hi = fold * len(X) // n_folds, (fold + 1) * len(X) // n_folds
        start = time.perf_counter()
        model = fit_slr(X[:lo] + X[hi:], Y[:lo] + Y[hi:], l2, epsilon, monitor=False)
        seconds += time.perf_counter() - start
        nodes = sum(np.asarray(y).size for y in Y[lo:hi])
        n_wrong += error(model, X[lo:hi], Y[lo:hi]) * nodes
        n_nodes += nodes
    return n_wrong / n_nodes, seconds


def choose_setting(X, Y, args) -> tuple[float, float, float]:
    """The (ridge, eps) of ``--ridges`` x ``--epsilons`` with the lowest ``--folds``-fold
    cross-validation error on the training images, fitted with the library's defaults (as the
    peers' C is chosen); ties go to the first in grid order (ridges, then eps, as given). Also
    returns the seconds of all the cross-validation fits."""
    errors, total = {}, 0.0
    for l2 in floats(args.ridges):
        for epsilon in floats(args.epsilons):
            errors[l2, epsilon], seconds = cross_validate(X, Y, l2, epsilon, args.folds)
            total += seconds
            print(f"  ridge {l2:g}, eps {epsilon:g}: {args.folds}-fold cross-validation error "
                  f"{errors[l2, epsilon]:.4f} ({seconds:.1f} s)", flush=True)
    l2, epsilon = min(errors, key=errors.get)
    print(f"chosen by {args.folds}-fold cross-validation: ridge {l2:g}, eps {epsilon:g} ({total:.1f} s for "
          f"{args.folds * len(errors)} fits)")
    return l2, epsilon, total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=100)
    parser.add_argument("--n-test", type=int, default=50)
    parser.add_argument("--C", type=float, default=0.1)
    parser.add_argument("--l2", type=float, default=None,
                        help="slr's ridge (with --epsilon: no cross-validation)")
    parser.add_argument("--epsilon", type=float, default=None,
                        help="slr's eps (with --l2: no cross-validation)")
    parser.add_argument("--ridges", default=RIDGES, help="ridges the cross-validation tries")
    parser.add_argument("--epsilons", default=EPSILONS, help="eps values the cross-validation tries")
    parser.add_argument("--folds", type=int, default=4, help="folds of the cross-validation")
    parser.add_argument("--settings", default=None,
                        help="side by side after the SSVM, no cross-validation: comma-separated l2/eps or "
                             "l2/eps/tol, eps 'default' for the library's default (e.g. 0.1/0.1/0,0.01/default)")
    parser.add_argument("--target", type=float, default=None,
                        help="the SSVM's test error from an earlier run (skips its fit; no time ratio)")
    args = parser.parse_args(argv)
    if (args.l2 is None) != (args.epsilon is None):
        parser.error("--l2 and --epsilon go together (neither: cross-validation chooses both)")
    if args.settings is not None and args.l2 is not None:
        parser.error("--settings replaces --l2 and --epsilon")
    if args.l2 is None and args.settings is None and not 2 <= args.folds <= args.n_train:
        parser.error(f"--folds must be between 2 and --n-train ({args.n_train}), got {args.folds}")

    from slr.baselines import OneSlackSSVM

    Xtr, Ytr, Xte, Yte = load(args.n_train, args.n_test)
    print(f"snakes: {len(Xtr)} training and {len(Xte)} test images; load average {os.getloadavg()[0]:.1f}")

    if args.target is None:
        t0, cpu0 = time.perf_counter(), time.process_time()
        ssvm = OneSlackSSVM(C=args.C, n_states=11, n_jobs=1, exact_check=False).fit(Xtr, Ytr)
        ssvm_seconds, ssvm_cpu = time.perf_counter() - t0, time.process_time() - cpu0
        target = error(ssvm, Xte, Yte)
        print(f"OneSlackSSVM(C={args.C:g}): test error {target:.4f} after {ssvm_seconds:.1f} s "
              f"({ssvm_cpu:.1f} CPU s)", flush=True)
    else:
        target, ssvm_seconds = args.target, float("nan")

    if args.settings is not None:
        for l2, epsilon, tol in settings(args.settings):
            model = fit_slr(Xtr, Ytr, l2, epsilon, Xte, Yte, tol=tol)
            report_fit(model, target, ssvm_seconds, l2, epsilon, tol)
            report_cpu_to_target(model, Xtr, Ytr, l2, epsilon, tol, target)
        return
    if args.l2 is None:
        l2, epsilon, cv_seconds = choose_setting(Xtr, Ytr, args)
    else:
        l2, epsilon, cv_seconds = args.l2, args.epsilon, float("nan")
    # the test set is passed only for history_'s error curve: no early stopping on it
    model = fit_slr(Xtr, Ytr, l2, epsilon, Xte, Yte)
    history = model.history_.dropna(subset=["val_error"])
    print(f"slr (solver={model.solver!r} -> {model.solver_!r}, l2={l2:g}, eps={epsilon:g}): "
          f"stopped by {model.stop_reason_} after {model.n_iter_} iterations, test error {error(model, Xte, Yte):.4f}")
    print(history[["iteration", "seconds", "val_error"]].to_string(index=False))
    reached = history[history["val_error"] <= target]
    if len(reached):
        first = reached.iloc[0]
        print(f"slr reaches the SSVM's {target:.4f} at iteration {int(first['iteration'])} after "
              f"{first['seconds']:.1f} s: {first['seconds'] / ssvm_seconds:.2f}x the SSVM's fit time")
        if args.l2 is None:
            seconds = cv_seconds + first["seconds"]
            print(f"with the cross-validation's fits: {seconds:.1f} s, "
                  f"{seconds / ssvm_seconds:.2f}x the SSVM's fit time")
    else:
        print(f"slr never reaches the SSVM's {target:.4f} (best {history['val_error'].min():.4f})")


if __name__ == "__main__":
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):   # both learners single-threaded
        main()
