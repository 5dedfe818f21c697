"""The pairwise model with tied unary and pairwise functions, shared by every learner.

The energy on a data set in the flat layout (:class:`slr.data.FlatData`) and inference on it
(:class:`PairwiseModel`): potentials from the unary and pairwise functions,

    theta_i(a) = scale * g_u(x_i)[a] + Delta(y_i, a),    theta_e(a, b) = scale * g_p(x_e)[a L + b],

with the Hamming margin ``Delta`` in loss-augmented problems only (``scale`` is slr's ``eps``,
1 for the baselines), MAP inference, loss-augmented inference and marginals. Chains are decoded exactly by
Viterbi, other forests (trees) exactly by max-product, loopy graphs by star updates on the LP
relaxation until the labels settle (:func:`slr.inference.decoding.batch_map`).

Loss-augmented inference returns a labelling on every graph, scored exactly: the constraint it
gives a cutting-plane SSVM is one of the SSVM's own constraints, and the slack reported is that
constraint's violation. On loopy graphs the labelling is the LP's decoded one (the best seen while
the sweeps run), so the slack is a lower bound on the largest violation, exact where the LP is
tight and the sweeps reach its optimum.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from slr._features import rows_equal
from slr._params import Checked, Integer, NJobs, Options, Real, Satisfies, validate_params
from slr.data import FlatData
from slr.graph import MAX_MAGNITUDE, check_epsilon
from slr.inference.banded import batch_exact_marginals
from slr.inference.batch import batch_marginals, batch_node_beliefs, batch_sweeps, resolve_threads
from slr.inference.decoding import BatchMap, batch_map
from slr.inference.max_product import batch_forest_map
from slr.inference.viterbi import batch_viterbi
from slr.oracles.base import get_oracle_tags
from slr.oracles.targets import check_sample_weight
from slr.transitions import Transitions, exclusion_depth

__all__ = ["CLASS_WEIGHT", "INFERENCE", "MARGINALS", "PairwiseModel", "check_example_weights", "class_weights",
           "hamming_margin"]

#: Inference methods: Viterbi when every example is a chain, max-product when every example is a
#: forest, else the LP ("auto"); Viterbi or the LP.
INFERENCE = ("auto", "chain", "lp")
#: Marginals: of the smoothed LP (any graph), or exact by sum-product (forests).
MARGINALS = ("lp", "exact")


def hamming_margin(labels: np.ndarray, n_states: int, class_weight: np.ndarray | None = None) -> np.ndarray:
    """``Delta(y_i, a) = cw[y_i] [a != y_i]`` for every node, shape ``(n_nodes, L)``.

    ``cw`` is 1 without ``class_weight`` (the Hamming loss). An unlabelled node (label ``-1``)
    gets the zero row: its loss is unknown (see :mod:`slr.latent`).
    """
    delta = np.ones((labels.shape[0], n_states))
    delta[np.arange(labels.shape[0]), labels] = 0.0
    unlabelled = labels < 0
    if unlabelled.any():
        delta[unlabelled] = 0.0
    if class_weight is not None:
        delta *= class_weight[np.maximum(labels, 0)][:, None]
    return delta


#: The ``_parameter_constraints`` entry of a ``class_weight`` parameter (slr's learner and the
#: baselines); the dict's keys and values are checked against the labels by :func:`class_weights`.
CLASS_WEIGHT = (None, Options(("balanced",)), Satisfies(lambda value: isinstance(value, dict),
                                                        "a dict {label: weight}"))


def check_example_weights(sample_weight: Any, n_examples: int) -> np.ndarray | None:
    """A ``sample_weight`` of a structured learner checked: None, or ``(n_examples,)`` finite
    weights ``>= 0``, not all 0, as float64.

    Raises
    ------
    ValueError
        Naming ``sample_weight``.
    """
    return check_sample_weight(sample_weight, n_examples, row="example")


def class_weights(class_weight: Any, labels: np.ndarray, n_states: int) -> np.ndarray | None:
    """The per-label weights ``cw`` of a ``class_weight`` parameter, shape ``(n_states,)``.

    Parameters
    ----------
    class_weight : None, "balanced" or dict
        None: no weights (returned as None). ``"balanced"``: as scikit-learn defines it,
        ``n / (n_classes * count(c))`` over the ``n`` labelled training nodes and the
        ``n_classes`` labels that occur among them (absent labels get 1; no node has them as
        its label). A dict ``{label: weight}``: the weights of the labels it names, 1 for the others.
    labels : ndarray of shape (n_nodes,)
        The training labels (``-1`` unlabelled, not counted).
    n_states : int

    Raises
    ------
    ValueError
        Naming ``class_weight``, for a label outside ``[0, n_states)`` or a weight that is
        not a finite number ``>= 0``.
    """
    if class_weight is None:
        return None
    weights = np.ones(n_states)
    if isinstance(class_weight, str):   # "balanced" (the parameter's constraint admits no other string)
        counts = np.bincount(labels[labels >= 0], minlength=n_states).astype(np.float64)
        present = counts > 0
        if present.any():
            weights[present] = counts.sum() / (present.sum() * counts[present])
        return weights
    for label, weight in class_weight.items():
        if isinstance(label, (bool, np.bool_)) or not isinstance(label, (int, np.integer)) \
                or not 0 <= label < n_states:
            raise ValueError(f"class_weight has the key {label!r}, which is not a label in [0, {n_states})")
        if isinstance(weight, (bool, np.bool_)) or not isinstance(weight, (int, float, np.integer, np.floating)) \
                or not (np.isfinite(weight) and weight >= 0):
            raise ValueError(f"class_weight[{label}] must be a finite number >= 0, got {weight!r}")
        weights[int(label)] = float(weight)
    return weights


class PairwiseModel:
    """The energy of a pairwise model with tied functions, and inference on it.

    Parameters
    ----------
    scale : float, default=1.0
        Factor on the functions' scores (slr's ``eps``).
    inference : {"auto", "chain", "lp"}, default="lp"
        MAP by Viterbi (``"chain"``; every example must be a chain ``(i, i+1)``), by star
        updates on the LP relaxation (``"lp"``), or exactly when every example is a forest
        (``"auto"``: Viterbi on chains, max-product on trees, the LP otherwise).
    epsilon : float, default=0.0
        Entropy weight of the LP decoding; a positive value labels nodes by their smoothed
        marginals' mode.
    max_sweeps : int, default=200
        The budget of star-update sweeps (kernel sweeps) per LP inference. MAP decoding stops
        earlier, once every example's labels are certified or settled
        (:func:`slr.inference.decoding.batch_map`).
    tol : float, default=1e-7
        Star-update stopping tolerance.
    n_jobs : int, optional
        OpenMP threads of the sweeps; all cores when None or -1.
    transitions : Transitions, optional
        Allowed transitions (:mod:`slr.transitions`): decoding, loss-augmented inference and marginals
        put every forbidden pair and end state below every labelling that avoids them
        (:func:`slr.transitions.exclusion_depth`). Decoding a batch of chains refuses an example that
        no labelling satisfies.

    Raises
    ------
    ValueError
        Naming the argument, for a value outside its constraint.
    """

    #: Allowed transitions, or None (models pickled before they existed have none).
    transitions: Transitions | None = None

    _parameter_constraints = {
        "scale": Real(),
        "inference": Options(INFERENCE),
        "epsilon": Checked(lambda value, name: check_epsilon(value, name=name), "a real number >= 0"),
        "max_sweeps": Integer(0),
        "tol": Real(0.0),
        "n_jobs": NJobs(),
    }

    def __init__(self, scale: float = 1.0, *, inference: str = "lp", epsilon: float = 0.0,
                 max_sweeps: int = 200, tol: float = 1e-7, n_jobs: int | None = None,
                 transitions: Transitions | None = None) -> None:
        checked = validate_params(self, params=dict(scale=scale, inference=inference, epsilon=epsilon,
                                                    max_sweeps=max_sweeps, tol=tol, n_jobs=n_jobs))
        self.scale, self.inference, self.epsilon = checked["scale"], checked["inference"], checked["epsilon"]
        self.max_sweeps, self.tol, self.n_jobs = checked["max_sweeps"], checked["tol"], checked["n_jobs"]
        self.transitions = transitions

    def method(self, data: FlatData) -> str:
        """``"chain"``, ``"forest"`` or ``"lp"``: the inference used on ``data``."""
        if self.inference == "chain" and not data.all_chains:
            raise ValueError("model='chain' needs every example's edges to be (i, i+1), i = 0..n-2, in order")
        if self.inference == "chain" or (self.inference == "auto" and data.all_chains):
            return "chain"
        return "forest" if self.inference == "auto" and data.all_forests else "lp"

    # ------------------------------------------------------------------ energy
    def scores_to_potentials(self, scores: Any, shape: tuple[int, int], name: str) -> np.ndarray:
        """``scale * scores`` of a function, checked (the kernels use potentials unchecked)."""
        scores = np.ascontiguousarray(scores, dtype=np.float64)
        if scores.shape != shape:
            raise ValueError(f"the {name} oracle returned scores of shape {scores.shape}, expected {shape}")
        if scores.size:
            # the extremes show any NaN (it propagates) or infinity, without a temporary array
            # the size of the scores (676 pair classes per edge make these large)
            low, high = float(scores.min()), float(scores.max())
            if not (np.isfinite(low) and np.isfinite(high)):
                raise ValueError(f"the {name} oracle returned NaN or infinite scores")
            largest = max(-low, high)
            if abs(self.scale) * largest > MAX_MAGNITUDE:
                raise ValueError(
                    f"the {name} oracle returned scores of magnitude {largest:.3g}: epsilon * scores "
                    "exceeds 2**960 (about 9.7e288), and sums of such potentials overflow float64"
                )
        return self.scale * scores

    def unary_potentials(self, data: FlatData, unary: Any, *, scores: Any = None) -> np.ndarray:
        """``scale * g_u(x_i)`` of every node, shape ``(n_nodes, L)`` (no margin).

        ``scores``: the function's scores of ``data``'s nodes when they are at hand (an oracle's
        ``training_scores_``); ``unary.decision_function`` computes them otherwise.
        """
        if scores is None:
            scores = unary.decision_function(data.node_features)
        return self.scores_to_potentials(scores, (data.batch.n_nodes, data.n_states), "unary")

    def pairwise_potentials(self, data: FlatData, pairwise: Any | None, *, scores: Any = None) -> np.ndarray:
        """``scale * g_p(x_e)`` of every edge, shape ``(n_edges, L, L)``; zeros without a function.

        Where every edge has the same features (chains with a constant edge feature) and the
        function gives them the same scores, the result is one table repeated along the edges, a
        read-only view that holds one table (:func:`slr.graph.shared_table`; the kernels read it
        for every edge).

        ``scores``: as for :meth:`unary_potentials`, of ``data``'s edges.
        """
        L, M = data.n_states, data.batch.n_edges
        if pairwise is None or not M:
            return np.broadcast_to(np.zeros((L, L)), (M, L, L))
        shared = rows_equal(data.edge_features)
        if scores is None:
            # the first row's scores alone, except for a function that keeps its training scores: a
            # row scored in another batch may round differently from those (float32 networks)
            one = shared and not get_oracle_tags(pairwise).training_scores
            scores = pairwise.decision_function(data.edge_features[:1] if one else data.edge_features)
            if one:
                table = self.scores_to_potentials(scores, (1, L * L), "pairwise").reshape(L, L)
                return np.broadcast_to(table, (M, L, L))
        potentials = self.scores_to_potentials(scores, (M, L * L), "pairwise")
        if shared and rows_equal(potentials):
            return np.broadcast_to(potentials[0].reshape(L, L).copy(), (M, L, L))
        return potentials.reshape(M, L, L)

    def exclude(self, data: FlatData, theta_nodes: np.ndarray, theta_edges: np.ndarray, *,
                temperature: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """The potentials with the forbidden pairs and end states of :attr:`transitions` excluded
        (below every labelling that avoids them, and of weight 0 at ``temperature``); the potentials
        as they are without transitions."""
        if self.transitions is None:
            return theta_nodes, theta_edges
        transitions = self.transitions.padded(data.n_states)
        depth = exclusion_depth(data.batch, theta_nodes, theta_edges, transitions, temperature=temperature)
        return transitions.exclude(data.batch, theta_nodes, theta_edges, depth)

    # ------------------------------------------------------------------ inference
    def decode(self, data: FlatData, theta_nodes: np.ndarray, theta_edges: np.ndarray, *,
               warn: bool = False, messages: np.ndarray | None = None) -> np.ndarray:
        """A labelling ``(n_nodes,)`` maximising ``theta``: Viterbi, max-product, or the LP's.

        On loopy graphs (and with ``epsilon > 0``) the LP's sweeps run until every example's labels
        are certified or settled or ``max_sweeps`` is spent (:meth:`lp_map`). ``warn``: a
        ``ConvergenceWarning`` when the budget ran out first. ``messages``: their warm start
        (updated in place), zeros when None.
        """
        method = self.method(data)
        if self.transitions is not None and method == "chain":
            self.transitions.check_feasible_chains(data.batch)
        theta_nodes, theta_edges = self.exclude(data, theta_nodes, theta_edges, temperature=self.epsilon)
        if method == "chain":
            return batch_viterbi(data.batch, theta_nodes, theta_edges)
        if method == "forest":
            return batch_forest_map(data.batch, theta_nodes, theta_edges, n_jobs=self.n_jobs, check_input=False)
        if self.epsilon > 0:
            return self._smoothed_decode(data, theta_nodes, theta_edges, warn)
        result = self.lp_map(data, theta_nodes, theta_edges, messages)
        if warn and not result.settled.all():
            unsettled = ~result.settled
            warnings.warn(
                f"MAP decoding stopped at max_sweeps={self.max_sweeps} on {int(unsettled.sum())} of "
                f"{data.n_examples} examples whose labels may not be the MAP: their labels were still changing "
                f"or the LP's bound still falling (largest gap between a labelling's score and the bound "
                f"{float(result.gap[unsettled].max()):.3g}); raise predict_max_sweeps",
                ConvergenceWarning, stacklevel=5)
        return result.labels

    def lp_map(self, data: FlatData, theta_nodes: np.ndarray, theta_edges: np.ndarray,
               messages: np.ndarray | None = None) -> BatchMap:
        """The LP's MAP labellings by max-product star updates with their bounds
        (:func:`slr.inference.decoding.batch_map`, within ``max_sweeps``; ``messages`` as for :meth:`decode`)."""
        if messages is None:
            messages = np.zeros((data.batch.n_edges, 2, data.n_states))
        return batch_map(data.batch, theta_nodes, theta_edges, messages, max_sweeps=self.max_sweeps, tol=self.tol,
                         threads=resolve_threads(self.n_jobs))

    def _smoothed_decode(self, data: FlatData, theta_nodes: np.ndarray, theta_edges: np.ndarray,
                         warn: bool) -> np.ndarray:
        """Each node's mode of the smoothed LP's marginals (``epsilon > 0``)."""
        result = batch_sweeps(data.batch, theta_nodes, theta_edges, self.epsilon, max_sweeps=self.max_sweeps,
                              tol=self.tol, n_jobs=self.n_jobs, check_input=False)
        if warn and not result.converged.all():
            warnings.warn(f"the smoothed LP's sweeps stopped at max_sweeps={self.max_sweeps} before converging on "
                          f"{int((~result.converged).sum())} of {data.n_examples} examples; raise predict_max_sweeps",
                          ConvergenceWarning, stacklevel=5)
        return np.argmax(batch_node_beliefs(data.batch, theta_nodes, result.messages), axis=1)

    def loss_augmented(
        self, data: FlatData, theta_nodes: np.ndarray, theta_edges: np.ndarray, messages: np.ndarray,
        class_weight: np.ndarray | None = None, scored: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A labelling maximising ``Hamming(y, y') + theta . y'`` on every example, and its score.

        The labelling is exact on forests (Viterbi, max-product) and the LP's (:meth:`lp_map` on the
        loss-augmented potentials) on loopy graphs; where that scores below the true labelling, the
        true labelling (slack 0) is returned instead. Its loss and score are computed exactly, so
        ``slack`` is the violation of the constraint it gives.

        Parameters
        ----------
        data : FlatData
            With labels.
        theta_nodes, theta_edges : ndarray
            The energy, without margin.
        messages : ndarray of shape (n_edges, 2, L)
            Warm start of the LP's star updates, updated in place.
        class_weight : ndarray of shape (L,), optional
            The weighted Hamming loss ``sum_i cw[y_i] [y'_i != y_i]`` (see :func:`hamming_margin`).
        scored : ndarray of bool, shape (n_nodes,), optional
            The nodes the loss counts (all when None): a latent SSVM's imputed hidden nodes are
            part of the labelling, not of the loss.

        Returns
        -------
        node_mu, edge_mu : ndarray
            The one-hot node ``(N, L)`` and edge ``(M, L, L)`` indicators of the labelling ``y'``.
        loss : ndarray of shape (B,)
            ``Hamming(y^k, y'^k)`` (weighted with ``class_weight``).
        slack : ndarray of shape (B,)
            ``loss_k + theta . y'^k - theta . y^k``, at least 0.
        """
        labels = data.labels
        assert labels is not None   # data with labels, as documented
        margin = hamming_margin(labels, data.n_states, class_weight)
        aug = theta_nodes + (margin if scored is None else np.where(scored[:, None], margin, 0.0))
        aug, aug_edges = self.exclude(data, aug, theta_edges)
        method = self.method(data)
        if method == "chain":
            y_hat = batch_viterbi(data.batch, aug, aug_edges)
        elif method == "forest":
            y_hat = batch_forest_map(data.batch, aug, aug_edges, n_jobs=self.n_jobs, check_input=False)
        else:
            y_hat = self.lp_map(data, aug, aug_edges, messages).labels
        node_mu, edge_mu = data.onehot(y_hat)
        loss = data.hamming(node_mu, class_weight, scored)
        score_true = data.labelling_scores(labels, theta_nodes, theta_edges)
        violation = loss + data.labelling_scores(y_hat, theta_nodes, theta_edges) - score_true
        below = violation < 0
        if below.any():   # the true labelling is a candidate too: its violation is 0
            y_hat = np.where(below[data.batch.node_example], labels, y_hat)
            node_mu, edge_mu = data.onehot(y_hat)
            loss = data.hamming(node_mu, class_weight, scored)
            violation = np.where(below, 0.0, violation)
        return node_mu, edge_mu, loss, violation

    def marginals(self, data: FlatData, theta_nodes: np.ndarray, theta_edges: np.ndarray, epsilon: float,
                  method: str, *, max_sweeps: int, tol: float,
                  edge_marginals: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
        """Node and edge marginals of every example at temperature ``epsilon``.

        ``method="lp"``: the smoothed LP's ``mu`` proportional to ``exp(b / epsilon)`` at the star
        updates' fixed point (any graph; a ``ConvergenceWarning`` when ``max_sweeps`` stop the
        sweeps before ``tol``). ``"exact"``: the marginals of ``p(y)`` proportional to
        ``exp(theta(y) / epsilon)``, by sum-product on forests and by elimination on graphs of small
        bandwidth (:func:`slr.inference.banded.batch_exact_marginals`; a ``ValueError`` for a cyclic
        example too wide for it; the ``(n_edges, L, L)`` edge marginals only with ``edge_marginals``).

        Returns
        -------
        node_marginals : ndarray of shape (n_nodes, L)
        edge_marginals : ndarray of shape (n_edges, L, L), or None
        """
        theta_nodes, theta_edges = self.exclude(data, theta_nodes, theta_edges, temperature=epsilon)
        if method == "exact":
            result = batch_exact_marginals(data.batch, theta_nodes, theta_edges, epsilon,
                                           edge_marginals=edge_marginals, n_jobs=self.n_jobs)
            return result.node_marginals, result.edge_marginals
        run = batch_sweeps(data.batch, theta_nodes, theta_edges, epsilon, max_sweeps=max_sweeps, tol=tol,
                           n_jobs=self.n_jobs)
        if not run.converged.all():
            warnings.warn(f"the smoothed LP's sweeps stopped at max_sweeps={max_sweeps} before converging on "
                          f"{int((~run.converged).sum())} of {data.n_examples} examples; raise max_sweeps",
                          ConvergenceWarning, stacklevel=3)
        return batch_marginals(data.batch, theta_nodes, theta_edges, run.messages, epsilon)
