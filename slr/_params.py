"""Declarative parameter validation for every estimator of the project.

An estimator (slr's learner, an oracle, a baseline) states its parameters' admissible values once,
as a class attribute ``_parameter_constraints``: a mapping from each ``__init__`` parameter to a
constraint or a tuple of alternatives. :func:`validate_params` checks them all at the start of
``fit`` and returns the converted values, raising a ``ValueError`` that names the parameter. The
constraints reuse the checkers of :mod:`slr.validation`, so every estimator words its errors the
same way.

>>> class Example:
...     _parameter_constraints = {"max_iter": Integer(1), "tol": Real(0.0),
...                               "n_states": (None, Integer(1))}
...     def get_params(self, deep=False):
...         return {"max_iter": 10, "tol": 1e-6, "n_states": None}
>>> validate_params(Example())
{'max_iter': 10, 'tol': 1e-06, 'n_states': None}
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Union

from slr.validation import C_INT_MAX, check_bool, check_int, check_n_jobs, check_option, check_real, check_seed

__all__ = [
    "Boolean",
    "Checked",
    "Constraint",
    "Integer",
    "NJobs",
    "Options",
    "RandomState",
    "Real",
    "Satisfies",
    "validate_params",
]


class Constraint:
    """One admissible set of values: ``check`` returns the value converted or raises ValueError."""

    def check(self, value: Any, name: str) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass(frozen=True)
class Integer(Constraint):
    """An integer in ``[low, high]`` (``high=None``: no upper bound); bools are refused."""

    low: int = 0
    high: int | None = C_INT_MAX

    def check(self, value: Any, name: str) -> int:
        return check_int(value, name, self.low, self.high)

    def describe(self) -> str:
        return f"an integer >= {self.low}" if self.high is None else f"an integer in [{self.low}, {self.high}]"


@dataclass(frozen=True)
class Real(Constraint):
    """A finite real in the interval from ``low`` to ``high``, open at the ends marked open."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def check(self, value: Any, name: str) -> float:
        return check_real(value, name, self.low, self.high, low_open=self.low_open, high_open=self.high_open)

    def describe(self) -> str:
        if self.low == -math.inf and self.high == math.inf:
            return "a finite real number"
        if self.high == math.inf:
            return f"a real number {'>' if self.low_open else '>='} {self.low:g}"
        if self.low == -math.inf:
            return f"a real number {'<' if self.high_open else '<='} {self.high:g}"
        return (f"a real number in {'(' if self.low_open else '['}{self.low:g}, "
                f"{self.high:g}{')' if self.high_open else ']'}")


@dataclass(frozen=True)
class Options(Constraint):
    """One of a fixed set of values (strings compared by equality, other values by identity)."""

    options: tuple

    def check(self, value: Any, name: str) -> Any:
        return check_option(value, name, self.options)

    def describe(self) -> str:
        return "one of " + ", ".join(repr(option) for option in self.options)


@dataclass(frozen=True)
class Boolean(Constraint):
    """``True`` or ``False`` (``bool`` or ``numpy.bool_``; not 0/1)."""

    def check(self, value: Any, name: str) -> bool:
        return check_bool(value, name)

    def describe(self) -> str:
        return "True or False"


@dataclass(frozen=True)
class RandomState(Constraint):
    """A seed: None, a non-negative integer, a numpy Generator or RandomState. The value is kept
    as given; :func:`slr.validation.check_generator` turns it into the Generator ``fit`` draws from."""

    def check(self, value: Any, name: str) -> Any:
        return check_seed(value, name)

    def describe(self) -> str:
        return "None, a non-negative integer or a numpy Generator"


@dataclass(frozen=True)
class NJobs(Constraint):
    """A number of threads: None or -1 (all cores), or an integer in ``[1, 2**31 - 1]``."""

    def check(self, value: Any, name: str) -> int | None:
        return check_n_jobs(value, name)

    def describe(self) -> str:
        return f"None, -1 (all cores) or an integer in [1, {C_INT_MAX}]"


@dataclass(frozen=True)
class Satisfies(Constraint):
    """A value accepted by ``predicate``; ``description`` says what that is."""

    predicate: Callable[[Any], bool]
    description: str

    def check(self, value: Any, name: str) -> Any:
        if not self.predicate(value):
            raise ValueError(f"{name} must be {self.description}, got {value!r}")
        return value

    def describe(self) -> str:
        return self.description


@dataclass(frozen=True)
class Checked(Constraint):
    """A value that ``checker(value, name)`` accepts; the constraint returns its conversion.

    For parameters with a checker of their own whose messages say more than an interval can
    (e.g. :func:`slr.graph.check_epsilon` on subnormal or overflowing weights).
    """

    checker: Callable[[Any, str], Any]
    description: str

    def check(self, value: Any, name: str) -> Any:
        return self.checker(value, name)

    def describe(self) -> str:
        return self.description


Spec = Union[Constraint, None, tuple]


def _check_one(spec: Spec, value: Any, name: str) -> Any:
    """Check ``value`` against one constraint or a tuple of alternatives (``None`` admits None)."""
    alternatives = spec if isinstance(spec, tuple) else (spec,)
    if value is None and None in alternatives:
        return None
    constraints = [c for c in alternatives if c is not None]
    if len(constraints) == 1 and len(alternatives) == 1:
        return constraints[0].check(value, name)
    for constraint in constraints:
        try:
            return constraint.check(value, name)
        except ValueError:
            continue
    accepted = [c.describe() for c in constraints] + (["None"] if None in alternatives else [])
    raise ValueError(f"{name} must be {' or '.join(accepted)}, got {value!r}")


def validate_params(estimator: Any, constraints: Mapping[str, Spec] | None = None, *,
                    params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Check every parameter of ``estimator`` against its declared constraints.

    Parameters
    ----------
    estimator : object
        With ``get_params`` unless ``params`` is given.
    constraints : mapping, optional
        ``estimator._parameter_constraints`` when None. Parameters left out of it are not checked
        (e.g. nested oracles, checked by the caller).
    params : mapping, optional
        The values to check, for objects that are not scikit-learn estimators (e.g.
        :class:`slr.models.PairwiseModel`, which checks its constructor's arguments);
        ``estimator.get_params(deep=False)`` when None.

    Returns
    -------
    dict
        The checked parameters, converted (ints as ``int``, reals as ``float``).

    Raises
    ------
    ValueError
        Naming the first parameter whose value is not admissible.
    """
    constraints = type(estimator)._parameter_constraints if constraints is None else constraints
    params = estimator.get_params(deep=False) if params is None else params
    checked = {}
    for name, spec in constraints.items():
        value = params[name]
        checked[name] = _check_one(spec, value, name)
    return checked
