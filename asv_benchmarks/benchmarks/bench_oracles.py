"""Each logistic oracle's fit on a fixed biased problem (LightGBM beside our boosted trees)."""
from __future__ import annotations

from slr import oracles

from .common import biased_problem

ORACLES = ["Zero", "Constant", "Linear", "BoostedTrees", "LightGBM", "MLP"]
PROBLEMS = {"unary_20k_K2": (20_000, 2), "pairwise_40k_K4": (40_000, 4)}


def make(name: str):
    if name == "BoostedTrees":
        return oracles.BoostedTrees(n_rounds=20, subsample=5000, random_state=0)
    if name == "LightGBM":
        return oracles.LightGBM(n_rounds=20, subsample=5000, random_state=0)
    if name == "MLP":
        return oracles.MLP(n_epochs=1, batch_size=1000, random_state=0)
    return getattr(oracles, name)()


class OracleFit:
    """Wall time and peak memory of one fit (20 boosting rounds, 1 MLP epoch)."""

    params = (list(PROBLEMS), ORACLES)
    param_names = ["problem", "oracle"]
    number = 1
    repeat = 3
    timeout = 300

    def setup(self, problem, oracle):
        self.data = biased_problem(*PROBLEMS[problem])

    def time_fit(self, problem, oracle):
        make(oracle).fit(*self.data)

    def peakmem_fit(self, problem, oracle):
        make(oracle).fit(*self.data)


class OracleLoss:
    """Mean biased logistic loss after one fit: a quality number beside the time."""

    params = (list(PROBLEMS), ORACLES)
    param_names = ["problem", "oracle"]
    number = 1
    repeat = 1
    timeout = 300

    def setup(self, problem, oracle):
        self.data = biased_problem(*PROBLEMS[problem])

    def track_mean_loss(self, problem, oracle):
        model = make(oracle).fit(*self.data)
        return model.loss(*self.data) / self.data[0].shape[0]

    track_mean_loss.unit = "nats per row"
