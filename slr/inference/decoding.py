"""MAP labellings of loopy graphs from the LP's star updates, with a bound on how far from the MAP.

Max-product star updates (the plain LP, ``epsilon = 0``) run in chunks of doubling length. After
each chunk every example's labelling is read off its node beliefs (each node's best state) and
scored, ``F(y) = sum_i theta_i(y_i) + sum_e theta_e(y_i, y_j)``, and the dual value ``A(lambda)``
(:func:`slr.inference.batch_dual_values`), an upper bound on the LP and so on every labelling's
score, is computed. The best labelling seen is kept. An example is

* *certified* when ``A - F(y)`` is within rounding of 0: ``y`` is a MAP labelling;
* *settled* when it is certified, or when the sweeps are at a fixed point of the LP's dual, where
  more sweeps change nothing (the LP relaxation is not tight there and its labelling is the
  answer it gives): its messages stopped moving (the sweeps' own test, ``tol``: labels read off
  beliefs that no longer move can still flip between tied states, which no sweep decides), or
  its labels did not change over the last chunk while the bound stopped falling;

and the sweeps go on, in chunks of doubling length, until every example has settled or the budget
is spent. Labels that a single extra sweep leaves alone may still be drifting (strongly coupled
grids move them once in hundreds of sweeps); the bound does not fall for nothing, so the test
asks for both. An example that has settled sweeps no more (its labels, score, bound and messages
stay as they are): the chunks run on the examples still unsettled alone, as a batch of their own
(:meth:`slr.data.GraphBatch.take`) on which a sweep does to each example what it does in the whole
batch, so that a batch costs the sweeps its examples need, not its slowest example's sweeps times
its size.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slr.data import GraphBatch
from slr.graph import shared_table
from slr.inference.batch import _dual_values, _node_beliefs, _run_sweeps

__all__ = ["BatchMap", "batch_map", "labelling_scores"]

#: Sweeps of the first chunk; each further chunk is twice as long as the one before.
FIRST_CHUNK = 8

#: A gap ``A - F(y)`` at most this times ``1 + |A|`` counts as closed (float64 rounding of the sums).
GAP_RTOL = 1e-9


@dataclass(frozen=True)
class BatchMap:
    """Outcome of :func:`batch_map`.

    Attributes
    ----------
    labels : ndarray of shape (n_nodes,), int64
        The best labelling found of every example.
    score : ndarray of shape (B,)
        ``F(labels)`` of every example.
    bound : ndarray of shape (B,)
        The smallest dual value ``A(lambda)`` seen: no labelling scores more.
    certified : ndarray of shape (B,), bool
        ``bound - score`` is within rounding of 0: the labels are a MAP labelling.
    settled : ndarray of shape (B,), bool
        Certified, or at a fixed point of the sweeps with stable labels (see the module docstring).
    n_sweeps : ndarray of shape (B,), int
        Sweeps run on each example.
    """

    labels: np.ndarray
    score: np.ndarray
    bound: np.ndarray
    certified: np.ndarray
    settled: np.ndarray
    n_sweeps: np.ndarray

    @property
    def gap(self) -> np.ndarray:
        """``bound - score`` of every example, shape ``(B,)``: how far its labels may be from the MAP's score."""
        return self.bound - self.score


def labelling_scores(batch: GraphBatch, labels: np.ndarray, theta_nodes: np.ndarray,
                     theta_edges: np.ndarray) -> np.ndarray:
    """``F(y)`` of every example of a flat labelling, shape ``(B,)`` (inputs unchecked)."""
    edges = batch.edges
    node_part = theta_nodes[np.arange(labels.shape[0]), labels]
    edge_part = theta_edges[np.arange(edges.shape[0]), labels[edges[:, 0]], labels[edges[:, 1]]]
    per_example = np.add.reduceat(node_part, batch.node_ptr[:-1]) if node_part.size else np.zeros(batch.n_examples)
    if edge_part.size:
        per_example = per_example + np.bincount(batch.edge_example, weights=edge_part, minlength=batch.n_examples)
    return per_example


