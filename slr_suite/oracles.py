"""Oracles as settings: a class and its keywords, built with the suite's seed; the fitted ones found on a learner;
the learners the suite runs them in."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OracleSpec", "FIXED_BUDGET", "defaults_learner", "fitted_oracle", "suite_learner"]


@dataclass(frozen=True)
class OracleSpec:
    """An oracle to build: a class (or its name in :mod:`slr.oracles`) and its keywords.

    Attributes
    ----------
    cls : str or type
        ``"BoostedTrees"`` names :class:`slr.oracles.BoostedTrees`; a class is used as it is.
    keywords : mapping
        Constructor keywords. A ``random_state`` here wins over the seed given to :meth:`build`.
    """

    cls: str | type
    keywords: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The class's name."""
        return self.cls if isinstance(self.cls, str) else self.cls.__name__

    def build(self, random_state: int | None = None) -> Any:
        """A fresh oracle; one that takes a ``random_state`` the keywords do not fix gets ``random_state``."""
        if isinstance(self.cls, str):
            from slr import oracles

            try:
                cls = getattr(oracles, self.cls)
            except AttributeError:
                raise ValueError(f"cls: {self.cls!r} is not an oracle of slr.oracles") from None
        else:
            cls = self.cls
        oracle = cls(**self.keywords)
        if random_state is not None and "random_state" not in self.keywords \
                and "random_state" in oracle.get_params():
            oracle.set_params(random_state=random_state)
        return oracle

    def config(self) -> list:
        """``[class name, keywords]``: what enters a cache key or a ``config`` hash."""
        return [self.name, dict(self.keywords)]


def fitted_oracle(model: Any, role: str, given: Any) -> Any | None:
    """The fitted oracle of a learner for ``role`` (``"unary"``/``"pairwise"``), or None.

    Tries the learner's fitted attributes first (``unary_``, ``unary_oracle_``, ...), then the
    oracle instance passed to the constructor if the learner fitted it in place.
    """
    for attr in (f"{role}_", f"{role}_oracle_", f"{role}_estimator_", f"{role}_oracles_"):
        obj = getattr(model, attr, None)
        if isinstance(obj, (list, tuple)) and obj:
            obj = obj[-1]
        if obj is not None and hasattr(obj, "decision_function") and hasattr(obj, "n_classes_"):
            return obj
    if given is not None and hasattr(given, "n_classes_"):
        return given
    return None


#: The learner settings of the suite cells that keep a fixed protocol (Table 1: the paper's 25
#: iterations of Algorithm 1.1; the bound, partial-label and letters-validation cells): the fixed
#: budgets the cells' configs describe (their ``max_iter`` iterations, ``max_sweeps`` sweeps per half
#: step, exact steps unless a cell names its ``relaxation``), not the library's stopping rule,
#: progress-based sweeps, early stopping, over-relaxation or joint solver, so that a cell's numbers
#: depend on its config (and hash) alone. The comparison's slr rows run :func:`defaults_learner`.
FIXED_BUDGET = dict(tol=0.0, sweep_tol=0.0, early_stopping=False, relaxation=1.0, solver="alternation")


def suite_learner(**params: Any) -> Any:
    """A :class:`slr.learner.StructuredLogisticRegression` with ``params`` over :data:`FIXED_BUDGET`."""
    from slr.learner import StructuredLogisticRegression

    return StructuredLogisticRegression(**{**FIXED_BUDGET, **params})


def defaults_learner(**params: Any) -> Any:
    """A :class:`slr.learner.StructuredLogisticRegression` with the library's defaults and ``params``
    (the model: oracles, eps, states; seeds and threads).

    Its fit ends by the library's rules: the stopping rule on the objective, and for oracles that ask for
    it (MLP, which memorises the training examples) early stopping on examples it holds out of
    them (``early_stopping="auto"``). The suite fits it on the training examples alone and records
    the error on its evaluation examples (the test words, or the held-out fifth when tuning) through
    ``fit``'s callback (:func:`slr.suite.methods.fit_slr`), so that they choose nothing.
    """
    from slr.learner import StructuredLogisticRegression

    return StructuredLogisticRegression(**params)
