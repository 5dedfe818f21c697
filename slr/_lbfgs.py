"""Limited-memory BFGS for smooth unconstrained minimisation over many variables, in a fixed set of
buffers.

With hundreds of thousands of weights (sparse text features) the optimiser's vectors are most of a
fit's memory. :func:`minimise_lbfgs` holds the point, its gradient, a trial point and its gradient,
a search direction and ``memory`` correction pairs, all allocated once: the objective writes each
gradient into a buffer it is given, and accepted trials swap places with the current point instead
of being copied.

A diagonal preconditioner ``d`` (the square root of an estimate of the Hessian's diagonal) makes it
L-BFGS on the variables ``u = d * x`` without forming them: the two-loop recursion's initial matrix
is ``gamma / d**2`` (Nocedal and Wright, "Numerical Optimization", 2nd ed., section 7.2, with
Shanno and Phua's ``gamma = s.y / y.H0.y``), and the gradient test reads ``g / d``. The step
satisfies the strong Wolfe conditions (the bracketing and zoom of Nocedal and Wright's algorithms
3.5 and 3.6 with safeguarded cubic interpolation), with the constants of L-BFGS-B's line search.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["HISTORY_BUDGET", "MIN_HISTORY", "Corrections", "LbfgsResult", "history_size", "minimise_lbfgs"]

# bytes of L-BFGS's correction pairs (two float64 vectors per stored correction) that a fit's history may
# take, and the fewest corrections it keeps: with hundreds of thousands of weights (sparse text features)
# the history is most of a fit's memory
HISTORY_BUDGET = 1 << 26
MIN_HISTORY = 3

# sufficient decrease and curvature constants of the strong Wolfe conditions (L-BFGS-B's)
_DECREASE, _CURVATURE = 1e-3, 0.9

# the longest step tried, and how far beyond the last a bracketing step may go (a factor)
_MAX_STEP, _EXTRAPOLATION = 1e10, 4.0

# the zoom's trials keep this fraction of the bracket's width from its ends; the narrowest bracket it
# searches, relative to the step
_SAFEGUARD, _NARROWEST = 0.1, 1e-12


def history_size(n_variables: int, wanted: int) -> int:
    """L-BFGS's number of stored corrections for ``n_variables``: ``wanted``, or fewer where their
    vectors would take more than :data:`HISTORY_BUDGET` bytes (but at least :data:`MIN_HISTORY`)."""
    return min(wanted, max(MIN_HISTORY, HISTORY_BUDGET // (16 * max(n_variables, 1))))


class Corrections:
    """The last ``memory`` correction pairs ``(s, y)`` of L-BFGS, in two preallocated arrays, and the
    two-loop recursion that applies the inverse Hessian approximation they define.

    Parameters
    ----------
    n_variables : int
    memory : int
        Pairs kept (the oldest is overwritten by a new one).
    """

    def __init__(self, n_variables: int, memory: int) -> None:
        # np.empty: rows not yet written take no resident memory
        self.s, self.y = np.empty((memory, n_variables)), np.empty((memory, n_variables))
        self.rho = np.zeros(memory)
        self.order: list[int] = []   # slots in use, oldest first
        self.gamma = 1.0

    def __len__(self) -> int:
        return len(self.order)

    def clear(self) -> None:
        """Forget every pair (the approximation becomes the initial matrix)."""
        self.order, self.gamma = [], 1.0

    def free_slot(self) -> int:
        """The slot the next pair is to be written to: an unused one, or the oldest pair's."""
        unused = [slot for slot in range(len(self.rho)) if slot not in self.order]
        return unused[0] if unused else self.order[0]

    def drop(self, slot: int) -> None:
        """Forget the pair in ``slot`` (overwritten by a pair that was not kept)."""
        if slot in self.order:
            self.order.remove(slot)

    def add(self, slot: int, sy: float, yhy: float) -> None:
        """Keep the pair written to ``slot`` (``s.y`` and ``y.H0.y`` given, ``H0`` the initial matrix
        without ``gamma``) as the newest; it sets ``gamma = s.y / y.H0.y``."""
        if slot in self.order:
            self.order.remove(slot)
        self.order.append(slot)
        self.rho[slot] = 1.0 / sy
        self.gamma = sy / yhy

    def apply(self, gradient: np.ndarray, out: np.ndarray, scale: np.ndarray | None = None) -> np.ndarray:
        """``out = -H g``: minus the inverse Hessian approximation times ``gradient``, its initial
        matrix ``gamma I`` (or ``gamma / scale**2`` elementwise with ``scale``).

        Parameters
        ----------
        gradient : ndarray of shape (n,)
        out : ndarray of shape (n,)
            Not ``gradient``.
        scale : ndarray of shape (n,), optional
            The diagonal preconditioner ``d`` (positive).

        Returns
        -------
        out
        """
        np.negative(gradient, out=out)
        alphas = []
        for slot in reversed(self.order):
            alpha = self.rho[slot] * float(self.s[slot] @ out)
            _axpy(-alpha, self.y[slot], out)
            alphas.append(alpha)
        if scale is not None:
            out /= scale
            out /= scale
        out *= self.gamma
        for slot, alpha in zip(self.order, reversed(alphas)):
            beta = self.rho[slot] * float(self.y[slot] @ out)
            _axpy(alpha - beta, self.s[slot], out)
        return out


