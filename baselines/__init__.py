"""Baselines for slr: structural SVMs (cutting-plane, subgradient, block-coordinate Frank-Wolfe),
structured perceptron, piecewise training, gradient alternation, and pystruct 0.3.2 as the outside
peer (:mod:`slr.baselines.peer`).

Names are imported lazily, so that ``python -m slr.baselines.peer.setup_env`` still runs on a
bare interpreter without numpy.
"""
from __future__ import annotations

_EXPORTS = {
    "FrankWolfeSSVM": "slr.baselines.frank_wolfe",
    "GradientAlternation": "slr.baselines.gradient_alternation",
    "LatentSSVM": "slr.baselines.latent",
    "NSlackSSVM": "slr.baselines.ssvm",
    "OneSlackSSVM": "slr.baselines.ssvm",
    "PiecewiseTraining": "slr.baselines.piecewise",
    "StructuredData": "slr.baselines.features",
    "StructuredPerceptron": "slr.baselines.perceptron",
    "SubgradientSSVM": "slr.baselines.ssvm",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
