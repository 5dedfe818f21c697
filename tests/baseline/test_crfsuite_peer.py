"""The CRFsuite peer: its decode against our Viterbi and brute force, its objective, its report row."""
import itertools
import re
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("pycrfsuite")

from slr.baselines.crfsuite_peer import CRFsuiteChain  # noqa: E402
from slr.formats import chain_example  # noqa: E402
from slr.inference import viterbi  # noqa: E402

L = 3


def _chains(seed, n_examples=40, d=4):
    """Chains whose labels depend on the features and on the previous label."""
    rng = np.random.default_rng(seed)
    W, T = rng.normal(size=(L, d)), 2 * rng.normal(size=(L, L))
    X, Y = [], []
    for _ in range(n_examples):
        n = int(rng.integers(1, 5))
        feats = rng.normal(size=(n, d))
        y = [int(np.argmax(W @ feats[0] + rng.gumbel(size=L)))]
        for i in range(1, n):
            y.append(int(np.argmax(W @ feats[i] + T[y[-1]] + rng.gumbel(size=L))))
        X.append(chain_example(feats))
        Y.append(np.array(y))
    return X, Y


def _scores(model, x):
    """The score of every labelling of a chain under the exported weights, by enumeration."""
    n = x[0].shape[0]
    ys = np.array(list(itertools.product(range(L), repeat=n)))
    unary = x[0] @ model.unary_weights_.T
    T = model.transition_weights_
    return ys, np.array([unary[np.arange(n), y].sum() + T[y[:-1], y[1:]].sum() for y in ys])


@pytest.fixture(scope="module")
def fitted():
    X, Y = _chains(0)
    return X, Y, CRFsuiteChain(c2=0.5, delta=1e-12, n_states=L).fit(X, Y)


def test_crfsuite_decode_is_viterbi_on_its_exported_weights(fitted):
    X, _, model = fitted
    Xnew, _ = _chains(1, n_examples=30)
    for x, pred in zip(Xnew, model.predict(Xnew)):
        ys, scores = _scores(model, x)
        np.testing.assert_array_equal(pred, ys[int(np.argmax(scores))])
        np.testing.assert_array_equal(pred, viterbi(*model.potentials(x)))
    assert model.score(Xnew, _chains(1, n_examples=30)[1]) == pytest.approx(
        np.mean(np.concatenate(model.predict(Xnew)) == np.concatenate(_chains(1, n_examples=30)[1])))


def test_fitted_weights_are_stationary_for_the_stated_objective(fitted):
    """The gradient of sum_k [log Z - F(y^k)] + c2 ||w||^2, by enumeration, vanishes at CRFsuite's
    weights: c2 multiplies ||w||^2 (not ||w||^2 / 2), the conversion ``c2 = 1 / (2 C)`` relies on it."""
    X, Y, model = fitted
    gW, gT = 2 * model.c2 * model.unary_weights_, 2 * model.c2 * model.transition_weights_
    for x, y in zip(X, Y):
        ys, scores = _scores(model, x)
        p = np.exp(scores - scores.max())
        p /= p.sum()
        for labels, weight in [(y, -1.0), *zip(ys, p)]:
            np.add.at(gW, labels, weight * x[0])
            np.add.at(gT, (labels[:-1], labels[1:]), weight)
    scale = np.abs(2 * model.c2 * model.unary_weights_).max()
    assert np.abs(gW).max() < 1e-3 * scale and np.abs(gT).max() < 1e-3 * scale
    # and the weights are not trivially zero
    assert scale > 0.1


