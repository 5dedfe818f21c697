"""The logistic "oracle" interface that every function class implements.

For fixed messages, learning one factor type of a structured model is a logistic
regression whose examples carry a bias vector (Domke, chapter Sec. 1.7-1.8):

    maximise_g  sum_k [ g(x_k, y_k) + b_k(y_k) - log sum_y exp(g(x_k, y) + b_k(y)) ]

More generally each row ``k`` carries a target distribution ``q_k`` (``onehot(y_k)`` for a
label; soft targets otherwise) and a weight ``w_k >= 0``, and the oracle minimises
``sum_k w_k [log sum_y exp(g(x_k, y) + b_k(y)) - <q_k, g(x_k, .) + b_k>]``
(:mod:`slr.oracles.targets`). An oracle solves this over its function class. ``fit``
warm-starts from the previous solution wherever the class allows it, so that every
learning iteration of the structured learner starts from where the last one ended.
"""
from __future__ import annotations

import abc
import hashlib
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from slr._features import FeatureMatrix, check_feature_matrix, column_max_abs, densified, is_sparse
from slr._params import validate_params
from slr._versions import VersionedPickle
from slr.oracles.pair_bias import PairBias
from slr.oracles.targets import check_sample_weight, check_targets, is_soft

__all__ = [
    "LogisticOracle",
    "MAX_BIAS_SPAN",
    "OracleTags",
    "biased_logistic_loss",
    "binary_exponents",
    "check_logistic_problem",
    "check_sample_weight",
    "get_oracle_tags",
]

#: What the refusal of sparse features too large to densify suggests instead, by default.
SPARSE_ALTERNATIVE = "Use an oracle that takes sparse features: Linear, LightGBM, MLP, Constant or Zero."

#: Largest spread ``max - min`` of one row of a bias that the oracles accept. An oracle whose
#: functions can offset one bias entry against another (a per-class constant against a large bias
#: column, as Constant and Linear do at their optimum) computes sums ``g + b`` rounded to
#: ``span * 2**-53``: at most 2**-21 (5e-7) at this span, so scores and losses stay right to about
#: 1e-6 per row. At 2**52 (4.5e15) scores of order 1 vanish in the sums altogether. The learner's
#: biases (messages / epsilon) span about 1e3 at epsilon = 1e-3.
MAX_BIAS_SPAN = 2.0**32


@dataclass(frozen=True)
class OracleTags:
    """What an oracle takes and gives beyond ``fit`` and ``decision_function``.

    The structured learner reads these through :func:`get_oracle_tags` and nothing else about
    an oracle. An oracle declares them by returning an instance from ``__slr_tags__()``; the
    defaults suit any oracle (a third-party one needs no tags at all).

    Attributes
    ----------
    factored_pair_bias : bool, default=False
        ``fit`` accepts the pairwise problem's bias as a :class:`~slr.oracles.pair_bias.PairBias`
        (``left_e(a) + right_e(b)``) and exploits the factored form; otherwise the learner hands
        it the dense ``(N, L^2)`` array.
    linear_parameters : tuple of str, default=()
        Names of the fitted attributes (arrays) that the oracle's functions are linear in, e.g.
        ``("coef_", "intercept_")``. Non-empty lets the learner over-relax the oracle's updates
        (``relaxation``), moving these attributes past the fitted values.
    training_scores : bool, default=False
        ``fit`` leaves ``training_scores_``, the ``(N, K)`` scores of the rows it was fitted on,
        equal to ``decision_function`` of its features; the learner then takes them instead of
        predicting the training rows again.
    penalty : bool, default=False
        The oracle has a method ``penalty()``: the regulariser its ``fit`` adds to the biased
        logistic loss, at its current parameters (``Linear``, ``Constant``: ``l2 / 2 ||W||^2``).
        The learner then descends, checks and reports ``J = R + eps * (penalty_u + penalty_p)``,
        the objective that exact fits never raise, where it would otherwise use ``R``.
    sparse_features : bool, default=False
        ``fit`` and ``decision_function`` take a ``scipy.sparse.csr_array`` of features as it is
        (memory that grows with the stored entries). Other oracles get a dense copy, up to
        :data:`slr._features.DENSE_BUDGET` entries, and refuse larger sparse features.
    validation_stopping : bool, default=False
        The learner's ``early_stopping="auto"`` holds a share of the examples out to stop fits
        with this oracle (from 20 examples). ``MLP`` declares it: its fits keep lowering the
        objective by memorising the training examples while the error on other examples rises,
        so the stopping rule on the objective ends them only at ``max_iter``. The boosting
        oracles (``BoostedTrees``, ``LightGBM``) do not: the rule ends their fits at a lower test
        error than a held-out tenth does, which cannot resolve boosting's slow late gains (the
        research notes, "The figures behind the defaults"). ``Zero``, ``Constant`` and ``Linear``
        have bounded capacity (the ridge), and the rule ends their fits.
    """

    factored_pair_bias: bool = False
    linear_parameters: tuple[str, ...] = ()
    training_scores: bool = False
    penalty: bool = False
    validation_stopping: bool = False
    sparse_features: bool = False


