"""Validation of hyperparameters and seeds, shared by the inference API, the oracles, the learner
and the baselines.

Every checker takes the value first and its name second, returns the value converted, and raises
a ``ValueError`` that names the argument. Bools are refused where a number is expected.
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any, Sequence, cast

import numpy as np

__all__ = ["C_INT_MAX", "check_bool", "check_generator", "check_int", "check_n_jobs", "check_option",
           "check_real", "check_seed"]

#: Largest C ``int``: sweep, step and thread counts reach compiled code as one.
C_INT_MAX = 2**31 - 1


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def check_int(value: Any, name: str, minimum: int = 0, maximum: int | None = C_INT_MAX) -> int:
    """Validate an integer argument against ``[minimum, maximum]``.

    Parameters
    ----------
    value : Any
        A Python or NumPy integer; bools, floats and strings are refused.
    name : str
        The argument's name, used in the error message.
    minimum : int, default=0
    maximum : int or None, default=C_INT_MAX
        ``None`` for no upper bound. The default suits counts handed to C code.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        Naming ``name``, if ``value`` is not an integer in range.
    """
    # typeshed's numbers ABCs declare no comparisons with int: compare as the int the value is
    number = cast(int, value)
    if _is_bool(value) or not isinstance(value, Integral) or number < minimum or (
        maximum is not None and number > maximum
    ):
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}")
    return int(value)


def check_real(
    value: Any,
    name: str,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Validate a finite real argument against an interval.

    Parameters
    ----------
    value : Any
        An int or float; bools and strings are refused.
    name : str
        The argument's name, used in the error message.
    low, high : float, default=-inf, inf
        Bounds of the admissible interval.
    low_open, high_open : bool, default=False
        Whether the interval is open at ``low`` / ``high``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Naming ``name``: "must be a real number" for non-numbers, "must be finite ..." for
        infinities, NaN and values outside the interval.
    """
    if _is_bool(value) or not isinstance(value, Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    number = cast(float, value)  # typeshed's numbers.Real declares no > or >=
    below = number <= low if low_open else number < low
    above = number >= high if high_open else number > high
    if not math.isfinite(number) or below or above:
        if low == -math.inf and high == math.inf:
            bound = ""
        elif high == math.inf:
            bound = f" and {'>' if low_open else '>='} {low:g}"
        elif low == -math.inf:
            bound = f" and {'<' if high_open else '<='} {high:g}"
        else:
            bound = f" and in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        raise ValueError(f"{name} must be finite{bound}, got {value!r}")
    return float(value)


def check_n_jobs(n_jobs: Any, name: str = "n_jobs") -> int | None:
    """Validate a thread count: ``None``, ``-1`` (both: all cores) or an integer in ``[1, 2**31 - 1]``.

    Returns
    -------
    None or int
        ``n_jobs`` as given (an ``int``).

    Raises
    ------
    ValueError
        Naming ``name``, for anything else (``0``, bools, floats, counts beyond a C int).
    """
    if n_jobs is None:
        return None
    if isinstance(n_jobs, Integral) and not _is_bool(n_jobs):
        count = cast(int, n_jobs)  # typeshed's numbers ABCs declare no comparisons with int
        if count == -1:
            return -1
        if 1 <= count <= C_INT_MAX:
            return int(n_jobs)
    raise ValueError(f"{name} must be None, -1 (all cores) or an integer in [1, {C_INT_MAX}], got {n_jobs!r}")


def check_bool(value: Any, name: str) -> bool:
    """Validate a boolean argument (``bool`` or ``numpy.bool_``; not 0/1 or strings)."""
    if not _is_bool(value):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_option(value: Any, name: str, options: Sequence) -> Any:
    """Validate that ``value`` is one of ``options``."""
    if not any(value is option or (isinstance(value, str) and value == option) for option in options):
        raise ValueError(f"{name} must be one of {tuple(options)}, got {value!r}")
    return value


def check_seed(random_state: Any, name: str = "random_state") -> Any:
    """Validate a ``random_state`` argument without drawing from it.

    Returns
    -------
    None, int, numpy.random.Generator or numpy.random.RandomState
        The value as given (a NumPy integer as ``int``).

    Raises
    ------
    ValueError
        Naming ``name``, for anything else (strings, floats, bools, negative integers).
    """
    if random_state is None or isinstance(random_state, (np.random.Generator, np.random.RandomState)):
        return random_state
    if isinstance(random_state, Integral) and not _is_bool(random_state) and cast(int, random_state) >= 0:
        return int(random_state)
    raise ValueError(f"{name} must be None, a non-negative integer or a numpy Generator, got {random_state!r}")


def check_generator(random_state: Any) -> np.random.Generator:
    """The one source of randomness for a ``random_state`` argument: a NumPy Generator.

    Unlike scikit-learn's ``check_random_state``, which returns a legacy ``RandomState``.

    Parameters
    ----------
    random_state : None, int, numpy.random.Generator or numpy.random.RandomState
        ``None`` draws fresh entropy, a non-negative integer seeds a new Generator, a Generator
        is used (and advanced) in place, a legacy RandomState seeds a new Generator with one
        draw. Never NumPy's global generator.

    Returns
    -------
    numpy.random.Generator

    Raises
    ------
    ValueError
        Naming ``random_state``, for anything else (strings, floats, bools, negative integers).
    """
    random_state = check_seed(random_state)
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(2**31))
    return np.random.default_rng(random_state)
