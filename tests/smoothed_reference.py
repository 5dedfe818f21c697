"""An independent reference for the learner's objective with linear oracles: the smoothed LP of one
example minimised over its messages by BFGS, written out node by node and edge by edge (no kernels),
and the regularised objective minimised over the weights around it by L-BFGS."""
from __future__ import annotations

import numpy as np
from scipy.optimize import minimize


def smoothed_lp(theta_nodes, theta_edges, edges, eps):
    """``A(theta)`` of one example and its marginals: the dual ``eps sum_alpha lse(b_alpha / eps)``
    written out node by node and edge by edge (no kernels) and minimised over the messages by BFGS."""
    n, L = theta_nodes.shape
    m = len(edges)

    def lse(x):
        top = x.max()
        return top + np.log(np.exp(x - top).sum())

    def beliefs(v):
        lam = v.reshape(m, 2, L)
        node = theta_nodes.copy()
        for e, (i, j) in enumerate(edges):
            node[i] -= lam[e, 0]
            node[j] -= lam[e, 1]
        return node, theta_edges + lam[:, 0, :, None] + lam[:, 1, None, :]

    def dual(v):
        node, edge = beliefs(v)
        value = eps * (sum(lse(b / eps) for b in node) + sum(lse(b.ravel() / eps) for b in edge))
        mu_node = np.array([np.exp(b / eps - lse(b / eps)) for b in node])
        mu_edge = np.array([np.exp(b / eps - lse(b.ravel() / eps)) for b in edge])
        grad = np.zeros((m, 2, L))
        for e, (i, j) in enumerate(edges):
            grad[e, 0] = mu_edge[e].sum(axis=1) - mu_node[i]
            grad[e, 1] = mu_edge[e].sum(axis=0) - mu_node[j]
        return value, grad.ravel(), mu_node, mu_edge

    result = minimize(lambda v: dual(v)[:2], np.zeros(m * 2 * L), jac=True, method="BFGS",
                      options=dict(gtol=1e-12))
    value, _, mu_node, mu_edge = dual(result.x)
    return value, mu_node, mu_edge


def independent_minimum(X, Y, L, eps, l2):
    """``min_w sum_k [-F(x^k, y^k) + A(theta^k(w))] + eps l2 / 2 ||w||^2`` for linear unary and pairwise
    functions without intercept, ``A`` the smoothed LP solved afresh for every ``w`` (its gradient in
    ``theta`` is the marginals at the optimal messages)."""
    d_u, d_p = X[0][0].shape[1], X[0][2].shape[1]

    def objective(w):
        Wu, Wp = w[:L * d_u].reshape(L, d_u), w[L * d_u:].reshape(L * L, d_p)
        value, gu, gp = 0.0, np.zeros_like(Wu), np.zeros_like(Wp)
        for (node, edges, edge), y in zip(X, Y):
            delta = 1.0 - np.eye(L)[y]
            theta_nodes = eps * node @ Wu.T + delta
            theta_edges = eps * (edge @ Wp.T).reshape(-1, L, L)
            A, mu_node, mu_edge = smoothed_lp(theta_nodes, theta_edges, edges, eps)
            truth = theta_nodes[np.arange(len(y)), y].sum() + theta_edges[np.arange(len(edges)), y[edges[:, 0]],
                                                                          y[edges[:, 1]]].sum()
            value += A - truth
            gu += eps * (mu_node - np.eye(L)[y]).T @ node
            pair = np.eye(L * L)[y[edges[:, 0]] * L + y[edges[:, 1]]]
            gp += eps * (mu_edge.reshape(-1, L * L) - pair).T @ edge
        value += eps * l2 / 2 * float(w @ w)
        return value, np.concatenate([gu.ravel(), gp.ravel()]) + eps * l2 * w

    result = minimize(objective, np.zeros(L * d_u + L * L * d_p), jac=True, method="L-BFGS-B",
                      options=dict(gtol=1e-9, ftol=1e-15))
    return result.fun, result.x[:L * d_u].reshape(L, d_u), result.x[L * d_u:].reshape(L * L, d_p)