def _axpy(a: float, x: np.ndarray, y: np.ndarray, chunk: int = 1 << 16) -> np.ndarray:
    """``y += a x`` in place, in chunks (no temporary of ``x``'s size)."""
    for start in range(0, x.size, chunk):
        stop = start + chunk
        y[start:stop] += a * x[start:stop]
    return y


@dataclass
class LbfgsResult:
    """Outcome of :func:`minimise_lbfgs`.

    Attributes
    ----------
    x : ndarray of shape (n,)
        The last accepted point (the start if no step was accepted).
    value : float
        The objective at ``x``.
    gradient : ndarray of shape (n,)
        Its gradient at ``x``.
    n_iter : int
        Iterations (accepted steps).
    n_evaluations : int
        Calls of the objective.
    status : str
        ``"converged"`` (the gradient test), ``"max_iter"``, ``"max_evaluations"``, ``"no_decrease"``
        (the relative decrease of an iteration was at most ``ftol``) or ``"line_search"`` (no step
        with sufficient decrease along steepest descent either).
    """

    x: np.ndarray
    value: float
    gradient: np.ndarray
    n_iter: int
    n_evaluations: int
    status: str


class _Trial:
    """The trial point's buffers and the objective: ``evaluate(step)`` writes ``x + step p`` and its
    gradient, and returns the value and the directional derivative."""

    def __init__(self, fun: Callable[[np.ndarray, np.ndarray], float], n: int) -> None:
        self.fun, self.x, self.gradient = fun, np.empty(n), np.empty(n)
        self.n_evaluations, self.step = 0, float("nan")

    def evaluate(self, origin: np.ndarray, direction: np.ndarray, step: float) -> tuple[float, float]:
        np.multiply(direction, step, out=self.x)
        self.x += origin
        self.n_evaluations += 1
        self.step = step
        value = float(self.fun(self.x, self.gradient))
        return value, float(self.gradient @ direction)


def _cubic_minimiser(a: float, fa: float, da: float, b: float, fb: float, db: float) -> float:
    """The minimiser of the cubic through ``(a, fa)``, ``(b, fb)`` with slopes ``da``, ``db``; the
    midpoint where it has none (or the numbers are not finite)."""
    if a == b:
        return a
    d1 = da + db - 3.0 * (fa - fb) / (a - b)
    radicand = d1 * d1 - da * db
    if not (math.isfinite(radicand) and radicand >= 0.0):
        return 0.5 * (a + b)
    d2 = math.copysign(math.sqrt(radicand), b - a)
    denominator = db - da + 2.0 * d2
    if denominator == 0.0 or not math.isfinite(denominator):
        return 0.5 * (a + b)
    return b - (b - a) * (db + d2 - d1) / denominator


