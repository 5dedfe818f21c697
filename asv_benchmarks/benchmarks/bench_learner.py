"""The structured learner on 8 + 8 denoising images of 32x32 (same function class both factors).

``Learner`` times an 8-iteration fit (each iteration: unary fit, 25 sweeps, pairwise fit,
25 sweeps) and MAP decoding of the test images, records the fit's peak memory and tracks
the fitted model's train and test accuracy.
"""
from __future__ import annotations

from slr.learner import StructuredLogisticRegression
from slr_suite.oracles import make_oracle

from . import common

CLASSES = ["Linear", "Boost", "MLP"]


def learner(kind: str, max_iter: int, mp_sweeps: int = 25):
    """The learner with ``kind`` oracles for both factors (small boosting rounds, 1 MLP epoch)."""
    cfg = dict(trees=dict(n_rounds=20, subsample=5000), mlp=dict(n_epochs=1, batch_size=1000))
    return StructuredLogisticRegression(
        unary=make_oracle(kind, "unary", cfg, 0), pairwise=make_oracle(kind, "pairwise", cfg, 0),
        epsilon=0.1, max_iter=max_iter, mp_sweeps=mp_sweeps, n_states=2, monitor=False,
        random_state=0)


class Learner(common.Estimator, common.Benchmark):
    """8 learning iterations on 8 training images, MAP decoding of 8 test images."""

    params = CLASSES
    param_names = ["function_class"]

    def setup_cache(self):
        return self.fit_all()

    def make_data(self, kind):
        return (*common.denoising(8, 32, seed=0), *common.denoising(8, 32, seed=1))

    def make_estimator(self, kind):
        return learner(kind, 8)
