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
import math
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from slr.estimator import StructuredEstimator
from slr.graph import GraphBatch, check_epsilon
from slr.inference.batch import batch_dual_parts, batch_node_beliefs, batch_sweeps, resolve_threads
from slr.models import FlatData, PairwiseModel, hamming_margin
from slr.oracles.base import LogisticOracle, get_oracle_tags
from slr.oracles.linear import Linear
from slr.oracles.pair_bias import PairBias
from slr.validation import C_INT_MAX, check_bool, check_int, check_generator, check_real

__all__ = [
    "StructuredLogisticRegression",
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

_UNTIMED = nullcontext()


def _untimed(phase: str) -> AbstractContextManager:
    return _UNTIMED


# ----------------------------------------------------------------------------------------
# the reduction (pure functions, tested against finite differences of R)
# ----------------------------------------------------------------------------------------
def node_message_sums(batch: GraphBatch, messages: np.ndarray) -> np.ndarray:
    """``sum_{e at i} lambda_e(y_i = a)`` for every node, shape ``(n_nodes, L)``."""
    return -batch_node_beliefs(batch, np.zeros((batch.n_nodes, batch.n_states)), messages)


def unary_bias(batch: GraphBatch, messages: np.ndarray, labels: np.ndarray, epsilon: float) -> np.ndarray:
    """Bias of the unary logistic problem, ``(Delta(y_i, a) - sum_e lambda_e(y_i = a)) / eps``."""
    delta = hamming_margin(labels, batch.n_states)
    return (delta - node_message_sums(batch, messages)) / epsilon


def pairwise_bias(messages: np.ndarray, epsilon: float, *, factored: bool = False) -> np.ndarray | PairBias:
    """Bias of the pairwise problem, ``(lambda_e(a) + lambda_e(b)) / eps`` at column ``a L + b``:
    the dense ``(n_edges, L^2)`` array, or with ``factored`` its two factors as a PairBias."""
    bias = PairBias(messages[:, 0] / epsilon, messages[:, 1] / epsilon)
    return bias if factored else np.asarray(bias)


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
    objective = _SplitObjective(batch, labels, epsilon, n_threads, check_input=True)
    return objective.nodes(theta_nodes, messages) + objective.edges(theta_edges, messages)


class _SplitObjective:
    """R as its node part (node terms of ``A`` minus the truth's node potentials) plus its edge
    part: a unary fit changes only the first, a pairwise fit only the second."""

    def __init__(self, batch: GraphBatch, labels: np.ndarray, epsilon: float, n_threads: int | None,
                 check_input: bool) -> None:
        self.batch, self.labels, self.epsilon = batch, labels, epsilon
        self.n_threads, self.check_input = n_threads, check_input
        self.sources = labels[batch.edges[:, 0]]
        self.targets = labels[batch.edges[:, 1]]

    def nodes(self, theta_nodes: np.ndarray, messages: np.ndarray) -> float:
        duals, _ = batch_dual_parts(self.batch, theta_nodes, None, messages, self.epsilon, edge_terms=False,
                                    n_threads=self.n_threads, check_input=self.check_input)
        return float(duals.sum() - theta_nodes[np.arange(self.labels.shape[0]), self.labels].sum())

    def edges(self, theta_edges: np.ndarray, messages: np.ndarray) -> float:
        _, duals = batch_dual_parts(self.batch, None, theta_edges, messages, self.epsilon, node_terms=False,
                                    n_threads=self.n_threads, check_input=self.check_input)
        truth = theta_edges[np.arange(self.batch.n_edges), self.sources, self.targets].sum()
        return float(duals.sum() - truth)


def _linear_parameters(oracle: Any) -> dict[str, np.ndarray] | None:
    """Copies of a fitted oracle's parameters if its functions are linear in them, else None."""
    names = get_oracle_tags(oracle).linear_parameters
    if not names or not all(hasattr(oracle, name) for name in names):
        return None
    return {name: np.array(getattr(oracle, name), dtype=np.float64) for name in names}


def _relaxed_step(oracle: Any, before: dict[str, np.ndarray] | None, omega: float,
                  set_potentials: Callable[[], None], objective: Callable[[], float],
                  previous: float) -> float:
    """Move a just-fitted oracle to ``before + omega * (fitted - before)``; keep the exact fit
    if that raises R above ``previous`` (R before the fit) or gives potentials out of range.
    Sets the potentials; returns R."""
    fitted = _linear_parameters(oracle) if before is not None else None
    relaxed = fitted is not None and all(fitted[n].shape == before[n].shape for n in before)
    if relaxed:
        for name, old in before.items():
            setattr(oracle, name, old + omega * (fitted[name] - old))
        try:
            set_potentials()
            value = objective()
        except ValueError:   # scores too large for the potentials' range
            value = math.inf
    else:
        set_potentials()
        value = objective()
    if relaxed and not value <= previous:
        for name, exact in fitted.items():
            setattr(oracle, name, exact)
        set_potentials()
        value = objective()
    return value


# ----------------------------------------------------------------------------------------
# the estimator
# ----------------------------------------------------------------------------------------
class StructuredLogisticRegression(StructuredEstimator):
    """Structured prediction on pairwise graphs by iterated logistic regression.

    Domke's Algorithm 1.1 with Hamming loss on the nodes: the energy is
    ``F(x, y) = eps * (sum_i g_u(x_i)[y_i] + sum_(i,j) g_p(x_ij)[y_i L + y_j])``, with one
    unary function for all nodes and one pairwise function for all edges, each chosen
    from the function class of its oracle. Training alternates exact (or approximate,
    for SGD / boosting) oracle fits with star-update message passing on the entropy-
    smoothed LP relaxation; prediction is MAP by max-product star updates on the plain LP
    relaxation of ``F`` (``predict_epsilon = 0``), then each node's best state. When every
    example is a chain the LP is tight, and prediction runs Viterbi instead: the exact MAP,
    in one forward and one backward pass.

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
    max_iter : int, default=25
        Learning iterations.
    mp_sweeps : int, default=25
        Message-passing iterations after each oracle fit. As in the chapter, one
        iteration is a forward and a backward pass over the nodes, i.e. two kernel
        sweeps: the default runs 50 star-update sweeps per half step. An example stops
        early when no message changes by more than 1e-9.
    predict_sweeps : int, default=50
        Message-passing iterations (again forward + backward) for prediction on graphs
        that are not chains.
    predict_epsilon : float, default=0.0
        Entropy weight of the inference used for prediction; 0 is MAP on the LP
        relaxation (exact by Viterbi when every example is a chain). With a positive
        value, nodes are labelled by their smoothed marginals' mode (the sweeps then run
        on chains too).
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
    relaxation : float, default=1.0
        Over-relaxation ``omega`` in ``[1, 2)`` of the function updates: after each fit of an
        oracle whose functions are linear in their parameters (``Linear``, ``Constant``) the
        parameters move to ``old + omega * (fitted - old)``; if that raises ``R`` above its
        value before the fit, the exact fit is kept instead, so ``R`` still never increases.
        The minimised objective is unchanged; on strongly coupled problems the blocks move
        further per iteration (docs/design.md section 1). Other oracles take exact steps.

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
        without validation data or monitoring), ``seconds`` (wall time since ``fit`` began,
        without monitoring) and ``eval_seconds`` (see :mod:`slr.estimator`).
    objective_trace_ : pandas.DataFrame
        ``R`` after every half step: columns ``iteration``, ``stage`` (one of ``"start"``,
        ``"unary_fit"``, ``"unary_mp"``, ``"pairwise_fit"``, ``"pairwise_mp"``), ``objective``.

    Examples
    --------
    >>> from slr import StructuredLogisticRegression
    >>> from slr.datasets import make_denoising
    >>> X, Y = make_denoising(n_images=2, size=60, sigma=6.0, random_state=0)
    >>> model = StructuredLogisticRegression(max_iter=10, random_state=0).fit(X, Y)
    >>> model.score(X, Y) > 0.85
    True
    >>> model.history_.columns.tolist()
    ['iteration', 'objective', 'train_error', 'val_error', 'seconds', 'eval_seconds']
    """

    #: Profiling hook (``asv_benchmarks/profile_learner.py``): when set, ``fit`` and prediction
    #: run each phase inside ``_phase_timer(name)``, a context manager that times it.
    _phase_timer: Callable[[str], AbstractContextManager] | None = None

    def __init__(
        self,
        unary: LogisticOracle | None = None,
        pairwise: LogisticOracle | None = None,
        epsilon: float = 0.1,
        max_iter: int = 25,
        mp_sweeps: int = 25,
        predict_sweeps: int = 50,
        predict_epsilon: float = 0.0,
        n_states: int | None = None,
        n_threads: int | None = None,
        monitor: bool = True,
        verbose: bool = False,
        random_state: Any = None,
        relaxation: float = 1.0,
    ) -> None:
        self.unary = unary
        self.pairwise = pairwise
        self.epsilon = epsilon
        self.max_iter = max_iter
        self.mp_sweeps = mp_sweeps
        self.predict_sweeps = predict_sweeps
        self.predict_epsilon = predict_epsilon
        self.n_states = n_states
        self.n_threads = n_threads
        self.monitor = monitor
        self.verbose = verbose
        self.random_state = random_state
        self.relaxation = relaxation

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
        """Check every hyperparameter; returns ``epsilon, max_iter, mp_sweeps, n_states, rng``."""
        eps = check_epsilon(self.epsilon, allow_zero=False)
        max_iter = check_int(self.max_iter, "max_iter", 1)
        mp = check_int(self.mp_sweeps, "mp_sweeps", 0, _MAX_MP_ITERATIONS)
        self._model()
        n_states = None if self.n_states is None else check_int(self.n_states, "n_states", 1)
        resolve_threads(self.n_threads)
        check_bool(self.monitor, "monitor")
        check_real(self.relaxation, "relaxation", 1.0, 2.0, high_open=True)
        rng = check_generator(self.random_state)
        return eps, max_iter, mp, n_states, rng

    def _model(self) -> PairwiseModel:
        """The learned energy ``F = eps g`` and its MAP inference (Viterbi on chains, else the LP)."""
        predict_epsilon = check_epsilon(self.predict_epsilon, name="predict_epsilon")
        return PairwiseModel(
            check_epsilon(self.epsilon, allow_zero=False),
            inference="auto" if predict_epsilon == 0 else "lp",
            epsilon=predict_epsilon,
            max_sweeps=2 * check_int(self.predict_sweeps, "predict_sweeps", 0, _MAX_MP_ITERATIONS),
            tol=_SWEEP_TOL, n_threads=self.n_threads,
        )

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
        eps, max_iter, mp, n_states, rng = self._validate()
        train = FlatData(X, Y, n_states)
        L = train.n_states
        self.n_states_ = L
        self._n_states_inferred = n_states is None
        self.n_node_features_ = train.d_node
        self.n_edge_features_ = train.d_edge if train.has_edges else None
        self._start_history(train, X_val, Y_val)
        unary = self._clone_oracle(self.unary, "unary", rng)
        pairwise = self._clone_oracle(self.pairwise, "pairwise", rng)
        threads = resolve_threads(self.n_threads)
        model = PairwiseModel(eps)

        timed = self._phase_timer or _untimed
        batch, labels = train.batch, train.labels
        delta = hamming_margin(labels, L)
        lam = np.zeros((batch.n_edges, 2, L))
        unary_potentials = np.zeros((batch.n_nodes, L))  # g_u = 0 before the first fit
        theta_nodes = unary_potentials + delta
        theta_edges = model.pairwise_potentials(train, None)
        self.unary_, self.pairwise_ = unary, pairwise
        self._fitted_pairwise = False

        split = _SplitObjective(batch, labels, eps, threads, check_input=False)
        parts = [0.0, 0.0]   # R's node and edge parts at the current potentials and messages

        def objective(nodes: bool = True, edges: bool = True) -> float:
            """R, recomputing the parts whose inputs changed since the last call."""
            with timed("objective R"):
                if nodes:
                    parts[0] = split.nodes(theta_nodes, lam)
                if edges:
                    parts[1] = split.edges(theta_edges, lam)
                return parts[0] + parts[1]

        def sweep() -> None:
            with timed("message passing"):
                batch_sweeps(
                    batch, theta_nodes, theta_edges, eps, max_sweeps=2 * mp, tol=_SWEEP_TOL,
                    n_threads=threads, out=lam, check_input=False,
                )

        trace = [(0, "start", objective())]
        self._record(0, trace[-1][2])
        progress = None
        if self.verbose:
            from tqdm.auto import tqdm

            progress = tqdm(total=max_iter, desc="SLR", unit="iter")
        decode = None
        if self.monitor:
            predict_model = self._model()

            def decode(data: FlatData) -> np.ndarray:
                if data is not train:
                    return self._predict_flat(data)
                # the training potentials of the current functions are at hand
                with timed("predict: MAP"):
                    return predict_model.decode(train, unary_potentials, theta_edges)

        def set_unary() -> None:
            nonlocal unary_potentials, theta_nodes
            with timed("unary potentials"):
                unary_potentials = model.unary_potentials(train, unary)
                theta_nodes = unary_potentials + delta

        def set_pairwise() -> None:
            nonlocal theta_edges
            with timed("pairwise potentials"):
                theta_edges = model.pairwise_potentials(train, pairwise)

        omega = float(self.relaxation)
        for it in range(1, max_iter + 1):
            with timed("unary bias"):
                bias = unary_bias(batch, lam, labels, eps)
            before = _linear_parameters(unary) if omega != 1.0 else None
            with timed("unary fit"):
                unary.fit(train.node_features, bias, labels)
            trace.append((it, "unary_fit", _relaxed_step(unary, before, omega, set_unary,
                                                         lambda: objective(edges=False), trace[-1][2])))
            sweep()
            trace.append((it, "unary_mp", objective()))
            if train.has_edges:
                with timed("pairwise bias"):
                    bias = pairwise_bias(lam, eps, factored=get_oracle_tags(pairwise).factored_pair_bias)
                before = _linear_parameters(pairwise) if omega != 1.0 else None
                with timed("pairwise fit"):
                    pairwise.fit(train.edge_features, bias, train.pair_labels)
                self._fitted_pairwise = True
                trace.append((it, "pairwise_fit", _relaxed_step(pairwise, before, omega, set_pairwise,
                                                                lambda: objective(nodes=False), trace[-1][2])))
            else:
                trace.append((it, "pairwise_fit", objective()))
            sweep()
            trace.append((it, "pairwise_mp", objective()))
            with timed("monitor"):
                row = self._record(it, trace[-1][2], decode=decode, monitor_train=True)
            if progress is not None:
                progress.update(1)
                progress.set_postfix(R=f"{trace[-1][2]:.4g}", train_err=f"{row['train_error']:.4f}")
        if progress is not None:
            progress.close()
        self._finish_history()
        self.objective_trace_ = pd.DataFrame(trace, columns=["iteration", "stage", "objective"])
        return self

    # ------------------------------------------------------------------------------------
    def _data(self, X: Sequence, Y: Sequence | None = None, name: str = "X") -> FlatData:
        data = FlatData(X, Y, self.n_states_, inferred_n_states=Y is not None and self._n_states_inferred)
        data.check_widths(self.n_node_features_, self.n_edge_features_, name)
        return data

    def _predict_flat(self, data: FlatData) -> np.ndarray:
        timed = self._phase_timer or _untimed
        model = self._model()
        with timed("predict: potentials"):
            theta_nodes = model.unary_potentials(data, self.unary_)
            theta_edges = model.pairwise_potentials(data, self.pairwise_ if self._fitted_pairwise else None)
        with timed("predict: MAP"):
            return model.decode(data, theta_nodes, theta_edges)
