"""The LightGBM oracle fitted by LightGBM's own data-parallel training (``lightgbm.dask``), its rows
staying on the workers that hold their shards, with the single-process adapter's protocol.

:class:`slr.oracles.LightGBM` hands LightGBM the gradients of the biased logistic loss with its
Hessians floored at :data:`~slr.oracles.lightgbm_adapter.HESSIAN_FLOOR`, halves each round's leaf
values until the loss of the training rows does not rise, and boosts on from the function it
replaces when a fit from ``f = 0`` would end above it (its module docstring and Notes say why).
Distributed, the same protocol runs inside one ``lightgbm.dask`` training per fit:

- where the rows lie on several workers, every worker gets the bins the adapter's LightGBM finds
  on all rows (:mod:`slr.distributed._bins`), not each feature's bins from one worker's rows;
- the start (``f = 0``, or the replaced function) plus the bias goes in as ``init_score``, and
  the gradients come from a custom objective, :class:`_GuardedObjective`, called by every
  worker's LightGBM once per round;
- the objective keeps its own scores of its rows (``f + bias``, LightGBM's record misses the
  halvings) and, at the start of each round, line-searches the previous round's step on them:
  each worker computes its loss at the ``2**-j`` scales (``j <= MAX_HALVINGS``), the workers
  exchange these 43 numbers through Dask ``Variable`` s and add them in the same order, so every
  worker takes the same scale (the adapter's: the largest whose loss summed over all rows does
  not exceed the loss before the round; none stops boosting);
- after the training the client multiplies each round's leaf values by its scale (read from the
  first worker's record) and line-searches the last round on the shards itself.

Only the trees (LightGBM's own traffic), a few numbers per round and the bins' summaries (at most
3 numbers per run, about 1,024 runs per feature and shard) cross the network. Whether the
new function lowers R at all stays the learner's check
(:class:`slr.distributed.learner._DistributedAlternation` keeps the previous function when it
does not), so R never rises.
"""
from __future__ import annotations

import uuid
import warnings
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp, softmax

from slr._optional import import_optional
from slr._params import validate_params
from slr.distributed import _bins, _shard
from slr.distributed._backend import Backend
from slr.oracles.lightgbm_adapter import HESSIAN_FLOOR, MAX_HALVINGS, LightGBM

__all__ = ["fit_lightgbm"]

#: the scales of a round's step tried: 1, 1/2, ..., 2**-MAX_HALVINGS
SCALES = 0.5 ** np.arange(MAX_HALVINGS + 1)

#: seconds a worker waits for the other workers' losses of a round before it gives up
EXCHANGE_TIMEOUT = 600.0


