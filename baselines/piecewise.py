"""Piecewise training (Sutton and McCallum 2005): every factor type fitted alone, no messages."""
from __future__ import annotations

import copy

import numpy as np

from slr.baselines.base import BaseStructuredLearner
from slr.baselines.features import StructuredData
from slr._params import Integer
from slr.models import PairwiseModel
from slr.oracles import Linear, LogisticOracle
from slr.transitions import FORBIDDEN_UNITS, add_edge_offset

__all__ = ["PiecewiseTraining"]


class PiecewiseTraining(BaseStructuredLearner):
    """Train the unary and the pairwise factors separately by logistic regression.

    The unary oracle is fitted on ``(node_features, y_i)`` over all nodes of all examples,
    the pairwise oracle on ``(edge_features, y_i * L + y_j)`` over all edges, each with a
    zero bias (no messages between the pieces). Prediction combines the two score
    functions as potentials and decodes the MAP labelling (Viterbi on chains, LP star
    updates otherwise). Any slr oracle works, so the pieces can be nonlinear.

    Weights (:mod:`slr.baselines.weights`) are row weights of the two logistic fits: node ``i`` of
    example ``k`` weighs ``sample_weight[k] * class_weight[y_i]``, edge ``e`` of example ``k``
    weighs ``sample_weight[k]`` (class weights act on the node terms only).

    Parameters
    ----------
    unary : LogisticOracle, optional
        Default ``slr.oracles.Linear()``; cloned before fitting.
    pairwise : LogisticOracle, optional
        Default ``slr.oracles.Linear()``; cloned before fitting.
    max_iter : int, default=1
        Unused: each piece is fitted once (the learner contract's name, see :mod:`slr.estimator`).
    model, max_sweeps, inference_tol, n_states, n_jobs, verbose
        As in :class:`slr.baselines.ssvm.OneSlackSSVM` (inference for prediction only).
    allowed_transitions : None, "BIO", "BIOES" or array-like of bool, default=None
        As in :class:`slr.baselines.ssvm.OneSlackSSVM`; the pairwise piece's forbidden pair classes get
        a fixed bias far below the others (``slr.transitions.FORBIDDEN_UNITS``), so it does not fit them.
    random_state : None
        Unused (oracles carry their own seeds).
    class_weight : None, "balanced" or dict, default=None
        Label weights of the unary piece's rows (see above).

    Attributes
    ----------
    unary_, pairwise_ : LogisticOracle
        The fitted oracles.
    history_ : pandas.DataFrame
        One row (iteration 0; ``objective`` is the sum of the two pieces' weighted
        logistic losses; ``train_error`` per node, weighted by ``sample_weight``).
    """

    # the oracles are nested estimators, checked in _validate_extra
    _parameter_constraints = {**BaseStructuredLearner._parameter_constraints, "max_iter": Integer(1)}

    def __init__(self, unary: LogisticOracle | None = None, pairwise: LogisticOracle | None = None,
                 max_iter: int = 1, model: str = "auto", max_sweeps: int = 200, inference_tol: float = 1e-7,
                 n_states: int | None = None, n_jobs: int | None = None, verbose: int = 0,
                 random_state=None, class_weight=None, allowed_transitions=None) -> None:
        self.unary, self.pairwise, self.max_iter = unary, pairwise, max_iter
        self.model, self.max_sweeps, self.inference_tol = model, max_sweeps, inference_tol
        self.n_states, self.n_jobs, self.verbose, self.random_state = n_states, n_jobs, verbose, random_state
        self.class_weight = class_weight
        self.allowed_transitions = allowed_transitions

    def _validate_extra(self) -> None:
        for name in ("unary", "pairwise"):
            oracle = getattr(self, name)
            if oracle is not None and not isinstance(oracle, LogisticOracle):
                raise ValueError(f"{name} must be an slr LogisticOracle, got {type(oracle).__name__}")

    def _fit(self, data: StructuredData) -> None:
        L = data.n_states
        self.unary_ = copy.deepcopy(self.unary) if self.unary is not None else Linear()
        self.pairwise_ = copy.deepcopy(self.pairwise) if self.pairwise is not None else Linear()
        node_labels = data.labels
        node_weight = data.node_weights()
        if data.class_weight is not None:
            label_weight = data.class_weight[node_labels]
            node_weight = label_weight if node_weight is None else node_weight * label_weight
        zeros = np.zeros((data.batch.n_nodes, L))
        self.unary_.fit(data.node_features, zeros, node_labels, sample_weight=node_weight)
        losses = self.unary_.loss(data.node_features, zeros, node_labels, sample_weight=node_weight)
        self.has_pairwise_ = data.has_edges
        if self.has_pairwise_:
            bias = np.zeros((data.batch.n_edges, L * L))
            if data.energy.transitions is not None:   # forbidden pairs: a fixed bias far below, not fitted
                bias = add_edge_offset(bias.reshape(-1, L, L), data.energy.transitions.edge_offset(FORBIDDEN_UNITS),
                                       in_place=True).reshape(bias.shape)
            edge_weight = data.edge_weights()
            self.pairwise_.fit(data.edge_features, bias, data.pair_labels, sample_weight=edge_weight)
            losses += self.pairwise_.loss(data.edge_features, bias, data.pair_labels, sample_weight=edge_weight)
        self.w_ = None  # not a linear weight vector in general; see decision_potentials
        self._log(0, float(losses), None, self._node_error(data, self._predict_flat(data)))

    def _potentials(self, data: StructuredData) -> tuple[np.ndarray, np.ndarray]:
        """The two fitted oracles' scores as potentials (no ``eps``: piecewise works on ``theta``)."""
        energy = PairwiseModel()
        return (energy.unary_potentials(data, self.unary_),
                energy.pairwise_potentials(data, self.pairwise_ if self.has_pairwise_ else None))

    def primal_objective(self, X, Y, C=None, sample_weight=None) -> float:  # noqa: D102 - no SSVM objective here
        raise NotImplementedError("PiecewiseTraining has no SSVM primal objective")
