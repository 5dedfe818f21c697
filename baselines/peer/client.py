"""Run pystruct 0.3.2 learners from slr (Python 3.11) through a subprocess in the peer env.

The data go through a temporary directory: ``problem.npz`` (flat arrays with per-example
offsets, no pickles) and ``problem.json`` (learner, model, parameters); ``runner.py``,
executed by the peer environment's CPython 3.6, writes ``result.json``.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slr._params import Integer

from . import setup_env

RUNNER = Path(__file__).with_name("runner.py")
LEARNERS = ("OneSlackSSVM", "NSlackSSVM", "SubgradientSSVM", "FrankWolfeSSVM",
            "StructuredPerceptron")
MODELS = ("chain", "edge_feature_graph")


class PeerUnavailableError(RuntimeError):
    """The pystruct peer environment has not been built (or cannot be built here)."""


class PeerRunError(RuntimeError):
    """pystruct failed, timed out or returned no result inside the peer environment."""


def peer_env_dir() -> Path:
    """The peer environment's directory: ``$SLR_PEER_ENV`` or ``~/.cache/slr/pystruct-peer``."""
    return setup_env.default_env_dir()


def peer_python() -> Path | None:
    """The peer environment's interpreter, or None when the environment is not ready."""
    env_dir = peer_env_dir()
    return setup_env.env_python(env_dir) if setup_env.is_ready(env_dir) else None


def peer_available() -> bool:
    """True when the peer environment is built and ready (never builds it)."""
    return peer_python() is not None


def ensure_peer_env(verbose: int = 1) -> Path | None:
    """Build the peer environment if needed (about 25 s) and return its directory.

    Parameters
    ----------
    verbose : int, default=1
        0 silent, 1 progress on stderr (a bool works too: True is 1).

    Returns
    -------
    Path or None
        The environment directory, or None when no CPython 3.6 interpreter exists here.

    Raises
    ------
    PeerUnavailableError
        When an interpreter exists but the build failed (the message names the log file).
    """
    env_dir = peer_env_dir()
    status = setup_env.ensure(env_dir, verbose=bool(verbose))
    if status == setup_env.EXIT_OK:
        return env_dir
    if status == setup_env.EXIT_NO_PYTHON36:
        return None
    log = env_dir.parent / (env_dir.name + ".build.log")
    raise PeerUnavailableError(f"building the pystruct peer environment failed; see {log}")


# --------------------------------------------------------------------------- validation
def _check_split(X: Sequence, Y: Sequence, n_states: int, name: str,
                 dims: tuple[int, int] | None, chain: bool) -> tuple[int, int]:
    if len(X) != len(Y):
        raise ValueError(f"X_{name} has {len(X)} examples but Y_{name} has {len(Y)}")
    if len(X) == 0:
        raise ValueError(f"X_{name} is empty")
    for k, (x, y) in enumerate(zip(X, Y)):
        if not isinstance(x, (tuple, list)) or len(x) != 3:
            raise ValueError(f"X_{name}[{k}] must be (node_features, edges, edge_features)")
        feats, edges, efeats = (np.asarray(a) for a in x)
        y = np.asarray(y)
        if feats.ndim != 2 or feats.shape[0] == 0:
            raise ValueError(f"X_{name}[{k}] node_features must be a non-empty (n, d_u) array")
        n = feats.shape[0]
        if edges.ndim != 2 or edges.shape[1] != 2:
            raise ValueError(f"X_{name}[{k}] edges must have shape (m, 2), got {edges.shape}")
        if efeats.ndim != 2 or efeats.shape[0] != edges.shape[0]:
            raise ValueError(f"X_{name}[{k}] edge_features must have shape (m, d_e) with "
                             f"m = {edges.shape[0]} edges, got {efeats.shape}")
        if dims is None:
            dims = (feats.shape[1], efeats.shape[1])
        if (feats.shape[1], efeats.shape[1]) != dims:
            raise ValueError(f"X_{name}[{k}] has feature sizes {(feats.shape[1], efeats.shape[1])}"
                             f", expected (d_u, d_e) = {dims} as in the first training example")
        if not (np.all(np.isfinite(feats)) and np.all(np.isfinite(efeats))):
            raise ValueError(f"X_{name}[{k}] features contain NaN or inf")
        if edges.size and (not np.issubdtype(edges.dtype, np.integer)
                           or edges.min() < 0 or edges.max() >= n
                           or np.any(edges[:, 0] == edges[:, 1])):
            raise ValueError(f"X_{name}[{k}] edges must be integer pairs (i, j), i != j, "
                             f"in [0, {n})")
        if chain:
            expected = np.column_stack([np.arange(n - 1), np.arange(1, n)])
            if edges.shape != expected.shape or not np.array_equal(edges, expected):
                raise ValueError(f"X_{name}[{k}]: model='chain' needs edges (i, i+1) for "
                                 f"i = 0..n-2 in order; use model='edge_feature_graph'")
        if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer):
            raise ValueError(f"Y_{name}[{k}] must be an int array of shape ({n},)")
        if y.min() < 0 or y.max() >= n_states:
            raise ValueError(f"Y_{name}[{k}] has labels outside [0, n_states={n_states})")
    return dims


