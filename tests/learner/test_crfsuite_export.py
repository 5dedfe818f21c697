"""CRFsuite's model file: python-crfsuite's own Tagger loads what slr.crfsuite writes and tags as slr
(and as brute force), slr.crfsuite reads what CRFsuite trained, and what cannot be exported is refused."""
import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.pipeline import make_pipeline

pycrfsuite = pytest.importorskip("pycrfsuite")

from slr import StructuredLogisticRegression  # noqa: E402
from slr.crfsuite import FORBIDDEN_WEIGHT, CRFsuiteModel, hashlittle, load_crfsuite, save_crfsuite  # noqa: E402
from slr.formats import SequenceVectorizer, chain_example  # noqa: E402
from slr.graph import grid_edges  # noqa: E402
from slr.inference import viterbi  # noqa: E402
from slr.oracles import MLP, Linear  # noqa: E402

WORDS = ["anna", "oslo", "runs", "in", "the", "cold", "=", ":"]


def _tagger(path):
    tagger = pycrfsuite.Tagger()
    tagger.open(str(path))
    return tagger


def _dicts(seed, n_sentences=30):
    """Sentences of feature dicts of every kind pycrfsuite takes (strings, numbers, bools, lists),
    keys and values with the separators in them; tags that follow the words and the previous tag."""
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for _ in range(n_sentences):
        words = rng.choice(WORDS, size=int(rng.integers(1, 6)))
        X.append([{"bias": 1.0, "word": w, "len": len(w) / 4, "short": len(w) < 3, "a=b": w, "a": "b=" + w,
                   "chars": sorted(set(w))[:2]} for w in words])
        tags, previous = [], 0
        for w in words:
            previous = (WORDS.index(w) + previous) % 3 if rng.random() < 0.9 else int(rng.integers(3))
            tags.append(previous)
        Y.append(np.array(tags))
    return X, Y


def _brute_force(crf, items):
    """The best labelling of a sequence of {attribute: value} items under a CRFsuiteModel, by enumeration."""
    L = len(crf.labels)
    index = {a: k for k, a in enumerate(crf.attributes)}
    W = crf.state_weights.toarray()
    scores = np.array([sum(v * W[index[a]] for a, v in item.items() if a in index) + np.zeros(L) for item in items])
    best, best_y = -np.inf, None
    for y in itertools.product(range(L), repeat=len(items)):
        s = scores[np.arange(len(y)), y].sum() + sum(crf.transitions[a, b] for a, b in zip(y[:-1], y[1:]))
        if s > best:
            best, best_y = s, y
    return [crf.labels[k] for k in best_y], best


def test_hashlittle_gives_lookup3s_published_values():
    assert hashlittle(b"") == 0xDEADBEEF
    assert hashlittle(b"Four score and seven years ago") == 0x17770551
    assert hashlittle(b"Four score and seven years ago", 1) == 0xCD628161


def test_a_hand_made_model_tags_by_brute_force_in_crfsuite(tmp_path):
    rng = np.random.default_rng(0)
    weights = rng.normal(size=(6, 3)) * (rng.random((6, 3)) < 0.7)
    attributes = ("w:a", "w:b", "x", "ü:é", "a=b:c", "bias")   # UTF-8, separators
    crf = CRFsuiteModel(("B-X", "I-X", "O"), attributes, sp.csr_array(weights), rng.normal(size=(3, 3)))
    crf.save(tmp_path / "m.crfsuite")
    tagger = _tagger(tmp_path / "m.crfsuite")
    assert tagger.labels() == ["B-X", "I-X", "O"]
    info = tagger.info()
    assert info.transitions == pytest.approx({(a, b): round(crf.transitions[i, j], 6) for i, a in enumerate(crf.labels)
                                              for j, b in enumerate(crf.labels)}, abs=1e-6)
    assert info.state_features == pytest.approx({(attributes[a], crf.labels[k]): round(weights[a, k], 6)
                                                 for a, k in zip(*np.nonzero(weights))}, abs=1e-6)
    for _ in range(30):
        items = [{a: float(rng.normal()) for a in rng.choice(attributes + ("unknown",), size=3, replace=False)}
                 for _ in range(int(rng.integers(1, 5)))]
        tags, best = _brute_force(crf, items)
        assert tagger.tag(items) == tags
        # CRFsuite's score of the labelling is its log-probability plus log Z: exp(score) / Z by enumeration
        L, n = 3, len(items)
        all_scores = [_score(crf, items, y) for y in itertools.product(range(L), repeat=n)]
        assert tagger.probability(tags) == pytest.approx(np.exp(best - np.logaddexp.reduce(all_scores)), rel=1e-9)
    loaded = load_crfsuite(tmp_path / "m.crfsuite")
    assert loaded.labels == crf.labels and loaded.attributes == crf.attributes
    np.testing.assert_array_equal(loaded.state_weights.toarray(), weights)
    np.testing.assert_array_equal(loaded.transitions, crf.transitions)


