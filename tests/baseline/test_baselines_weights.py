"""sample_weight and class_weight in the baselines: duplicated and dropped examples, the weighted
Hamming loss against brute force, "balanced" by hand, the weighted SSVM optimum by enumeration."""
import numpy as np
import pytest
from sklearn.utils.class_weight import compute_class_weight

from slr.baselines.crfsuite_peer import CRFsuiteChain, crfsuite_missing
from slr.baselines.features import StructuredData
from slr.baselines.gradient_alternation import GradientAlternation
from slr.baselines.perceptron import StructuredPerceptron
from slr.baselines.piecewise import PiecewiseTraining
from slr.baselines.ssvm import NSlackSSVM, OneSlackSSVM, SubgradientSSVM
from slr.baselines.weights import class_weight_vector
from slr.models import hamming_margin
from slr.oracles import Linear

from chain_reference import (brute_primal, exact_ssvm_optimum, joint_feature, labelings, random_chains,
                             weighted_hamming)

L = 3
WEIGHTS = np.array([2, 1, 0, 3, 1, 1])
CW = {0: 2.5, 2: 0.5}


@pytest.fixture(scope="module")
def chains():
    return random_chains(np.random.default_rng(3), len(WEIGHTS), L)


def _duplicated(X, Y, weights):
    """Example ``k`` repeated ``weights[k]`` times (0: left out)."""
    index = np.repeat(np.arange(len(X)), weights)
    return [X[k] for k in index], [Y[k] for k in index]


# ------------------------------------------------------------------ independent numpy side
def _psi(x, y):
    return joint_feature(x, y, L)


def _labelings(n):
    return labelings(n, L)


def _brute_weighted_primal(w, X, Y, s, cw, C=1.0):
    return brute_primal(w, X, Y, L, C, s=s, cw=cw)


# ------------------------------------------------------------------ class weights
def test_balanced_class_weight_by_hand_and_as_scikit_learn():
    labels = np.array([0, 0, 0, 2, 2, 1, 0, 2])  # counts 4, 1, 3; label 3 never occurs
    by_hand = np.array([8 / (3 * 4), 8 / (3 * 1), 8 / (3 * 3), 1.0])
    np.testing.assert_allclose(class_weight_vector("balanced", labels, 4), by_hand)
    np.testing.assert_allclose(class_weight_vector("balanced", labels, 4)[:3],
                               compute_class_weight("balanced", classes=np.arange(3), y=labels))
    np.testing.assert_array_equal(class_weight_vector({1: 4.0}, labels, 4), [1.0, 4.0, 1.0, 1.0])
    np.testing.assert_array_equal(class_weight_vector(None, labels, 4), np.ones(4))


def test_fitted_class_weight_is_balanced_over_all_training_nodes(chains):
    X, Y = chains
    model = OneSlackSSVM(n_states=L, class_weight="balanced", max_iter=2).fit(X, Y, sample_weight=WEIGHTS)
    labels = np.concatenate(Y)  # every node, whatever its example's weight
    counts = np.bincount(labels, minlength=L)
    assert counts.all()
    np.testing.assert_allclose(model.class_weight_, labels.size / (L * counts))


def test_weighted_hamming_margin():
    labels = np.array([0, 2, 1])
    cw = np.array([2.0, 3.0, 0.5])
    expected = np.array([[0, 2, 2], [0.5, 0.5, 0], [3, 0, 3]], dtype=float)
    np.testing.assert_array_equal(hamming_margin(labels, 3, cw), expected)
    np.testing.assert_array_equal(hamming_margin(labels, 3), (expected > 0).astype(float))


@pytest.mark.parametrize("model", ["chain", "lp"])
def test_weighted_loss_augmented_inference_equals_brute_force(chains, model):
    X, Y = chains
    cw = class_weight_vector(CW, np.concatenate(Y), L)
    data = StructuredData(X, Y, L, model=model)
    data.weigh(None, CW)
    w = np.random.default_rng(4).normal(size=data.size)
    node_mu, _, loss, slack = data.loss_augmented(w)
    for k, (x, y) in enumerate(zip(X, Y)):
        ys = _labelings(len(y))
        values = [weighted_hamming(y, yh, cw) + w @ _psi(x, yh) for yh in ys]
        best = ys[int(np.argmax(values))]
        np.testing.assert_array_equal(data.split(node_mu)[k].argmax(1), best)
        assert loss[k] == pytest.approx(weighted_hamming(y, best, cw))
        assert slack[k] == pytest.approx(max(values) - w @ _psi(x, y), abs=1e-7)


# ------------------------------------------------------------------ integer weights == duplicated examples
def _ssvm(cls, **kw):
    return cls(C=1.0, tol=1e-6, n_states=L, class_weight=CW, **kw)


DETERMINISTIC = {
    "OneSlackSSVM": lambda: _ssvm(OneSlackSSVM),
    "NSlackSSVM": lambda: _ssvm(NSlackSSVM),
    # full-batch steps: one-example steps in a random order differ with the number of examples
    "SubgradientSSVM": lambda: SubgradientSSVM(max_iter=30, batch_size=None, n_states=L, class_weight=CW),
    "GradientAlternation": lambda: GradientAlternation(max_iter=15, sweeps_per_round=4, n_states=L,
                                                       class_weight=CW),
}


