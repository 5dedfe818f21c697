"""Algorithm 1.1 data-parallel on a Dask cluster.

The training examples are split into partitions once; each partition's examples, messages and
potentials live on one worker as a :class:`slr.distributed._shard.Shard` and never move. A half
step of :class:`_DistributedAlternation` runs the single-process learner's loop
(:class:`slr.learner._Alternation`: its half step, its sweep chunks and stopping, the
over-relaxed step) with the parts that touch the data sent to the shards:

- the oracle fit: Linear's (and Constant's) loss, gradient and Hessian blocks (or diagonal, for
  sparse or many features) are summed over the shards (:mod:`slr.distributed._oracles`); the
  coefficients go out, ``K x D`` sums come back;
- the potentials: the fitted oracle (its parameters) goes out, each shard scores its rows;
- the sweeps: each shard sweeps its examples and reports two numbers;
- R: each shard returns its node and edge parts, which the client adds;
- with unlabelled nodes, the soft targets (:class:`slr.latent.LatentTargets`): each shard keeps
  and updates its examples' targets (the CCCP update is per example).

A worker that dies takes its shards with it; Dask recomputes them from their lineage (the
partition's source and the tasks since, all deterministic), so the fit goes on to the same result.
"""
from __future__ import annotations

import copy
import functools
import inspect
import math
import os
import sys
import warnings
from contextlib import AbstractContextManager
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
from sklearn.exceptions import ConvergenceWarning

from slr._optional import import_optional
from slr._params import Integer, Satisfies
from slr.distributed import _shard
from slr.distributed._backend import Backend
from slr.distributed._lightgbm import fit_lightgbm
from slr.distributed._oracles import fit_distributed, supported
from slr.estimator import FitHistory
from slr.inference.batch import BatchSweepResult
from slr.labels import check_class_count, encode_class_weight, encode_labels, fit_labels, integer_classes
from slr.learner import (_FACTORS, StructuredLogisticRegression, _Alternation, _clone_oracle,
                         _linear_parameters, _oracle_spec, _prediction_model, _print_progress, _relaxed_step,
                         _tol_reached, _untimed)
from slr.models import PairwiseModel, check_example_weights, class_weights
from slr.oracles.base import get_oracle_tags
from slr.oracles.lightgbm_adapter import LightGBM
from slr.validation import check_generator

__all__ = ["DaskStructuredLogisticRegression"]

# the first targets of unlabelled nodes each partition can set alone, as the single-process learner would
_LOCAL_LATENT_INIT = ("neighbours", "uniform")


class _Layout:
    """What the client knows of the whole training set: sizes and widths, no rows."""

    def __init__(self, descriptions: Sequence[dict], n_states: int) -> None:
        self.n_states = n_states
        self.n_examples = sum(d["n_examples"] for d in descriptions)
        self.n_nodes = sum(d["n_nodes"] for d in descriptions)
        self.n_edges = sum(d["n_edges"] for d in descriptions)
        self.has_edges = any(d["has_edges"] for d in descriptions)
        self.all_chains = all(d["all_chains"] for d in descriptions)
        self.rows = {"unary": [d["n_nodes"] for d in descriptions], "pairwise": [d["n_edges"] for d in descriptions]}
        self.d_node = descriptions[0]["d_node"]
        # as the single-process learner's check_dataset: the examples with edges settle the edge-feature
        # width, edge-free examples (here: partitions without edges) take it
        with_edges = [d for d in descriptions if d["has_edges"]] or descriptions[:1]
        self.d_edge = with_edges[0]["d_edge"]
        for name, described in (("d_node", descriptions), ("d_edge", with_edges)):
            widths = {d[name] for d in described}
            if len(widths) > 1:
                raise ValueError(f"the partitions of X have different feature widths ({name}: {sorted(widths)})")


