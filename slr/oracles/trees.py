"""Boosted regression trees as a logistic oracle (chapter Sec. 1.9.4, NIPS 2013 Sec. 8).

Stochastic gradient boosting of the biased logistic loss

    sum_k [ log sum_y exp(f(x_k, y) + b_k(y)) - f(x_k, y_k) - b_k(y_k) ]

where every round fits either **one** regression tree with vector-valued leaves for all
classes (the chapter) or one scalar tree per class (the NIPS paper). The heavy lifting
is in :mod:`slr.oracles._boosting` (Cython, ``nogil``); docs/design.md section 7.
"""
from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field, replace
from numbers import Integral, Real
from typing import Any

import numpy as np
from scipy.special import softmax

from slr._params import Boolean, Constraint, Integer, NJobs, Options, RandomState
from slr._params import Real as RealIn
from slr.oracles._boosting import growth, logistic, predictor
from slr.oracles._boosting.binning import bin_features
from slr.oracles._boosting.splitting import sorted_orders
from slr.oracles._boosting.tree import Tree
from slr.inference.batch import resolve_threads
from slr.oracles.base import LogisticOracle, OracleTags, biased_logistic_loss, rows_digest
from slr.validation import check_generator, check_int, check_real

__all__ = ["AUTO_PER_CLASS_MIN_CLASSES", "BoostedTrees", "FIRST_BLOCK", "MAX_BLOCK", "MAX_HALVINGS", "TREE_DEFAULTS",
           "resolve_tree"]

TREES = ("auto", "vector", "per_class")
SPLITTERS = ("auto", "exact", "hist")
AUTO_HIST_MIN_FEATURES = 3
#: ``tree="auto"`` grows per-class trees (LightGBM's shape, :data:`TREE_DEFAULTS`) from this many
#: classes on, the chapter's vector trees below it (:meth:`BoostedTrees.fit`, Notes).
AUTO_PER_CLASS_MIN_CLASSES = 10


@dataclass(frozen=True)
class TreeDefaults:
    """What ``min_leaf_fraction``, ``min_split_fraction``, ``max_leaf_nodes`` and
    ``newton_steps`` left at None stand for under one protocol."""

    min_leaf_fraction: float
    min_split_fraction: float
    max_leaf_nodes: int | None
    newton_steps: int


#: The defaults of each protocol: the chapter's vector trees (1% leaves, 2.5% splits); the NIPS
#: paper's per-class trees (5% leaves, splits wherever two leaves fit); and the per-class trees
#: ``tree="auto"`` grows for many classes, shaped as LightGBM's (1% leaves, at most 31, one
#: Newton step per leaf).
TREE_DEFAULTS = {
    "vector": TreeDefaults(0.01, 0.025, None, 8),
    "per_class": TreeDefaults(0.05, 0.10, None, 8),
    "auto": TreeDefaults(0.01, 0.02, 31, 1),
}


def resolve_tree(tree: str, n_classes: int) -> tuple[str, TreeDefaults]:
    """The protocol ``"vector"`` or ``"per_class"`` that ``tree`` stands for with ``n_classes``
    classes, and the defaults of the parameters left at None."""
    if tree != "auto":
        return tree, TREE_DEFAULTS[tree]
    if n_classes >= AUTO_PER_CLASS_MIN_CLASSES:
        return "per_class", TREE_DEFAULTS["auto"]
    return "vector", TREE_DEFAULTS["vector"]

#: Halvings of a guarded round's trees tried before the round is dropped and boosting stops
#: (:meth:`BoostedTrees.fit`, Notes: a fit that would raise the loss).
MAX_HALVINGS = 40


@dataclass
class _Ensemble:
    """A function being boosted: its scores on the fit's rows, the trees boosted in this fit
    (``extends``: after those of the fitted ensemble, which it then begins with), and the
    per-round records of all its rounds (``subset_loss_``, ``round_seconds_``)."""

    scores: np.ndarray
    extends: bool = False
    trees: list = field(default_factory=list)
    subset_loss: list = field(default_factory=list)
    round_seconds: list = field(default_factory=list)

    def copy(self) -> "_Ensemble":
        """A copy that boosting can extend (the trees themselves are never modified)."""
        return _Ensemble(self.scores.copy(), self.extends, list(self.trees), list(self.subset_loss),
                         list(self.round_seconds))


@dataclass(frozen=True)
class Subsample(Constraint):
    """Rows drawn per boosting round: an int >= 2 is a count, a float in (0, 1] a fraction (an
    int 1 is refused, not read as the fraction 1.0)."""

    def check(self, value: Any, name: str) -> int | float:
        if isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be {self.describe()}, got {value!r}")
        if isinstance(value, Integral):
            return check_int(value, name, 2, None)
        if isinstance(value, Real):
            return check_real(value, name, 0.0, 1.0, low_open=True)
        raise ValueError(f"{name} must be {self.describe()}, got {value!r}")

    def describe(self) -> str:
        return "an int >= 2 or a float in (0, 1]"


def resolve_subsample(subsample: int | float, n_rows: int) -> int:
    """Number of rows drawn per round from ``n_rows``, for a ``subsample`` checked by
    :class:`Subsample` (a count is capped at ``n_rows``).

    Raises
    ------
    ValueError
        If ``subsample`` selects fewer than 2 rows.
    """
    size = subsample if isinstance(subsample, int) else int(round(subsample * n_rows))
    size = min(size, n_rows)
    if size < 2:
        raise ValueError(
            f"subsample={subsample!r} selects {size} of {n_rows} rows; at least 2 are needed"
        )
    return size


