"""Fit one pystruct 0.3.2 learner on a problem read from files; runs INSIDE the peer env.

This file is executed by the CPython 3.6 interpreter of the peer environment
(``python runner.py PROBLEM_DIR``), so it is Python 3.6 code that imports only the
standard library, numpy and pystruct. The slr side (``slr.baselines.peer.client``) writes

``PROBLEM_DIR/problem.json``
    ``{"learner": "OneSlackSSVM", "model": "chain" | "edge_feature_graph", "n_states": L,
    "params": {...learner kwargs...}, "model_params": {...model kwargs...}, "seed": 0,
    "has_test": true}``
``PROBLEM_DIR/problem.npz``
    for each split ``s`` in ``train`` (and ``test``): ``s_node_features`` (N, d_u),
    ``s_node_offsets`` (K+1,), ``s_edges`` (M, 2) local node indices, ``s_edge_offsets``
    (K+1,), ``s_edge_features`` (M, d_e), ``s_y`` (N,). Example k owns rows
    ``offsets[k]:offsets[k+1]``.

and this script writes ``PROBLEM_DIR/result.json`` (see ``_fit`` for the fields), or
``{"error": ..., "traceback": ...}`` with exit status 1.

Model conversion: ``edge_feature_graph`` passes ``(node_features, edges, edge_features)``
to ``EdgeFeatureGraphCRF`` unchanged. ``chain`` gives ``ChainCRF`` the node features only;
its edges are implied (i, i+1), so the runner checks that the given edges are exactly that
chain and ignores the edge features (ChainCRF's pairwise feature is the transition count,
the same as one constant edge feature equal to 1).

pystruct quirk handled here: ``model.initialize`` insists that the training labels use all
``n_states`` states. The runner sizes the model itself and calls ``fit(..., initialize=False)``.
"""
import json
import os
import sys
import time
import traceback
import warnings

import numpy as np

LEARNERS = ("OneSlackSSVM", "NSlackSSVM", "SubgradientSSVM", "FrankWolfeSSVM",
            "StructuredPerceptron")
MODELS = ("chain", "edge_feature_graph")


def _read_split(data, prefix):
    feats = data[prefix + "_node_features"]
    noff = data[prefix + "_node_offsets"]
    edges = data[prefix + "_edges"]
    eoff = data[prefix + "_edge_offsets"]
    efeats = data[prefix + "_edge_features"]
    y = data[prefix + "_y"]
    X, Y = [], []
    for k in range(len(noff) - 1):
        X.append((np.ascontiguousarray(feats[noff[k]:noff[k + 1]], dtype=np.float64),
                  np.ascontiguousarray(edges[eoff[k]:eoff[k + 1]], dtype=np.int64),
                  np.ascontiguousarray(efeats[eoff[k]:eoff[k + 1]], dtype=np.float64)))
        Y.append(np.ascontiguousarray(y[noff[k]:noff[k + 1]], dtype=np.int64))
    return X, Y


def _to_chain(X, split):
    out = []
    for k, (feats, edges, _) in enumerate(X):
        n = feats.shape[0]
        expected = np.column_stack([np.arange(n - 1), np.arange(1, n)])
        if edges.shape != expected.shape or not np.array_equal(edges, expected):
            raise ValueError("model='chain' needs edges (i, i+1) in order; %s example %d "
                             "has other edges" % (split, k))
        out.append(feats)
    return out


def _make_model(name, n_states, n_features, n_edge_features, model_params):
    from pystruct.models import ChainCRF, EdgeFeatureGraphCRF
    if name == "chain":
        model = ChainCRF(n_states=n_states, n_features=n_features, **model_params)
    elif name == "edge_feature_graph":
        model = EdgeFeatureGraphCRF(n_states=n_states, n_features=n_features,
                                    n_edge_features=n_edge_features, **model_params)
    else:
        raise ValueError("model must be one of %s, got %r" % (MODELS, name))
    # What model.initialize would do, minus its check that Y uses every state.
    model._set_size_joint_feature()
    model._set_class_weight()
    return model


def _make_learner(name, model, params):
    from pystruct import learners
    if name not in LEARNERS:
        raise ValueError("learner must be one of %s, got %r" % (LEARNERS, name))
    return getattr(learners, name)(model, **params)


def _all_forests(model, X):
    from pystruct.utils.graph_functions import is_forest
    for x in X:
        edges = model._get_edges(x)
        if len(edges) and not is_forest(edges, n_vertices=len(model._get_features(x))):
            return False
    return True


def _accuracy(learner, X, Y):
    """Per-node accuracy, pystruct's ``score`` (1 - Hamming loss / number of nodes)."""
    Y_pred = learner.predict(X)
    Y_pred = [np.asarray(y, dtype=np.int64).ravel() for y in Y_pred]
    correct = sum(int(np.sum(yp == y)) for yp, y in zip(Y_pred, Y))
    total = sum(int(y.size) for y in Y)
    return correct / float(total), Y_pred


def _floats(values):
    return [float(v) for v in values] if values is not None else None


#: Where each learner's ``fit`` leaves, as its last entry, pystruct's ``objective_primal`` at the
#: returned weights (``_objective(X, Y)``, with the learner's variant and ``n_jobs``): read there,
#: not computed again (on loopy graphs another LP inference per training example).
FINAL_PRIMAL = {"OneSlackSSVM": "primal_objective_curve_", "NSlackSSVM": "primal_objective_curve_",
                "FrankWolfeSSVM": "primal_objective_curve_", "SubgradientSSVM": "objective_curve_"}


