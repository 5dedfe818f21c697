"""Allowed transitions: the schemes' masks, inference that never takes a forbidden pair (against
enumeration of the allowed labellings), finite training objectives, and the learners that take them."""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from slr.baselines.frank_wolfe import FrankWolfeSSVM
from slr.baselines.gradient_alternation import GradientAlternation
from slr.baselines.perceptron import StructuredPerceptron
from slr.baselines.piecewise import PiecewiseTraining
from slr.baselines.ssvm import NSlackSSVM, OneSlackSSVM, SubgradientSSVM
from slr import StructuredLogisticRegression
from slr.data import FlatData, GraphBatch
from slr.graph import grid_edges
from slr.inference import batch_dual_values, batch_marginals, batch_sweeps
from slr.models import PairwiseModel
from slr.oracles import Constant, Linear
from slr.oracles.pair_bias import PairBias, PairLoss
from slr.transitions import FORBIDDEN_UNITS, Transitions, allowed_transitions, check_transitions
from tagged_chains import TAGS, bio_chains


# ------------------------------------------------------------------ enumeration, the reference
def _allowed_labellings(n, L, edges, transitions):
    """Every labelling of ``n`` nodes that no pair or end constraint forbids."""
    starts = np.bincount(edges[:, 1], minlength=n) == 0 if len(edges) else np.ones(n, bool)
    ends = np.bincount(edges[:, 0], minlength=n) == 0 if len(edges) else np.ones(n, bool)
    for y in itertools.product(range(L), repeat=n):
        y = np.array(y)
        if len(edges) and not transitions.pairs[y[edges[:, 0]], y[edges[:, 1]]].all():
            continue
        if transitions.starts is not None and not transitions.starts[y[starts]].all():
            continue
        if transitions.ends is not None and not transitions.ends[y[ends]].all():
            continue
        yield y


def _score(tn, te, edges, y):
    return tn[np.arange(len(y)), y].sum() + te[np.arange(len(edges)), y[edges[:, 0]], y[edges[:, 1]]].sum()


def _is_allowed(y, edges, transitions):
    n = len(y)
    return any(np.array_equal(y, z) for z in _allowed_labellings(n, transitions.n_states, edges, transitions))


def _random_transitions(rng, L, ends):
    pairs = rng.random((L, L)) < 0.6
    if not ends:
        return Transitions(pairs)
    return Transitions(pairs, rng.random(L) < 0.7, rng.random(L) < 0.7)


def _one_graph(n, edges, L, Y=None):
    x = [(np.zeros((n, 1)), np.asarray(edges, dtype=np.int64).reshape(-1, 2), np.zeros((len(edges), 1)))]
    return FlatData(x, Y, L)


def _random_tree(rng, n):
    edges = np.array([(int(rng.integers(k)), k) for k in range(1, n)], dtype=np.int64).reshape(-1, 2)
    flip = rng.random(len(edges)) < 0.5
    edges[flip] = edges[flip][:, ::-1]
    return edges


CASES = dict(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 6), L=st.integers(2, 4),
             scale=st.sampled_from([1e-3, 1.0, 1e4]), ends=st.booleans())


# ------------------------------------------------------------------ the schemes
def test_bio_mask_is_allennlps():
    mask = allowed_transitions("BIO", TAGS)
    L = len(TAGS)
    allowed = {(TAGS[a], TAGS[b]) for a in range(L) for b in range(L) if mask[a, b]}
    # I-X only after B-X or I-X; B-X and O after anything
    expected = {(a, b) for a in TAGS for b in ("B-PER", "B-LOC", "O")}
    expected |= {("B-PER", "I-PER"), ("I-PER", "I-PER"), ("B-LOC", "I-LOC"), ("I-LOC", "I-LOC")}
    assert allowed == expected
    assert [TAGS[b] for b in np.flatnonzero(mask[L, :L])] == ["B-PER", "B-LOC", "O"]   # never starts with I-X
    assert mask[:L, L + 1].all()                                                        # ends with anything
    assert not mask[L + 1].any() and not mask[:, L].any()


