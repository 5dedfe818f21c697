"""What runs on the workers: one partition of the training examples and the functions on it.

A :class:`Shard` holds a partition's data, its messages and its potentials. The functions here
are the tasks the client submits; each takes a shard (a future resolved on the worker that holds
it) and returns a new shard or a few numbers. Shards are never changed in place: a function that
moves the messages returns a new shard with new messages, so that Dask can recompute a shard lost
with its worker by replaying its chain of tasks from the partition's source (lineage), bit for
bit. All the math is the single-process learner's (:mod:`slr.reduction`, :mod:`slr.oracles.linear`).
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable

import numpy as np

from slr._features import FeatureMatrix, is_sparse, scale_columns
from slr._setup import layout_digest
from slr.data import FlatData
from slr.inference.batch import batch_sweeps, resolve_threads
from slr.latent import LatentTargets, initial_node_targets
from slr.reduction import SWEEP_TOL, SplitObjective, node_message_sums, pairwise_bias
from slr.models import PairwiseModel, check_example_weights, hamming_margin
from slr.oracles.base import binary_exponents, check_logistic_problem
from slr.oracles.linear import _single_threaded_blas, _solver_loss
from slr.oracles.pair_bias import PairBias
from slr.oracles.targets import target_totals

__all__ = ["Shard"]


@dataclasses.dataclass(frozen=True)
class Shard:
    """One partition of the training set with its share of Algorithm 1.1's state.

    Attributes
    ----------
    data : FlatData
        The partition's examples (with labels; ``-1`` marks an unlabelled node).
    delta : ndarray of shape (n_nodes, L)
        The Hamming margin of its nodes.
    example_weights : ndarray of shape (n_examples,) or None
    messages : ndarray of shape (n_edges, 2, L)
    unary_potentials, theta_nodes, theta_edges : ndarray
        Potentials of the current functions (``theta_nodes`` with the margin).
    n_sweeps, converged : ndarray or None
        The last sweeps' counts and convergence per example.
    latent : LatentTargets or None
        The partition's soft targets when the training set has unlabelled nodes (in any
        partition): what the oracles fit and R's truth term, as in the single-process learner.
    """

    data: FlatData
    delta: np.ndarray
    example_weights: np.ndarray | None
    messages: np.ndarray
    unary_potentials: np.ndarray
    theta_nodes: np.ndarray
    theta_edges: np.ndarray
    n_sweeps: np.ndarray | None = None
    converged: np.ndarray | None = None
    latent: LatentTargets | None = None

    def split_objective(self, epsilon: float, n_jobs: int | None) -> SplitObjective:
        assert self.data.labels is not None   # training data: labelled
        return SplitObjective(self.data.batch, self.data.labels, epsilon, resolve_threads(n_jobs),
                               check_input=False, sample_weight=self.example_weights, targets=self.latent)


# ------------------------------------------------------------------ loading
def load_source(source: Callable[[], tuple]) -> tuple:
    """``source()``: a partition's ``(X, Y)`` or ``(X, Y, sample_weight)``."""
    loaded = source()
    if not isinstance(loaded, tuple) or len(loaded) not in (2, 3):
        raise ValueError(f"a source must return (X, Y) or (X, Y, sample_weight), got {type(loaded).__name__}")
    return loaded


def describe(raw: tuple) -> dict[str, Any]:
    """What the client needs to know of a loaded partition before building it: its largest label,
    sizes and feature widths, and what identifies its messages' meaning (:func:`slr._setup.layout_digest`)."""
    data = FlatData(raw[0], raw[1], None, allow_unlabelled=True)
    weights = _partition_weights(raw[2], data.n_examples) if len(raw) == 3 else None
    return {"n_states": data.n_states, "n_examples": data.n_examples, "n_nodes": data.batch.n_nodes,
            "n_edges": data.batch.n_edges, "d_node": data.d_node, "d_edge": data.d_edge,
            "has_edges": data.has_edges, "all_chains": data.all_chains,
            "n_unlabelled": int(data.unlabelled.sum()), "digest": layout_digest(data),
            "weight_sum": float(data.n_examples if weights is None else weights.sum())}


