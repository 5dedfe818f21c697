"""SequenceTagger: feature dicts and string tags in, string tags out; in a Pipeline and GridSearchCV."""
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from slr import StructuredLogisticRegression
from slr.datasets.text_features import sentence_features
from slr.oracles import Linear
from slr.tagging import SequenceTagger

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

NAMES, PLACES, OTHER = ["Anna", "Per", "Kari"], ["Oslo", "Bergen"], ["lives", "in", "and", "likes", "visits"]


def _sentences(seed, n=40):
    """Token lists with IOB tags: names are B-PER, places B-LOC, everything else O."""
    rng = np.random.default_rng(seed)
    tokens, tags = [], []
    for _ in range(n):
        words = [str(rng.choice(NAMES + PLACES + OTHER)) for _ in range(int(rng.integers(2, 7)))]
        tokens.append(words)
        tags.append(["B-PER" if w in NAMES else "B-LOC" if w in PLACES else "O" for w in words])
    return tokens, tags


def _tagger():
    return SequenceTagger(StructuredLogisticRegression(Linear(l2=1.0), Linear(l2=1.0), max_iter=5, random_state=0))


def test_string_tags_in_and_out():
    tokens, tags = _sentences(0)
    X = [sentence_features(t) for t in tokens]
    tagger = _tagger().fit(X, tags)
    assert tagger.classes_.tolist() == ["B-LOC", "B-PER", "O"]
    test_tokens, test_tags = _sentences(1, n=20)
    X_test = [sentence_features(t) for t in test_tokens]
    predicted = tagger.predict(X_test)
    assert predicted == test_tags   # the word decides its tag
    assert predicted == [y.tolist() for y in tagger.learner_.predict(tagger.vectorizer_.transform(X_test))]
    assert tagger.learner_.classes_.tolist() == tagger.classes_.tolist()
    assert tagger.score(X_test, test_tags) == 1.0
    states = tagger.state_features_
    assert set(states["label"]) <= {"B-LOC", "B-PER", "O"} and "word.lower()=oslo" in set(states["feature"])
    assert len(tagger.transition_features_) == 9


def test_in_a_pipeline_from_tokens_and_in_grid_search():
    tokens, tags = _sentences(2)
    pipeline = make_pipeline(FunctionTransformer(lambda sentences: [sentence_features(t) for t in sentences]),
                             _tagger())
    test_tokens, test_tags = _sentences(3, n=15)
    assert pipeline.fit(tokens, tags).predict(test_tokens) == test_tags
    search = GridSearchCV(_tagger(), {"learner__unary__l2": [1e3, 1.0]}, cv=2)
    search.fit([sentence_features(t) for t in tokens], tags)
    assert search.best_params_ == {"learner__unary__l2": 1.0}   # a ridge of 1e3 tags every token O
    assert search.cv_results_["mean_test_score"][0] < search.cv_results_["mean_test_score"][1]
    assert search.best_estimator_.predict([sentence_features(t) for t in test_tokens]) == test_tags
    assert clone(_tagger()).get_params()["learner__unary__l2"] == 1.0


def test_bad_tags_are_refused():
    tokens, tags = _sentences(4, n=5)
    X = [sentence_features(t) for t in tokens]
    with pytest.raises(ValueError, match=r"y\[0\] must have one tag per token"):
        _tagger().fit(X, [tags[0][:-1]] + tags[1:])
    with pytest.raises(ValueError, match="one tag sequence per sentence"):
        _tagger().fit(X, tags[:-1])
    with pytest.raises(ValueError, match="None"):
        _tagger().fit(X, [[None] * len(t) for t in tags])


def test_unknown_tags_are_latent_labels():
    """A tag None is an unknown tag (a latent label): the fit uses the others and predicts real tags."""
    tokens, tags = _sentences(4)
    partial = [[None if k % 4 == 1 else tag for k, tag in enumerate(t)] for t in tags]
    X = [sentence_features(t) for t in tokens]
    tagger = _tagger().fit(X, partial)
    assert tagger.classes_.tolist() == ["B-LOC", "B-PER", "O"]
    test_tokens, test_tags = _sentences(5, n=20)
    predicted = tagger.predict([sentence_features(t) for t in test_tokens])
    assert all(tag is not None for t in predicted for tag in t)
    assert tagger.score([sentence_features(t) for t in test_tokens], test_tags) > 0.9
