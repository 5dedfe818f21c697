"""One iteration of each baseline on small denoising and OCR-letters problems."""
from __future__ import annotations

import baselines

from .common import denoising, letters

BASELINES = ["OneSlackSSVM", "NSlackSSVM", "SubgradientSSVM", "StructuredPerceptron",
             "PiecewiseTraining", "GradientAlternation"]
DATASETS = ["denoising", "letters"]


def make(name: str, max_iter: int, n_states: int):
    return getattr(baselines, name)(max_iter=max_iter, n_states=n_states)


def load(dataset: str):
    if dataset == "denoising":
        X, Y = denoising(4, 32)
        Xt, Yt = denoising(4, 32, seed=1)
        return X, Y, Xt, Yt, 2
    return (*letters(100, 100), 26)


class BaselineIteration:
    """Wall time and peak memory of a one-iteration fit."""

    params = (DATASETS, BASELINES)
    param_names = ["dataset", "baseline"]
    number = 1
    repeat = 3
    timeout = 300

    def setup(self, dataset, baseline):
        self.X, self.Y, _, _, self.L = load(dataset)
        getattr(baselines, baseline)   # import the module outside the timed body

    def time_one_iteration(self, dataset, baseline):
        make(baseline, 1, self.L).fit(self.X, self.Y)

    def peakmem_one_iteration(self, dataset, baseline):
        make(baseline, 1, self.L).fit(self.X, self.Y)


class BaselineAccuracy:
    """Test error after 10 iterations (accuracy regressions next to speed)."""

    params = (DATASETS, BASELINES)
    param_names = ["dataset", "baseline"]
    number = 1
    repeat = 1
    timeout = 600

    def setup(self, dataset, baseline):
        self.X, self.Y, self.Xt, self.Yt, self.L = load(dataset)

    def track_test_error(self, dataset, baseline):
        model = make(baseline, 10, self.L).fit(self.X, self.Y)
        return 1.0 - model.score(self.Xt, self.Yt)

    track_test_error.unit = "error rate"
