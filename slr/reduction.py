"""The reduction of Domke's Algorithm 1.1: the oracles' biases and R, as pure functions.

For fixed messages ``lambda``, learning the unary function ``g_u`` (tied over all nodes of all
examples) is a multinomial logistic regression whose rows carry the bias

    b_i(a)    = (Delta(y_i, a) - sum_{e at i} lambda_e(y_i = a)) / eps

and learning the pairwise function ``g_p`` (``L^2`` classes, pair class ``a * L + b``) one
with the bias

    b_e(a, b) = (lambda_e(y_i = a) + lambda_e(y_j = b)) / eps.

The potentials are ``theta_i(a) = eps g_u(x_i)[a] + Delta(y_i, a)`` (Hamming loss on nodes)
and ``theta_e(a, b) = eps g_p(x_e)[a L + b]``, and the objective is

    R = sum_k [ -F(x^k, y^k) + A(lambda^k, theta^k) ]

(``A`` the smoothed dual, :func:`slr.inference.batch_dual_values`). These functions are tested
against finite differences of R; the learner (:mod:`slr.learner`) and the Dask shards
(:mod:`slr.distributed`) compute with them.
"""
from __future__ import annotations

import numpy as np

from slr.data import GraphBatch
from slr.inference.batch import batch_dual_parts, batch_node_beliefs, resolve_threads
from slr.latent import LatentTargets
from slr.models import hamming_margin
from slr.oracles.pair_bias import PairBias

__all__ = ["SWEEP_TOL", "SplitObjective", "node_message_sums", "pairwise_bias", "structured_objective",
           "unary_bias"]

#: Message-change threshold at which an example stops sweeping early (training, certificate, targets).
SWEEP_TOL = 1e-9


def node_message_sums(batch: GraphBatch, messages: np.ndarray) -> np.ndarray:
    """``sum_{e at i} lambda_e(y_i = a)`` for every node, shape ``(n_nodes, L)``."""
    return -batch_node_beliefs(batch, np.zeros((batch.n_nodes, batch.n_states)), messages)


def unary_bias(batch: GraphBatch, messages: np.ndarray, labels: np.ndarray, epsilon: float) -> np.ndarray:
    """Bias of the unary logistic problem, ``(Delta(y_i, a) - sum_e lambda_e(y_i = a)) / eps``."""
    delta = hamming_margin(labels, batch.n_states)
    return (delta - node_message_sums(batch, messages)) / epsilon


def pairwise_bias(messages: np.ndarray, epsilon: float, *, factored: bool = False,
                  offset: np.ndarray | None = None) -> np.ndarray | PairBias:
    """Bias of the pairwise problem, ``(lambda_e(a) + lambda_e(b)) / eps`` at column ``a L + b``:
    the dense ``(n_edges, L^2)`` array, or with ``factored`` its two factors as a PairBias.
    ``offset``: a fixed ``(L, L)`` table of the potentials (forbidden transitions), added as
    ``offset / eps``."""
    bias = PairBias(messages[:, 0] / epsilon, messages[:, 1] / epsilon,
                    None if offset is None else offset / epsilon)
    return bias if factored else np.asarray(bias)


def structured_objective(
    batch: GraphBatch,
    theta_nodes: np.ndarray,
    theta_edges: np.ndarray,
    messages: np.ndarray,
    labels: np.ndarray,
    epsilon: float,
    *,
    n_jobs: int | None = None,
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
    n_jobs : int, optional
        OpenMP threads; all cores when None or -1.

    Returns
    -------
    float
    """
    threads = resolve_threads(n_jobs)
    objective = SplitObjective(batch, labels, epsilon, threads, check_input=True)
    return objective.nodes(theta_nodes, messages) + objective.edges(theta_edges, messages)


class SplitObjective:
    """R as its node part (node terms of ``A`` minus the truth's node potentials) plus its edge
    part: a unary fit changes only the first, a pairwise fit only the second.

    With ``sample_weight`` (per example) each example's terms are weighted; with ``targets``
    (:class:`slr.latent.LatentTargets`) the truth's potentials are the soft targets' expected
    potentials plus their entropy (``<theta, q> + eps H(q)``) instead of the labels'.
    """

    def __init__(self, batch: GraphBatch, labels: np.ndarray, epsilon: float, threads: int,
                 check_input: bool, *, sample_weight: np.ndarray | None = None,
                 targets: LatentTargets | None = None) -> None:
        self.batch, self.labels, self.epsilon = batch, labels, epsilon
        self.threads, self.check_input = threads, check_input
        self.weights, self.latent = sample_weight, targets
        if targets is None:
            self.sources = labels[batch.edges[:, 0]]
            self.targets = labels[batch.edges[:, 1]]
        if sample_weight is not None:
            self.node_weights = sample_weight[batch.node_example]
            self.edge_weights = sample_weight[batch.edge_example]

    def nodes(self, theta_nodes: np.ndarray, messages: np.ndarray) -> float:
        duals, _ = batch_dual_parts(self.batch, theta_nodes, None, messages, self.epsilon, edge_terms=False,
                                    n_jobs=self.threads, check_input=self.check_input)
        if self.latent is None and self.weights is None:
            return float(duals.sum() - theta_nodes[np.arange(self.labels.shape[0]), self.labels].sum())
        truth = (theta_nodes[np.arange(self.labels.shape[0]), self.labels] if self.latent is None
                 else self.latent.node_truth(theta_nodes))
        if self.weights is None:
            return float(duals.sum() - truth.sum())
        return float(duals @ self.weights - truth @ self.node_weights)

    def edges(self, theta_edges: np.ndarray, messages: np.ndarray) -> float:
        _, duals = batch_dual_parts(self.batch, None, theta_edges, messages, self.epsilon, node_terms=False,
                                    n_jobs=self.threads, check_input=self.check_input)
        if self.latent is None and self.weights is None:
            truth = theta_edges[np.arange(self.batch.n_edges), self.sources, self.targets].sum()
            return float(duals.sum() - truth)
        rows = (theta_edges[np.arange(self.batch.n_edges), self.sources, self.targets] if self.latent is None
                else self.latent.edge_truth(theta_edges))
        if self.weights is None:
            return float(duals.sum() - rows.sum())
        return float(duals @ self.weights - rows @ self.edge_weights)