def _score(crf, items, y):
    index = {a: k for k, a in enumerate(crf.attributes)}
    W = crf.state_weights.toarray()
    unary = sum(v * W[index[a], y[t]] for t, item in enumerate(items) for a, v in item.items() if a in index)
    return unary + sum(crf.transitions[a, b] for a, b in zip(y[:-1], y[1:]))


def test_a_model_crfsuite_trained_reads_back_as_its_tagger_sees_it(tmp_path):
    X, Y = _dicts(1, n_sentences=40)
    trainer = pycrfsuite.Trainer(verbose=False)
    for x, y in zip(X, Y):
        trainer.append(x, [f"T{k}" for k in y])
    trainer.set_params({"c1": 0.1, "c2": 0.01, "max_iterations": 50})
    trainer.train(str(tmp_path / "trained.crfsuite"))
    tagger = _tagger(tmp_path / "trained.crfsuite")
    crf = load_crfsuite(tmp_path / "trained.crfsuite")
    info = tagger.info()
    assert list(crf.labels) == tagger.labels()
    W = crf.state_weights.tocoo()
    assert {(crf.attributes[a], crf.labels[k]): w for a, k, w in zip(W.row, W.col, W.data)} == \
        pytest.approx(info.state_features, abs=5e-7)
    assert {(a, b): crf.transitions[i, j] for i, a in enumerate(crf.labels) for j, b in enumerate(crf.labels)
            if crf.transitions[i, j] != 0} == pytest.approx(info.transitions, abs=5e-7)
    # slr's Viterbi on the weights read tags as CRFsuite does; and so does the file written back
    crf.save(tmp_path / "again.crfsuite")
    again = _tagger(tmp_path / "again.crfsuite")
    index = {a: k for k, a in enumerate(crf.attributes)}
    X_test, _ = _dicts(2)
    dense = crf.state_weights.toarray()
    for x in X_test:
        items = pycrfsuite.ItemSequence(x).items()
        unary = np.array([sum(v * dense[index[a]] for a, v in item.items() if a in index) + np.zeros(len(crf.labels))
                          for item in items])
        transitions = np.broadcast_to(crf.transitions, (len(x) - 1, *crf.transitions.shape))
        ours = [crf.labels[k] for k in viterbi(unary, transitions)]
        assert tagger.tag(x) == ours == again.tag(x)


