"""LightGBM's multiclass gradient boosting as a logistic oracle (reference for ``BoostedTrees``).

The biased problem maps onto LightGBM directly: the bias ``b`` is the Dataset's
``init_score``. LightGBM 4.x stores a multiclass init score class-major (entry
``k * N + i`` is row ``i``, class ``k``; a 2-D array is flattened with
``ravel(order="F")`` by the Python package), does not boost from the average when an
init score is given, and leaves the init score out of ``predict(raw_score=True)``,
so the raw prediction is exactly the learned ``f(x, y)``.

Row weights are the Dataset's ``weight``. Soft targets go through a custom objective (a
callable ``objective``, which LightGBM 4 calls with the training scores *including* the init
score): LightGBM's ``multiclass`` objective takes integer labels only, and expanding each row
into K weighted one-hot rows would multiply the data by K (676 pair classes on letters) and
change what ``min_data_in_leaf`` counts. The custom objective returns what ``multiclass``
computes, with the target in place of the one-hot label: gradient ``w (p - q)`` and Hessian
``w K / (K - 1) p (1 - p)``.
"""
from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np

from slr._optional import import_optional
from slr._params import DEPRECATED, Integer, NJobs, RandomState, Real, Satisfies, resolve_renamed, validate_params
from slr.inference.batch import resolve_threads
from slr.oracles.base import LogisticOracle
from slr.oracles.trees import BoostedTrees, Subsample, fraction_to_rows, resolve_subsample
from slr.validation import C_INT_MAX, check_generator

__all__ = ["LightGBM"]