def _partition_weights(sample_weight: Any, n_examples: int) -> np.ndarray | None:
    """A partition's example weights, checked as a learner's, except that they may all be 0: only
    the whole training set's must have a positive sum (the client checks it)."""
    weights = np.asarray(sample_weight)
    if weights.dtype.kind in "iuf" and weights.shape == (n_examples,) and n_examples and not np.any(weights):
        return np.zeros(n_examples)
    return check_example_weights(sample_weight, n_examples)


def build(raw: tuple, n_states: int, class_weight: np.ndarray | None, d_edge: int,
          latent: tuple[float, int, str] | None = None) -> Shard:
    """The partition as a shard with every message zero and both functions zero; a partition
    without edges gets edge features of the training set's width ``d_edge`` (the width of the
    partitions with edges). ``latent``: ``(epsilon, max_sweeps, latent_init)`` when the training
    set has unlabelled nodes; the shard then carries its soft targets, started as the
    single-process learner starts them (``latent_init`` one that needs no other partition's nodes)."""
    data = FlatData(raw[0], raw[1], n_states, allow_unlabelled=True)
    if not data.has_edges and data.d_edge != d_edge:
        data = FlatData([(node_f, edges, np.zeros((0, d_edge))) for node_f, edges, _ in data.X], data.Y, n_states,
                        allow_unlabelled=True)
    weights = _partition_weights(raw[2], data.n_examples) if len(raw) == 3 else None
    L = data.n_states
    assert data.labels is not None   # training data: labelled
    delta = hamming_margin(data.labels, L, class_weight)
    unary = np.zeros((data.batch.n_nodes, L))
    theta_edges = np.zeros((data.batch.n_edges, L, L))
    targets = None
    if latent is not None:
        epsilon, max_sweeps, latent_init = latent
        # "neighbours" and "uniform" draw nothing: no generator is needed
        start = None if latent_init == "uniform" else initial_node_targets(data, latent_init, None)
        targets = LatentTargets(data, epsilon, max_sweeps, SWEEP_TOL, 1, initial=start)
        if targets.fresh:   # uniform targets are updated at the starting potentials
            targets.update(unary + delta, theta_edges)
    return Shard(data, delta, weights, np.zeros((data.batch.n_edges, 2, L)), unary, unary + delta, theta_edges,
                 latent=targets)


# ------------------------------------------------------------------ the half step's parts
def with_potentials(shard: Shard, factor: str, oracle: Any, epsilon: float) -> Shard:
    """The shard with the potentials of ``factor``'s function ``oracle``."""
    energy = PairwiseModel(epsilon)
    if factor == "unary":
        unary = energy.unary_potentials(shard.data, oracle)
        return dataclasses.replace(shard, unary_potentials=unary, theta_nodes=unary + shard.delta)
    return dataclasses.replace(shard, theta_edges=energy.pairwise_potentials(shard.data, oracle))


def with_messages_of(shard: Shard, earlier: Shard) -> Shard:
    """The shard with the messages of ``earlier``, a shard of the same examples (a continued fit)."""
    return dataclasses.replace(shard, messages=earlier.messages)


def swept(shard: Shard, n: int, epsilon: float, n_jobs: int | None) -> Shard:
    """The shard after ``n`` kernel sweeps from its messages (a new messages array)."""
    messages = shard.messages.copy()
    run = batch_sweeps(shard.data.batch, shard.theta_nodes, shard.theta_edges, epsilon, max_sweeps=n,
                       tol=SWEEP_TOL, n_jobs=resolve_threads(n_jobs), out=messages, check_input=False)
    return dataclasses.replace(shard, messages=messages, n_sweeps=run.n_sweeps, converged=run.converged)


def with_new_targets(shard: Shard, n_jobs: int | None) -> Shard:
    """The shard with its soft targets updated at its current potentials (a CCCP step,
    :meth:`slr.latent.LatentTargets.update`), on a copy of them."""
    latent = copy.copy(shard.latent)
    assert latent is not None   # the data update targets only where there are some (has_targets)
    latent.messages, latent.threads = latent.messages.copy(), resolve_threads(n_jobs)
    latent.update(shard.theta_nodes, shard.theta_edges)
    return dataclasses.replace(shard, latent=latent)


