"""Side-by-side speed and loss of ``BoostedTrees`` and the ``LightGBM`` adapter.

Run from the repository root::

    .venv/bin/python asv_benchmarks/compare_trees.py [--rounds 200] [--threads 1] [--repeats 1]

For each denoising-sized problem (see ``benchmarks/bench_trees.py``) it fits, one
after the other in this process and alternating over repeats:

* ``BoostedTrees`` with at most ``--leaves`` leaves and ``LightGBM`` with
  ``num_leaves=--leaves`` (same 10,000-row subsample per round, same thread count);
* ``BoostedTrees`` with the chapter's rules only (no leaf cap) and ``LightGBM`` with
  ``num_leaves`` set to the mean leaf count those trees reached.

It prints the time per round (whole fit / rounds; the LightGBM Dataset construction
is included, and shown separately), the mean training loss after the last round and
the ratios BoostedTrees / LightGBM. Goals: time ratio <= 1.5, loss ratio <= 1.02.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))
from bench_trees import PROBLEMS, make_oracle, make_problem, mean_loss  # noqa: E402


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--leaves", type=int, default=31)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--problems", nargs="*", default=list(PROBLEMS), choices=list(PROBLEMS))
    args = parser.parse_args(argv)
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
