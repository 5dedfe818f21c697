"""Linear functions ``g(x, y) = (W x)_y (+ b_y)`` fitted exactly with L-BFGS (chapter Sec. 1.9.3),
on dense or sparse features."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np
from scipy.linalg.blas import dsyrk as _syrk
from scipy.linalg.lapack import dtrtri as _trtri
from scipy.optimize import minimize
from threadpoolctl import ThreadpoolController

from slr._features import FeatureMatrix, is_sparse, scale_columns, with_ones_column
from slr._params import Boolean, Integer, Options, Real, validate_params
from slr.oracles._diagonal_solver import RowLoss, minimise_diagonal
from slr.oracles.base import LogisticOracle, OracleTags, binary_exponents
from slr.oracles.pair_bias import PairBias, PairLoss, factorable

__all__ = ["Linear"]


_THREADPOOLS: ThreadpoolController | None = None

# per thread: how deep inside _single_threaded_blas it runs
_BLAS_LIMIT = threading.local()


@contextmanager
def _single_threaded_blas() -> Iterator[None]:
    """Context manager limiting BLAS to one thread.

    The products here are tall and skinny (d and K small) and gain nothing from BLAS
    threads; on a busy machine (the learner's OpenMP kernels, parallel jobs) OpenBLAS
    threads instead slowed them down about tenfold in measurements. Inside another such block
    of the same thread it does nothing: the limit holds already, and setting it again costs
    threadpoolctl about 40 us (the joint solver's iterates call ``decision_function`` inside
    its own block).
    """
    global _THREADPOOLS
    depth = getattr(_BLAS_LIMIT, "depth", 0)
    _BLAS_LIMIT.depth = depth + 1
    try:
        if depth:
            yield
            return
        if _THREADPOOLS is None:
            _THREADPOOLS = ThreadpoolController()
        with _THREADPOOLS.limit(limits=1, user_api="blas"):
            yield
    finally:
        _BLAS_LIMIT.depth = depth


#: Solvers of :class:`Linear`: chosen by size, or either one.
SOLVERS = ("auto", "block", "diagonal")

# the largest per-class Hessian blocks (K D^2 numbers, 32 MiB) for which "auto" takes the block solver
_BLOCK_BUDGET = 1 << 22

# Columns per block are chosen so a block of scores holds about this many numbers:
# bounds memory for K = 676 classes and keeps the temporaries in cache.
_BLOCK_ELEMENTS = 1 << 16


class _ClassMajorLoss:
    """The biased logistic loss of linear scores, evaluated many times on one problem.

    Works in class-major layout (scores of shape (K, N)) so that the reductions over
    classes run along contiguous rows, with preallocated block buffers; this is several
    times faster than row-major code for small K. With ``fit_intercept`` a constant
    feature is appended, so the intercept is the last column of ``coef``. Agrees with
    :func:`slr.oracles.base.biased_logistic_loss` (tested). ``n`` is the total weight of the
    rows (their number without weights).
    """

    def __init__(
        self, features: np.ndarray, bias: np.ndarray, labels: np.ndarray, fit_intercept: bool,
        sample_weight: np.ndarray | None = None,
    ) -> None:
        n, k = bias.shape
        self.n, self.k = (n if sample_weight is None else float(sample_weight.sum())), k
        features_t = features.T
        if fit_intercept:
            features_t = np.vstack([features_t, np.ones((1, n))])
        self.features_t = np.ascontiguousarray(features_t)
        self.bias_t = np.ascontiguousarray(bias.T)
        self.weights = sample_weight
        # soft targets class-major, as the scores
        self.targets_t = np.ascontiguousarray(labels.T) if labels.ndim == 2 else None
        step = max(1, _BLOCK_ELEMENTS // k)
        self.buffer = np.empty(k * min(step, n))
        self.blocks = []
        for start in range(0, n, step):
            stop = min(n, start + step)
            # flat positions of the true labels inside a (k, stop - start) block
            label_pos = (None if self.targets_t is not None
                         else labels[start:stop] * (stop - start) + np.arange(stop - start))
            self.blocks.append((start, stop, label_pos))

    @property
    def n_columns(self) -> int:
        return self.features_t.shape[0]

    def _shifted_scores(self, coef: np.ndarray):
        """Per block of rows: ``(start, stop, label_pos, flat, z, x_t)``, ``z`` (K, m) the biased
        scores minus each row's maximum (a view of the shared buffer, ``flat`` its flat view)."""
        k = self.k
        for start, stop, label_pos in self.blocks:
            m = stop - start
            flat = self.buffer[: k * m]
            z = flat.reshape(k, m)
            x_t = self.features_t[:, start:stop]
            np.matmul(coef, x_t, out=z)
            z += self.bias_t[:, start:stop]
            z -= z.max(axis=0)
            yield start, stop, label_pos, flat, z, x_t

    def __call__(self, coef: np.ndarray) -> tuple[float, np.ndarray]:
        """Summed (weighted) loss and its gradient with respect to ``coef`` (K, n_columns)."""
        if self.weights is not None or self.targets_t is not None:
            return self._general(coef)
        loss = 0.0
        grad = np.zeros_like(coef)
        for start, stop, label_pos, flat, z, x_t in self._shifted_scores(coef):
            picked = float(flat[label_pos].sum())
            np.exp(z, out=z)
            total = z.sum(axis=0)
            loss += float(np.log(total).sum()) - picked
            z /= total
            flat[label_pos] -= 1.0
            grad += z @ x_t.T
        return loss, grad

    def _general(self, coef: np.ndarray) -> tuple[float, np.ndarray]:
        """:meth:`__call__` with row weights or soft targets (rows summing to 1, so the
        shift by each row's maximum cancels in ``lse - <q, z>`` as it does for labels)."""
        loss = 0.0
        grad = np.zeros_like(coef)
        for start, stop, label_pos, flat, z, x_t in self._shifted_scores(coef):
            if self.targets_t is None:
                picked = flat[label_pos]
            else:
                targets = self.targets_t[:, start:stop]
                picked = np.einsum("km,km->m", targets, z)
            np.exp(z, out=z)
            total = z.sum(axis=0)
            row_loss = np.log(total) - picked
            z /= total
            if self.targets_t is None:
                flat[label_pos] -= 1.0
            else:
                z -= targets
            if self.weights is not None:
                row_loss *= self.weights[start:stop]
                z *= self.weights[start:stop]
            loss += float(row_loss.sum())
            grad += z @ x_t.T
        return loss, grad

    def hessian_blocks(self, coef: np.ndarray) -> np.ndarray:
        """Per-class diagonal blocks ``sum_k p_k(y)(1 - p_k(y)) x_k x_k^T``, shape (K, D, D)."""
        k, cols = self.k, self.n_columns
        blocks = np.zeros((k, cols, cols))
        for start, stop, _ in self.blocks:
            m = stop - start
            z = self.buffer[: k * m].reshape(k, m)
            x_t = self.features_t[:, start:stop]
            np.matmul(coef, x_t, out=z)
            z += self.bias_t[:, start:stop]
            z -= z.max(axis=0)
            np.exp(z, out=z)
            z /= z.sum(axis=0)
            z *= 1.0 - z
            if self.weights is not None:
                z *= self.weights[start:stop]
            # one matrix product per class (a symmetric rank-m update of one triangle) or per
            # column, whichever are fewer
            if k < cols:
                np.sqrt(z, out=z)
                for c in range(k):   # in place: blocks[c].T is column-major, its upper triangle our lower
                    _syrk(1.0, (x_t * z[c]).T, beta=1.0, c=blocks[c].T, trans=1, overwrite_c=1)
            else:
                for a in range(cols):
                    blocks[:, a, :] += z @ (x_t * x_t[a]).T
        if k < cols:   # the upper triangles from the lower ones
            upper = np.triu_indices(cols, 1)
            blocks[:, upper[0], upper[1]] = blocks[:, upper[1], upper[0]]
        return blocks


def _loss(features: np.ndarray, bias: np.ndarray | PairBias, labels: np.ndarray,
          fit_intercept: bool, sample_weight: np.ndarray | None) -> _ClassMajorLoss | PairLoss:
    """The loss of a fit: factored (:class:`PairLoss`) for a pair bias on rows that all have the
    same features (:func:`factorable`), else the dense class-major loss."""
    if isinstance(bias, PairBias) and factorable(features, bias):   # the isinstance (factorable repeats it) narrows
        row = np.append(features[0], 1.0) if fit_intercept else features[0].copy()
        return PairLoss(row, bias, labels, sample_weight)
    return _ClassMajorLoss(features, np.asarray(bias), labels, fit_intercept, sample_weight)


def _preconditioner(blocks: np.ndarray, floor: float) -> tuple[np.ndarray, np.ndarray, float]:
    """A block-Jacobi change of variables ``c = M u`` for a stack of symmetric positive
    semidefinite blocks ``B``: ``M`` with ``M^T (B + floor I) M = I``, its inverse ``M^-1``, and an
    estimate of the blocks' largest eigenvalue (power iteration).

    ``M = L^-T`` with ``L`` the Cholesky factor of ``B + floor I`` (a twentieth of an eigendecomposition's
    cost for 180 x 180 blocks); L-BFGS, invariant under orthogonal changes of variables, takes the same
    steps as with the symmetric ``(B + floor I)^(-1/2)``, which serves when a block is not positive
    definite in floating point (rounding beyond the floor).
    """
    shifted = blocks + floor * np.eye(blocks.shape[-1])
    try:
        lower = np.linalg.cholesky(shifted)
    except np.linalg.LinAlgError:
        values, vectors = np.linalg.eigh(blocks)
        values = np.maximum(values, 0.0) + floor
        scale = (vectors * values[:, None, :] ** -0.5) @ vectors.transpose(0, 2, 1)
        unscale = (vectors * values[:, None, :] ** 0.5) @ vectors.transpose(0, 2, 1)
        return scale, unscale, float(values.max() - floor) if values.size else 0.0
    inverse = np.empty_like(lower)
    for k, factor in enumerate(lower):
        inverse[k], info = _trtri(factor, lower=1)
        if info:
            raise np.linalg.LinAlgError(f"singular Cholesky factor (LAPACK dtrtri info {info})")
    return inverse.transpose(0, 2, 1), lower.transpose(0, 2, 1), _largest_eigenvalue(blocks)


def _largest_eigenvalue(blocks: np.ndarray, n_steps: int = 30) -> float:
    """The largest eigenvalue over a stack of symmetric positive semidefinite blocks, by power
    iteration (the Rayleigh quotient, from below; the preconditioner only scales a tolerance by it)."""
    if not blocks.size:
        return 0.0
    vectors = np.random.default_rng(0).standard_normal(blocks.shape[:2] + (1,))
    for _ in range(n_steps):
        vectors = blocks @ vectors
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors /= np.where(norms > 0, norms, 1.0)
    return float(np.max(vectors.transpose(0, 2, 1) @ blocks @ vectors))


def _apply(matrices: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """``matrices[k] @ vectors[k]`` for every k: ``(K, D, D)`` by ``(K, D)``."""
    return np.matmul(matrices, vectors[:, :, None])[:, :, 0]


def _overflow(largest_bias: float) -> None:
    raise ValueError(
        f"bias is too large in magnitude: the logistic loss overflows float64 (largest |bias| = {largest_bias:.3g})")


def _solver(params: dict[str, Any], sparse: bool, n_features: int, k: int) -> str:
    """The solver a fit of ``k`` classes on ``n_features`` columns (``sparse`` or dense) runs:
    ``"block"`` or ``"diagonal"`` (see :class:`Linear`'s ``solver``)."""
    solver, l1 = params.get("solver", "auto"), params.get("l1", 0.0)
    if solver == "block" and (sparse or l1 > 0):
        raise ValueError("solver='block' needs dense features and l1=0 "
                         f"(got {'sparse features' if sparse else f'l1={l1!r}'}); use 'diagonal' or 'auto'")
    if solver != "auto":
        return solver
    columns = n_features + int(params["fit_intercept"])
    return "block" if not sparse and l1 == 0 and k * columns * columns <= _BLOCK_BUDGET else "diagonal"


def _solver_loss(solver: str, features: FeatureMatrix, bias: np.ndarray | PairBias, labels: np.ndarray,
                fit_intercept: bool, sample_weight: np.ndarray | None) -> RowLoss | _ClassMajorLoss | PairLoss:
    """The loss ``solver`` (see :func:`_solver`) minimises on a checked problem (features scaled)."""
    if solver == "diagonal":
        return RowLoss(features, np.asarray(bias), labels, fit_intercept, sample_weight)
    return _loss(features, bias, labels, fit_intercept, sample_weight)


class Linear(LogisticOracle):
    """Multinomial logistic regression with per-example biases.

    Minimises ``sum_k w_k loss_k(W x_k + c) + l2/2 ||W||_F^2`` (the intercept ``c`` is not
    penalised), where ``loss_k(s) = log sum_y exp(s_y + b_k(y)) - <q_k, s + b_k>`` with
    ``q_k`` the one-hot label or soft target of row ``k`` and ``w_k`` its weight (1 by
    default; see :meth:`fit`), by L-BFGS on the exact loss and gradient. Each fit starts from the
    previous solution when the problem's shape is unchanged, and never returns a
    solution with a higher objective than its starting point.

    L-BFGS alone crawls when class frequencies differ by orders of magnitude (e.g.
    676 letter pairs, many of them rare): the curvature of each class's weights scales
    with its frequency. The fit therefore runs in cycles of at most ``refresh``
    iterations, each on variables whitened by the per-class diagonal Hessian blocks at the
    cycle's start point (a block-Jacobi preconditioner: ``c = L^-T u`` with ``L`` the
    Cholesky factor of a ``D x D`` block per class). Every cycle is a descent run, so the
    objective still never increases.

    Given the pairwise problem's factored bias (:class:`~slr.oracles.pair_bias.PairBias`) on
    rows whose features are all the same (a constant edge feature, as on chains), the loss is
    evaluated in factored form: matrix products of ``N x L`` factors instead of ``N L^2``
    exponentials (the same function, to rounding).

    The block preconditioner holds ``K`` blocks of ``D x D`` numbers. For many features, for
    sparse features (``scipy.sparse``, kept sparse) and with an L1 penalty the fit instead runs
    L-BFGS on variables scaled by the square root of the Hessian's diagonal, whose memory grows
    with the stored feature entries and ``K D`` (:mod:`slr.oracles._diagonal_solver`); with
    ``l1 > 0`` by OWL-QN, whose steps stay in one orthant so that weights reach zero exactly. Both
    solvers minimise the same objective.

    Parameters
    ----------
    l2 : float, default=0.0
        Ridge penalty on ``W``. With ``l2 = 0`` the solution may be unbounded
        (separable data, unseen classes); the fit then stops at ``tol`` or ``max_iter``. In
        :class:`~slr.StructuredLogisticRegression` ``W`` scores ``g = theta / epsilon``, so the
        ridge acts as an SSVM's ``C = epsilon / l2``: the same ``l2`` regularises ten times as
        strongly at the learner's default ``epsilon`` for linear oracles, 0.01, as at 0.1 (keep a
        ``C`` with ``l2 = epsilon / C``).
    l1 : float, default=0.0
        Lasso penalty ``l1 ||W||_1`` on ``W`` (CRFsuite's ``c1``): sets weights exactly to zero.
    fit_intercept : bool, default=False
        Add an unpenalised per-class offset ``c_y``.
    tol : float, default=1e-6
        Stop when the largest gradient component of the *mean* objective
        (objective divided by N, or by the total weight with ``sample_weight``) is below
        ``tol``, with respect to the coefficients of the rescaled features (see Notes).
    max_iter : int, default=1000
        Maximum number of L-BFGS iterations per fit (over all cycles).
    refresh : int, default=50
        L-BFGS iterations per preconditioner cycle.
    solver : {"auto", "block", "diagonal"}, default="auto"
        ``"block"``: the block-Jacobi preconditioner (dense features, ``l1 = 0``). ``"diagonal"``:
        the diagonal one, for any features. ``"auto"``: ``"block"`` where it applies and its
        blocks hold at most 2**22 numbers (``K (D + 1)^2``), else ``"diagonal"``.

    Attributes
    ----------
    coef_ : ndarray of shape (K, d)
    intercept_ : ndarray of shape (K,)
        Zeros when ``fit_intercept`` is False.
    n_iter_ : int
        L-BFGS iterations of the last fit.
    converged_ : bool
        Whether the last fit met ``tol``.

    Notes
    -----
    A feature column whose largest magnitude exceeds 1 is divided by the power of two
    that brings it into ``(1/2, 1]`` (exact in floating point), the fit runs on the
    rescaled columns with the penalty rescaled to match (the same optimum), and
    ``coef_`` is reported in the original units. Without it the Hessian, which holds
    products of features, overflows for features beyond about 1e150. Columns within
    ``[-1, 1]`` are used as given.
    """

    max_iter: int   # declared here: capped_fits, above __init__, reads and sets it

    _parameter_constraints = {
        "l2": Real(0.0),
        "l1": Real(0.0),
        "tol": Real(0.0, low_open=True),
        "fit_intercept": Boolean(),
        "max_iter": Integer(1, None),
        "refresh": Integer(1, None),
        "solver": Options(SOLVERS),
    }

    def __slr_tags__(self) -> OracleTags:
        return OracleTags(factored_pair_bias=True, linear_parameters=("coef_", "intercept_"), penalty=True,
                          sparse_features=True)

    def penalty(self) -> float:
        """``l2 / 2 ||W||_F^2 + l1 ||W||_1`` at the current ``coef_`` (the intercept is not
        penalised): the term that :meth:`fit` adds to the loss; 0 before a fit."""
        coef = getattr(self, "coef_", None)
        if coef is None:
            return 0.0
        return 0.5 * float(self.l2) * float(np.sum(coef * coef)) + float(self.l1) * float(np.sum(np.abs(coef)))

    # ------------------------------------------------------------------ LinearInParameters
    def design_matrix(self, features: FeatureMatrix) -> FeatureMatrix:
        """The features, with a column of ones for the intercept (``fit_intercept``)."""
        return with_ones_column(features) if validate_params(self)["fit_intercept"] else features

    def ridge_weights(self, n_features: int) -> np.ndarray | None:
        """``l2`` on every feature column, 0 on the intercept's; None with ``l1 > 0`` (not a ridge)."""
        params = validate_params(self)
        if params["l1"] > 0:
            return None
        return np.r_[np.full(n_features, float(params["l2"])), np.zeros(int(params["fit_intercept"]))]

    def get_coef_block(self, n_classes: int, n_features: int) -> np.ndarray:
        """``[coef_, intercept_]`` (the intercept column with ``fit_intercept``), zeros unless fitted
        to ``n_classes`` classes of ``n_features`` features."""
        intercept = validate_params(self)["fit_intercept"]
        block = np.zeros((n_classes, n_features + int(intercept)))
        if getattr(self, "coef_", np.zeros(0)).shape == (n_classes, n_features):
            block[:, :n_features] = self.coef_
            if intercept:
                block[:, -1] = self.intercept_
        return block

    def set_coef_block(self, coef: np.ndarray, n_features: int, *, n_iter: int, converged: bool) -> None:
        """Fitted with ``coef_ = coef[:, :n_features]`` and the intercept in its last column."""
        self.n_classes_, self.n_features_in_ = coef.shape[0], n_features
        self.coef_ = coef[:, :n_features].copy()
        self.intercept_ = coef[:, -1].copy() if validate_params(self)["fit_intercept"] else np.zeros(coef.shape[0])
        self.n_iter_, self.converged_ = n_iter, converged

    @contextmanager
    def capped_fits(self, max_iter: int) -> Iterator[None]:
        """Inside the block, fits run at most ``max_iter`` L-BFGS iterations (``max_iter`` restored after)."""
        own = self.max_iter
        capped = validate_params(self)["max_iter"] > max_iter
        try:
            if capped:
                self.max_iter = max_iter
            yield
        finally:
            self.max_iter = own

    def __init__(
        self,
        l2: float = 0.0,
        fit_intercept: bool = False,
        tol: float = 1e-6,
        max_iter: int = 1000,
        refresh: int = 50,
        l1: float = 0.0,
        solver: str = "auto",
    ) -> None:
        self.l2 = l2
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.refresh = refresh
        self.l1 = l1
        self.solver = solver

    def _objective(
        self, coef: np.ndarray, problem: _ClassMajorLoss | PairLoss, penalty: np.ndarray
    ) -> tuple[float, np.ndarray]:
        """Mean penalised loss and its gradient, both in the (K, D) coefficient layout."""
        loss, grad = problem(coef)
        loss += 0.5 * float(np.sum(penalty * coef * coef))
        grad += penalty * coef
        return loss / problem.n, grad / problem.n

    def _fit(self, features: FeatureMatrix, bias: np.ndarray | PairBias, labels: np.ndarray,
             sample_weight: np.ndarray | None, params: dict[str, Any]) -> None:
        # The fit works on columns scaled into [-1, 1] by powers of two (see Notes).
        exponents = np.maximum(binary_exponents(features), 0)
        if exponents.any():
            features = scale_columns(features, -exponents)
        solver = _solver(params, is_sparse(features), features.shape[1], bias.shape[1])
        self._fit_problem(lambda: _solver_loss(solver, features, bias, labels, params["fit_intercept"], sample_weight),
                          solver, exponents, bias.shape[1], lambda: float(np.max(np.abs(np.asarray(bias)))), params)

    def _fit_problem(self, make_problem: Callable[[], Any], solver: str, exponents: np.ndarray, k: int,
                     largest_bias: Callable[[], float], params: dict[str, Any],
                     ridge: np.ndarray | None = None) -> None:
        """The fit by ``solver`` (``"block"`` or ``"diagonal"``, see :func:`_solver`) on a loss built by
        ``make_problem()`` (inside the single-threaded BLAS region): an object with
        ``__call__(coef) -> (loss, grad)``, the total row weight ``n`` and ``hessian_blocks(coef)``
        (block) or ``hessian_diagonal(coef)`` (diagonal), on features divided column-wise by
        ``2**exponents``. :mod:`slr.distributed` passes a loss summed over partitions;
        ``largest_bias()`` is only read for an overflow error. ``ridge``: the ridge per feature column
        (in the columns' own units) instead of ``l2`` on every one."""
        l2, tol, fit_intercept, max_iter, refresh = (
            params[name] for name in ("l2", "tol", "fit_intercept", "max_iter", "refresh"))
        d = exponents.shape[0]
        cols = d + 1 if fit_intercept else d
        coef = np.zeros((k, cols))
        if hasattr(self, "coef_"):
            coef[:, :d] = np.ldexp(self.coef_, exponents)
            if fit_intercept:
                coef[:, d] = self.intercept_
        penalty = np.zeros(cols)  # the intercept is not penalised
        penalty[:d] = np.ldexp(l2 if ridge is None else ridge, -2 * exponents)
        lasso = np.zeros(cols)
        lasso[:d] = np.ldexp(params.get("l1", 0.0), -exponents)
        self.n_iter_, self.converged_ = 0, True
        if coef.size:
            with _single_threaded_blas():
                problem = make_problem()
                if solver == "diagonal":
                    coef, self.n_iter_, self.converged_ = minimise_diagonal(
                        coef, problem, penalty, lasso, tol, max_iter, refresh, lambda: _overflow(largest_bias()))
                else:
                    coef = self._minimise(coef, problem, largest_bias, penalty, tol, max_iter, refresh)
        self.coef_ = np.ldexp(coef[:, :d], -exponents)
        self.intercept_ = coef[:, d].copy() if fit_intercept else np.zeros(k)

    def _minimise(
        self, coef: np.ndarray, problem: _ClassMajorLoss | PairLoss, largest_bias: Callable[[], float],
        penalty: np.ndarray, tol: float, max_iter: int, refresh: int,
    ) -> np.ndarray:
        k, cols = coef.shape
        value, grad = self._objective(coef, problem, penalty)
        if not np.isfinite(value) and np.any(coef):
            # a warm start fitted to differently scaled data: start from zero instead
            coef = np.zeros_like(coef)
            value, grad = self._objective(coef, problem, penalty)
        if not np.isfinite(value):
            _overflow(largest_bias())
        while np.max(np.abs(grad)) > tol:
            if self.n_iter_ >= max_iter:
                self.converged_ = False
                break
            hessian = problem.hessian_blocks(coef) / problem.n
            hessian += penalty[:, None] * np.eye(cols) / problem.n
            # the floor keeps steps finite for classes whose probability has vanished
            scale, unscale, largest = _preconditioner(hessian, 1e-10 * max(1.0, float(np.max(hessian))))
            scale_t = np.ascontiguousarray(scale.transpose(0, 2, 1))
            start = _apply(unscale, coef)

            def objective(u: np.ndarray) -> tuple[float, np.ndarray]:
                c = _apply(scale, u.reshape(k, cols))
                f, g = self._objective(c, problem, penalty)
                return f, _apply(scale_t, g).ravel()

            # inner tolerance such that |scale g| <= inner implies |g| <~ tol
            inner = tol / max(1.0, np.sqrt(max(largest, 0.0)))
            res = minimize(
                objective, start.ravel(), jac=True, method="L-BFGS-B",
                options={"maxiter": min(refresh, max_iter - self.n_iter_), "gtol": inner,
                         "ftol": 1e-15, "maxfun": 20 * refresh},
            )
            self.n_iter_ += int(res.nit)
            candidate = _apply(scale, res.x.reshape(k, cols))
            if res.status in (0, 1):
                # converged or out of iterations: res.fun and res.jac are those of res.x; the
                # rescaled gradient is M^T g, so g = (M^-1)^T (M^T g)
                new_value = float(res.fun)
                new_grad = _apply(unscale.transpose(0, 2, 1), res.jac.reshape(k, cols))
            else:
                # after a failed line search res.x is the last good point but res.fun may be a trial's
                new_value, new_grad = self._objective(candidate, problem, penalty)
            if not new_value < value:
                # no progress in a whole cycle: numerically converged as far as possible
                self.converged_ = bool(np.max(np.abs(grad)) <= tol)
                break
            coef, value, grad = candidate, new_value, new_grad
        return coef

    def decision_function(self, features: Any) -> np.ndarray:
        """Scores ``W x + c`` of shape (N, K) (``features`` dense or sparse)."""
        features = self._check_features(features)
        with _single_threaded_blas():
            scores = np.asarray(features @ self.coef_.T)
        scores += self.intercept_
        return scores
