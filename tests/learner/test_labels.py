"""Labels of any hashable type (slr.labels): every learner fitted on string labels is the same fit as
on their integer codes, speaks the caller's labels in predict and score, and keeps integer labels
as they were."""
from __future__ import annotations

import functools
import pickle
import warnings

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, KFold, cross_val_predict

from slr.baselines import LatentSSVM, OneSlackSSVM
from slr import StructuredLogisticRegression
from slr.datasets import make_denoising
from slr.labels import decode_labels, encode_class_weight, encode_labels, fit_labels
from slr.metrics import make_node_scorer, node_accuracy, node_f1
from slr.oracles import Constant, Linear
from learners import LEARNERS

NAMES = np.array(["dark", "light"])   # sorted: code a is NAMES[a], so the coding keeps the order


@pytest.fixture(scope="module")
def data():
    X, Y = make_denoising(n_images=3, size=6, sigma=1.5, random_state=0)
    return X, Y, [NAMES[y] for y in Y]


def _objects(*labels):
    out = np.empty(len(labels), dtype=object)
    out[:] = list(labels)
    return out


# ------------------------------------------------------------------ the coding
def test_fit_labels_sorts_the_labels_and_codes_them():
    codes, classes = fit_labels([np.array(["O", "B-PER", "I-PER"]), ["O"], np.array([], dtype=float)], None)
    np.testing.assert_array_equal(classes, ["B-PER", "I-PER", "O"])
    assert classes.dtype.kind == "U"
    assert [c.tolist() for c in codes] == [[2, 0, 1], [2], []]
    np.testing.assert_array_equal(decode_labels(np.array([1, 2]), classes), ["I-PER", "O"])


def test_integer_labels_pass_through_untouched():
    Y = [np.array([0, 2]), np.ma.masked_array([1, 5], mask=[False, True]), np.array([1.0, 0.0])]
    codes, classes = fit_labels(Y, 3)
    assert classes is None and all(a is b for a, b in zip(codes, Y))
    assert encode_labels(Y, np.arange(3)) is Y


def test_none_and_masked_entries_are_unlabelled():
    y = np.ma.masked_array(np.array(["b", "zzz", "a"], dtype=object), mask=[False, True, False])
    codes, classes = fit_labels([np.array(["a", None, "b"], dtype=object), y], None)
    np.testing.assert_array_equal(classes, ["a", "b"])   # the masked "zzz" is no class
    assert np.ma.getmaskarray(codes[0]).tolist() == [False, True, False]
    assert np.ma.getmaskarray(codes[1]).tolist() == [False, True, False]
    assert codes[0].compressed().tolist() == [0, 1] and codes[1].compressed().tolist() == [1, 0]


def test_booleans_and_objects_keep_their_type():
    _, classes = fit_labels([np.array([True, False])], None)
    assert classes.dtype == bool and classes.tolist() == [False, True]
    _, classes = fit_labels([_objects((1, "a"), (0, "b"))], None)
    assert classes.dtype == object and classes.shape == (2,) and classes.tolist() == [(0, "b"), (1, "a")]


@pytest.mark.parametrize("Y, n_states, match", [
    ([np.array(["a", "b"]), np.array([1, 2])], None, "sort together"),
    ([np.array(["a", "b"])], 3, r"n_states=3, but Y holds 2 distinct labels"),
    ([np.array([None, None], dtype=object)], None, "no labelled node"),
    ([_objects("a", ["b"])], None, "unhashable"),
])
def test_bad_labels_are_refused(Y, n_states, match):
    with pytest.raises(ValueError, match=match):
        fit_labels(Y, n_states)


def test_a_label_outside_the_classes_is_named():
    with pytest.raises(ValueError, match=r"Y\[1\] holds the label 'c' at node 0, which is not one of the classes_"):
        encode_labels([["a"], ["c"]], np.array(["a", "b"]))
    with pytest.raises(ValueError, match="class_weight has the key 'c'"):
        encode_class_weight({"c": 2.0}, np.array(["a", "b"]))
    assert encode_class_weight({"b": 2.0}, np.array(["a", "b"])) == {1: 2.0}


