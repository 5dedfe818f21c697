"""Small fits before and after a change: bit-identical results, and their cost side by side.

Run from the repository root with a second worktree holding the other build (each with its
``.venv``, ``make venv``)::

    .venv/bin/python asv_benchmarks/compare_overhead.py identical --old ../base
    .venv/bin/python asv_benchmarks/compare_overhead.py time --old ../base [--rounds 5] [--fits 20]

Cases: ``slr:Linear`` with the library's defaults on the four problems of the held-out grid's quick
profile (``slr.suite.generalisation``: chains, a grid, a random loopy graph; 20 training examples)
and on letters' quick comparison data (100 training and 300 test words, ``Linear(l2=1)`` both
factors, eps = .1, as ``slr.suite.methods`` runs the row), one thread.

``identical`` fits every case (and the full grid's edge-input problem at the quick size) once in
each build (a subprocess per build, its own ``slr``) and compares, bit for bit: both oracles'
parameters, ``history_`` (but its clocks), ``objective_trace_``, ``n_iter_``, ``stop_reason_``,
the certificate, the messages kept for ``warm_start``, the test error after every iteration
(``fit``'s callback) and ``predict`` on the test examples. It exits 1 on the first difference.

``time`` alternates the builds, ``--rounds`` subprocesses each, every subprocess fitting each case
``--fits`` times (the grid; letters a tenth as often): the CPU seconds of a whole ``fit`` with the
library's monitoring on and of ``predict`` on the test examples, the fit time ``history_`` reports
(monitoring excluded), the final test error, and for every grid problem the fit time at which the
test error first comes within .005 of the best linear peer's (``slr generalisation``'s *to peer*;
the peers, our ``OneSlackSSVM`` and on chains CRFsuite, fitted once by the new build before the
rounds), for chain L5 also against CRFsuite's own fit time, measured in the same subprocess. It
prints the median over rounds of each build and their ratio. CPU seconds of single-threaded fits
are what a loaded machine disturbs least; compare the two columns, not the figures across machines.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
GRID = ("chain L5", "chain L20 strong", "grid L2 strong", "loopy L6")
LETTERS = "letters quick"
CASES = (*GRID, LETTERS)
#: also compared for identity: the full grid's edge-input problem at the quick size (its pairwise
#: features differ per edge, so the joint solver's edge terms take their dense form)
EDGE_INPUT = "grid L4 edge input"


# ----------------------------------------------------------------------------------------
# the worker (runs inside one build: its repository root first on sys.path)
# ----------------------------------------------------------------------------------------
def _case(name: str):
    """``(learner factory, (X_train, Y_train, X_test, Y_test))`` of a case."""
    if name == LETTERS:
        from slr.suite.methods import SPECS

        spec = SPECS["quick"]
        data = spec.letters.load()
        return (lambda: spec.slr_learner("slr:Linear", "letters", 26, 1, dict(C=0.1, epsilon=0.1))), data
    from slr.suite.generalisation import _grid

    problem = next(p for p in _grid(20, 30) if p.name == name)
    return _linear_at_C_1, problem.load()


def _linear_at_C_1():
    """slr:Linear as the held-out grid fits it at C = 1, eps = .1 (built here, not by the grid's
    own ``learner``, so that builds whose grid module differs fit the same model)."""
    from slr.oracles import Linear
    from slr.suite.oracles import defaults_learner

    return defaults_learner(unary=Linear(l2=0.1), pairwise=Linear(l2=0.1), epsilon=0.1, n_jobs=1, random_state=0)


def _fit(make, data):
    """A fit with the test error after every iteration, as the experiments record it
    (``slr.suite.methods.fit_slr``); the model and its curve ``(seconds, errors)``."""
    from slr.suite.methods import fit_slr

    model = make()
    _, seconds, errors = fit_slr(model, (*data, None))
    return model, seconds, errors


def _outputs(model, errors, data) -> dict:
    """Everything of a fit that must not change."""
    cert = model.certificate_
    out = {"history": model.history_.drop(columns=["seconds", "eval_seconds"]),
           "trace": model.objective_trace_, "n_iter": model.n_iter_, "stop_reason": model.stop_reason_,
           "solver": model.solver_, "messages": model._train_messages, "test_errors": errors,
           "predict": [y.copy() for y in model.predict(data[2])],
           "certificate": None if cert is None else {k: v for k, v in vars(cert).items()}}
    for factor in ("unary_", "pairwise_"):
        oracle = getattr(model, factor)
        out[factor] = {k: v for k, v in vars(oracle).items() if k.endswith("_")}
    return out


def _worker_identical(out: Path) -> None:
    results = {}
    for name in (*CASES, EDGE_INPUT):
        make, data = _case(name)
        model, _, errors = _fit(make, data)
        results[name] = _outputs(model, errors, data)
    out.write_bytes(pickle.dumps(results))


def _worker_peers(out: Path) -> None:
    """The best linear peer's test error on every grid problem, as ``slr generalisation`` fits the
    peers (:func:`slr.suite.generalisation._fit`) at C = 1, the C of the cases."""
    from slr.suite.generalisation import SPECS, _fit, methods_of

    spec = SPECS["quick"]
    errors = {}
    for name in GRID:
        problem = spec.problem(name)
        peers = [m for m in methods_of(spec, problem) if not m.startswith("slr:")]
        data = (*problem.load(), problem.n_states)
        errors[name] = min(_fit(spec, m, data, dict(C=1.0, epsilon=0.1), 1)[0]["test_error"] for m in peers)
    out.write_text(json.dumps(errors))


def _worker_time(n_fits: int, peers: dict[str, float]) -> None:
    from slr.baselines.crfsuite_peer import CRFsuiteChain
    from slr.suite.generalisation import SPECS
    from slr.suite.methods import crfsuite_c2
    from slr.suite.render_baselines import time_to_target

    tolerance = SPECS["quick"].tolerance

    figures = {}
    for name in CASES:
        make, data = _case(name)
        Xtr, Ytr, Xte, Yte = data
        fits = max(1, n_fits // 10) if name == LETTERS else n_fits
        make().fit(Xtr, Ytr)   # warm caches and imports
        cpu, history = [], []
        for _ in range(fits):
            start = time.process_time()
            model = make().fit(Xtr, Ytr)
            cpu.append(time.process_time() - start)
            history.append(float(model.history_["seconds"].iloc[-1]))
        start = time.process_time()
        for _ in range(fits):
            model.predict(Xte)
        figures[name] = {"fit CPU s": statistics.median(cpu), "history s": statistics.median(history),
                         "predict CPU s": (time.process_time() - start) / fits,
                         "test error": 1.0 - float(model.score(Xte, Yte))}
        if name in peers:
            curves = [_fit(make, data)[1:] for _ in range(fits)]
            figures[name]["to peer s"] = statistics.median(time_to_target(seconds, errors, peers[name] + tolerance)
                                                           for seconds, errors in curves)
        if name == "chain L5":
            peer, to_peer = [], []
            for _ in range(fits):
                crf = CRFsuiteChain(c2=crfsuite_c2(1.0)).fit(Xtr, Ytr)
                peer.append(crf.fit_seconds_)
                target = 1.0 - float(crf.score(Xte, Yte)) + tolerance
                _, seconds, errors = _fit(make, data)
                to_peer.append(time_to_target(seconds, errors, target))
            figures[name].update({"to CRFsuite s": statistics.median(to_peer), "CRFsuite s": statistics.median(peer)})
            figures[name]["to CRFsuite / CRFsuite"] = figures[name]["to CRFsuite s"] / figures[name]["CRFsuite s"]
    print(json.dumps(figures))


# ----------------------------------------------------------------------------------------
# the driver
# ----------------------------------------------------------------------------------------
def _run(root: Path, *args: str) -> str:
    python = root / ".venv" / "bin" / "python"
    env = dict(os.environ, PYTHONPATH=str(root))
    done = subprocess.run([str(python), str(Path(__file__).resolve()), "_worker", str(root), *args], cwd=root,
                          env=env, check=True, capture_output=True, text=True)
    return done.stdout


def _same(a, b, path: str) -> str | None:
    """Where ``a`` and ``b`` differ (bit for bit), or None."""
    import numpy as np
    import pandas as pd

    if isinstance(a, pd.DataFrame):
        if list(a.columns) != list(b.columns) or a.shape != b.shape:
            return f"{path}: columns or shape"
        return next((d for c in a.columns if (d := _same(a[c].to_numpy(), b[c].to_numpy(), f"{path}[{c}]"))), None)
    if isinstance(a, dict):
        if set(a) != set(b):
            return f"{path}: keys {sorted(set(a) ^ set(b))}"
        return next((d for k in a if (d := _same(a[k], b[k], f"{path}.{k}"))), None)
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: length"
        return next((d for i, (x, y) in enumerate(zip(a, b)) if (d := _same(x, y, f"{path}[{i}]"))), None)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"{path}: dtype or shape"
        if a.dtype == object:
            return _same(a.tolist(), b.tolist(), path)
        return None if a.tobytes() == b.tobytes() else f"{path}: values"
    if isinstance(a, float) and isinstance(b, float):
        return None if np.float64(a).tobytes() == np.float64(b).tobytes() else f"{path}: {a!r} != {b!r}"
    return None if a == b else f"{path}: {a!r} != {b!r}"


def identical(old: Path) -> int:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        dumps = {}
        for label, root in (("old", old), ("new", ROOT)):
            dumps[label] = Path(tmp) / f"{label}.pkl"
            _run(root, "identical", str(dumps[label]))
        a, b = (pickle.loads(dumps[label].read_bytes()) for label in ("old", "new"))
    status = 0
    for name in (*CASES, EDGE_INPUT):
        where = _same(a[name], b[name], name)
        print(f"{name}: {'identical' if where is None else 'DIFFERS at ' + where} "
              f"({a[name]['n_iter']} iterations, {a[name]['stop_reason']})")
        status |= where is not None
    return status


def timing(old: Path, rounds: int, n_fits: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        peers = Path(tmp) / "peers.json"
        _run(ROOT, "peers", str(peers))
        peer_errors = peers.read_text()
    print(f"best linear peer's test error: {peer_errors}")
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    for _ in range(rounds):
        for label, root in (("old", old), ("new", ROOT)):
            runs[label].append(json.loads(_run(root, "time", str(n_fits), peer_errors)))
    print(f"median of {rounds} alternating subprocesses per build, {n_fits} fits each (letters {max(1, n_fits // 10)});"
          " one thread")
    print("| case | figure | old | new | new / old |\n| :--- | :--- | ---: | ---: | ---: |")
    for name in CASES:
        for figure in runs["old"][0][name]:
            o = statistics.median(r[name][figure] for r in runs["old"])
            n = statistics.median(r[name][figure] for r in runs["new"])
            print(f"| {name} | {figure} | {o:.4g} | {n:.4g} | {n / o:.2f} |")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_worker":   # inside one build
        root, mode, arg = Path(argv[1]), argv[2], argv[3]
        sys.path.insert(0, str(root))
        if mode == "identical":
            _worker_identical(Path(arg))
        elif mode == "peers":
            _worker_peers(Path(arg))
        else:
            _worker_time(int(arg), json.loads(argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("identical", "time"))
    parser.add_argument("--old", type=Path, required=True, help="root of the other build's worktree")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fits", type=int, default=20)
    args = parser.parse_args(argv)
    if args.mode == "identical":
        return identical(args.old.resolve())
    timing(args.old.resolve(), args.rounds, args.fits)
    return 0


if __name__ == "__main__":
    sys.exit(main())
