"""The structured learner: one learning iteration, peak memory of a fit, test error tracking."""
from __future__ import annotations

from slr.learner import StructuredLogisticRegression
from slr_suite.oracles import make_oracle

from .common import denoising

CLASSES = ["Linear", "Boost", "MLP"]


def learner(kind: str, max_iter: int, mp_sweeps: int = 25):
    cfg = dict(trees=dict(n_rounds=20, subsample=5000), mlp=dict(n_epochs=1, batch_size=1000))
    return StructuredLogisticRegression(
        unary=make_oracle(kind, "unary", cfg, 0), pairwise=make_oracle(kind, "pairwise", cfg, 0),
        epsilon=0.1, max_iter=max_iter, mp_sweeps=mp_sweeps, monitor=False, random_state=0)


class LearnerIteration:
    """One learning iteration (unary fit, 25 sweeps, pairwise fit, 25 sweeps) on 16 32x32 images."""

    params = CLASSES
    param_names = ["function_class"]
    number = 1
    repeat = 3
    timeout = 300

    def setup(self, kind):
        self.X, self.Y = denoising(16, 32)

    def time_one_iteration(self, kind):
        learner(kind, 1).fit(self.X, self.Y)

    def peakmem_fit_one_iteration(self, kind):
        learner(kind, 1).fit(self.X, self.Y)


class LearnerAccuracy:
    """Test error after 8 iterations on 8 + 8 denoising images of 32x32 (same class both factors)."""

    params = CLASSES
    param_names = ["function_class"]
    number = 1
    repeat = 1
    timeout = 600

    def setup(self, kind):
        self.X, self.Y = denoising(8, 32, seed=0)
        self.Xt, self.Yt = denoising(8, 32, seed=1)

    def track_test_error(self, kind):
        model = learner(kind, 8).fit(self.X, self.Y)
        return 1.0 - model.score(self.Xt, self.Yt)

    track_test_error.unit = "error rate"
