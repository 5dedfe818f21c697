"""Algorithm 1.1 of Domke's chapter as a scikit-learn style estimator.

Structured learning by iterated logistic regression (docs/design.md section 1; the reduction to
logistic regressions: :mod:`slr.reduction`). The learner is a few modules with one job each
(docs/developer/modules.md):

- this module, the estimator: parameters, checks, the fit as Algorithm 1.1 and the transaction
  that commits it (:meth:`slr.estimator.StructuredEstimator._commit_fit`: a fit that fails changes
  nothing), prediction;
- :mod:`slr._setup`: the oracles and data a fit starts from;
- :mod:`slr._fit_data`: what the loop asks of the training data, and its local form
  (:mod:`slr.distributed._sharded_data`: on Dask workers);
- :mod:`slr._alternation`: the state of one fit and its half steps (over-relaxed:
  :mod:`slr._relaxation`);
- :mod:`slr._solvers`: the alternation and the joint solver (:mod:`slr._joint`);
- :mod:`slr._progress`: what happens after each iteration (``history_``, the callback's
  :class:`Iterate`, early stopping, the stopping rule);
- :mod:`slr._prediction`: the energy a fit predicts with, and MAP labels under it.

The same loop (:meth:`StructuredLogisticRegression._run`) fits data in memory and, in
:class:`slr.distributed.DaskStructuredLogisticRegression`, data sharded over a Dask cluster.
"""
from __future__ import annotations

import copy
import math
import sys
import warnings
from contextlib import AbstractContextManager
from typing import Any, Callable, ClassVar, Sequence

import numpy as np
import pandas as pd
from sklearn.exceptions import ConvergenceWarning

from slr._alternation import Alternation
from slr._fit_data import FitData, LocalData
from slr._params import Boolean, Checked, Integer, NJobs, Options, RandomState, Real, Spec, validate_params
from slr._prediction import map_labels, potentials, prediction_model
from slr._progress import (BestIteration, Iterate, Progress, TrainingRows, early_stopping, iteration_objectives)
from slr._setup import (FACTORS, FitStart, allowed_states, check_held_out_labelled, check_resolvable_class_weights,
                        check_same_model, checked_data, checked_transitions, clone_oracle, edge_width, layout_digest,
                        oracle_spec, resolve_epsilon, untimed)
from slr._solvers import SOLVERS, choose_solver, run_alternation, run_joint
from slr.data import FlatData
from slr.estimator import FitHistory, StructuredEstimator, validation_data
from slr.graph import check_epsilon
from slr.hidden import flat_data
from slr.inference.batch import resolve_threads
from slr.labels import encode_class_weight, encode_labels, fit_labels, integer_classes, is_integer_classes
from slr.latent import LATENT_INIT, clamp_mask, initial_node_targets
from slr.models import CLASS_WEIGHT, MARGINALS, PairwiseModel, check_example_weights, class_weights
from slr.oracles.base import LogisticOracle
from slr.reduction import node_message_sums, pairwise_bias, structured_objective, unary_bias
from slr.transitions import TRANSITIONS
from slr.validation import check_bool, check_generator, check_int, check_option, check_real

__all__ = [
    "Iterate",
    "StructuredLogisticRegression",
    "node_message_sums",
    "pairwise_bias",
    "structured_objective",
    "unary_bias",
]


