"""Weights by feature name: the tables rebuild the model's scores and decodes, in the caller's feature units."""
import numpy as np
import pandas as pd
import pytest
from sklearn.pipeline import make_pipeline

from slr import StructuredLogisticRegression
from slr.feature_weights import (
    INTERCEPT,
    state_features,
    top_weights,
    transition_features,
    transition_table,
    unary_weights,
)
from slr.formats import SequenceVectorizer, from_chain_crf
from slr.inference import viterbi
from slr.oracles import MLP, Constant, Linear

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _chains(seed, n=25):
    """Chains with columns of very different magnitudes (Linear rescales those above 1 inside its fit)."""
    rng = np.random.default_rng(seed)
    scale = np.array([1.0, 1e3, 0.01, 40.0])
    X = [rng.normal(size=(int(rng.integers(2, 6)), 4)) * scale for _ in range(n)]
    Y = [((x[:, 0] + x[:, 1] / 1e3 > 0).astype(int) + (x[:, 3] > 20)) for x in X]
    return from_chain_crf(X, Y)


@pytest.fixture(scope="module")
def fitted():
    X, Y = _chains(0)
    model = StructuredLogisticRegression(Linear(l2=0.1, fit_intercept=True), Linear(l2=0.1), max_iter=10,
                                         random_state=0).fit(X, Y)
    return X, model


def test_the_tables_rebuild_the_scores_and_the_decodes(fitted):
    _, model = fitted
    names = ["a", "b", "c", "d"]
    states = state_features(model, names, labels=["x", "y", "z"])
    assert list(states.columns) == ["feature", "label", "weight"] and (states["weight"] != 0).all()
    weights = states.pivot(index="feature", columns="label", values="weight").reindex(
        index=[INTERCEPT, *names], columns=["x", "y", "z"]).fillna(0.0).to_numpy()
    table = transition_features(model, labels=["x", "y", "z"]).pivot(index="from", columns="to", values="weight")
    table = table.reindex(index=["x", "y", "z"], columns=["x", "y", "z"]).to_numpy()
    X_test, _ = _chains(1, n=15)
    eps = model.epsilon_
    for (nodes, edges, on_edges), predicted in zip(X_test, model.predict(X_test)):
        scores = weights[0] + nodes @ weights[1:]   # the caller's units: Linear's internal rescaling undone
        np.testing.assert_allclose(scores, model.unary_.decision_function(nodes), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np.broadcast_to(table.ravel(), (len(edges), 9)),
                                   model.pairwise_.decision_function(on_edges), rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(viterbi(eps * scores, np.broadcast_to(eps * table, (len(edges), 3, 3))),
                                      predicted)
    _, intercept = unary_weights(model)
    np.testing.assert_array_equal(intercept, model.unary_.intercept_)
    assert transition_table(model).shape == (3, 3)


def test_top_weights_by_hand():
    frame = pd.DataFrame({"feature": list("abcde"), "label": [0] * 5, "weight": [0.5, -2.0, 3.0, -1.0, 0.5]})
    assert top_weights(frame, 3)["feature"].tolist() == ["c", "a", "e"]   # ties in table order
    assert top_weights(frame, 2, negative=True)["feature"].tolist() == ["b", "d"]
    assert len(top_weights(frame, 10)) == 5
    with pytest.raises(ValueError, match="weight"):
        top_weights(frame.drop(columns="weight"))
    with pytest.raises(ValueError, match="k"):
        top_weights(frame, -1)


def test_names_and_labels_from_a_pipeline_and_every_row_without_nonzero():
    X = [[{"w": "a", "n": 1.0}, {"w": "b"}], [{"w": "b", "n": 2.0}, {"w": "c"}]] * 3
    Y = [np.array([0, 1]), np.array([1, 0])] * 3
    pipeline = make_pipeline(SequenceVectorizer(), StructuredLogisticRegression(Linear(l2=1.0), Constant(),
                                                                                max_iter=3)).fit(X, Y)
    states = state_features(pipeline)
    assert set(states["feature"]) <= {"n", "w=a", "w=b", "w=c"} and set(states["label"]) == {0, 1}
    every = state_features(pipeline, nonzero=False)
    assert len(every) == 4 * 2 and INTERCEPT not in set(every["feature"])   # no intercept fitted
    transitions = transition_features(pipeline, labels=["O", "X"])
    assert transitions[["from", "to"]].values.tolist() == [["O", "O"], ["O", "X"], ["X", "O"], ["X", "X"]]
    np.testing.assert_allclose(transitions["weight"], pipeline[-1].pairwise_.table_)


def test_bad_input_is_refused(fitted):
    X, model = fitted
    with pytest.raises(ValueError, match="feature_names must have one name per node-feature column"):
        state_features(model, ["a"])
    with pytest.raises(ValueError, match="labels must name the model's 3 states"):
        transition_features(model, labels=["a", "b"])
    mlp = StructuredLogisticRegression(MLP(n_hidden=2, n_epochs=1, random_state=0), max_iter=1).fit(
        X, [np.zeros(x[0].shape[0], int) + (np.arange(x[0].shape[0]) % 2) for x in X])
    with pytest.raises(ValueError, match="not linear in the node features"):
        state_features(mlp)
    with pytest.raises(ValueError, match="structured learner"):
        state_features(Linear())