def _weights_of(model):
    if isinstance(model, PiecewiseTraining):
        return np.concatenate([model.unary_.coef_.ravel(), model.pairwise_.coef_.ravel()])
    return model.w_


#: how close the weights of the two fits are: the n-slack QPs differ in size (a constraint per copy
#: of an example), so Clarabel stops at different points within its accuracy (the primal values
#: agree to 1e-8, checked below; the path, iterations and working sets are the same)
W_ATOL = {"NSlackSSVM": 1e-5}


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_integer_weights_equal_duplicated_examples(chains, name):
    X, Y = chains
    weighted = DETERMINISTIC[name]().fit(X, Y, sample_weight=WEIGHTS)
    duplicated = DETERMINISTIC[name]().fit(*_duplicated(X, Y, WEIGHTS))
    np.testing.assert_allclose(weighted.w_, duplicated.w_, atol=W_ATOL.get(name, 1e-8), rtol=1e-8)
    assert weighted.n_iter_ == duplicated.n_iter_
    if name != "GradientAlternation":
        cw = class_weight_vector(CW, np.concatenate(Y), L)
        assert _brute_weighted_primal(weighted.w_, X, Y, WEIGHTS, cw) == pytest.approx(
            _brute_weighted_primal(duplicated.w_, X, Y, WEIGHTS, cw), rel=1e-8)


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_zero_weight_equals_dropping_the_example(chains, name):
    X, Y = chains
    weights = (WEIGHTS > 0).astype(float)
    weighted = DETERMINISTIC[name]().fit(X, Y, sample_weight=weights)
    dropped = DETERMINISTIC[name]().fit(*_duplicated(X, Y, weights.astype(int)))
    np.testing.assert_allclose(weighted.w_, dropped.w_, atol=W_ATOL.get(name, 1e-8), rtol=1e-8)


def test_piecewise_weights_are_row_weights_of_both_pieces(chains):
    X, Y = chains
    weighted = PiecewiseTraining(Linear(l2=0.5), Linear(l2=0.5), n_states=L).fit(X, Y, sample_weight=WEIGHTS)
    duplicated = PiecewiseTraining(Linear(l2=0.5), Linear(l2=0.5), n_states=L).fit(*_duplicated(X, Y, WEIGHTS))
    np.testing.assert_allclose(_weights_of(weighted), _weights_of(duplicated), atol=1e-6)
    # class weights: the unary rows weigh cw[y_i], as a direct weighted fit of the node rows
    model = PiecewiseTraining(Linear(l2=0.5), Linear(l2=0.5), n_states=L, class_weight=CW).fit(X, Y)
    feats, labels = np.concatenate([x[0] for x in X]), np.concatenate(Y)
    cw = class_weight_vector(CW, labels, L)
    direct = Linear(l2=0.5).fit(feats, np.zeros((labels.size, L)), labels, sample_weight=cw[labels])
    np.testing.assert_allclose(model.unary_.coef_, direct.coef_, atol=1e-6)


def test_subgradient_minibatches_scale_each_term_by_its_weight(chains):
    """With one example per batch and a uniform weight s, every step is the unweighted one with C s."""
    X, Y = chains
    kw = dict(max_iter=3, batch_size=1, n_states=L, random_state=0)
    weighted = SubgradientSSVM(C=1.0, **kw).fit(X, Y, sample_weight=np.full(len(X), 2.0))
    scaled = SubgradientSSVM(C=2.0, **kw).fit(X, Y)
    np.testing.assert_allclose(weighted.w_, scaled.w_, atol=1e-12)


# ------------------------------------------------------------------ the weighted SSVM optimum
def test_ssvms_reach_the_weighted_optimum_by_enumeration(chains):
    X, Y = chains
    cw = class_weight_vector(CW, np.concatenate(Y), L)
    exact = exact_ssvm_optimum(X, Y, L, s=WEIGHTS, cw=cw)
    for cls in (OneSlackSSVM, NSlackSSVM):
        model = _ssvm(cls).fit(X, Y, sample_weight=WEIGHTS)
        value = _brute_weighted_primal(model.w_, X, Y, WEIGHTS, cw)
        assert model.primal_objective(X, Y, sample_weight=WEIGHTS) == pytest.approx(value, rel=1e-9)
        assert value == pytest.approx(exact, rel=1e-4), cls.__name__
        assert model.history_["objective"].iloc[-1] == pytest.approx(value, rel=1e-2)


