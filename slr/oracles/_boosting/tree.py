"""The records a tree travels in between the kernels and :class:`~slr.oracles.BoostedTrees`.

:class:`GrownTree` is what the growth (:mod:`.growth`) returns: the splits, and each
leaf's rows and mean target, which the leaf re-fit (:mod:`.logistic`) starts from.
:class:`Tree` is a fitted tree: the splits and a value at every node, as the prediction
(:mod:`.predictor`) walks it. Node ids are local to the tree (the root is node 0) and the
arrays are those the kernels take: ``intp`` ids and features, ``float64`` thresholds and
values.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["GrownTree", "Tree"]


@dataclass(eq=False)
class Tree:
    """A fitted regression tree.

    Attributes
    ----------
    feature : ndarray of shape (n_nodes,), intp
        Split feature of each node, -1 at leaves.
    threshold : ndarray of shape (n_nodes,), float64
        Rows with ``x[feature] <= threshold`` go to the left child.
    left, right : ndarray of shape (n_nodes,), intp
        Children of each node, -1 at leaves.
    value : ndarray of shape (n_nodes, K) or (n_nodes, 1), float64
        What a row reaching the node adds to its scores (zero at internal nodes).
    column : int
        -1: a vector tree, adding ``value[node]`` to all K scores; ``c >= 0``: a scalar
        tree, adding ``value[node, 0]`` to the score of class ``c`` only.
    """

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    column: int = -1

    @property
    def n_nodes(self) -> int:
        return int(self.feature.shape[0])

    @property
    def n_leaves(self) -> int:
        return int(np.sum(self.feature < 0))


@dataclass(eq=False)
class GrownTree:
    """A tree grown on the squared loss, before its leaves are re-fitted.

    Attributes
    ----------
    feature, threshold, left, right : ndarray of shape (n_nodes,)
        The splits, as in :class:`Tree`.
    leaf_of_node : ndarray of shape (n_nodes,), intp
        The leaf number of each node, -1 at internal nodes; leaves are numbered in node
        order.
    rows : ndarray of shape (n,), intp
        The subset's rows, reordered so that every leaf's rows are contiguous.
    leaf_start, leaf_end : ndarray of shape (n_leaves,), intp
        Leaf ``l`` owns ``rows[leaf_start[l]:leaf_end[l]]``.
    leaf_value : ndarray of shape (n_leaves, K), float64
        The mean target of each leaf's rows (the squared-loss fit); the leaf re-fit
        overwrites it.
    """

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    leaf_of_node: np.ndarray
    rows: np.ndarray
    leaf_start: np.ndarray
    leaf_end: np.ndarray
    leaf_value: np.ndarray

    def fitted(self, leaf_value: np.ndarray, column: int = -1) -> Tree:
        """The tree with ``leaf_value[l]`` at leaf ``l`` (shape (n_leaves, K) or
        (n_leaves, 1)) and zero at internal nodes."""
        value = np.zeros((self.feature.shape[0], leaf_value.shape[1]))
        is_leaf = self.leaf_of_node >= 0
        value[is_leaf] = leaf_value[self.leaf_of_node[is_leaf]]
        return Tree(self.feature, self.threshold, self.left, self.right, value, column)