def _wolfe_step(trial: _Trial, x: np.ndarray, direction: np.ndarray, value: float, slope: float, step: float,
                max_evaluations: int) -> tuple[bool, float, bool]:
    """A step along ``direction`` from ``x`` (``value`` and ``slope < 0`` there) satisfying the strong
    Wolfe conditions, starting at ``step``. Returns ``(found, value, wolfe)``, the trial buffers holding
    the accepted point; ``found`` is also true for the last trial when it only decreases the objective
    sufficiently within ``max_evaluations`` (the buffers then hold a point of sufficient decrease, or
    ``found`` is false); ``wolfe`` says whether the step meets both conditions."""

    def decreases(t: float, f: float) -> bool:
        return f <= value + _DECREASE * t * slope

    def flat(d: float) -> bool:
        return abs(d) <= -_CURVATURE * slope

    previous, f_previous, d_previous = 0.0, value, slope
    count = 0
    while True:   # bracketing (Nocedal and Wright's algorithm 3.5)
        f, d = trial.evaluate(x, direction, step)
        count += 1
        if not (math.isfinite(f) and math.isfinite(d)) or not decreases(step, f) or (count > 1 and f >= f_previous):
            low, f_low, d_low, high, f_high, d_high = previous, f_previous, d_previous, step, f, d
            break
        if flat(d):
            return True, f, True
        if d >= 0.0:
            low, f_low, d_low, high, f_high, d_high = step, f, d, previous, f_previous, d_previous
            break
        if count >= max_evaluations or step >= _MAX_STEP:
            return True, f, False
        previous, f_previous, d_previous = step, f, d
        step = min(_EXTRAPOLATION * step, _MAX_STEP)
    # zoom (algorithm 3.6): low has sufficient decrease, the bracket a minimiser; it ends where the bracket
    # is too narrow to hold another float between its ends' neighbourhoods
    while count < max_evaluations and abs(high - low) > _NARROWEST * max(abs(low), abs(high)):
        if math.isfinite(f_high) and math.isfinite(d_high):
            step = _cubic_minimiser(low, f_low, d_low, high, f_high, d_high)
        else:
            step = 0.5 * (low + high)
        width = high - low
        lo_end, hi_end = sorted((low + _SAFEGUARD * width, high - _SAFEGUARD * width))
        step = min(max(step, lo_end), hi_end)
        f, d = trial.evaluate(x, direction, step)
        count += 1
        if not (math.isfinite(f) and math.isfinite(d)) or not decreases(step, f) or f >= f_low:
            high, f_high, d_high = step, f, d
            continue
        if flat(d):
            return True, f, True
        if d * (high - low) >= 0.0:
            high, f_high, d_high = low, f_low, d_low
        low, f_low, d_low = step, f, d
    if low == 0.0:
        return False, value, False
    if trial.step == low:
        return True, f_low, False
    f, _ = trial.evaluate(x, direction, low)   # the buffers hold another trial: back to the best one
    return bool(math.isfinite(f) and decreases(low, f)), f, False