def _fitted_pipeline(X, Y, **unary):
    learner = StructuredLogisticRegression(Linear(l2=0.5, **unary), Linear(l2=0.5), max_iter=15, tol=0,
                                           random_state=0)
    return make_pipeline(SequenceVectorizer(), learner).fit(X, Y)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_an_slr_model_tags_as_slr_in_crfsuite_with_slrs_exact_marginals(tmp_path):
    X, Y = _dicts(3)
    model = _fitted_pipeline(X, Y)
    crf = save_crfsuite(model, tmp_path / "slr.crfsuite", labels=["A", "B", "C"])
    # the attribute names are python-crfsuite's for these dicts, "k:v" where DictVectorizer has "k=v"
    assert {"word:anna", "a=b:anna", "a:b=anna", "chars:a", "len", "short", "bias"} <= set(crf.attributes)
    tagger = _tagger(tmp_path / "slr.crfsuite")
    X_test, _ = _dicts(4, n_sentences=40)
    predicted = model.predict(X_test)
    marginals = model[-1].predict_marginals(model[0].transform(X_test), method="exact")
    for x, y, p in zip(X_test, predicted, marginals):
        assert tagger.tag(x) == [["A", "B", "C"][k] for k in y]
        assert [[tagger.marginal(label, t) for label in "ABC"] for t in range(len(x))] == pytest.approx(p, abs=1e-9)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_the_intercept_goes_into_an_attribute_every_item_has(tmp_path):
    X, Y = _dicts(5)
    model = _fitted_pipeline(X, Y, fit_intercept=True)
    assert np.abs(model[-1].unary_.intercept_).max() > 1e-3
    with pytest.raises(ValueError, match="intercept_attribute"):
        save_crfsuite(model, tmp_path / "m.crfsuite")
    for name in ("bias", "always"):   # a feature of the dicts, or one added to them
        save_crfsuite(model, tmp_path / "m.crfsuite", intercept_attribute=name)
        tagger = _tagger(tmp_path / "m.crfsuite")
        X_test, _ = _dicts(6)
        for x, y in zip(X_test, model.predict(X_test)):
            assert tagger.tag([{**item, "always": 1.0} for item in x]) == [str(k) for k in y]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_what_crfsuite_cannot_hold_is_refused(tmp_path):
    X, Y = _dicts(7, n_sentences=10)
    path = tmp_path / "m.crfsuite"
    examples = SequenceVectorizer().fit_transform(X)
    fitted = StructuredLogisticRegression(MLP(n_hidden=3, n_epochs=1, random_state=0), max_iter=1,
                                          random_state=0).fit(examples, Y)
    with pytest.raises(ValueError, match="MLP, not linear"):
        save_crfsuite(fitted, path, attributes=[str(j) for j in range(examples[0][0].shape[1])])
    no_lists = [[{k: v for k, v in t.items() if k != "chars"} for t in x] for x in X]   # FeatureHasher takes none
    hashed = make_pipeline(SequenceVectorizer(hashing=8), StructuredLogisticRegression(max_iter=1)).fit(no_lists, Y)
    with pytest.raises(ValueError, match="hashing"):
        save_crfsuite(hashed, path)
    linear = StructuredLogisticRegression(Linear(l2=1.0), max_iter=1).fit(examples, Y)
    with pytest.raises(ValueError, match="attributes are unknown"):
        save_crfsuite(linear, path)
    with pytest.raises(ValueError, match="one name per|node-feature columns"):
        save_crfsuite(linear, path, attributes=["a", "b"])
    two_columns = [chain_example(x[0], np.ones((x[1].shape[0], 2))) for x in examples]
    wide = StructuredLogisticRegression(Linear(l2=1.0), Linear(l2=1.0), max_iter=3).fit(two_columns, Y)
    with pytest.raises(ValueError, match="2 edge features"):
        save_crfsuite(wide, path, attributes=[str(j) for j in range(examples[0][0].shape[1])])
    names = [str(j) for j in range(examples[0][0].shape[1])]
    grid = (np.ones((4, examples[0][0].shape[1])), grid_edges(2, 2), np.ones((4, 1)))
    with pytest.raises(ValueError, match=r"X\[1\] is not a chain"):
        save_crfsuite(linear, path, attributes=names, X=[examples[0], grid])
    varying = (examples[0][0], examples[0][1], 2 * np.ones((examples[0][1].shape[0], 1)))
    if varying[1].shape[0]:
        with pytest.raises(ValueError, match="other than the constant 1"):
            save_crfsuite(linear, path, attributes=names, X=[varying])
    save_crfsuite(linear, path, attributes=names, X=examples)   # chains: accepted
    with pytest.raises(ValueError, match="labels must name the model's 3 states"):
        save_crfsuite(linear, path, attributes=names, labels=["a", "b"])
    with pytest.raises(ValueError, match="labels must be distinct"):
        save_crfsuite(linear, path, attributes=names, labels=["a", "a", "b"])
    path.write_bytes(b"not a model" * 10)
    with pytest.raises(ValueError, match="not a CRFsuite"):
        load_crfsuite(path)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("corpus_name, n_train", [("hironsan", 100), ("turkish", 300)])