def test_bad_input_raises_value_error(fitted):
    X, Y, _ = fitted
    with pytest.raises(ValueError, match="c2"):
        CRFsuiteChain(c2=-1.0).fit(X, Y)
    star = (np.ones((3, 2)), np.array([[0, 1], [0, 2]]), np.ones((2, 1)))
    with pytest.raises(ValueError, match="chain"):
        CRFsuiteChain().fit([star], [np.zeros(3, int)])
    k = next(k for k, y in enumerate(Y) if len(y) > 1)
    feats, edges, _ = X[k]
    with pytest.raises(ValueError, match="edge features"):
        CRFsuiteChain().fit([(feats, edges, 2 * np.ones((len(edges), 1)))], [Y[k]])
    with pytest.raises(ValueError, match="not fitted"):
        CRFsuiteChain().predict(X)


# ------------------------------------------------------------------ the row in the baselines report
def _crfsuite_only(n_train=30, n_test=60):
    """The tiny profile with letters cut to the crfsuite row (every other method skipped), at the
    converted C (no tuning)."""
    from slr.suite import methods
    from slr.suite.profiles import get_profile

    tiny = get_profile("tiny")
    cfg = replace(tiny.spec("baselines"), letters=methods.LettersData(n_train=n_train, n_test=n_test))
    others = tuple(m for _, m in methods.methods_of("letters", cfg) if m != methods.CRFSUITE_METHOD)
    return tiny.with_spec("baselines", replace(cfg, skip={"letters": others}, tune={}))


def _run_and_render(profile, out):
    from slr.suite import render_baselines, runner
    from slr.suite.common import Logger, RunContext
    from slr.suite.provenance import RunInfo

    log = Logger(quiet=True)
    info = RunInfo.collect("tiny", ["baselines"])
    runner.run(runner.plan(["baselines"], profile, dict(datasets="letters")), profile, out,
               RunContext(log=log, info=info, cache_dir=out / "cache"))
    render_baselines.write_report(profile, out, info, log)
    return (out / "baselines.md").read_text()


def test_crfsuite_row_parsed_from_the_report_matches_our_viterbi_on_its_weights(tmp_path):
    """The report's test error for CRFsuite equals the error of our Viterbi on the weights of an
    independent CRFsuite fit on the same words with c2 = 1 / (2 * 0.1)."""
    profile = _crfsuite_only()
    text = _run_and_render(profile, tmp_path)
    number = r" \| ([0-9.]+)"
    # CRFsuite has no stopping reason or certified gap of ours: those columns are blank
    rows = re.findall(rf"^\| crfsuite \| crfsuite:lbfgs \| C=0.1{number * 3} \| .* \| (\d+) \|  \|  \| ok \|$", text,
                      re.M)
    assert len(rows) == 1, text
    train_error, test_error, seconds, iterations = map(float, rows[0])
    assert "c2 = 5 on letters" in text
    Xtr, Ytr, Xte, Yte, n_states = profile.spec("baselines").load("letters")
    assert (len(Xtr), len(Xte)) == (30, 60)
    model = CRFsuiteChain(c2=5.0, n_states=n_states).fit(Xtr, Ytr)
    for X, Y, reported in ((Xte, Yte, test_error), (Xtr, Ytr, train_error)):
        pred = np.concatenate([viterbi(*model.potentials(x)) for x in X])
        assert reported == pytest.approx(np.mean(pred != np.concatenate(Y)), abs=5e-4)
    assert iterations == model.n_iter_ and seconds > 0


def test_crfsuite_row_is_skipped_with_its_reason_where_absent(tmp_path, monkeypatch):
    import slr.baselines.crfsuite_peer as peer

    monkeypatch.setattr(peer, "crfsuite_missing", lambda: "python-crfsuite is not installed (a test)")
    text = _run_and_render(_crfsuite_only(n_train=3, n_test=3), tmp_path)
    assert re.search(r"^\| crfsuite \| crfsuite:lbfgs( \| —){6} \|  \|  \| skipped: python-crfsuite is not "
                     r"installed \(a test\) \|$", text, re.M), text
    assert "*Not run on the machine that computed them*: crfsuite:lbfgs (python-crfsuite is not installed (a test))" \
        in text