class StructuredLogisticRegression(StructuredEstimator):
    """Structured prediction on pairwise graphs by iterated logistic regression.

    Domke's Algorithm 1.1 with Hamming loss on the nodes: the energy is
    ``F(x, y) = eps * (sum_i g_u(x_i)[y_i] + sum_(i,j) g_p(x_ij)[y_i L + y_j])``, with one
    unary function for all nodes and one pairwise function for all edges, each chosen
    from the function class of its oracle. Training alternates exact (or approximate,
    for SGD / boosting) oracle fits with star-update message passing on the entropy-
    smoothed LP relaxation; prediction is MAP by max-product star updates on the plain LP
    relaxation of ``F`` (``predict_epsilon = 0``), then each node's best state. When every
    example is a chain the LP is tight, and prediction runs Viterbi instead: the exact MAP,
    in one forward and one backward pass.

    Parameters
    ----------
    unary : LogisticOracle, optional
        Function class of ``g_u`` (input: node features; ``L`` classes). ``Linear()``
        when None. It is deep-copied at ``fit``; the fitted copy is ``unary_``.
    pairwise : LogisticOracle, optional
        Function class of ``g_p`` (input: edge features; ``L^2`` classes). ``Linear()``
        when None; fitted copy in ``pairwise_``.
    epsilon : float or "auto", default="auto"
        Entropy weight of the smoothed inference (> 0). R exceeds the LP's structured hinge loss by
        at most ``epsilon`` times the entropy bound, about ``(1 + deg) log L`` per node of ``deg``
        edges (Theorem 1.1). ``"auto"`` is 0.01 where both oracles are linear in their parameters
        (``Linear``, ``Constant``, ``Zero``): the excess is then about a tenth of the Hamming margin
        a wrong node costs on chains of 26 states and grids of 11, where 0.1 (the default before)
        let it reach the whole margin and cost accuracy. With other oracles it is 0.1: their fits
        see biases of ``1 / epsilon`` on wrong labels, which at 0.01 stall trees and slow an MLP
        (the research notes, "The figures behind the defaults"). A ``Linear`` oracle's ridge acts
        as an SSVM's ``C = epsilon / l2``: to keep a ridge chosen at another ``epsilon``, scale
        ``l2`` with it.
    max_iter : int, default=200
        Most learning iterations (a cap: ``tol`` and early stopping usually stop first). With
        ``warm_start`` it counts the iterations of the earlier fits too. An iteration of Algorithm
        1.1 fits both functions and sweeps after each fit; with the joint solver (``solver``) the
        first iteration of a fresh fit is the unary fit of Algorithm 1.1's first iteration alone
        (from zero messages: the model of the nodes alone, the pairwise function still zero) and
        every later one is one L-BFGS iteration over both functions' parameters (a few star sweeps
        and one gradient per evaluation: much cheaper than an iteration of Algorithm 1.1).
    tol : float, default=1e-4
        The stopping rule: learning stops after iteration ``t`` once
        ``J_{t-3} - J_t < 3 * tol * max(J_{t-3}, J_t, 1)``, i.e. the objective fell by less than a
        fraction ``tol`` per iteration over the last three. ``J = R + eps * sum_f l2_f / 2 ||W_f||^2``
        is what the exact fits descend: R plus the ridge terms of oracles that have one (the tags'
        ``penalty``), R itself without. R is a sum of per-node losses and never negative (Theorem
        1.1), so where it nears 0 the floor of 1 (one node's loss) makes the test absolute; the
        window of three lets an over-relaxed step that fell back, or a noisy oracle fit, gain
        little once without stopping the fit. ``tol=0`` turns the rule off: the fit runs
        ``max_iter`` iterations (unless early stopping ends it, or the joint solver can make no
        more progress in float64) and does not warn. A ``ConvergenceWarning`` says when
        ``max_iter`` stops a fit with ``tol > 0``.
    max_sweeps : int, default=50
        Most star-update sweeps (kernel sweeps: one pass over the nodes, the direction
        alternating) after each oracle fit. The chapter's message-passing iteration is a forward
        and a backward pass, two sweeps. An example stops early when no message changes by more
        than 1e-9; see also ``sweep_tol``.
    sweep_tol : float, default=0.1
        Message passing stops on progress: the sweeps of a half step run in pairs (a forward and
        a backward sweep), and stop once a pair lowers R by no more than ``sweep_tol`` times what
        the half step had gained before it (the oracle fit and the earlier pairs). Sweeping on
        when the messages gain little against what the next fit will gain only costs time: the
        next fit starts from the messages where they are. ``sweep_tol=0`` runs ``max_sweeps``
        sweeps every half step (each example until its messages settle), as before 0.2.
    predict_max_sweeps : int, default=10000
        The budget of kernel sweeps for prediction on graphs that are not forests. The sweeps run in
        chunks of doubling length and stop once every example's labels are a certified MAP
        (the LP's bound met by their score) or settled (unchanged over a chunk with the bound no
        longer falling, or with the bound falling too slowly to close the gap to their score;
        :func:`slr.inference.decoding.batch_map`), which on most graphs is long before the budget;
        a ``ConvergenceWarning`` says when the budget ran out first.
    predict_epsilon : float, default=0.0
        Entropy weight of the inference used for prediction; 0 is MAP on the LP
        relaxation (exact by Viterbi when every example is a chain, by max-product when every
        example is a forest). With a positive
        value, nodes are labelled by their smoothed marginals' mode (the sweeps then run
        on chains too).
    n_states : int, optional
        Number of states ``L``; inferred as ``max(Y) + 1`` for integer labels when None. For
        labels of other types, the number of distinct labels, which is what it must be if given.
    n_jobs : int, optional
        OpenMP threads for message passing (parallel over examples); all cores when None or -1.
    monitor : "auto" or bool, default="auto"
        Measure the training error (and the validation error, with validation data) after learning
        iterations for ``history_``: the per-node error of ``predict``'s labels under the functions
        of that iteration. ``True``: after every iteration (the default before 0.2). ``"auto"``: after
        every iteration where every training example is a chain (Viterbi: one pass), and otherwise
        after iterations 1, 2, 4, 8, ... and, once the fit has ended, for the model kept (the last
        iteration, or ``best_iteration_``); the other rows' ``train_error`` is NaN. On graphs that
        are not forests ``predict`` runs max-product sweeps from zero messages until its labels
        settle (up to ``predict_max_sweeps``): a decode of the training examples then costs
        about what an iteration of learning does, or more, so measuring every iteration would cost
        about as much as the fit; ``"auto"`` decodes ``floor(log2(n_iter)) + 2`` times at most
        (figures: the research notes, "The figures behind the defaults"). The monitor's sweeps
        on each data set start from the messages its previous decode of them ended with, which
        changes no label the LP certifies (up to ties between labellings of the same score).
        ``False``: none, and no validation error unless early stopping needs it. Early stopping
        measures the validation error after every iteration in every mode, and monitoring never
        changes the fit.
    verbose : int, default=0
        0 is silent; 1 prints one line per iteration to stderr (R, training error, time);
        2 also R after every half step. ``True`` is 1.
    random_state : None, int or numpy.random.Generator
        Seeds oracles that have a ``random_state`` parameter left at None (e.g. MLP);
        oracles with an explicit seed keep it.
    relaxation : float, default=1.9
        Over-relaxation ``omega`` in ``[1, 2)`` of the function updates: after each fit of an
        oracle whose functions are linear in their parameters (``Linear``, ``Constant``) the
        parameters move to ``old + omega * (fitted - old)``; if that raises ``J`` (R plus the
        ridge terms, see ``tol``) above its value before the fit, the exact fit is kept instead,
        so ``J`` still never increases.
        The minimised objective is unchanged; on strongly coupled problems the blocks move
        further per iteration (docs/design.md section 1). Other oracles take exact steps;
        ``relaxation=1`` is Algorithm 1.1 as the chapter states it. The default 1.9 reaches the
        objective of exact steps in about half the iterations (the research notes, "The figures
        behind the defaults").
    warm_start : bool, default=False
        Continue the last fit instead of starting afresh: its fitted oracles and, on the same
        training data, its messages are kept, and ``max_iter`` counts all iterations, so a fit of
        10 iterations followed by ``set_params(max_iter=20, warm_start=True)`` and ``fit`` ends
        where one fit of 20 would (``history_`` and ``objective_trace_`` continue). On other
        training data (another graph layout or other labels) the messages start from zero. An
        early-stopped fit continues from the iteration it kept (``best_iteration_``); the rows
        of ``history_`` after it are dropped, and early stopping's count starts afresh. With the
        alternating solver the continuation is the uninterrupted fit exactly; the joint solver
        starts L-BFGS afresh from the kept functions and messages (its curvature memory is not
        kept), so 10 + 10 iterations end near 20, not at them (3 + 3 against 6 on denoising
        grids and random graphs: within 5% of R, above or below). A continuation must be of the
        fitted model: a changed ``n_states``, ``unary`` or ``pairwise`` is refused (set
        ``warm_start=False`` to fit it), as are features of other widths; a changed ``epsilon``
        is taken with a ``UserWarning`` (the objective then changes scale in ``history_``).
    early_stopping : "auto" or bool, default="auto"
        Stop when the validation error (per-node error of MAP predictions) has stayed above its
        lowest value for ``n_iter_no_change`` iterations, or has stayed at or above it for
        ``4 * n_iter_no_change`` iterations since it first reached it, and keep the model of the
        last iteration with the lowest validation error (``best_iteration_``). On a few validation
        examples the error moves in coarse steps and often stays level for many iterations while
        the fit still improves (letters, 10 held-out words: level for 34 iterations before it fell
        again), so a plateau at the lowest gets four times the patience of a rise (the sign of
        overfitting). A longer plateau ends the fit too, which would otherwise run to the
        stopping rule on R or to ``max_iter`` (an MLP on chains with 20 states: held-out error
        level from the 4th iteration to the 200th). The validation data are ``X_val``, ``Y_val``
        when given to ``fit``, else
        ``validation_fraction`` of the examples of ``X``, held out (drawn with ``random_state``).
        ``"auto"`` is on when ``X_val`` and ``Y_val`` are given, and otherwise only where an
        oracle asks for it (its tags' ``validation_stopping``: ``MLP``) and ``X`` has at least
        20 examples. Otherwise it holds nothing out: structured data sets often have few
        examples (letters' fold has 704 words, the denoising sets 16 images), and holding a
        tenth of them out costs the fit more than the stopping rule on R, which needs no
        held-out data, does (the research notes, "The figures behind the defaults"). A network,
        however, drives R towards 0 by memorising the training examples while the error on
        other examples rises, so the rule ends its fit only at ``max_iter``, far past its best
        model; a tenth of the examples held out stops it there. With fewer than 20 examples that
        tenth is one example (or a share rounded up past a tenth): one example's error is too
        noisy to choose an iteration on, and the example is missed in the fit. ``stop_reason_`` is
        ``"early_stopping"`` when it ends the fit.
    validation_fraction : float, default=0.1
        Share of the examples of ``X`` held out for early stopping when no ``X_val`` is given
        (rounded up to whole examples; at least one must remain to train on).
    n_iter_no_change : int, default=10
        Iterations with a validation error above its lowest after which early stopping ends the
        fit; four times as many at its lowest, without a new lowest, end it too.
    class_weight : None, "balanced" or dict, default=None
        Per-label weights ``cw`` of the Hamming margin: ``Delta_i(y_i, a) = cw[y_i] [a != y_i]`` in
        ``theta``, so R is the smoothed surrogate of the weighted Hamming loss (as the SSVMs' loss-
        augmented inference uses it). A dict ``{label: weight}`` (labels it omits weigh 1), or
        ``"balanced"``: ``n_nodes / (n_classes * count(label))`` over the labelled training nodes,
        as scikit-learn defines it. (Weighting each node's term of the log-partition instead is not
        possible: the smoothed LP couples the nodes of an example, its value does not split into
        per-node parts that one could scale; docs/design.md section 1.)
    latent_iter : int, default=1
        With unlabelled nodes in ``Y`` (label ``-1``): learning iterations between updates of the
        soft targets (CCCP, :mod:`slr.latent`). Fully labelled fits ignore it.
    latent_init : {"neighbours", "kmeans", "random", "uniform"}, default="neighbours"
        With unlabelled nodes: the first soft targets, which break the symmetry among an unlabelled
        node's states (from uniform targets they stay interchangeable and the node learns nothing):
        its labelled neighbours' labels, pystruct's k-means clustering of those, a random state
        (both seeded by ``random_state``), or uniform (:func:`slr.latent.initial_node_targets`).
        A continued fit (``warm_start``) starts from the fitted functions instead.
    n_hidden_states : int, default=0
        Hidden nodes with states of their own (pystruct's ``LatentNodeCRF``, :mod:`slr.hidden`):
        with ``n_hidden_states > 0`` every example is ``(node_features, edges, edge_features,
        n_hidden)``, its last ``n_hidden`` nodes hidden (never labelled, one of ``n_hidden_states``
        states each), ``Y`` labels its visible nodes and ``predict`` returns their labels. The
        model has ``n_states + n_hidden_states`` states, visible nodes kept to the first, hidden
        nodes to the others; the hidden nodes are learnt as latent variables (``latent_init``,
        ``latent_iter``). :func:`slr.formats.from_latent_node_crf` converts pystruct's examples.
    solver : {"auto", "alternation", "joint"}, default="auto"
        ``"alternation"``: Algorithm 1.1 (block coordinate descent: oracle fits and sweeps in
        turn). ``"joint"``: for ``Linear``, ``Constant`` and ``Zero`` oracles, whose potentials are
        linear in their parameters so that J is jointly convex in (parameters, messages): the
        unary fit from zero messages (the model of the nodes alone, capped at 20 L-BFGS
        iterations; a fit stopped after it has no pairwise term), then L-BFGS over both
        functions' parameters at once from there, the pairwise function and the messages
        starting at zero, each evaluation running as many warm-started star sweeps on the
        messages as its progress asks for (from 2, at most ``max_sweeps``; :mod:`slr._joint`);
        at the end up to ``max_sweeps`` sweeps settle the messages. Sample
        and class weights, early stopping and ``warm_start`` work with both (a continued joint
        fit starts L-BFGS's memory afresh). ``"auto"``: ``"joint"`` where it applies (such
        oracles, no unlabelled nodes, ``max_sweeps >= 1``), else ``"alternation"``;
        ``solver_`` says which ran. ``relaxation`` and ``sweep_tol`` concern the alternation only.
    allowed_transitions : None, "BIO", "BIOES" or array-like of bool, default=None
        Which label may follow which along an edge (:mod:`slr.transitions`): an ``(L, L)`` mask,
        ``allowed[a, b]`` saying that label ``a`` at an edge's first node may be followed by ``b`` at
        its second (on a chain, node ``i`` and ``i + 1``); or an ``(L + 2, L + 2)`` mask whose row
        ``L`` and column ``L + 1`` also say which labels a chain may start and end with (on other
        graphs: the nodes without an incoming, an outgoing edge); or a tagging scheme, resolved
        against string tags (with integer labels, pass the mask
        ``slr.transitions.allowed_transitions(scheme, tags)`` instead). Forbidden pairs and end
        states are excluded from training (their potentials and the pairwise oracle's bias far
        below the others: weight 0 in every softmax, R and the certificate finite) and from
        prediction (no forbidden pair is decoded on chains and trees, where inference is exact;
        on loopy graphs the LP's labelling may use one only where its rounding finds no allowed
        labelling). Training labels that use a forbidden pair are refused.

    Attributes
    ----------
    unary_, pairwise_ : LogisticOracle
        The fitted functions.
    n_states_ : int
        The labels (without the hidden states).
    classes_ : ndarray of shape (n_classes,)
        The labels, sorted (``arange(n_states_)`` for integer labels): ``predict`` returns them,
        and column ``a`` of ``predict_marginals`` is label ``classes_[a]``.
    n_hidden_states_ : int
    epsilon_ : float
        The eps of the fit (``epsilon`` with ``"auto"`` resolved).
    n_node_features_, n_edge_features_ : int
    history_ : pandas.DataFrame
        One row per learning iteration run (plus row 0 for the start, all messages zero and
        both functions zero): ``iteration``, ``objective`` (R after the iteration),
        ``train_error``, ``val_error`` (per-node error rates of MAP predictions; NaN
        without validation data or monitoring, and ``train_error`` in the rows ``monitor="auto"``
        leaves out), ``seconds`` (wall time since ``fit`` began,
        without monitoring) and ``eval_seconds`` (see :mod:`slr.estimator`). With early
        stopping it goes on past the kept iteration, to the last one run.
    n_iter_ : int
        Learning iterations run (with ``warm_start``, of all fits together).
    stop_reason_ : str
        Why learning stopped: ``"tol"`` (the stopping rule), ``"early_stopping"``, ``"max_iter"``
        or, for the joint solver only, ``"converged"`` (its gradient test met, or no progress left
        in float64); also in ``certificate_``.
    solver_ : str
        The solver that ran: ``"alternation"`` or ``"joint"`` (see ``solver``).
    best_iteration_ : int or None
        With early stopping, the iteration whose model was kept (the last with the lowest
        validation error); None without.
    objective_trace_ : pandas.DataFrame
        ``R`` and ``J`` after every half step: columns ``iteration``, ``stage`` (one of
        ``"start"``, ``"unary_fit"``, ``"unary_mp"``, ``"pairwise_fit"``, ``"pairwise_mp"``,
        ``"targets"`` after a soft-target update of a fit with unlabelled nodes, and for the joint
        solver ``"joint"`` after each of its iterations and ``"joint_mp"`` after its final sweeps),
        ``objective`` (R) and ``penalised`` (J: R plus ``eps`` times the oracles' ridge terms,
        see ``tol``). With exact oracles (Zero, Constant, Linear) ``penalised`` never increases,
        up to the rounding of its sums (and R neither without a ridge; with one R can rise a
        little where a fit shrinks the weights); SGD (``MLP``) and boosting can raise it at a fit.
    certificate_ : slr.certificate.FitCertificate or None
        What the fit proves on its training set: Theorem 1.1's bounds (``R`` against the LP loss
        bracketed by a decoded labelling and the ``eps = 0`` dual, and ``eps * Hmax``), the sweeps
        and convergence of the last half step, the message residual, ``n_iter`` and
        ``stop_reason``. With early stopping it certifies the kept model; with ``sample_weight``
        its bounds and ``objective`` are the unweighted ones; None after a fit with unlabelled nodes.

    Notes
    -----
    What the learner asks of an oracle beyond ``fit`` and ``decision_function`` it reads from
    :func:`slr.oracles.get_oracle_tags` only: ``factored_pair_bias`` (the pairwise bias handed
    over as a :class:`~slr.oracles.pair_bias.PairBias`), ``linear_parameters`` (what
    ``relaxation`` moves), ``training_scores`` (the potentials of a freshly fitted function
    on the training rows come from the oracle's ``training_scores_`` instead of
    ``decision_function``), ``penalty`` (J instead of R) and ``validation_stopping``
    (what ``early_stopping="auto"`` holds examples out for).

    ``fit`` is a transaction: it checks the parameters, the oracles and all the data first, and
    replaces the fitted attributes only once it has finished. A fit that raises (bad validation
    data, a bad parameter, an oracle failing mid-fit) leaves a fitted model as it was. The
    energy's ``epsilon`` is that of the last successful fit; the settings of prediction
    (``predict_epsilon``, ``predict_max_sweeps``, ``n_jobs``) are read when ``predict`` runs, so
    ``set_params`` changes them for a fitted model.

    Examples
    --------
    >>> from slr import StructuredLogisticRegression
    >>> from slr.datasets import make_denoising
    >>> X, Y = make_denoising(n_images=2, size=60, sigma=6.0, random_state=0)
    >>> model = StructuredLogisticRegression(max_iter=10, tol=0, random_state=0).fit(X, Y)  # no rule: 10 iterations
    >>> model.score(X, Y) > 0.85
    True
    >>> model.n_iter_, model.stop_reason_
    (10, 'max_iter')
    >>> model.history_.columns.tolist()
    ['iteration', 'objective', 'train_error', 'val_error', 'seconds', 'eval_seconds']
    """

    #: Profiling hook (``asv_benchmarks/profile_learner.py``): when set, ``fit`` and prediction
    #: run each phase inside ``_phase_timer(name)``, a context manager that times it.
    _phase_timer: Callable[[str], AbstractContextManager] | None = None

    _parameter_constraints: ClassVar[dict[str, Spec]] = {
        "epsilon": (Options(("auto",)), Checked(lambda value, name: check_epsilon(value, allow_zero=False, name=name),
                                                "a real number > 0")),
        "max_iter": Integer(1),
        "tol": Real(0.0),
        "max_sweeps": Integer(0),
        "sweep_tol": Real(0.0),
        "predict_max_sweeps": Integer(0),
        "predict_epsilon": Checked(lambda value, name: check_epsilon(value, name=name), "a real number >= 0"),
        "n_states": (None, Integer(1)),
        "n_jobs": NJobs(),
        "monitor": (Boolean(), Options(("auto",))),
        "verbose": (Boolean(), Integer(0)),
        "random_state": RandomState(),
        "relaxation": Real(1.0, 2.0, high_open=True),
        "warm_start": Boolean(),
        "early_stopping": (Options(("auto",)), Boolean()),
        "validation_fraction": Real(0.0, 1.0, low_open=True, high_open=True),
        "n_iter_no_change": Integer(1),
        "class_weight": CLASS_WEIGHT,
        "latent_iter": Integer(1),
        "latent_init": Options(LATENT_INIT),
        "n_hidden_states": Integer(0),
        "solver": Options(SOLVERS),
        "allowed_transitions": TRANSITIONS,
    }

    def __init__(
        self,
        unary: LogisticOracle | None = None,
        pairwise: LogisticOracle | None = None,
        *,
        epsilon: float | str = "auto",
        max_iter: int = 200,
        tol: float = 1e-4,
        max_sweeps: int = 50,
        sweep_tol: float = 0.1,
        predict_max_sweeps: int = 10_000,
        predict_epsilon: float = 0.0,
        n_states: int | None = None,
        n_jobs: int | None = None,
        monitor: bool | str = "auto",
        verbose: int = 0,
        random_state: Any = None,
        relaxation: float = 1.9,
        warm_start: bool = False,
        early_stopping: str | bool = "auto",
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 10,
        class_weight: dict | str | None = None,
        latent_iter: int = 1,
        latent_init: str = "neighbours",
        n_hidden_states: int = 0,
        solver: str = "auto",
        allowed_transitions: Any = None,
    ) -> None:
        self.unary = unary
        self.pairwise = pairwise
        self.epsilon = epsilon
        self.max_iter = max_iter
        self.tol = tol
        self.max_sweeps = max_sweeps
        self.sweep_tol = sweep_tol
        self.predict_max_sweeps = predict_max_sweeps
        self.predict_epsilon = predict_epsilon
        self.n_states = n_states
        self.n_jobs = n_jobs
        self.monitor = monitor
        self.verbose = verbose
        self.random_state = random_state
        self.relaxation = relaxation
        self.warm_start = warm_start
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.class_weight = class_weight
        self.latent_iter = latent_iter
        self.latent_init = latent_init
        self.n_hidden_states = n_hidden_states
        self.solver = solver
        self.allowed_transitions = allowed_transitions

    # ------------------------------------------------------------------------------------
    def _check_params(self) -> dict[str, Any]:
        """Every hyperparameter checked."""
        params = validate_params(self)
        params["verbose"] = int(params["verbose"])
        params["epsilon"] = resolve_epsilon(params["epsilon"], (self.unary, self.pairwise))
        return params

    def fit(
        self,
        X: Sequence,
        Y: Sequence,
        X_val: Sequence | None = None,
        Y_val: Sequence | None = None,
        sample_weight: Any = None,
        callback: Callable[[Iterate], Any] | None = None,
    ) -> "StructuredLogisticRegression":
        """Learn the unary and pairwise functions.

        Parameters
        ----------
        X : list of (node_features (n, d_u), edges (m, 2), edge_features (m, d_e))
            With ``n_hidden_states``, ``(node_features, edges, edge_features, n_hidden)``.
        Y : list of label arrays (n,)
            With ``n_hidden_states``, ``(n - n_hidden,)``: the visible nodes' labels. Integer
            labels, or labels of any hashable type that sort (strings: ``"B-PER"``), which
            ``classes_`` then lists (:mod:`slr.labels`). Label ``-1`` for integer labels, ``None``
            for others, or a masked entry of a numpy masked array, marks an unlabelled node,
            learnt as a latent variable (:mod:`slr.latent`); an example may have no labelled node.
        X_val, Y_val : optional
            Validation data in the same format (fully labelled), for ``history_["val_error"]`` and
            early stopping (which they then turn on with ``early_stopping="auto"``, and which then
            holds nothing out of ``X``).
        sample_weight : array-like of shape (n_examples,), optional
            Per-example weights ``w_k >= 0``: R becomes ``sum_k w_k [-F(x^k, y^k) + A(lambda^k, theta^k)]``
            and every node and edge row of example ``k`` weighs ``w_k`` in the oracle fits. An
            integer weight is the example repeated; weight 0 drops it.
        callback : callable, optional
            Called as ``callback(iterate)`` after every learning iteration (with both solvers, and
            with ``warm_start`` for the continued fit's iterations), with an :class:`Iterate`: the
            iteration, R and J, the fit time so far, and :meth:`Iterate.predict` /
            :meth:`Iterate.score` of any data under the current functions. It observes the fit
            and does not steer it (its return value is ignored), so data scored there, unlike
            ``X_val``, choose nothing: e.g. a test error curve. Its time is left out of
            ``history_["seconds"]`` (it goes to ``eval_seconds``). An exception it raises ends
            the fit and propagates; the fitted attributes then stay those of the previous fit. A
            parameter of ``fit``, not of the estimator: it observes one fit and is no part of the
            model (``get_params``, ``clone`` and pickling do not carry it).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Naming the argument, for a bad parameter, oracle or data set; the fitted
            attributes are then those of the previous fit (or none).

        Warns
        -----
        ConvergenceWarning
            When ``max_iter`` stops the fit before the stopping rule does (``tol > 0``).
        """
        params = self._check_params()
        if callback is not None and not callable(callback):
            raise ValueError(f"callback must be a callable taking an Iterate, or None, got {callback!r}")
        start = self._start(params)
        if start is None:   # a continued fit with nothing left to do: the fitted model stays as it is
            return self
        data = self._training_data(X, Y, params, start)
        transitions = checked_transitions(params["allowed_transitions"], data, start.classes)
        weights = check_example_weights(sample_weight, data.n_examples)
        val = validation_data(X_val, Y_val, self._data_check(params, start, data, "X_val"))
        early = early_stopping(params["early_stopping"], val is not None, tuple(start.oracles.values()),
                               data.n_examples, params["validation_fraction"])
        split = None
        if early and val is None:   # hold out validation_fraction of the examples
            split = self._hold_out(data.n_examples, params["validation_fraction"], start.warm, start.rng)
            data, val = data.subset(split[0]), data.subset(split[1])
            weights = None if weights is None else weights[split[0]]
            assert val.labels is not None   # a part of the training data: labelled
            check_held_out_labelled([val.labels], len(split[1]), params["validation_fraction"])
        history = FitHistory(data, val)
        labels = data.labels
        assert labels is not None   # training data: labelled
        cw = class_weights(encode_class_weight(params["class_weight"], start.classes), labels, data.n_labels)
        if cw is not None and data.n_states > data.n_labels:   # hidden states are never a label
            cw = np.r_[cw, np.ones(data.n_states - data.n_labels)]
        check_resolvable_class_weights(cw, params["epsilon"])
        layout = layout_digest(data)
        resume = None
        if start.warm:   # the fitted functions, and the messages if they belong to these data
            resume = (self._train_messages.copy() if layout == self._train_layout else None, self._fitted_pairwise)
        allowed = allowed_states(data, transitions)
        latent_start = None
        if resume is None and params["latent_init"] != "uniform" and data.unlabelled.any():
            clamped = None if allowed is None else clamp_mask(labels, data.n_states) & allowed
            latent_start = initial_node_targets(data, params["latent_init"], start.rng, clamped)
        local = LocalData(data, params["epsilon"], params["max_sweeps"], resolve_threads(params["n_jobs"]),
                          self._phase_timer or untimed, sample_weight=weights, class_weight=cw,
                          latent_start=latent_start, transitions=transitions, allowed=allowed)
        return self._run(params, start, local, history, prediction_model(params["epsilon"], params, transitions),
                         resume=resume, early=early, class_weight=cw, callback=callback, train=data,
                         check=self._data_check(params, start, data, "X"),
                         shape=(data.n_labels, data.d_node, edge_width(data)), layout=layout, split=split)

    # ------------------------------------------------------------------ a fit's parts
    def _start(self, params: dict[str, Any]) -> FitStart | None:
        """Where a fit starts: afresh, or with ``warm_start`` from the fitted model (None when it has
        run ``max_iter`` iterations already)."""
        if not (params["warm_start"] and hasattr(self, "history_")):
            rng = check_generator(params["random_state"])
            oracles = {name: clone_oracle(getattr(self, name), name, rng) for name in FACTORS}
            return FitStart(0, oracles, None, params["n_states"] is None, rng)
        done = self._resume_iteration
        if params["max_iter"] < done:
            raise ValueError(f"max_iter must be at least the {done} iterations done when warm_start=True "
                             f"(it counts all iterations), got {params['max_iter']}")
        if params["max_iter"] == done:
            return None
        check_same_model(self, params)
        classes = None if is_integer_classes(self.classes_) else self.classes_
        # an early-stopped fit continues from the iteration it kept
        earlier = (self.history_[self.history_["iteration"] <= done],
                   self.objective_trace_[self.objective_trace_["iteration"] <= done])
        return FitStart(done, {name: copy.deepcopy(getattr(self, f"{name}_")) for name in FACTORS}, classes,
                      self._n_states_inferred, None, earlier)

    def _training_data(self, X: Sequence, Y: Sequence, params: dict[str, Any], start: FitStart) -> FlatData:
        """``X``, ``Y`` checked: against the fitted model for a continued fit, else as a new one
        (whose labels set ``start.classes``)."""
        if start.warm:
            return checked_data(X, encode_labels(Y, start.classes), self.n_states_, start.inferred,
                                self.n_node_features_, self.n_edge_features_, "X", allow_unlabelled=True,
                                n_hidden_states=params["n_hidden_states"])
        Y, start.classes = fit_labels(Y, params["n_states"])
        return flat_data(X, Y, params["n_states"], params["n_hidden_states"], allow_unlabelled=True)

    def _data_check(self, params: dict[str, Any], start: FitStart, like: FlatData,
                    name: str) -> Callable[[Sequence, Sequence | None], FlatData]:
        """The check of other data (``X_val``, an :class:`Iterate`'s) against the training data ``like``."""
        def check(X: Sequence, Y: Sequence | None) -> FlatData:
            return checked_data(X, None if Y is None else encode_labels(Y, start.classes), like.n_labels,
                                start.inferred, like.d_node, edge_width(like), name,
                                n_hidden_states=params["n_hidden_states"])
        return check

    def _run(self, params: dict[str, Any], start: FitStart, data: FitData, history: FitHistory,
             predictor: PairwiseModel, *, resume: tuple[Any, bool] | None, early: bool,
             class_weight: np.ndarray | None, callback: Callable[[Iterate], Any] | None, train: FlatData | None,
             check: Callable[[Sequence, Sequence | None], FlatData], shape: tuple[int, int, int | None],
             layout: Any, split: tuple[np.ndarray, np.ndarray] | None,
             train_error: Callable[[], float] | None = None) -> "StructuredLogisticRegression":
        """Algorithm 1.1 (or the joint solver) on ``data``, wherever they are, then the commit.

        ``train``: the training data if they are in this process (None for sharded data, whose
        ``train_error`` measures their error); ``check``: the check of an :class:`Iterate`'s data;
        ``shape``: their labels and feature widths; ``layout``:
        what identifies their messages' meaning for a continued fit.
        """
        timed = self._phase_timer or untimed
        state = Alternation(data, start.oracles, params["epsilon"], params["max_sweeps"], params["relaxation"],
                            timed, resume=resume, sweep_tol=params["sweep_tol"], latent_iter=params["latent_iter"])
        solver = choose_solver(params["solver"], start.oracles["unary"], start.oracles["pairwise"], train,
                               params["max_sweeps"])
        objectives = [] if start.earlier is None else iteration_objectives(*start.earlier)
        if not start.warm:
            history.record(0, state.objective)
            objectives.append(state.penalised)
        rows = TrainingRows(params["monitor"], data.decodes_in_one_pass(predictor))
        decode = (lambda other: state.map_labels(predictor, other)) if rows.on or early else None
        classes = integer_classes(shape[0]) if start.classes is None else start.classes
        progress = Progress(history, objectives, decode, rows, BestIteration(params["n_iter_no_change"]) if early
                            else None, params["tol"], params["verbose"], timed, callback,
                            lambda row, state: Iterate(row, state, predictor, check, classes), train_error)
        if solver == "joint":
            stop_reason, n_iter = run_joint(state, progress, start.done, params["max_iter"], class_weight)
        else:
            stop_reason, n_iter = run_alternation(state, progress, start.done, params["max_iter"])
        best, kept = progress.best, n_iter
        if best is not None and best.iteration < n_iter:   # keep the best iteration's model
            assert best.snapshot is not None   # some iteration's validation error was measured (not NaN)
            state.restore(best.snapshot)
            kept = best.iteration
        if state.joint_steps and not state.settled:
            state.settle(n_iter)
        rows.finish(history, kept, decode, timed)
        self._report_end(params, n_iter, stop_reason, None if best is None else kept)
        history_frame, trace_frame = history.frame(), state.trace_frame()
        if start.earlier is not None:   # warm: the earlier fit's rows first, the clock after theirs
            earlier_history, earlier_trace = start.earlier
            history_frame["seconds"] += earlier_history["seconds"].iloc[-1]
            history_frame = pd.concat([earlier_history, history_frame], ignore_index=True)
            trace_frame = pd.concat([earlier_trace, trace_frame.iloc[1:]], ignore_index=True)
        n_labels, d_node, d_edge = shape
        self._commit_fit({
            "n_states_": n_labels,
            "classes_": classes,
            "n_hidden_states_": params["n_hidden_states"],
            "epsilon_": params["epsilon"],
            "n_node_features_": d_node,
            # a continuation on graphs without edges keeps the width the pairwise function was fitted on
            "n_edge_features_": self.n_edge_features_ if start.warm and not data.has_edges else d_edge,
            "unary_": state.oracles["unary"],
            "pairwise_": state.oracles["pairwise"],
            "_oracle_specs": {name: oracle_spec(getattr(self, name)) for name in FACTORS},
            "history_": history_frame,
            "objective_trace_": trace_frame,
            "n_iter_": n_iter,
            "stop_reason_": stop_reason,
            "best_iteration_": None if best is None else kept,
            "_n_states_inferred": start.inferred,
            "_fitted_pairwise": state.fitted_pairwise,
            "_predictor": predictor,
            "certificate_": state.certificate(stop_reason, n_iter),
            "solver_": solver,
            "_train_messages": state.messages,
            "_train_layout": layout,
            "_resume_iteration": kept,
            "_validation_split": split,
            **data.fitted_attributes(),
        })
        return self

    def _report_end(self, params: dict[str, Any], n_iter: int, stop_reason: str, kept: int | None) -> None:
        """The last progress line, and the ``ConvergenceWarning`` when ``max_iter`` stopped the fit."""
        name = type(self).__name__
        if params["verbose"]:
            print(f"[{name}] stopped after {n_iter} iterations ({stop_reason})"
                  + (f"; kept iteration {kept}" if kept is not None else ""), file=sys.stderr)
        if stop_reason == "max_iter" and params["tol"] > 0:
            warnings.warn(f"{name} stopped at max_iter={params['max_iter']} before the objective's relative "
                          f"decrease fell below tol={params['tol']:g}; raise max_iter (with warm_start=True a fit "
                          f"continues where it stopped)", ConvergenceWarning, stacklevel=4)

    def _hold_out(self, n_examples: int, fraction: float, warm: bool,
                  rng: np.random.Generator | None) -> tuple[np.ndarray, np.ndarray]:
        """The examples early stopping trains on and holds out: a continued fit's earlier split
        (on as many examples), else ``ceil(fraction * n_examples)`` drawn from ``rng`` (from
        ``random_state`` when None)."""
        earlier = self._validation_split if warm else None
        if earlier is not None and len(earlier[0]) + len(earlier[1]) == n_examples:
            return earlier
        n_val = math.ceil(fraction * n_examples)
        if n_val >= n_examples:
            raise ValueError(f"validation_fraction={fraction:g} holds out all {n_examples} examples of X for "
                             f"early stopping; lower it, pass X_val and Y_val, or set early_stopping=False")
        rng = check_generator(self.random_state) if rng is None else rng
        order = rng.permutation(n_examples)
        return np.sort(order[n_val:]), np.sort(order[:n_val])

    def predict_marginals(self, X: Sequence, *, method: str = "lp", epsilon: float | None = None,
                          edge_marginals: bool = False, max_sweeps: int = 10_000,
                          tol: float = 1e-9) -> list:
        """Node (and edge) marginals of every example under the learned energy.

        Two kinds, which differ (docs/design.md section 1, "LP marginals are not probabilities of
        labellings"):

        - ``method="lp"`` (any graph): the entropy-smoothed LP's marginals at ``epsilon``, the
          quantities the model was trained with. They are locally consistent (each edge
          marginal sums to its nodes'), but not the marginals of any distribution over
          labellings, even on a chain.
        - ``method="exact"`` (forests, and loopy graphs of small bandwidth such as narrow grids):
          the exact marginals of the CRF ``p(y | x)`` proportional to ``exp(F(x, y) / epsilon)``,
          by sum-product on forests and by elimination over windows of the node order on the
          others (:mod:`slr.inference.banded`); at the fit's ``epsilon`` that is ``exp(g_u + g_p)``.

        Parameters
        ----------
        X : list of (node_features, edges, edge_features)
        method : {"lp", "exact"}, default="lp"
        epsilon : float, optional
            The temperature; the fit's ``epsilon`` when None.
        edge_marginals : bool, default=False
            Also return each example's ``(m, L, L)`` edge marginals.
        max_sweeps : int, default=10000
            Star-update sweeps for ``method="lp"``; a ``ConvergenceWarning`` when they stop first.
        tol : float, default=1e-9
            Convergence tolerance of the sweeps (largest message change).

        Returns
        -------
        list
            Per example its ``(n, L)`` node marginals, or with ``edge_marginals`` a pair
            ``(node_marginals (n, L), edge_marginals (m, L, L))``.

        Raises
        ------
        ValueError
            For bad arguments, or ``method="exact"`` on an example with a cycle whose bandwidth
            is too large for elimination.
        """
        self._check_fitted()
        method = check_option(method, "method", MARGINALS)
        epsilon = self._predictor.scale if epsilon is None else check_epsilon(epsilon, allow_zero=False)
        edge_marginals = check_bool(edge_marginals, "edge_marginals")
        max_sweeps, tol = check_int(max_sweeps, "max_sweeps"), check_real(tol, "tol", 0.0)
        data = self._data(X)
        theta_nodes, theta_edges = potentials(self._predictor, data, self.unary_, self._fitted_pairwise_function())
        nodes, edges = self._predictor.marginals(data, theta_nodes, theta_edges, epsilon, method,
                                                 max_sweeps=max_sweeps, tol=tol, edge_marginals=edge_marginals)
        per_node = data.split(nodes)
        if not edge_marginals:
            return per_node
        return list(zip(per_node, np.split(edges, data.batch.edge_ptr[1:-1])))

    # ------------------------------------------------------------------------------------
    def _data(self, X: Sequence, Y: Sequence | None = None, name: str = "X") -> FlatData:
        return checked_data(X, Y, self.n_states_, self._n_states_inferred, self.n_node_features_,
                             self.n_edge_features_, name, n_hidden_states=self.n_hidden_states_)

    def _predict_flat(self, data: FlatData) -> np.ndarray:
        return map_labels(self._current_predictor(), data, self.unary_, self._fitted_pairwise_function(),
                           self._phase_timer or untimed, warn=True)

    def _current_predictor(self) -> PairwiseModel:
        """The fit's energy (its ``epsilon``) decoded under the prediction settings as they are now:
        ``set_params(predict_max_sweeps=...)`` after ``fit`` applies to the next ``predict``."""
        names = ("predict_epsilon", "predict_max_sweeps", "n_jobs")
        params = validate_params(self, {name: self._parameter_constraints[name] for name in names},
                                 params={name: getattr(self, name) for name in names})
        return prediction_model(self._predictor.scale, params, self._predictor.transitions)

    def _fitted_pairwise_function(self) -> LogisticOracle | None:
        """``pairwise_`` if a fit ever fitted it (graphs without edges leave it unfitted), else None."""
        return self.pairwise_ if self._fitted_pairwise else None

