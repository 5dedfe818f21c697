"""What a fit can prove about itself: Theorem 1.1's bounds on the training loss, and how far the
message passing got (docs/design.md section 1).

With ``theta`` the training potentials including the Hamming margin and ``F(y)`` the energy of
the truth, the chapter's losses on the training set (summed over examples) are

    l0 = sum_k max_y theta_k(y) - F_k(y_k)                   (exact loss-augmented MAP)
    l1 = sum_k max_{mu in local polytope} theta_k . mu - F_k   (its LP relaxation)
    l  = sum_k A_eps(theta_k) - F_k                           (the smoothed LP: what R bounds)

and Theorem 1.1 says ``l0 <= l1 <= l <= l1 + eps * Hmax``. A fit knows ``R >= l`` (the dual at
its messages), and one run of the ``eps = 0`` sweeps from its messages gives ``l1`` up to a gap:
a dual bound ``l1 <= lp_loss_upper`` and, from the labelling those sweeps decode, a primal value
``lp_loss_lower <= l0 <= l1`` (equal, and exact by Viterbi, when every example is a chain).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slr.data import FlatData
from slr.inference.batch import batch_dual_values, batch_node_beliefs, batch_sweeps
from slr.inference.exact import hmax
from slr.inference.viterbi import batch_viterbi

__all__ = ["FitCertificate", "certify"]

#: Relative slack of the bound checks (the values are sums of many rounded terms).
_SLACK = 1e-9


@dataclass(frozen=True)
class FitCertificate:
    """Bounds and convergence facts of a finished fit on its training set.

    Attributes
    ----------
    objective : float
        ``R`` after the last iteration: an upper bound on the smoothed loss ``l``.
    lp_loss_lower, lp_loss_upper : float
        ``lp_loss_lower <= l0 <= l1 <= lp_loss_upper``: the loss of a decoded labelling, and the
        ``eps = 0`` sweeps' dual bound (equal on chains, where Viterbi is exact).
    entropy_bound : float
        ``eps * Hmax``, summed over the examples: Theorem 1.1's ``l <= l1 + eps * Hmax``.
    bounds_hold : bool
        ``lp_loss_lower <= objective <= lp_loss_upper + entropy_bound`` (to rounding). The left
        inequality always holds; the right one fails only while the messages are far from the
        smoothed optimum (then ``objective`` exceeds ``l`` by more than the theorem allows ``l``).
    last_sweeps : int
        The most sweeps any example ran in the fit's last half step.
    sweeps_converged : bool
        Whether every example's sweeps met ``tol`` in the last half step (sweeps the learner
        stopped for too little progress, its ``sweep_tol``, have not).
    message_residual : float
        The largest message change of one more sweep from the final messages.
    lp_converged : bool
        Whether the ``eps = 0`` sweeps behind ``lp_loss_upper`` met their ``tol`` (always on chains).
    n_iter : int or None
        Learning iterations run (all of them, also those after an early-stopped fit's best).
    stop_reason : str or None
        Why the learning stopped: ``"tol"`` (the stopping rule), ``"max_iter"`` (the cap),
        ``"early_stopping"`` (the validation error above its lowest for ``n_iter_no_change``
        iterations, or no lower for four times as many: the certificate is then that of the best
        iteration's model, the one kept) or ``"converged"``
        (the joint solver met its gradient test or could make no more progress). After the joint
        solver ``last_sweeps`` and ``sweeps_converged`` describe the sweeps that settled the
        messages of the model kept.
    """

    objective: float
    lp_loss_lower: float
    lp_loss_upper: float
    entropy_bound: float
    bounds_hold: bool
    last_sweeps: int
    sweeps_converged: bool
    message_residual: float
    lp_converged: bool
    n_iter: int | None = None
    stop_reason: str | None = None


def certify(train: FlatData, theta_nodes: np.ndarray, theta_edges: np.ndarray, messages: np.ndarray,
            epsilon: float, objective: float, last_sweeps: np.ndarray, last_converged: np.ndarray, *,
            max_sweeps: int, tol: float, n_jobs: int, stop_reason: str | None = None,
            n_iter: int | None = None) -> FitCertificate:
    """The certificate of a fit from its final state (potentials with the margin, messages), and
    why (``stop_reason``) and after how many iterations (``n_iter``) it stopped."""
    batch, labels, L = train.batch, train.labels, train.n_states
    assert labels is not None and L is not None   # training data: labelled, its n_states known
    truth = float(train.labelling_scores(labels, theta_nodes, theta_edges).sum())
    probe = messages.copy()
    batch_sweeps(batch, theta_nodes, theta_edges, epsilon, max_sweeps=1, tol=0.0, n_jobs=n_jobs, out=probe,
                 check_input=False)
    residual = float(np.abs(probe - messages).max()) if messages.size else 0.0
    if train.all_chains:   # Viterbi: the decoded labelling's score is the LP's optimum
        decoded = batch_viterbi(batch, theta_nodes, theta_edges)
        dual, lp_converged = None, True
    else:
        lp = messages.copy()
        run = batch_sweeps(batch, theta_nodes, theta_edges, 0.0, max_sweeps=max_sweeps, tol=tol, n_jobs=n_jobs,
                           out=lp, check_input=False)
        dual = float(batch_dual_values(batch, theta_nodes, theta_edges, lp, 0.0, n_jobs=n_jobs,
                                       check_input=False).sum())
        decoded = np.argmax(batch_node_beliefs(batch, theta_nodes, lp), axis=1)
        lp_converged = bool(run.converged.all())
    primal = float(train.labelling_scores(decoded, theta_nodes, theta_edges).sum())
    lower, upper = primal - truth, (primal if dual is None else dual) - truth
    entropy = epsilon * hmax(batch.n_nodes, batch.n_edges, L)
    slack = _SLACK * max(1.0, abs(objective), abs(upper))
    return FitCertificate(
        objective=float(objective), lp_loss_lower=lower, lp_loss_upper=upper, entropy_bound=float(entropy),
        bounds_hold=bool(lower <= objective + slack and objective <= upper + entropy + slack),
        last_sweeps=int(last_sweeps.max()) if last_sweeps.size else 0,
        sweeps_converged=bool(last_converged.all()), message_residual=residual, lp_converged=lp_converged,
        n_iter=n_iter, stop_reason=stop_reason)
