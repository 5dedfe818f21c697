"""Run-size profiles: ``tiny`` (tests, seconds), ``quick`` (``make report``), ``full`` (paper).

A profile is one typed, frozen spec per experiment; each experiment's module holds its specs
(``denoising.SPECS``, ``methods.SPECS`` for the baselines and their tuning, ``bound.SPECS``)
with the reasons for their values.

``quick`` is sized for ``make report`` on 2 cores: its cells' CPU seconds, which a run's log gives
per task, divided over the 2 workers (the costliest task first) make its run time. The sizes cut
for that, each where its own spec says why: Table 1 on 8 + 8 images, the held-out grid on 20
training examples per problem, pystruct's learners on denoising stopped at 25 (1-slack, with the
inference cache of pystruct's grid examples) and 15 (n-slack) iterations, our subgradient SSVM and
gradient alternation on denoising at 50, the three costliest letters validation fits on part of
the C grid, and on letters our subgradient SSVM and pystruct's Frank-Wolfe SSVM at 25 epochs, both
n-slack SSVMs at 15 iterations and gradient alternation at 75 (``methods._LETTERS_BUDGETS_QUICK``),
both 1-slack SSVMs to the tolerance of pystruct's letters example (``methods._LETTERS_TOL``).
"""
from __future__ import annotations

from slr.suite.denoising import FUNCTION_CLASSES
from slr.suite.experiment import Profile
from slr.suite.methods import PEER_LEARNERS
from slr.suite.registry import EXPERIMENTS

__all__ = ["Profile", "PROFILES", "get_profile", "FUNCTION_CLASSES", "PEER_LEARNERS"]


PROFILES: dict[str, Profile] = {
    name: Profile(name, {experiment.name: experiment.specs[name] for experiment in EXPERIMENTS.values()
                         if name in experiment.specs})
    for name in ("tiny", "quick", "full")
}


def get_profile(name: str) -> Profile:
    """The profile called ``name`` (``tiny``, ``quick`` or ``full``)."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"profile must be one of {sorted(PROFILES)}, got {name!r}") from None
