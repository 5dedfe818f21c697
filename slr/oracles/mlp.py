"""One-hidden-layer tanh perceptron trained by mini-batch SGD with momentum (chapter Sec. 1.9.5)."""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from slr._features import FeatureMatrix, is_sparse, scale_columns
from slr._params import Boolean, Integer, Options, RandomState, Real
from slr.oracles.base import LogisticOracle, OracleTags, binary_exponents, rows_digest
from slr.oracles.linear import _single_threaded_blas
from slr.validation import check_generator

__all__ = ["MLP"]

_BLOCK_ELEMENTS = 1 << 18
# SGD runs in single precision: numpy's float64 tanh is unvectorised on common builds and
# dominated the step time (about 2.4x slower per step); SGD noise dwarfs the rounding.
_DTYPE = np.float32
#: ``n_epochs="auto"``: at most this many epochs per fit, and none after one that gains at most
#: ``_PLATEAU`` times what the fit's first epoch gained.
_AUTO_MAX_EPOCHS = 20
_PLATEAU = 0.1
#: Epochs at steps eta/2, eta/4, ... that repair a fit whose loss ended above its start's.
_REPAIR_EPOCHS = 3


class MLP(LogisticOracle):
    """``g(x, y) = (W tanh(V x + c) + e)_y`` fitted to the biased logistic loss by SGD.

    Each fit runs epochs (passes over a fresh random permutation of the rows) in
    mini-batches of ``batch_size``. With momentum ``m`` and step ``eta`` every update is

        step   <- m * step + (1 - m) * mean_gradient_over_batch
        params <- params - eta * step

    i.e. "each step is a combination of .9 of the last step and .1 of the current
    gradient" (chapter Sec. 1.9.5). The loss is the weighted soft cross-entropy of
    :meth:`fit`; a row's gradient is ``w_k / mean(w) * (softmax - q_k)``, so the weights
    only set the rows' relative importance (equal weights give the unweighted fit to
    rounding; integer weights equal duplicated rows in expectation over the batches, and
    exactly, to rounding, with one batch per epoch). Fitting again on a problem of the
    same shape continues from the current weights and momentum, as the chapter does
    across learning iterations.

    A fit never ends with a biased loss above that of the function it starts from: the
    current weights for the new bias, or at the first fit the better of the initial network
    and the zero function (the structured learner's potentials before any fit). So the
    learner's R never rises at an MLP fit. Where the epochs end higher, up to 3 more epochs at
    steps ``eta/2, eta/4, eta/8`` continue from where they stopped; if the loss is still
    higher, the fit returns the function it started from (``kept_previous_``; a diverged
    network restarts these epochs from it). A fit whose epochs lower the loss is plain SGD,
    bit for bit. The halved steps stay within the fit that needed them: a variant that undid
    every rising epoch and kept the halved step for later fits learned slower (the research
    notes, "The figures behind the defaults"). The losses are summed in float64 from the scores that
    :meth:`decision_function` returns, so the comparison is the learner's.

    Parameters
    ----------
    n_hidden : int, default=100
        Width of the tanh hidden layer.
    learning_rate : float, default=0.25
        SGD step ``eta`` (the chapter uses 0.25 for unary and 0.05 for pairwise factors).
    momentum : float, default=0.9
        ``m`` in [0, 1).
    batch_size : int, default=100
        Rows per mini-batch (the last batch of an epoch may be smaller); the chapter's 100.
        An epoch is ``N / batch_size`` SGD steps, so with ``n_epochs="auto"`` this also sets
        how much a fit learns (see there).
    n_epochs : "auto" or int, default="auto"
        Epochs per call to ``fit``. ``"auto"``: epochs until one lowers the loss by at most
        a tenth of what the fit's first epoch gained (at once if that gained nothing), at
        most 20. The budget so follows the loss, not the row count: a fit far from its
        problem's optimum runs more epochs than one near it, where SGD's noise ends the
        gains. An int runs that many epochs (the default was 2 before ``"auto"``; the
        chapter does not give it). On unary denoising-like features (fixed bias) the loss
        plateaued after about 4 epochs at step 0.25. In the structured learner a fit starts
        from the last one's network and its first epoch's gain is mostly the refit to the
        new messages, often 10-100 times the second's: the rule ends most fits after 2-4
        epochs, and what they learn is the SGD steps these hold. The rule was chosen on the
        quick denoising data and checked on Table 1 at the paper's size (the research notes,
        "The figures behind the defaults"). scikit-learn's MLP (``tol`` on an epoch's mean training
        loss, ``n_iter_no_change`` epochs) and Keras' ``EarlyStopping`` (``min_delta``,
        ``patience``) end one fit from scratch on an absolute threshold; the rule here is
        relative to the fit's own first epoch, so it needs no scale for the loss.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds the initial weights and the row permutations. An int gives identical
        results for identical calls; a Generator is used (and advanced) in place.
    standardize : bool, default=True
        Feed the network ``(x - mean) / std`` with the per-feature mean and standard
        deviation of the first fit (kept across warm starts; constant features pass
        unchanged; weighted by ``sample_weight`` where given). This does not change the
        function class, only SGD's conditioning: on denoising-like features in [0, 1] it
        is what lets the hidden units leave the linear regime within the per-fit budget.
        On sparse features the first fit only divides each column by its standard
        deviation (``input_mean_`` stays zero): centred inputs would be dense.

    Attributes
    ----------
    input_mean_, input_scale_ : ndarray of shape (d,)
        The input standardisation (zeros and ones when ``standardize`` is False).
    hidden_weights_ : ndarray of shape (n_hidden, d)   (``V``, on standardised inputs)
    hidden_bias_ : ndarray of shape (n_hidden,)        (``c``)
    output_weights_ : ndarray of shape (K, n_hidden)   (``W``)
    output_bias_ : ndarray of shape (K,)               (``e``)
    n_iter_ : int
        SGD steps taken over all fits since the last reset (those of undone epochs too).
    n_epochs_ : int
        Epochs the last fit ran, repair epochs included.
    kept_previous_ : bool
        Whether the last fit returned the function it started from (its epochs ended above
        that function's loss).
    training_scores_ : ndarray of shape (N, K)
        :meth:`decision_function` of the last fit's rows, bit for bit (the oracle's tags
        declare ``training_scores``); the next fit on the same rows starts from them. Not
        pickled.

    Notes
    -----
    Weights start Glorot-uniform (``U(-a, a)``, ``a = sqrt(6 / (fan_in + fan_out))``),
    biases at zero. All parameters live in one flat float32 vector ``params_`` (the
    attributes above are views of it), so the momentum update is one vector operation.
    Training and :meth:`decision_function` compute in float32 (the latter returns
    float64); the network is small and SGD noise dwarfs single-precision rounding.

    Features may be a ``scipy.sparse`` matrix (the oracle's tags declare ``sparse_features``):
    the first layer is then a sparse-dense product per mini-batch over the columns that batch
    uses, and a fit's memory grows as ``nnz + d * n_hidden``, never as ``N * d``. Without
    standardisation a sparse and a dense copy of the same rows give the same fit to float32
    rounding. A mean kept from a fit on dense features enters the sparse products as a shift
    of the hidden bias, so such a network computes the same function on either kind.
    """

    _parameter_constraints = {
        "n_hidden": Integer(1, None),
        "learning_rate": Real(0.0, low_open=True),
        "momentum": Real(0.0, 1.0, high_open=True),
        "batch_size": Integer(1, None),
        "n_epochs": (Options(("auto",)), Integer(0, None)),
        "standardize": Boolean(),
        "random_state": RandomState(),
    }

    def __init__(
        self,
        n_hidden: int = 100,
        learning_rate: float = 0.25,
        momentum: float = 0.9,
        batch_size: int = 100,
        n_epochs: int | str = "auto",
        random_state: Any = None,
        standardize: bool = True,
    ) -> None:
        self.n_hidden = n_hidden
        self.learning_rate = learning_rate
        self.momentum = momentum
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.random_state = random_state
        self.standardize = standardize

    def __slr_tags__(self) -> OracleTags:
        return OracleTags(training_scores=True, validation_stopping=True, sparse_features=True)

    # parameter views ---------------------------------------------------------------------
    def _split(self, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Views (V, c, W, e) of a flat parameter (or gradient) vector."""
        d, k = self.n_features_in_, self.n_classes_
        h = (flat.size - k) // (d + 1 + k)  # from the stored size, not the (mutable) parameter
        sizes = np.cumsum([h * d, h, k * h])
        return (
            flat[: sizes[0]].reshape(h, d),
            flat[sizes[0]: sizes[1]],
            flat[sizes[1]: sizes[2]].reshape(k, h),
            flat[sizes[2]:],
        )

    @property
    def hidden_weights_(self) -> np.ndarray:
        return self._split(self.params_)[0]

    @property
    def hidden_bias_(self) -> np.ndarray:
        return self._split(self.params_)[1]

    @property
    def output_weights_(self) -> np.ndarray:
        return self._split(self.params_)[2]

    @property
    def output_bias_(self) -> np.ndarray:
        return self._split(self.params_)[3]

    # fitting -----------------------------------------------------------------------------
    def _initialise(self, n_hidden: int, features: np.ndarray, sample_weight: np.ndarray | None,
                    settings: dict[str, Any]) -> None:
        self.rng_ = check_generator(settings["random_state"])
        d, k = self.n_features_in_, self.n_classes_
        self.params_ = np.zeros(n_hidden * d + n_hidden + k * n_hidden + k, dtype=_DTYPE)
        v, _, w, _ = self._split(self.params_)
        v[...] = self.rng_.uniform(-1.0, 1.0, v.shape) * np.sqrt(6.0 / (d + n_hidden))
        w[...] = self.rng_.uniform(-1.0, 1.0, w.shape) * np.sqrt(6.0 / (n_hidden + k))
        self.velocity_ = np.zeros_like(self.params_)
        self.n_iter_ = 0
        self.input_mean_ = np.zeros(d)
        self.input_scale_ = np.ones(d)
        if settings["standardize"]:
            # statistics of columns scaled by powers of two: exact, and no overflow
            exponents = binary_exponents(features)
            if is_sparse(features):
                mean, std = _sparse_column_moments(scale_columns(features, -exponents), sample_weight)
                mean, std = np.ldexp(mean, exponents), np.ldexp(std, exponents)
                varies = std > 1e-12 * np.maximum(1.0, np.abs(mean))
                self.input_scale_[varies] = std[varies]   # no centring: it would densify the rows
                return
            scaled = np.ldexp(features, -exponents)
            if sample_weight is None:
                mean = np.ldexp(scaled.mean(axis=0), exponents)
                std = np.ldexp(scaled.std(axis=0), exponents)
            else:
                scaled_mean = np.average(scaled, axis=0, weights=sample_weight)
                variance = np.average((scaled - scaled_mean) ** 2, axis=0, weights=sample_weight)
                mean = np.ldexp(scaled_mean, exponents)
                std = np.ldexp(np.sqrt(variance), exponents)
            varies = std > 1e-12 * np.maximum(1.0, np.abs(mean))
            self.input_mean_[varies] = mean[varies]
            self.input_scale_[varies] = std[varies]

    def _transform(self, features: FeatureMatrix) -> FeatureMatrix:
        """Standardised single-precision inputs (sparse ones scaled only: the mean enters the
        first layer through :meth:`_centre`).

        Raises
        ------
        ValueError
            If a standardised value is beyond the single-precision range.
        """
        if is_sparse(features):
            with np.errstate(over="ignore"):
                values = features.data / self.input_scale_[features.indices]
            self._check_range(values)
            return sp.csr_array((values.astype(_DTYPE), features.indices, features.indptr), shape=features.shape)
        with np.errstate(over="ignore"):
            out = (features - self.input_mean_) / self.input_scale_
        self._check_range(out)
        return out.astype(_DTYPE)

    def _check_range(self, out: np.ndarray) -> None:
        """Refuse standardised inputs beyond the single-precision range."""
        if not np.all(np.abs(out) <= np.finfo(_DTYPE).max):
            hint = "" if self.standardize else " or set standardize=True"
            raise ValueError(
                "features are too large for the MLP's single-precision arithmetic "
                f"(largest standardised |x| = {np.max(np.abs(out)):.3g}); rescale them{hint}"
            )

    def _centre(self) -> np.ndarray | None:
        """``mean / scale`` in float32, which sparse inputs (scaled, not centred) still need
        subtracted, or None where the mean is zero."""
        if not np.any(self.input_mean_):
            return None
        return (self.input_mean_ / self.input_scale_).astype(_DTYPE)

    def _fit(self, features: np.ndarray, bias: np.ndarray, labels: np.ndarray,
             sample_weight: np.ndarray | None, params: dict[str, Any]) -> None:
        with _single_threaded_blas():
            self._sgd(features, bias, labels, sample_weight, params)

    def _sgd(self, features: np.ndarray, bias: np.ndarray, labels: np.ndarray,
             sample_weight: np.ndarray | None, settings: dict[str, Any]) -> None:
        """The fit's epochs; then, if the biased loss ended above that of the function the fit
        started from, repair epochs at halved steps, or that function again."""
        first = not hasattr(self, "params_")
        if first:
            self._initialise(settings["n_hidden"], features, sample_weight, settings)
        inputs = self._transform(features)
        problem = _Problem(inputs, bias, labels, sample_weight)
        current, start = self._start(features, inputs, problem, first)
        epoch = functools.partial(self._epoch, problem, momentum=settings["momentum"],
                                  batch_size=settings["batch_size"])
        eta = settings["learning_rate"]
        if settings["n_epochs"] == "auto":
            end, n_run = self._epochs_to_plateau(epoch, eta, inputs, problem, current.loss)
        else:
            n_run = settings["n_epochs"]
            for _ in range(n_run):
                epoch(eta)
            end = self._state(inputs, problem) if n_run else current
        for halvings in range(1, _REPAIR_EPOCHS + 1 if n_run else 0):
            if end.loss <= start.loss:
                break
            if not np.all(np.isfinite(self.params_)):   # diverged: step again from the start
                start.restore(self)
            epoch(eta * 2.0**-halvings)
            end = self._state(inputs, problem)
            n_run += 1
        self.kept_previous_ = not end.loss <= start.loss
        if self.kept_previous_:
            start.restore(self)
            end = start
        self.n_epochs_ = n_run
        assert end.scores is not None   # None only at an infinite loss, above the start's finite one
        self.training_scores_ = end.scores
        self._training_digest_ = rows_digest(features)

    def _start(self, features: np.ndarray, inputs: np.ndarray, problem: "_Problem",
               first: bool) -> tuple["_Snapshot", "_Snapshot"]:
        """The current network, and the function the fit must not end worse than: the current
        network, or at the first fit the zero function where that is better (the learner's
        potentials before any fit). The current scores are the last fit's
        ``training_scores_`` when the rows are the same."""
        if getattr(self, "_training_digest_", None) == rows_digest(features):
            scores = self.training_scores_
        else:
            scores = self._scores(inputs)
        current = self._snapshot(scores, problem.loss(scores))
        if first:
            zero = problem.loss(np.zeros_like(scores))
            if zero < current.loss:   # the initial network with its output layer set to zero
                start = self._snapshot(np.zeros_like(scores), zero)
                _, _, w, e = self._split(start.params)
                w[...], e[...] = 0.0, 0.0
                start.velocity[...] = 0.0
                return current, start
        return current, current

    def _epochs_to_plateau(self, epoch: Callable[[float], None], eta: float, inputs: np.ndarray,
                           problem: "_Problem", current: float) -> tuple["_Snapshot", int]:
        """``n_epochs="auto"``: epochs from the network of loss ``current`` until one gains at
        most ``_PLATEAU`` times what the first gained (at once if that is nothing), at most
        ``_AUTO_MAX_EPOCHS``; the last epoch's end and the number of epochs."""
        previous, first_gain = current, None
        for n_run in range(1, _AUTO_MAX_EPOCHS + 1):
            epoch(eta)
            end = self._state(inputs, problem)
            gain, previous = previous - end.loss, end.loss
            first_gain = gain if first_gain is None else first_gain
            if gain <= _PLATEAU * max(first_gain, 0.0):
                break
        return end, n_run

    def _state(self, inputs: np.ndarray, problem: "_Problem") -> "_Snapshot":
        """The current network, its training scores and loss (inf with non-finite weights)."""
        scores = self._scores(inputs) if np.all(np.isfinite(self.params_)) else None
        return self._snapshot(scores, np.inf if scores is None else problem.loss(scores))

    def _snapshot(self, scores: np.ndarray | None, loss: float) -> "_Snapshot":
        return _Snapshot(self.params_.copy(), self.velocity_.copy(), scores, loss)

    def _epoch(self, problem: "_Problem", eta: float, *, momentum: float, batch_size: int) -> None:
        """One pass of momentum SGD over a random permutation of the rows, in place."""
        features, bias, labels, scale = problem.inputs, problem.bias32, problem.labels32, problem.scale
        n = features.shape[0]
        soft = labels.ndim == 2
        mom, omm, step = _DTYPE(momentum), _DTYPE(1.0 - momentum), _DTYPE(eta)
        params, velocity = self.params_, self.velocity_
        sparse = is_sparse(features)
        centre = self._centre() if sparse else None
        grad = np.zeros_like(params) if sparse else np.empty_like(params)
        used = np.zeros(0, dtype=np.intp)   # the columns of the last batch's (sparse) gradient
        v, c, w, e = self._split(params)
        gv, gc, gw, ge = self._split(grad)
        rows = np.arange(min(batch_size, n))
        order = self.rng_.permutation(n)
        xs, bs, ys = features[order], bias[order], labels[order]
        ws = None if scale is None else scale[order]
        for start in range(0, n, batch_size):
            stop = min(n, start + batch_size)
            m = stop - start
            x, y = xs[start:stop], ys[start:stop]
            if sparse:
                x, columns = _used_columns(x)
                hidden = _first_layer(x, columns, v, centre)
            else:
                hidden = x @ v.T
            hidden += c
            np.tanh(hidden, out=hidden)
            z = hidden @ w.T
            z += e
            z += bs[start:stop]
            z -= z.max(axis=1, keepdims=True)
            np.exp(z, out=z)
            z /= z.sum(axis=1, keepdims=True)
            if soft:
                z -= y
            else:
                z[rows[:m], y] -= 1.0
            if ws is not None:
                z *= ws[start:stop, None]
            z /= m  # z is now d(mean loss)/d(scores)
            np.matmul(z.T, hidden, out=gw)
            z.sum(axis=0, out=ge)
            back = z @ w
            hidden *= hidden
            np.subtract(1.0, hidden, out=hidden)
            back *= hidden
            back.sum(axis=0, out=gc)
            if sparse:
                if centre is None:
                    gv[:, used] = 0.0
                else:
                    np.multiply.outer(-gc, centre, out=gv)
                gv[:, columns] += (x.T @ back).T
                used = columns
            else:
                np.matmul(back.T, x, out=gv)
            velocity *= mom
            velocity += omm * grad
            params -= step * velocity
        self.n_iter_ += -(-n // batch_size)

    def _scores(self, inputs: FeatureMatrix, transformed: bool = True) -> np.ndarray:
        """Scores (N, K) in float64 of standardised float32 ``inputs`` (raw features where
        ``transformed`` is False), computed block by block as :meth:`decision_function` does."""
        v, c, w, e = self._split(self.params_)
        n = inputs.shape[0]
        out = np.empty((n, self.n_classes_), dtype=_DTYPE)
        step = max(1, _BLOCK_ELEMENTS // max(v.shape[0], w.shape[0]))
        centre = self._centre() if is_sparse(inputs) else None
        for start in range(0, n, step):
            rows = slice(start, min(n, start + step))
            x = inputs[rows] if transformed else self._transform(inputs[rows])
            if is_sparse(x):
                hidden = _first_layer(*_used_columns(x), v, centre)
            else:
                hidden = x @ v.T
            hidden += c
            np.tanh(hidden, out=hidden)
            np.matmul(hidden, w.T, out=out[rows])
        out += e
        return out.astype(np.float64)

    def __getstate__(self) -> dict:
        state = dict(super().__getstate__())  # a copy: object.__getstate__ returns __dict__ itself
        for name in ("training_scores_", "_training_digest_"):   # the scores are large and recomputable
            state.pop(name, None)
        return state

    def decision_function(self, features: Any) -> np.ndarray:
        """Scores ``W tanh(V x + c) + e`` of shape (N, K)."""
        features = self._check_features(features)
        with _single_threaded_blas():
            return self._scores(features, transformed=False)


def _used_columns(rows: sp.csr_array) -> tuple[sp.csr_array, np.ndarray]:
    """The rows restricted to the columns they use (renumbered in order), and those columns."""
    columns, local = np.unique(rows.indices, return_inverse=True)
    return sp.csr_array((rows.data, local.reshape(-1), rows.indptr), shape=(rows.shape[0], columns.size)), columns


def _first_layer(rows: sp.csr_array, columns: np.ndarray, v: np.ndarray, centre: np.ndarray | None) -> np.ndarray:
    """``(x - centre) V^T`` for sparse rows ``x`` given on their ``columns`` (float32, (m, h))."""
    hidden = rows @ v.T[columns]   # (u, h), C-contiguous: no copy of V's other columns
    if centre is not None:
        hidden -= v @ centre
    return hidden


def _sparse_column_moments(features: sp.csr_array, sample_weight: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Per column, the (weighted) mean and standard deviation over all rows, implicit zeros included,
    from the stored entries only (deviations from the mean summed directly, not by ``E[x^2] - mean^2``)."""
    n, d = features.shape
    weights = np.ones(n) if sample_weight is None else sample_weight
    total = weights.sum()
    entry_weights = np.repeat(weights, np.diff(features.indptr))
    mean = np.bincount(features.indices, entry_weights * features.data, d) / total
    deviations = features.data - mean[features.indices]
    stored = np.bincount(features.indices, entry_weights * deviations**2, d)
    # the rows where a column is zero deviate from its mean by -mean
    unstored = np.maximum(total - np.bincount(features.indices, entry_weights, d), 0.0)
    return mean, np.sqrt((stored + unstored * mean**2) / total)


class _Problem:
    """One fit's rows: float64 arrays for the loss, float32 copies for SGD."""

    def __init__(self, inputs: np.ndarray, bias: np.ndarray, labels: np.ndarray,
                 sample_weight: np.ndarray | None) -> None:
        self.inputs, self.bias, self.labels, self.sample_weight = inputs, bias, labels, sample_weight
        self.bias32 = bias.astype(_DTYPE)
        self.labels32 = labels.astype(_DTYPE) if labels.ndim == 2 else labels
        n = inputs.shape[0]
        # relative weights (mean 1): the step size means what it means without weights
        self.scale = None if sample_weight is None else (sample_weight * (n / sample_weight.sum())).astype(_DTYPE)

    def loss(self, scores: np.ndarray) -> float:
        """The (weighted) biased loss of ``scores`` (float64), as
        :func:`~slr.oracles.base.biased_logistic_loss` defines it, without its gradient (a
        quarter of its time); inf where it is not finite."""
        with np.errstate(over="ignore", invalid="ignore"):
            z = scores + self.bias
            z -= z.max(axis=1, keepdims=True)
            if self.labels.ndim == 2:
                taken = np.einsum("ny,ny->n", self.labels, z)
            else:
                taken = z[np.arange(z.shape[0]), self.labels]
            np.exp(z, out=z)
            rows = np.log(z.sum(axis=1)) - taken
            value = float(rows.sum() if self.sample_weight is None else self.sample_weight @ rows)
        return value if np.isfinite(value) else np.inf


@dataclass
class _Snapshot:
    """A network's parameters and momentum (copies), its training scores and biased loss."""

    params: np.ndarray
    velocity: np.ndarray
    scores: np.ndarray | None
    loss: float

    def restore(self, model: MLP) -> None:
        """Put the parameters and momentum back into ``model``."""
        model.params_[...] = self.params
        model.velocity_[...] = self.velocity
