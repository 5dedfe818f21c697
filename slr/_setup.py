"""What a fit of the learner checks and prepares before its loop: the oracles (fresh copies, or
the fitted ones of a continued fit), the data against the fitted widths, the class weights and the
allowed transitions."""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import warnings
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Sequence

import numpy as np
import pandas as pd

from slr._params import validate_params
from slr.data import FlatData
from slr.hidden import flat_data
from slr.oracles.base import MAX_BIAS_SPAN, LogisticOracle, get_oracle_tags
from slr.oracles.linear import Linear
from slr.oracles.linear_protocol import is_linear_in_parameters
from slr.transitions import Transitions, check_transitions

__all__ = ["FACTORS", "FitStart", "allowed_states", "check_held_out_labelled", "check_resolvable_class_weights",
           "check_same_model",
           "checked_data", "checked_transitions", "clone_oracle", "edge_width", "layout_digest", "oracle_spec",
           "resolve_epsilon", "untimed"]

#: The two factor types, as the learner names its oracles.
FACTORS = ("unary", "pairwise")

_UNTIMED = nullcontext()

#: ``epsilon="auto"``: eps where both oracles are linear in their parameters, and where one is not
AUTO_EPSILON_LINEAR, AUTO_EPSILON_NONLINEAR = 0.01, 0.1


@dataclasses.dataclass
class FitStart:
    """Where a fit starts: iteration ``done`` (0 for a fresh fit), its oracles (fresh copies, or the
    fitted ones to continue), the labels' ``classes`` (None: integer labels; a fresh fit learns them
    from ``Y``), whether ``n_states`` is inferred, the generator of a fresh fit's draws, and a
    continued fit's earlier ``history_`` and ``objective_trace_`` up to ``done``."""

    done: int
    oracles: dict[str, Any]
    classes: np.ndarray | None
    inferred: bool
    rng: np.random.Generator | None
    earlier: tuple[pd.DataFrame, pd.DataFrame] | None = None

    @property
    def warm(self) -> bool:
        return self.earlier is not None


def untimed(phase: str) -> AbstractContextManager:
    """The phase timer of a fit without a profiler (``_phase_timer``): no timing."""
    return _UNTIMED


def clone_oracle(oracle: Any, name: str, rng: np.random.Generator) -> LogisticOracle:
    """A fresh copy of an oracle parameter (``Linear()`` for None), checked, its seed drawn from ``rng``
    if it takes one and has none."""
    oracle = Linear() if oracle is None else copy.deepcopy(oracle)
    if not (hasattr(oracle, "fit") and hasattr(oracle, "decision_function")):
        raise ValueError(f"{name} must be an oracle with fit and decision_function, got {oracle!r}")
    get_oracle_tags(oracle)   # a malformed declaration is refused before anything is fitted
    seed = int(rng.integers(2**31 - 1))
    params = oracle.get_params() if hasattr(oracle, "get_params") else {}
    if "random_state" in params and params["random_state"] is None:
        oracle.set_params(random_state=seed)
    if hasattr(oracle, "_parameter_constraints") and hasattr(oracle, "get_params"):
        validate_params(oracle)
    return oracle


def resolve_epsilon(epsilon: float | str, oracles: Sequence[Any]) -> float:
    """The eps of an ``epsilon`` parameter for the oracle parameters ``oracles`` (None: ``Linear()``):
    ``"auto"`` is :data:`AUTO_EPSILON_LINEAR` where every oracle is linear in its parameters, else
    :data:`AUTO_EPSILON_NONLINEAR` (the learner's ``epsilon`` says why)."""
    if epsilon != "auto":
        return float(epsilon)
    linear = all(is_linear_in_parameters(Linear() if oracle is None else oracle) for oracle in oracles)
    return AUTO_EPSILON_LINEAR if linear else AUTO_EPSILON_NONLINEAR


def oracle_spec(oracle: Any) -> str:
    """What identifies an oracle parameter: its class and its parameters as given (``Linear()``
    for None), not its fitted state."""
    oracle = Linear() if oracle is None else oracle
    params = oracle.get_params(deep=True) if hasattr(oracle, "get_params") else {}
    return f"{type(oracle).__module__}.{type(oracle).__qualname__}{sorted(params.items())!r}"


