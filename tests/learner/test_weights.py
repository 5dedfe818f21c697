"""sample_weight and class_weight in StructuredLogisticRegression, against duplicated or dropped
examples and against R computed by hand."""
import numpy as np
import pytest
from scipy.special import logsumexp
from sklearn.utils.class_weight import compute_class_weight

from slr import StructuredLogisticRegression
from slr.data import FlatData
from slr.datasets import make_denoising
from slr.learner import structured_objective
from slr.models import PairwiseModel, hamming_margin
from slr.oracles import Linear

EPS = 0.1


def _model(max_iter=3, **kwargs):
    """Algorithm 1.1 (its traces are compared step by step; tests/learner/test_learner_solver.py weighs
    the joint solver)."""
    return StructuredLogisticRegression(Linear(l2=1.0, tol=1e-12), Linear(l2=1.0, tol=1e-12), epsilon=EPS,
                                        max_iter=max_iter, max_sweeps=20, monitor=False, random_state=0,
                                        solver="alternation", **kwargs)


@pytest.fixture(scope="module")
def images():
    return make_denoising(n_images=3, size=6, sigma=1.5, random_state=0)


def _same_fit(a, b, X):
    np.testing.assert_allclose(a.objective_trace_["objective"], b.objective_trace_["objective"], rtol=1e-8)
    # the parameters agree to the oracle's solver precision (differences of a few 1e-8 after 3 iterations)
    for name in ("unary_", "pairwise_"):
        np.testing.assert_allclose(getattr(a, name).coef_, getattr(b, name).coef_, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(getattr(a, name).intercept_, getattr(b, name).intercept_, rtol=1e-6,
                                   atol=1e-7)
    assert [p.tolist() for p in a.predict(X)] == [p.tolist() for p in b.predict(X)]


def test_integer_weights_equal_repeated_examples(images):
    X, Y = images
    counts = [2, 1, 3]
    weighted = _model().fit(X, Y, sample_weight=counts)
    repeated = [k for k, c in enumerate(counts) for _ in range(c)]
    duplicated = _model().fit([X[k] for k in repeated], [Y[k] for k in repeated])
    _same_fit(weighted, duplicated, X)


def test_zero_weight_drops_the_example(images):
    X, Y = images
    weighted = _model().fit(X, Y, sample_weight=np.array([1.0, 0.0, 1.0]))
    dropped = _model().fit([X[0], X[2]], [Y[0], Y[2]])
    _same_fit(weighted, dropped, X)


def test_weights_scale_the_objective(images):
    """At the start (zero functions and messages) each example's R term is weighted."""
    X, Y = images
    w = np.array([0.5, 2.0, 1.5])
    terms = [_model(max_iter=1).fit([x], [y]).objective_trace_["objective"].iloc[0] for x, y in zip(X, Y)]
    weighted = _model(max_iter=1).fit(X, Y, sample_weight=w).objective_trace_["objective"].iloc[0]
    assert weighted == pytest.approx(float(np.dot(w, terms)), rel=1e-12)


@pytest.mark.parametrize("weights, message", [
    ([1.0, 2.0], "sample_weight must be a 1-D array of 3"),
    ([1.0, -1.0, 1.0], "nonnegative"),
    ([1.0, np.nan, 1.0], "NaN"),
    ([0.0, 0.0, 0.0], "positive sum"),
    (["a", "b", "c"], "sample_weight"),
])
def test_bad_sample_weight(images, weights, message):
    X, Y = images
    with pytest.raises(ValueError, match=message):
        _model().fit(X, Y, sample_weight=weights)


# ----------------------------------------------------------------------------------------
# class_weight: the weighted Hamming margin
# ----------------------------------------------------------------------------------------
def _tiny_graph():
    """Two examples with 3 states: a triangle and a chain of two, imbalanced labels."""
    rng = np.random.default_rng(3)
    X = [(rng.normal(size=(3, 2)), np.array([[0, 1], [1, 2], [0, 2]]), rng.normal(size=(3, 1))),
         (rng.normal(size=(2, 2)), np.array([[0, 1]]), rng.normal(size=(1, 1)))]
    Y = [np.array([0, 0, 1]), np.array([0, 2])]
    return X, Y


def _start_R_by_hand(Y, weights, n_edges, L=3):
    """R at zero functions and zero messages: the truth scores 0 (Delta(y, y) = 0), every node
    contributes eps log(1 + (L - 1) exp(cw[y] / eps)) and every edge eps log(L^2)."""
    total = 0.0
    for y in np.concatenate(Y):
        margins = np.array([0.0 if a == y else weights[y] for a in range(L)])
        total += EPS * logsumexp(margins / EPS)
    return total + n_edges * EPS * np.log(L * L)


@pytest.mark.parametrize("class_weight", [None, {0: 0.5, 2: 3.0}, "balanced"])
def test_class_weight_margin_by_hand(class_weight):
    X, Y = _tiny_graph()
    labels = np.concatenate(Y)
    if class_weight is None:
        weights = np.ones(3)
    elif class_weight == "balanced":
        weights = compute_class_weight("balanced", classes=np.arange(3), y=labels)
    else:
        weights = np.array([0.5, 1.0, 3.0])
    # the default over-relaxed steps: with a ridge Algorithm 1.1 descends on J = R plus the ridge,
    # which the relaxed step's safeguard checks (docs/design.md section 1, "When R rises")
    model = _model(class_weight=class_weight).fit(X, Y)
    trace = model.objective_trace_
    assert trace["objective"].iloc[0] == pytest.approx(_start_R_by_hand(Y, weights, n_edges=4), rel=1e-12)
    assert trace["penalised"].iloc[0] == trace["objective"].iloc[0]   # zero functions: no ridge
    J = trace["penalised"].to_numpy()
    assert np.all(np.diff(J) <= 1e-9 * np.abs(J[:-1]))   # still a descent method


def test_balanced_raises_minority_recall():
    """Chains with 10% of the nodes in class 1 and noisy features: "balanced" moves the
    decisions towards the minority class."""
    def chains(seed, n=30, length=20):
        rng = np.random.default_rng(seed)
        X, Y = [], []
        for _ in range(n):
            y = (rng.random(length) < 0.1).astype(int)
            feats = np.column_stack([y + rng.normal(scale=0.5, size=length), np.ones(length)])
            edges = np.column_stack([np.arange(length - 1), np.arange(1, length)])
            X.append((feats, edges, np.ones((length - 1, 1))))
            Y.append(y)
        return X, Y

    (X, Y), (X_test, Y_test) = chains(0), chains(1)
    truth = np.concatenate(Y_test)

    def recall(class_weight):
        model = StructuredLogisticRegression(epsilon=EPS, max_iter=5, monitor=False, class_weight=class_weight)
        predicted = np.concatenate(model.fit(X, Y).predict(X_test))
        return np.mean(predicted[truth == 1] == 1)

    plain, balanced = recall(None), recall("balanced")
    assert balanced > plain + 0.15   # 0.40 -> 0.68 when written


@pytest.mark.parametrize("class_weight, message", [
    ({5: 1.0}, "class_weight has the key 5"),
    ({0: -1.0}, r"class_weight\[0\] must be a finite number >= 0"),
    ({0: np.inf}, r"class_weight\[0\]"),
    ("auto", "class_weight must be"),
    ([1.0, 2.0], "class_weight must be"),
])
def test_bad_class_weight(class_weight, message):
    X, Y = _tiny_graph()
    with pytest.raises(ValueError, match=message):
        _model(class_weight=class_weight).fit(X, Y)


def test_weighted_fit_certifies_the_unweighted_objective(images):
    """Theorem 1.1 bounds the unweighted losses: a weighted fit's certificate holds the unweighted R
    at its final functions and messages."""
    X, Y = images
    model = _model().fit(X, Y, sample_weight=[2.0, 1.0, 3.0])
    data = FlatData(X, Y, 2)
    energy = PairwiseModel(EPS)
    theta_nodes = energy.unary_potentials(data, model.unary_) + hamming_margin(data.labels, 2)
    theta_edges = energy.pairwise_potentials(data, model.pairwise_)
    unweighted = structured_objective(data.batch, theta_nodes, theta_edges, model._train_messages, data.labels,
                                      EPS)
    assert model.certificate_.objective == pytest.approx(unweighted, rel=1e-10)
    assert model.certificate_.objective < model.objective_trace_["objective"].iloc[-1]
    assert model.certificate_.bounds_hold
