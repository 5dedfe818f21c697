"""Over-relaxation of the function updates (docs/design.md section 1): after a fit of an oracle
linear in its parameters, move them to ``before + omega * (fitted - before)``, and keep the exact
fit where that raises the objective."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

__all__ = ["linear_parameters", "relaxed_step"]


def linear_parameters(oracle: Any, names: tuple[str, ...]) -> dict[str, np.ndarray] | None:
    """Copies of a fitted oracle's parameters ``names`` (its tags' ``linear_parameters``), or
    None if it has none (yet)."""
    if not names or not all(hasattr(oracle, name) for name in names):
        return None
    return {name: np.array(getattr(oracle, name), dtype=np.float64) for name in names}


def relaxed_step(oracle: Any, names: tuple[str, ...], before: dict[str, np.ndarray] | None, omega: float,
                  set_potentials: Callable[[bool], None], objective: Callable[[], float],
                  previous: float) -> float:
    """Move a just-fitted oracle to ``before + omega * (fitted - before)``; keep the exact fit
    if that raises the objective above ``previous`` (its value before the fit) or gives potentials
    out of range.

    ``set_potentials(exact)`` sets the potentials of the oracle's current functions; ``exact``
    says they are the fitted ones (not moved by the relaxation). ``objective()`` is the quantity
    the exact fits descend: ``J = R + eps * penalties`` (R for oracles without a penalty).
    Returns it.
    """
    fitted = linear_parameters(oracle, names) if before is not None else None
    if before is None or fitted is None or not all(fitted[n].shape == before[n].shape for n in before):
        set_potentials(True)
        return objective()
    for name, old in before.items():
        setattr(oracle, name, old + omega * (fitted[name] - old))
    try:
        set_potentials(False)
        value = objective()
    except ValueError:   # scores too large for the potentials' range
        value = math.inf
    if not value <= previous:
        for name, exact in fitted.items():
            setattr(oracle, name, exact)
        set_potentials(True)
        value = objective()
    return value

