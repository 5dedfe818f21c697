"""The LightGBM oracle fitted by LightGBM's own data-parallel training (``lightgbm.dask``), its rows
staying on the workers that hold their shards.

:class:`slr.oracles.LightGBM` hands LightGBM the gradients of the biased logistic loss with its
Hessians floored at :data:`~slr.oracles.lightgbm_adapter.HESSIAN_FLOOR`, and halves each round's
leaf values until the loss of the training rows does not rise (its module docstring says why
LightGBM's own ``multiclass`` objective fails on the learner's ``1 / eps`` biases). Distributed,
the bias goes in as LightGBM's ``init_score`` and the same floored gradients as a custom
objective, so every worker's LightGBM computes the adapter's gradients of its own rows. The
rounds run inside LightGBM's network training, out of the client's reach, so the halving moves to
the whole function: the fitted booster's leaf values are multiplied by the ``2**-j``
(``j <= MAX_HALVINGS``) that gives the lowest loss summed over the partitions. Whether the new
function lowers R at all is the learner's check (:class:`slr.distributed.learner._DistributedAlternation`
keeps the previous function when it does not), so R never rises.
"""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np
from scipy.special import logsumexp, softmax

from slr._optional import import_optional
from slr._params import validate_params
from slr.distributed import _shard
from slr.distributed._backend import Backend
from slr.oracles.lightgbm_adapter import HESSIAN_FLOOR, MAX_HALVINGS, LightGBM

__all__ = ["fit_lightgbm"]

#: the scales of the fitted function tried: 1, 1/2, ..., 2**-MAX_HALVINGS
SCALES = 0.5 ** np.arange(MAX_HALVINGS + 1)


def floored_softmax_objective(labels: np.ndarray, scores: np.ndarray,
                              weight: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The adapter's gradients for LightGBM's custom objective: ``scores`` are ``f + bias`` (the bias
    is the init score), the gradient ``w (softmax - onehot)``, the Hessian
    ``w max(K / (K - 1) p (1 - p), HESSIAN_FLOOR)``."""
    k = scores.shape[1]
    prob = softmax(scores, axis=1)
    hessian = np.maximum(k / (k - 1) * prob * (1.0 - prob), HESSIAN_FLOOR)
    grad = prob
    grad[np.arange(scores.shape[0]), labels.astype(np.int64)] -= 1.0
    if weight is not None:
        grad *= weight[:, None]
        hessian *= weight[:, None]
    return grad, hessian


def _tree_rows(shard: _shard.Shard, factor: str, epsilon: float) -> tuple[np.ndarray, ...]:
    """``factor``'s rows on the shard for LightGBM: features, dense bias, labels (float), weights."""
    features, bias, labels, weights = _shard._problem_arrays(shard, factor, epsilon)
    return (features, np.asarray(bias, dtype=np.float64), labels.astype(np.float64),
            np.ones(features.shape[0]) if weights is None else weights)


def _scaled_losses(shard: _shard.Shard, factor: str, epsilon: float, booster: Any) -> np.ndarray:
    """The shard's biased loss of ``s * f`` for every scale ``s`` of :data:`SCALES` (``f`` the booster's
    scores of its rows)."""
    features, bias, labels, weights = _tree_rows(shard, factor, epsilon)
    scores = np.asarray(booster.predict(features, raw_score=True), dtype=np.float64).reshape(bias.shape)
    rows = np.arange(bias.shape[0])
    labels = labels.astype(np.int64)
    losses = np.empty(SCALES.shape[0])
    for j, scale in enumerate(SCALES):
        z = scale * scores + bias
        losses[j] = float(weights @ (logsumexp(z, axis=1) - z[rows, labels]))
    return losses


def _scale_leaves(booster: Any, scale: float) -> None:
    """Multiply every leaf value of ``booster`` by ``scale`` (a power of two: exact)."""
    for tree in booster.dump_model()["tree_info"]:
        index = tree["tree_index"]
        for leaf in range(tree["num_leaves"]):
            booster.set_leaf_output(index, leaf, scale * booster.get_leaf_output(index, leaf))


def fit_lightgbm(oracle: LightGBM, backend: Backend, shards: Sequence[Any], rows: Sequence[int], factor: str,
                 epsilon: float, n_classes: int, n_features: int) -> None:
    """Fit ``oracle`` in place on ``factor``'s rows of all the shards with ``lightgbm.dask``.

    Parameters
    ----------
    oracle : slr.oracles.LightGBM
        Its parameters give LightGBM's (:meth:`~slr.oracles.LightGBM.lightgbm_params`); it ends
        with ``booster_`` set as a local fit would.
    backend : Backend
    shards : list of futures of Shard
    rows : list of int
        ``factor``'s rows on each shard.
    factor : {"unary", "pairwise"}
    epsilon : float
    n_classes, n_features : int
    """
    lightgbm_dask = import_optional("lightgbm.dask", "lightgbm", "the distributed LightGBM oracle")
    dask_array = import_optional("dask.array", "distributed", "the distributed LightGBM oracle")
    checked = validate_params(oracle)
    total = int(sum(rows))
    params = oracle.lightgbm_params(total, n_classes)
    params.pop("objective")
    params.pop("num_threads")   # lightgbm.dask gives each worker its threads
    params["metric"] = "None"   # the regressor's default metric (l2) refuses num_class > 1
    n_rounds = checked["n_rounds"]
    oracle.n_classes_, oracle.n_features_in_ = n_classes, n_features
    oracle.booster_, oracle.constant_, oracle.n_halvings_ = None, np.zeros(n_classes), 0
    if n_classes == 1 or n_rounds == 0:
        return
    parts = backend.map(_tree_rows, shards, factor, epsilon)
    widths = (n_features, n_classes, None, None)
    columns = []
    for i, width in enumerate(widths):
        pieces = [dask_array.from_delayed(backend.client.submit(operator.getitem, part, i, pure=False),
                                          shape=(n,) if width is None else (n, width), dtype=np.float64)
                  for part, n in zip(parts, rows) if n]
        columns.append(dask_array.concatenate(pieces))
    features, bias, labels, weights = columns
    model = lightgbm_dask.DaskLGBMRegressor(client=backend.client, objective=floored_softmax_objective,
                                            n_estimators=n_rounds, **params)
    model.fit(features, labels, sample_weight=weights, init_score=bias)
    booster = model.booster_
    losses = np.sum(backend.gather(backend.map(_scaled_losses, shards, factor, epsilon, booster)), axis=0)
    best = int(np.argmin(losses))   # the first of equal losses: the largest scale
    if best:
        _scale_leaves(booster, float(SCALES[best]))
        oracle.n_halvings_ = best
    oracle.booster_ = booster