def check_same_model(fitted: Any, params: dict[str, Any]) -> None:
    """Refuse a ``warm_start`` continuation of another model than the fitted one (another
    ``n_states``, ``unary`` or ``pairwise``), and say what a changed ``epsilon`` does."""
    if params["n_states"] is not None and params["n_states"] != fitted.n_states_:
        raise ValueError(f"warm_start=True continues the fitted model of n_states={fitted.n_states_}, but "
                         f"n_states={params['n_states']} now; set warm_start=False to fit the new model")
    if params["n_hidden_states"] != fitted.n_hidden_states_:
        raise ValueError(f"warm_start=True continues the fitted model of n_hidden_states="
                         f"{fitted.n_hidden_states_}, but n_hidden_states={params['n_hidden_states']} "
                         f"now; set warm_start=False to fit the new model")
    for name in FACTORS:
        if oracle_spec(getattr(fitted, name)) != fitted._oracle_specs[name]:
            raise ValueError(f"warm_start=True continues the fitted {name} oracle, but {name} was changed since "
                             f"the fit (now {getattr(fitted, name)!r}); set warm_start=False to fit the new oracle")
    if params["epsilon"] != fitted._predictor.scale:
        warnings.warn(
            f"warm_start=True with epsilon={params['epsilon']:g}, the earlier fit's was {fitted._predictor.scale:g}: "
            "the continued fit minimises the objective at the new epsilon from the earlier functions and "
            "messages, so history_'s objective changes scale where it starts (R at one epsilon is not R at "
            "another)", UserWarning, stacklevel=3)


def check_resolvable_class_weights(class_weight: np.ndarray | None, epsilon: float) -> None:
    """Refuse class weights whose margins, ``cw[y] / epsilon`` in the oracles' bias, span more than
    the oracles resolve (:data:`slr.oracles.base.MAX_BIAS_SPAN`)."""
    if class_weight is None:
        return
    span = float(class_weight.max()) / epsilon
    if span > MAX_BIAS_SPAN:
        raise ValueError(
            f"class_weight: the largest weight, {class_weight.max():.3g}, over epsilon={epsilon:g} is {span:.3g}, "
            f"more than the oracles resolve ({MAX_BIAS_SPAN:.3g}); only the weights' ratios to each other and to "
            "epsilon matter: scale them down")


def checked_data(X: Sequence, Y: Sequence | None, n_states: int, inferred_n_states: bool,
                  d_node: int, d_edge: int | None, name: str, allow_unlabelled: bool = False,
                  n_hidden_states: int = 0) -> FlatData:
    """``X`` (and ``Y``) as flat data with ``n_states`` labels (and ``n_hidden_states``) and the
    given feature widths."""
    data = flat_data(X, Y, n_states, n_hidden_states, inferred_n_states=Y is not None and inferred_n_states,
                      allow_unlabelled=allow_unlabelled, name=name)
    data.check_widths(d_node, d_edge, name)
    return data


def allowed_states(data: FlatData, transitions: Transitions | None) -> np.ndarray | None:
    """The states each node of ``data`` may take (hidden states, the transitions' end states), shape
    ``(n_nodes, n_states)``; None: every state."""
    ends = None if transitions is None else transitions.node_mask(data.batch)
    if ends is None or data.allowed_states is None:
        return data.allowed_states if ends is None else ends
    return data.allowed_states & ends


def checked_transitions(value: Any, data: FlatData, classes: np.ndarray | None) -> Transitions | None:
    """An ``allowed_transitions`` parameter over ``data``'s labels (a scheme resolved against the
    tags ``classes``; None: integer labels), on all its states (hidden states unconstrained), after
    refusing labels of ``data`` that it forbids."""
    transitions = check_transitions(value, data.n_labels, None if classes is None else classes.tolist())
    if transitions is None:
        return None
    transitions = transitions.padded(data.n_states)
    assert data.labels is not None   # training data: labelled
    transitions.check_labels(data.batch, data.labels)
    return transitions


def layout_digest(data: FlatData) -> str:
    """What identifies the messages' meaning: the examples' graphs and labels."""
    digest = hashlib.blake2b(digest_size=16)
    for array in (data.batch.node_ptr, data.batch.edges, data.labels):
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def edge_width(data: FlatData) -> int | None:
    return data.d_edge if data.has_edges else None


def check_held_out_labelled(labels: Sequence[np.ndarray], n_held_out: int, fraction: float) -> None:
    """Refuse the ``n_held_out`` examples early stopping holds out when their coded ``labels`` (one
    array or several; -1: unlabelled) have no labelled node: no validation error could be measured."""
    if all((np.asarray(y) < 0).all() for y in labels):
        raise ValueError(f"early stopping held out {n_held_out} examples of X (validation_fraction={fraction:g}) "
                         "without a labelled node to score; label more examples, pass X_val and Y_val, or set "
                         "early_stopping=False")
