"""LightGBM's gradient-boosted trees as a logistic oracle (reference for ``BoostedTrees``).

LightGBM grows the trees; the adapter hands it the gradients and Hessians of the biased
logistic loss, keeps the scores ``f`` of the training rows itself and makes every round
lower that loss. Two things of LightGBM's own ``multiclass`` objective (bias as
``init_score``) break on the structured learner's problems, whose biases scale as
``1 / eps``:

* **Newton leaves from vanishing Hessians.** A leaf's value is ``-G / H`` (times the learning
  rate), with ``H`` the sum of ``K / (K - 1) p (1 - p)`` over its rows. The learner's first
  unary problem at ``eps = .1`` puts a bias of 10 on every wrong label, so the true label has
  ``p = 1 / (1 + e^10) = 4.5e-5``: a leaf of 135 rows has ``H = .0123``, above LightGBM's
  ``min_sum_hessian_in_leaf`` (1e-3), and the value 2,713 (after the step .25) where the
  minimiser lies within about 10. The loss rose from 36,000 (``f = 0``) to 1,960,843, and R of
  4 denoising images of 30 x 30 from 4,565 to 2.0e5 after the first unary fit (3.2e7 later).
* **Hessians that vanish.** At ``eps = .01`` ``p (1 - p) ~ e^-100 = 4e-44`` (a subnormal in
  float32, LightGBM's type for gradients and Hessians): no leaf's Hessian sum comes near
  ``min_sum_hessian_in_leaf``, no tree splits, and the oracle falls back to a per-class
  constant: the whole model ends as a constant.

The init score is not at fault: without the floor below, the adapter's rounds are LightGBM's
own ``multiclass`` boosting with the bias as init score (the same loss, 3,296.9, on that first
unary problem at ``eps = 1``). The adapter therefore

1. floors every Hessian entry at :data:`HESSIAN_FLOOR` before LightGBM sees it, which bounds
   a leaf's value by ``learning_rate / HESSIAN_FLOOR`` (gradients lie in ``[-1, 1]``) and keeps
   the sums far inside float32; where the Hessians are larger the leaves are LightGBM's own;
2. evaluates the biased loss of the training rows after each round and halves the round's
   leaf values (``Booster.set_leaf_output``) until it does not exceed the loss before the
   round; a round that no halving (up to :data:`MAX_HALVINGS`) makes acceptable is removed and
   boosting stops there.

So the loss of a fit never exceeds that of ``f = 0``, and decreases round by round.

3. compares the fitted function's loss with that of the function it replaces (the last fit's,
   evaluated under the new bias): where a fit from ``f = 0`` ends above it, which raised the
   structured learner's R across a fit (by up to 42% at ``eps = .01`` on 2 denoising images),
   the adapter boosts on from the replaced function instead, with the same halvings, so the
   result is never worse than it (:class:`LightGBM`, Notes).

Row weights and soft targets (:mod:`slr.oracles.targets`) enter through the same gradients:
``w (p - q)`` and the Hessian ``w max(K / (K - 1) p (1 - p), HESSIAN_FLOOR)``, and the loss the
halving checks is the weighted soft loss (expanding rows into K weighted one-hot rows would
multiply the data by K, 676 pair classes on letters, and change what ``min_data_in_leaf`` counts).
"""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np
import scipy.sparse as sp

from slr._optional import import_optional
from slr._features import is_sparse
from slr._params import Integer, NJobs, RandomState, Real, Satisfies, validate_params
from slr.inference.batch import resolve_threads
from slr.oracles.base import LogisticOracle, OracleTags, biased_logistic_loss, rows_digest, softmax_loss
from slr.oracles.targets import is_soft
from slr.oracles.trees import BoostedTrees, Subsample, fraction_to_rows, resolve_subsample
from slr.validation import C_INT_MAX, check_generator

__all__ = ["HESSIAN_FLOOR", "LightGBM", "MAX_HALVINGS"]