# ------------------------------------------------------------------ perceptron
def test_perceptron_update_is_scaled_by_example_and_class_weights(chains):
    X, Y = chains
    x, y = X[0], Y[0]
    cw = class_weight_vector(CW, y, L)
    model = StructuredPerceptron(max_iter=1, average=False, shuffle=False, n_states=L, class_weight=CW)
    model.fit([x], [y], sample_weight=[3.0])
    # at w = 0 every labelling scores 0; the update uses whichever one decoding returned
    y_hat = StructuredData([x], [y], L).decode(np.zeros((len(y), L)), np.zeros((len(y) - 1, L, L)))
    assert np.any(y_hat != y)
    feats = x[0]
    unary = np.zeros((L, feats.shape[1]))
    for i, (a, b) in enumerate(zip(y, y_hat)):
        unary[a] += cw[a] * feats[i]
        unary[b] -= cw[a] * feats[i]
    pair = (_psi(x, y) - _psi(x, y_hat))[L * feats.shape[1]:]
    np.testing.assert_allclose(model.w_, 3.0 * np.concatenate([unary.ravel(), pair]))


def test_perceptron_zero_weight_equals_dropping_and_uniform_weights_scale(chains):
    X, Y = chains
    kw = dict(max_iter=4, n_states=L, random_state=0)
    weights = (WEIGHTS > 0).astype(float)
    weighted = StructuredPerceptron(**kw).fit(X, Y, sample_weight=weights)
    dropped = StructuredPerceptron(**kw).fit(*_duplicated(X, Y, weights.astype(int)))
    np.testing.assert_array_equal(weighted.w_, dropped.w_)
    assert weighted.n_mistakes_ == dropped.n_mistakes_
    plain = StructuredPerceptron(**kw).fit(X, Y)
    tripled = StructuredPerceptron(**kw).fit(X, Y, sample_weight=np.full(len(X), 3.0))
    np.testing.assert_allclose(tripled.w_, 3.0 * plain.w_, atol=1e-12)


# ------------------------------------------------------------------ unit weights change nothing
def test_unit_weights_and_empty_class_weight_dict_equal_no_weights(chains):
    X, Y = chains
    plain = OneSlackSSVM(tol=1e-6, n_states=L).fit(X, Y)
    unit = OneSlackSSVM(tol=1e-6, n_states=L, class_weight={}).fit(X, Y, sample_weight=np.ones(len(X)))
    np.testing.assert_allclose(unit.w_, plain.w_, atol=1e-9)


# ------------------------------------------------------------------ CRFsuite: integer weights by repetition
@pytest.mark.skipif(crfsuite_missing() is not None, reason="python-crfsuite not installed")
def test_crfsuite_integer_weights_repeat_examples():
    rng = np.random.default_rng(5)
    X = []
    for n in (3, 4, 2, 3):
        feats = rng.normal(size=(n, 2))
        X.append((feats, np.column_stack([np.arange(n - 1), np.arange(1, n)]), np.ones((n - 1, 1))))
    Y = [rng.integers(0, 2, size=x[0].shape[0]) for x in X]
    weights = np.array([2, 0, 1, 1])
    weighted = CRFsuiteChain(c2=0.1, n_states=2).fit(X, Y, sample_weight=weights)
    repeated = CRFsuiteChain(c2=0.1, n_states=2).fit(*_duplicated(X, Y, weights))
    np.testing.assert_array_equal(weighted.unary_weights_, repeated.unary_weights_)
    np.testing.assert_array_equal(weighted.transition_weights_, repeated.transition_weights_)
    with pytest.raises(ValueError, match="sample_weight must hold whole numbers"):
        CRFsuiteChain().fit(X, Y, sample_weight=[1.5, 1, 1, 1])


# ------------------------------------------------------------------ faults
LEARNERS = [OneSlackSSVM, NSlackSSVM, SubgradientSSVM, StructuredPerceptron, PiecewiseTraining,
            GradientAlternation]


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("sample_weight, message", [
    ([1.0, np.nan, 1, 1, 1, 1], "sample_weight contains NaN"),
    ([1.0, -1, 1, 1, 1, 1], "sample_weight must be nonnegative"),
    ([1.0, 1.0], "sample_weight must be a 1-D array of 6 numbers"),
    (np.zeros(6), "sample_weight must have a positive sum"),
])
def test_bad_sample_weight_is_refused_before_any_work(chains, cls, sample_weight, message):
    X, Y = chains
    model = cls(max_iter=1, n_states=L)
    with pytest.raises(ValueError, match=message):
        model.fit(X, Y, sample_weight=sample_weight)
    assert not hasattr(model, "history_")


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("class_weight, message", [
    ({5: 1.0}, r"class_weight has the key 5, which is not a label in \[0, 3\)"),
    ({"a": 1.0}, "class_weight has the key 'a'"),
    ({0: -1.0}, r"class_weight\[0\] must be a finite number >= 0"),
    ({0: np.nan}, r"class_weight\[0\] must be a finite number >= 0"),
    ("balance", "class_weight must be"),
    ([1.0, 2.0, 3.0], "class_weight must be"),
])
def test_bad_class_weight_is_refused(chains, cls, class_weight, message):
    X, Y = chains
    with pytest.raises(ValueError, match=message):
        cls(max_iter=1, n_states=L, class_weight=class_weight).fit(X, Y)
