"""Logistic-regression oracles: the function classes of the structured learner.

Each oracle maximises a biased multinomial logistic likelihood over its function class
(see :class:`LogisticOracle`), for integer labels or soft targets and optional row weights
(:mod:`slr.oracles.targets`); the structured learner calls one per factor type.
"""
from slr.oracles.base import (LogisticOracle, OracleTags, biased_logistic_loss, check_logistic_problem,
                              check_sample_weight, get_oracle_tags)
from slr.oracles.lightgbm_adapter import LightGBM
from slr.oracles.linear import Linear
from slr.oracles.mlp import MLP
from slr.oracles.simple import Constant, Zero
from slr.oracles.trees import BoostedTrees

__all__ = [
    "BoostedTrees",
    "Constant",
    "LightGBM",
    "Linear",
    "LogisticOracle",
    "MLP",
    "OracleTags",
    "Zero",
    "biased_logistic_loss",
    "check_logistic_problem",
    "check_sample_weight",
    "get_oracle_tags",
]
