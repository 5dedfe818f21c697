"""The experiments of the suite: the one place an experiment is registered.

Each entry is an :class:`slr.suite.experiment.Experiment` (its settings in every profile are its
``specs``), given the writer of its report; those with a ``help`` are ``slr`` subcommands and
part of ``slr report``, in this order. A new experiment takes one module and one line here.
"""
from __future__ import annotations

from collections.abc import Iterable

from slr.suite import (baselines, bound, calibration, denoising, generalisation, nlp, partial_labels,
                       render_baselines, render_bound, render_calibration, render_denoising, render_generalisation,
                       render_nlp, render_partial_labels, tuning)
from slr.suite.experiment import Experiment

__all__ = ["EXPERIMENTS", "REPORTED", "get", "with_needs"]

EXPERIMENTS: dict[str, Experiment] = {experiment.name: experiment for experiment in (
    denoising.Denoising(render_denoising.write_report),
    tuning.Tuning(),
    baselines.Baselines(render_baselines.write_report),
    bound.Bound(render_bound.write_report),
    calibration.Calibration(render_calibration.write_report),
    generalisation.Generalisation(render_generalisation.write_report),
    partial_labels.PartialLabels(render_partial_labels.write_report),
    nlp.Nlp(render_nlp.write_report),
)}
#: The experiments with a report of their own: ``slr report`` runs these.
REPORTED = tuple(name for name, experiment in EXPERIMENTS.items() if experiment.help)


def get(name: str) -> Experiment:
    """The experiment called ``name``."""
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise ValueError(f"experiment must be one of {sorted(EXPERIMENTS)}, got {name!r}") from None


def with_needs(names: Iterable[str]) -> list[Experiment]:
    """The experiments ``names`` and those they need, each after what it needs."""
    ordered: list[Experiment] = []

    def visit(name: str) -> None:
        experiment = get(name)
        for need in experiment.needs:
            visit(need)
        if experiment not in ordered:
            ordered.append(experiment)

    for name in names:
        visit(name)
    return ordered