def _draw_rows(rng: np.random.Generator, n_rows: int, n_sub: int) -> np.ndarray:
    """A boosting round's rows: ``n_sub`` of ``n_rows`` without replacement, sorted."""
    return np.sort(rng.choice(n_rows, size=n_sub, replace=False, shuffle=False)).astype(np.intp, copy=False)


def resolve_splitter(splitter: str, n_features: int) -> str:
    """The split search ``splitter="auto"`` stands for: the histogram search from
    ``AUTO_HIST_MIN_FEATURES`` features on, where it measured faster, else the exact one."""
    if splitter == "auto":
        splitter = "hist" if n_features >= AUTO_HIST_MIN_FEATURES else "exact"
    return "exact" if n_features == 0 else splitter


def fraction_to_rows(fraction: float, n_rows: int, minimum: int) -> int:
    """``ceil(fraction * n_rows)`` (robust to rounding), at least ``minimum``."""
    return max(minimum, math.ceil(fraction * n_rows - 1e-9))


#: Rounds of a guarded fit's first block (between two checks of its full loss), and of the first
#: after rounds taken one by one; the blocks double while they do not raise the loss, up to
#: :data:`MAX_BLOCK` rounds (:meth:`BoostedTrees.fit`, Notes).
FIRST_BLOCK = 4
MAX_BLOCK = 32


