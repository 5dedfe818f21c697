"""Oracle fits whose rows stay on the workers: Linear and Constant, by the single-process code on a
loss summed over the partitions.

:meth:`slr.oracles.linear.Linear._fit_problem` runs the same preconditioned L-BFGS as a local
fit, by the solver a local fit on all the rows would choose (block-Jacobi for few dense features,
the diagonal one for sparse features, many features or an L1 penalty); here its loss is a
:class:`SummedLoss`, whose value, gradient and Hessian blocks or diagonal are the sums of every
partition's (the rows never leave their workers, sparse ones stay sparse; only the coefficients
go out and the sums of size ``K x D`` or ``K x D^2`` (block solver) come back). Constant takes
the closed form from the partitions' class totals where the local fit would, else Linear's fit on
one constant feature.

Any other oracle linear in its parameters (:class:`slr.oracles.linear_protocol.LinearInParameters`,
with a ridge) is fitted the same way on its design matrix, which each partition makes from its own
rows: the penalised loss over its coefficient block, by ``Linear``'s solver at ``Linear``'s default
tolerance and iteration cap, the solution handed back through ``set_coef_block``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from slr._params import validate_params
from slr.distributed import _shard
from slr.distributed._backend import Backend
from slr.oracles.linear import Linear, _solver
from slr.oracles.linear_protocol import is_linear_in_parameters
from slr.oracles.pair_bias import PairBias
from slr.oracles.simple import Constant

__all__ = ["SummedLoss", "fit_distributed", "supported"]


def supported(oracle: Any) -> bool:
    """Whether :func:`fit_distributed` fits this oracle: Linear and Constant by their own fits, any
    other oracle linear in its parameters (with a ridge) on its design matrix."""
    return type(oracle) in _OWN_FITS or is_linear_in_parameters(oracle)


class SummedLoss:
    """Linear's loss over all partitions: the sum of the partitions' losses (:mod:`slr.oracles.linear`'s
    ``_ClassMajorLoss`` or ``PairLoss`` for the block solver, ``RowLoss`` for the diagonal one), which
    stay on their workers.

    Parameters
    ----------
    backend : Backend
    problems : list of futures
        Each partition's loss object.
    """

    def __init__(self, backend: Backend, problems: Sequence[Any]) -> None:
        self.backend, self.problems = backend, list(problems)
        self.n = sum(backend.gather(backend.map(_shard.problem_weight, self.problems)))

    def __call__(self, coef: np.ndarray) -> tuple[float, np.ndarray]:
        parts = self.backend.gather(self.backend.map(_shard.loss_and_gradient, self.problems, coef))
        loss, grad = 0.0, np.zeros_like(coef)
        for part_loss, part_grad in parts:
            loss += part_loss
            grad += part_grad
        return loss, grad

    def hessian_blocks(self, coef: np.ndarray) -> np.ndarray:
        blocks = self.backend.gather(self.backend.map(_shard.hessian_blocks, self.problems, coef))
        return np.sum(blocks, axis=0) if len(blocks) > 1 else blocks[0]

    def hessian_diagonal(self, coef: np.ndarray) -> np.ndarray:
        diagonal = np.zeros_like(coef)
        for part in self.backend.gather(self.backend.map(_shard.hessian_diagonal, self.problems, coef)):
            diagonal += part
        return diagonal


def _check_problem_shape(oracle: Any, k: int, d: int) -> None:
    """What ``LogisticOracle.fit`` does before its ``_fit``: forget a fit of another shape, record this one."""
    if getattr(oracle, "n_classes_", None) not in (None, k) or getattr(oracle, "n_features_in_", None) not in (None, d):
        oracle._reset()
    oracle.n_classes_, oracle.n_features_in_ = k, d


def fit_distributed(oracle: Linear | Constant, backend: Backend, shards: Sequence[Any], factor: str,
                    epsilon: float, n_classes: int, n_features: int) -> None:
    """Fit ``oracle`` in place to ``factor``'s logistic problem of all the shards, as
    ``oracle.fit`` would on the rows of all of them together (to the rounding of the sums).

    Parameters
    ----------
    oracle : Linear or Constant
    backend : Backend
    shards : list of futures of :class:`slr.distributed._shard.Shard`
    factor : {"unary", "pairwise"}
    epsilon : float
    n_classes, n_features : int
        ``K`` and the feature width of the problem.
    """
    own = _OWN_FITS.get(type(oracle))
    if own is None:
        _fit_design(oracle, backend, shards, factor, epsilon, n_classes, n_features)
        return
    params = validate_params(oracle)
    _check_problem_shape(oracle, n_classes, n_features)
    own(oracle, params, backend, shards, factor, epsilon, n_classes, n_features)


def _column_summary(backend: Backend, shards: Sequence[Any], factor: str, n_columns: int,
                    oracle: Any = None) -> tuple[np.ndarray, bool]:
    """The partitions' largest binary exponent per column of ``factor``'s rows (or of ``oracle``'s
    design of them), and whether any partition's rows are sparse (the local learner's are then)."""
    exponents, sparse = np.zeros(n_columns, dtype=np.int64), False
    for part, part_sparse in backend.gather(backend.map(_shard.feature_summary, shards, factor, oracle)):
        exponents, sparse = np.maximum(exponents, part), sparse or part_sparse
    return exponents, sparse


def _fit_linear_oracle(oracle: Linear, params: dict[str, Any], backend: Backend, shards: Sequence[Any],
                       factor: str, epsilon: float, n_classes: int, n_features: int) -> None:
    exponents, sparse = _column_summary(backend, shards, factor, n_features)
    _fit_linear(oracle, params, backend, shards, factor, epsilon, exponents, constant=False,
                solver=_solver(params, sparse, n_features, n_classes))


def _fit_design(oracle: Any, backend: Backend, shards: Sequence[Any], factor: str, epsilon: float,
                n_classes: int, n_features: int) -> None:
    """An oracle linear in its parameters fitted on its design matrix: the penalised loss over its
    block by ``Linear``'s solver (no intercept: the design holds any constant column), from its
    current block."""
    ridge = oracle.ridge_weights(n_features)
    start = oracle.get_coef_block(n_classes, n_features)
    exponents, sparse = _column_summary(backend, shards, factor, start.shape[1], oracle)
    solver = Linear(fit_intercept=False)
    solver.coef_, solver.intercept_ = start, np.zeros(n_classes)
    solver.n_classes_, solver.n_features_in_ = n_classes, start.shape[1]
    params = validate_params(solver)

    def make_problem() -> SummedLoss:
        return SummedLoss(backend, backend.map(_shard.linear_problem, shards, factor, epsilon, exponents, False,
                                               False, solver_name, oracle))

    def largest_bias() -> float:
        return max(backend.gather(backend.map(_shard.largest_bias, shards, factor, epsilon)))

    solver_name = _solver(params, sparse, start.shape[1], n_classes)
    solver._fit_problem(make_problem, solver_name, exponents, n_classes, largest_bias, params, ridge=ridge)
    oracle.set_coef_block(solver.coef_, n_features, n_iter=solver.n_iter_, converged=solver.converged_)


def _fit_linear(oracle: Linear, params: dict[str, Any], backend: Backend, shards: Sequence[Any], factor: str,
                epsilon: float, exponents: np.ndarray, constant: bool, solver: str) -> None:
    def make_problem() -> SummedLoss:
        return SummedLoss(backend, backend.map(_shard.linear_problem, shards, factor, epsilon, exponents,
                                               params["fit_intercept"], constant, solver))

    def largest_bias() -> float:
        return max(backend.gather(backend.map(_shard.largest_bias, shards, factor, epsilon)))

    oracle._fit_problem(make_problem, solver, exponents, oracle.n_classes_, largest_bias, params)


def _fit_constant(oracle: Constant, params: dict[str, Any], backend: Backend, shards: Sequence[Any], factor: str,
                  epsilon: float, k: int, n_features: int) -> None:
    """Constant's ``_fit`` with the partitions' totals: the closed form when its conditions hold on
    all rows together, else Linear on the constant feature, warm-started from the table."""
    summaries = backend.gather(backend.map(_shard.constant_summary, shards, factor, epsilon))
    counts = np.sum([summary[0] for summary in summaries], axis=0)
    firsts = [summary[2] for summary in summaries if summary[2] is not None]
    equal = all(summary[1] for summary in summaries) and all(_same_row(first, firsts[0]) for first in firsts)
    if params["l2"] == 0 and np.all(counts > 0) and equal:
        row = firsts[0].row(0) if isinstance(firsts[0], PairBias) else firsts[0]
        table = np.log(counts) - row
        oracle.table_ = table - table.mean()
        oracle.n_iter_ = 0
        return
    solver = Linear(l2=params["l2"], fit_intercept=False, tol=params["tol"], max_iter=params["max_iter"])
    start = getattr(oracle, "table_", None)
    if start is not None:
        solver.coef_ = start[:, None].copy()
    solver.n_classes_, solver.n_features_in_ = k, 1
    solver_params = validate_params(solver)
    _fit_linear(solver, solver_params, backend, shards, factor, epsilon, np.zeros(1, dtype=np.int64),
                constant=True, solver=_solver(solver_params, False, 1, k))
    oracle.table_ = solver.coef_[:, 0].copy()
    oracle.n_iter_ = solver.n_iter_


def _same_row(a: np.ndarray | PairBias, b: np.ndarray | PairBias) -> bool:
    if isinstance(a, PairBias) and isinstance(b, PairBias):   # every partition's bias is of one kind
        return bool(np.array_equal(a.left, b.left) and np.array_equal(a.right, b.right))
    return bool(np.array_equal(a, b))


# Linear's and Constant's own fits, summed over the partitions: the numbers of their local fits (the
# intercept inside the loss, Linear's l1, Constant's closed form), which their design matrices alone
# would give only to rounding
_OWN_FITS = {Linear: _fit_linear_oracle, Constant: _fit_constant}
