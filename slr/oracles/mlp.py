"""One-hidden-layer tanh perceptron trained by mini-batch SGD with momentum (chapter Sec. 1.9.5)."""
from __future__ import annotations

from typing import Any

import numpy as np

from slr._params import Boolean, Integer, RandomState, Real
from slr.oracles.base import LogisticOracle, binary_exponents
from slr.oracles.linear import _single_threaded_blas
from slr.validation import check_generator

__all__ = ["MLP"]

_BLOCK_ELEMENTS = 1 << 18
# SGD runs in single precision: numpy's float64 tanh is unvectorised on common builds and
# dominated the step time (about 2.4x slower per step); SGD noise dwarfs the rounding.
_DTYPE = np.float32


class MLP(LogisticOracle):
    """``g(x, y) = (W tanh(V x + c) + e)_y`` fitted to the biased logistic loss by SGD.

    Each fit runs ``n_epochs`` passes over a fresh random permutation of the rows in
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
    across learning iterations. SGD finds a local optimum only and does not guarantee that
    a refit lowers the loss.

    Parameters
    ----------
    n_hidden : int, default=100
        Width of the tanh hidden layer.
    learning_rate : float, default=0.25
        SGD step ``eta`` (the chapter uses 0.25 for unary and 0.05 for pairwise factors).
    momentum : float, default=0.9
        ``m`` in [0, 1).
    batch_size : int, default=100
        Rows per mini-batch (the last batch of an epoch may be smaller).
    n_epochs : int, default=2
        Passes over the data per call to ``fit``. The chapter does not give it; the
        structured learner calls ``fit`` once per learning iteration (25 iterations), so
        with warm starts a model sees 50 epochs in total, at about a second per fit for
        the denoising pairwise problem (316,800 rows, K = 4). On unary
        denoising-like features (fixed bias) the loss plateaued after about 4 epochs at
        step 0.25, so more epochs per fit mostly cost time.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds the initial weights and the row permutations. An int gives identical
        results for identical calls; a Generator is used (and advanced) in place.
    standardize : bool, default=True
        Feed the network ``(x - mean) / std`` with the per-feature mean and standard
        deviation of the first fit (kept across warm starts; constant features pass
        unchanged; weighted by ``sample_weight`` where given). This does not change the
        function class, only SGD's conditioning: on denoising-like features in [0, 1] it
        is what lets the hidden units leave the linear regime within the per-fit budget.

    Attributes
    ----------
    input_mean_, input_scale_ : ndarray of shape (d,)
        The input standardisation (zeros and ones when ``standardize`` is False).
    hidden_weights_ : ndarray of shape (n_hidden, d)   (``V``, on standardised inputs)
    hidden_bias_ : ndarray of shape (n_hidden,)        (``c``)
    output_weights_ : ndarray of shape (K, n_hidden)   (``W``)
    output_bias_ : ndarray of shape (K,)               (``e``)
    n_iter_ : int
        SGD steps taken over all fits since the last reset.

    Notes
    -----
    Weights start Glorot-uniform (``U(-a, a)``, ``a = sqrt(6 / (fan_in + fan_out))``),
    biases at zero. All parameters live in one flat float32 vector ``params_`` (the
    attributes above are views of it), so the momentum update is one vector operation.
    Training and :meth:`decision_function` compute in float32 (the latter returns
    float64); the network is small and SGD noise dwarfs single-precision rounding.
    """

    _parameter_constraints = {
        "n_hidden": Integer(1, None),
        "learning_rate": Real(0.0, low_open=True),
        "momentum": Real(0.0, 1.0, high_open=True),
        "batch_size": Integer(1, None),
        "n_epochs": Integer(0, None),
        "standardize": Boolean(),
        "random_state": RandomState(),
    }

    def __init__(
        self,
        n_hidden: int = 100,
        learning_rate: float = 0.25,
        momentum: float = 0.9,
        batch_size: int = 100,
        n_epochs: int = 2,
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

    def _transform(self, features: np.ndarray) -> np.ndarray:
        """Standardised single-precision inputs.

        Raises
        ------
        ValueError
            If a standardised value is beyond the single-precision range.
        """
        with np.errstate(over="ignore"):
            out = (features - self.input_mean_) / self.input_scale_
        if not np.all(np.abs(out) <= np.finfo(_DTYPE).max):
            hint = "" if self.standardize else " or set standardize=True"
            raise ValueError(
                "features are too large for the MLP's single-precision arithmetic "
                f"(largest standardised |x| = {np.max(np.abs(out)):.3g}); rescale them{hint}"
            )
        return out.astype(_DTYPE)

    def _fit(self, features: np.ndarray, bias: np.ndarray, labels: np.ndarray,
             sample_weight: np.ndarray | None, params: dict[str, Any]) -> None:
        with _single_threaded_blas():
            self._sgd(features, bias, labels, sample_weight, params)

    def _sgd(self, features: np.ndarray, bias: np.ndarray, labels: np.ndarray,
             sample_weight: np.ndarray | None, settings: dict[str, Any]) -> None:
        n_hidden, eta, mom, batch_size, n_epochs = (
            settings[name] for name in ("n_hidden", "learning_rate", "momentum", "batch_size", "n_epochs"))
        if not hasattr(self, "params_"):
            self._initialise(n_hidden, features, sample_weight, settings)
        n = features.shape[0]
        features = self._transform(features)
        bias = bias.astype(_DTYPE)
        soft = labels.ndim == 2
        if soft:
            labels = labels.astype(_DTYPE)
        # relative weights (mean 1): the step size means what it means without weights
        scale = None
        if sample_weight is not None:
            scale = (sample_weight * (n / sample_weight.sum())).astype(_DTYPE)
        mom, omm, eta = _DTYPE(mom), _DTYPE(1.0 - mom), _DTYPE(eta)
        params, velocity = self.params_, self.velocity_
        grad = np.empty_like(params)
        v, c, w, e = self._split(params)
        gv, gc, gw, ge = self._split(grad)
        rows = np.arange(min(batch_size, n))
        for _ in range(n_epochs):
            order = self.rng_.permutation(n)
            xs, bs, ys = features[order], bias[order], labels[order]
            ws = None if scale is None else scale[order]
            for start in range(0, n, batch_size):
                stop = min(n, start + batch_size)
                m = stop - start
                x, y = xs[start:stop], ys[start:stop]
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
                np.matmul(back.T, x, out=gv)
                back.sum(axis=0, out=gc)
                velocity *= mom
                velocity += omm * grad
                params -= eta * velocity
            self.n_iter_ += -(-n // batch_size)
        if not np.all(np.isfinite(params)):
            raise FloatingPointError(
                "MLP weights became non-finite during SGD; lower learning_rate"
            )

    def decision_function(self, features: Any) -> np.ndarray:
        """Scores ``W tanh(V x + c) + e`` of shape (N, K)."""
        features = self._check_features(features)
        v, c, w, e = self._split(self.params_)
        n = features.shape[0]
        out = np.empty((n, self.n_classes_), dtype=_DTYPE)
        step = max(1, _BLOCK_ELEMENTS // max(v.shape[0], w.shape[0]))
        with _single_threaded_blas():
            for start in range(0, n, step):
                rows = slice(start, min(n, start + step))
                hidden = self._transform(features[rows]) @ v.T
                hidden += c
                np.tanh(hidden, out=hidden)
                np.matmul(hidden, w.T, out=out[rows])
        out += e
        return out.astype(np.float64)
