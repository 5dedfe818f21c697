"""Boosted trees: ``slr.oracles.BoostedTrees`` against the ``LightGBM`` adapter.

Problems have the size and features of the paper's denoising experiment (16 images of
100 x 100, 4-connected): the unary problem has 160,000 rows, features
``(1, phi_i)`` and K = 2 classes; the pairwise one 316,800 rows, features
``(1, phi_ij)`` and K = 4 pair labels. The biases are random, as the learner's messages
would be mid-run. Both oracles draw 10,000 rows per round and grow trees of at most
31 leaves with at least 1% of the subset per leaf, on one thread.

``asv_benchmarks/compare_trees.py`` measures the same things side by side and prints
the ratios; the ``track_*ratio`` benchmarks here record them in asv. ``BoostingRound`` fits
each oracle once in ``setup_cache``, then times ``fit`` and ``predict`` and tracks the
accuracy and loss of that fit; ``TrainingLoss`` and ``Ratios`` read one shared 200-round
cache.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

try:                                    # asv imports the package; compare_trees.py the file
    from . import common
except ImportError:
    import common

PROBLEMS = {"unary_160k_K2": (160_000, 2), "pairwise_316k_K4": (316_800, 4)}
LEAVES = 31
SUBSAMPLE = 10_000
THREADS = 1


def make_problem(name: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features, biases and labels of a denoising-sized biased logistic problem.

    Unary rows follow the paper's noise model (``phi ~ U[0, .9]`` for label 0,
    ``U[.1, 1]`` for label 1); pair labels ``a * 2 + b`` have equal ends with
    probability .9 and ``phi ~ U[0, .8]`` if the ends agree, ``U[.2, 1]`` otherwise.
    Biases are standard normal.
    """
    n, k = PROBLEMS[name]
    rng = np.random.default_rng(seed)
    if k == 2:
        labels = rng.integers(0, 2, n)
        phi = np.where(labels == 0, rng.uniform(0.0, 0.9, n), rng.uniform(0.1, 1.0, n))
    else:
        a = rng.integers(0, 2, n)
        b = np.where(rng.random(n) < 0.9, a, 1 - a)
        labels = 2 * a + b
        phi = np.where(a == b, rng.uniform(0.0, 0.8, n), rng.uniform(0.2, 1.0, n))
    features = np.column_stack([np.ones(n), phi])
    bias = rng.normal(size=(n, k))
    return features, bias, labels


GRID = [(n, d, k) for n in (20_000, 200_000) for d in (2, 12, 128) for k in (2, 4, 26)]


def make_grid_problem(n: int, d: int, k: int, seed: int = 0):
    """Features, biases and labels of a wide biased problem of the grid.

    Labels are uniform over the ``k`` classes; each class has a centre whose coordinates
    are normal on about 30% of the features (always on the first; standard deviation
    ``3 / sqrt(m)`` for ``m`` such features, so that classes are as far apart whatever
    ``d``) and zero on the others, and a row's features are its class's centre plus
    normal noise of standard deviation 2. Biases are standard normal, as in
    :func:`make_problem`.
    """
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    informative = rng.random(d) < 0.3
    informative[0] = True
    centres = rng.normal(scale=3.0 / np.sqrt(informative.sum()), size=(k, d)) * informative
    features = centres[labels] + 2.0 * rng.normal(size=(n, d))
    bias = rng.normal(size=(n, k))
    return features, bias, labels


def first_round_reaching(model, features, bias, labels, target: float) -> tuple[int, float]:
    """The first round after which the fitted ``BoostedTrees``' mean training loss is at
    most ``target`` (-1 if none) and that loss (the last round's if none).

    Adds the trees round by round to the training rows' scores, as the fit did.
    """
    from slr.oracles._boosting.predictor import add_tree

    n, k = bias.shape
    n_rounds = model.subset_loss_.shape[0]
    per_round = model.n_trees_ // max(n_rounds, 1)
    scores = np.zeros((n, k))
    trees = model._unpack_trees()
    loss = mean_loss_of_scores(scores, bias, labels)
    for r in range(n_rounds):
        for tree in trees[r * per_round:(r + 1) * per_round]:
            add_tree(features, tree, scores, 1)
        loss = mean_loss_of_scores(scores, bias, labels)
        if loss <= target:
            return r, loss
    return -1, loss


def mean_loss_of_scores(scores, bias, labels) -> float:
    from slr.oracles.base import biased_logistic_loss

    return biased_logistic_loss(scores, bias, labels)[0] / labels.shape[0]