def get_oracle_tags(oracle: Any) -> OracleTags:
    """The :class:`OracleTags` an oracle declares with ``__slr_tags__()``, or the defaults."""
    declare = getattr(oracle, "__slr_tags__", None)
    tags = declare() if callable(declare) else OracleTags()
    if not isinstance(tags, OracleTags):
        raise ValueError(f"{type(oracle).__name__}.__slr_tags__() must return an OracleTags, got {tags!r}")
    return tags


def rows_digest(features: FeatureMatrix) -> str:
    """What identifies a fit's rows (kind, dtype, shape and bytes), so that an oracle can tell whether
    its ``training_scores_`` belong to the rows of the next fit without keeping a copy of them."""
    sparse = is_sparse(features)
    digest = hashlib.blake2b(f"{sparse}{features.dtype.str}{features.shape}".encode(), digest_size=16)
    parts = (features.indptr, features.indices, features.data) if is_sparse(features) else (features,)
    for part in parts:
        digest.update(np.ascontiguousarray(part).reshape(-1).view(np.uint8).data)
    return digest.hexdigest()


def binary_exponents(features: FeatureMatrix) -> np.ndarray:
    """Per column, the smallest ``e`` with ``max_i |x_ij| <= 2**e`` (0 for all-zero columns).

    Dividing column ``j`` by ``2**e_j`` (``np.ldexp(x, -e)``) is exact and brings its
    largest magnitude into ``(1/2, 1]``, so that products and sums of many such values
    stay representable in float64 whatever the scale of the input.

    Parameters
    ----------
    features : ndarray or sparse matrix of shape (N, d), finite

    Returns
    -------
    ndarray of shape (d,), intc
    """
    largest = column_max_abs(features)
    mantissa, exponent = np.frexp(largest)  # largest = mantissa * 2**exponent, mantissa in [1/2, 1)
    return exponent - (mantissa == 0.5).astype(exponent.dtype)


