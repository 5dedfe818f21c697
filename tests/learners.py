"""Every learner of the shared contract (slr.estimator), slr's and the baselines', each made small
enough for the contract's tests; each takes max_iter, n_states and random_state."""
from __future__ import annotations

from slr.baselines import (
    FrankWolfeSSVM,
    GradientAlternation,
    NSlackSSVM,
    OneSlackSSVM,
    PiecewiseTraining,
    StructuredPerceptron,
    SubgradientSSVM,
)
from slr import StructuredLogisticRegression
from slr.oracles import MLP, Constant, Linear

LEARNERS = {
    "slr-linear": lambda **kw: StructuredLogisticRegression(Linear(), Linear(), max_sweeps=6, **kw),
    "slr-mlp": lambda **kw: StructuredLogisticRegression(MLP(n_hidden=4), Constant(), max_sweeps=6, **kw),
    "OneSlackSSVM": OneSlackSSVM,
    "NSlackSSVM": NSlackSSVM,
    "SubgradientSSVM": lambda **kw: SubgradientSSVM(batch_size=1, **kw),
    "FrankWolfeSSVM": FrankWolfeSSVM,
    "StructuredPerceptron": StructuredPerceptron,
    "PiecewiseTraining": PiecewiseTraining,
    "GradientAlternation": GradientAlternation,
}