def grid_cell(n: int, d: int, k: int, rounds: int, threads: int = THREADS,
              tree: str = "per_class", leaves: int | None = LEAVES, min_leaf: float = 0.01,
              splitter: str = "auto", max_factor: float = 3.0, seed: int = 0,
              newton_steps: int = 8, ours_leaves: int | None = -1,
              lgbm_min_hessian: float | None = None) -> dict:
    """Time ours needs to reach LightGBM's training loss after ``rounds`` rounds, over
    LightGBM's time (one process, one after the other, same subsample and threads).

    Ours boosts in fits of ``rounds`` rounds (warm-started: each repeats the binning,
    which counts against ours) until it reaches the loss or has run ``max_factor``
    times LightGBM's rounds; the time of the round that reaches it is the time of the
    earlier fits plus that round's ``round_seconds_``. If it never does, the ratio is
    that of the whole time, and ``reached`` is False. ``leaves`` caps both oracles'
    trees unless ``ours_leaves`` (-1: the same) caps ours. ``lgbm_min_hessian`` sets
    LightGBM's ``min_sum_hessian_in_leaf`` (None: its default, 1e-3, under which it
    diverges on the 200k-row 26-class cells: leaves of rare classes get huge values).
    """
    from slr.oracles.lightgbm_adapter import LightGBM
    from slr.oracles.trees import BoostedTrees

    data = make_grid_problem(n, d, k, seed)
    lgbm = LightGBM(n_rounds=rounds, subsample=SUBSAMPLE, max_leaf_nodes=leaves or 10**6,
                    min_leaf_fraction=min_leaf, n_jobs=threads, random_state=seed,
                    params=None if lgbm_min_hessian is None
                    else {"min_sum_hessian_in_leaf": lgbm_min_hessian})
    start = time.perf_counter()
    lgbm.fit(*data)
    lgbm_seconds = time.perf_counter() - start
    target = mean_loss(lgbm, *data)
    ours = BoostedTrees(n_rounds=rounds, subsample=SUBSAMPLE, tree=tree, splitter=splitter,
                        max_leaf_nodes=leaves if ours_leaves == -1 else ours_leaves,
                        min_leaf_fraction=min_leaf,
                        min_split_fraction=2 * min_leaf, newton_steps=newton_steps,
                        warm_start=True, n_jobs=threads,
                        random_state=np.random.default_rng(seed))  # new subsets every fit
    earlier = 0.0
    while True:
        start = time.perf_counter()
        ours.fit(*data)
        seconds = time.perf_counter() - start
        reached, loss = first_round_reaching(ours, *data, target)
        done = ours.subset_loss_.shape[0]
        if reached >= 0 or done >= max_factor * rounds:
            break
        earlier += seconds
    if reached >= 0:
        ours_seconds = earlier + ours.round_seconds_[reached]
    else:
        ours_seconds = earlier + seconds
    return {"lgbm_seconds": lgbm_seconds, "lgbm_loss": target, "reached": reached >= 0,
            "ours_rounds": (reached if reached >= 0 else done - 1) + 1,
            "ours_seconds": float(ours_seconds), "ours_loss": loss,
            "ratio": float(ours_seconds / lgbm_seconds)}


def make_oracle(kind: str, n_rounds: int, leaves: int | None = LEAVES, threads: int = THREADS,
                seed: int = 0):
    """``BoostedTrees`` or ``LightGBM`` with matched subsample, leaf count and threads."""
    from slr.oracles.lightgbm_adapter import LightGBM
    from slr.oracles.trees import BoostedTrees

    if kind == "BoostedTrees":
        return BoostedTrees(n_rounds=n_rounds, subsample=SUBSAMPLE, max_leaf_nodes=leaves,
                            n_jobs=threads, random_state=seed)
    if kind == "LightGBM":
        return LightGBM(n_rounds=n_rounds, subsample=SUBSAMPLE, max_leaf_nodes=leaves,
                        n_jobs=threads, random_state=seed)
    raise ValueError(f"unknown oracle {kind!r}")


def mean_loss(oracle, features, bias, labels) -> float:
    """The fitted oracle's biased logistic loss per row."""
    return oracle.loss(features, bias, labels) / features.shape[0]


