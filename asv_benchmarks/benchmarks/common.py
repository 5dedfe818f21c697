"""What every benchmark shares: the ``Benchmark`` base, the estimator mixins, the data helpers.

``Benchmark`` holds one timeout and the repetition settings of a profile, read once from
``SLR_BENCH_PROFILE``: ``regular`` (default: asv calibrates ``number``, 3 to 10 samples within
20 s) or ``fast`` (one sample of one call, no warm-up). ``asv run --quick`` overrides both.

The ``Estimator`` mixin follows scikit-learn's asv suite: ``setup_cache`` builds the data and
fits the estimator once per parameter combination (asv pickles the result), ``setup`` loads
them, and fitting, prediction and scores are separate benchmarks, so no ``track_`` method
fits. asv keys a cache by the module and line of the ``setup_cache`` definition, so every
estimator benchmark defines its own ``setup_cache`` returning ``self.fit_all()`` (inherited
from here, all of them would share one cache): it is abstract, as are ``make_data`` and
``make_estimator``, and asv skips abstract classes when it discovers benchmarks.
"""
from __future__ import annotations

import itertools
import os
import timeit
from abc import ABC, abstractmethod

import numpy as np

PROFILES = {
    "fast": dict(number=1, repeat=1, warmup_time=0.0, min_run_count=1),
    "regular": dict(number=0, repeat=(3, 10, 20.0), warmup_time=0.1, min_run_count=2),
}
PROFILE = os.environ.get("SLR_BENCH_PROFILE", "regular")
if PROFILE not in PROFILES:
    raise ValueError(f"SLR_BENCH_PROFILE must be one of {sorted(PROFILES)}, got {PROFILE!r}")


class Benchmark:
    """Base of every benchmark class: the shared timeout and the profile's repetitions."""

    timer = timeit.default_timer
    timeout = 600
    number = PROFILES[PROFILE]["number"]
    repeat = PROFILES[PROFILE]["repeat"]
    warmup_time = PROFILES[PROFILE]["warmup_time"]
    min_run_count = PROFILES[PROFILE]["min_run_count"]


def param_grid(params) -> list[tuple]:
    """Every parameter combination of an asv ``params`` value (one list or a list of lists)."""
    if params and isinstance(params[0], (list, tuple)):
        return list(itertools.product(*params))
    return [(value,) for value in params]


class Estimator(ABC):
    """Mixin timing ``fit`` and ``predict`` and tracking train and test scores of a learner.

    The hooks ``fit``, ``predict`` and ``score`` call the structured learner contract;
    ``OracleEstimator`` adapts them to logistic oracles.
    """

    @abstractmethod
    def setup_cache(self):
        """``return self.fit_all()``, defined in each benchmark class (see the module docstring)."""

    @abstractmethod
    def make_data(self, *params) -> tuple:
        """``(X, Y, X_test, Y_test)`` for one parameter combination."""

    @abstractmethod
    def make_estimator(self, *params):
        """A new, unfitted estimator for one parameter combination."""

    def fit_all(self) -> dict:
        """``{params: (data, fitted estimator)}`` for every parameter combination."""
        cache = {}
        for params in param_grid(self.params):
            data = self.make_data(*params)
            cache[params] = (data, self.fit(self.make_estimator(*params), data[0], data[1]))
        return cache

    def setup(self, cache, *params):
        (self.X, self.Y, self.X_test, self.Y_test), self.estimator = cache[params]

    @staticmethod
    def fit(estimator, X, Y):
        return estimator.fit(X, Y)

    @staticmethod
    def predict(estimator, X):
        return estimator.predict(X)

    @staticmethod
    def score(estimator, X, Y) -> float:
        return float(estimator.score(X, Y))

    def time_fit(self, cache, *params):
        self.fit(self.make_estimator(*params), self.X, self.Y)

    def peakmem_fit(self, cache, *params):
        self.fit(self.make_estimator(*params), self.X, self.Y)

    def time_predict(self, cache, *params):
        self.predict(self.estimator, self.X_test)

    def track_train_score(self, cache, *params):
        return self.score(self.estimator, self.X, self.Y)

    def track_test_score(self, cache, *params):
        return self.score(self.estimator, self.X_test, self.Y_test)

    track_train_score.unit = "accuracy"
    track_test_score.unit = "accuracy"


class OracleEstimator(Estimator):
    """``Estimator`` for logistic oracles: ``X`` is ``(features, bias)``, ``Y`` the labels.

    ``predict`` is ``decision_function``; the score is the accuracy of the biased argmax
    ``argmax_k bias + g(x, k)``, and ``track_train_loss`` the mean biased logistic loss.
    """

    @staticmethod
    def fit(estimator, X, Y):
        return estimator.fit(*X, Y)

    @staticmethod
    def predict(estimator, X):
        return estimator.decision_function(X[0])

    @staticmethod
    def score(estimator, X, Y) -> float:
        features, bias = X
        return float(np.mean(np.argmax(bias + estimator.decision_function(features), axis=1) == Y))

    def track_train_loss(self, cache, *params):
        return self.estimator.loss(*self.X, self.Y) / self.Y.shape[0]

    track_train_loss.unit = "nats per row"


def denoising(n_images: int, size: int, seed: int = 0):
    """Denoising examples with the blur scaled to the image (``sigma = 10 * size / 100``)."""
    from slr.datasets.denoising import make_denoising

    return make_denoising(n_images, size, sigma=max(1.0, 10.0 * size / 100), random_state=seed)


def letters(n_train: int, n_test: int):
    """OCR words of fold 1 (train) and of the other folds (test), drawn as the suite's profiles draw
    them (:class:`slr.suite.methods.LettersData`)."""
    from slr.datasets import load_letters
    from slr.suite.methods import LettersData

    X, Y, folds = load_letters()
    tr, te = LettersData(n_train, n_test).indices(folds)
    return [X[i] for i in tr], [Y[i] for i in tr], [X[i] for i in te], [Y[i] for i in te]


def biased_problem(n_rows: int, n_classes: int, seed: int = 0):
    """A denoising-like biased logistic problem: features ``(phi, 1)``, normal biases.

    ``n_classes = 2``: unary rows (``phi ~ U[0, .9]`` for label 0, ``U[.1, 1]`` for 1);
    ``n_classes = 4``: pair labels ``2a + b`` with equal ends 90% of the time.
    """
    rng = np.random.default_rng(seed)
    if n_classes == 2:
        labels = rng.integers(0, 2, n_rows)
        phi = rng.uniform(0.0, 0.9, n_rows) + 0.1 * labels
    else:
        a = rng.integers(0, 2, n_rows)
        b = np.where(rng.random(n_rows) < 0.9, a, 1 - a)
        labels = 2 * a + b
        phi = rng.uniform(0.0, 0.8, n_rows) + 0.2 * (a != b)
    features = np.column_stack([phi, np.ones(n_rows)])
    bias = rng.normal(size=(n_rows, n_classes))
    return features, bias, labels