def test_bioes_mask_is_allennlps_bioul():
    tags = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-ORG", "I-ORG", "E-ORG", "S-ORG"]
    mask = allowed_transitions("BIOES", tags)
    L = len(tags)
    got = {(tags[a], tags[b]) for a in range(L) for b in range(L) if mask[a, b]}
    closed, opening = ("O", "E-PER", "S-PER", "E-ORG", "S-ORG"), ("O", "B-PER", "S-PER", "B-ORG", "S-ORG")
    expected = {(a, b) for a in closed for b in opening}
    for x in ("PER", "ORG"):
        expected |= {(f"{p}-{x}", f"{q}-{x}") for p in ("B", "I") for q in ("I", "E")}
    assert got == expected
    assert {tags[b] for b in np.flatnonzero(mask[L, :L])} == set(opening)
    assert {tags[a] for a in np.flatnonzero(mask[:L, L + 1])} == set(closed)


@pytest.mark.parametrize("scheme, labels, match", [
    ("IOB9", TAGS, "scheme must be one of"),
    ("BIO", ["B-PER", "E-PER", "O"], "tag 'E-PER'"),
    ("BIO", ["B-PER", "PER", "O"], "tag 'PER'"),
    ("BIO", ["B-", "O"], "tag 'B-'"),
    ("BIO", [0, 1], "must be tag strings"),
    ("BIO", ["O", "O"], "must not repeat"),
])
def test_allowed_transitions_refuses_what_it_cannot_read(scheme, labels, match):
    with pytest.raises(ValueError, match=match):
        allowed_transitions(scheme, labels)


def test_check_transitions_reads_both_shapes_and_refuses_others():
    mask = allowed_transitions("BIO", TAGS)
    full = check_transitions(mask, 5)
    assert np.array_equal(full.pairs, mask[:5, :5]) and np.array_equal(full.starts, mask[5, :5])
    plain = check_transitions(mask[:5, :5].astype(int), 5)
    assert plain.starts is None and plain.ends is None and plain.pairs.dtype == bool
    assert check_transitions("BIO", 5, classes=TAGS).pairs.tolist() == full.pairs.tolist()
    for value, match in ((mask[:4, :4], "shape"), (mask.astype(float), "boolean mask"),
                         (np.full((5, 5), 2), "boolean mask")):
        with pytest.raises(ValueError, match=match):
            check_transitions(value, 5)
    with pytest.raises(ValueError, match="resolved against string tags"):
        check_transitions("BIO", 5)


# ------------------------------------------------------------------ inference never takes a forbidden pair
@settings(max_examples=80, deadline=None)
@given(**CASES)
def test_viterbi_decodes_the_best_allowed_labelling(seed, n, L, scale, ends):
    rng = np.random.default_rng(seed)
    transitions = _random_transitions(rng, L, ends)
    edges = np.c_[np.arange(n - 1), np.arange(1, n)]
    tn, te = scale * rng.normal(size=(n, L)), scale * rng.normal(size=(n - 1, L, L))
    scores = [_score(tn, te, edges, y) for y in _allowed_labellings(n, L, edges, transitions)]
    model = PairwiseModel(inference="auto", transitions=transitions)
    data = _one_graph(n, edges, L)
    if not scores:
        with pytest.raises(ValueError, match="admits no labelling of a chain"):
            model.decode(data, tn, te)
        return
    y = model.decode(data, tn, te)
    assert _is_allowed(y, edges, transitions)
    assert _score(tn, te, edges, y) == pytest.approx(max(scores), rel=1e-12, abs=1e-9 * scale)


@settings(max_examples=60, deadline=None)
@given(**CASES)
def test_max_product_on_trees_decodes_the_best_allowed_labelling(seed, n, L, scale, ends):
    rng = np.random.default_rng(seed)
    transitions = _random_transitions(rng, L, ends)
    edges = _random_tree(rng, n)
    tn, te = scale * rng.normal(size=(n, L)), scale * rng.normal(size=(n - 1, L, L))
    scores = [_score(tn, te, edges, y) for y in _allowed_labellings(n, L, edges, transitions)]
    if not scores:
        return
    data = _one_graph(n, edges, L)
    y = PairwiseModel(inference="auto", transitions=transitions).decode(data, tn, te)
    assert _is_allowed(y, edges, transitions)
    assert _score(tn, te, edges, y) == pytest.approx(max(scores), rel=1e-12, abs=1e-9 * scale)


