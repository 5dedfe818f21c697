"""Gradient alternation: one gradient step on the weights per round of smoothed message passing.

The ablation of slr's learner in the style of Hazan and Urtasun (2010) / Meshi et al.
(2010): slr's objective with its ``Linear``/``Linear`` function class (up to the factor
``eps`` slr puts on ``g``, a reparametrisation of ``w``),

    R(w, lambda) = sum_k s_k [ -F(x^k, y^k) + A(lambda^k, theta^k) ],
    theta^k_i(a) = W_u[a] . x_i + Delta(y^k_i, a),   theta^k_e(a, b) = W_p[a L + b] . x_e,

(plus ``l2 / 2 ||w||^2``) minimised jointly over linear weights and messages, but where
slr solves the logistic problem in the weights exactly after each round of message
passing, this takes a single gradient step. With the messages fixed,
``dR/dw = sum over nodes and edges of (mu - onehot(truth)) x features`` (+ ``l2 w``),
``mu`` the smoothed marginals ``∝ exp(b / eps)``. ``s_k`` is ``sample_weight[k]`` (1 by default)
and ``Delta(y_i, a) = cw[y_i] [a != y_i]`` the Hamming margin, weighted by ``class_weight`` when
given (:mod:`slr.baselines.weights`), as in slr's learner.
"""
from __future__ import annotations

import numpy as np

from slr.baselines.base import BaseStructuredLearner
from slr.baselines.features import StructuredData
from slr._features import scale_rows, spectral_norm
from slr._params import Integer, Options, Real
from slr.inference.batch import batch_dual_values, batch_marginals, batch_sweeps
from slr.models import hamming_margin
from slr.transitions import FORBIDDEN_UNITS

__all__ = ["GradientAlternation"]