def check_logistic_problem(
    features: Any, bias: Any, labels: Any, *, pair_bias: bool = False, sparse: bool = False,
    who: str = "this oracle", alternative: str = SPARSE_ALTERNATIVE,
) -> tuple[FeatureMatrix, Any, np.ndarray]:
    """Validate and convert the three arrays of a biased logistic problem.

    Parameters
    ----------
    features : array-like of shape (N, d)
    bias : array-like of shape (N, K), or PairBias
    labels : array-like of shape (N,) or (N, K)
        Integer classes in ``[0, K)``, or soft targets: rows of nonnegative numbers summing
        to 1 (see :func:`slr.oracles.targets.check_targets`).
    pair_bias : bool, default=False
        Return a :class:`~slr.oracles.pair_bias.PairBias` as it is (checked) instead of as its
        dense array.
    sparse : bool, default=False
        Return sparse ``features`` as a ``scipy.sparse.csr_array``; otherwise as a dense array
        (refused beyond :data:`slr._features.DENSE_BUDGET` entries).
    who, alternative : str
        The oracle that the refusal of sparse features too large to densify names, and what it
        suggests instead.

    Returns
    -------
    features, bias, labels : ndarray
        C-contiguous float64, float64 and int64 (N,) or float64 (N, K) arrays (``features``
        possibly sparse, see ``sparse``; ``bias`` a
        PairBias where one was given and ``pair_bias`` is True; soft targets divided by their
        row sums).

    Raises
    ------
    ValueError
        Naming the argument that has the wrong shape, non-finite values (or, for
        ``bias``, a row whose entries span more than :data:`MAX_BIAS_SPAN`),
        labels outside ``[0, K)`` or soft targets that are negative, not finite or
        whose rows do not sum to 1.

    Notes
    -----
    A bias row whose entries are large but close together (largest magnitude above
    :data:`MAX_BIAS_SPAN`, span below it) would swallow the scores added to it; such rows are
    shifted to a largest entry of 0, which the softmax ignores (the shift is exact where the
    row's magnitude is at least twice its span, and otherwise rounds no more than the span
    limit allows). Other rows are kept as given; when no row is shifted, ``bias`` is returned
    as it came in.
    """
    features = _feature_rows(features, sparse, who, alternative)
    if isinstance(bias, PairBias) and not pair_bias:
        bias = np.asarray(bias)
    if not isinstance(bias, PairBias):
        bias = np.ascontiguousarray(bias, dtype=np.float64)
    if features.ndim != 2:
        raise ValueError(f"features must be 2-D (N, d), got shape {features.shape}")
    if bias.ndim != 2:
        raise ValueError(f"bias must be 2-D (N, K), got shape {bias.shape}")
    n = features.shape[0]
    if n == 0:
        raise ValueError("features must contain at least one row")
    labels_rows = np.shape(labels)[0] if np.ndim(labels) in (1, 2) else n
    if bias.shape[0] != n or labels_rows != n:
        raise ValueError(
            f"features, bias and labels must have the same number of rows, got "
            f"{n}, {bias.shape[0]} and {labels_rows}"
        )
    if bias.shape[1] < 1:
        raise ValueError("bias must have at least one column (class)")
    if not np.all(np.isfinite(features.data if is_sparse(features) else features)):
        raise ValueError("features contain NaN or infinite values")
    if not isinstance(bias, PairBias) and not np.all(np.isfinite(bias)):
        raise ValueError("bias contains NaN or infinite values")   # a PairBias checked its factors
    bias = _resolvable_bias(bias)
    return features, bias, check_targets(labels, n, bias.shape[1])


def _feature_rows(features: Any, sparse: bool, who: str, alternative: str) -> FeatureMatrix:
    """Features as an oracle takes them: sparse ones kept (``sparse``) or densified within the
    budget (beyond it refused, naming ``who`` and suggesting ``alternative``), others as a
    C-contiguous float64 array (shape and values are checked by the caller)."""
    if is_sparse(features):
        matrix = check_feature_matrix(features, "features", finite=False)
        return matrix if sparse else densified(matrix, "features", who, alternative)
    if np.iscomplexobj(features):
        raise ValueError(f"features must be real, got complex values ({np.asarray(features).dtype})")
    return np.ascontiguousarray(features, dtype=np.float64)


def _resolvable_bias(bias: np.ndarray | PairBias) -> np.ndarray | PairBias:
    """``bias`` with rows of large magnitude shifted to a largest entry of 0 (see
    :func:`check_logistic_problem`), after refusing rows that span more than MAX_BIAS_SPAN."""
    # a dense row is the sum of its factors'
    factors = (bias.left, bias.right) if isinstance(bias, PairBias) else (bias,)
    tops = [f.max(axis=1, keepdims=True) for f in factors]
    bottoms = [f.min(axis=1, keepdims=True) for f in factors]
    with np.errstate(over="ignore", invalid="ignore"):
        spans = sum(top - bottom for top, bottom in zip(tops, bottoms))
    if not np.all(np.isfinite(spans)):
        raise ValueError(
            "bias values of one row differ by more than float64 can represent; the "
            "softmax over such a row cannot be computed"
        )
    if spans.max() > MAX_BIAS_SPAN:
        raise ValueError(
            f"bias values of one row span {spans.max():.3g}, more than the oracles resolve "
            f"({MAX_BIAS_SPAN:.3g}): float64 would lose the scores added to such a row; "
            "rescale the bias (in the structured learner: a larger epsilon)"
        )
    large = np.zeros((bias.shape[0], 1), dtype=bool)
    for top, bottom in zip(tops, bottoms):
        large |= np.maximum(top, -bottom) > MAX_BIAS_SPAN
    if not large.any():
        return bias
    shifted = [np.where(large, f - top, f) for f, top in zip(factors, tops)]
    return PairBias(shifted[0], shifted[1], offset=bias.offset) if isinstance(bias, PairBias) else shifted[0]