def batch_map(batch: GraphBatch, theta_nodes: np.ndarray, theta_edges: np.ndarray, messages: np.ndarray, *,
              max_sweeps: int, tol: float, threads: int) -> BatchMap:
    """MAP labellings of every example by max-product star updates, in chunks until settled.

    The inputs are trusted (the caller validated them): C-contiguous float64 potentials of shapes
    ``(n_nodes, L)`` and ``(n_edges, L, L)``.

    Parameters
    ----------
    batch : GraphBatch
    theta_nodes, theta_edges : ndarray
    messages : ndarray of shape (n_edges, 2, L)
        The warm start, updated in place (writeable, C-contiguous float64).
    max_sweeps : int
        The budget: at most this many sweeps per example.
    tol : float
        The sweeps' own stopping tolerance on message changes (see :func:`slr.inference.batch_sweeps`).
    threads : int
        OpenMP threads.

    Returns
    -------
    BatchMap
    """
    labels = np.argmax(_node_beliefs(batch, theta_nodes, messages), axis=1)
    score = labelling_scores(batch, labels, theta_nodes, theta_edges)
    bound = _dual_values(batch, theta_nodes, theta_edges, messages, 0.0, threads)
    rounded = labels.copy()   # the labels read off the beliefs after the last chunk
    n_sweeps = np.zeros(batch.n_examples, dtype=np.int64)
    certified = _closed(bound, score)
    settled = certified.copy()
    chunk, part = FIRST_CHUNK, None
    while not settled.all():
        active = np.flatnonzero(~settled)
        budget = max_sweeps - int(n_sweeps[active].max())
        if budget <= 0:
            break
        if part is None or not np.array_equal(part.examples, active):
            part = _Unsettled(batch, active, theta_nodes, theta_edges)
        lam = part.messages(messages)
        run = _run_sweeps(part.batch, part.theta_nodes, part.theta_edges, lam, 0.0, min(chunk, budget), tol, threads)
        part.write_back(messages, lam)
        n_sweeps[active] += run.n_sweeps
        chunk *= 2
        new_rounded = np.argmax(_node_beliefs(part.batch, part.theta_nodes, lam), axis=1)
        new_score = labelling_scores(part.batch, new_rounded, part.theta_nodes, part.theta_edges)
        new_bound = np.minimum(bound[active], _dual_values(part.batch, part.theta_nodes, part.theta_edges, lam, 0.0,
                                                           threads))
        node_example = part.batch.node_example
        stable = np.bincount(node_example, weights=new_rounded != rounded[part.nodes], minlength=active.shape[0]) == 0
        stalled = run.converged | (stable & _closed(bound[active], new_bound))
        better = new_score > score[active]
        improved = better[node_example]
        labels[part.nodes[improved]] = new_rounded[improved]
        score[active] = np.where(better, new_score, score[active])
        bound[active], rounded[part.nodes] = new_bound, new_rounded
        certified[active] = _closed(new_bound, score[active])
        settled[active] = certified[active] | stalled
    return BatchMap(labels=labels, score=score, bound=bound, certified=certified, settled=settled, n_sweeps=n_sweeps)


class _Unsettled:
    """The examples of ``batch`` still sweeping (increasing indices): the batch itself while they
    are all of it, else a batch of their own with their potentials."""

    def __init__(self, batch: GraphBatch, examples: np.ndarray, theta_nodes: np.ndarray,
                 theta_edges: np.ndarray) -> None:
        self.examples = examples
        self.whole = examples.shape[0] == batch.n_examples
        if self.whole:
            self.batch, self.theta_nodes, self.theta_edges = batch, theta_nodes, theta_edges
            self.nodes = np.arange(batch.n_nodes)
            return
        self.batch, self.nodes, self.edges = batch.take(examples)
        self.theta_nodes = theta_nodes[self.nodes]
        table = shared_table(theta_edges)
        self.theta_edges = (theta_edges[self.edges] if table is None
                            else np.broadcast_to(table, (self.edges.shape[0], *table.shape)))

    def messages(self, messages: np.ndarray) -> np.ndarray:
        """Their messages: ``messages`` itself, or a copy of their rows."""
        return messages if self.whole else messages[self.edges]

    def write_back(self, messages: np.ndarray, lam: np.ndarray) -> None:
        """Their messages ``lam`` after sweeps, into ``messages``."""
        if not self.whole:
            messages[self.edges] = lam


def _closed(upper: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """Whether ``upper - lower`` is within rounding of 0 (or below it)."""
    return upper - lower <= GAP_RTOL * (1.0 + np.abs(upper))