# ------------------------------------------------------------------ every learner
@pytest.mark.parametrize("name", LEARNERS)
def test_string_labels_fit_as_their_codes(name, data):
    """The same learner on the labels' names and on their codes: the same fit, the names back."""
    X, Y, names = data
    on_codes = LEARNERS[name](max_iter=2, random_state=0).fit(X[:2], Y[:2], X[2:], Y[2:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        on_names = LEARNERS[name](max_iter=2, random_state=0).fit(X[:2], names[:2], X[2:], names[2:])
    np.testing.assert_array_equal(on_codes.classes_, [0, 1])
    np.testing.assert_array_equal(on_names.classes_, NAMES)
    np.testing.assert_array_equal(on_names.history_["objective"], on_codes.history_["objective"])
    np.testing.assert_array_equal(on_names.history_["val_error"], on_codes.history_["val_error"])
    for by_code, by_name in zip(on_codes.predict(X), on_names.predict(X)):
        assert by_code.dtype == np.int64 and by_name.dtype == NAMES.dtype
        np.testing.assert_array_equal(by_name, NAMES[by_code])
    assert on_names.score(X, names) == on_codes.score(X, Y)
    with pytest.raises(ValueError, match="holds the label 'grey'"):
        on_names.score(X[:1], [np.full(Y[0].shape, "grey")])


def test_marginal_columns_follow_the_classes(data):
    X, Y, names = data
    settings = dict(max_iter=2, random_state=0, n_jobs=1)
    by_code = StructuredLogisticRegression(**settings).fit(X, Y).predict_marginals(X[:1], method="exact")
    by_name = StructuredLogisticRegression(**settings).fit(X, names).predict_marginals(X[:1], method="exact")
    np.testing.assert_array_equal(by_name[0], by_code[0])


def test_none_marks_unlabelled_nodes_as_minus_one_does(data):
    X, Y, names = data
    hidden = [np.arange(y.size) % 5 == 0 for y in Y]
    partial_codes = [np.where(h, -1, y) for y, h in zip(Y, hidden)]
    partial_names = [np.where(h, None, n).astype(object) for n, h in zip(names, hidden)]
    settings = dict(max_iter=2, random_state=0, n_jobs=1)
    a = StructuredLogisticRegression(**settings).fit(X, partial_codes)
    b = StructuredLogisticRegression(**settings).fit(X, partial_names)
    np.testing.assert_array_equal(b.history_["objective"], a.history_["objective"])
    assert b.classes_.dtype.kind == "U"   # the strings' own dtype, though Y was of objects
    for ya, yb in zip(a.predict(X), b.predict(X)):
        np.testing.assert_array_equal(yb, NAMES[ya])
    # a learner without partial labels says so, as for a masked array
    with pytest.raises(ValueError, match="None labels, which mark them too"):
        OneSlackSSVM(max_iter=2).fit(X, partial_names)
    # and the metrics leave the None nodes out, as they leave -1 out
    predicted = b.predict(X)
    assert node_accuracy(partial_names, predicted) == node_accuracy(partial_codes, a.predict(X))


def test_latent_ssvm_with_string_labels(data):
    X, Y, names = data
    partial_codes = [np.where(np.arange(y.size) % 4 == 0, -1, y) for y in Y]
    partial_names = [np.where(c < 0, None, NAMES[np.maximum(c, 0)]).astype(object) for c in partial_codes]
    make = lambda: LatentSSVM(OneSlackSSVM(max_iter=3), latent_iter=2, random_state=0)  # noqa: E731
    a, b = make().fit(X, partial_codes), make().fit(X, partial_names)
    np.testing.assert_array_equal(b.classes_, NAMES)
    for ya, yb in zip(a.predict(X), b.predict(X)):
        np.testing.assert_array_equal(yb, NAMES[ya])
    assert b.score(X, names) == a.score(X, Y)


def test_integer_labels_keep_n_states_and_the_old_errors(data):
    X, Y, _ = data
    model = StructuredLogisticRegression(n_states=3, max_iter=1, n_jobs=1).fit(X, Y)
    np.testing.assert_array_equal(model.classes_, [0, 1, 2])
    with pytest.raises(ValueError, match="must contain integer labels"):
        model.score(X, [np.full(y.shape, "a") for y in Y])
    with pytest.raises(ValueError, match=r"n_states=3, but Y holds 2 distinct labels"):
        StructuredLogisticRegression(n_states=3, max_iter=1).fit(X, [NAMES[y] for y in Y])
    with pytest.raises(ValueError, match=r"n_states=3, but Y holds 2 distinct labels"):
        OneSlackSSVM(n_states=3, max_iter=1).fit(X, [NAMES[y] for y in Y])


def test_class_weight_keys_are_labels(data):
    X, Y, names = data
    settings = dict(max_iter=2, random_state=0, n_jobs=1)
    a = StructuredLogisticRegression(class_weight={1: 3.0}, **settings).fit(X, Y)
    b = StructuredLogisticRegression(class_weight={"light": 3.0}, **settings).fit(X, names)
    np.testing.assert_array_equal(b.history_["objective"], a.history_["objective"])
    c = OneSlackSSVM(class_weight={"light": 3.0}, max_iter=3).fit(X, names)
    np.testing.assert_array_equal(c.class_weight_, [1.0, 3.0])


def test_warm_start_continues_on_the_fitted_classes(data):
    X, Y, names = data
    model = StructuredLogisticRegression(max_iter=1, warm_start=True, n_jobs=1, random_state=0).fit(X, names)
    with pytest.raises(ValueError, match="holds the label 'grey'"):
        model.set_params(max_iter=2).fit(X, [np.full(y.shape, "grey") for y in Y])
    assert model.n_iter_ == 1
    model.fit(X, names)
    assert model.n_iter_ == 2 and model.classes_.tolist() == ["dark", "light"]


def test_callback_iterates_speak_the_labels(data):
    X, Y, names = data
    seen = []
    StructuredLogisticRegression(max_iter=1, n_jobs=1).fit(
        X, names, callback=lambda it: seen.append((it.predict(X[:1])[0], it.score(X, names))))
    labels, score = seen[0]
    assert set(labels.tolist()) <= set(NAMES) and 0 <= score <= 1


# ------------------------------------------------------------------ model selection, pickles
def test_cross_val_predict_and_grid_search_take_string_labels(data):
    X, Y, names = data
    model = StructuredLogisticRegression(Linear(), Constant(), max_iter=2, n_jobs=1, random_state=0)
    predicted = cross_val_predict(model, X, names, cv=KFold(3))
    assert len(predicted) == len(X) and all(p.dtype.kind == "U" for p in predicted)
    by_code = cross_val_predict(model, X, Y, cv=KFold(3))
    for p, c in zip(predicted, by_code):
        np.testing.assert_array_equal(p, NAMES[c])
    scorer = make_node_scorer(node_f1, average="macro")
    search = GridSearchCV(model, {"epsilon": [0.5, 1.0]}, scoring=scorer, cv=KFold(3)).fit(X, names)
    search_codes = GridSearchCV(model, {"epsilon": [0.5, 1.0]}, scoring=scorer, cv=KFold(3)).fit(X, Y)
    np.testing.assert_array_equal(search.cv_results_["mean_test_score"], search_codes.cv_results_["mean_test_score"])
    plain = GridSearchCV(model, {"epsilon": [0.5, 1.0]}, cv=KFold(3)).fit(X, names)   # score: node accuracy
    assert plain.best_estimator_.classes_.tolist() == ["dark", "light"]


def test_pickles_keep_their_labels_and_old_pickles_get_integer_classes(data):
    X, Y, names = data
    model = OneSlackSSVM(max_iter=2).fit(X, names)
    loaded = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(loaded.predict(X)[0], model.predict(X)[0])
    old = OneSlackSSVM(max_iter=2).fit(X, Y).__getstate__()
    del old["classes_"]
    old["_fitted_names"] = tuple(n for n in old["_fitted_names"] if n != "classes_")
    revived = OneSlackSSVM.__new__(OneSlackSSVM)
    revived.__setstate__(old)
    np.testing.assert_array_equal(revived.classes_, [0, 1])
    assert revived.predict(X)[0].dtype == np.int64


def test_crfsuite_peer_takes_string_labels():
    pytest.importorskip("pycrfsuite")
    from slr.baselines.crfsuite_peer import CRFsuiteChain
    from slr.formats import chain_example

    rng = np.random.default_rng(0)
    X = [chain_example(rng.normal(size=(6, 3))) for _ in range(8)]
    Y = [(x[0][:, 0] > 0).astype(np.int64) for x in X]
    a = CRFsuiteChain(max_iter=20).fit(X, Y)
    b = CRFsuiteChain(max_iter=20).fit(X, [NAMES[y] for y in Y])
    np.testing.assert_array_equal(b.classes_, NAMES)
    for ya, yb in zip(a.predict(X), b.predict(X)):
        np.testing.assert_array_equal(yb, NAMES[ya])
    assert b.score(X, [NAMES[y] for y in Y]) == a.score(X, Y)
    with pytest.raises(ValueError, match="no unlabelled nodes"):
        CRFsuiteChain().fit(X, [np.where(y > 0, "a", None).astype(object) for y in Y])


def test_the_distributed_learner_takes_string_labels(client, data):
    from slr.distributed import DaskStructuredLogisticRegression

    X, Y, names = data
    settings = dict(max_iter=2, tol=0, random_state=0, n_jobs=1, solver="alternation")
    a = DaskStructuredLogisticRegression(n_partitions=2, **settings).fit(X, Y)
    b = DaskStructuredLogisticRegression(n_partitions=2, **settings).fit(X, names)
    np.testing.assert_array_equal(b.classes_, NAMES)
    np.testing.assert_array_equal(b.history_["objective"], a.history_["objective"])
    for ya, yb in zip(a.predict(X), b.predict(X)):
        np.testing.assert_array_equal(yb, NAMES[ya])
    by_name = b.score_sources([functools.partial(_source, X, names)])
    assert by_name == a.score_sources([functools.partial(_source, X, Y)])


def _source(X, Y):
    return X, Y


@pytest.mark.parametrize("make", [
    lambda **kw: StructuredLogisticRegression(max_iter=4, n_jobs=1, random_state=0, **kw),
    lambda **kw: OneSlackSSVM(max_iter=10, **kw)], ids=["slr", "OneSlackSSVM"])
def test_a_tagging_scheme_is_resolved_against_the_classes(make):
    """``allowed_transitions="BIO"`` on string tags is the fit on their codes with the scheme's mask
    over the sorted tags, and no prediction uses a pair BIO forbids."""
    from slr.transitions import allowed_transitions
    from tagged_chains import TAGS, bio_chains

    X, Y, _ = bio_chains(0, n_examples=20)
    names = [np.asarray(TAGS)[y] for y in Y]
    classes = np.array(sorted(TAGS))
    codes = [np.searchsorted(classes, n) for n in names]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        by_name = make(allowed_transitions="BIO").fit(X, names)
        by_code = make(allowed_transitions=allowed_transitions("BIO", classes.tolist())).fit(X, codes)
    np.testing.assert_array_equal(by_name.classes_, classes)
    np.testing.assert_array_equal(by_name.history_["objective"], by_code.history_["objective"])
    X_test, _, _ = bio_chains(5, noise=3.0)
    for tags, ints in zip(by_name.predict(X_test), by_code.predict(X_test)):
        np.testing.assert_array_equal(tags, classes[ints])
        assert not tags[0].startswith("I-")
        assert all(b[2:] == a[2:] for a, b in zip(tags[:-1], tags[1:]) if b.startswith("I-"))