class BoostingRound(common.OracleEstimator, common.Benchmark):
    """A 20-round fit (divide ``time_fit`` by 20 for the time per round) and its scores.

    ``time_predict`` evaluates the 20 trees on a second problem of the same size.
    """

    params = (list(PROBLEMS), ["BoostedTrees", "LightGBM"])
    param_names = ["problem", "oracle"]

    def setup_cache(self):
        return self.fit_all()

    def make_data(self, problem, oracle):
        features, bias, labels = make_problem(problem)
        features_t, bias_t, labels_t = make_problem(problem, seed=1)
        return (features, bias), labels, (features_t, bias_t), labels_t

    def make_estimator(self, problem, oracle):
        return make_oracle(oracle, 20)


class Rounds200(common.Benchmark):
    """Both oracles fitted for 200 rounds on every problem, timed, in one cache.

    Subclasses inherit this one ``setup_cache``, so asv fits once for all of them:
    ``{problem: {oracle: (seconds, mean training loss)}}``.
    """

    timeout = 900

    def setup_cache(self):
        results = {}
        for problem in PROBLEMS:
            data = make_problem(problem)
            row = {}
            for kind in ("BoostedTrees", "LightGBM"):
                oracle = make_oracle(kind, 200)
                start = time.perf_counter()
                oracle.fit(*data)
                row[kind] = (time.perf_counter() - start, mean_loss(oracle, *data))
            results[problem] = row
        return results


class TrainingLoss(Rounds200):
    """Mean biased logistic loss on the training rows after 200 rounds."""

    params = (list(PROBLEMS), ["BoostedTrees", "LightGBM"])
    param_names = ["problem", "oracle"]

    def track_loss_200_rounds(self, results, problem, oracle):
        return results[problem][oracle][1]

    track_loss_200_rounds.unit = "nats per row"


class Ratios(Rounds200):
    """BoostedTrees / LightGBM, measured back to back in one process.

    Goals: time per round <= 1.5, training loss after 200 rounds <= 1.02.
    """

    params = list(PROBLEMS)
    param_names = ["problem"]

    def track_time_ratio(self, results, problem):
        return results[problem]["BoostedTrees"][0] / results[problem]["LightGBM"][0]

    def track_loss_ratio(self, results, problem):
        return results[problem]["BoostedTrees"][1] / results[problem]["LightGBM"][1]

    track_time_ratio.unit = "ratio"
    track_loss_ratio.unit = "ratio"


class GridRatios(common.Benchmark):
    """A few cells of the wide-data grid (``compare_trees.py --grid`` runs all 18).

    Each tracks the time ``BoostedTrees`` (one tree per class, at most 31 leaves of at least
    1% of the subsample, one Newton step per leaf: the configuration within 1.5x of
    LightGBM in every cell, docs/design.md section 7) needs to reach the training loss
    ``LightGBM`` (31 leaves, ``min_sum_hessian_in_leaf=1``) reaches in the given rounds, over
    LightGBM's time. Cells are ``ROWSxFEATURESxCLASSES:ROUNDS``, small enough for a few
    seconds each. Goal: <= 1.5.
    """

    params = ["20000x2x2:30", "20000x12x4:20", "20000x128x4:10", "20000x12x26:5"]
    param_names = ["cell"]

    def track_time_to_lightgbm_loss_ratio(self, cell):
        shape, rounds = cell.split(":")
        n, d, k = (int(part) for part in shape.split("x"))
        return grid_cell(n, d, k, rounds=int(rounds), newton_steps=1,
                         lgbm_min_hessian=1.0)["ratio"]

    track_time_to_lightgbm_loss_ratio.unit = "ratio"


#: The wide problem: 20,000 rows, 128 features, 26 classes (a cell of ``GRID``).
WIDE = (20_000, 128, 26)


def lightgbm_multiclass(features: np.ndarray, bias: np.ndarray, labels: np.ndarray, rounds: int,
                        seed: int = 0) -> tuple[float, float]:
    """Seconds and mean training loss of LightGBM's own ``multiclass`` objective, the bias as init
    score, with the parameters of ``LightGBM(n_rounds=rounds)`` (dataset construction timed)."""
    import lightgbm

    from slr.oracles.base import biased_logistic_loss
    from slr.oracles.lightgbm_adapter import LightGBM

    n, k = bias.shape
    params = dict(LightGBM(n_rounds=rounds, random_state=seed).lightgbm_params(n, k), objective="multiclass")
    start = time.perf_counter()
    dataset = lightgbm.Dataset(features, label=labels, init_score=bias.ravel(order="F"), params=params)
    booster = lightgbm.train(params, dataset, num_boost_round=rounds)
    seconds = time.perf_counter() - start
    scores = booster.predict(features, raw_score=True, num_threads=params["num_threads"])
    return seconds, biased_logistic_loss(scores, bias, labels)[0] / n