def _loss(z: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> float:
    """The weighted biased logistic loss of scores ``z = f + bias``."""
    return float(weights @ (logsumexp(z, axis=1) - z[np.arange(z.shape[0]), labels]))


def step_losses(z: np.ndarray, step: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The loss at ``z``, then at ``z + s step`` for every ``s`` of :data:`SCALES`, then whether the
    step moves any row (1.0 or 0.0): one worker's part of a round's line search."""
    losses = [_loss(z, labels, weights)] + [_loss(z + scale * step, labels, weights) for scale in SCALES]
    return np.array([*losses, float(np.any(step != 0.0))])


def choose_scale(totals: np.ndarray) -> float | None:
    """The round's scale from :func:`step_losses` summed over all rows: the largest of
    :data:`SCALES` whose loss does not exceed the loss before the round, 0.0 if none does, and None
    if the step moves no row (LightGBM dropped the round: it could not split)."""
    if totals[-1] == 0.0:
        return None
    accepted = np.flatnonzero(totals[1:-1] <= totals[0])
    return float(SCALES[accepted[0]]) if accepted.size else 0.0


def _halvings(scales: Sequence[float]) -> int:
    """How often the adapter halves to reach ``scales`` (a rejected round: every halving tried)."""
    return sum(MAX_HALVINGS + 1 if scale == 0.0 else int(round(-np.log2(scale))) for scale in scales)


class _GuardedObjective:
    """The custom objective of one fit, run by every worker's LightGBM at the start of each round.

    LightGBM passes its own record of the scores (``init_score`` plus the unscaled trees); the
    difference from the last call is the last round's step. The objective line-searches it with
    the other workers (:func:`choose_scale` of the summed :func:`step_losses`), moves its own
    scores by the scale found, and returns the adapter's gradients at those scores. After a round
    no scale accepts (or that LightGBM dropped) it returns zero gradients: no tree can split, so
    LightGBM adds no more rounds.

    Parameters
    ----------
    name : str
        The fit's prefix of Dask Variable names.
    holders : list of str
        The addresses of the workers that hold rows, in the order their losses are added.
    rows : dict
        The number of rows each holder must see.
    """

    def __init__(self, name: str, holders: list[str], rows: dict[str, int]) -> None:
        self.name, self.holders, self.rows = name, holders, rows
        self.z: np.ndarray | None = None
        self.previous: np.ndarray | None = None
        self.scales: list[float] = []
        self.stopped = False
        self.round = 0

    def __call__(self, labels: np.ndarray, scores: np.ndarray,
                 weight: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        distributed = import_optional("distributed", "distributed", "the distributed LightGBM oracle")
        scores = np.array(scores, dtype=np.float64)   # a copy: LightGBM updates its buffer in place
        labels = labels.astype(np.int64)
        weights = np.ones(labels.shape[0]) if weight is None else np.asarray(weight, dtype=np.float64)
        worker = distributed.get_worker()
        if self.z is None:
            if self.rows.get(worker.address) != labels.shape[0]:
                raise ValueError(f"lightgbm.dask gave worker {worker.address} {labels.shape[0]} rows, its shards "
                                 f"hold {self.rows.get(worker.address, 0)}")
            self.z = scores.copy()
        elif not self.stopped:
            step = scores - self.previous
            totals = self._exchange(worker, step_losses(self.z, step, labels, weights))
            scale = choose_scale(totals)
            if scale is None or scale == 0.0:
                self.stopped = True
            if scale is not None:
                self.scales.append(scale)
                self.z = self.z + scale * step
        self.previous = scores
        if worker.address == self.holders[0]:
            distributed.Variable(f"{self.name}/state", client=worker.client).set(
                {"scales": list(self.scales), "stopped": self.stopped})
        self.round += 1
        k = scores.shape[1]
        if self.stopped:
            return np.zeros_like(scores), np.full_like(scores, HESSIAN_FLOOR)
        prob = softmax(self.z, axis=1)
        hessian = np.maximum(k / (k - 1) * prob * (1.0 - prob), HESSIAN_FLOOR) * weights[:, None]
        grad = prob
        grad[np.arange(labels.shape[0]), labels] -= 1.0
        return grad * weights[:, None], hessian

    def _exchange(self, worker: Any, values: np.ndarray) -> np.ndarray:
        """``values`` summed over the holders, in their order (the same sum on every worker)."""
        distributed = import_optional("distributed", "distributed", "the distributed LightGBM oracle")
        distributed.Variable(f"{self.name}/{self.round}/{worker.address}", client=worker.client).set(
            [float(v) for v in values])
        total = np.zeros(values.shape[0])
        for address in self.holders:
            total += np.asarray(distributed.Variable(f"{self.name}/{self.round}/{address}", client=worker.client)
                                .get(timeout=EXCHANGE_TIMEOUT))
        return total


# ------------------------------------------------------------------ tasks on the shards
def _start_scores(features: np.ndarray, n_classes: int, start: LightGBM | None) -> np.ndarray:
    return np.zeros((features.shape[0], n_classes)) if start is None else start.decision_function(features)


def _tree_rows(shard: _shard.Shard, factor: str, epsilon: float, n_classes: int,
               start: LightGBM | None) -> tuple[np.ndarray, ...]:
    """``factor``'s rows on the shard for LightGBM: features, ``start``'s scores plus the bias (the
    init score), labels (float) and weights."""
    features, bias, labels, weights = _shard._problem_arrays(shard, factor, epsilon)
    init = _start_scores(features, n_classes, start) + np.asarray(bias, dtype=np.float64)
    return (features, init, labels.astype(np.float64),
            np.ones(features.shape[0]) if weights is None else weights)


def _piece(rows: tuple[Any, ...], i: int) -> Any:
    """Item ``i`` of :func:`_tree_rows`' result, sparse features as the ``scipy.sparse`` matrix that
    ``lightgbm.dask`` concatenates (it takes no sparse arrays)."""
    return sp.csr_matrix(rows[i]) if sp.issparse(rows[i]) else rows[i]


def _losses(shard: _shard.Shard, factor: str, epsilon: float, n_classes: int,
            functions: Sequence[LightGBM | None]) -> np.ndarray:
    """The shard's biased loss of each of ``functions`` (None: ``f = 0``)."""
    features, bias, labels, weights = _tree_rows(shard, factor, epsilon, n_classes, None)
    labels = labels.astype(np.int64)
    return np.array([_loss(_start_scores(features, n_classes, f) + bias, labels, weights) for f in functions])


def _last_round_losses(shard: _shard.Shard, factor: str, epsilon: float, n_classes: int, start: LightGBM | None,
                       booster: Any) -> np.ndarray:
    """:func:`step_losses` of ``booster``'s last round on the shard (its earlier rounds scaled)."""
    features, z, labels, weights = _tree_rows(shard, factor, epsilon, n_classes, start)
    last = booster.current_iteration() - 1
    shape = (features.shape[0], n_classes)
    if last:
        z = z + np.asarray(booster.predict(features, num_iteration=last, raw_score=True),
                           dtype=np.float64).reshape(shape)
    step = np.asarray(booster.predict(features, start_iteration=last, num_iteration=1, raw_score=True),
                      dtype=np.float64).reshape(shape)
    return step_losses(z, step, labels.astype(np.int64), weights)


def _scale_round(booster: Any, r: int, scale: float) -> None:
    """Multiply the leaf values of round ``r``'s trees by ``scale`` (a power of two or 0: exact)."""
    for tree in booster.dump_model(start_iteration=r, num_iteration=1)["tree_info"]:
        index = tree["tree_index"]
        for leaf in range(tree["num_leaves"]):
            booster.set_leaf_output(index, leaf, scale * booster.get_leaf_output(index, leaf))


# ------------------------------------------------------------------ the client
class _Boosting:
    """One guarded ``lightgbm.dask`` training on the shards' rows from a start function."""

    def __init__(self, backend: Backend, shards: Sequence[Any], rows: Sequence[int], factor: str, epsilon: float,
                 n_classes: int, n_features: int, params: dict, n_rounds: int) -> None:
        self.backend, self.shards, self.rows, self.factor = backend, shards, rows, factor
        self.epsilon, self.n_classes, self.n_features = epsilon, n_classes, n_features
        self.params, self.n_rounds = params, n_rounds

    def run(self, start: LightGBM | None) -> tuple[Any, list[float]]:
        """The booster of the rounds boosted on from ``start`` (None: ``f = 0``), its leaves scaled,
        and the rounds' scales (a 0 ends them)."""
        lightgbm_dask = import_optional("lightgbm.dask", "lightgbm", "the distributed LightGBM oracle")
        dask_array = import_optional("dask.array", "distributed", "the distributed LightGBM oracle")
        distributed = import_optional("distributed", "distributed", "the distributed LightGBM oracle")
        client = self.backend.client
        parts = self.backend.map(_tree_rows, self.shards, self.factor, self.epsilon, self.n_classes, start)
        distributed.wait(parts)
        holders: dict[str, int] = {}
        places = []
        for part, n in zip(parts, self.rows):
            if n:
                address = sorted(client.who_has([part])[part.key])[0]
                holders[address] = holders.get(address, 0) + n
                places.append((part, n, address))
        # each column's pieces pinned to the worker of their rows and in memory before lightgbm.dask
        # groups them (its grouping tasks then run there: idle workers steal nothing)
        widths = (self.n_features, self.n_classes, None, None)
        pieces = [[client.submit(_piece, part, i, pure=False, workers=[address], allow_other_workers=False)
                   for part, _, address in places] for i in range(len(widths))]
        distributed.wait([piece for column in pieces for piece in column])
        columns = [dask_array.concatenate([dask_array.from_delayed(piece, shape=(n,) if width is None else (n, width),
                                                                   dtype=np.float64)
                                           for piece, (_, n, _) in zip(column, places)])
                   for column, width in zip(pieces, widths)]
        features, init, labels, weights = columns
        name = f"slr-lightgbm-{uuid.uuid4().hex}"
        objective = _GuardedObjective(name, sorted(holders), holders)
        model = lightgbm_dask.DaskLGBMRegressor(client=client, objective=objective, n_estimators=self.n_rounds,
                                                **self.params)
        try:
            with warnings.catch_warnings():
                # the regressor hands lightgbm.dask its n_jobs=None, which it drops with a warning
                warnings.filterwarnings("ignore", "Parameter n_jobs will be ignored", UserWarning)
                model.fit(features, labels, sample_weight=weights, init_score=init)
            state = distributed.Variable(f"{name}/state", client=client).get(timeout=EXCHANGE_TIMEOUT)
        finally:
            self._forget(distributed, name, sorted(holders))
        booster, scales = model.booster_, list(state["scales"])
        n_trained = booster.current_iteration()
        for r in range(n_trained):
            scale = scales[r] if r < len(scales) else None
            if scale is not None and scale != 1.0:
                _scale_round(booster, r, scale)
        if not state["stopped"] and n_trained > len(scales):
            totals = np.sum(self.backend.gather(self.backend.map(
                _last_round_losses, self.shards, self.factor, self.epsilon, self.n_classes, start, booster)), axis=0)
            scale = choose_scale(totals)
            if scale is not None:
                scales.append(scale)
                if scale != 1.0:
                    _scale_round(booster, n_trained - 1, scale)
        return booster, scales

    def _forget(self, distributed: Any, name: str, holders: list[str]) -> None:
        """Delete the fit's Variables from the scheduler."""
        client = self.backend.client
        names = [f"{name}/state"] + [f"{name}/{r}/{a}" for r in range(1, self.n_rounds) for a in holders]
        for variable in names:
            distributed.Variable(variable, client=client).delete()


def fit_lightgbm(oracle: LightGBM, backend: Backend, shards: Sequence[Any], rows: Sequence[int], factor: str,
                 epsilon: float, n_classes: int, n_features: int) -> None:
    """Fit ``oracle`` in place on ``factor``'s rows of all the shards with ``lightgbm.dask``, as
    :meth:`slr.oracles.LightGBM.fit` would on all of them: every round guarded, and boosting on
    from the replaced function when the fit from ``f = 0`` ends above it.

    Parameters
    ----------
    oracle : slr.oracles.LightGBM
        Its parameters give LightGBM's (:meth:`~slr.oracles.LightGBM.lightgbm_params`); it ends
        with ``booster_``, ``base_boosters_``, ``constant_``, ``n_halvings_`` and ``continued_``
        set as a local fit would (no ``training_scores_``: the scores stay on the workers).
    backend : Backend
    shards : list of futures of Shard
    rows : list of int
        ``factor``'s rows on each shard.
    factor : {"unary", "pairwise"}
    epsilon : float
    n_classes, n_features : int
    """
    checked = validate_params(oracle)
    params = oracle.lightgbm_params(int(sum(rows)), n_classes)
    params.pop("objective")
    params.pop("num_threads")   # lightgbm.dask gives each worker its threads
    params["metric"] = "None"   # the regressor's default metric (l2) refuses num_class > 1
    for name in ("forcedbins_filename", "max_bin_by_feature"):
        if name in params:
            raise ValueError(f"params of the distributed LightGBM oracle cannot set {name!r}: it forces the bins "
                             "the single-process oracle would find")
    n_rounds = checked["n_rounds"]
    replaced = oracle if hasattr(oracle, "constant_") else None
    replaced_boosters = () if replaced is None else replaced._boosters()
    replaced_constant = np.zeros(n_classes) if replaced is None else replaced.constant_
    start_copy = None if replaced is None else _frozen(replaced)
    oracle.n_classes_, oracle.n_features_in_ = n_classes, n_features
    oracle.booster_, oracle.constant_, oracle.base_boosters_ = None, np.zeros(n_classes), ()
    oracle.n_halvings_, oracle.continued_ = 0, False
    if n_classes == 1 or n_rounds == 0:
        return
    holders = {sorted(backend.client.who_has([shard])[shard.key])[0] for shard, n in zip(shards, rows) if n}
    # on one worker LightGBM's own bins are the adapter's; on several, each feature's would be one worker's
    bins = _bins.find_bins(backend, shards, factor, n_features, params) if len(holders) > 1 else None
    with _bins.forced_bins(backend.client, bins) as forced:
        _boost(oracle, backend, shards, rows, factor, epsilon, n_classes, n_features, {**params, **forced},
               n_rounds, start_copy, replaced_boosters, replaced_constant)


def _boost(oracle: LightGBM, backend: Backend, shards: Sequence[Any], rows: Sequence[int], factor: str,
           epsilon: float, n_classes: int, n_features: int, params: dict, n_rounds: int, start_copy: LightGBM | None,
           replaced_boosters: tuple, replaced_constant: np.ndarray) -> None:
    """:func:`fit_lightgbm`'s trainings from ``f = 0`` and, where that ends above ``start_copy``, on from it."""
    boosting = _Boosting(backend, shards, rows, factor, epsilon, n_classes, n_features, params, n_rounds)
    booster, scales = boosting.run(None)
    oracle.booster_ = booster if any(scale > 0.0 for scale in scales) else None
    oracle.n_halvings_ = _halvings(scales)
    if start_copy is None:
        return
    new, reference = np.sum(backend.gather(backend.map(_losses, shards, factor, epsilon, n_classes,
                                                       [oracle, start_copy])), axis=0)
    if new <= reference:
        return
    booster, scales = boosting.run(start_copy)
    oracle.booster_ = booster if any(scale > 0.0 for scale in scales) else None
    oracle.n_halvings_ += _halvings(scales)
    oracle.base_boosters_, oracle.constant_, oracle.continued_ = replaced_boosters, replaced_constant, True


def _frozen(oracle: LightGBM) -> LightGBM:
    """A fitted oracle's function, detached from ``oracle`` (which the fit overwrites)."""
    copy = LightGBM(**oracle.get_params())
    copy.n_classes_, copy.n_features_in_ = oracle.n_classes_, oracle.n_features_in_
    copy.booster_, copy.base_boosters_ = oracle.booster_, tuple(getattr(oracle, "base_boosters_", ()))
    copy.constant_ = oracle.constant_
    return copy
