"""Per-token feature dicts for tagging text, in the style of sklearn-crfsuite's tutorial.

Each token gets its lower-cased word, its last three and two characters, whether it is upper
case, title case or digits, and (when the corpus gives parts of speech as input) its part of
speech and that tag's first two characters; its neighbours up to ``window`` positions away get
the word, case and part-of-speech features under their offset's prefix (``-1:``, ``+2:``, ...),
and a sentence's first and last tokens the flags ``BOS`` and ``EOS``. The dicts go to
:class:`slr.formats.SequenceVectorizer` (or to CRFsuite as they are).
"""
from __future__ import annotations

from collections.abc import Sequence

from slr.validation import check_int

__all__ = ["sentence_features", "token_features"]


def _word(word: str, prefix: str) -> dict[str, object]:
    return {f"{prefix}word.lower()": word.lower(), f"{prefix}word.istitle()": word.istitle(),
            f"{prefix}word.isupper()": word.isupper()}


def _tag(tag: str, prefix: str) -> dict[str, str]:
    return {f"{prefix}postag": tag, f"{prefix}postag[:2]": tag[:2]}


def token_features(tokens: Sequence[str], i: int, pos: Sequence[str] | None = None, window: int = 1) -> dict:
    """The feature dict of token ``i`` of a sentence.

    Parameters
    ----------
    tokens : sequence of str
        The sentence.
    i : int
        The token's position.
    pos : sequence of str, optional
        The sentence's parts of speech (an input, not the tags to predict).
    window : int, default=1
        Neighbours on each side that contribute features.

    Returns
    -------
    dict
        ``{name: value}``; strings are categorical, booleans and floats numeric.
    """
    word = tokens[i]
    features: dict[str, object] = {"bias": 1.0, **_word(word, ""), "word[-3:]": word[-3:], "word[-2:]": word[-2:],
                                   "word.isdigit()": word.isdigit()}
    if pos is not None:
        features.update(_tag(pos[i], ""))
    for offset in range(1, window + 1):
        for j, prefix in ((i - offset, f"-{offset}:"), (i + offset, f"+{offset}:")):
            if 0 <= j < len(tokens):
                features.update(_word(tokens[j], prefix))
                if pos is not None:
                    features.update(_tag(pos[j], prefix))
    if i == 0:
        features["BOS"] = True
    if i == len(tokens) - 1:
        features["EOS"] = True
    return features


def sentence_features(tokens: Sequence[str], pos: Sequence[str] | None = None, window: int = 1) -> list[dict]:
    """:func:`token_features` of every token of a sentence.

    Raises
    ------
    ValueError
        When ``pos`` is not one tag per token, or ``window`` is negative.
    """
    window = check_int(window, "window", 0)
    if pos is not None and len(pos) != len(tokens):
        raise ValueError(f"pos must have one tag per token ({len(tokens)}), got {len(pos)}")
    return [token_features(tokens, i, pos, window) for i in range(len(tokens))]
