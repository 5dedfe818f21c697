"""slr:Linear with the library's defaults against our OneSlackSSVM on pystruct's snakes, side by side.

Run from the repository root::

    .venv/bin/python asv_benchmarks/compare_snakes.py [--n-train 100] [--n-test 50] [--C 0.1]

The protocol of issue 24's snakes row: the first ``n_train`` training and ``n_test`` test images of
pystruct 0.3.2's snakes, 11 states, the 3x3-neighbourhood input features of pystruct's
``plot_snakes.py`` on nodes and (by direction) on edges. Our ``OneSlackSSVM(C)`` fits first, with
its defaults; then ``StructuredLogisticRegression`` with ``Linear(l2=eps / C)`` for both factors
and every other setting at the library's default (the comparison's conversion of ``C``,
``slr_suite.methods.crfsuite_c2``), with the test set as validation data so that ``history_``
gives the test error after each iteration against slr's own fit clock (evaluation excluded).
Printed: the SSVM's fit time and test error, slr's curve, and the first time at which slr's test
error is at most the SSVM's, as a ratio of the SSVM's fit time. Both run in this process, one
after the other, single-threaded: on a shared machine read the ratio, not the seconds.

slr's ridge is chosen first, on the last quarter of the training images held out (``--ridges``; the
fits' time is printed but not counted, as the SSVM's C was chosen beforehand), unless ``--l2`` gives it.

Measured 2026-11-25 (joint-fast; a machine loaded by other jobs, load 2 to 13 on 2 cores, both fits
in this process): ``OneSlackSSVM(C=.1)`` test error .0255 after 527 s. The validation split chose
ridge .1 (validation errors .0629, .0304, .0356, .0367 for 1, .1, .01, .001); slr at ridge .1 stops by
the rule after 96 iterations and 30.5 s at .0345 (first iteration 4.7 s; it took 67 s before the
capped first iteration and the Cholesky preconditioner), best .0335: it does not reach the SSVM's
error at the ridge the split chose.
"""
from __future__ import annotations

import argparse
import os
import time


def load(n_train: int, n_test: int):
    from slr.datasets import load_snakes

    X_train, Y_train, X_test, Y_test = load_snakes(edge_features="input_by_direction")
    return X_train[:n_train], Y_train[:n_train], X_test[:n_test], Y_test[:n_test]


def error(model, X, Y) -> float:
    return 1.0 - float(model.score(X, Y))


def fit_slr(X, Y, l2: float, epsilon: float, X_val=None, Y_val=None):
    """slr with the library's defaults at ridge ``l2`` (both factors), single-threaded; ``X_val`` only
    for ``history_``'s error curve (no early stopping on it)."""
    from slr import StructuredLogisticRegression
    from slr.oracles import Linear

    model = StructuredLogisticRegression(unary=Linear(l2=l2), pairwise=Linear(l2=l2), epsilon=epsilon,
                                         early_stopping=False, n_jobs=1)
    return model.fit(X, Y, X_val=X_val, Y_val=Y_val)


def choose_ridge(X, Y, args) -> float:
    """The ridge of ``--ridges`` with the lowest error on the last ``--val-fraction`` of the training
    images, fitted with the library's defaults on the others (as the peers' C is chosen)."""
    n_val = max(1, int(round(args.val_fraction * len(X))))
    fit_X, fit_Y, val_X, val_Y = X[:-n_val], Y[:-n_val], X[-n_val:], Y[-n_val:]
    start, errors = time.perf_counter(), {}
    for l2 in (float(value) for value in args.ridges.split(",")):
        errors[l2] = error(fit_slr(fit_X, fit_Y, l2, args.epsilon), val_X, val_Y)
        print(f"  ridge {l2:g}: validation error {errors[l2]:.4f} ({len(fit_X)} / {n_val} images)", flush=True)
    best = min(errors, key=errors.get)
    print(f"ridge chosen on the validation split: {best:g} ({time.perf_counter() - start:.1f} s for "
          f"{len(errors)} fits, not counted below)")
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=100)
    parser.add_argument("--n-test", type=int, default=50)
    parser.add_argument("--C", type=float, default=0.1)
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--l2", type=float, default=None,
                        help="slr's ridge (default: chosen on a validation split, --ridges)")
    parser.add_argument("--ridges", default="1,0.1,0.01,0.001",
                        help="ridges tried on the validation split when --l2 is not given")
    parser.add_argument("--val-fraction", type=float, default=0.25,
                        help="training images held out to choose the ridge (the last ones)")
    parser.add_argument("--target", type=float, default=None,
                        help="the SSVM's test error from an earlier run (skips its fit; no time ratio)")
    args = parser.parse_args(argv)

    from baselines import OneSlackSSVM

    Xtr, Ytr, Xte, Yte = load(args.n_train, args.n_test)
    print(f"snakes: {len(Xtr)} training and {len(Xte)} test images; load average {os.getloadavg()[0]:.1f}")

    if args.target is None:
        t0 = time.perf_counter()
        ssvm = OneSlackSSVM(C=args.C, n_states=11, n_jobs=1).fit(Xtr, Ytr)
        ssvm_seconds = time.perf_counter() - t0
        target = error(ssvm, Xte, Yte)
        print(f"OneSlackSSVM(C={args.C:g}): test error {target:.4f} after {ssvm_seconds:.1f} s")
    else:
        target, ssvm_seconds = args.target, float("nan")

    l2 = args.l2 if args.l2 is not None else choose_ridge(Xtr, Ytr, args)
    # the test set is passed only for history_'s error curve: no early stopping on it
    model = fit_slr(Xtr, Ytr, l2, args.epsilon, Xte, Yte)
    history = model.history_.dropna(subset=["val_error"])
    print(f"slr (solver={model.solver!r} -> {model.solver_!r}, l2={l2:g}, eps={args.epsilon:g}): "
          f"stopped by {model.stop_reason_} after {model.n_iter_} iterations, test error {error(model, Xte, Yte):.4f}")
    print(history[["iteration", "seconds", "val_error"]].to_string(index=False))
    reached = history[history["val_error"] <= target]
    if len(reached):
        first = reached.iloc[0]
        print(f"slr reaches the SSVM's {target:.4f} at iteration {int(first['iteration'])} after "
              f"{first['seconds']:.1f} s: {first['seconds'] / ssvm_seconds:.2f}x the SSVM's fit time")
    else:
        print(f"slr never reaches the SSVM's {target:.4f} (best {history['val_error'].min():.4f})")


if __name__ == "__main__":
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):   # both learners single-threaded
        main()
