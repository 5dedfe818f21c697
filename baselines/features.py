"""The linear joint feature map shared by the baselines, Hamming loss, and (loss-augmented) inference.

The function class is slr's ``Linear``/``Linear`` pair without intercepts: node ``i`` in
state ``a`` scores ``W_u[a] @ x_i`` and edge ``e = (i, j)`` in states ``(a, b)`` scores
``W_p[a * L + b] @ x_e``. The weight vector is ``w = concat(vec W_u, vec W_p)`` with
``W_u`` of shape ``(L, d_u)`` and ``W_p`` of shape ``(L * L, d_e)`` (row-major), and

    psi(x, y) = concat( vec sum_i onehot(y_i) x_i^T,  vec sum_e onehot(y_i * L + y_j) x_e^T )

so that ``w . psi(x, y)`` is the total score. ``psi`` is linear in the one-hot indicators,
so it extends to fractional node/edge marginals ``mu`` (the LP relaxation's "labellings").

Loss-augmented inference maximises ``Hamming(y, y') + w . psi(x, y')``. On chains it is
exact (Viterbi). Otherwise the LP relaxation is solved by max-product star updates
(:func:`slr.inference.batch_sweeps` with ``epsilon = 0``) and, following Finley and
Joachims (2008), its solution is used as it is, fractional or not: the relaxed "y" is the
pair of marginals ``mu`` obtained as the uniform distribution over the maximisers of the
reparametrised node and edge beliefs (:func:`slr.inference.batch_marginals` with
``epsilon = 0``). At an LP optimum with unique maximisers this is the integral optimum;
under ties it is the centre of the tied face of each belief, which is the ``eps -> 0``
limit of the smoothed marginals. It is a heuristic only where the star updates stop at a
non-optimal fixed point of the dual (loopy graphs).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from slr.graph import GraphBatch, check_dataset
from slr.inference.batch import batch_marginals, batch_sweeps

__all__ = [
    "StructuredData",
    "hamming_potentials",
    "is_chain",
    "viterbi",
    "viterbi_chains",
]

MODELS = ("auto", "chain", "lp")


def is_chain(edges: np.ndarray, n_nodes: int) -> bool:
    """True when ``edges`` is exactly ``[(0, 1), (1, 2), ..., (n-2, n-1)]``."""
    if edges.shape[0] != n_nodes - 1:
        return False
    left = np.arange(n_nodes - 1)
    return bool(np.array_equal(edges[:, 0], left) and np.array_equal(edges[:, 1], left + 1))


def viterbi(theta_nodes: np.ndarray, theta_edges: np.ndarray) -> np.ndarray:
    """Exact MAP of one chain ``0 - 1 - ... - n-1``.

    Parameters
    ----------
    theta_nodes : ndarray of shape (n, L)
    theta_edges : ndarray of shape (n - 1, L, L)
        ``theta_edges[i, a, b]`` scores ``y_i = a, y_{i+1} = b``.

    Returns
    -------
    y : ndarray of shape (n,), int64
        A maximiser of ``sum_i theta_nodes[i, y_i] + sum_i theta_edges[i, y_i, y_{i+1}]``.
    """
    return viterbi_chains(theta_nodes[None], theta_edges[None])[0]


def viterbi_chains(theta_nodes: np.ndarray, theta_edges: np.ndarray) -> np.ndarray:
    """Viterbi on ``B`` chains of the same length at once.

    Parameters
    ----------
    theta_nodes : ndarray of shape (B, n, L)
    theta_edges : ndarray of shape (B, n - 1, L, L)

    Returns
    -------
    y : ndarray of shape (B, n), int64
    """
    n_chains, n, n_states = theta_nodes.shape
    back = np.empty((n_chains, max(n - 1, 0), n_states), dtype=np.int64)
    score = theta_nodes[:, 0].copy()
    for i in range(n - 1):
        cand = score[:, :, None] + theta_edges[:, i]  # (B, a, b)
        back[:, i] = np.argmax(cand, axis=1)
        score = np.take_along_axis(cand, back[:, i][:, None, :], axis=1)[:, 0] + theta_nodes[:, i + 1]
    y = np.empty((n_chains, n), dtype=np.int64)
    y[:, -1] = np.argmax(score, axis=1)
    for i in range(n - 2, -1, -1):
        y[:, i] = np.take_along_axis(back[:, i], y[:, i + 1][:, None], axis=1)[:, 0]
    return y


def hamming_potentials(y: np.ndarray, n_states: int) -> np.ndarray:
    """``Delta_i(a) = [a != y_i]``, shape ``(n, L)``."""
    out = np.ones((y.shape[0], n_states))
    out[np.arange(y.shape[0]), y] = 0.0
    return out


class StructuredData:
    """A data set in the flat layout, with the joint feature map and inference on it.

    Parameters
    ----------
    X : sequence of (node_features (n, d_u), edges (m, 2), edge_features (m, d_e))
    Y : sequence of int arrays (n,), optional
    n_states : int, optional
        ``L``; inferred from ``Y`` when omitted.
    model : {"auto", "chain", "lp"}
        Inference: exact Viterbi (``"chain"``; every example must be a chain ``(i, i+1)``),
        the LP relaxation by star updates (``"lp"``), or Viterbi when every example is a
        chain and the LP otherwise (``"auto"``).
    max_sweeps, tol : int, float
        Star-update budget and tolerance for the LP.
    dims : tuple of int, optional
        ``(d_u, d_e)`` to enforce (prediction data must match the training data).
    """

    def __init__(self, X: Sequence, Y: Sequence | None = None, n_states: int | None = None, *,
                 model: str = "auto", max_sweeps: int = 200, tol: float = 1e-7,
                 dims: tuple[int, int] | None = None) -> None:
        if model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {model!r}")
        X, Y, n_states = check_dataset(X, Y, n_states)
        if n_states is None:
            raise ValueError("n_states must be given when Y is omitted")
        if n_states < 2:
            raise ValueError(f"n_states must be >= 2, got {n_states}")
        self.X, self.Y, self.n_states = X, Y, int(n_states)
        d_u = X[0][0].shape[1]
        d_e = next((x[2].shape[1] for x in X if x[2].shape[0]), X[0][2].shape[1] if X[0][2].ndim == 2 else 0)
        if dims is not None and (d_u, d_e) != tuple(dims) and not (d_e == 0 and d_u == dims[0]):
            raise ValueError(f"X has feature sizes (d_u, d_e) = {(d_u, d_e)}, the model expects {tuple(dims)}")
        if dims is not None:
            d_u, d_e = dims
        self.d_u, self.d_e = int(d_u), int(d_e)
        self.batch = GraphBatch.from_dataset(X, self.n_states)
        self.node_features = np.concatenate([x[0] for x in X])
        self.edge_features = np.concatenate([x[2].reshape(-1, self.d_e) for x in X])
        self.n_nodes_per = np.diff(self.batch.node_ptr)
        chains = all(is_chain(x[1], x[0].shape[0]) for x in X)
        if model == "chain" and not chains:
            raise ValueError("model='chain' needs every example's edges to be (i, i+1), i = 0..n-2, in order")
        self.model = "chain" if (model == "chain" or (model == "auto" and chains)) else "lp"
        self.max_sweeps, self.tol = max_sweeps, tol
        self.y = np.concatenate(Y) if Y is not None else None
        self._messages = np.zeros((self.batch.n_edges, 2, self.n_states))
        self._truth = None
        self._edge_example = self.batch.edge_example
        # examples grouped by length, for batched Viterbi
        self._groups = {}
        for k, n in enumerate(self.n_nodes_per):
            self._groups.setdefault(int(n), []).append(k)
        self._groups = {n: np.array(ks) for n, ks in self._groups.items()}

    # ------------------------------------------------------------------ weights
    @property
    def n_examples(self) -> int:
        return self.batch.n_examples

    @property
    def size(self) -> int:
        """Length of ``w``: ``L * d_u + L * L * d_e``."""
        return self.n_states * self.d_u + self.n_states ** 2 * self.d_e

    def unpack(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(W_u (L, d_u), W_p (L * L, d_e))`` views of ``w``."""
        L = self.n_states
        return w[: L * self.d_u].reshape(L, self.d_u), w[L * self.d_u:].reshape(L * L, self.d_e)

    def potentials(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Flat scores ``theta_nodes (N, L)`` and ``theta_edges (M, L, L)`` under ``w``."""
        W_u, W_p = self.unpack(w)
        L = self.n_states
        theta_nodes = self.node_features @ W_u.T
        theta_edges = (self.edge_features @ W_p.T).reshape(-1, L, L)
        return np.ascontiguousarray(theta_nodes), np.ascontiguousarray(theta_edges)

    # ------------------------------------------------------------------ joint features
    def truth_marginals(self) -> tuple[np.ndarray, np.ndarray]:
        """One-hot node ``(N, L)`` and edge ``(M, L, L)`` indicators of the true labels (cached)."""
        if getattr(self, "_truth", None) is None:
            self._truth = self.labels_to_marginals(self.y)
        return self._truth

    def labelling_scores(self, y: np.ndarray, theta_nodes: np.ndarray, theta_edges: np.ndarray) -> np.ndarray:
        """Per-example ``sum_i theta_i(y_i) + sum_e theta_e(y_i, y_j)`` of a flat labelling, shape ``(B,)``."""
        edges = self.batch.edges
        node_part = theta_nodes[np.arange(y.shape[0]), y]
        edge_part = theta_edges[np.arange(edges.shape[0]), y[edges[:, 0]], y[edges[:, 1]]]
        return self.per_example_sum(node_part, edge_part)

    def labels_to_marginals(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One-hot indicators of a flat labelling ``y (N,)``."""
        L = self.n_states
        node = np.zeros((y.shape[0], L))
        node[np.arange(y.shape[0]), y] = 1.0
        edges = self.batch.edges
        edge = np.zeros((edges.shape[0], L * L))
        edge[np.arange(edges.shape[0]), y[edges[:, 0]] * L + y[edges[:, 1]]] = 1.0
        return node, edge.reshape(-1, L, L)

    def joint_feature(self, node_mu: np.ndarray, edge_mu: np.ndarray) -> np.ndarray:
        """``sum_k psi(x^k, mu^k)`` over the whole data set, shape ``(size,)``."""
        unary = node_mu.T @ self.node_features
        pair = edge_mu.reshape(-1, self.n_states ** 2).T @ self.edge_features
        return np.concatenate([unary.ravel(), pair.ravel()])

    def joint_feature_per_example(self, node_mu: np.ndarray, edge_mu: np.ndarray,
                                  examples: Sequence[int] | None = None) -> np.ndarray:
        """``psi(x^k, mu^k)`` for the listed examples (all by default), shape ``(K, size)``."""
        examples = range(self.n_examples) if examples is None else examples
        np_, ep = self.batch.node_ptr, self.batch.edge_ptr
        L2 = self.n_states ** 2
        rows = []
        for k in examples:
            ns, es = slice(np_[k], np_[k + 1]), slice(ep[k], ep[k + 1])
            unary = node_mu[ns].T @ self.node_features[ns]
            pair = edge_mu[es].reshape(-1, L2).T @ self.edge_features[es]
            rows.append(np.concatenate([unary.ravel(), pair.ravel()]))
        return np.array(rows).reshape(len(rows), self.size)

    def per_example_sum(self, node_values: np.ndarray, edge_values: np.ndarray | None = None) -> np.ndarray:
        """Sum per-node (and per-edge) values within each example, shape ``(B,)``."""
        out = np.add.reduceat(node_values, self.batch.node_ptr[:-1]) if node_values.size else 0.0
        if edge_values is not None and edge_values.size:
            out = out + np.bincount(self._edge_example, weights=edge_values, minlength=self.n_examples)
        return out

    def hamming(self, node_mu: np.ndarray) -> np.ndarray:
        """Per-example Hamming loss ``sum_i (1 - mu_i(y_i))`` of (relaxed) labellings, shape ``(B,)``."""
        return self.per_example_sum(1.0 - node_mu[np.arange(self.y.shape[0]), self.y])

    # ------------------------------------------------------------------ inference
    def maximise(self, theta_nodes: np.ndarray, theta_edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Maximise ``theta . mu`` (exactly on chains, over the local polytope otherwise).

        Returns the maximiser as node ``(N, L)`` and edge ``(M, L, L)`` marginals, integral
        for Viterbi, possibly fractional for the LP (see the module docstring).
        """
        if self.model == "chain":
            return self.labels_to_marginals(self._viterbi_all(theta_nodes, theta_edges))
        run = batch_sweeps(self.batch, theta_nodes, theta_edges, 0.0, out=self._messages,
                           max_sweeps=self.max_sweeps, tol=self.tol, check_input=False)
        return batch_marginals(self.batch, theta_nodes, theta_edges, run.messages, 0.0)

    def decode(self, theta_nodes: np.ndarray, theta_edges: np.ndarray) -> np.ndarray:
        """A labelling ``(N,)`` maximising ``theta`` (Viterbi, or LP star updates + node argmax)."""
        if self.model == "chain":
            return self._viterbi_all(theta_nodes, theta_edges)
        lam = np.zeros((self.batch.n_edges, 2, self.n_states))
        run = batch_sweeps(self.batch, theta_nodes, theta_edges, 0.0, out=lam,
                           max_sweeps=self.max_sweeps, tol=self.tol, check_input=False)
        node, _ = batch_marginals(self.batch, theta_nodes, theta_edges, run.messages, 0.0)
        return np.argmax(node, axis=1)

    def _viterbi_all(self, theta_nodes: np.ndarray, theta_edges: np.ndarray) -> np.ndarray:
        L = self.n_states
        y = np.empty(self.batch.n_nodes, dtype=np.int64)
        np_, ep = self.batch.node_ptr, self.batch.edge_ptr
        for n, ks in self._groups.items():
            node_idx = (np_[ks][:, None] + np.arange(n)).ravel()
            edge_idx = (ep[ks][:, None] + np.arange(n - 1)).ravel()
            tn = theta_nodes[node_idx].reshape(len(ks), n, L)
            te = theta_edges[edge_idx].reshape(len(ks), n - 1, L, L)
            y[node_idx] = viterbi_chains(tn, te).ravel()
        return y

    def loss_augmented(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Loss-augmented inference on every example.

        Returns
        -------
        node_mu, edge_mu : ndarray
            The maximiser of ``Hamming(y, mu) + w . psi(x, mu)`` (the relaxed "y hat").
        loss : ndarray of shape (B,)
            ``Hamming(y^k, mu^k)``.
        slack : ndarray of shape (B,)
            ``max(0, loss_k + w . psi(x^k, mu^k) - w . psi(x^k, y^k))``.
        """
        theta_nodes, theta_edges = self.potentials(w)
        aug = theta_nodes + hamming_potentials(self.y, self.n_states)
        if self.model == "chain":
            y_hat = self._viterbi_all(aug, theta_edges)
            node_mu, edge_mu = self.labels_to_marginals(y_hat)
            score_hat = self.labelling_scores(y_hat, theta_nodes, theta_edges)
        else:
            node_mu, edge_mu = self.maximise(aug, theta_edges)
            score_hat = self.per_example_sum((node_mu * theta_nodes).sum(1),
                                             (edge_mu * theta_edges).sum((1, 2)))
        loss = self.hamming(node_mu)
        score_true = self.labelling_scores(self.y, theta_nodes, theta_edges)
        slack = np.maximum(0.0, loss + score_hat - score_true)
        return node_mu, edge_mu, loss, slack

    def split(self, flat: np.ndarray) -> list[np.ndarray]:
        """Split a flat per-node array into one array per example."""
        return self.batch.split_nodes(flat)
