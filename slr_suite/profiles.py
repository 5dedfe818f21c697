"""Run-size profiles: ``tiny`` (tests, seconds), ``quick`` (about 10 min on 2 cores), ``full`` (paper).

A profile is one typed, frozen spec per experiment; each experiment's module holds its specs
(``denoising.SPECS``, ``methods.SPECS`` for the baselines and their tuning, ``bound.SPECS``)
with the reasons for their values.
"""
from __future__ import annotations

from slr_suite.denoising import FUNCTION_CLASSES
from slr_suite.experiment import Profile
from slr_suite.methods import PEER_LEARNERS
from slr_suite.registry import EXPERIMENTS

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