class _DistributedAlternation(_Alternation):
    """:class:`slr.learner._Alternation` with its data on the workers.

    It keeps the parent's half step, sweep chunks and trace, and replaces the methods that read
    the data (oracle fit, potentials, sweeps, R, training error) by tasks on the shards.

    Parameters
    ----------
    backend : Backend
    shards : list of futures of Shard
    layout : _Layout
    oracles : dict
    epsilon : float
    max_sweeps : int
    n_jobs : int or None
        OpenMP threads of each shard's sweeps and R (resolved on its worker).
    relaxation : float
    timed : callable
    sweep_tol : float
    latent_iter : int or None
        Iterations between target updates when the shards carry soft targets (unlabelled
        nodes); None without them.
    """

    def __init__(self, backend: Backend, shards: list[Any], layout: _Layout, oracles: dict[str, Any],
                 epsilon: float, max_sweeps: int, n_jobs: int | None, relaxation: float,
                 timed: Callable[[str], AbstractContextManager], sweep_tol: float,
                 latent_iter: int | None = None) -> None:
        # the parent's state, but no arrays: they live in the shards
        self.backend, self.shards, self.train, self.oracles = backend, shards, layout, oracles
        self.tags = {factor: get_oracle_tags(oracles[factor]) for factor in _FACTORS}
        self.epsilon, self.max_sweeps, self.threads, self.sweep_tol = epsilon, max_sweeps, n_jobs, sweep_tol
        self.relaxation, self.timed = relaxation, timed
        self.latent, self.messages = None, None   # the targets live in the shards
        self.latent_iter, self._iterations_on_targets = latent_iter, 0
        self.fitted_pairwise = False
        self.last_sweep: BatchSweepResult | None = None
        self.node_part = self.edge_part = 0.0
        self.penalties = dict.fromkeys(_FACTORS, 0.0)
        self.joint_steps = 0
        self._restored = None
        self.rejected = 0   # tree fits that would have raised J
        self.checkpoints: list[str] = []   # the files of the last checkpoint
        self.trace = []
        self._record(0, "start", self._objective())

    def refresh_targets(self, iteration: int) -> None:
        """The parent's CCCP schedule, each shard updating its own examples' targets."""
        if self.latent_iter is None:
            return
        if self._iterations_on_targets == self.latent_iter:
            with self.timed("targets"):
                self.shards = self.backend.map(_shard.with_new_targets, self.shards, self.threads)
            self._iterations_on_targets = 0
            self._record(iteration, "targets", self._objective())
        self._iterations_on_targets += 1

    def _fit(self, factor: str) -> float:
        """The oracle fit of one half step on the shards, over-relaxed where that lowers R (Linear,
        Constant); a tree oracle's new function is kept only if it does not raise R."""
        oracle, names = self.oracles[factor], self.tags[factor].linear_parameters
        before = _linear_parameters(oracle, names) if self.relaxation != 1.0 else None
        width = self.train.d_node if factor == "unary" else self.train.d_edge
        n_classes = self.train.n_states if factor == "unary" else self.train.n_states ** 2
        trees = isinstance(oracle, LightGBM)
        previous = (copy.deepcopy(oracle), self.shards, self.fitted_pairwise, self.node_part, self.edge_part) \
            if trees else None
        with self.timed(f"{factor} fit"):
            if trees:
                fit_lightgbm(oracle, self.backend, self.shards, self.train.rows[factor], factor, self.epsilon,
                             n_classes, width)
            else:   # a partition without edges has no pairwise problem to add
                with_rows = [shard for shard, n in zip(self.shards, self.train.rows[factor]) if n]
                fit_distributed(oracle, self.backend, with_rows, factor, self.epsilon, n_classes, width)
        if factor == "pairwise":
            self.fitted_pairwise = True
        value = _relaxed_step(oracle, names, before, self.relaxation,
                              lambda exact: self._set_potentials(factor, exact),
                              lambda: self._fitted_objective(factor), self.penalised)
        if trees and not value <= self.penalised:
            # the boosted function raised J: the previous function (and its potentials) stay
            self.oracles[factor], self.shards, self.fitted_pairwise, self.node_part, self.edge_part = previous
            self.rejected += 1
            value = self.penalised
        return value

    def _set_potentials(self, factor: str, exact: bool) -> None:
        with self.timed(f"{factor} potentials"):
            self.shards = self.backend.map(_shard.with_potentials, self.shards, factor, self.oracles[factor],
                                           self.epsilon)

    def _sweeps(self, n: int) -> BatchSweepResult:
        with self.timed("message passing"):
            self.shards = self.backend.map(_shard.swept, self.shards, n, self.epsilon, self.threads)
            summaries = self.backend.gather(self.backend.map(_shard.sweep_summary, self.shards))
        # per shard: the most sweeps of its examples, and whether all of them converged
        return BatchSweepResult(None, np.array([s[0] for s in summaries], dtype=np.int32),
                                np.array([s[1] for s in summaries]))

    def _objective(self, nodes: bool = True, edges: bool = True) -> float:
        with self.timed("objective R"):
            parts = self.backend.gather(self.backend.map(_shard.objective_parts, self.shards, self.epsilon,
                                                         self.threads, nodes, edges))
            if nodes:
                self.node_part = math.fsum(part[0] for part in parts)
            if edges:
                self.edge_part = math.fsum(part[1] for part in parts)
            return self.node_part + self.edge_part

    def checkpoint(self, directory: str, iteration: int, rebuild: Callable[[int, str], Any]) -> None:
        """Write every shard's messages to ``directory`` and replace the shards by tasks that rebuild
        them from their source and those files (``rebuild(index, path)``, each meant for the worker
        that holds the shard now), so that a lost shard is recomputed from its last checkpoint
        rather than from the start of the fit."""
        suffix = ".npy" if self.latent_iter is None else ".npz"   # with soft targets, those too
        paths = [os.path.join(directory, f"iteration{iteration:05d}-partition{index:05d}{suffix}")
                 for index in range(len(self.shards))]
        saved = self.backend.gather([self.backend.client.submit(_shard.save_state, shard, path, pure=False)
                                     for shard, path in zip(self.shards, paths)])
        self.shards = [rebuild(index, path) for index, path in enumerate(saved)]
        # no task reads the previous checkpoint any more
        self.backend.gather([self.backend.client.submit(os.remove, path, pure=False) for path in self.checkpoints])
        self.checkpoints = saved

    def training_error(self, predictor: PairwiseModel) -> float:
        """Per-node error of MAP labels of the training set's labelled nodes under the current
        functions (NaN without any)."""
        counts = self.backend.gather(self.backend.map(_shard.errors, self.shards, predictor))
        labelled = sum(c[1] for c in counts)
        return sum(c[0] for c in counts) / labelled if labelled else float("nan")

    def certificate(self, stop_reason: str, n_iter: int) -> None:
        """No certificate: its bounds need every example's messages in one place."""
        return None


