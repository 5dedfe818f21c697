"""Piecewise training (Sutton and McCallum 2005): every factor type fitted alone, no messages."""
from __future__ import annotations

import copy
from typing import Sequence

import numpy as np

from baselines.base import BaseStructuredLearner
from baselines.features import StructuredData
from slr.oracles import Linear, LogisticOracle

__all__ = ["PiecewiseTraining"]


class PiecewiseTraining(BaseStructuredLearner):
    """Train the unary and the pairwise factors separately by logistic regression.

    The unary oracle is fitted on ``(node_features, y_i)`` over all nodes of all examples,
    the pairwise oracle on ``(edge_features, y_i * L + y_j)`` over all edges, each with a
    zero bias (no messages between the pieces). Prediction combines the two score
    functions as potentials and decodes the MAP labelling (Viterbi on chains, LP star
    updates otherwise). Any slr oracle works, so the pieces can be nonlinear.

    Parameters
    ----------
    unary : LogisticOracle, optional
        Default ``slr.oracles.Linear()``; cloned before fitting.
    pairwise : LogisticOracle, optional
        Default ``slr.oracles.Linear()``; cloned before fitting.
    model, max_sweeps, inference_tol, verbose
        As in :class:`baselines.ssvm.OneSlackSSVM` (used for prediction only).
    random_state : None
        Unused (oracles carry their own seeds).

    Attributes
    ----------
    unary_, pairwise_ : LogisticOracle
        The fitted oracles.
    history_ : pandas.DataFrame
        One row (iteration 0; ``primal_objective`` is the sum of the two pieces'
        logistic losses; ``train_error`` per node).
    """

    def __init__(self, unary: LogisticOracle | None = None, pairwise: LogisticOracle | None = None,
                 model: str = "auto", max_sweeps: int = 200, inference_tol: float = 1e-7,
                 verbose: int = 0, random_state=None) -> None:
        self.unary, self.pairwise = unary, pairwise
        self.model, self.max_sweeps, self.inference_tol = model, max_sweeps, inference_tol
        self.verbose, self.random_state = verbose, random_state

    def _validate_params(self) -> None:
        super()._validate_params()
        for name in ("unary", "pairwise"):
            oracle = getattr(self, name)
            if oracle is not None and not isinstance(oracle, LogisticOracle):
                raise ValueError(f"{name} must be an slr LogisticOracle, got {type(oracle).__name__}")

    def _fit(self, data: StructuredData) -> None:
        L = data.n_states
        self.unary_ = copy.deepcopy(self.unary) if self.unary is not None else Linear()
        self.pairwise_ = copy.deepcopy(self.pairwise) if self.pairwise is not None else Linear()
        node_labels = data.y
        self.unary_.fit(data.node_features, np.zeros((data.batch.n_nodes, L)), node_labels)
        losses = self.unary_.loss(data.node_features, np.zeros((data.batch.n_nodes, L)), node_labels)
        self.has_pairwise_ = data.batch.n_edges > 0
        if self.has_pairwise_:
            edges = data.batch.edges
            pair_labels = data.y[edges[:, 0]] * L + data.y[edges[:, 1]]
            zeros = np.zeros((data.batch.n_edges, L * L))
            self.pairwise_.fit(data.edge_features, zeros, pair_labels)
            losses += self.pairwise_.loss(data.edge_features, zeros, pair_labels)
        self.w_ = None  # not a linear weight vector in general; see decision_potentials
        y_hat = data.decode(*self._potentials(data))
        self._record(0, float(losses), float(np.mean(y_hat != data.y)))

    def _check_fitted(self) -> None:
        if not hasattr(self, "unary_"):
            raise ValueError(f"{type(self).__name__} is not fitted yet; call fit first")

    def _potentials(self, data: StructuredData) -> tuple[np.ndarray, np.ndarray]:
        L = data.n_states
        theta_nodes = np.ascontiguousarray(self.unary_.decision_function(data.node_features), dtype=np.float64)
        if self.has_pairwise_ and data.batch.n_edges:
            theta_edges = self.pairwise_.decision_function(data.edge_features).reshape(-1, L, L)
        else:
            theta_edges = np.zeros((data.batch.n_edges, L, L))
        return theta_nodes, np.ascontiguousarray(theta_edges, dtype=np.float64)

    def decision_potentials(self, X: Sequence) -> tuple[StructuredData, np.ndarray, np.ndarray]:
        """The data in flat form and the potentials given by the two fitted oracles."""
        self._check_fitted()
        data = self._data(X, None, self.n_states_, dims=self.dims_)
        return (data, *self._potentials(data))

    def primal_objective(self, X, Y, C=None) -> float:  # noqa: D102 - no SSVM objective here
        raise NotImplementedError("PiecewiseTraining has no SSVM primal objective")