class _RoundGuard:
    """A guarded fit's rounds (:meth:`BoostedTrees.fit`, Notes): the fit's full loss is checked
    after every block of rounds, and a block that raised it is undone and its rounds taken again one
    by one, each added halved ``j`` times for the least ``j <= MAX_HALVINGS`` at which the loss of all
    rows does not rise.

    In blocks (``block > 0``) the caller adds each round's trees to the scores, as an unguarded
    round does, and :meth:`push` compares the full loss at the block's end with that at the last
    check, ``FIRST_BLOCK`` rounds and then twice as many while the blocks pass (a block that would
    leave fewer than half as many rounds runs to the fit's end: few rounds, late in a fit, raise the
    loss more often than the many before them, and are then taken one by one). A block whose loss
    rose is undone (the scores of the last check restored) and its rounds, whose trees are already
    grown, are added round by round (``block == 0``); the guard stays so, the caller then leaving
    the trees to it, until ``FIRST_BLOCK`` rounds in a row needed no halving, where a check starts
    blocks again. A check also ends the fit, and where it finds a
    rise after rounds taken one by one (by the rounding of the loss's sums only), the rounds since
    the last check are undone and boosting stops. So the fit's loss never ends above its start's.

    Round by round, the loss change of a scale ``s`` of the round's step ``D`` is
    ``sum_i w_i [log sum_k P[i, k] exp(s D[i, k]) - s <q_i, D_i>]`` with ``P`` the softmax of the
    rows' margins, which is carried from round to round (:func:`~slr.oracles._boosting.logistic.
    add_step`), and ``D`` read from the trees' leaves, so that a trial costs one ``log1p`` per row,
    and the change is taken as such, not as a difference of two sums of the size of the loss. The
    change is convex in ``s``, so the qualifying ``j`` are those from the least one on: the search
    starts at the last round's ``j`` (consecutive rounds need alike) and walks to the least. The
    scores receive the halved trees' values one addition each, bitwise as adding the halved trees
    does.
    """

    def __init__(self, scores: np.ndarray, bias: np.ndarray, labels: np.ndarray, sample_weight: np.ndarray | None,
                 targets: np.ndarray | None, trees_per_round: int, features: np.ndarray, n_jobs: int) -> None:
        self.bias, self.labels, self.weights = bias, labels, sample_weight
        self.targets = None if targets is None else np.ascontiguousarray(targets)
        self.features, self.n_jobs = features, n_jobs
        self.checked_scores = scores.copy()
        self.checked_loss = self._loss(scores)
        #: rounds between checks of the full loss; 0: round by round
        self.block = FIRST_BLOCK
        #: the rounds since the last check, each a list of its trees
        self.pending: list[list[Tree]] = []
        self.vector = trees_per_round == 1
        #: each tree of a round's leaf of every row (local to the tree), round by round
        self.leaves = np.empty((trees_per_round, scores.shape[0]), dtype=np.intp)
        self.probabilities: np.ndarray | None = None
        self.hint = 0
        self.streak = 0
        #: halvings of the rounds taken one by one, MAX_HALVINGS + 1 for a dropped round
        self.halvings = 0

    def _loss(self, scores: np.ndarray) -> float:
        return logistic.stepped_loss(scores, scores, 0.0, self.bias, self.labels, self.weights, self.targets)

    def push(self, round_trees: list[Tree], scores: np.ndarray, left: int) -> tuple[list[list[Tree]], int, bool]:
        """Take a round whose trees were added to ``scores`` (in blocks) or are to be added by the
        guard (round by round); ``left``: the fit's rounds after it. Return the rounds settled
        by a check (their trees, halved where they were), the number of the latest rounds dropped,
        and whether boosting stops."""
        last = left == 0
        if not self.block:
            return self._one_by_one([round_trees], scores, last)
        self.pending.append(round_trees)
        # a block that would leave less than half a block runs to the end
        due = last or (len(self.pending) >= self.block and left >= self.block // 2)
        return self._check(scores, last) if due else ([], 0, False)

    def _check(self, scores: np.ndarray, last: bool) -> tuple[list[list[Tree]], int, bool]:
        """Compare the full loss with the last check's and settle, or undo, the rounds since (see
        :meth:`push`, whose value this returns)."""
        loss = self._loss(scores)
        if loss <= self.checked_loss:
            settled, self.pending = self.pending, []
            self.checked_scores[...] = scores
            self.checked_loss = loss
            self.block = min(2 * self.block, MAX_BLOCK) if self.block else FIRST_BLOCK
            return settled, 0, False
        scores[...] = self.checked_scores
        if not self.block:   # a rise by rounding: undo the rounds since the last check
            dropped, self.pending = len(self.pending), []
            return [], dropped, True
        block, self.pending = self.pending, []
        self.block = self.streak = 0
        self.probabilities = softmax(scores + self.bias, axis=1)
        return self._one_by_one(block, scores, last)

    def _one_by_one(self, rounds: list[list[Tree]], scores: np.ndarray,
                    last: bool) -> tuple[list[list[Tree]], int, bool]:
        """Add ``rounds``, none of them in ``scores`` yet, round by round (``block == 0``), and check
        where blocks resume or the fit ends (see :meth:`push`, whose value this returns)."""
        for taken, round_trees in enumerate(rounds):
            for t, tree in enumerate(round_trees):
                predictor.tree_leaves(self.features, tree, self.leaves[t], self.n_jobs)
            self.pending.append(round_trees)
            if self._add(round_trees, scores) is None:   # no halving keeps the loss from rising: drop, stop
                self.pending.pop()
                kept, dropped, _ = self._check(scores, True)
                return kept, dropped + len(rounds) - taken, True
        return self._check(scores, last) if last or self.streak >= FIRST_BLOCK else ([], 0, False)

    def _add(self, round_trees: list[Tree], scores: np.ndarray) -> int | None:
        """Add the round's trees, halved the least number of times at which the loss does not rise,
        to ``scores`` (and halve those in ``round_trees`` alike); return that number, or None (and
        leave ``scores``) where no halving up to :data:`MAX_HALVINGS` keeps the loss from rising."""
        values = np.concatenate([tree.value for tree in round_trees])
        offsets = np.zeros(len(round_trees), dtype=np.intp)
        offsets[1:] = np.cumsum([tree.n_nodes for tree in round_trees])[:-1]
        target = logistic.step_target_term(self.leaves, offsets, self.vector, values, self.labels, self.weights,
                                           self.targets)
        changes: dict[int, float] = {}

        def rises(j: int) -> bool:
            if j not in changes:
                scale = 0.5 ** j
                changes[j] = (logistic.step_log_partition(self.probabilities, self.leaves, offsets, self.vector,
                                                          np.expm1(scale * values), self.weights) - scale * target)
            return changes[j] > 0.0

        j = min(self.hint, MAX_HALVINGS)
        if rises(j):
            while rises(j):
                # a round that rises at every scale is found at the last scale, tried once the walk
                # has gone two past the last round's j
                if j == MAX_HALVINGS or (j >= self.hint + 2 and rises(MAX_HALVINGS)):
                    self.halvings += MAX_HALVINGS + 1
                    return None
                j += 1
        else:
            while j > 0 and not rises(j - 1):
                j -= 1
        scale = 0.5 ** j
        if j:   # a power of two: exact
            for i, tree in enumerate(round_trees):
                round_trees[i] = replace(tree, value=scale * tree.value)
        logistic.add_step(self.probabilities, self.leaves, offsets, self.vector, np.expm1(scale * values),
                          scale * values, scores)
        self.hint = j
        self.halvings += j
        self.streak = 0 if j else self.streak + 1
        return j


class BoostedTrees(LogisticOracle):
    """Stochastic gradient boosting of regression trees: one vector tree or one tree per class.

    Each :meth:`fit` starts from ``f = 0`` (the chapter: "initializing f = 0 and then
    repeating"; see Notes for the one exception) and performs ``n_rounds`` rounds, each of which

    1. draws ``subsample`` rows without replacement (the same rows serve steps 2-4);
    2. computes the log-likelihood gradient ``g_k = w_k (q_k - softmax(f(x_k) + b_k))``
       (``q_k = onehot(y_k)`` and ``w_k = 1`` unless soft targets and weights are given:
       see :meth:`fit` and Notes);
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
    5. adds ``learning_rate * t`` (every ``learning_rate * (K - 1) / K * t_c`` to class
       ``c``: the K steps are taken at once, and Friedman's K-class boosting scales them so)
       to the ensemble.

    Parameters
    ----------
    n_rounds : int, default=200
        Boosting rounds per fit, all of them (no early stopping); with ``warm_start`` the
        rounds each fit adds.
    learning_rate : float, default=0.25
        Shrinkage ``nu`` applied to every re-fitted tree (scikit-learn's name).
    subsample : int or float, default=10000
        Rows per round: an int is a count (capped at N), a float in (0, 1] a fraction.
    tree : {"auto", "vector", "per_class"}, default="auto"
        One vector-leaf tree per round (the chapter) or one scalar tree per class and
        round (the NIPS paper). ``"auto"``: per-class trees shaped as LightGBM's (leaves of
        at least 1% of the subsample, at most 31 of them, one Newton step) from
        :data:`AUTO_PER_CLASS_MIN_CLASSES` classes on, the chapter's vector trees below
        (Notes). Before 0.2 the default was ``"vector"``, which ``"auto"`` still is below
        that many classes.
    min_leaf_fraction : float or None, default=None
        Each child of a split holds at least ``ceil(min_leaf_fraction * n_sub)`` rows.
        ``None``: 0.01 for vector trees (the chapter), 0.05 per class (the NIPS paper:
        "each leaf node must contain at least 5% of the data"), 0.01 for the per-class
        trees of ``"auto"``.
    min_split_fraction : float or None, default=None
        Nodes with fewer than ``ceil(min_split_fraction * n_sub)`` rows are leaves.
        ``None``: 0.025 for vector trees (the chapter), 0.10 per class (twice the leaf
        minimum: the paper sets no rule of its own, and smaller nodes cannot be split),
        0.02 for the per-class trees of ``"auto"``.
    max_leaf_nodes : int or None, default=None
        Optional cap on the leaves per tree (nodes are split in order of gain). ``None``:
        only the two fractions above limit the tree, as in the chapter, except for the
        per-class trees of ``"auto"``: 31 (LightGBM's ``num_leaves``).
    l2_regularization : float, default=1e-3
        Ridge ``l2_regularization/2 |v|^2`` on each leaf vector during the re-fit; it keeps
        the Newton system positive definite (the softmax Hessian is singular along
        ``(1, ..., 1)``).
    newton_steps : int or None, default=None
        Maximum Newton steps per leaf in the re-fit (it stops earlier at convergence).
        ``None``: 8, or 1 for the per-class trees of ``"auto"`` (the second-order leaf
        LightGBM takes; more steps fit the subsample closer but cost more per round).
    warm_start : bool, default=False
        If True, a repeated :meth:`fit` on a problem of the same shape keeps the trees it
        has and adds ``n_rounds`` more, boosting from the current ``f`` instead of 0.
    n_jobs : int or None, default=1
        OpenMP threads for evaluating trees on all rows (score updates, prediction);
        ``None`` or ``-1``: all cores. Tree induction and the re-fit run on the subset in
        one thread.
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
        ``learning_rate`` (and ``(K - 1) / K`` per class; zero at internal nodes).
    subset_loss_ : ndarray of shape (n_rounds_total,)
        Mean (weighted mean, with weights) biased loss on each round's subset *before* that
        round's trees were added (at the scores its trees were grown at: a guarded block's
        rounds taken again one by one may be added to others, Notes).
    round_seconds_ : ndarray of shape (n_rounds_total,)
        Seconds from the start of the :meth:`fit` that ran each round to the round's end
        (binning and sorting included): the time the ensemble's first ``r`` rounds took; a
        guarded round's, to the check of the full loss that accepted it.
    n_leaves_ : ndarray of shape (n_trees,), intp
        Leaves of every tree.
    tree_ : {"vector", "per_class"}
        The protocol of the last fit (what ``tree="auto"`` chose).
    continued_ : bool
        Whether the last fit ended by boosting on from the function it replaced, its rounds
        guarded (Notes); the trees are then those of that function followed by the new ones.
        The next fit on the same rows then continues at once (Notes).
    n_halvings_ : int
        How often the last fit halved a guarded round's trees to keep the loss from rising
        (:data:`MAX_HALVINGS` + 1 for a dropped round).
    training_scores_ : ndarray of shape (N, K)
        Scores of the rows of the last fit, accumulated tree by tree while boosting in the
        order :meth:`decision_function` adds them, so bitwise equal to it (the oracle's tags
        declare ``training_scores``). Not pickled: large, and recomputable.
    feature_importances_ : ndarray of shape (n_features,)
        The share of all splits that split on each feature (LightGBM's ``importance_type=
        "split"``); zeros when no tree splits.
    n_classes_, n_features_in_ : int
        Shape of the last problem.

    Notes
    -----
    With ``sample_weight`` every tree is a weighted least-squares tree: it minimises
    ``sum_k w_k ||r_k - t(x_k)||^2`` for the residuals ``r_k = q_k - softmax(f + b_k)`` (its
    leaf values the weighted mean residuals, its splits scored with the children's weights in
    place of their row counts), and the leaf re-fit minimises the weighted loss (gradient and
    Hessian multiplied by the weights). The rows of a round are drawn uniformly, whatever
    their weights; the leaf and split minima then count weight: a child must weigh at least
    ``min_leaf_fraction`` of the round's subset's total weight (and more than 0), a node at
    least ``min_split_fraction`` of it (and hold 2 rows) to be split. So a row of integer
    weight ``w`` acts as ``w`` copies of it wherever the subset is the whole problem, and a
    soft row as its one-hot rows weighted by its targets. ``subset_loss_`` is then the
    weighted mean loss. Without weights every rule counts rows, as before.

    **A fit never ends above the function it replaces.** The structured learner fits the same
    oracle again for every new bias, and its objective R falls at a fit only if the new
    function's biased loss is no larger than that of the function it replaces, evaluated under
    the new bias. A fresh fit from ``f = 0`` with a few (subsampled) rounds can end above it
    (R rose by up to 42% on small denoising and letters problems). So, once :meth:`fit` has
    boosted as described above, it compares the full (weighted) loss of the result with that
    of the replaced function (the fitted ensemble on the new rows; ``f = 0`` before the first
    fit). Where the result is worse, it is discarded and boosting continues from the replaced
    function instead, ``n_rounds`` more rounds, guarded: the full loss is checked after every
    block of rounds (:data:`FIRST_BLOCK` rounds, twice as many after every block that did not
    raise it, up to :data:`MAX_BLOCK`; the last block takes the rounds a full block would leave
    where they are fewer than half a block), and a block that raised it is undone and its rounds
    added again one by one, each only where it does not raise the full loss: a round's trees are
    halved (exactly: powers of two) until it does not, up to :data:`MAX_HALVINGS` times, after
    which the round is dropped and boosting stops. After :data:`FIRST_BLOCK` rounds in a row that
    needed no halving, blocks resume. The result is never worse than the replaced function and,
    as each round fits the new gradient, in general better. Simply keeping the replaced
    function would stall boosting: a fresh fit with subsampled rounds ends a little above it
    again and again (a learner-level undo of such fits raised Table 1's ChapterBoost error from
    .043 to .288). Where the fresh fit does not
    rise, nothing of it changes. The comparison needs the replaced function's scores:
    ``training_scores_`` when the rows are those of the last fit, otherwise a prediction. A
    replaced ensemble of the other ``tree`` protocol (after ``set_params(tree=...)``) is not
    compared with. The ensemble grows by ``n_rounds`` rounds at every continued fit.

    Once a fit has continued, the replaced function is a long ensemble that a fit of
    ``n_rounds`` rounds from 0 hardly ever matches again: in the quick Table 1's ten Boost
    cells 52 to 96% of the fits continued, and every oracle's fits continued from its first
    continued fit on. So a fit on the rows of the last fit (same ``rows_digest``), where that fit
    continued, boosts on from the replaced function at once, without the fit from 0
    (``warm_start`` aside); it still draws the rows that fit would have drawn, so that the
    result is the same as before wherever the fit from 0 would have risen. A block of guarded
    rounds costs what unguarded rounds do plus one pass of the full loss and a copy of the
    scores at its end, and where no block raises the loss the guarded rounds are the unguarded
    ones, bit for bit (a round within a block may raise the loss where the block does not: the
    fit's loss, not each round's, is what must not rise). A round taken alone takes the change of
    the full loss at a trial scale from the rows' class probabilities, carried from round to round,
    and its trees' leaves of every row: one ``log1p`` per row and scale, no exponential, and the
    change itself rather than a difference of two sums of the loss's size, whose rounding used to
    accept a round that raises the loss at every scale at one of its smallest. The halvings are
    searched from the last round's (the loss is convex along the step), and the accepted scores
    are bitwise those the halved trees add. The check that ends rounds taken alone undoes them
    where the full loss rose by rounding, and boosting stops. :meth:`decision_function` keeps
    the scores of the rows it predicted last, so that the learner's validation rows walk only
    the trees a continued fit added.

    **The protocol ``tree="auto"`` chooses.** With many classes one vector tree per round
    fits the loss slower than LightGBM's per-class trees: vector trees reached LightGBM's loss
    faster up to 8 classes, per-class trees from 13 on, so ``"auto"`` switches at
    :data:`AUTO_PER_CLASS_MIN_CLASSES` = 10 (the measurements: the research notes, "The figures
    behind the defaults"). The structured learner's pairwise problems have ``L^2`` classes and
    few features (from ``L = 4`` on they get per-class trees). The suite's cells name their
    protocol.

    All fitted state is plain NumPy arrays, so the model pickles. ``K == 1`` gives
    the zero function (the loss is identically 0). Where no split is possible (no
    feature columns, constant features) every tree is a single leaf, so the ensemble
    is a per-class constant fitted to the bias by the leaves' Newton re-fit.

    Sparse features are made dense (the binning and the kernels take dense columns) up to
    :data:`slr._features.DENSE_BUDGET` entries; larger ones are refused with the size a dense
    copy would take and the suggestion of :class:`~slr.oracles.LightGBM`, which bins sparse
    features as they are.
    """

    _parameter_constraints = {
        "n_rounds": Integer(0, None),
        "learning_rate": RealIn(0.0, low_open=True),
        "subsample": Subsample(),
        "tree": Options(TREES),
        "splitter": Options(SPLITTERS),
        "min_leaf_fraction": (None, RealIn(0.0, 0.5)),
        "min_split_fraction": (None, RealIn(0.0, 1.0)),
        "max_leaf_nodes": (None, Integer(1, None)),
        "l2_regularization": RealIn(0.0),
        "newton_steps": (None, Integer(0)),
        "warm_start": Boolean(),
        "n_jobs": NJobs(),
        "random_state": RandomState(),
    }
    _sparse_alternative = ("Use LightGBM: boosted trees that take sparse features as they are (or another oracle "
                           "that does: Linear, MLP, Constant or Zero).")

    def __slr_tags__(self) -> OracleTags:
        return OracleTags(training_scores=True)

    def __init__(
        self,
        n_rounds: int = 200,
        learning_rate: float = 0.25,
        subsample: int | float = 10000,
        tree: str = "auto",
        splitter: str = "auto",
        min_leaf_fraction: float | None = None,
        min_split_fraction: float | None = None,
        max_leaf_nodes: int | None = None,
        l2_regularization: float = 1e-3,
        newton_steps: int | None = None,
        warm_start: bool = False,
        n_jobs: int | None = 1,
        random_state: Any = None,
    ) -> None:
        self.n_rounds = n_rounds
        self.learning_rate = learning_rate
        self.subsample = subsample
        self.tree = tree
        self.splitter = splitter
        self.min_leaf_fraction = min_leaf_fraction
        self.min_split_fraction = min_split_fraction
        self.max_leaf_nodes = max_leaf_nodes
        self.l2_regularization = l2_regularization
        self.newton_steps = newton_steps
        self.warm_start = warm_start
        self.n_jobs = n_jobs
        self.random_state = random_state

    # ------------------------------------------------------------------ fitting
    @staticmethod
    def _boosting_settings(params: dict[str, Any], n_rows: int, n_features: int, n_classes: int) -> dict:
        """What the boosting rounds read, from the validated parameters: the protocol, rows per
        round, the leaf and split minima in rows, the split search, a leaf cap (no cap: the
        largest intp), the Newton steps."""
        tree, defaults = resolve_tree(params["tree"], n_classes)

        def given(name: str) -> Any:
            return getattr(defaults, name) if params[name] is None else params[name]

        min_leaf_fraction, min_split_fraction = given("min_leaf_fraction"), given("min_split_fraction")
        n_sub = resolve_subsample(params["subsample"], n_rows)
        # a cap above any possible number of leaves is the same as no cap
        max_leaves = np.iinfo(np.intp).max
        if given("max_leaf_nodes") is not None:
            max_leaves = min(max_leaves, given("max_leaf_nodes"))
        return {
            "min_leaf_fraction": min_leaf_fraction,
            "min_split_fraction": min_split_fraction,
            "tree": tree,
            "splitter": resolve_splitter(params["splitter"], n_features),
            "n_rounds": params["n_rounds"],
            "learning_rate": params["learning_rate"],
            "n_sub": n_sub,
            "min_leaf": fraction_to_rows(min_leaf_fraction, n_sub, 1),
            "min_split": fraction_to_rows(min_split_fraction, n_sub, 2),
            "max_leaf_nodes": max_leaves,
            "l2": params["l2_regularization"],
            "newton_steps": given("newton_steps"),
            "n_jobs": resolve_threads(params["n_jobs"]),
        }

    def _fit(self, features: np.ndarray, bias: np.ndarray, labels: np.ndarray,
             sample_weight: np.ndarray | None, params: dict[str, Any]) -> None:
        fit_start = time.perf_counter()
        n, k = bias.shape
        if n < 2:
            raise ValueError(f"BoostedTrees needs at least 2 rows in features, got {n}")
        p = self._boosting_settings(params, n, features.shape[1], k)
        rng = check_generator(params["random_state"])
        self.tree_ = p["tree"]

        per_class = p["tree"] == "per_class"
        previous, same_rows = self._replaced_function(features, per_class)
        warm = params["warm_start"] and previous is not None
        # the last fit, on these rows, had to continue: a fit from 0 would end above again (Notes)
        skip = not warm and same_rows and getattr(self, "continued_", False)
        ensemble = previous.copy() if warm and previous is not None else _Ensemble(np.zeros((n, k)))
        self.continued_ = False
        self.n_halvings_ = 0
        if k > 1:
            if not skip:
                self._boost(features, bias, labels, sample_weight, ensemble, p, rng, fit_start)
            elif p["n_sub"] < n:   # the rows it would have drawn: the rounds below draw what they drew after it
                for _ in range(p["n_rounds"]):
                    _draw_rows(rng, n, p["n_sub"])
            # never end above the function this fit replaces (Notes)
            if skip or (previous is not None
                        and biased_logistic_loss(ensemble.scores, bias, labels, sample_weight)[0]
                        > biased_logistic_loss(previous.scores, bias, labels, sample_weight)[0]):
                assert previous is not None   # skip needs same_rows, which comes with the fitted ensemble
                ensemble = previous.copy()
                self.continued_ = True
                self._boost(features, bias, labels, sample_weight, ensemble, p, rng, fit_start, guarded=True)
        self._pack_trees(ensemble.trees, k if not per_class else 1, ensemble.extends)
        self.subset_loss_ = np.asarray(ensemble.subset_loss, dtype=np.float64)
        self.round_seconds_ = np.asarray(ensemble.round_seconds, dtype=np.float64)
        # accumulated tree by tree in the order predict_ensemble adds them: bitwise what
        # decision_function returns for the training rows
        self.training_scores_ = ensemble.scores
        self._training_digest_ = rows_digest(features)

    def _replaced_function(self, features: np.ndarray, per_class: bool) -> tuple[_Ensemble | None, bool]:
        """The function this fit replaces, on ``features``: the fitted ensemble (the zero function
        before the first fit), or None when its trees are of the other protocol; and whether
        ``features`` are the rows of the last fit."""
        if not hasattr(self, "tree_offsets_"):
            return _Ensemble(np.zeros((features.shape[0], self.n_classes_))), False
        if bool(np.any((self.tree_class_ >= 0) != per_class)):
            return None, False
        same_rows = getattr(self, "_training_digest_", None) == rows_digest(features)
        scores = self.training_scores_ if same_rows and hasattr(self, "training_scores_") else None
        scores = self.decision_function(features) if scores is None else scores   # never written to
        return _Ensemble(scores, True, [], list(self.subset_loss_), list(self.round_seconds_)), same_rows

    def _boost(
        self,
        features: np.ndarray,
        bias: np.ndarray,
        labels: np.ndarray,
        sample_weight: np.ndarray | None,
        ensemble: _Ensemble,
        p: dict,
        rng: np.random.Generator,
        fit_start: float,
        guarded: bool = False,
    ) -> None:
        """Run the boosting rounds, extending ``ensemble``. ``guarded``: every round is accepted
        only where it does not raise the full loss: its trees are halved until it does not, and
        boosting stops at a round that no halving makes acceptable (the round is dropped)."""
        n, k = bias.shape
        scores, subset_loss = ensemble.scores, ensemble.subset_loss
        n_sub = p["n_sub"]
        per_class = p["tree"] == "per_class"
        hist = p["splitter"] == "hist"
        class_margin = np.empty((n_sub, k)) if per_class else None
        # the K per-class steps are taken at once; Friedman's K-class boosting scales each
        # by (K - 1) / K (with K = 2 the two trees would otherwise move the margin twice)
        shrink = p["learning_rate"] * ((k - 1) / k if per_class else 1.0)
        full = n_sub == n
        margins = np.empty((n_sub, k))
        grad = np.empty((n_sub, k))
        sub_labels = np.empty(n_sub, dtype=np.int64)
        soft = labels.ndim == 2
        # with soft targets the kernels copy but never read the labels
        hard_labels = np.zeros(n, dtype=np.int64) if soft else labels
        sub_weights = sub_targets = None
        min_leaf, min_split = p["min_leaf"], p["min_split"]
        if hist:
            all_codes, n_bins, bin_low, bin_high = bin_features(features)
        guard = _RoundGuard(scores, bias, hard_labels, sample_weight, labels if soft else None,
                            k if per_class else 1, features, p["n_jobs"]) if guarded else None
        if full:
            rows = np.arange(n, dtype=np.intp)
            sub_features = features
            if hist:
                sub_codes = all_codes
            else:
                full_order = sorted_orders(features)
        for round_index in range(p["n_rounds"]):
            if not full:
                rows = _draw_rows(rng, n, n_sub)
                sub_features = features[rows]
            if soft and (sub_targets is None or not full):
                sub_targets = np.ascontiguousarray(labels[rows])
            if sample_weight is not None and (sub_weights is None or not full):
                sub_weights = np.ascontiguousarray(sample_weight[rows])
                subset_weight = float(sub_weights.sum())
                # the minima count weight (see Notes), rounded as fraction_to_rows rounds
                min_leaf = p["min_leaf_fraction"] * subset_weight * (1.0 - 1e-12)
                min_split = p["min_split_fraction"] * subset_weight * (1.0 - 1e-12)
            if hist:
                if not full:
                    sub_codes = np.ascontiguousarray(all_codes[:, rows])
            else:
                order = full_order.copy() if full else sorted_orders(sub_features)
            loss = logistic.subset_gradient(scores, bias, hard_labels, rows, margins, grad, sub_labels,
                                            sub_weights, sub_targets)
            if sample_weight is None:
                subset_loss.append(loss / n_sub)
            else:   # a subset of rows that all weigh 0 has loss 0, and its trees are zero
                subset_loss.append(loss / subset_weight if subset_weight > 0 else 0.0)
            if per_class:
                # every class's tree sees this round's margins: no tree of the round moves them
                logistic.class_margins(margins, class_margin)
            round_trees = []
            for c in range(k) if per_class else (-1,):
                target = grad if c < 0 else np.ascontiguousarray(grad[:, c:c + 1])
                if hist:
                    grown = growth.grow_tree_hist(
                        sub_codes, target, n_bins, bin_low, bin_high,
                        np.arange(n_sub, dtype=np.intp), min_leaf, min_split,
                        p["max_leaf_nodes"], sub_weights,
                    )
                else:
                    grown = growth.grow_tree(sub_features, target,
                                             order.copy() if per_class else order,
                                             min_leaf, min_split, p["max_leaf_nodes"], sub_weights)
                values = grown.leaf_value  # the mean gradients, re-fitted in place
                if c < 0:
                    logistic.refit_leaves(margins, sub_labels, grown.rows, grown.leaf_start,
                                          grown.leaf_end, values, p["l2"], p["newton_steps"],
                                          sub_weights, sub_targets)
                else:
                    values = np.ascontiguousarray(values[:, 0])
                    logistic.refit_class_leaves(class_margin, sub_labels, grown.rows,
                                                grown.leaf_start, grown.leaf_end, values, c,
                                                p["l2"], p["newton_steps"], sub_weights,
                                                sub_targets)
                    values = values[:, None]
                tree = grown.fitted(shrink * values, column=c)
                if guard is None or guard.block:   # round by round, the guard adds the trees
                    predictor.add_tree(features, tree, scores, p["n_jobs"])
                round_trees.append(tree)
            if guard is None:
                ensemble.trees.extend(round_trees)
                ensemble.round_seconds.append(time.perf_counter() - fit_start)
                continue
            settled, dropped, stop = guard.push(round_trees, scores, p["n_rounds"] - 1 - round_index)
            for settled_trees in settled:
                ensemble.trees.extend(settled_trees)
            ensemble.round_seconds.extend([time.perf_counter() - fit_start] * len(settled))
            del subset_loss[len(subset_loss) - dropped:]
            self.n_halvings_ = guard.halvings
            if stop:
                break

    def _set_constant(self, constant: np.ndarray) -> None:
        """Make the fitted function the per-class ``constant`` (one single-leaf vector tree, no
        rounds), the function the next :meth:`fit` replaces (:class:`~slr.oracles.LightGBM`
        hands over its constant this way)."""
        leaf = Tree(feature=np.full(1, -1, dtype=np.intp), threshold=np.zeros(1), left=np.full(1, -1, dtype=np.intp),
                    right=np.full(1, -1, dtype=np.intp), value=np.array(constant, dtype=np.float64)[None, :])
        self._pack_trees([leaf], constant.shape[0])
        self.subset_loss_ = np.zeros(0)
        self.round_seconds_ = np.zeros(0)

    def _pack_trees(self, trees: list[Tree], k: int, extends: bool = False) -> None:
        """Concatenate the trees' node arrays into the flat fitted attributes; ``extends``: append
        them to those of the fitted ensemble."""
        first = int(self.tree_offsets_[-1]) if extends else 0
        offsets = np.full(len(trees) + 1, first, dtype=np.intp)
        offsets[1:] += np.cumsum([tree.n_nodes for tree in trees], dtype=np.intp)

        def joined(parts: list[np.ndarray], empty: np.ndarray) -> np.ndarray:
            return np.concatenate(parts) if parts else empty

        ints = np.zeros(0, dtype=np.intp)
        new = {
            "tree_class_": np.array([t.column for t in trees], dtype=np.intp),
            "n_leaves_": np.array([t.n_leaves for t in trees], dtype=np.intp),
            "node_feature_": joined([t.feature.astype(np.intp) for t in trees], ints),
            "node_threshold_": joined([t.threshold for t in trees], np.zeros(0)),
            "node_left_": joined([np.where(t.left >= 0, t.left + off, -1).astype(np.intp)
                                  for t, off in zip(trees, offsets)], ints),
            "node_right_": joined([np.where(t.right >= 0, t.right + off, -1).astype(np.intp)
                                   for t, off in zip(trees, offsets)], ints),
            "node_value_": joined([t.value for t in trees], np.zeros((0, k))),
        }
        if extends:
            offsets = np.concatenate([self.tree_offsets_[:-1], offsets])
            new = {name: np.concatenate([getattr(self, name), part]) for name, part in new.items()}
        self.tree_offsets_: np.ndarray = offsets
        for name, part in new.items():
            setattr(self, name, part)

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
        state = dict(super().__getstate__())  # a copy: object.__getstate__ returns __dict__ itself
        for name in ("training_scores_", "_prediction_cache_"):   # large and recomputable: not pickled
            state.pop(name, None)
        return state

    @property
    def feature_importances_(self) -> np.ndarray:
        """The share of all splits that split on each feature, shape ``(n_features_in_,)``."""
        split = self.node_feature_[self.node_feature_ >= 0]
        counts = np.bincount(split, minlength=self.n_features_in_).astype(np.float64)
        return counts / counts.sum() if split.size else counts

    # --------------------------------------------------------------- prediction
    @property
    def n_trees_(self) -> int:
        """Number of trees in the ensemble."""
        return int(self.tree_offsets_.shape[0] - 1)

    def decision_function(self, features: Any) -> np.ndarray:
        """Scores ``f(x, y)`` of shape (N, K): the sum of the scaled trees (no bias).

        The scores of the rows last predicted are kept with a digest of the trees that summed
        them: predicted again (the learner's validation rows after every iteration) while the
        ensemble begins with the same trees (after a continued fit or a warm start, which only
        add trees), only the trees added since are walked, adding to the kept scores in the
        order a full walk adds, so the result is the same bit for bit.
        """
        features = self._check_features(features)
        n_trees, rows = self.n_trees_, rows_digest(features)
        kept = getattr(self, "_prediction_cache_", None)
        if kept is not None and kept[0] == rows and kept[1] <= n_trees and kept[2] == self._trees_digest(kept[1]):
            out, start = kept[3].copy(), kept[1]
        else:
            out, start = np.zeros((features.shape[0], self.n_classes_)), 0
        if n_trees > start and features.shape[0] > 0:
            # child ids are absolute: the trees from ``start`` on walk as they are
            predictor.predict_ensemble(
                features, self.tree_offsets_[start:], self.tree_class_[start:], self.node_feature_,
                self.node_threshold_, self.node_left_, self.node_right_, self.node_value_, out,
                resolve_threads(self.n_jobs),
            )
        self._prediction_cache_ = (rows, n_trees, self._trees_digest(n_trees), out.copy())
        return out

    def _trees_digest(self, n_trees: int) -> str:
        """What identifies the ensemble's first ``n_trees`` trees (all their node arrays)."""
        end = self.tree_offsets_[n_trees]
        digest = hashlib.blake2b(digest_size=16)
        for part in (self.tree_offsets_[:n_trees + 1], self.tree_class_[:n_trees], self.node_feature_[:end],
                     self.node_threshold_[:end], self.node_left_[:end], self.node_right_[:end],
                     self.node_value_[:end]):
            digest.update(np.ascontiguousarray(part).view(np.uint8).data)
        return digest.hexdigest()