def defaults_cell(n: int, d: int, k: int, rounds: int = 30, reference: str = "multiclass",
                  max_factor: float = 3.0, seed: int = 0) -> dict:
    """Time ``BoostedTrees()`` with its defaults needs to reach LightGBM's training loss after
    ``rounds`` rounds, over LightGBM's time (one process, one after the other).

    ``reference``: ``"multiclass"`` (LightGBM's own objective, :func:`lightgbm_multiclass`) or
    ``"adapter"`` (the ``LightGBM`` oracle, whose Hessian floor and halvings make its rounds
    smaller). Ours runs ``max_factor * rounds`` rounds (the first rounds of a longer fit are the
    same rounds); its time is the ``round_seconds_`` of the first round that reaches the loss,
    or of the last round when none does (``reached`` False).
    """
    from slr.oracles.lightgbm_adapter import LightGBM
    from slr.oracles.trees import BoostedTrees

    data = make_grid_problem(n, d, k, seed)
    if reference == "multiclass":
        lgbm_seconds, target = lightgbm_multiclass(*data, rounds, seed)
    elif reference == "adapter":
        lgbm = LightGBM(n_rounds=rounds, random_state=seed)
        start = time.perf_counter()
        lgbm.fit(*data)
        lgbm_seconds = time.perf_counter() - start
        target = mean_loss(lgbm, *data)
    else:
        raise ValueError(f"reference must be 'multiclass' or 'adapter', got {reference!r}")
    ours = BoostedTrees(n_rounds=int(max_factor * rounds), random_state=seed).fit(*data)
    reached, loss = first_round_reaching(ours, *data, target)
    ours_seconds = ours.round_seconds_[reached if reached >= 0 else -1]
    return {"lgbm_seconds": lgbm_seconds, "lgbm_loss": target, "reached": reached >= 0, "tree": ours.tree_,
            "ours_rounds": (reached if reached >= 0 else ours.subset_loss_.shape[0] - 1) + 1,
            "ours_seconds": float(ours_seconds), "ours_loss": loss, "ratio": float(ours_seconds / lgbm_seconds)}


class DefaultsRatios(common.Benchmark):
    """``BoostedTrees()`` with its defaults on the wide problem (:data:`WIDE`): its time to reach
    LightGBM's 30-round training loss over LightGBM's time, against LightGBM's own multiclass
    objective and against the ``LightGBM`` oracle. Goal: <= 1.5."""

    params = ["multiclass", "adapter"]
    param_names = ["reference"]
    timeout = 900

    def track_defaults_time_to_lightgbm_loss_ratio(self, reference):
        return defaults_cell(*WIDE, rounds=30, reference=reference)["ratio"]

    track_defaults_time_to_lightgbm_loss_ratio.unit = "ratio"


def refit_sequence(problem: str, n_fits: int = 8, n_rounds: int = 20, shift: float = 0.2,
                   seed: int = 0) -> tuple[Any, int]:
    """The structured learner's use of a boosting oracle, on a tenth of a :data:`PROBLEMS` problem:
    ``n_fits`` fits of ``n_rounds`` per-class rounds on the same rows, each for the last bias moved
    by ``shift`` (normal noise), with the validation rows (a second problem) predicted after every
    fit. Returns the oracle and how many fits continued from the function they replaced."""
    from slr.oracles.trees import BoostedTrees

    features, bias, labels = (a[::10].copy() for a in make_problem(problem, seed))
    validation = make_problem(problem, seed + 1)[0][::10].copy()
    rng = np.random.default_rng(seed)
    oracle = BoostedTrees(n_rounds=n_rounds, subsample=SUBSAMPLE // 2, tree="per_class", n_jobs=THREADS,
                          random_state=seed)
    continued = 0
    for _ in range(n_fits):
        oracle.fit(features, bias, labels)
        oracle.decision_function(validation)
        continued += oracle.continued_
        bias = bias + shift * rng.normal(size=bias.shape)
    return oracle, continued


class GuardedRefits(common.Benchmark):
    """What a fit that must not end above the function it replaces costs, as the learner refits:
    :func:`refit_sequence` timed, and the number of its fits that continued (``BoostedTrees``,
    Notes: a fit after one that continued skips the fit from 0, guarded rounds take their loss in
    one pass, predictions walk only the trees added since)."""

    params = list(PROBLEMS)
    param_names = ["problem"]

    def time_refit_sequence(self, problem):
        refit_sequence(problem)

    def track_continued_fits(self, problem):
        return refit_sequence(problem)[1]

    track_continued_fits.unit = "fits of 8"
