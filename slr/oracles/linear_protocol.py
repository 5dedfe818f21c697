"""The declared interface of oracles whose functions are linear in their parameters.

An oracle implementing :class:`LinearInParameters` scores a row as ``design(x) @ C.T``: a design
matrix made from the features row by row, times a coefficient block ``C`` of shape ``(K, D)``,
penalised by a ridge ``1/2 sum_j r_j ||C[:, j]||^2``. That is all the joint solver
(:mod:`slr._joint`) and the Dask learner (:mod:`slr.distributed`) need to minimise the learner's
objective over the block themselves, without knowing the oracle's class: they read the design,
the ridge and the block through this protocol and hand the solution back through it.
``Linear`` (without ``l1``), ``Constant`` and ``Zero`` implement it; so can an oracle of a user's.
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

import numpy as np

from slr._features import FeatureMatrix

__all__ = ["LinearInParameters", "is_linear_in_parameters"]


@runtime_checkable
class LinearInParameters(Protocol):
    """An oracle whose scores are ``design_matrix(features) @ C.T`` for a coefficient block ``C``.

    Methods
    -------
    design_matrix(features)
        The ``(N, D)`` design of ``N`` rows of features (dense or sparse, as given); row ``i`` of
        the design depends on row ``i`` of the features only, so that the design of a subset of
        rows is the subset of the design (the Dask learner builds it partition by partition).
    ridge_weights(n_features)
        ``r`` of shape ``(D,)`` for features of width ``n_features``: the oracle's penalty on the
        block is ``1/2 sum_j r_j ||C[:, j]||^2``; None when its penalty is not such a ridge (not
        smooth, as ``Linear(l1 > 0)``), which the solvers above cannot take.
    get_coef_block(n_classes, n_features)
        The fitted ``C``, shape ``(n_classes, D)``: zeros when the oracle is not fitted or was
        fitted to a problem of another shape.
    set_coef_block(coef, n_features, n_iter, converged)
        Leave the oracle fitted with ``C = coef`` as its own ``fit`` would (``n_classes_``,
        ``n_features_in_`` and its iteration count).
    capped_fits(max_iter)
        A context manager inside which the oracle's ``fit`` runs at most ``max_iter`` iterations
        of its solver (the learner caps the first fit of the joint solver's start).
    """

    def design_matrix(self, features: FeatureMatrix) -> FeatureMatrix: ...

    def ridge_weights(self, n_features: int) -> np.ndarray | None: ...

    def get_coef_block(self, n_classes: int, n_features: int) -> np.ndarray: ...

    def set_coef_block(self, coef: np.ndarray, n_features: int, *, n_iter: int, converged: bool) -> None: ...

    def capped_fits(self, max_iter: int) -> AbstractContextManager[None]: ...


def is_linear_in_parameters(oracle: Any) -> bool:
    """Whether ``oracle`` implements :class:`LinearInParameters` with a smooth penalty (a ridge),
    so that the joint solver and the Dask learner can minimise over its block."""
    return isinstance(oracle, LinearInParameters) and oracle.ridge_weights(0) is not None