def biased_logistic_loss(
    scores: np.ndarray, bias: np.ndarray, labels: np.ndarray, sample_weight: np.ndarray | None = None
) -> tuple[float, np.ndarray]:
    """Negative biased log-likelihood and its gradient with respect to the scores.

    Parameters
    ----------
    scores : ndarray of shape (N, K)
        ``g(x_k, y)`` for every example and class.
    bias : ndarray of shape (N, K)
    labels : ndarray of shape (N,) or (N, K)
        Integer classes, or soft targets ``q_k`` (rows summing to 1).
    sample_weight : ndarray of shape (N,) or None, default=None
        Row weights ``w_k`` (None: all 1).

    Returns
    -------
    loss : float
        ``sum_k w_k [log sum_y exp(s_k(y) + b_k(y)) - sum_y q_k(y) (s_k(y) + b_k(y))]``
        (>= 0), with ``q_k = onehot(y_k)`` for integer labels.
    grad : ndarray of shape (N, K)
        ``w_k (softmax(s_k + b_k) - q_k)``.
    """
    z = scores + bias
    lse = logsumexp(z, axis=1)
    grad = np.exp(z - lse[:, None])
    if is_soft(labels):
        row_loss = lse - np.einsum("ny,ny->n", labels, z)
        grad -= labels
    else:
        rows = np.arange(z.shape[0])
        row_loss = lse - z[rows, labels]
        grad[rows, labels] -= 1.0
    if sample_weight is None:
        return float(np.sum(row_loss)), grad
    grad *= sample_weight[:, None]
    return float(sample_weight @ row_loss), grad


def softmax_loss(z: np.ndarray, labels: np.ndarray, sample_weight: np.ndarray | None = None
                 ) -> tuple[float, np.ndarray, np.ndarray]:
    """The loss of :func:`biased_logistic_loss` at ``z = scores + bias`` (the same number: scipy's
    ``logsumexp`` computed as scipy does), ``softmax(z)`` by rows (as ``scipy.special.softmax``)
    and ``logsumexp(z)``, with one exponential per entry instead of two: for a line search, which
    needs the gradient only at the point it accepts."""
    top = z.max(axis=1, keepdims=True)
    is_top = z == top
    top[~np.isfinite(top)] = 0.0   # rows whose largest entry is infinite are not shifted
    shifted = np.exp(z - top)
    n_top = np.sum(is_top, axis=1, keepdims=True, dtype=z.dtype)
    others = np.sum(np.where(is_top, 0.0, shifted), axis=1, keepdims=True)   # the largest entries apart
    others = np.where(others == 0, others, others / n_top)
    lse = (np.log1p(others) + np.log(n_top) + top)[:, 0]
    if is_soft(labels):
        row_loss = lse - np.einsum("ny,ny->n", labels, z)
    else:
        row_loss = lse - z[np.arange(z.shape[0]), labels]
    loss = float(np.sum(row_loss)) if sample_weight is None else float(sample_weight @ row_loss)
    return loss, shifted / np.sum(shifted, axis=1, keepdims=True), lse