@settings(max_examples=60, deadline=None)
@given(**CASES)
def test_loss_augmented_inference_takes_the_most_violating_allowed_labelling(seed, n, L, scale, ends):
    rng = np.random.default_rng(seed)
    transitions = _random_transitions(rng, L, ends)
    edges = np.c_[np.arange(n - 1), np.arange(1, n)]
    candidates = list(_allowed_labellings(n, L, edges, transitions))
    if not candidates:
        return
    truth = candidates[rng.integers(len(candidates))]
    tn, te = scale * rng.normal(size=(n, L)), scale * rng.normal(size=(n - 1, L, L))
    data = _one_graph(n, edges, L, [truth])
    model = PairwiseModel(inference="auto", transitions=transitions)
    node_mu, _, loss, slack = model.loss_augmented(data, tn, te, np.zeros((n - 1, 2, L)))
    y = node_mu.argmax(axis=1)
    assert _is_allowed(y, edges, transitions)
    best = max(np.sum(z != truth) + _score(tn, te, edges, z) for z in candidates)
    assert slack[0] == pytest.approx(best - _score(tn, te, edges, truth), rel=1e-12, abs=1e-9 * scale)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 5), L=st.integers(2, 3), ends=st.booleans(),
       temperature=st.sampled_from([0.3, 1.0]))
def test_exact_marginals_are_those_of_the_allowed_labellings(seed, n, L, ends, temperature):
    rng = np.random.default_rng(seed)
    transitions = _random_transitions(rng, L, ends)
    edges = _random_tree(rng, n)
    tn, te = rng.normal(size=(n, L)), rng.normal(size=(n - 1, L, L))
    labellings = list(_allowed_labellings(n, L, edges, transitions))
    if not labellings:
        return
    logp = np.array([_score(tn, te, edges, y) / temperature for y in labellings])
    p = np.exp(logp - logsumexp(logp))
    expected = np.zeros((n, L))
    for weight, y in zip(p, labellings):
        expected[np.arange(n), y] += weight
    data = _one_graph(n, edges, L)
    model = PairwiseModel(transitions=transitions)
    nodes, pairs = model.marginals(data, tn, te, temperature, "exact", max_sweeps=1, tol=0.0)
    np.testing.assert_allclose(nodes, expected, atol=1e-10)
    assert np.all(pairs[:, ~transitions.pairs] == 0.0)


@pytest.mark.parametrize("eps", [0.0, 1e-3, 0.1])
def test_sweeps_stay_finite_with_forbidden_pairs_at_small_and_zero_eps(eps):
    """The guard instead of minus infinity: the star updates, the dual and the smoothed marginals
    stay finite with potentials up to 1e4, and the forbidden pairs get weight 0."""
    rng = np.random.default_rng(1)
    L = 5
    transitions = check_transitions(allowed_transitions("BIO", TAGS), L)
    graphs = [(6, np.c_[np.arange(5), np.arange(1, 6)]), (6, grid_edges(2, 3))]
    batch = GraphBatch.from_graphs(graphs, L)
    tn, te = 1e4 * rng.normal(size=(batch.n_nodes, L)), 1e4 * rng.normal(size=(batch.n_edges, L, L))
    depth = FORBIDDEN_UNITS * max(eps, 1e-3)
    tn, te = transitions.exclude(batch, tn, te, depth)
    run = batch_sweeps(batch, tn, te, eps, max_sweeps=200, tol=1e-9)
    assert np.all(np.isfinite(run.messages))
    duals = batch_dual_values(batch, tn, te, run.messages, eps)
    assert np.all(np.isfinite(duals))
    # the dual bounds every allowed labelling's score (the exclusion leaves those unchanged)
    for k, (n, edges) in enumerate(graphs):
        nodes, links = slice(batch.node_ptr[k], batch.node_ptr[k + 1]), slice(batch.edge_ptr[k], batch.edge_ptr[k + 1])
        best = max(_score(tn[nodes], te[links], edges, y) for y in _allowed_labellings(n, L, edges, transitions))
        assert duals[k] >= best - 1e-9 * abs(best)
    if eps > 0:
        node_mu, edge_mu = batch_marginals(batch, tn, te, run.messages, eps)
        assert np.all(np.isfinite(node_mu)) and np.all(np.isfinite(edge_mu))
        assert np.all(edge_mu[:, ~transitions.pairs] == 0.0)


