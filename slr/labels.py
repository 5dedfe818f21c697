"""Labels of any hashable type at the learners' boundary: the caller's labels in, ints 0..L-1 inside.

A learner's ``fit`` reads its labels once with :func:`fit_labels`, which gives the kernels'
labellings and the learner's ``classes_``; ``predict`` gives back ``classes_[codes]``
(:func:`decode_labels`) and ``score`` and validation labels go in through :func:`encode_labels`.

Two kinds of labels:

- **Integer labels** (every labelling of an integer or whole-float dtype, or a masked array of
  one): the labels are the codes, as they always were. ``classes_`` is ``arange(n_states_)``,
  ``-1`` or a masked entry marks an unlabelled node, and the shared checkers
  (:func:`slr.graph.check_labels`) validate them.
- **Any other hashable labels** (strings, booleans, objects that sort): ``classes_`` is the
  sorted set of the labels of ``Y`` (a string or boolean array where they are all strings or
  all booleans, else an object array), and label ``classes_[a]`` is code ``a``. ``None``, or a
  masked entry of a masked array, marks an unlabelled node; it becomes a masked entry of the
  codes, so learners that refuse partial labels say so. ``n_states``, if given, must be the
  number of classes: a class that never appears in ``Y`` has no name.

>>> import numpy as np
>>> codes, classes = fit_labels([np.array(["O", "B-PER"]), np.array(["I-PER"])], None)
>>> classes, [c.tolist() for c in codes]
(array(['B-PER', 'I-PER', 'O'], dtype='<U5'), [[2, 0], [1]])
>>> decode_labels(np.array([0, 2]), classes)
array(['B-PER', 'O'], dtype='<U5')
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["check_class_count", "decode_labels", "encode_class_weight", "encode_labels", "fit_labels",
           "integer_classes", "is_integer_classes", "split_tag"]


def _values(y: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """One labelling's values and its mask (None for a plain array)."""
    if np.ma.isMaskedArray(y):
        return np.asarray(np.ma.getdata(y)), np.ma.getmaskarray(y)
    return np.asarray(y), None


def _integer_kind(Y: Sequence) -> bool:
    """Whether ``Y`` holds integer labels: no non-empty labelling of another dtype than integer or
    float (an empty list is a float array to NumPy, and says nothing)."""
    return all(values.dtype.kind in "iuf" for values in (_values(y)[0] for y in Y) if values.size)


def integer_classes(n_states: int) -> np.ndarray:
    """``classes_`` of a fit on integer labels: ``arange(n_states)``."""
    return np.arange(n_states, dtype=np.int64)


def is_integer_classes(classes: np.ndarray) -> bool:
    """Whether ``classes`` are integer labels that are their own codes (:func:`integer_classes`)."""
    return classes.dtype.kind in "iu"


def _sorted_classes(labels: set, name: str) -> np.ndarray:
    """The labels sorted, as an array of their common string or boolean dtype, else of objects."""
    try:
        ordered = sorted(labels)
    except TypeError as exc:
        kinds = sorted({type(label).__name__ for label in labels})
        raise ValueError(f"{name} must hold labels that sort together (one kind, e.g. all strings), "
                         f"got labels of types {', '.join(kinds)}: {exc}") from None
    if all(isinstance(label, str) for label in ordered) or all(isinstance(label, (bool, np.bool_))
                                                                for label in ordered):
        return np.array(ordered)
    classes = np.empty(len(ordered), dtype=object)
    classes[:] = ordered   # element by element: tuples must not become a 2-D array
    return classes


def _encode_one(y: Any, index: dict, name: str) -> np.ndarray:
    """One labelling as codes (an int64 array, masked at the unlabelled nodes when it has any)."""
    values, mask = _values(y)
    flat = values.ravel().tolist()   # Python scalars: numpy and Python strings hash alike
    hidden = np.zeros(len(flat), dtype=bool) if mask is None else mask.ravel().copy()
    codes: np.ndarray = np.zeros(len(flat), dtype=np.int64)
    for i, label in enumerate(flat):
        if hidden[i]:
            continue
        if label is None:
            hidden[i] = True
            continue
        try:
            codes[i] = index[label]
        except KeyError:
            raise ValueError(f"{name} holds the label {label!r} at node {i}, which is not one of the classes_ "
                             f"{_listing(index)} the model knows") from None
        except TypeError:
            raise ValueError(f"{name} holds the unhashable label {label!r} at node {i}") from None
    codes = codes.reshape(values.shape)
    return np.ma.MaskedArray(codes, mask=hidden.reshape(values.shape)) if hidden.any() else codes


