"""Boosted regression trees as a logistic oracle (chapter Sec. 1.9.4, NIPS 2013 Sec. 8).

Stochastic gradient boosting of the biased logistic loss

    sum_k [ log sum_y exp(f(x_k, y) + b_k(y)) - f(x_k, y_k) - b_k(y_k) ]

where every round fits either **one** regression tree with vector-valued leaves for all
classes (the chapter) or one scalar tree per class (the NIPS paper). The heavy lifting
is in :mod:`slr.oracles._boosting` (Cython, ``nogil``); docs/design.md section 7.
"""
from __future__ import annotations

import math
import time
from numbers import Integral, Real
from typing import Any

import numpy as np

from slr.oracles._boosting import growth, logistic, predictor
from slr.oracles._boosting.binning import bin_features
from slr.oracles._boosting.splitting import sorted_orders
from slr.oracles._boosting.tree import Tree
from slr.oracles.base import LogisticOracle
from slr.validation import check_bool, check_int, check_option, check_random_state, check_real

__all__ = ["BoostedTrees"]

TREES = ("vector", "per_class")
SPLITTERS = ("auto", "exact", "hist")
AUTO_HIST_MIN_FEATURES = 3
# min_leaf_fraction and min_split_fraction when left at None, per protocol: the chapter's
# 1% / 2.5%; the NIPS paper's 5% leaves, with splits allowed wherever two leaves fit
DEFAULT_FRACTIONS = {"vector": (0.01, 0.025), "per_class": (0.05, 0.10)}


def resolve_subsample(subsample: Any, n_rows: int) -> int:
    """Number of rows drawn per round: an int is a count, a float in (0, 1] a fraction.

    Raises
    ------
    ValueError
        If ``subsample`` is neither, or selects fewer than 2 rows.
    """
    if isinstance(subsample, bool):
        raise ValueError(f"subsample must be an int >= 2 or a float in (0, 1], got {subsample!r}")
    if isinstance(subsample, Integral):
        size = check_int(subsample, "subsample", 2, None)
    elif isinstance(subsample, Real):
        fraction = check_real(subsample, "subsample", 0.0, 1.0, low_open=True)
        size = int(round(fraction * n_rows))
    else:
        raise ValueError(f"subsample must be an int >= 2 or a float in (0, 1], got {subsample!r}")
    size = min(size, n_rows)
    if size < 2:
        raise ValueError(
            f"subsample={subsample!r} selects {size} of {n_rows} rows; at least 2 are needed"
        )
    return size


def resolve_splitter(splitter: str, n_features: int) -> str:
    """The split search ``splitter="auto"`` stands for: the histogram search from
    ``AUTO_HIST_MIN_FEATURES`` features on, where it measured faster, else the exact one."""
    if splitter == "auto":
        splitter = "hist" if n_features >= AUTO_HIST_MIN_FEATURES else "exact"
    return "exact" if n_features == 0 else splitter


def fraction_to_rows(fraction: float, n_rows: int, minimum: int) -> int:
    """``ceil(fraction * n_rows)`` (robust to rounding), at least ``minimum``."""
    return max(minimum, math.ceil(fraction * n_rows - 1e-9))


