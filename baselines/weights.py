"""Example weights (``sample_weight``) and label weights (``class_weight``) of the baselines.

``sample_weight[k]`` multiplies example ``k``'s term of a learner's objective (its slack or
loss); ``class_weight`` turns the Hamming loss into the weighted one

    Delta(y, y') = sum_i cw[y_i] [y'_i != y_i],

with ``cw`` a dict ``label -> weight`` (labels left out weigh 1) or ``"balanced"``:
``n_nodes / (n_classes * bincount(y))`` over all training nodes, ``n_classes`` the number of labels
that occur, as scikit-learn's ``compute_class_weight`` defines it (unaffected by ``sample_weight``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from slr.models import CLASS_WEIGHT, check_example_weights, class_weights

__all__ = ["CLASS_WEIGHT", "check_example_weights", "class_weight_vector"]


def class_weight_vector(class_weight: Any, labels: np.ndarray, n_states: int) -> np.ndarray:
    """The weight of every label, shape ``(n_states,)``: :func:`slr.models.class_weights`, with
    ones for ``class_weight=None``.

    Raises
    ------
    ValueError
        Naming ``class_weight``: a key that is not a label in ``[0, n_states)``, or a weight that
        is not a finite number >= 0.
    """
    weights = class_weights(class_weight, labels, n_states)
    return np.ones(n_states) if weights is None else weights