def _pack(X: Sequence, Y: Sequence, prefix: str) -> dict[str, np.ndarray]:
    feats = [np.asarray(x[0], dtype=np.float64) for x in X]
    edges = [np.asarray(x[1], dtype=np.int64).reshape(-1, 2) for x in X]
    efeats = [np.asarray(x[2], dtype=np.float64) for x in X]
    return {
        f"{prefix}_node_features": np.concatenate(feats),
        f"{prefix}_node_offsets": np.concatenate([[0], np.cumsum([f.shape[0] for f in feats])]),
        f"{prefix}_edges": np.concatenate(edges),
        f"{prefix}_edge_offsets": np.concatenate([[0], np.cumsum([e.shape[0] for e in edges])]),
        f"{prefix}_edge_features": np.concatenate(efeats),
        f"{prefix}_y": np.concatenate([np.asarray(y, dtype=np.int64) for y in Y]),
    }


# --------------------------------------------------------------------------- running
def run_peer(learner: str, X_train: Sequence, Y_train: Sequence,
             X_test: Sequence | None = None, Y_test: Sequence | None = None, *,
             model: str = "chain", n_states: int, params: dict[str, Any] | None = None,
             model_params: dict[str, Any] | None = None, random_state: int = 0,
             timeout: float = 3600.0) -> dict[str, Any]:
    """Fit one of pystruct's learners in the peer environment and return its results.

    Parameters
    ----------
    learner : str
        ``"OneSlackSSVM"``, ``"NSlackSSVM"``, ``"SubgradientSSVM"``, ``"FrankWolfeSSVM"`` or
        ``"StructuredPerceptron"`` (pystruct's class names).
    X_train, Y_train : sequence
        Examples ``(node_features (n, d_u), edges (m, 2), edge_features (m, d_e))`` and int
        label arrays ``(n,)`` in ``[0, n_states)``.
    X_test, Y_test : sequence, optional
        Held-out examples in the same format; both or neither.
    model : {"chain", "edge_feature_graph"}
        ``ChainCRF`` (directed transitions, node features only; edges must be the chain
        ``(i, i+1)``; edge features are ignored) or ``EdgeFeatureGraphCRF``.
    n_states : int
        Number of labels L. Training labels need not use all of them.
    params : dict, optional
        Keyword arguments of the pystruct learner (e.g. ``{"C": 1.0, "tol": 1e-4}``).
    model_params : dict, optional
        Keyword arguments of the pystruct model (e.g. ``{"inference_method": "max-product"}``).
    random_state : int, default=0
        Seed (an integer >= 0) of numpy's global generator inside the peer (pystruct uses it for
        shuffling).
    timeout : float
        Seconds before the subprocess is killed.

    Returns
    -------
    dict
        ``train_accuracy``, ``test_accuracy`` (per node; None without a test set),
        ``fit_seconds`` (pystruct's ``fit`` only), ``primal_objective`` (pystruct's
        ``objective_primal`` at the final weights: ``0.5 ||w||^2 + C * sum_k slack_k``; None
        for the perceptron), ``primal_objective_exact`` (the same with max-product, exact
        loss-augmented inference, when every graph is a forest; pystruct's value with ad3's
        relaxed inference can be too low), pystruct's own curves (``primal_objective_curve``,
        ``objective_curve``, ``loss_curve``, ``timestamps``), ``w`` (ndarray, pystruct's
        layout, see :func:`unpack_weights`), ``y_pred_test`` (list of int arrays),
        ``inference_calls``, ``versions`` and the echoed problem description.

    Raises
    ------
    ValueError
        Bad arguments (checked before anything runs).
    PeerUnavailableError
        The peer environment is not built; call :func:`ensure_peer_env` first.
    PeerRunError
        pystruct raised, the run timed out, or no result was written.
    """
    random_state = Integer(0).check(random_state, "random_state")
    if learner not in LEARNERS:
        raise ValueError(f"learner must be one of {LEARNERS}, got {learner!r}")
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    if isinstance(n_states, bool) or not isinstance(n_states, (int, np.integer)) or n_states < 2:
        raise ValueError(f"n_states must be an int >= 2, got {n_states!r}")
    if (X_test is None) != (Y_test is None):
        raise ValueError("X_test and Y_test must be given together")
    if not (isinstance(timeout, (int, float)) and timeout > 0 and math.isfinite(timeout)):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    params = dict(params or {})
    model_params = dict(model_params or {})
    for name, value in (("params", params), ("model_params", model_params)):
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name} must be JSON-serialisable: {exc}") from None
    chain = model == "chain"
    dims = _check_split(X_train, Y_train, int(n_states), "train", None, chain)
    has_test = X_test is not None
    if has_test:
        _check_split(X_test, Y_test, int(n_states), "test", dims, chain)

    python = peer_python()
    if python is None:
        raise PeerUnavailableError(
            f"the pystruct peer environment is not built at {peer_env_dir()}; run "
            "`python -m slr.baselines.peer.setup_env` or call ensure_peer_env() (needs CPython 3.6)")

    problem = {"learner": learner, "model": model, "n_states": int(n_states), "params": params,
               "model_params": model_params, "seed": random_state, "has_test": has_test}
    with tempfile.TemporaryDirectory(prefix="slr-peer-") as tmp:
        arrays = _pack(X_train, Y_train, "train")
        if has_test:
            arrays.update(_pack(X_test, Y_test, "test"))
        np.savez(Path(tmp) / "problem.npz", **arrays)
        (Path(tmp) / "problem.json").write_text(json.dumps(problem))
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        try:
            proc = subprocess.run([str(python), "-I", str(RUNNER), tmp], cwd=tmp, env=env,
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise PeerRunError(f"pystruct {learner} did not finish within {timeout} s") from None
        out_path = Path(tmp) / "result.json"
        if not out_path.exists():
            raise PeerRunError(f"the peer runner exited with status {proc.returncode} and no "
                               f"result; stderr:\n{proc.stderr[-4000:]}")
        result = json.loads(out_path.read_text())
    if "error" in result:
        raise PeerRunError(f"pystruct {learner} failed: {result['error']}\n"
                           f"{result.get('traceback', '')}")
    result["w"] = np.asarray(result["w"], dtype=np.float64)
    result["y_pred_test"] = [np.asarray(y, dtype=np.int64) for y in result["y_pred_test"]]
    return result


def unpack_weights(result: dict[str, Any]) -> dict[str, np.ndarray]:
    """Split pystruct's weight vector into slr's layout.

    Returns ``{"unary": (L, d_u), "pairwise": (d_e, L, L)}``: the potential of node i in
    state a is ``node_features[i] @ unary[a]``; of edge ``(i, j)`` in states ``(a, b)`` it is
    ``edge_features[e] @ pairwise[:, a, b]``. For ``model="chain"`` ``d_e = 1`` (ChainCRF's
    transition matrix acts as one constant edge feature equal to 1).
    """
    w = np.asarray(result["w"], dtype=np.float64)
    L, d_u = int(result["n_states"]), int(result["n_features"])
    unary = w[: L * d_u].reshape(L, d_u)
    rest = w[L * d_u:]
    if result["model"] == "chain" and result.get("model_params", {}).get("directed") is False:
        # undirected ChainCRF stores the lower triangle (row-major) of a symmetric matrix
        sym = np.zeros((L, L))
        sym[np.tril_indices(L)] = rest
        pairwise = (sym + sym.T - np.diag(np.diag(sym)))[None]
    else:
        pairwise = rest.reshape(-1, L, L)
    return {"unary": unary, "pairwise": pairwise}
