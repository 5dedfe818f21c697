"""slr:Linear against CRFsuite on real tagged corpora, side by side: time to CRFsuite's test score and
peak memory, each fit in a fresh process measured the same way.

Usage::

    python asv_benchmarks/compare_tagging.py [CORPUS ...] [--l2 1.0] [--threads N]

Per corpus (default: hironsan turkish, the two corpora kept out of the tuning of defaults), the
training split is featurised as the suite's ``slr nlp`` does it (sklearn-crfsuite's tutorial features,
two neighbours on each side, ``SequenceVectorizer``), then in two fresh processes, one after the
other:

- CRFsuite's L-BFGS with ``c1 = c2 = .1`` and 100 iterations (sklearn-crfsuite's tutorial), one
  thread (CRFsuite has no other);
- slr with ``Linear(l2)`` oracles for both factors and every other setting at the library's default,
  on ``--threads`` threads (default: all cores); and in a third process the same fit with a callback
  scoring every iteration on the test split, for the time to CRFsuite's score (the fit's own clock,
  ``Iterate.seconds``, without the callback).

Each process reports its fit seconds, test score (entity F1 for IOB2 corpora, else token accuracy),
its peak resident set (``VmHWM``: interpreter, libraries, data and fit together) and what the fit
added to it (:mod:`slr.suite.memory`). The table gives slr's time to reach CRFsuite's score within
.005, and the ratios.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

DEFAULT_CORPORA = ("hironsan", "turkish")
TOLERANCE = 0.005


def _fit(method: str, corpus: str, l2: float, threads: int | None) -> dict:
    from slr.suite.memory import peak_memory
    from slr.suite.nlp import CorpusCut, _CRFsuite, featurize, score

    data = featurize(CorpusCut(corpus), window=2)
    curve: list[tuple[float, float]] = []
    with peak_memory() as memory:
        start = time.perf_counter()
        if method == "crfsuite":
            model = _CRFsuite(0.1, 0.1, 100).fit(data.X["train"], data.Y["train"])
        else:
            from slr import StructuredLogisticRegression
            from slr.oracles import Linear

            def record(iterate) -> None:
                curve.append((iterate.seconds, score(data.corpus, data.Y["test"], iterate.predict(data.X["test"]))[0]))

            model = StructuredLogisticRegression(Linear(l2=l2), Linear(l2=l2), n_jobs=threads)
            model.fit(data.X["train"], data.Y["train"], callback=record if method == "slr-curve" else None)
        seconds = time.perf_counter() - start
    test = score(data.corpus, data.Y["test"], model.predict(data.X["test"]))[0]
    return dict(seconds=seconds, test=test, peak_mb=memory.peak_mb, extra_mb=memory.extra_mb, curve=curve,
                tokens=sum(len(y) for y in data.Y["train"]), features=data.n_features)


def _in_fresh_process(method: str, corpus: str, l2: float, threads: int | None) -> dict:
    command = [sys.executable, __file__, "--child", method, corpus, "--l2", str(l2)]
    if threads is not None:
        command += ["--threads", str(threads)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def compare(corpus: str, l2: float = 1.0, threads: int | None = None) -> dict:
    """CRFsuite's fit, slr's fit and slr's scored curve on ``corpus``, each in a fresh process.

    Returns their records (``crfsuite``, ``slr``), slr's fit seconds to CRFsuite's test score
    within :data:`TOLERANCE` (NaN if never reached), that time over CRFsuite's fit time
    (``time_ratio``) and slr's peak resident memory over CRFsuite's (``memory_ratio``).
    """
    peer = _in_fresh_process("crfsuite", corpus, l2, threads)
    ours = _in_fresh_process("slr", corpus, l2, threads)
    curve = _in_fresh_process("slr-curve", corpus, l2, threads)["curve"]
    reached = [seconds for seconds, value in curve if value >= peer["test"] - TOLERANCE]
    to_peer = reached[0] if reached else float("nan")
    return dict(crfsuite=peer, slr=ours, slr_seconds_to_crfsuite=to_peer, time_ratio=to_peer / peer["seconds"],
                memory_ratio=ours["peak_mb"] / peer["peak_mb"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="*", default=list(DEFAULT_CORPORA))
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--child", nargs=2, metavar=("METHOD", "CORPUS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_fit(args.child[0], args.child[1], args.l2, args.threads)))
        return
    print(f"{'corpus':<11} {'tokens':>7} {'features':>8} | {'CRFsuite score':>14} {'s':>6} {'peak MiB':>8} | "
          f"{'slr score':>9} {'s':>6} {'to CRFsuite':>11} {'peak MiB':>8} | time ratio, memory ratio")
    for corpus in args.corpora:
        row = compare(corpus, args.l2, args.threads)
        peer, ours, to_peer = row["crfsuite"], row["slr"], row["slr_seconds_to_crfsuite"]
        print(f"{corpus:<11} {ours['tokens']:>7} {ours['features']:>8} | {peer['test']:>14.3f} {peer['seconds']:>6.1f} "
              f"{peer['peak_mb']:>8.0f} | {ours['test']:>9.3f} {ours['seconds']:>6.1f} {to_peer:>11.1f} "
              f"{ours['peak_mb']:>8.0f} | {row['time_ratio']:.2f}x, {row['memory_ratio']:.2f}x "
              f"(fit added {peer['extra_mb']:.0f} and {ours['extra_mb']:.0f} MiB)", flush=True)


if __name__ == "__main__":
    main()
