"""Independent numpy references for the SSVM baselines' tests on small chains: random chain
examples and labels, the joint feature written out from its definition, every labelling, and the SSVM's
primal and exact optimum by enumeration (with example and class weights)."""
from __future__ import annotations

import itertools

import cvxpy as cp
import numpy as np


def chain_example(rng: np.random.Generator, n: int, d: int = 3, d_e: int | None = 2) -> tuple:
    """A chain of ``n`` nodes with normal node and edge features (``d_e=None``: one edge feature 1,
    drawing nothing)."""
    feats = rng.normal(size=(n, d))
    edges = np.column_stack([np.arange(n - 1), np.arange(1, n)])
    return feats, edges, np.ones((n - 1, 1)) if d_e is None else rng.normal(size=(n - 1, d_e))


def random_chains(rng: np.random.Generator, n_examples: int, n_states: int, lengths: tuple = (2, 5), d: int = 3,
                  d_e: int | None = 2) -> tuple:
    """``n_examples`` chains of :func:`chain_example` with ``lengths[0]`` to ``lengths[1] - 1`` nodes,
    then their labels, uniform over ``n_states``."""
    X = [chain_example(rng, int(rng.integers(*lengths)), d, d_e) for _ in range(n_examples)]
    Y = [rng.integers(0, n_states, size=x[0].shape[0]) for x in X]
    return X, Y


def joint_feature(x: tuple, y: np.ndarray, n_states: int) -> np.ndarray:
    """Joint feature written out directly from the definition (loops, no flat layout)."""
    feats, edges, efeats = x
    unary = np.zeros((n_states, feats.shape[1]))
    for i, a in enumerate(y):
        unary[a] += feats[i]
    pair = np.zeros((n_states * n_states, efeats.shape[1]))
    for e, (i, j) in enumerate(edges):
        pair[y[i] * n_states + y[j]] += efeats[e]
    return np.concatenate([unary.ravel(), pair.ravel()])


def labelings(n: int, n_states: int) -> np.ndarray:
    """Every labelling of ``n`` nodes, shape ``(n_states ** n, n)``."""
    return np.array(list(itertools.product(range(n_states), repeat=n)))


def weighted_hamming(y: np.ndarray, y_hat: np.ndarray, cw) -> float:
    """``sum_i cw[y_i] [y_hat_i != y_i]``."""
    return sum(cw[a] for a, b in zip(y, y_hat) if a != b)


def brute_primal(w: np.ndarray, X, Y, n_states: int, C: float = 1.0, s=None, cw=None) -> float:
    """``0.5 ||w||^2 + C sum_k s_k max_y [Delta(y_k, y) + w.psi(y)] - w.psi(y_k)`` by enumeration,
    ``Delta`` the (class-weighted) Hamming loss."""
    s = np.ones(len(X)) if s is None else s
    cw = np.ones(n_states) if cw is None else cw
    total = 0.5 * w @ w
    for x, y, s_k in zip(X, Y, s):
        best = max(weighted_hamming(y, yh, cw) + w @ joint_feature(x, yh, n_states)
                   for yh in labelings(len(y), n_states))
        total += C * s_k * max(0.0, best - w @ joint_feature(x, y, n_states))
    return total


def exact_ssvm_optimum(X, Y, n_states: int, C: float = 1.0, s=None, cw=None) -> float:
    """The n-slack SSVM QP with every labelling as a constraint, solved by cvxpy."""
    s = np.ones(len(X)) if s is None else s
    cw = np.ones(n_states) if cw is None else cw
    w = cp.Variable(len(joint_feature(X[0], Y[0], n_states)))
    xi = cp.Variable(len(X), nonneg=True)
    constraints = []
    for k, (x, y) in enumerate(zip(X, Y)):
        ys = labelings(len(y), n_states)
        dpsi = np.array([joint_feature(x, y, n_states) - joint_feature(x, yh, n_states) for yh in ys])
        losses = np.array([weighted_hamming(y, yh, cw) for yh in ys])
        constraints.append(xi[k] >= losses - dpsi @ w)
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + C * cp.sum(cp.multiply(s, xi))), constraints)
    problem.solve()
    return problem.value


def viterbi_primal(w: np.ndarray, X, Y, n_states: int, C: float = 1.0) -> float:
    """The primal of :func:`brute_primal` (unit weights) on chains too long to enumerate: each
    example's most violating labelling by a Viterbi recursion over its edges ``(i, i + 1)``,
    written out here on the weights' layout (``L * d`` unary, ``L * L * d_e`` pairwise weights)."""
    feats0, _, efeats0 = X[0]
    d, d_e = feats0.shape[1], efeats0.shape[1]
    unary_w = w[:n_states * d].reshape(n_states, d)
    pair_w = w[n_states * d:].reshape(n_states * n_states, d_e)
    total = 0.5 * w @ w
    for (feats, edges, efeats), y in zip(X, Y):
        assert np.array_equal(edges, np.column_stack([np.arange(len(y) - 1), np.arange(1, len(y))]))
        scores = feats @ unary_w.T + (np.arange(n_states)[None, :] != np.asarray(y)[:, None])
        best = scores[0]
        for e in range(len(y) - 1):
            pair = (pair_w @ efeats[e]).reshape(n_states, n_states)
            best = np.max(best[:, None] + pair, axis=0) + scores[e + 1]
        total += C * max(0.0, float(best.max()) - w @ joint_feature((feats, edges, efeats), y, n_states))
    return total