def test_crfsuite_tags_every_test_sentence_of_the_corpora_as_slr(tmp_path, corpus_name, n_train):
    from slr.datasets.tagged_text import load_tagged_corpus
    from slr.datasets.text_features import sentence_features

    corpus = load_tagged_corpus(corpus_name)

    def dicts(s):
        return [sentence_features(t, None if s.pos is None else s.pos[k]) for k, t in enumerate(s.tokens)]

    train = corpus.train.head(n_train)
    model = _fitted_pipeline(dicts(train), corpus.labels(train))
    save_crfsuite(model, tmp_path / "m.crfsuite", labels=corpus.tag_names)
    tagger = _tagger(tmp_path / "m.crfsuite")
    X_test = dicts(corpus.test)
    ours = corpus.tags_of(model.predict(X_test))
    theirs = [tagger.tag(x) for x in X_test]
    assert len(theirs) == len(corpus.test) and theirs == ours
    assert sum(len(t) for t in theirs) == corpus.test.n_tokens


def test_the_vectorizers_attributes_are_python_crfsuites_names_of_the_same_dicts():
    X, _ = _dicts(8)
    vectorizer = SequenceVectorizer(sparse=False).fit(X)
    columns = vectorizer.crfsuite_attributes_
    for x, (nodes, _, _) in zip(X, vectorizer.transform(X)):
        for item, row in zip(pycrfsuite.ItemSequence(x).items(), nodes):
            rebuilt = np.zeros_like(row)
            for attribute, value in item.items():
                rebuilt[columns[attribute]] += value
            np.testing.assert_array_equal(rebuilt, row)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_allowed_transitions_are_exported_as_forbidden_weights(tmp_path):
    """A model fitted with allowed_transitions tags in CRFsuite as in slr: forbidden pairs become
    transitions of FORBIDDEN_WEIGHT, forbidden first and last labels weights of the attributes that
    mark a sentence's first and last items; without those attributes the export is refused."""
    allowed = np.ones((5, 5), dtype=bool)              # AllenNLP's layout: states 0-2, START 3, END 4
    allowed[0, 2] = allowed[2, 1] = False              # pairs
    allowed[3, 1] = False                              # no sentence starts with 1
    allowed[2, 4] = False                              # none ends with 2

    def admissible(y):
        return (all(allowed[a, b] for a, b in zip(y[:-1], y[1:])) and allowed[3, y[0]] and allowed[y[-1], 4])

    def marked(x):
        return [{**item, **({"BOS": True} if t == 0 else {}), **({"EOS": True} if t == len(x) - 1 else {})}
                for t, item in enumerate(x)]

    X, Y = _dicts(9, n_sentences=400)
    kept = [k for k, y in enumerate(Y) if admissible(y)]
    X, Y = [marked(X[k]) for k in kept], [Y[k] for k in kept]
    learner = StructuredLogisticRegression(Linear(l2=0.5), Linear(l2=0.5), max_iter=15, tol=0, random_state=0,
                                           allowed_transitions=allowed)
    model = make_pipeline(SequenceVectorizer(), learner).fit(X, Y)
    with pytest.raises(ValueError, match="start_attribute"):
        save_crfsuite(model, tmp_path / "m.crfsuite")
    crf = save_crfsuite(model, tmp_path / "m.crfsuite", start_attribute="BOS", end_attribute="EOS")
    assert crf.transitions[0, 2] == crf.transitions[2, 1] == FORBIDDEN_WEIGHT
    tagger = _tagger(tmp_path / "m.crfsuite")
    X_test, _ = _dicts(10, n_sentences=60)
    X_test = [marked(x) for x in X_test]
    predicted = model.predict(X_test)
    assert all(admissible(y) for y in predicted)
    for x, y in zip(X_test, predicted):
        assert tagger.tag(x) == [str(k) for k in y]