def _check_checkpoint_dir(directory: Any) -> None:
    """Refuse a ``checkpoint_dir`` that is not a writable directory before the fit starts (as seen
    from the client; the workers must see the same directory)."""
    if directory is None:
        return
    path = os.fspath(directory)
    if not os.path.isdir(path) or not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"checkpoint_dir={path!r} is not a writable directory")


def _check_descriptions(descriptions: list[dict], params: dict[str, Any], oracles: dict[str, Any]) -> None:
    """Refuse what the partitions hold together and the fit cannot take: weights that are all 0;
    unlabelled nodes with a ``latent_init`` that looks across partitions or a tree oracle (it fits
    hard labels only)."""
    if not sum(d["weight_sum"] for d in descriptions) > 0:
        raise ValueError("sample_weight must have a positive sum (every example of every partition weighs 0)")
    unlabelled = sum(d["n_unlabelled"] for d in descriptions)
    if not unlabelled:
        return
    refusals = [(params["latent_init"] not in _LOCAL_LATENT_INIT,
                 (f"latent_init={params['latent_init']!r} (it needs all the unlabelled nodes in one place; "
                  f"use one of {_LOCAL_LATENT_INIT})")),
                (any(isinstance(oracle, LightGBM) for oracle in oracles.values()), "a LightGBM oracle")]
    for refused, what in refusals:
        if refused:
            raise ValueError(f"Y has {unlabelled} unlabelled nodes (-1 or masked): DaskStructuredLogisticRegression "
                             f"learns them, but not with {what}")