def test_pair_loss_with_an_offset_is_the_dense_loss():
    rng = np.random.default_rng(2)
    N, L, D = 7, 3, 2
    offset = np.where(rng.random((L, L)) < 0.5, -FORBIDDEN_UNITS, 0.0)
    offset[0, 0] = 0.0
    bias = PairBias(rng.normal(size=(N, L)), rng.normal(size=(N, L)), offset)
    labels = np.zeros(N, dtype=np.int64)   # pair class (0, 0): allowed
    row, coef = np.array([1.0, 0.5]), rng.normal(size=(L * L, D))
    loss, grad = PairLoss(row, bias, labels)(coef)
    dense = np.asarray(bias) + coef @ row
    assert loss == pytest.approx(np.sum(logsumexp(dense, axis=1) - dense[:, 0]), rel=1e-12)
    p = np.exp(dense - logsumexp(dense, axis=1, keepdims=True))
    p[:, 0] -= 1.0
    np.testing.assert_allclose(grad, np.outer(p.sum(axis=0), row), atol=1e-12)
    assert np.all(grad[offset.ravel() < 0] == 0.0)


# ------------------------------------------------------------------ the learners
def _forbidden_uses(predictions, mask):
    L = mask.shape[0] - 2
    return sum(int((~mask[:L, :L][y[:-1], y[1:]]).sum()) + int(not mask[L, y[0]]) + int(not mask[y[-1], L + 1])
               for y in predictions)


@pytest.mark.parametrize("solver", ["alternation", "joint"])
def test_learner_never_predicts_a_forbidden_pair_and_stays_finite(solver):
    X, Y, mask = bio_chains(0)
    model = StructuredLogisticRegression(pairwise=Linear(l2=1.0), allowed_transitions=mask, max_iter=15,
                                         epsilon=0.05, random_state=0, solver=solver).fit(X, Y)
    assert model.solver_ == solver
    X_test, _, _ = bio_chains(1, noise=3.0)
    assert _forbidden_uses(model.predict(X_test), mask) == 0
    trace = model.objective_trace_
    assert np.all(np.isfinite(trace["objective"]))
    assert np.all(np.diff(trace["penalised"]) <= 1e-9 * trace["penalised"].abs().max())
    certificate = model.certificate_
    assert np.isfinite([certificate.objective, certificate.lp_loss_lower, certificate.lp_loss_upper]).all()
    assert certificate.bounds_hold
    # the pairwise regression does not fit the forbidden pair classes: only the ridge acts on them
    coef = model.pairwise_.coef_
    forbidden = ~mask[:5, :5].ravel()
    assert np.abs(coef[forbidden]).max() < 1e-6 < np.abs(coef[~forbidden]).max()
    nodes = model.predict_marginals(X_test[:3], method="exact")
    assert all(np.all(p[0, [1, 3]] == 0.0) for p in nodes)   # no sequence starts with I-X


def test_joint_solver_and_alternation_reach_one_optimum_under_transitions():
    """Both solvers minimise the same J with the forbidden pairs' fixed offsets (the joint solver's
    own objective, the alternation's oracles and sweeps): their converged fits agree."""
    X, Y, mask = bio_chains(0)
    fits = {solver: StructuredLogisticRegression(pairwise=Linear(l2=1.0), allowed_transitions=mask, max_iter=400,
                                                 tol=1e-9, epsilon=0.1, random_state=0, solver=solver).fit(X, Y)
            for solver in ("alternation", "joint")}
    joint, alternation = (fits[s].objective_trace_["penalised"].iloc[-1] for s in ("joint", "alternation"))
    assert joint == pytest.approx(alternation, rel=1e-4)
    assert fits["joint"].solver_ == "joint"


def test_learner_unconstrained_decodes_forbidden_pairs_on_the_same_data():
    """The test above can fail: without the mask the same model decodes forbidden pairs here."""
    X, Y, mask = bio_chains(0)
    model = StructuredLogisticRegression(pairwise=Linear(l2=1.0), max_iter=15, epsilon=0.05, random_state=0).fit(X, Y)
    X_test, _, _ = bio_chains(1, noise=3.0)
    assert _forbidden_uses(model.predict(X_test), mask) > 0