#: Smallest Hessian entry handed to LightGBM (module docstring). Below it the Newton leaf
#: overshoots; the largest Hessian entry of the softmax loss is ``K / (4 (K - 1)) <= 1/2``.
HESSIAN_FLOOR = 0.05

#: Halvings of a round's leaf values tried before the round is dropped and boosting stops.
MAX_HALVINGS = 40


@dataclass(frozen=True)
class _Function:
    """A fitted LightGBM oracle's function: ``constant`` plus the sum of ``boosters``, and its
    ``scores`` on the rows of a fit."""

    scores: np.ndarray
    boosters: tuple
    constant: np.ndarray


class LightGBM(LogisticOracle):
    """Boosted trees grown by LightGBM on the biased logistic loss, every round made to lower it.

    Every :meth:`fit` trains a new booster from ``f = 0`` (like :class:`BoostedTrees`
    with ``warm_start=False``; see Notes for the one exception). LightGBM grows one tree
    per class and round (K trees), with histogram splits and best-first growth, and
    second-order leaf values from the softmax loss's gradients and Hessians, the Hessians
    floored at :data:`HESSIAN_FLOOR`; a round whose trees would raise the loss of the
    training rows has its leaf values halved until they do not (module docstring: why
    LightGBM's own ``multiclass`` objective with the bias as ``init_score`` fails on the
    structured learner's biases). The loss of the fitted function is therefore never above
    that of ``f = 0``, nor above that of the function it replaces (Notes).

    Where no split is possible (no feature columns, or none that varies) LightGBM
    cannot boost: it stops after one round of single-leaf trees. The adapter then
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
        Maximum leaves per tree (LightGBM's ``num_leaves``).
    subsample : int or float, default=10000
        Rows per round (LightGBM bagging with ``bagging_freq=1``): an int is a count, a
        float in (0, 1] a fraction.
    min_leaf_fraction : float, default=0.01
        ``min_data_in_leaf = ceil(min_leaf_fraction * n_sub)``.
    max_bin : int, default=255
        Histogram bins per feature.
    l2_regularization : float, default=0.0
        L2 penalty on the leaf values (LightGBM's ``lambda_l2``).
    n_jobs : int or None, default=1
        Threads (``num_threads``); ``None`` or ``-1``: all cores.
    random_state : None, int or numpy.random.Generator, default=None
        Seed of the bagging: a non-negative int (taken modulo ``2**31 - 1``), a
        Generator to draw it from, or ``None`` to draw it from fresh entropy.
    params : dict or None, default=None
        Extra LightGBM parameters, applied last (they override the above, but not
        ``objective``, which is the adapter's own, nor ``num_class``).

    Attributes
    ----------
    booster_ : lightgbm.Booster or None
        The trained booster; ``None`` when the function is the constant ``constant_``
        (``K == 1``, ``n_rounds == 0`` or no possible split).
    constant_ : ndarray of shape (K,)
        The scores of every row when ``booster_`` is None (zeros unless no split was
        possible).
    n_halvings_ : int
        How often the last fit halved a round's leaf values to keep the loss from rising.
    base_boosters_ : tuple of lightgbm.Booster
        The boosters of the function the last fit boosted on from (empty unless it did: Notes);
        the function is ``constant_`` plus their scores plus ``booster_``'s.
    continued_ : bool
        Whether the last fit boosted on from the function it replaced (Notes).
    training_scores_ : ndarray of shape (N, K)
        :meth:`decision_function` of the rows of the last fit (the oracle's tags declare
        ``training_scores``). Not pickled.

    Notes
    -----
    **A fit never ends above the function it replaces.** The structured learner fits the
    oracle again for every new bias; R falls at a fit only if the new function's loss is at
    most that of the replaced one under the new bias. A fit from ``f = 0`` with its rounds
    halved never ends above ``f = 0``, but can end above the replaced function. After the fit
    from ``f = 0``, :meth:`fit` therefore compares the two losses (the replaced function's
    scores are ``training_scores_`` when the rows are those of the last fit); where the new
    one is larger, it discards the new booster and boosts ``n_rounds`` rounds on from the
    replaced function's scores, each round halved until the loss does not rise: the result is
    never worse than the replaced function, and in general better. Its function is then the
    replaced one's (``base_boosters_``, ``constant_``) plus the new ``booster_``, so it grows at
    every continued fit. Where no split is possible the per-class constant (fitted as described
    above) is compared with the replaced function in the same way; a constant that would rise
    is re-fitted from the replaced constant by :class:`BoostedTrees`' own guarded rounds (or,
    where the replaced function is not a constant, the replaced function is kept). Where the
    fit from ``f = 0`` does not rise, nothing of it changes.
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
    }

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

    def __slr_tags__(self) -> OracleTags:
        return OracleTags(training_scores=True, sparse_features=True)

    def lightgbm_params(self, n_rows: int, n_classes: int) -> dict:
        """The LightGBM parameter dict used for a problem of ``n_rows`` x ``n_classes``."""
        return self._lightgbm_params(validate_params(self), n_rows, n_classes)

    @staticmethod
    def _lightgbm_params(checked: dict[str, Any], n_rows: int, n_classes: int) -> dict:
        n_sub = resolve_subsample(checked["subsample"], n_rows)
        random_state = checked["random_state"]
        if isinstance(random_state, Integral):
            seed = random_state % C_INT_MAX
        else:
            seed = int(check_generator(random_state).integers(0, C_INT_MAX))
        params = {
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
        params.update(objective="none", num_class=n_classes)  # the gradients are the adapter's
        return params

    def _fit(self, features: np.ndarray, bias: np.ndarray, labels: np.ndarray,
             sample_weight: np.ndarray | None, checked: dict[str, Any]) -> None:
        lightgbm = import_optional("lightgbm", "lightgbm", "the LightGBM oracle")
        n, k = bias.shape
        if n < 2:
            raise ValueError(f"LightGBM needs at least 2 rows in features, got {n}")
        n_rounds = checked["n_rounds"]
        params = self._lightgbm_params(checked, n, k)
        replaced = self._replaced_function(features, k)
        self.booster_ = None
        self.constant_ = np.zeros(k)
        self.base_boosters_ = ()
        self.n_halvings_ = 0
        self.continued_ = False
        scores = None
        if k > 1 and n_rounds > 0:
            scores = self._boost(lightgbm, features, bias, labels, sample_weight, checked, params, replaced)
        self.training_scores_ = self.decision_function(features) if scores is None else scores
        self._training_digest_ = rows_digest(features)

    def _boost(self, lightgbm: Any, features: np.ndarray, bias: np.ndarray, labels: np.ndarray,
               sample_weight: np.ndarray | None, checked: dict[str, Any], params: dict,
               replaced: _Function) -> np.ndarray | None:
        """Boost from ``f = 0``; where that ends above the replaced function's loss, boost on from
        the replaced function instead (class Notes). Returns the fitted function's scores of
        ``features`` where it has computed them."""
        n, k = bias.shape
        n_rounds = checked["n_rounds"]
        reference = biased_logistic_loss(replaced.scores, bias, labels, sample_weight)[0]
        if features.shape[1] > 0:  # LightGBM refuses a dataset without feature columns
            boosting = _SafeguardedBoosting(lightgbm, features, bias, labels, sample_weight, params)
            boosting.run(n_rounds)
            self.n_halvings_ = boosting.n_halvings
            if not boosting.no_split:
                if boosting.n_rounds > 0:
                    self.booster_ = boosting.booster
                if boosting.loss <= reference:
                    return boosting.scores
                self.continued_ = True
                boosting = _SafeguardedBoosting(lightgbm, features, bias, labels, sample_weight, params,
                                                start=replaced.scores)
                boosting.run(n_rounds)
                self.n_halvings_ += boosting.n_halvings
                self.booster_ = boosting.booster if boosting.n_rounds > 0 else None
                self.base_boosters_, self.constant_ = replaced.boosters, replaced.constant
                return boosting.scores
        single_leaves = BoostedTrees(
            n_rounds=n_rounds,
            tree="vector",
            learning_rate=params["learning_rate"],
            subsample=checked["subsample"],
            l2_regularization=params["lambda_l2"],
            random_state=params["seed"],
        )
        if not replaced.boosters:   # the replaced constant, as the one leaf BoostedTrees boosts on from
            single_leaves._set_constant(replaced.constant)
        single_leaves.fit(np.empty((n, 0)), bias, labels, sample_weight)
        self.constant_ = single_leaves.decision_function(np.empty((1, 0)))[0]
        self.continued_ = single_leaves.continued_
        constant_loss = biased_logistic_loss(np.broadcast_to(self.constant_, (n, k)), bias, labels,
                                             sample_weight)[0]
        if replaced.boosters and constant_loss > reference:
            self.continued_ = True
            self.base_boosters_, self.constant_ = replaced.boosters, replaced.constant
        return None

    def _replaced_function(self, features: np.ndarray, k: int) -> _Function:
        """The function this fit replaces, with its scores on ``features`` (``f = 0`` before the
        first fit)."""
        if not hasattr(self, "constant_"):
            return _Function(np.zeros((features.shape[0], k)), (), np.zeros(k))
        same_rows = (getattr(self, "training_scores_", None) is not None
                     and getattr(self, "_training_digest_", None) == rows_digest(features))
        scores = self.training_scores_ if same_rows else self.decision_function(features)
        return _Function(scores, self._boosters(), self.constant_)

    def _boosters(self) -> tuple:
        """All boosters of the fitted function, the earliest first."""
        own = () if self.booster_ is None else (self.booster_,)
        return tuple(getattr(self, "base_boosters_", ())) + own

    def __getstate__(self) -> dict:
        state = dict(super().__getstate__())  # a copy: object.__getstate__ returns __dict__ itself
        state.pop("training_scores_", None)  # large and recomputable: not pickled
        return state

    def decision_function(self, features: Any) -> np.ndarray:
        """Raw scores ``f(x, y)`` of shape (N, K), without the bias."""
        features = _for_lightgbm(self._check_features(features))
        boosters = self._boosters()
        if not boosters or features.shape[0] == 0:
            return np.tile(self.constant_, (features.shape[0], 1))
        threads = resolve_threads(self.n_jobs)
        scores = None
        for booster in boosters:
            step = np.asarray(booster.predict(features, raw_score=True, num_threads=threads), dtype=np.float64)
            scores = step if scores is None else scores + step
        assert scores is not None   # there are boosters
        scores = scores.reshape(features.shape[0], self.n_classes_)
        return scores + self.constant_ if np.any(self.constant_ != 0) else scores


def _for_lightgbm(features: Any) -> Any:
    """Sparse features as LightGBM takes them, a ``scipy.sparse.csr_matrix`` sharing their arrays
    (it copies a ``csr_array``, with a warning); dense ones as they are."""
    return sp.csr_matrix(features) if is_sparse(features) else features


class _SafeguardedBoosting:
    """LightGBM's rounds on the adapter's gradients and floored Hessians, each round's leaf
    values halved until the biased loss of the training rows does not rise.

    ``scores`` are ``f`` of the training rows (from ``start``, zeros by default), accumulated round
    by round from the new round's trees alone; LightGBM's own record of them is never read (it
    misses the halvings). ``prob`` is the softmax of ``scores + bias``, kept from the line search
    for the next round's gradients.
    """

    def __init__(self, lightgbm: Any, features: np.ndarray, bias: np.ndarray, labels: np.ndarray,
                 sample_weight: np.ndarray | None, params: dict, start: np.ndarray | None = None) -> None:
        features = _for_lightgbm(features)
        self.features, self.bias, self.labels, self.weights = features, bias, labels, sample_weight
        self.threads = params["num_threads"]
        # the label is never read: the gradients are the adapter's
        dataset = lightgbm.Dataset(features, label=np.zeros(features.shape[0]), params=params,
                                   free_raw_data=True).construct()
        # LightGBM drops the columns it cannot split (constant ones, say); with none left it
        # refuses to boost on custom gradients
        self.no_split = all(dataset.feature_num_bin(j) < 2 for j in range(features.shape[1]))
        self.booster = None if self.no_split else lightgbm.Booster(params, dataset)
        self.scores = np.zeros(bias.shape) if start is None else start.copy()
        self.n_rounds = self.n_halvings = 0
        z = self.scores + bias
        self._accept(z, *softmax_loss(z, labels, sample_weight))

    def _accept(self, z: np.ndarray, loss: float, prob: np.ndarray, lse: np.ndarray) -> None:
        """Take ``z = scores + bias`` with its loss, softmax and logsumexp (:func:`softmax_loss`) as
        the current point, and the gradient there (as :func:`biased_logistic_loss` computes it)."""
        grad = np.exp(z - lse[:, None])
        if is_soft(self.labels):
            grad -= self.labels
        else:
            grad[np.arange(z.shape[0]), self.labels] -= 1.0
        if self.weights is not None:
            grad *= self.weights[:, None]
        self.loss, self.prob, self.grad = loss, prob, grad

    def _gradients(self, _scores: np.ndarray, _dataset: Any) -> tuple[np.ndarray, np.ndarray]:
        """LightGBM's multiclass gradient and Hessian at ``self.scores``, the Hessian floored (both
        times the row weights)."""
        k = self.bias.shape[1]
        prob = self.prob
        hessian = np.maximum(k / (k - 1) * prob * (1.0 - prob), HESSIAN_FLOOR)
        if self.weights is not None:
            hessian *= self.weights[:, None]
        return self.grad, hessian

    def run(self, n_rounds: int) -> None:
        """Boost up to ``n_rounds`` rounds; stop early when no tree can split (``no_split`` if
        that happens in the first round) or when no halving of a round lowers the loss."""
        n, k = self.bias.shape
        booster = self.booster   # None exactly when no_split was found at construction
        if self.no_split or booster is None:
            return
        for r in range(n_rounds):
            if booster.update(fobj=self._gradients):
                self.no_split = r == 0   # LightGBM dropped the round (and keeps a first one)
                return
            step = booster.predict(self.features, start_iteration=r, num_iteration=1, raw_score=True,
                                        num_threads=self.threads)
            scale = self._line_search(np.asarray(step, dtype=np.float64).reshape(n, k))
            if scale == 0.0:
                booster.rollback_one_iter()
                return
            if scale < 1.0:
                self._scale_round(booster, r, scale)
            self.n_rounds += 1

    def _line_search(self, step: np.ndarray) -> float:
        """The largest ``2**-j`` (``j <= MAX_HALVINGS``) with loss(scores + 2**-j step) <= loss(scores),
        moving the scores there; 0 if there is none."""
        scale = 1.0
        for _ in range(MAX_HALVINGS + 1):
            trial = self.scores + scale * step
            z = trial + self.bias
            loss, prob, lse = softmax_loss(z, self.labels, self.weights)
            if loss <= self.loss:
                self.scores = trial
                self._accept(z, loss, prob, lse)
                return scale
            scale *= 0.5
            self.n_halvings += 1
        return 0.0

    @staticmethod
    def _scale_round(booster: Any, r: int, scale: float) -> None:
        """Multiply the leaf values of round ``r``'s trees of ``booster`` by ``scale`` (a power of
        two: exact)."""
        for tree in booster.dump_model(start_iteration=r, num_iteration=1)["tree_info"]:
            index = tree["tree_index"]
            for leaf in range(tree["num_leaves"]):
                booster.set_leaf_output(index, leaf, scale * booster.get_leaf_output(index, leaf))