def sweep_summary(shard: Shard) -> tuple[int, bool]:
    """The most sweeps an example of the shard ran last, and whether all of them converged."""
    n = int(shard.n_sweeps.max()) if shard.n_sweeps is not None and shard.n_sweeps.size else 0
    return n, bool(shard.converged is None or shard.converged.all())


def objective_parts(shard: Shard, epsilon: float, n_jobs: int | None, nodes: bool,
                    edges: bool) -> tuple[float, float]:
    """The shard's share of R's node and edge parts (NaN for a part not asked for)."""
    split = shard.split_objective(epsilon, n_jobs)
    node_part = split.nodes(shard.theta_nodes, shard.messages) if nodes else float("nan")
    edge_part = split.edges(shard.theta_edges, shard.messages) if edges else float("nan")
    return node_part, edge_part


def errors(shard: Shard, predictor: PairwiseModel) -> tuple[int, int]:
    """Wrong MAP labels of the labelled nodes under the current potentials, and their number."""
    labels, truth = predictor.decode(shard.data, shard.unary_potentials, shard.theta_edges), shard.data.labels
    assert truth is not None   # training data: labelled
    labelled = truth >= 0
    return int(np.count_nonzero(labels[labelled] != truth[labelled])), int(labelled.sum())


def source_errors(raw: tuple, predictor: PairwiseModel, n_states: int, unary: Any,
                  pairwise: Any | None) -> tuple[int, int]:
    """Wrong MAP labels of a (test) partition under fitted functions, and its number of nodes."""
    data = FlatData(raw[0], raw[1], n_states)
    labels = predictor.decode(data, predictor.unary_potentials(data, unary),
                              predictor.pairwise_potentials(data, pairwise))
    return int(np.count_nonzero(labels != data.labels)), int(labels.shape[0])


# ------------------------------------------------------------------ the oracle's problem
def _problem_arrays(shard: Shard, factor: str, epsilon: float) -> tuple[FeatureMatrix, np.ndarray | PairBias,
                                                                        np.ndarray, np.ndarray | None]:
    """Features (sparse ones kept sparse), bias, labels and row weights of ``factor``'s logistic
    problem on the shard, as the single-process learner hands them to its oracle (checked as the
    oracle checks them)."""
    data, weights = shard.data, shard.example_weights
    if factor == "unary":
        bias = (shard.delta - node_message_sums(data.batch, shard.messages)) / epsilon
        features, labels = data.node_features, data.labels if shard.latent is None else shard.latent.nodes
        rows = None if weights is None else weights[data.batch.node_example]
    else:
        bias = pairwise_bias(shard.messages, epsilon, factored=True)
        features = data.edge_features
        labels = data.pair_labels if shard.latent is None else shard.latent.edges
        rows = None if weights is None else weights[data.batch.edge_example]
    features, bias, labels = check_logistic_problem(features, bias, labels, pair_bias=True, sparse=True)
    return features, bias, labels, None if rows is None else _partition_weights(rows, features.shape[0])


def feature_summary(shard: Shard, factor: str, oracle: Any = None) -> tuple[np.ndarray, bool]:
    """Per feature column of ``factor``'s rows (of ``oracle``'s design matrix of them, if given:
    :class:`slr.oracles.linear_protocol.LinearInParameters`), :func:`slr.oracles.base.binary_exponents`,
    and whether the rows are sparse."""
    features = shard.data.node_features if factor == "unary" else shard.data.edge_features
    if oracle is not None:
        features = oracle.design_matrix(features)
    return binary_exponents(features), is_sparse(features)


def largest_bias(shard: Shard, factor: str, epsilon: float) -> float:
    """Largest ``|bias|`` of ``factor``'s problem on the shard (for the oracle's overflow error)."""
    bias = _problem_arrays(shard, factor, epsilon)[1]
    return float(np.max(np.abs(np.asarray(bias)))) if bias.shape[0] else 0.0


