"""Prediction under fitted functions: the energy a fit predicts with, its potentials on new data,
and their MAP labels."""
from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Callable

import numpy as np

from slr.data import FlatData
from slr.hidden import state_offset
from slr.models import PairwiseModel
from slr.reduction import SWEEP_TOL
from slr.transitions import Transitions

__all__ = ["map_labels", "potentials", "prediction_model"]


def prediction_model(epsilon: float, params: dict[str, Any],
                      transitions: Transitions | None = None) -> PairwiseModel:
    """The energy of a fit at ``epsilon`` with the checked prediction settings of ``params`` and
    the allowed ``transitions``."""
    return PairwiseModel(epsilon, inference="auto" if params["predict_epsilon"] == 0 else "lp",
                         epsilon=params["predict_epsilon"], max_sweeps=params["predict_max_sweeps"], tol=SWEEP_TOL,
                         n_jobs=params["n_jobs"], transitions=transitions)


def potentials(predictor: PairwiseModel, data: FlatData, unary: Any,
                pairwise: Any | None) -> tuple[np.ndarray, np.ndarray]:
    """The potentials of ``data`` under the functions ``unary`` and ``pairwise`` (None: no pairwise term),
    the states a node may not take (hidden states, :mod:`slr.hidden`) far below the others."""
    theta_nodes = predictor.unary_potentials(data, unary)
    if data.allowed_states is not None:
        theta_nodes = theta_nodes + state_offset(data.allowed_states, predictor.scale)
    return theta_nodes, predictor.pairwise_potentials(data, pairwise)


def map_labels(predictor: PairwiseModel, data: FlatData, unary: Any, pairwise: Any | None,
                timed: Callable[[str], AbstractContextManager], warn: bool = False,
                messages: np.ndarray | None = None) -> np.ndarray:
    """MAP labels of ``data`` under the functions ``unary`` and ``pairwise`` (None: no pairwise term);
    ``warn``: a ``ConvergenceWarning`` when the LP's sweeps stop before converging; ``messages``: the
    LP's warm start, updated in place (:meth:`slr.models.PairwiseModel.decode`)."""
    with timed("predict: potentials"):
        theta_nodes, theta_edges = potentials(predictor, data, unary, pairwise)
    with timed("predict: MAP"):
        return predictor.decode(data, theta_nodes, theta_edges, warn=warn, messages=messages)