class GradientAlternation(BaseStructuredLearner):
    """Alternate smoothed star-update sweeps and one gradient step on the linear weights.

    Parameters
    ----------
    epsilon : float, default=0.1
        Entropy weight of the smoothed relaxation (as in slr's learner).
    l2 : float, default=0.0
        Ridge penalty on the weights (slr's ``Linear`` oracle default is 0).
    max_iter : int, default=200
        Rounds (sweeps + one gradient step).
    sweeps_per_round : int, default=25
        Smoothed star-update sweeps per round, in kernel sweeps (one directional pass over the
        nodes, the direction alternating), always all of them (no tolerance).
    learning_rate : "auto" or float, default="auto"
        A fixed step, or ``"auto"``: a backtracking (Armijo) step at fixed messages that
        starts from twice the previous accepted step and halves until
        ``R(w - s g) <= R(w) - s/2 ||g||^2``, never below the safe step ``1 / Lip`` with
        ``Lip = max(||X_u||_2^2, ||X_e||_2^2) / eps + l2`` (a Lipschitz constant of the
        gradient in the weights: the smoothed dual's curvature in each region's potentials
        is at most ``1 / eps``; with ``sample_weight`` each example's rows scaled by
        ``sqrt(sample_weight[k])``). Every step decreases ``R``, so the objective never
        increases; the safe step alone is far too short to be a fair comparison.
    log_every : int, default=1
        Measure the MAP training error every this many rounds (NaN otherwise).
    model, max_sweeps, inference_tol, n_states, verbose
        Prediction inference and states, as in :class:`slr.baselines.ssvm.OneSlackSSVM`.
    n_jobs : int, optional
        OpenMP threads of the message passing and inference kernels; None or -1: all cores.
    random_state : None, int, Generator or RandomState
        Unused (deterministic).
    class_weight : None, "balanced" or dict, default=None
        Label weights of the Hamming margin (see above).
    allowed_transitions : None, "BIO", "BIOES" or array-like of bool, default=None
        As in :class:`slr.baselines.ssvm.OneSlackSSVM`; in training the forbidden pairs and end states
        lie ``slr.transitions.FORBIDDEN_UNITS * epsilon`` below the others, as in slr's learner.

    Attributes
    ----------
    history_ : pandas.DataFrame
        ``objective`` holds ``R`` (+ ridge) after each round's sweeps, before the step.
    messages_ : ndarray of shape (n_edges, 2, L)
    step_size_ : float
        The last step taken.
    """

    _parameter_constraints = {**BaseStructuredLearner._parameter_constraints,
                              "epsilon": Real(0.0, low_open=True), "l2": Real(0.0), "max_iter": Integer(1),
                              "sweeps_per_round": Integer(1),
                              "learning_rate": (Options(("auto",)), Real(0.0, low_open=True)),
                              "log_every": Integer(1)}

    def __init__(self, epsilon: float = 0.1, l2: float = 0.0, max_iter: int = 200, sweeps_per_round: int = 25,
                 learning_rate="auto", log_every: int = 1, model: str = "auto", max_sweeps: int = 200,
                 inference_tol: float = 1e-7, n_states: int | None = None, n_jobs: int | None = None,
                 verbose: int = 0, random_state=None, class_weight=None,
                 allowed_transitions=None) -> None:
        self.epsilon, self.l2, self.max_iter = epsilon, l2, max_iter
        self.sweeps_per_round = sweeps_per_round
        self.learning_rate, self.log_every = learning_rate, log_every
        self.model, self.max_sweeps, self.inference_tol = model, max_sweeps, inference_tol
        self.n_states, self.n_jobs, self.verbose, self.random_state = n_states, n_jobs, verbose, random_state
        self.class_weight = class_weight
        self.allowed_transitions = allowed_transitions

    def _safe_step(self, data: StructuredData) -> float:
        node_features, edge_features = data.node_features, data.edge_features
        if data.sample_weight is not None:
            # example k's curvature is scaled by its weight: the rows by sqrt(s_k), as k repeated s_k times
            node_features = scale_rows(node_features, np.sqrt(data.node_weights()))
            edge_features = scale_rows(edge_features, np.sqrt(data.edge_weights()))
        sigma_u = spectral_norm(node_features) ** 2
        sigma_e = spectral_norm(edge_features) ** 2 if edge_features.size else 0.0
        return 1.0 / (max(sigma_u, sigma_e) / self.epsilon + self.l2)

    def objective(self, data: StructuredData, w: np.ndarray, messages: np.ndarray) -> float:
        """``R(w, lambda) + l2/2 ||w||^2`` on ``data`` (weighted by its ``sample_weight``)."""
        theta_nodes, theta_edges = self._theta(data, w)
        duals = batch_dual_values(data.batch, theta_nodes, theta_edges, messages, self.epsilon,
                                  n_jobs=self.n_jobs)
        if data.sample_weight is None:
            true_n, true_e = data.truth_marginals()
            truth = (true_n * theta_nodes).sum() + (true_e * theta_edges).sum()
        else:
            truth = data.weighted_sum(data.labelling_scores(data.labels, theta_nodes, theta_edges))
        return float(data.weighted_sum(duals) - truth + 0.5 * self.l2 * w @ w)

    def gradient(self, data: StructuredData, w: np.ndarray, messages: np.ndarray) -> np.ndarray:
        """``dR/dw`` at fixed messages."""
        theta_nodes, theta_edges = self._theta(data, w)
        mu_n, mu_e = batch_marginals(data.batch, theta_nodes, theta_edges, messages, self.epsilon)
        true_n, true_e = data.truth_marginals()
        return data.weighted_joint_feature(mu_n - true_n, mu_e - true_e) + self.l2 * w

    def _theta(self, data: StructuredData, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The training potentials: with the Hamming margin, forbidden pairs and end states excluded."""
        theta_nodes, theta_edges = data.potentials(w)
        theta_nodes = theta_nodes + hamming_margin(data.labels, data.n_states, data.class_weight)
        transitions = data.energy.transitions
        if transitions is None:
            return theta_nodes, theta_edges
        return transitions.exclude(data.batch, theta_nodes, theta_edges, FORBIDDEN_UNITS * self.epsilon)

    def _fit(self, data: StructuredData) -> None:
        eps = self.epsilon
        safe = self._safe_step(data)
        adaptive = self.learning_rate == "auto"
        step = safe if adaptive else self.learning_rate
        w = np.zeros(data.size)
        lam = np.zeros((data.batch.n_edges, 2, data.n_states))
        for it in range(self.max_iter):
            theta_nodes, theta_edges = self._theta(data, w)
            batch_sweeps(data.batch, theta_nodes, theta_edges, eps, out=lam, max_sweeps=self.sweeps_per_round,
                         tol=0.0, n_jobs=self.n_jobs, check_input=False)
            error = self._train_error(data, w) if it % self.log_every == 0 else float("nan")
            value = self.objective(data, w, lam)
            self._log(it, value, w, error)
            grad = self.gradient(data, w, lam)
            if adaptive:
                step = self._armijo_step(data, w, lam, value, grad, 2.0 * step, safe)
            w = w - step * grad
        self.w_ = w
        self.messages_ = lam
        self.step_size_ = step
        self.n_iter_ = self.max_iter

    def _armijo_step(self, data: StructuredData, w: np.ndarray, lam: np.ndarray, value: float,
                     grad: np.ndarray, step: float, safe: float) -> float:
        decrease = 0.5 * float(grad @ grad)
        while step > safe:
            if self.objective(data, w - step * grad, lam) <= value - step * decrease:
                return step
            step *= 0.5
        return safe