def _listing(index: dict, limit: int = 10) -> str:
    labels = list(index)
    return "[" + ", ".join(map(repr, labels[:limit])) + (", ...]" if len(labels) > limit else "]")


def fit_labels(Y: Sequence, n_states: int | None, name: str = "Y") -> tuple[list, np.ndarray | None]:
    """The labellings of a fit as the kernels take them, and the classes they code.

    Parameters
    ----------
    Y : sequence of array-likes
        One labelling per example.
    n_states : int or None
        The learner's ``n_states``.
    name : str
        The argument's name in messages.

    Returns
    -------
    codes : list
        ``Y`` itself for integer labels; else per example an int64 array of codes (a masked one
        where it has unlabelled nodes).
    classes : ndarray or None
        None for integer labels (``classes_`` is then :func:`integer_classes` of the fitted
        ``n_states_``); else the sorted labels.

    Raises
    ------
    ValueError
        For labels that do not sort together or are unhashable, non-integer labels with no
        labelled node, or ``n_states`` other than the number of classes.
    """
    Y = list(Y)
    if _integer_kind(Y):
        return Y, None
    labels: set = set()
    for k, y in enumerate(Y):
        values, mask = _values(y)
        flat = values.ravel()
        if mask is not None:
            flat = flat[~mask.ravel()]
        try:
            labels.update(label for label in flat.tolist() if label is not None)
        except TypeError:
            raise ValueError(f"{name}[{k}] holds unhashable labels (labels must be hashable: str, int, ...)") from None
    if not labels:
        raise ValueError(f"{name} has no labelled node (every label is None or masked): no class to learn")
    classes = _sorted_classes(labels, name)
    check_class_count(classes, n_states, name)
    return _encode(Y, classes, name), classes


def check_class_count(classes: np.ndarray | None, n_states: int | None, name: str = "Y") -> None:
    """Refuse an ``n_states`` other than the number of ``classes`` (from :func:`fit_labels`; None
    for integer labels, which any ``n_states`` the checkers accept fits).

    Raises
    ------
    ValueError
        Naming ``n_states``.
    """
    if classes is not None and n_states is not None and n_states != len(classes):
        raise ValueError(f"n_states={n_states}, but {name} holds {len(classes)} distinct labels; with labels that "
                         f"are not integers n_states is the number of classes, and every class must occur in {name}")


def _encode(Y: Sequence, classes: np.ndarray, name: str) -> list:
    index = {label: code for code, label in enumerate(classes.tolist())}
    return [_encode_one(y, index, f"{name}[{k}]") for k, y in enumerate(Y)]


def encode_labels(Y: Sequence, classes: np.ndarray | None, name: str = "Y") -> Sequence:
    """Labellings of a fitted model's labels (``score``, validation data, a continued fit) as codes.

    Integer classes (or None, as :func:`fit_labels` gives them) leave ``Y`` as it is, for the
    shared checkers; otherwise every label must be one of ``classes`` (``None`` or a masked
    entry: unlabelled).

    Raises
    ------
    ValueError
        Naming ``name`` and the label, for a label that is not one of ``classes``.
    """
    if classes is None or is_integer_classes(classes):
        return Y
    return _encode(list(Y), classes, name)


def encode_class_weight(class_weight: Any, classes: np.ndarray | None) -> Any:
    """A ``class_weight`` dict keyed by labels, keyed by their codes (other values as they are).

    Raises
    ------
    ValueError
        Naming ``class_weight``, for a key that is not one of ``classes``.
    """
    if not isinstance(class_weight, dict) or classes is None or is_integer_classes(classes):
        return class_weight
    index = {label: code for code, label in enumerate(classes.tolist())}
    coded = {}
    for label, weight in class_weight.items():
        try:
            coded[index[label]] = weight
        except (KeyError, TypeError):
            raise ValueError(f"class_weight has the key {label!r}, which is not one of the classes "
                             f"{_listing(index)}") from None
    return coded


def decode_labels(codes: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """The labels of ``codes`` (ints in ``[0, len(classes))``): ``classes[codes]``, int64 codes
    as they are for integer classes."""
    codes = np.asarray(codes, dtype=np.int64)
    return codes if is_integer_classes(classes) else classes[codes]


def split_tag(tag: Any) -> tuple[str, str]:
    """A tag of the IOB and BIOES notations as ``(prefix, entity type)``: ``"B-PER"`` is
    ``("B", "PER")``, ``"O"`` is ``("O", "")``. The callers check the prefixes their scheme knows."""
    prefix, _, kind = str(tag).partition("-")
    return prefix, kind
