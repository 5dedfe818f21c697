"""The MLP oracle's fits never raise the biased loss, and ``n_epochs="auto"``
(the per-fit budget from a loss plateau)."""
import copy
import pickle
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import softmax

from slr.oracles import MLP
from slr.oracles.base import biased_logistic_loss


def _problem(n=300, d=3, k=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = np.array([rng.choice(k, p=p) for p in softmax(x @ rng.normal(size=(k, d)).T, axis=1)])
    return x, y, rng


def _initial(x, k, **params):
    """The network a first fit starts from, before any epoch."""
    model = MLP(**params)
    model.n_classes_, model.n_features_in_ = k, x.shape[1]
    model._initialise(model.n_hidden, x, None, model.get_params())
    return model


def _loss(model, x, bias, y, weights=None):
    """The biased loss of the model's function, computed by the shared reference."""
    return biased_logistic_loss(model.decision_function(x), bias, y, weights)[0]


@pytest.mark.parametrize("learning_rate", [0.25, 4.0, 1e4])
def test_refits_on_changing_biases_never_raise_the_loss(learning_rate):
    """As in the learner: every fit gets a new bias and warm-starts from the last function; the
    loss after it is at most that of the function it replaces, for the new bias. At step 4 plain
    SGD raises it at some fits (so the safeguard is exercised); at 1e4 the weights would overflow."""
    x, y, rng = _problem()
    model = MLP(n_hidden=10, n_epochs=2, batch_size=20, learning_rate=learning_rate, random_state=0)
    bias = 3.0 * rng.normal(size=(len(y), 3))
    before = biased_logistic_loss(np.zeros_like(bias), bias, y)[0]   # the learner's function before any fit
    repaired = 0
    for _ in range(8):
        model.fit(x, bias, y)
        after = _loss(model, x, bias, y)
        assert after <= before
        assert np.all(np.isfinite(model.params_))
        repaired += model.n_epochs_ > 2 or model.kept_previous_
        bias = bias + rng.normal(size=bias.shape)   # the messages moved
        before = _loss(model, x, bias, y)
    if learning_rate > 1:
        assert repaired > 0


def test_fits_that_lower_the_loss_are_plain_sgd():
    """Where no fit raises the loss the safeguard changes nothing: two fits of one epoch are the
    same SGD (permutations, momentum) as one fit of two, bit for bit."""
    x, y, rng = _problem(seed=1)
    bias = rng.normal(size=(len(y), 3))
    fitted = MLP(n_hidden=8, n_epochs=3, learning_rate=0.05, random_state=0).fit(x, bias, y)
    bias = bias + 0.1 * rng.normal(size=bias.shape)
    one, two = copy.deepcopy(fitted), copy.deepcopy(fitted)
    for _ in range(2):
        one.set_params(n_epochs=1).fit(x, bias, y)
        assert not one.kept_previous_ and one.n_epochs_ == 1
    two.set_params(n_epochs=2).fit(x, bias, y)
    assert two.n_epochs_ == 2
    np.testing.assert_array_equal(one.params_, two.params_)
    np.testing.assert_array_equal(one.velocity_, two.velocity_)


def test_first_fit_is_never_worse_than_the_zero_function():
    """Before its first fit the learner's potentials are 0. A random initial network is worse
    than 0 for a strong bias; with no epoch to improve on it the fit returns the zero function."""
    x, y, rng = _problem(seed=2)
    bias = 5.0 * np.eye(3)[y] + rng.normal(size=(len(y), 3))
    zero = biased_logistic_loss(np.zeros_like(bias), bias, y)[0]
    initial = _initial(x, 3, n_hidden=6, random_state=0)
    assert _loss(initial, x, bias, y) > zero    # the premise
    model = MLP(n_hidden=6, n_epochs=0, random_state=0).fit(x, bias, y)
    assert np.array_equal(model.decision_function(x), np.zeros_like(bias))
    assert np.array_equal(model.hidden_weights_, initial.hidden_weights_)   # the hidden layer stays
    assert model.kept_previous_


def test_training_scores_are_decision_function_bit_for_bit():
    """The tag ``training_scores``: the learner takes them in place of predicting the rows again,
    so they must be exactly what decision_function returns (rows over several blocks)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6000, 4))
    bias = rng.normal(size=(6000, 2))
    y = rng.integers(0, 2, 6000)
    weights = rng.uniform(0.5, 2.0, 6000)
    model = MLP(n_hidden=100, n_epochs=1, batch_size=500, random_state=0).fit(x, bias, y, weights)
    assert np.array_equal(model.training_scores_, model.decision_function(x))
    assert model.training_scores_.dtype == np.float64
    model.fit(x, bias + 1.0, y, weights)   # the start's scores are reused for the same rows
    assert np.array_equal(model.training_scores_, model.decision_function(x))
    restored = pickle.loads(pickle.dumps(model))
    assert not hasattr(restored, "training_scores_")
    restored.fit(x, bias, y, weights)      # recomputes them
    assert np.array_equal(restored.training_scores_, restored.decision_function(x))


def test_weighted_fits_compare_weighted_losses():
    x, y, rng = _problem(seed=4)
    weights = rng.uniform(0.0, 3.0, len(y))
    bias = 2.0 * rng.normal(size=(len(y), 3))
    model = MLP(n_hidden=8, n_epochs=2, learning_rate=6.0, random_state=0).fit(x, bias, y, weights)
    for _ in range(5):
        bias = bias + rng.normal(size=bias.shape)
        before = _loss(model, x, bias, y, weights)
        model.fit(x, bias, y, weights)
        assert _loss(model, x, bias, y, weights) <= before


def _single_epoch_losses(x, bias, y, n, model=None):
    """The loss after each of ``n`` successive one-epoch fits (of ``model``, by default a fresh
    network): the same SGD as ``n_epochs="auto"`` runs within one fit, as long as none of them
    is repaired."""
    model = MLP(n_hidden=10, n_epochs=1, random_state=0) if model is None else model
    losses, models = [], []
    for _ in range(n):
        model.fit(x, bias, y)
        assert model.n_epochs_ == 1 and not model.kept_previous_
        losses.append(_loss(model, x, bias, y))
        models.append(copy.deepcopy(model))
    return np.array(losses), models


def test_auto_epochs_stop_at_the_plateau():
    x, y, rng = _problem(n=500, seed=5)
    bias = rng.normal(size=(len(y), 3))
    auto = MLP(n_hidden=10, random_state=0).fit(x, bias, y)
    assert auto.n_epochs == "auto"
    losses, models = _single_epoch_losses(x, bias, y, auto.n_epochs_)
    start = _loss(_initial(x, 3, n_hidden=10, random_state=0), x, bias, y)
    gains = -np.diff(np.concatenate([[start], losses]))
    # the rule, recomputed: the first epoch that gains at most a tenth of what the first one did
    stops = np.flatnonzero(gains <= 0.1 * max(gains[0], 0.0))
    assert 1 < auto.n_epochs_ < 20
    assert stops.size and stops[0] == auto.n_epochs_ - 1
    np.testing.assert_array_equal(auto.params_, models[-1].params_)
    assert _loss(auto, x, bias, y) == losses[-1] < start


def test_auto_epochs_of_a_warm_fit_compare_with_its_own_first_epoch():
    """As in the learner: a fit on new messages continues from the last network, and the rule
    measures its epochs against that fit's first epoch, not the first fit's (whose gain, from the
    initial network, is far larger and would end every later fit after one epoch)."""
    x, y, rng = _problem(n=500, seed=6)
    bias = rng.normal(size=(len(y), 3))
    model = MLP(n_hidden=10, random_state=0).fit(x, bias, y)
    first_fit_gain = _loss(_initial(x, 3, n_hidden=10, random_state=0), x, bias, y) - _loss(model, x, bias, y)
    bias = bias + 2.0 * rng.normal(size=bias.shape)   # the messages moved
    one_epoch = copy.deepcopy(model).set_params(n_epochs=1)   # the same network, momentum and generator
    start = _loss(model, x, bias, y)
    model.fit(x, bias, y)
    losses, models = _single_epoch_losses(x, bias, y, model.n_epochs_, one_epoch)
    gains = -np.diff(np.concatenate([[start], losses]))
    stops = np.flatnonzero(gains <= 0.1 * max(gains[0], 0.0))
    assert 1 < model.n_epochs_ < 20 and stops[0] == model.n_epochs_ - 1
    assert gains[0] <= 0.1 * first_fit_gain   # against the first fit's gain it would stop at once
    np.testing.assert_array_equal(model.params_, models[-1].params_)


def test_n_epochs_accepts_auto_or_a_count():
    x, y, rng = _problem(n=50)
    bias = np.zeros((50, 3))
    for bad in ("Auto", -1, 2.5, None):
        with pytest.raises(ValueError, match="n_epochs"):
            MLP(n_epochs=bad).fit(x, bias, y)


# --- sparse features -------------------------------------------------------------------------
def _sparse_problem(n=400, d=30, k=3, density=0.15, seed=7):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * (rng.random((n, d)) < density)
    x[:, 3] *= 50.0   # a column of another scale
    y = np.array([rng.choice(k, p=p) for p in softmax(x @ rng.normal(size=(k, d)).T, axis=1)])
    return x, y, rng.normal(size=(n, k)), rng.uniform(0.5, 2.0, n)


def test_sparse_and_dense_copies_give_the_same_fit_without_standardisation():
    """The first layer as sparse-dense products over each batch's columns is the dense product
    summed in another order: the same SGD (permutations, initial weights) to float32 rounding."""
    x, y, bias, weights = _sparse_problem()
    fits = {}
    for name, rows in (("dense", x), ("sparse", sp.csr_array(x))):
        model = MLP(n_hidden=12, n_epochs=3, batch_size=32, learning_rate=0.05, standardize=False, random_state=0)
        model.fit(rows, bias, y, weights).fit(rows, bias + 0.5, y, weights)   # and a warm start
        assert np.array_equal(model.training_scores_, model.decision_function(rows))   # bit for bit
        fits[name] = model
    dense, sparse = fits["dense"], fits["sparse"]
    assert not dense.kept_previous_ and not sparse.kept_previous_
    np.testing.assert_allclose(sparse.params_, dense.params_, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(sparse.decision_function(sp.csr_array(x)), dense.decision_function(x),
                               rtol=1e-4, atol=1e-4)


def test_a_dense_fits_mean_enters_the_sparse_products():
    """A network fitted (standardised) on dense rows computes the same function on the sparse copy,
    and continues on it as on the dense rows: the mean moves into the hidden bias and the gradient."""
    x, y, bias, _ = _sparse_problem(seed=8)
    dense = MLP(n_hidden=10, n_epochs=2, batch_size=50, random_state=0).fit(x, bias, y)
    assert np.any(dense.input_mean_ != 0)
    np.testing.assert_allclose(dense.decision_function(sp.csr_array(x)), dense.decision_function(x),
                               rtol=1e-4, atol=1e-4)
    sparse = copy.deepcopy(dense).fit(sp.csr_array(x), bias + 0.5, y)
    dense.fit(x, bias + 0.5, y)
    np.testing.assert_allclose(sparse.params_, dense.params_, rtol=1e-4, atol=1e-4)


def test_sparse_standardisation_scales_the_columns_only():
    x, y, bias, weights = _sparse_problem(seed=9)
    for w in (None, weights):
        sparse = MLP(n_hidden=4, n_epochs=0, random_state=0).fit(sp.csr_array(x), bias, y, w)
        # the weighted standard deviation of every column, zeros included, computed densely
        mean = np.average(x, axis=0, weights=w)
        std = np.sqrt(np.average((x - mean) ** 2, axis=0, weights=w))
        np.testing.assert_allclose(sparse.input_scale_, std, rtol=1e-12)
        assert np.all(sparse.input_mean_ == 0.0)


def test_standardised_sparse_fit_learns_in_memory_linear_in_the_stored_entries():
    """100,000 columns, 8 stored entries a row: the fit never makes the rows dense (300 x 100,000
    float32 would be 120 MB) and lowers the loss."""
    n, d, k, hidden = 300, 100_000, 3, 8
    rng = np.random.default_rng(10)
    columns = np.sort(rng.choice(2000, (n, 8)), axis=1) + rng.integers(0, d - 2000, (n, 1))
    rows = sp.csr_array((rng.uniform(0.5, 3.0, n * 8), columns.ravel(), np.arange(0, n * 8 + 1, 8)), shape=(n, d))
    labels = columns[:, 0] % k
    bias = np.zeros((n, k))
    tracemalloc.start()
    model = MLP(n_hidden=hidden, n_epochs=5, batch_size=20, random_state=0).fit(rows, bias, labels)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    parameters = 4 * hidden * d   # bytes of V in float32
    assert peak < 20 * parameters < n * d * 4
    zero = biased_logistic_loss(np.zeros((n, k)), bias, labels)[0]
    assert not model.kept_previous_ and _loss(model, rows, bias, labels) < 0.9 * zero
