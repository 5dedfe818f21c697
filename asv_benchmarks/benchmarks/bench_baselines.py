"""Each baseline on small denoising (4 + 4 images of 32x32) and OCR-letters (100 + 100 words).

``Baseline`` times a 10-iteration fit and MAP decoding of the test set, records the fit's
peak memory and tracks the fitted model's train and test accuracy.
"""
from __future__ import annotations

from slr import baselines

from . import common

BASELINES = ["OneSlackSSVM", "NSlackSSVM", "SubgradientSSVM", "StructuredPerceptron",
             "PiecewiseTraining", "GradientAlternation"]
DATASETS = {"denoising": 2, "letters": 26}


class Baseline(common.Estimator, common.Benchmark):
    """10 iterations of a baseline through the shared learner contract."""

    params = (list(DATASETS), BASELINES)
    param_names = ["dataset", "baseline"]

    def setup_cache(self):
        return self.fit_all()

    def make_data(self, dataset, baseline):
        if dataset == "denoising":
            return (*common.denoising(4, 32), *common.denoising(4, 32, seed=1))
        return common.letters(100, 100)

    def make_estimator(self, dataset, baseline):
        return getattr(baselines, baseline)(max_iter=10, n_states=DATASETS[dataset],
                                            random_state=0)