class BoostedTrees(LogisticOracle):
    """Stochastic gradient boosting of regression trees: one vector tree or one tree per class.

    Each :meth:`fit` starts from ``f = 0`` (the chapter: "initializing f = 0 and then
    repeating") and performs ``n_rounds`` rounds, each of which

    1. draws ``subsample`` rows without replacement (the same rows serve steps 2-4);
    2. computes the log-likelihood gradient ``g_k = onehot(y_k) - softmax(f(x_k) + b_k)``;
    3. induces, best split first, where a split must leave at least ``min_leaf_fraction``
       of the subset in each child and nodes holding less than ``min_split_fraction`` of
       it are not split,

       * ``tree="vector"`` (the chapter): one regression tree ``t`` for all classes
         minimising ``sum_k ||g_k - t(x_k)||^2``;
       * ``tree="per_class"`` (the NIPS paper): for every class ``c`` one scalar tree
         ``t_c`` minimising ``sum_k (g_k[c] - t_c(x_k))^2``, all on this round's gradient;

    4. keeps the splits and re-fits the leaves to minimise the biased logistic loss of
       their rows (Newton's method with a line search, started from the better of the
       squared-loss leaf and zero, so the loss never exceeds either): a vector tree's
       leaf vectors jointly; a class ``c`` tree's scalar leaves on the loss with only
       class ``c``'s score shifted, the others held at the round's start;
    5. adds ``step * t`` (every ``step * (K - 1) / K * t_c`` to class ``c``: the K
       steps are taken at once, and Friedman's K-class boosting scales them so) to the
       ensemble.

    Parameters
    ----------
    n_rounds : int, default=200
        Boosting rounds (trees) per fit.
    step : float, default=0.25
        Shrinkage ``nu`` applied to every re-fitted tree.
    subsample : int or float, default=10000
        Rows per round: an int is a count (capped at N), a float in (0, 1] a fraction.
    tree : {"vector", "per_class"}, default="vector"
        One vector-leaf tree per round (the chapter) or one scalar tree per class and
        round (the NIPS paper).
    min_leaf_fraction : float or None, default=None
        Each child of a split holds at least ``ceil(min_leaf_fraction * n_sub)`` rows.
        ``None``: 0.01 for vector trees (the chapter), 0.05 per class (the NIPS paper:
        "each leaf node must contain at least 5% of the data").
    min_split_fraction : float or None, default=None
        Nodes with fewer than ``ceil(min_split_fraction * n_sub)`` rows are leaves.
        ``None``: 0.025 for vector trees (the chapter), 0.10 per class (twice the leaf
        minimum: the paper sets no rule of its own, and smaller nodes cannot be split).
    max_leaves : int or None, default=None
        Optional cap on the leaves per tree (nodes are split in order of gain). ``None``:
        only the two fractions above limit the tree, as in the chapter.
    l2_leaf : float, default=1e-3
        Ridge ``l2/2 |v|^2`` on each leaf vector during the re-fit; it keeps the Newton
        system positive definite (the softmax Hessian is singular along ``(1, ..., 1)``).
    newton_steps : int, default=8
        Maximum Newton steps per leaf in the re-fit (it stops earlier at convergence).
    warm_start : bool, default=False
        If True, a repeated :meth:`fit` on a problem of the same shape keeps the trees it
        has and adds ``n_rounds`` more, boosting from the current ``f`` instead of 0.
    n_jobs : int, default=1
        OpenMP threads for evaluating trees on all rows (score updates, prediction).
        Tree induction and the re-fit run on the subset in one thread.
    random_state : None, int or numpy.random.Generator, default=None
        Seed of the row subsets. A non-negative int makes every fit reproducible; a
        Generator is used (and advanced) in place.

    Attributes
    ----------
    tree_offsets_ : ndarray of shape (n_trees + 1,), intp
        Tree ``t`` owns nodes ``tree_offsets_[t]:tree_offsets_[t + 1]``.
    tree_class_ : ndarray of shape (n_trees,), intp
        -1 for a vector tree; the class of a per-class tree (round ``r``'s trees are
        ``r * K ... r * K + K - 1``, class by class).
    node_feature_ : ndarray of shape (n_nodes,), intp
        Split feature, -1 at leaves.
    node_threshold_ : ndarray of shape (n_nodes,), float64
        Rows with ``x[feature] <= threshold`` go to the left child.
    node_left_, node_right_ : ndarray of shape (n_nodes,), intp
        Absolute node ids of the children, -1 at leaves.
    node_value_ : ndarray of shape (n_nodes, K) or (n_nodes, 1), float64
        Leaf vectors (vector trees) or values (per-class trees), already multiplied by
        ``step`` (and ``(K - 1) / K`` per class; zero at internal nodes).
    subset_loss_ : ndarray of shape (n_rounds_total,)
        Mean biased loss on each round's subset *before* that round's trees were added.
    round_seconds_ : ndarray of shape (n_rounds_total,)
        Seconds from the start of the :meth:`fit` that ran each round to the round's end
        (binning and sorting included): the time the ensemble's first ``r`` rounds took.
    n_leaves_ : ndarray of shape (n_trees,), intp
        Leaves of every tree.
    n_classes_, n_features_in_ : int
        Shape of the last problem.

    Notes
    -----
    All fitted state is plain NumPy arrays, so the model pickles. ``K == 1`` gives
    the zero function (the loss is identically 0). Where no split is possible (no
    feature columns, constant features) every tree is a single leaf, so the ensemble
    is a per-class constant fitted to the bias by the leaves' Newton re-fit.
    """

    def __init__(
        self,
        n_rounds: int = 200,
        step: float = 0.25,
        subsample: int | float = 10000,
        tree: str = "vector",
        splitter: str = "auto",
        min_leaf_fraction: float | None = None,
        min_split_fraction: float | None = None,
        max_leaves: int | None = None,
        l2_leaf: float = 1e-3,
        newton_steps: int = 8,
        warm_start: bool = False,
        n_jobs: int = 1,
        random_state: Any = None,
    ) -> None:
        self.n_rounds = n_rounds
        self.step = step
        self.subsample = subsample
        self.tree = tree
        self.splitter = splitter
        self.min_leaf_fraction = min_leaf_fraction
        self.min_split_fraction = min_split_fraction
        self.max_leaves = max_leaves
        self.l2_leaf = l2_leaf
        self.newton_steps = newton_steps
        self.warm_start = warm_start
        self.n_jobs = n_jobs
        self.random_state = random_state

    # ------------------------------------------------------------------ fitting
    def _validated_params(self, n_rows: int) -> dict:
        tree = check_option(self.tree, "tree", TREES)
        splitter = check_option(self.splitter, "splitter", SPLITTERS)
        leaf_default, split_default = DEFAULT_FRACTIONS[tree]
        min_leaf_fraction = leaf_default if self.min_leaf_fraction is None else self.min_leaf_fraction
        min_split_fraction = split_default if self.min_split_fraction is None else self.min_split_fraction
        params = {
            "tree": tree,
            "splitter": splitter,
            "n_rounds": check_int(self.n_rounds, "n_rounds", 0, None),
            "step": check_real(self.step, "step", 0.0, math.inf, low_open=True),
            "n_sub": resolve_subsample(self.subsample, n_rows),
            "min_leaf_fraction": check_real(min_leaf_fraction, "min_leaf_fraction", 0.0, 0.5, low_open=False),
            "min_split_fraction": check_real(min_split_fraction, "min_split_fraction", 0.0, 1.0, low_open=False),
            "l2": check_real(self.l2_leaf, "l2_leaf", 0.0, math.inf, low_open=False),
            "newton_steps": check_int(self.newton_steps, "newton_steps", 0),
            "n_jobs": check_int(self.n_jobs, "n_jobs", 1),
            "warm_start": check_bool(self.warm_start, "warm_start"),
        }
        # a cap above any possible number of leaves is the same as no cap
        max_leaves = np.iinfo(np.intp).max
        if self.max_leaves is not None:
            max_leaves = min(max_leaves, check_int(self.max_leaves, "max_leaves", 1, None))
        params["max_leaves"] = max_leaves
        n_sub = params["n_sub"]
        params["min_leaf"] = fraction_to_rows(params["min_leaf_fraction"], n_sub, 1)
        params["min_split"] = fraction_to_rows(params["min_split_fraction"], n_sub, 2)
        return params

    def _fit(self, features: np.ndarray, bias: np.ndarray, labels: np.ndarray) -> None:
        fit_start = time.perf_counter()
        n, k = bias.shape
        if n < 2:
            raise ValueError(f"BoostedTrees needs at least 2 rows in features, got {n}")
        p = self._validated_params(n)
        p["splitter"] = resolve_splitter(p["splitter"], features.shape[1])
        rng = check_random_state(self.random_state)

        per_class = p["tree"] == "per_class"
        keep = (p["warm_start"] and hasattr(self, "tree_offsets_")
                and bool(np.all((self.tree_class_ >= 0) == per_class)))
        if keep:
            scores = self.decision_function(features)
            trees = self._unpack_trees()
            subset_loss, round_seconds = list(self.subset_loss_), list(self.round_seconds_)
        else:
            scores = np.zeros((n, k))
            trees, subset_loss, round_seconds = [], [], []

        if k > 1:
            self._boost(features, bias, labels, scores, p, rng, trees, subset_loss,
                        round_seconds, fit_start)
        self._pack_trees(trees, k if not per_class else 1)
        self.subset_loss_ = np.asarray(subset_loss, dtype=np.float64)
        self.round_seconds_ = np.asarray(round_seconds, dtype=np.float64)
        # The scores of the training rows were accumulated tree by tree in the same
        # order as predict_ensemble adds them, so they are bitwise what
        # decision_function would return; keep them for the learner's next call.
        self._train_cache_ = (features.copy(), scores)

    def _boost(
        self,
        features: np.ndarray,
        bias: np.ndarray,
        labels: np.ndarray,
        scores: np.ndarray,
        p: dict,
        rng: np.random.Generator,
        trees: list,
        subset_loss: list,
        round_seconds: list,
        fit_start: float,
    ) -> None:
        """Run the boosting rounds, appending their trees to ``trees``."""
        n, k = bias.shape
        n_sub = p["n_sub"]
        per_class = p["tree"] == "per_class"
        hist = p["splitter"] == "hist"
        class_margin = np.empty((n_sub, k)) if per_class else None
        # the K per-class steps are taken at once; Friedman's K-class boosting scales each
        # by (K - 1) / K (with K = 2 the two trees would otherwise move the margin twice)
        shrink = p["step"] * ((k - 1) / k if per_class else 1.0)
        full = n_sub == n
        margins = np.empty((n_sub, k))
        grad = np.empty((n_sub, k))
        sub_labels = np.empty(n_sub, dtype=np.int64)
        if hist:
            all_codes, n_bins, bin_low, bin_high = bin_features(features)
        if full:
            rows = np.arange(n, dtype=np.intp)
            sub_features = features
            if hist:
                sub_codes = all_codes
            else:
                full_order = sorted_orders(features)
        for _ in range(p["n_rounds"]):
            if not full:
                rows = np.sort(rng.choice(n, size=n_sub, replace=False, shuffle=False))
                rows = rows.astype(np.intp, copy=False)
                sub_features = features[rows]
            if hist:
                if not full:
                    sub_codes = np.ascontiguousarray(all_codes[:, rows])
            else:
                order = full_order.copy() if full else sorted_orders(sub_features)
            loss = logistic.subset_gradient(scores, bias, labels, rows, margins, grad, sub_labels)
            subset_loss.append(loss / n_sub)
            if per_class:
                # every class's tree sees this round's margins: no tree of the round moves them
                logistic.class_margins(margins, class_margin)
            for c in range(k) if per_class else (-1,):
                target = grad if c < 0 else np.ascontiguousarray(grad[:, c:c + 1])
                if hist:
                    grown = growth.grow_tree_hist(
                        sub_codes, target, n_bins, bin_low, bin_high,
                        np.arange(n_sub, dtype=np.intp), p["min_leaf"], p["min_split"],
                        p["max_leaves"],
                    )
                else:
                    grown = growth.grow_tree(sub_features, target,
                                             order.copy() if per_class else order,
                                             p["min_leaf"], p["min_split"], p["max_leaves"])
                values = grown.leaf_value  # the mean gradients, re-fitted in place
                if c < 0:
                    logistic.refit_leaves(margins, sub_labels, grown.rows, grown.leaf_start,
                                          grown.leaf_end, values, p["l2"], p["newton_steps"])
                else:
                    values = np.ascontiguousarray(values[:, 0])
                    logistic.refit_class_leaves(class_margin, sub_labels, grown.rows,
                                                grown.leaf_start, grown.leaf_end, values, c,
                                                p["l2"], p["newton_steps"])
                    values = values[:, None]
                tree = grown.fitted(shrink * values, column=c)
                predictor.add_tree(features, tree, scores, p["n_jobs"])
                trees.append(tree)
            round_seconds.append(time.perf_counter() - fit_start)

    def _pack_trees(self, trees: list[Tree], k: int) -> None:
        """Concatenate the trees' node arrays into the flat fitted attributes."""
        offsets = np.zeros(len(trees) + 1, dtype=np.intp)
        np.cumsum([tree.n_nodes for tree in trees], out=offsets[1:])
        self.tree_offsets_ = offsets
        if trees:
            self.node_feature_ = np.concatenate([t.feature for t in trees]).astype(np.intp)
            self.node_threshold_ = np.concatenate([t.threshold for t in trees])
            self.node_left_ = np.concatenate(
                [np.where(t.left >= 0, t.left + off, -1) for t, off in zip(trees, offsets)]
            ).astype(np.intp)
            self.node_right_ = np.concatenate(
                [np.where(t.right >= 0, t.right + off, -1) for t, off in zip(trees, offsets)]
            ).astype(np.intp)
            self.node_value_ = np.concatenate([t.value for t in trees])
        else:
            self.node_feature_ = np.zeros(0, dtype=np.intp)
            self.node_threshold_ = np.zeros(0)
            self.node_left_ = np.zeros(0, dtype=np.intp)
            self.node_right_ = np.zeros(0, dtype=np.intp)
            self.node_value_ = np.zeros((0, k))
        self.n_leaves_ = np.array([tree.n_leaves for tree in trees], dtype=np.intp)
        self.tree_class_ = np.array([tree.column for tree in trees], dtype=np.intp)

    def _unpack_trees(self) -> list[Tree]:
        """Inverse of :meth:`_pack_trees` (child ids made local to each tree again)."""
        trees = []
        offsets = self.tree_offsets_
        for t in range(offsets.shape[0] - 1):
            lo, hi = offsets[t], offsets[t + 1]
            left = self.node_left_[lo:hi]
            right = self.node_right_[lo:hi]
            trees.append(Tree(
                feature=self.node_feature_[lo:hi].copy(),
                threshold=self.node_threshold_[lo:hi].copy(),
                left=np.where(left >= 0, left - lo, -1),
                right=np.where(right >= 0, right - lo, -1),
                value=self.node_value_[lo:hi].copy(),
                column=int(self.tree_class_[t]),
            ))
        return trees

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.pop("_train_cache_", None)  # large and recomputable: not pickled
        return state

    # --------------------------------------------------------------- prediction
    @property
    def n_trees_(self) -> int:
        """Number of trees in the ensemble."""
        return int(self.tree_offsets_.shape[0] - 1)

    def decision_function(self, features: Any) -> np.ndarray:
        """Scores ``f(x, y)`` of shape (N, K): the sum of the scaled trees (no bias).

        If ``features`` equals the training features of the last fit, the scores
        accumulated during boosting are returned (identical values, no tree walk).
        """
        features = self._check_features(features)
        cache = getattr(self, "_train_cache_", None)
        if cache is not None and cache[0].shape == features.shape and np.array_equal(
            cache[0], features
        ):
            return cache[1].copy()
        out = np.zeros((features.shape[0], self.n_classes_))
        if self.tree_offsets_.shape[0] > 1 and features.shape[0] > 0:
            predictor.predict_ensemble(
                features, self.tree_offsets_, self.tree_class_, self.node_feature_, self.node_threshold_,
                self.node_left_, self.node_right_, self.node_value_, out,
                max(1, int(self.n_jobs)) if isinstance(self.n_jobs, Integral) else 1,
            )
        return out