class LightGBM(LogisticOracle):
    """Boosted trees through LightGBM's ``multiclass`` objective, bias as ``init_score``.

    Every :meth:`fit` trains a new booster from ``f = 0`` (like :class:`BoostedTrees`
    with ``warm_start=False``). LightGBM grows one tree per class and round (K trees),
    with second-order leaf values, histogram splits and best-first growth.

    Where no split is possible (no feature columns, or none that varies) LightGBM
    cannot boost: it stops after one round of zero-valued root leaves. The adapter then
    returns what :class:`BoostedTrees` returns there, with the same rounds, step,
    subsample, leaf ridge and seed: single-leaf trees re-fitted by Newton's method,
    i.e. a per-class constant fitted to the bias (``constant_``).

    The parameters shared with :class:`BoostedTrees` have its names (LightGBM's own in
    brackets).

    Parameters
    ----------
    n_rounds : int, default=200
        Boosting rounds (``num_boost_round``).
    learning_rate : float, default=0.25
        Shrinkage (the chapter's step).
    max_leaf_nodes : int, default=31
        Maximum leaves per tree (``num_leaves``; formerly this parameter's name too).
    subsample : int or float, default=10000
        Rows per round (LightGBM bagging with ``bagging_freq=1``): an int is a count, a
        float in (0, 1] a fraction.
    min_leaf_fraction : float, default=0.01
        ``min_data_in_leaf = ceil(min_leaf_fraction * n_sub)``.
    max_bin : int, default=255
        Histogram bins per feature.
    l2_regularization : float, default=0.0
        L2 penalty on the leaf values (``lambda_l2``; formerly this parameter's name too).
    n_jobs : int or None, default=1
        Threads (``num_threads``); ``None`` or ``-1``: all cores.
    random_state : None, int or numpy.random.Generator, default=None
        Seed of the bagging: a non-negative int (taken modulo ``2**31 - 1``), a
        Generator to draw it from, or ``None`` to draw it from fresh entropy.
    params : dict or None, default=None
        Extra LightGBM parameters, applied last (they override the above).
    num_leaves, lambda_l2 : deprecated
        The former names of ``max_leaf_nodes`` and ``l2_regularization``; a value given
        under them is used with a FutureWarning. They will be removed in 0.3.

    Attributes
    ----------
    booster_ : lightgbm.Booster or None
        The trained booster; ``None`` when the function is the constant ``constant_``
        (``K == 1``, ``n_rounds == 0`` or no possible split).
    constant_ : ndarray of shape (K,)
        The scores of every row when ``booster_`` is None (zeros unless no split was
        possible).
    """

    _parameter_constraints = {
        "n_rounds": Integer(0, None),
        "learning_rate": Real(0.0, low_open=True),
        "max_leaf_nodes": Integer(2),
        "subsample": Subsample(),
        "min_leaf_fraction": Real(0.0, 0.5),
        "max_bin": Integer(2),
        "l2_regularization": Real(0.0),
        "n_jobs": NJobs(),
        "random_state": RandomState(),
        "params": (None, Satisfies(lambda value: isinstance(value, dict), "a dict")),
        "num_leaves": Integer(2),
        "lambda_l2": Real(0.0),
    }
    _renamed_parameters = {"num_leaves": "max_leaf_nodes", "lambda_l2": "l2_regularization"}

    def __init__(
        self,
        n_rounds: int = 200,
        learning_rate: float = 0.25,
        max_leaf_nodes: int = 31,
        subsample: int | float = 10000,
        min_leaf_fraction: float = 0.01,
        max_bin: int = 255,
        l2_regularization: float = 0.0,
        n_jobs: int | None = 1,
        random_state: int | None = None,
        params: dict | None = None,
        num_leaves: Any = DEPRECATED,
        lambda_l2: Any = DEPRECATED,
    ) -> None:
        self.n_rounds = n_rounds
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.subsample = subsample
        self.min_leaf_fraction = min_leaf_fraction
        self.max_bin = max_bin
        self.l2_regularization = l2_regularization
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.params = params
        self.num_leaves = num_leaves
        self.lambda_l2 = lambda_l2

    def lightgbm_params(self, n_rows: int, n_classes: int) -> dict:
        """The LightGBM parameter dict used for a problem of ``n_rows`` x ``n_classes``."""
        checked = validate_params(self)
        for old, new in self._renamed_parameters.items():
            resolve_renamed(checked, old, new)
        return self._lightgbm_params(checked, n_rows, n_classes)

    @staticmethod
    def _lightgbm_params(checked: dict[str, Any], n_rows: int, n_classes: int) -> dict:
        n_sub = resolve_subsample(checked["subsample"], n_rows)
        random_state = checked["random_state"]
        if isinstance(random_state, Integral):
            seed = random_state % C_INT_MAX
        else:
            seed = int(check_generator(random_state).integers(0, C_INT_MAX))
        params = {
            "objective": "multiclass",
            "num_class": n_classes,
            "learning_rate": checked["learning_rate"],
            "num_leaves": checked["max_leaf_nodes"],
            "min_data_in_leaf": fraction_to_rows(checked["min_leaf_fraction"], n_sub, 1),
            "max_bin": checked["max_bin"],
            "lambda_l2": checked["l2_regularization"],
            "num_threads": resolve_threads(checked["n_jobs"]),
            "seed": seed,
            "deterministic": True,
            "force_col_wise": True,
            "verbosity": -1,
        }
        if n_sub < n_rows:
            params.update(bagging_fraction=n_sub / n_rows, bagging_freq=1, bagging_seed=seed)
        if checked["params"] is not None:
            params.update(checked["params"])
        return params

    def _fit(self, features: np.ndarray, bias: np.ndarray, labels: np.ndarray,
             sample_weight: np.ndarray | None, checked: dict[str, Any]) -> None:
        lightgbm = import_optional("lightgbm", "lightgbm", "the LightGBM oracle")
        n, k = bias.shape
        if n < 2:
            raise ValueError(f"LightGBM needs at least 2 rows in features, got {n}")
        n_rounds = checked["n_rounds"]
        params = self._lightgbm_params(checked, n, k)
        self.booster_ = None
        self.constant_ = np.zeros(k)
        if k == 1 or n_rounds == 0:
            return
        dataset_labels = labels
        if labels.ndim == 2:
            params["objective"] = _soft_target_objective(labels, sample_weight)
            dataset_labels = labels.argmax(axis=1)   # not read by the custom objective
        if features.shape[1] > 0:  # LightGBM refuses a dataset without feature columns
            dataset = lightgbm.Dataset(
                features,
                label=dataset_labels,
                weight=sample_weight,
                init_score=bias.ravel(order="F"),  # class-major, see the module docstring
                params={"max_bin": params["max_bin"], "verbosity": -1},
                free_raw_data=True,
            )
            booster = lightgbm.train(params, dataset, num_boost_round=n_rounds)
            if not _stopped_without_split(booster):
                self.booster_ = booster
                return
        single_leaves = BoostedTrees(
            n_rounds=n_rounds,
            learning_rate=params["learning_rate"],
            subsample=checked["subsample"],
            l2_regularization=params["lambda_l2"],
            random_state=params["seed"],
        ).fit(np.empty((n, 0)), bias, labels, sample_weight)
        self.constant_ = single_leaves.decision_function(np.empty((1, 0)))[0]

    def decision_function(self, features: Any) -> np.ndarray:
        """Raw scores ``f(x, y)`` of shape (N, K), without the bias."""
        features = self._check_features(features)
        if self.booster_ is None or features.shape[0] == 0:
            return np.tile(self.constant_, (features.shape[0], 1))
        scores = self.booster_.predict(
            features, raw_score=True, num_threads=resolve_threads(self.n_jobs)
        )
        return np.asarray(scores, dtype=np.float64).reshape(features.shape[0], self.n_classes_)


def _soft_target_objective(targets: np.ndarray, sample_weight: np.ndarray | None):
    """LightGBM's multiclass gradient and Hessian for soft ``targets`` (N, K), as a custom
    objective (see the module docstring); LightGBM does not weight a custom objective's
    output, so the weights are applied here."""
    factor = targets.shape[1] / (targets.shape[1] - 1.0)

    def objective(scores: np.ndarray, dataset: Any) -> tuple[np.ndarray, np.ndarray]:
        probabilities = np.exp(scores - scores.max(axis=1, keepdims=True))
        probabilities /= probabilities.sum(axis=1, keepdims=True)
        grad = probabilities - targets
        hess = factor * probabilities * (1.0 - probabilities)
        if sample_weight is not None:
            grad *= sample_weight[:, None]
            hess *= sample_weight[:, None]
        return grad, hess

    return objective


def _stopped_without_split(booster: Any) -> bool:
    """Whether LightGBM stopped in its first round because no tree could split.

    It then holds one round of single-leaf trees whose value is zero (with an init
    score LightGBM does not fit a root leaf), i.e. the zero function.
    """
    if booster.current_iteration() > 1:
        return False
    return all(tree["num_leaves"] == 1 for tree in booster.dump_model()["tree_info"])
