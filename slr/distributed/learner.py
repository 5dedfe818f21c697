"""Algorithm 1.1 data-parallel on a Dask cluster.

The training examples are split into partitions once; each partition's examples, messages and
potentials live on one worker as a :class:`slr.distributed._shard.Shard` and never move. The fit is
the single-process learner's (:meth:`slr.learner.StructuredLogisticRegression._run`: the half steps,
the stopping rule, early stopping, callbacks, warm start) on the fit loop's data interface
implemented by tasks on the shards (:class:`slr.distributed._sharded_data.ShardedData`).

A worker that dies takes its shards with it; Dask recomputes them from their lineage (the
partition's source and the tasks since, all deterministic), so the fit goes on to the same result.
"""
from __future__ import annotations

import functools
import inspect
import os
from typing import Any, Callable, Sequence

import numpy as np

from slr._optional import import_optional
from slr._params import Integer, Satisfies
from slr._prediction import prediction_model
from slr._progress import early_stopping
from slr._setup import FitStart, check_held_out_labelled, checked_data, untimed
from slr.data import FlatData, check_widths
from slr.distributed import _shard
from slr.distributed._backend import Backend
from slr.distributed._oracles import supported
from slr.distributed._sharded_data import Layout, ShardedData
from slr.estimator import FitHistory, validation_data
from slr.labels import check_class_count, encode_class_weight, encode_labels, fit_labels
from slr.learner import StructuredLogisticRegression
from slr.models import check_example_weights, class_weights
from slr.oracles.lightgbm_adapter import LightGBM

__all__ = ["DaskStructuredLogisticRegression"]

# the first targets of unlabelled nodes each partition can set alone, as the single-process learner would
_LOCAL_LATENT_INIT = ("neighbours", "uniform")


def _check_checkpoint_dir(directory: Any) -> None:
    """Refuse a ``checkpoint_dir`` that is not a writable directory before the fit starts (as seen
    from the client; the workers must see the same directory)."""
    if directory is None:
        return
    path = os.fspath(directory)
    if not os.path.isdir(path) or not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"checkpoint_dir={path!r} is not a writable directory")


def _check_descriptions(descriptions: list[dict], params: dict[str, Any], start: FitStart) -> None:
    """Refuse what the partitions hold together and the fit cannot take: weights that are all 0;
    unlabelled nodes with a ``latent_init`` that looks across partitions, a tree oracle (it fits
    hard labels only) or a continued fit (the targets would start afresh)."""
    if not sum(d["weight_sum"] for d in descriptions) > 0:
        raise ValueError("sample_weight must have a positive sum (every example of every partition weighs 0)")
    unlabelled = sum(d["n_unlabelled"] for d in descriptions)
    if not unlabelled:
        return
    refusals = [(params["latent_init"] not in _LOCAL_LATENT_INIT,
                 (f"latent_init={params['latent_init']!r} (it needs all the unlabelled nodes in one place; "
                  f"use one of {_LOCAL_LATENT_INIT})")),
                (any(isinstance(oracle, LightGBM) for oracle in start.oracles.values()), "a LightGBM oracle"),
                (start.warm, "warm_start=True")]
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


