"""Partial labels: unlabelled nodes as latent variables, learnt by CCCP (docs/design.md section 1).

An example whose labelling ``y`` leaves some nodes unlabelled (label ``-1``) has the loss

    l(theta) = A(theta + Delta) - A_c(theta),

``A`` the smoothed LP of the learner (all counting numbers 1: the node and edge entropies) and
``A_c`` the same LP with the labelled nodes clamped to their labels: the smoothed maximum over the
labellings that agree with ``y``, in the relaxation. With every node labelled ``A_c(theta)`` is
``F(x, y)``, the learner's usual loss. The margin ``Delta`` is the (weighted) Hamming margin on the
labelled nodes and zero on the unlabelled ones: their loss is unknown, and a margin from the current
model's beliefs (the expected Hamming loss ``1 - q_i(a)``) would move the convex part with every
target update, so the objective would no longer be one fixed function that CCCP decreases.

``l`` is a difference of convex functions. CCCP replaces ``A_c`` by its tangent at the current
potentials: with ``q`` the clamped LP's node and edge marginals there, for every ``theta``

    A_c(theta) >= <theta, q> + eps H(q)       (``A_c`` is a maximum over a set that holds ``q``),

so ``A(theta + Delta) - <theta, q> - eps H(q)`` bounds ``l`` from above, and equals it where ``q``
was computed. Minimising that bound is the ordinary alternation with soft targets: the oracles fit
``q`` (node marginals ``(N, L)``, edge marginals ``(M, L^2)``; one-hot on labelled nodes and
fully labelled edges) and R's truth term is ``<theta, q> + eps H(q)``. :class:`LatentTargets`
recomputes ``q`` at the current potentials and keeps each example's new targets only where they
raise that truth term (a better point of the clamped problem), so no target update raises R.
"""
from __future__ import annotations

import numpy as np
from scipy.special import entr

from slr.inference.batch import batch_marginals, batch_sweeps
from slr.models import FlatData

__all__ = ["LatentTargets"]

# how far below the best potential a clamped-out state is put, in units of eps: exp(-1000)
# underflows to 0 in float64, so those states carry no weight in the clamped LP
_CLAMP_UNITS = 1000.0


class LatentTargets:
    """The soft targets of a fit with unlabelled nodes: the clamped LP's marginals.

    Parameters
    ----------
    train : FlatData
        Training data; label ``-1`` marks an unlabelled node.
    epsilon : float
    max_sweeps : int
        Kernel sweeps of the clamped LP per update (its messages are kept between updates).
    tol : float
        Message-change tolerance of those sweeps.
    threads : int

    Attributes
    ----------
    nodes : ndarray of shape (n_nodes, L)
        Node targets ``q_i``.
    edges : ndarray of shape (n_edges, L * L)
        Edge targets ``q_e`` in pair-class order ``a L + b``.
    node_entropy, edge_entropy : ndarray of shape (n_nodes,), (n_edges,)
        ``eps H(q_i)`` and ``eps H(q_e)``.
    """

    def __init__(self, train: FlatData, epsilon: float, max_sweeps: int, tol: float, threads: int) -> None:
        self.train, self.epsilon = train, epsilon
        self.max_sweeps, self.tol, self.threads = max_sweeps, tol, threads
        batch, L, labels = train.batch, train.n_states, train.labels
        labelled = labels >= 0
        # allowed[i, a]: state a agrees with node i's label (every state of an unlabelled node)
        self.allowed = np.ones((batch.n_nodes, L), dtype=bool)
        self.allowed[labelled] = np.arange(L)[None, :] == labels[labelled][:, None]
        self.messages = np.zeros((batch.n_edges, 2, L))
        self.nodes = self.allowed / self.allowed.sum(axis=1, keepdims=True)
        self.edges = np.zeros((batch.n_edges, L * L))
        self.node_entropy = np.zeros(batch.n_nodes)
        self.edge_entropy = np.zeros(batch.n_edges)
        self._fresh = True

    def node_truth(self, theta_nodes: np.ndarray) -> np.ndarray:
        """``<theta_i, q_i> + eps H(q_i)`` of every node."""
        return np.einsum("ij,ij->i", theta_nodes, self.nodes) + self.node_entropy

    def edge_truth(self, theta_edges: np.ndarray) -> np.ndarray:
        """``<theta_e, q_e> + eps H(q_e)`` of every edge."""
        flat = theta_edges.reshape(theta_edges.shape[0], -1)
        return np.einsum("ij,ij->i", flat, self.edges) + self.edge_entropy

    def update(self, theta_nodes: np.ndarray, theta_edges: np.ndarray) -> np.ndarray:
        """Recompute the targets at the potentials ``theta`` (with the margin, which is zero on
        every state the clamped LP allows); keep an example's new targets where they raise its
        truth term. Returns which examples took new targets, shape ``(B,)``."""
        batch, eps, L = self.train.batch, self.epsilon, self.train.n_states
        spread = float(np.abs(theta_nodes).max(initial=0.0)) + float(np.abs(theta_edges).max(initial=0.0))
        degree = int(np.bincount(batch.edges.ravel(), minlength=batch.n_nodes).max(initial=0))
        penalty = _CLAMP_UNITS * eps + 2.0 * (1 + degree) * spread
        clamped = np.where(self.allowed, theta_nodes, theta_nodes - penalty)
        batch_sweeps(batch, clamped, theta_edges, eps, max_sweeps=self.max_sweeps, tol=self.tol,
                     n_jobs=self.threads, out=self.messages, check_input=False)
        node_mu, edge_mu = batch_marginals(batch, clamped, theta_edges, self.messages, eps)
        # clamped-out states exactly 0 (they are below 1e-434 already)
        node_mu = np.where(self.allowed, node_mu, 0.0)
        node_mu /= node_mu.sum(axis=1, keepdims=True)
        src, dst = batch.edges[:, 0], batch.edges[:, 1]
        edge_mu = np.where(self.allowed[src][:, :, None] & self.allowed[dst][:, None, :], edge_mu, 0.0)
        edge_mu = edge_mu.reshape(-1, L * L)
        edge_mu /= edge_mu.sum(axis=1, keepdims=True)
        old = (self.nodes, self.edges, self.node_entropy, self.edge_entropy)
        old_value = self._values(theta_nodes, theta_edges)
        self.nodes, self.edges = node_mu, edge_mu
        self.node_entropy, self.edge_entropy = eps * entr(node_mu).sum(axis=1), eps * entr(edge_mu).sum(axis=1)
        accept = np.ones(batch.n_examples, dtype=bool)
        if not self._fresh:
            accept = self._values(theta_nodes, theta_edges) >= old_value
            keep_nodes = ~accept[batch.node_example]
            keep_edges = ~accept[batch.edge_example]
            for new, previous, rows in zip((self.nodes, self.edges, self.node_entropy, self.edge_entropy), old,
                                           (keep_nodes, keep_edges, keep_nodes, keep_edges)):
                new[rows] = previous[rows]
        self._fresh = False
        return accept

    def _values(self, theta_nodes: np.ndarray, theta_edges: np.ndarray) -> np.ndarray:
        """Each example's truth term ``<theta, q> + eps H(q)`` at the current targets, shape ``(B,)``."""
        return self.train.per_example_sum(self.node_truth(theta_nodes), self.edge_truth(theta_edges))