def _in_memory_source(X: Sequence, Y: Sequence, weights: np.ndarray | None) -> tuple:
    return (list(X), list(Y)) if weights is None else (list(X), list(Y), weights)


def _coded_source(source: Callable[[], tuple], classes: np.ndarray) -> tuple:
    """A source's ``(X, Y, ...)`` with ``Y`` in the codes of ``classes``."""
    X, Y, *rest = _shard.load_source(source)
    return (X, encode_labels(Y, classes), *rest)


def _partition_bounds(n_examples: int, n_partitions: int) -> list[tuple[int, int]]:
    """Contiguous blocks of examples, as equal in count as can be."""
    edges = np.linspace(0, n_examples, n_partitions + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def _client() -> Any:
    distributed = import_optional("distributed", "distributed", "slr.distributed")
    try:
        return distributed.get_client()
    except ValueError as error:
        raise ValueError("DaskStructuredLogisticRegression needs a dask.distributed Client: create one "
                         "(distributed.Client(...)) before fit") from error


class DaskStructuredLogisticRegression(StructuredLogisticRegression):
    """:class:`slr.StructuredLogisticRegression` trained data-parallel on a Dask cluster.

    The examples are split into ``n_partitions`` partitions once; each partition's examples,
    messages and potentials stay on one worker of the current ``dask.distributed`` client for the
    whole fit. Only the model's parameters, the oracles' coefficients and gradients and a few
    numbers per partition (R's parts, sweep counts) cross the network. With ``Linear`` and
    ``Constant`` oracles the fit is the single-process fit up to the rounding of sums over
    partitions (R agrees to about 1e-12 relative). Node and edge features may be ``scipy.sparse``
    matrices, as for the single-process learner; they stay sparse on the workers, and ``Linear``
    fits them (and many features, and ``l1 > 0``) with its diagonal solver, in memory linear in the
    stored entries and ``K D``. Prediction of a fitted model runs locally
    (:meth:`predict`) or on the workers (:meth:`score_sources`).

    A worker lost mid-fit costs a recomputation: its partitions are rebuilt by Dask from their
    source and the tasks run on them since (deterministic), and the fit continues unchanged. With
    ``checkpoint_dir`` the replay starts from the last checkpoint instead of the fit's start.

    Parameters
    ----------
    n_partitions : int, optional
        Partitions of ``fit(X, Y)``'s examples (contiguous blocks); the client's number of workers
        when None. :meth:`fit_sources` takes one partition per source.
    checkpoint_dir : str or path, optional
        A directory every worker can write and read (shared storage on a real cluster). Every
        ``checkpoint_every`` iterations each partition writes its messages (and its soft targets,
        with unlabelled nodes) there and is then
        rebuilt from its source and that file (its potentials from the model), which bounds what
        a lost worker costs (and the scheduler's record of each partition's tasks) to the
        iterations since. Each checkpoint deletes the previous one's files; the last stay.
    checkpoint_every : int, default=10
        Iterations between checkpoints (with ``checkpoint_dir``).
    **params
        Every parameter of :class:`slr.StructuredLogisticRegression`, with these limits: the
        oracles must be ``Linear``, ``Constant`` or ``LightGBM`` (None is Linear; LightGBM trains
        through ``lightgbm.dask`` on worker processes, :mod:`slr.distributed._lightgbm`); ``warm_start``,
        ``early_stopping=True``, ``class_weight="balanced"``, ``n_hidden_states`` and
        ``allowed_transitions`` are not supported; unlabelled nodes are learnt as the single-process
        learner learns them, with
        ``latent_init`` ``"neighbours"`` or ``"uniform"`` and Linear or Constant oracles; ``X_val``
        is not taken; ``solver="auto"`` runs Algorithm 1.1 (``solver_`` is ``"alternation"``) and
        ``solver="joint"`` is refused.

    Attributes
    ----------
    Those of StructuredLogisticRegression, with ``certificate_`` None (its bounds need every
    example's messages in one place) and ``history_["seconds"]`` including the training error's
    evaluation (``monitor=False`` leaves it out; ``"auto"`` measures it after every iteration here, as
    ``True`` does), and:

    transfer_ : pandas.DataFrame
        One row per iteration (row 0: loading and the start): ``iteration``, ``bytes_sent``
        (pickled task arguments, once per partition), ``bytes_received`` (pickled results) and
        ``tasks``; LightGBM's own network traffic, its rounds' loss exchange (43 numbers per
        worker and round) and the checkpoints are not counted.
    n_partitions_ : int
    """

    _parameter_constraints = {**StructuredLogisticRegression._parameter_constraints,
                              "n_partitions": (None, Integer(1)),
                              "checkpoint_dir": (None, Satisfies(lambda value: isinstance(value, (str, os.PathLike)),
                                                                 "a path")),
                              "checkpoint_every": Integer(1)}

    def __init__(self, unary: Any = None, pairwise: Any = None, *, n_partitions: int | None = None,
                 checkpoint_dir: str | None = None, checkpoint_every: int = 10, **params: Any) -> None:
        super().__init__(unary, pairwise, **params)
        self.n_partitions = n_partitions
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every

    # ------------------------------------------------------------------------------------
    def fit(self, X: Sequence, Y: Sequence, sample_weight: Any = None) -> "DaskStructuredLogisticRegression":
        """Learn from data held by the client, split into ``n_partitions`` partitions.

        Parameters
        ----------
        X, Y : as for :meth:`slr.StructuredLogisticRegression.fit`
            Labels of any hashable type that sort (``classes_``), coded here before they are
            partitioned.
        sample_weight : array-like of shape (n_examples,), optional

        Returns
        -------
        self
        """
        if len(X) != len(Y):
            raise ValueError(f"X and Y must have the same number of examples, got {len(X)} and {len(Y)}")
        Y, classes = fit_labels(Y, None)
        weights = check_example_weights(sample_weight, len(X))
        n_partitions = self.n_partitions or len(_client().scheduler_info()["workers"])
        sources = [functools.partial(_in_memory_source, X[a:b], Y[a:b], None if weights is None else weights[a:b])
                   for a, b in _partition_bounds(len(X), n_partitions)]
        return self._fit_sources(sources, classes)

    def fit_sources(self, sources: Sequence[Callable[[], tuple]]) -> "DaskStructuredLogisticRegression":
        """Learn from partitions that each worker loads itself.

        Parameters
        ----------
        sources : list of callables
            One per partition: ``source()``, run on a worker, returns the partition's ``(X, Y)`` or
            ``(X, Y, sample_weight)`` (e.g. reading its files), with integer labels (``classes_``
            is then ``arange(n_states_)``). Sources must be picklable and deterministic: a
            partition lost with its worker is loaded again.

        Returns
        -------
        self
        """
        return self._fit_sources(sources, None)

    def _fit_sources(self, sources: Sequence[Callable[[], tuple]],
                     classes: np.ndarray | None) -> "DaskStructuredLogisticRegression":
        """:meth:`fit_sources` on sources whose labels code ``classes`` (None: integer labels)."""
        params = self._check_params()
        self._check_supported(params)
        if not sources:
            raise ValueError("sources must hold at least one partition")
        _check_checkpoint_dir(params["checkpoint_dir"])
        backend = Backend(_client())
        rng = check_generator(params["random_state"])
        oracles = {name: _clone_oracle(getattr(self, name), name, rng) for name in _FACTORS}
        for name, oracle in oracles.items():
            if not (supported(oracle) or isinstance(oracle, LightGBM)):
                raise ValueError(f"{name} must be an oracle linear in its parameters (Linear, Constant, Zero: "
                                 f"slr.oracles.linear_protocol.LinearInParameters) or LightGBM for "
                                 f"DaskStructuredLogisticRegression, got {type(oracle).__name__}")
        raw = [backend.submit(_shard.load_source, source) for source in sources]
        descriptions = backend.gather(backend.map(_shard.describe, raw))
        _check_descriptions(descriptions, params, oracles)
        n_states = params["n_states"] or max(d["n_states"] for d in descriptions)
        check_class_count(classes, n_states)
        layout = _Layout(descriptions, n_states)
        class_weight = class_weights(encode_class_weight(params["class_weight"], classes), np.zeros(0, dtype=np.int64),
                                     n_states)
        partial = any(d["n_unlabelled"] for d in descriptions)
        latent = (params["epsilon"], params["max_sweeps"], params["latent_init"]) if partial else None
        shards = backend.map(_shard.build, raw, n_states, class_weight, layout.d_edge, latent)
        del raw
        predictor = _prediction_model(params["epsilon"], params)
        timed = self._phase_timer or _untimed
        history = FitHistory(None)
        state = _DistributedAlternation(backend, shards, layout, oracles, params["epsilon"], params["max_sweeps"],
                                        params["n_jobs"], params["relaxation"], timed, params["sweep_tol"],
                                        params["latent_iter"] if partial else None)
        transfer = [(0, *backend.counters())]

        def record(iteration: int) -> dict:
            with timed("monitor"):
                error = state.training_error(predictor) if params["monitor"] else float("nan")
            return history.record(iteration, state.objective, train_error=error)

        def rebuild(index: int, path: str) -> Any:
            holders = backend.client.who_has([state.shards[index]]).get(state.shards[index].key, ())
            pairwise = state.oracles["pairwise"] if state.fitted_pairwise else None
            return backend.client.submit(_shard.restore, sources[index], n_states, class_weight, layout.d_edge,
                                         latent, path, (state.oracles["unary"], pairwise), params["epsilon"],
                                         pure=False, workers=list(holders) or None, allow_other_workers=True)

        history.record(0, state.objective)   # as the single-process fit: no error at the start
        objectives = [state.penalised]   # the stopping rule reads J, as the single-process fit's
        stop_reason = "max_iter"
        for iteration in range(1, params["max_iter"] + 1):
            state.refresh_targets(iteration)
            state.half_step(iteration, "unary")
            state.half_step(iteration, "pairwise")
            row = record(iteration)
            transfer.append((iteration, *backend.counters()))
            objectives.append(state.penalised)
            if params["checkpoint_dir"] is not None and iteration % params["checkpoint_every"] == 0:
                with timed("checkpoint"):
                    state.checkpoint(os.fspath(params["checkpoint_dir"]), iteration, rebuild)
            if params["verbose"]:
                _print_progress(row, state.trace[-4:] if params["verbose"] > 1 else ())
            if _tol_reached(objectives, params["tol"]):
                stop_reason = "tol"
                break
        if params["verbose"]:
            print(f"[DaskStructuredLogisticRegression] stopped after {iteration} iterations ({stop_reason})",
                  file=sys.stderr)
        if stop_reason == "max_iter" and params["tol"] > 0:
            warnings.warn(f"DaskStructuredLogisticRegression stopped at max_iter={params['max_iter']} before the "
                          f"objective's relative decrease fell below tol={params['tol']:g}; raise max_iter",
                          ConvergenceWarning, stacklevel=2)
        self._commit_fit({
            "n_states_": n_states,
            "classes_": integer_classes(n_states) if classes is None else classes,
            "n_hidden_states_": 0,
            "n_node_features_": layout.d_node,
            "n_edge_features_": layout.d_edge if layout.has_edges else None,
            "unary_": state.oracles["unary"],
            "pairwise_": state.oracles["pairwise"],
            "_oracle_specs": {name: _oracle_spec(getattr(self, name)) for name in _FACTORS},
            "history_": history.frame(),
            "objective_trace_": state.trace_frame(),
            "n_iter_": iteration,
            "stop_reason_": stop_reason,
            "solver_": "alternation",
            "best_iteration_": None,
            "_n_states_inferred": params["n_states"] is None,
            "_fitted_pairwise": state.fitted_pairwise,
            "_predictor": predictor,
            "certificate_": None,
            "_train_messages": None,
            "_train_layout": None,
            "_resume_iteration": iteration,
            "_validation_split": None,
            "transfer_": _transfer_frame(transfer),
            "n_partitions_": len(shards),
        })
        return self

    def score_sources(self, sources: Sequence[Callable[[], tuple]]) -> float:
        """Per-node accuracy of MAP predictions on partitions that the workers load (as
        :meth:`score` on all of them together); only two counts per partition come back.

        Parameters
        ----------
        sources : list of callables returning ``(X, Y)``
            Labels of ``classes_`` (coded on the workers).

        Returns
        -------
        float

        Raises
        ------
        ValueError
            For no sources: there is nothing to score.
        """
        self._check_fitted()
        if not sources:
            raise ValueError("sources must hold at least one partition to score")
        backend = Backend(_client())
        raw = [backend.submit(_shard.load_source, functools.partial(_coded_source, source, self.classes_))
               for source in sources]
        counts = backend.gather(backend.map(_shard.source_errors, raw, self._predictor, self.n_states_,
                                            self.unary_, self._fitted_pairwise_function()))
        return 1.0 - sum(c[0] for c in counts) / max(1, sum(c[1] for c in counts))

    def _check_supported(self, params: dict[str, Any]) -> None:
        for name, refused in (("warm_start", True), ("early_stopping", True), ("class_weight", "balanced"),
                              ("solver", "joint")):
            if params[name] is refused or (isinstance(refused, str) and params[name] == refused):
                raise ValueError(f"{name}={params[name]!r} is not supported by DaskStructuredLogisticRegression")
        if params["n_hidden_states"]:   # the shards know no states beyond the labels
            raise ValueError(f"n_hidden_states={params['n_hidden_states']} is not supported by "
                             f"DaskStructuredLogisticRegression")
        if params["allowed_transitions"] is not None:
            raise ValueError("allowed_transitions is not supported by DaskStructuredLogisticRegression")


def _transfer_frame(counters: list[tuple[int, int, int, int]]) -> pd.DataFrame:
    """Per iteration the traffic since the previous row."""
    frame = pd.DataFrame(counters, columns=["iteration", "bytes_sent", "bytes_received", "tasks"])
    frame[["bytes_sent", "bytes_received", "tasks"]] = frame[["bytes_sent", "bytes_received", "tasks"]].diff().fillna(
        frame[["bytes_sent", "bytes_received", "tasks"]]).astype(np.int64)
    return frame


def _signature() -> inspect.Signature:
    """The parent's signature with this class's own parameters: scikit-learn reads the parameters from it."""
    parent = inspect.signature(StructuredLogisticRegression.__init__)
    extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
             for name, default in (("n_partitions", None), ("checkpoint_dir", None), ("checkpoint_every", 10))]
    return parent.replace(parameters=[*parent.parameters.values(), *extra])


DaskStructuredLogisticRegression.__init__.__signature__ = _signature()