def _as_validation(check: Callable[..., FlatData], X: Sequence, Y: Sequence, coded: bool) -> FlatData:
    """Validation data checked against the training layout, named ``X_val`` and ``Y_val``."""
    return validation_data(X, Y, lambda X, Y: check(X, Y, "X", coded))


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
        through ``lightgbm.dask`` on worker processes, :mod:`slr.distributed._lightgbm`);
        ``class_weight="balanced"``, ``n_hidden_states`` and ``allowed_transitions`` are not
        supported; unlabelled nodes are learnt as the single-process learner learns them, with
        ``latent_init`` ``"neighbours"`` or ``"uniform"`` and Linear or Constant oracles (and not
        continued by ``warm_start``); ``solver="auto"`` runs Algorithm 1.1 (``solver_`` is
        ``"alternation"``) and ``solver="joint"`` is refused. Callbacks, early stopping (on
        validation data the client holds) and ``warm_start`` work as for the single-process learner:
        a continued fit on the same examples takes up the messages its partitions hold on the workers
        (the fitted model keeps those partitions alive while it lives; a pickled model forgets them
        and continues from zero messages).

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
    def fit(self, X: Sequence, Y: Sequence, X_val: Sequence | None = None, Y_val: Sequence | None = None,
            sample_weight: Any = None, callback: Callable | None = None) -> "DaskStructuredLogisticRegression":
        """Learn from data held by the client, split into ``n_partitions`` partitions.

        Parameters
        ----------
        X, Y : as for :meth:`slr.StructuredLogisticRegression.fit`
            Labels of any hashable type that sort (``classes_``), coded here before they are
            partitioned.
        X_val, Y_val : optional
            Validation data, kept and decoded by the client (see
            :meth:`slr.StructuredLogisticRegression.fit`); without them early stopping holds out
            ``validation_fraction`` of the examples of ``X`` before they are partitioned.
        sample_weight : array-like of shape (n_examples,), optional
        callback : callable, optional
            As for :meth:`slr.StructuredLogisticRegression.fit`; its :class:`slr.learner.Iterate`
            predicts on the client.

        Returns
        -------
        self
        """
        params = self._check_params()
        self._check_supported(params, callback)
        if len(X) != len(Y):
            raise ValueError(f"X and Y must have the same number of examples, got {len(X)} and {len(Y)}")
        start = self._start(params)
        if start is None:   # a continued fit with nothing left to do
            return self
        if start.warm:
            Y = encode_labels(Y, start.classes)
        else:
            Y, start.classes = fit_labels(Y, None)
        weights = check_example_weights(sample_weight, len(X))
        val = None if X_val is None else (X_val, Y_val, False)
        if (X_val is None) != (Y_val is None):
            raise ValueError("X_val and Y_val must be given together")
        early = early_stopping(params["early_stopping"], val is not None, tuple(start.oracles.values()), len(X),
                               params["validation_fraction"])
        split = None
        if early and val is None:   # hold out validation_fraction of the examples, their labels coded
            split = self._hold_out(len(X), params["validation_fraction"], start.warm, start.rng)
            val = ([X[k] for k in split[1]], [Y[k] for k in split[1]], True)
            check_held_out_labelled(val[1], len(split[1]), params["validation_fraction"])
            X, Y = [X[k] for k in split[0]], [Y[k] for k in split[0]]
            weights = None if weights is None else weights[split[0]]
        n_partitions = self.n_partitions or len(_client().scheduler_info()["workers"])
        sources = [functools.partial(_in_memory_source, X[a:b], Y[a:b], None if weights is None else weights[a:b])
                   for a, b in _partition_bounds(len(X), n_partitions)]
        return self._fit_sources(sources, params, start, val, early, split, callback)

    def fit_sources(self, sources: Sequence[Callable[[], tuple]], X_val: Sequence | None = None,
                    Y_val: Sequence | None = None, callback: Callable | None = None
                    ) -> "DaskStructuredLogisticRegression":
        """Learn from partitions that each worker loads itself.

        Parameters
        ----------
        sources : list of callables
            One per partition: ``source()``, run on a worker, returns the partition's ``(X, Y)`` or
            ``(X, Y, sample_weight)`` (e.g. reading its files), with integer labels (``classes_``
            is then ``arange(n_states_)``). Sources must be picklable and deterministic: a
            partition lost with its worker is loaded again.
        X_val, Y_val : optional
            Validation data with integer labels, kept by the client (early stopping needs them here:
            no examples of the sources are held out).
        callback : callable, optional
            As for :meth:`fit`.

        Returns
        -------
        self
        """
        params = self._check_params()
        self._check_supported(params, callback)
        if (X_val is None) != (Y_val is None):
            raise ValueError("X_val and Y_val must be given together")
        if params["early_stopping"] is True and X_val is None:
            raise ValueError("early_stopping=True needs X_val and Y_val with fit_sources (no examples of the "
                             "sources are held out)")
        start = self._start(params)
        if start is None:
            return self
        val = None if X_val is None else (X_val, Y_val, False)
        early = val is not None and params["early_stopping"] is not False
        return self._fit_sources(sources, params, start, val, early, None, callback)

    def _fit_sources(self, sources: Sequence[Callable[[], tuple]], params: dict[str, Any], start: FitStart,
                     val: tuple | None, early: bool, split: tuple[np.ndarray, np.ndarray] | None,
                     callback: Callable | None) -> "DaskStructuredLogisticRegression":
        """The fit on sources whose labels code ``start.classes`` (None: integer labels); ``val``:
        ``(X_val, Y_val, coded)``, the labels in those codes already if ``coded``."""
        if not sources:
            raise ValueError("sources must hold at least one partition")
        _check_checkpoint_dir(params["checkpoint_dir"])
        for name, oracle in start.oracles.items():
            if not (supported(oracle) or isinstance(oracle, LightGBM)):
                raise ValueError(f"{name} must be an oracle linear in its parameters (Linear, Constant, Zero: "
                                 f"slr.oracles.linear_protocol.LinearInParameters) or LightGBM for "
                                 f"DaskStructuredLogisticRegression, got {type(oracle).__name__}")
        backend = Backend(_client())
        raw = [backend.submit(_shard.load_source, source) for source in sources]
        descriptions = backend.gather(backend.map(_shard.describe, raw))
        _check_descriptions(descriptions, params, start)
        n_states = self.n_states_ if start.warm else params["n_states"] or max(d["n_states"] for d in descriptions)
        check_class_count(start.classes, n_states)
        layout = Layout(descriptions, n_states)
        d_edge = layout.d_edge if layout.has_edges else None
        if start.warm:   # the widths the fitted functions take
            check_widths(layout, self.n_node_features_, self.n_edge_features_, "X")

        def check(X: Sequence, Y: Sequence | None, name: str = "X", coded: bool = False) -> FlatData:
            labels = None if Y is None else (Y if coded else encode_labels(Y, start.classes))
            return checked_data(X, labels, n_states, start.inferred, layout.d_node, d_edge, name,
                                allow_unlabelled=coded)

        checked_val = None if val is None else _as_validation(check, *val)
        class_weight = class_weights(encode_class_weight(params["class_weight"], start.classes),
                                     np.zeros(0, dtype=np.int64), n_states)
        partial = any(d["n_unlabelled"] for d in descriptions)
        latent = (params["epsilon"], params["max_sweeps"], params["latent_init"]) if partial else None
        shards = backend.map(_shard.build, raw, n_states, class_weight, layout.d_edge, latent)
        del raw
        predictor = prediction_model(params["epsilon"], params)
        timed = self._phase_timer or untimed
        history = FitHistory(None, checked_val)

        def rebuild(index: int, path: str, shard: Any, oracles: tuple[Any, Any | None]) -> Any:
            holders = backend.client.who_has([shard]).get(shard.key, ())
            return backend.client.submit(_shard.restore, sources[index], n_states, class_weight, layout.d_edge,
                                         latent, path, oracles, params["epsilon"], pure=False,
                                         workers=list(holders) or None, allow_other_workers=True)

        checkpoint = (None if params["checkpoint_dir"] is None
                      else (os.fspath(params["checkpoint_dir"]), params["checkpoint_every"], rebuild))
        data = ShardedData(backend, shards, layout, params["epsilon"], params["n_jobs"], timed, partial, checkpoint)
        resume = None if not start.warm else (self._kept_shards(backend, layout), self._fitted_pairwise)
        return self._run(params, start, data, history, predictor, resume=resume, early=early, class_weight=None,
                         callback=callback, train=None, check=check, shape=(n_states, layout.d_node, d_edge),
                         layout=layout.digest, split=split,
                         train_error=lambda: data.training_error(predictor))

    def _kept_shards(self, backend: Backend, layout: Layout) -> list[Any] | None:
        """The last fit's shards, if they hold these examples and live on this client still (their
        messages continue), else None (the messages start from zero)."""
        kept = self._train_messages
        if kept is None or self._train_layout != layout.digest:
            return None
        if any(future.client is not backend.client or future.status != "finished" for future in kept):
            return None
        return kept

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        if state.get("_train_messages") is not None:   # futures on a cluster: a loaded model starts from zero
            state["_train_messages"] = None
        return state

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

    def _check_supported(self, params: dict[str, Any], callback: Callable | None) -> None:
        if callback is not None and not callable(callback):
            raise ValueError(f"callback must be a callable taking an Iterate, or None, got {callback!r}")
        for name, refused in (("class_weight", "balanced"), ("solver", "joint")):
            if params[name] is refused or (isinstance(refused, str) and params[name] == refused):
                raise ValueError(f"{name}={params[name]!r} is not supported by DaskStructuredLogisticRegression")
        if params["n_hidden_states"]:   # the shards know no states beyond the labels
            raise ValueError(f"n_hidden_states={params['n_hidden_states']} is not supported by "
                             f"DaskStructuredLogisticRegression")
        if params["allowed_transitions"] is not None:
            raise ValueError("allowed_transitions is not supported by DaskStructuredLogisticRegression")


def _signature() -> inspect.Signature:
    """The parent's signature with this class's own parameters: scikit-learn reads the parameters from it."""
    parent = inspect.signature(StructuredLogisticRegression.__init__)
    extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
             for name, default in (("n_partitions", None), ("checkpoint_dir", None), ("checkpoint_every", 10))]
    return parent.replace(parameters=[*parent.parameters.values(), *extra])


# typeshed does not declare the __signature__ that inspect.signature reads on functions
DaskStructuredLogisticRegression.__init__.__signature__ = _signature()  # type: ignore[attr-defined]