@pytest.mark.parametrize("square, latent_init", [(True, "neighbours"), (False, "random")])
def test_learner_with_unlabelled_nodes_fits_no_forbidden_pair(square, latent_init):
    """The first soft targets of unlabelled nodes (random ones included) put no weight on a forbidden
    pair or end state: R starts at a node loss's scale, not ``FORBIDDEN_UNITS * eps``, and the
    pairwise table is not pushed up on the forbidden pairs."""
    X, Y, mask = bio_chains(2)
    Y = [np.where(np.arange(len(y)) % 3 == 2, -1, y) for y in Y]
    given = mask[:5, :5] if square else mask   # square: no end constraints
    model = StructuredLogisticRegression(pairwise=Constant(l2=1.0), allowed_transitions=given, max_iter=5, tol=0,
                                         latent_init=latent_init, random_state=0).fit(X, Y)
    trace = model.objective_trace_["objective"]
    assert np.all(np.isfinite(trace)) and trace.max() < 10 * sum(len(y) for y in Y)
    assert np.abs(model.pairwise_.table_[~mask[:5, :5].ravel()]).max() < 1e-6
    assert _forbidden_uses(model.predict(X), np.pad(given, (0, 2), constant_values=True) if square else mask) == 0


def test_learner_refuses_labels_that_use_a_forbidden_pair_or_end():
    X, Y, mask = bio_chains(3)
    bad = [y.copy() for y in Y]
    bad[4][:2] = [4, 1]   # O -> I-PER
    with pytest.raises(ValueError, match=r"Y\[4\] has the transition 4 -> 1 \(nodes 0 -> 1\)"):
        StructuredLogisticRegression(allowed_transitions=mask, max_iter=2).fit(X, bad)
    bad = [y.copy() for y in Y]
    bad[2][0] = 3   # starts with I-LOC
    with pytest.raises(ValueError, match=r"Y\[2\] starts with 3 at node 0"):
        StructuredLogisticRegression(allowed_transitions=mask, max_iter=2).fit(X, bad)
    with pytest.raises(ValueError, match="allowed_transitions must be"):
        StructuredLogisticRegression(allowed_transitions="IOB9").fit(X, Y)
    with pytest.raises(ValueError, match="resolved against string tags"):
        StructuredLogisticRegression(allowed_transitions="BIO").fit(X, Y)


@pytest.mark.parametrize("learner", [
    OneSlackSSVM(max_iter=20), NSlackSSVM(max_iter=10), SubgradientSSVM(max_iter=10), FrankWolfeSSVM(max_iter=10),
    StructuredPerceptron(max_iter=5), PiecewiseTraining(), GradientAlternation(max_iter=10)],
    ids=lambda learner: type(learner).__name__)
def test_baselines_never_predict_a_forbidden_pair(learner):
    X, Y, mask = bio_chains(4)
    X_test, _, _ = bio_chains(5, noise=3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = learner.set_params(allowed_transitions=mask).fit(X, Y)
    assert _forbidden_uses(model.predict(X_test), mask) == 0
    assert np.all(np.isfinite(model.history_["objective"].dropna()))   # the perceptron has none (NaN)
    bad = [y.copy() for y in Y]
    bad[1][-2:] = [4, 3]   # O -> I-LOC
    with pytest.raises(ValueError, match=r"Y\[1\] has the transition 4 -> 3"):
        learner.fit(X, bad)


def test_crfsuite_chain_decodes_its_weights_without_forbidden_pairs():
    pytest.importorskip("pycrfsuite")
    from slr.baselines.crfsuite_peer import CRFsuiteChain
    X, Y, mask = bio_chains(6)
    X_test, _, _ = bio_chains(7, noise=3.0)
    free = CRFsuiteChain(c2=0.1).fit(X, Y)
    constrained = CRFsuiteChain(c2=0.1, allowed_transitions=mask).fit(X, Y)
    assert _forbidden_uses(constrained.predict(X_test), mask) == 0
    # on each chain the constrained labelling is the best allowed one under CRFsuite's weights
    transitions = check_transitions(mask, 5)
    for x, y in zip(X_test[:10], constrained.predict(X_test[:10])):
        tn, te = free.potentials(x)
        best = max(_score(tn, te, x[1], z) for z in _allowed_labellings(len(y), 5, x[1], transitions))
        assert _score(tn, te, x[1], y) == pytest.approx(best)
    with pytest.raises(ValueError, match=r"Y\[0\] has the transition 4 -> 1"):
        CRFsuiteChain(allowed_transitions=mask).fit(X, [np.r_[4, 1, y[2:]] if k == 0 else y for k, y in enumerate(Y)])
