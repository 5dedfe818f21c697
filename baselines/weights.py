"""Example weights (``sample_weight``) and label weights (``class_weight``) of the baselines.

``sample_weight[k]`` multiplies example ``k``'s term of a learner's objective (its slack or
loss); ``class_weight`` turns the Hamming loss into the weighted one

    Delta(y, y') = sum_i cw[y_i] [y'_i != y_i],

with ``cw`` a dict ``label -> weight`` (labels left out weigh 1) or ``"balanced"``:
``n_nodes / (n_classes * bincount(y))`` over all training nodes, ``n_classes`` the number of labels
that occur, as scikit-learn's ``compute_class_weight`` defines it (unaffected by ``sample_weight``).
"""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from slr._params import Options, Satisfies
from slr.oracles import check_sample_weight

__all__ = ["CLASS_WEIGHT", "check_example_weights", "class_weight_vector"]

#: The ``_parameter_constraints`` entry of ``class_weight``; the dict's keys and values are checked
#: against the training labels by :func:`class_weight_vector`.
CLASS_WEIGHT = (None, Options(("balanced",)), Satisfies(lambda value: isinstance(value, dict),
                                                        "a dict label -> weight"))


def check_example_weights(sample_weight: Any, n_examples: int) -> np.ndarray | None:
    """Validate per-example weights: None, or ``(n_examples,)`` finite, nonnegative, not all 0.

    Returns
    -------
    ndarray of shape (n_examples,), float64, or None

    Raises
    ------
    ValueError
        Naming ``sample_weight``.
    """
    if sample_weight is None:
        return None
    shape = np.shape(sample_weight)
    if shape != (n_examples,):
        raise ValueError(f"sample_weight must be a 1-D array of {n_examples} numbers (one per example), "
                         f"got shape {shape}")
    return check_sample_weight(sample_weight, n_examples)


def class_weight_vector(class_weight: Any, labels: np.ndarray, n_states: int) -> np.ndarray:
    """The weight of every label, shape ``(n_states,)`` (ones for ``class_weight=None``).

    Parameters
    ----------
    class_weight : None, "balanced" or dict
    labels : ndarray of shape (n_nodes,), int
        All training labels.
    n_states : int

    Raises
    ------
    ValueError
        Naming ``class_weight``: an unknown option, a key that is not a label in
        ``[0, n_states)``, or a weight that is not a finite number >= 0.
    """
    weights = np.ones(n_states)
    if class_weight is None:
        return weights
    if isinstance(class_weight, str):
        if class_weight != "balanced":
            raise ValueError(f"class_weight must be None, 'balanced' or a dict, got {class_weight!r}")
        counts = np.bincount(labels, minlength=n_states)
        present = counts > 0
        weights[present] = labels.shape[0] / (present.sum() * counts[present])
        return weights
    if not isinstance(class_weight, dict):
        raise ValueError(f"class_weight must be None, 'balanced' or a dict, got {type(class_weight).__name__}")
    for label, value in class_weight.items():
        if (not isinstance(label, numbers.Integral) or isinstance(label, bool)
                or not 0 <= label < n_states):
            raise ValueError(f"class_weight has the key {label!r}, which is not a label in [0, {n_states})")
        if (not isinstance(value, numbers.Real) or isinstance(value, bool) or not np.isfinite(value)
                or value < 0):
            raise ValueError(f"class_weight[{label!r}] must be a finite number >= 0, got {value!r}")
        weights[int(label)] = float(value)
    return weights