def minimise_lbfgs(
    fun: Callable[[np.ndarray, np.ndarray], float],
    x0: np.ndarray,
    *,
    scale: np.ndarray | None = None,
    memory: int = 10,
    max_iter: int = 100,
    gtol: float = 1e-5,
    ftol: float = 0.0,
    max_evaluations: int | None = None,
    max_line_search: int = 20,
    callback: Callable[[np.ndarray], None] | None = None,
    copy: bool = True,
    refine: Callable[[], bool] | None = None,
) -> LbfgsResult:
    """Minimise a smooth function by L-BFGS with a strong Wolfe line search.

    Parameters
    ----------
    fun : callable
        ``fun(x, gradient) -> value``: the objective at ``x``, its gradient written into
        ``gradient`` (an array of ``x``'s shape). It must not keep or modify ``x`` (the optimiser
        reuses the array) and may keep ``gradient`` only until its next call.
    x0 : ndarray of shape (n,)
        The start, not modified unless ``copy`` is False.
    scale : ndarray of shape (n,), optional
        A diagonal preconditioner ``d > 0``: the iterates are those of L-BFGS on ``u = d * x``, and
        the gradient test reads ``g / d``. Typically the square root of the Hessian's diagonal.
    memory : int, default=10
        Correction pairs kept.
    max_iter : int, default=100
        Iterations.
    gtol : float, default=1e-5
        Stop when the largest entry of ``|g| / d`` (``|g|`` without ``scale``) is at most ``gtol``.
    ftol : float, default=0.0
        Stop when an iteration's decrease ``f_old - f`` is at most ``ftol * max(|f_old|, |f|, 1)``
        (0: only where the objective did not decrease).
    max_evaluations : int, optional
        Stop after an iteration that brought the calls of ``fun`` to this many.
    max_line_search : int, default=20
        Calls of ``fun`` per line search.
    callback : callable, optional
        ``callback(x)`` after every iteration (``x`` the optimiser's buffer: copy it to keep it).
        An exception it raises ends the minimisation.
    copy : bool, default=True
        False: ``x0`` (C-contiguous float64) is one of the optimiser's buffers instead of a copy; it
        holds the start until the first step is accepted, then trial points.
    refine : callable, optional
        For an objective evaluated inexactly (an upper bound, its error depending on earlier
        calls): ``refine()`` is called when a line search ends without a strong Wolfe step (no
        decrease found, or its calls spent), which is what evaluations too inexact for the steps'
        changes of the objective cause; it returns True if it made the evaluations more accurate.
        The current point (after the line search's step, if one was taken) is then evaluated
        again, and a line search that found no decrease is repeated from it (once: a repeated
        search that fails ends as without ``refine``).

    Returns
    -------
    LbfgsResult
    """
    n = x0.size
    x = np.array(x0, dtype=np.float64) if copy else x0
    gradient = np.empty(n)
    direction = np.empty(n)   # also scratch for the gradient test
    trial = _Trial(fun, n)
    value = float(fun(x, gradient))
    trial.n_evaluations = 1   # the start's, then the trials'
    corrections = Corrections(n, memory)
    n_iter, refined_here = 0, False

    def largest_scaled(g: np.ndarray) -> float:
        if scale is None:
            return float(np.max(np.abs(g), initial=0.0))
        np.divide(g, scale, out=direction)
        return float(np.max(np.abs(direction), initial=0.0))

    def result(status: str) -> LbfgsResult:
        return LbfgsResult(x, value, gradient, n_iter, trial.n_evaluations, status)

    if largest_scaled(gradient) <= gtol:
        return result("converged")
    while True:
        if n_iter >= max_iter:
            return result("max_iter")
        if max_evaluations is not None and trial.n_evaluations >= max_evaluations:
            return result("max_evaluations")
        corrections.apply(gradient, direction, scale)
        slope = float(gradient @ direction)
        if not slope < 0.0 and len(corrections):   # not a descent direction (rounding): steepest descent
            corrections.clear()
            corrections.apply(gradient, direction, scale)
            slope = float(gradient @ direction)
        if not slope < 0.0:   # a gradient that is not finite
            return result("line_search")
        # L-BFGS-B's first step: unit length in the scaled variables
        step = 1.0 if len(corrections) else min(1.0 / math.sqrt(-slope), _MAX_STEP)
        found, new_value, wolfe = _wolfe_step(trial, x, direction, value, slope, step, max_line_search)
        # at most one refinement between accepted steps: the repeated search then fails as before
        refined = not wolfe and refine is not None and not refined_here and refine()
        if not found:
            if refined:
                value = float(fun(x, gradient))
                trial.n_evaluations += 1
                refined_here = True
                continue
            if not len(corrections):
                return result("line_search")
            corrections.clear()
            continue
        # the pair (s, y) goes to a free slot; the trial's buffers become the current point's
        slot = corrections.free_slot()
        s, y = corrections.s[slot], corrections.y[slot]
        np.subtract(trial.x, x, out=s)
        np.subtract(trial.gradient, gradient, out=y)
        sy = float(s @ y)
        decrease = value - new_value
        x, trial.x = trial.x, x
        gradient, trial.gradient = trial.gradient, gradient
        value = new_value
        n_iter += 1
        refined_here = False
        if sy > np.finfo(float).eps * -float(s @ trial.gradient):   # trial.gradient: the old point's now
            if scale is None:
                yhy = float(y @ y)
            else:
                np.divide(y, scale, out=direction)
                yhy = float(direction @ direction)
            corrections.add(slot, sy, yhy)
        else:
            corrections.drop(slot)
        if refined:
            value = float(fun(x, gradient))
            trial.n_evaluations += 1
        if callback is not None:
            callback(x)
        if largest_scaled(gradient) <= gtol:
            return result("converged")
        if decrease <= ftol * max(abs(value + decrease), abs(value), 1.0):
            return result("no_decrease")