def linear_problem(shard: Shard, factor: str, epsilon: float, exponents: np.ndarray, fit_intercept: bool,
                   constant: bool, solver: str, oracle: Any = None) -> Any:
    """The shard's part of the loss Linear's ``solver`` minimises (``constant``: on one feature 1,
    as Constant fits it; ``oracle``: on its design matrix of the rows), on features divided by
    ``2**exponents``."""
    features, bias, labels, weights = _problem_arrays(shard, factor, epsilon)
    if constant:
        features = np.ones((features.shape[0], 1))
    elif oracle is not None:
        features = oracle.design_matrix(features)
    if not constant and exponents.any():
        features = scale_columns(features, -exponents)
    return _solver_loss(solver, features, bias, labels, fit_intercept, weights)


def problem_weight(problem: Any) -> float:
    """Total row weight of a shard's loss."""
    return float(problem.n)


def loss_and_gradient(problem: Any, coef: np.ndarray) -> tuple[float, np.ndarray]:
    with _single_threaded_blas():
        return problem(coef)


def hessian_blocks(problem: Any, coef: np.ndarray) -> np.ndarray:
    with _single_threaded_blas():
        return problem.hessian_blocks(coef)


def hessian_diagonal(problem: Any, coef: np.ndarray) -> np.ndarray:
    with _single_threaded_blas():
        return problem.hessian_diagonal(coef)


def constant_summary(shard: Shard, factor: str, epsilon: float
                     ) -> tuple[np.ndarray, bool, np.ndarray | PairBias | None]:
    """What Constant's closed form needs of the shard: its per-class target totals, whether all its
    bias rows are equal (for a PairBias: their factors, as Constant tests them), and its first bias
    row (a one-row PairBias for a PairBias; None without rows)."""
    _, bias, labels, weights = _problem_arrays(shard, factor, epsilon)
    counts = target_totals(labels, bias.shape[1], weights)
    if not bias.shape[0]:
        return counts, True, None
    if isinstance(bias, PairBias):
        return counts, bias.rows_equal(), PairBias(bias.left[:1].copy(), bias.right[:1].copy())
    return counts, bool(np.all(bias == bias[0])), bias[0].copy()


# ------------------------------------------------------------------ checkpoints
# a shard's soft targets as a checkpoint stores them: LatentTargets' attribute by file key
_TARGET_ARRAYS = {"target_nodes": "nodes", "target_edges": "edges", "target_node_entropy": "node_entropy",
                  "target_edge_entropy": "edge_entropy", "target_messages": "messages"}


def save_state(shard: Shard, path: str) -> str:
    """Write the shard's messages to ``path`` and return it: ``.npy`` of the messages, or with soft
    targets ``.npz`` of the messages and the targets' arrays."""
    with open(path, "wb") as file:
        if shard.latent is None:
            np.save(file, shard.messages, allow_pickle=False)
        else:
            np.savez(file, messages=shard.messages,
                     **{key: getattr(shard.latent, name) for key, name in _TARGET_ARRAYS.items()})
    return path


def restore(source: Callable[[], tuple], n_states: int, class_weight: np.ndarray | None, d_edge: int,
            latent: tuple[float, int, str] | None, path: str, oracles: tuple[Any, Any | None],
            epsilon: float) -> Shard:
    """A shard rebuilt from its source (as :func:`build`), its messages (and soft targets) read
    from ``path`` and the potentials of ``oracles`` (unary, pairwise or None): the shard as it was
    when ``path`` was written."""
    shard = build(load_source(source), n_states, class_weight, d_edge, latent)
    if latent is None:
        saved = {"messages": np.load(path, allow_pickle=False)}
    else:
        with np.load(path, allow_pickle=False) as stored:
            saved = dict(stored)
    messages = saved["messages"]
    if messages.shape != shard.messages.shape:
        raise ValueError(f"the checkpoint {path} holds messages of shape {messages.shape}, "
                         f"its partition has {shard.messages.shape}")
    if latent is not None:
        targets = copy.copy(shard.latent)
        for key, name in _TARGET_ARRAYS.items():
            setattr(targets, name, saved[key])
        shard = dataclasses.replace(shard, latent=targets)
    shard = with_potentials(dataclasses.replace(shard, messages=messages), "unary", oracles[0], epsilon)
    return shard if oracles[1] is None else with_potentials(shard, "pairwise", oracles[1], epsilon)