class LogisticOracle(VersionedPickle, BaseEstimator, metaclass=abc.ABCMeta):
    """Base class of the function classes the structured learner can fit.

    Subclasses declare their parameters' admissible values in ``_parameter_constraints``
    (:mod:`slr._params`) and implement :meth:`_fit` and :meth:`decision_function`; this class
    validates the parameters and the problem. Parameters follow scikit-learn (``get_params``,
    ``set_params``, ``clone``); ``set_params`` keeps the fitted state, so the next :meth:`fit`
    warm-starts from it. What an oracle can take or give beyond that it declares with
    ``__slr_tags__`` (:class:`OracleTags`).

    Features may have zero columns (e.g. edges without features): the function then
    cannot depend on the input, and every oracle returns the best input-independent
    function of its class, fitted to the bias -- a per-class constant, or zero for
    classes without constants (:class:`~slr.oracles.Zero`, ``Linear`` without intercept).

    Attributes
    ----------
    n_classes_ : int
        Number of classes ``K`` seen by the last :meth:`fit`.
    n_features_in_ : int
        Number of input features ``d`` seen by the last :meth:`fit`.
    """

    #: Admissible values of every parameter checked by :meth:`fit` (see :mod:`slr._params`).
    _parameter_constraints: ClassVar[dict] = {}
    #: What an oracle without ``sparse_features`` suggests when it refuses sparse features too
    #: large to densify.
    _sparse_alternative: ClassVar[str] = SPARSE_ALTERNATIVE

    def __slr_tags__(self) -> OracleTags:
        """This oracle's :class:`OracleTags` (subclasses override to declare capabilities)."""
        return OracleTags()

    def fit(self, features: Any, bias: Any, labels: Any, sample_weight: Any = None) -> "LogisticOracle":
        """Maximise the (weighted) biased logistic likelihood over the function class.

        Parameters
        ----------
        features : array-like of shape (N, d)
        bias : array-like of shape (N, K), or PairBias
            Per-example offsets added to the scores before the softmax. Each row may span
            (``max - min``) at most :data:`MAX_BIAS_SPAN`.
        labels : array-like of shape (N,) or (N, K)
            True classes in ``[0, K)``, or soft targets: rows ``q_k`` of nonnegative numbers
            summing to 1 (within :data:`slr.oracles.targets.TARGET_SUM_TOL`; divided by their
            sums). The loss of a row is then ``lse(s_k + b_k) - <q_k, s_k + b_k>``, as if
            it were its one-hot rows weighted by ``q_k``. For the pairwise problem, column
            ``a * L + b`` is the pair class ``(a, b)``.
        sample_weight : array-like of shape (N,) or None, default=None
            Nonnegative finite row weights, not all zero (None: every row weighs 1). A row
            of weight ``w`` counts as ``w`` copies of it in the loss.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Naming the parameter or argument that is not admissible.
        """
        params = validate_params(self)
        tags = get_oracle_tags(self)
        features, bias, labels = check_logistic_problem(
            features, bias, labels, pair_bias=tags.factored_pair_bias, sparse=tags.sparse_features,
            who=type(self).__name__, alternative=self._sparse_alternative)
        sample_weight = check_sample_weight(sample_weight, features.shape[0])
        if getattr(self, "n_classes_", None) not in (None, bias.shape[1]) or getattr(
            self, "n_features_in_", None
        ) not in (None, features.shape[1]):
            self._reset()
        self.n_classes_ = bias.shape[1]
        self.n_features_in_ = features.shape[1]
        self._fit(features, bias, labels, sample_weight, params)
        return self

    @abc.abstractmethod
    def _fit(self, features: np.ndarray, bias: np.ndarray, labels: np.ndarray,
             sample_weight: np.ndarray | None, params: dict[str, Any]) -> None:
        """Fit on validated arrays with the validated parameters (new names only), warm-starting
        from the current state if any (``bias`` may be a PairBias in subclasses whose tags declare
        ``factored_pair_bias``; ``labels`` int64 (N,) or soft float64 (N, K); ``sample_weight``
        float64 (N,) or None for unit weights)."""

    @abc.abstractmethod
    def decision_function(self, features: Any) -> np.ndarray:
        """Scores ``g(x, y)`` of shape (N, K) for every row of ``features``."""

    def _reset(self) -> None:
        """Forget the fitted state (called when the problem's shape changes)."""
        for name in list(vars(self)):
            if name.endswith("_") and not name.startswith("__"):
                delattr(self, name)

    def loss(self, features: Any, bias: Any, labels: Any, sample_weight: Any = None) -> float:
        """The biased logistic loss (negative log-likelihood, weighted sum over the rows) of the
        fitted function, for labels or soft targets as :meth:`fit` takes them."""
        features, bias, labels = check_logistic_problem(
            features, bias, labels, sparse=get_oracle_tags(self).sparse_features, who=type(self).__name__,
            alternative=self._sparse_alternative)
        sample_weight = check_sample_weight(sample_weight, features.shape[0])
        return biased_logistic_loss(self.decision_function(features), bias, labels, sample_weight)[0]

    def _check_features(self, features: Any) -> FeatureMatrix:
        """Validate features for prediction against the fitted input width (sparse ones kept
        sparse where the oracle's tags declare ``sparse_features``)."""
        check_is_fitted(self, "n_classes_")
        features = _feature_rows(features, get_oracle_tags(self).sparse_features, type(self).__name__,
                                 self._sparse_alternative)
        if features.ndim != 2 or features.shape[1] != self.n_features_in_:
            raise ValueError(
                f"features must have shape (N, {self.n_features_in_}), got {features.shape}"
            )
        if not np.all(np.isfinite(features.data if is_sparse(features) else features)):
            raise ValueError("features contain NaN or infinite values")
        return features