def _final_primal(learner, name):
    """The primal objective ``learner``'s fit computed last at its weights, or None."""
    curve = getattr(learner, FINAL_PRIMAL.get(name, ""), None)
    return float(curve[-1]) if curve else None


def _fit(problem_dir):
    with open(os.path.join(problem_dir, "problem.json")) as f:
        problem = json.load(f)
    data = np.load(os.path.join(problem_dir, "problem.npz"), allow_pickle=False)
    X_train, Y_train = _read_split(data, "train")
    has_test = bool(problem.get("has_test", False))
    X_test, Y_test = _read_split(data, "test") if has_test else ([], [])

    model_name = problem["model"]
    n_states = int(problem["n_states"])
    n_features = int(X_train[0][0].shape[1])
    n_edge_features = int(X_train[0][2].shape[1])
    if model_name == "chain":
        X_train = _to_chain(X_train, "train")
        X_test = _to_chain(X_test, "test")
    model = _make_model(model_name, n_states, n_features, n_edge_features,
                        problem.get("model_params") or {})
    learner = _make_learner(problem["learner"], model, problem.get("params") or {})

    np.random.seed(int(problem.get("seed", 0)))
    start = time.time()
    learner.fit(X_train, Y_train, initialize=False)
    fit_seconds = time.time() - start

    train_acc, _ = _accuracy(learner, X_train, Y_train)
    test_acc, Y_pred_test = (_accuracy(learner, X_test, Y_test) if has_test else (None, []))

    # The SSVM primal objective at the returned weights, computed by pystruct's own
    # objective_primal: 0.5 ||w||^2 + C * sum_k max(0, max_y [loss(y_k, y) - w.(psi(y_k) - psi(y))]),
    # with the model's loss-augmented inference (exact Viterbi for ChainCRF).
    # The perceptron (a BaseSSVM with an unused C) has no objective: both are reported as None.
    from pystruct.utils import objective_primal
    C = None if problem["learner"] == "StructuredPerceptron" else float(learner.C)
    variant = "one_slack" if problem["learner"] == "OneSlackSSVM" else "n_slack"
    primal = primal_exact = None
    if C is not None:
        primal = _final_primal(learner, problem["learner"])
        if primal is None:
            primal = float(objective_primal(model, learner.w, X_train, Y_train, C,
                                            variant=variant))
        # With LP inference (ad3, EdgeFeatureGraphCRF's default) pystruct's value uses the
        # relaxed, not always converged, loss-augmented solution and can come out too low.
        # On forests max-product is exact, so report that value as well.
        if _all_forests(model, X_train):
            saved = model.inference_method
            model.inference_method = "max-product"
            try:
                primal_exact = float(objective_primal(model, learner.w, X_train, Y_train, C,
                                                      variant=variant))
            finally:
                model.inference_method = saved

    result = {
        "learner": problem["learner"],
        "model": model_name,
        "pystruct_model": type(model).__name__,
        "params": problem.get("params") or {},
        "model_params": problem.get("model_params") or {},
        "n_states": n_states,
        "n_features": n_features,
        "n_edge_features": n_edge_features,
        "C": C,
        "fit_seconds": fit_seconds,
        "train_accuracy": train_acc,
        "test_accuracy": test_acc,
        "primal_objective": primal,
        "primal_objective_source": ("pystruct.utils.objective_primal(model, w, X_train, "
                                    "Y_train, C, variant=%r) at the final w" % variant
                                    if C is not None else None),
        "primal_objective_exact": primal_exact,
        "primal_objective_curve": _floats(getattr(learner, "primal_objective_curve_", None)),
        "objective_curve": _floats(getattr(learner, "objective_curve_", None)),
        "loss_curve": _floats(getattr(learner, "loss_curve_", None)),
        # pystruct stores the start time first, then seconds since the start
        "timestamps": ([0.0] + _floats(learner.timestamps_[1:])
                       if getattr(learner, "timestamps_", None) else None),
        "w": _floats(learner.w),
        "size_joint_feature": int(model.size_joint_feature),
        "inference_calls": int(getattr(model, "inference_calls", 0)),
        "y_pred_test": [y.tolist() for y in Y_pred_test],
        "versions": _versions(),
    }
    return result


def _versions():
    import numpy
    import scipy
    import sklearn
    import pystruct
    return {"python": sys.version.split()[0], "numpy": numpy.__version__,
            "scipy": scipy.__version__, "sklearn": sklearn.__version__,
            "pystruct": getattr(pystruct, "__version__", "0.3.2")}


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: python runner.py PROBLEM_DIR\n")
        return 2
    problem_dir = argv[1]
    out_path = os.path.join(problem_dir, "result.json")
    try:
        with warnings.catch_warnings():
            # sklearn.externals.joblib and numpy aliases are deprecated in this stack
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            result = _fit(problem_dir)
        status = 0
    except Exception as exc:  # reported to the caller through the result file
        result = {"error": "%s: %s" % (type(exc).__name__, exc),
                  "traceback": traceback.format_exc()}
        status = 1
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.rename(tmp, out_path)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
