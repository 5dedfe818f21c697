"""Side-by-side speed and loss of ``BoostedTrees`` and the ``LightGBM`` adapter.

Run from the repository root::

    .venv/bin/python asv_benchmarks/compare_trees.py [--rounds 200] [--threads 1] [--repeats 1]

For each denoising-sized problem (see ``benchmarks/bench_trees.py``) it fits, one
after the other in this process and alternating over repeats:

* ``BoostedTrees`` with at most ``--leaves`` leaves and ``LightGBM`` with
  ``max_leaf_nodes=--leaves`` (same 10,000-row subsample per round, same thread count);
* ``BoostedTrees`` with the chapter's rules only (no leaf cap) and ``LightGBM`` with
  ``max_leaf_nodes`` set to the mean leaf count those trees reached.

It prints the time per round (whole fit / rounds; the LightGBM Dataset construction
is included, and shown separately), the mean training loss after the last round and
the ratios BoostedTrees / LightGBM. Goals: time ratio <= 1.5, loss ratio <= 1.02.

``--grid`` runs the wide-data grid instead (``bench_trees.GRID``: features
in {2, 12, 128}, classes in {2, 4, 26}, rows in {20k, 200k}; see ``grid_cell``)::

    .venv/bin/python asv_benchmarks/compare_trees.py --grid [--rounds 100] [--tree per_class]

For each cell LightGBM runs ``--rounds`` rounds and reaches training loss L in time T
(Dataset construction included); ours then boosts until its training loss is at most L
(or for ``--max-factor`` times LightGBM's rounds), and the cell reports the time ours
needed to reach L over T. Goal: <= 1.5.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))
from bench_trees import (  # noqa: E402
    GRID, PROBLEMS, grid_cell, make_oracle, make_problem, mean_loss,
)


def timed_fit(oracle, data) -> tuple[float, float]:
    start = time.perf_counter()
    oracle.fit(*data)
    return time.perf_counter() - start, mean_loss(oracle, *data)


def lightgbm_dataset_time(data, max_bin: int = 255) -> float:
    """Seconds LightGBM spends binning the data (part of every adapter fit)."""
    import lightgbm

    features, bias, labels = data
    start = time.perf_counter()
    lightgbm.Dataset(features, label=labels, init_score=bias.ravel(order="F"),
                     params={"max_bin": max_bin, "verbosity": -1}).construct()
    return time.perf_counter() - start


def compare(problem: str, rounds: int, threads: int, leaves: int, repeats: int) -> list[dict]:
    data = make_problem(problem)
    rows = []
    chapter = make_oracle("BoostedTrees", rounds, leaves=None, threads=threads)
    configs = [("BoostedTrees", leaves), ("LightGBM", leaves), ("BoostedTrees", None)]
    times: dict = {c: [] for c in configs}
    losses: dict = {}
    fitted: dict = {}
    for _ in range(repeats):
        for kind, cap in configs:
            oracle = chapter if cap is None else make_oracle(kind, rounds, cap, threads)
            seconds, loss = timed_fit(oracle, data)
            times[(kind, cap)].append(seconds)
            losses[(kind, cap)] = loss
            fitted[(kind, cap)] = oracle
    matched = int(round(float(np.mean(fitted[("BoostedTrees", None)].n_leaves_))))
    times[("LightGBM", matched)] = []
    for _ in range(repeats):
        seconds, loss = timed_fit(make_oracle("LightGBM", rounds, matched, threads), data)
        times[("LightGBM", matched)].append(seconds)
        losses[("LightGBM", matched)] = loss
    binning = lightgbm_dataset_time(data)
    for ours, ref, label in [(("BoostedTrees", leaves), ("LightGBM", leaves), f"{leaves} leaves"),
                             (("BoostedTrees", None), ("LightGBM", matched),
                              f"chapter rules (~{matched} leaves)")]:
        t_ours, t_ref = min(times[ours]), min(times[ref])
        rows.append({
            "problem": problem, "trees": label,
            "ours_ms": 1e3 * t_ours / rounds, "lgbm_ms": 1e3 * t_ref / rounds,
            "lgbm_binning_ms": 1e3 * binning,
            "time_ratio": t_ours / t_ref,
            "ours_loss": losses[ours], "lgbm_loss": losses[ref],
            "loss_ratio": losses[ours] / losses[ref],
        })
    return rows


def print_grid(args: argparse.Namespace) -> None:
    """Run every cell of the grid and print one row each."""
    if args.ours_leaves == 0:
        args.ours_leaves = None
    ours_leaves = args.leaves if args.ours_leaves == -1 else args.ours_leaves
    print(f"grid: LightGBM rounds={args.rounds} max_leaf_nodes={args.leaves}, ours tree={args.tree} "
          f"max_leaf_nodes={ours_leaves} "
          f"min_leaf_fraction={args.min_leaf} splitter={args.splitter} "
          f"newton_steps={args.newton_steps}, LightGBM min_sum_hessian_in_leaf="
          f"{'default' if args.lgbm_min_hessian is None else args.lgbm_min_hessian}, "
          f"threads={args.threads}, "
          "subsample=10000, learning_rate=0.25")
    print(f"{'rows':>7s} {'d':>4s} {'K':>3s} {'LGBM s':>8s} {'LGBM loss':>9s} {'ours rounds':>11s} "
          f"{'ours s':>8s} {'ours loss':>9s} {'ratio':>7s}")
    for n, d, k in GRID:
        if args.cells and f"{n}x{d}x{k}" not in args.cells:
            continue
        r = grid_cell(n, d, k, rounds=args.rounds, threads=args.threads, tree=args.tree,
                      leaves=args.leaves, min_leaf=args.min_leaf, splitter=args.splitter,
                      max_factor=args.max_factor, newton_steps=args.newton_steps,
                      ours_leaves=args.ours_leaves, lgbm_min_hessian=args.lgbm_min_hessian)
        reached = "" if r["reached"] else " (not reached: > )"
        print(f"{n:7d} {d:4d} {k:3d} {r['lgbm_seconds']:8.2f} {r['lgbm_loss']:9.5f} "
              f"{r['ours_rounds']:11d} {r['ours_seconds']:8.2f} {r['ours_loss']:9.5f} "
              f"{r['ratio']:7.3f}{reached}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds (default 200; 100 LightGBM rounds with --grid)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--leaves", type=int, default=31)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--problems", nargs="*", default=list(PROBLEMS), choices=list(PROBLEMS))
    parser.add_argument("--grid", action="store_true", help="the wide-data grid (see above)")
    parser.add_argument("--cells", nargs="*", default=None,
                        help="with --grid: only these cells, as ROWSxFEATURESxCLASSES")
    parser.add_argument("--tree", default="per_class", choices=["vector", "per_class"])
    parser.add_argument("--min-leaf", type=float, default=0.01)
    parser.add_argument("--splitter", default="auto", choices=["auto", "exact", "hist"])
    parser.add_argument("--newton-steps", type=int, default=8, help="ours' Newton steps per leaf")
    parser.add_argument("--ours-leaves", type=int, default=-1,
                        help="with --grid: ours' leaf cap if not --leaves (0: no cap)")
    parser.add_argument("--lgbm-min-hessian", type=float, default=None,
                        help="with --grid: LightGBM's min_sum_hessian_in_leaf (default: its own)")
    parser.add_argument("--max-factor", type=float, default=3.0,
                        help="with --grid: ours runs at most this many times LightGBM's rounds")
    args = parser.parse_args(argv)
    if args.grid:
        args.rounds = 100 if args.rounds is None else args.rounds
        print_grid(args)
        return
    args.rounds = 200 if args.rounds is None else args.rounds
    print(f"rounds={args.rounds} threads={args.threads} subsample=10000 repeats={args.repeats} "
          "(time per round = whole fit / rounds, best of repeats)")
    header = (f"{'problem':18s} {'trees':26s} {'ours ms/rd':>10s} {'LGBM ms/rd':>10s} "
              f"{'(binning)':>9s} {'time ratio':>10s} {'ours loss':>9s} {'LGBM loss':>9s} "
              f"{'loss ratio':>10s}")
    print(header)
    for problem in args.problems:
        for r in compare(problem, args.rounds, args.threads, args.leaves, args.repeats):
            print(f"{r['problem']:18s} {r['trees']:26s} {r['ours_ms']:10.2f} {r['lgbm_ms']:10.2f} "
                  f"{r['lgbm_binning_ms']:9.1f} {r['time_ratio']:10.3f} {r['ours_loss']:9.5f} "
                  f"{r['lgbm_loss']:9.5f} {r['loss_ratio']:10.4f}", flush=True)


if __name__ == "__main__":
    main()
