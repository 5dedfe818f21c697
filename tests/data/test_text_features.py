"""sklearn-crfsuite-style feature dicts of tokens."""
import pytest

from slr.datasets.text_features import sentence_features, token_features
from slr.formats import SequenceVectorizer


def test_features_of_a_middle_token_with_parts_of_speech():
    tokens, pos = ["The", "EU", "rejects", "calls"], ["DT", "NNP", "VBZ", "NNS"]
    features = token_features(tokens, 1, pos, window=1)
    assert features == {
        "bias": 1.0, "word.lower()": "eu", "word.istitle()": False, "word.isupper()": True,
        "word[-3:]": "EU", "word[-2:]": "EU", "word.isdigit()": False, "postag": "NNP", "postag[:2]": "NN",
        "-1:word.lower()": "the", "-1:word.istitle()": True, "-1:word.isupper()": False,
        "-1:postag": "DT", "-1:postag[:2]": "DT",
        "+1:word.lower()": "rejects", "+1:word.istitle()": False, "+1:word.isupper()": False,
        "+1:postag": "VBZ", "+1:postag[:2]": "VB"}


def test_sentence_ends_and_a_wider_window():
    tokens = ["Ankara", "2005", "."]
    features = sentence_features(tokens, window=2)
    assert features[0]["BOS"] and "EOS" not in features[0] and "-1:word.lower()" not in features[0]
    assert features[0]["+2:word.lower()"] == "." and features[2]["-2:word.lower()"] == "ankara"
    assert features[2]["EOS"] and "+1:word.lower()" not in features[2]
    assert features[1]["word.isdigit()"] and features[1]["word[-3:]"] == "005"
    assert not any(key.endswith("postag") for f in features for key in f)   # no parts of speech given
    assert "+2:word.lower()" not in sentence_features(tokens, window=1)[0]


def test_bad_arguments():
    with pytest.raises(ValueError, match="pos must have one tag per token"):
        sentence_features(["a", "b"], ["DT"])
    with pytest.raises(ValueError, match="window"):
        sentence_features(["a"], window=-1)


def test_dicts_vectorise_to_one_column_per_string_value_and_flag():
    X = [sentence_features(["A", "b"]), sentence_features(["b"])]
    vectorizer = SequenceVectorizer().fit(X)
    names = set(vectorizer.get_feature_names_out())
    assert {"word.lower()=a", "word.lower()=b", "+1:word.lower()=b", "-1:word.lower()=a", "BOS", "EOS"} <= names
    nodes = vectorizer.transform(X)[1][0]
    row = dict(zip(vectorizer.get_feature_names_out(), (nodes.toarray() if hasattr(nodes, "toarray") else nodes)[0]))
    assert row["word.lower()=b"] == 1.0 and row["BOS"] == 1.0 and row["EOS"] == 1.0 and row["word.lower()=a"] == 0.0
