"""Run-size profiles: ``tiny`` (tests, seconds), ``quick`` (about 10 min on 2 cores), ``full`` (paper)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Profile", "PROFILES", "get_profile", "FUNCTION_CLASSES", "PEER_LEARNERS"]

#: The function classes of Table 1, in the paper's order.
FUNCTION_CLASSES = ("Zero", "Constant", "Linear", "Boost", "MLP")
#: pystruct 0.3.2's learners that the baselines report runs as the outside peer.
PEER_LEARNERS = ("OneSlackSSVM", "NSlackSSVM", "SubgradientSSVM", "FrankWolfeSSVM", "StructuredPerceptron")


@dataclass(frozen=True)
class Profile:
    """Sizes of every experiment for one profile.

    Attributes
    ----------
    name : str
    denoise : dict
        ``n_train``, ``n_test``, ``size``, ``n_iter``, ``mp_sweeps``, ``epsilon``,
        ``trees`` (BoostedTrees keywords of Table 1's ``Boost``: the NIPS paper's protocol, one
        tree per class per round with leaves of at least 5% of the subsample),
        ``chapter_trees`` (those of ``ChapterBoost``, the chapter's protocol: one vector-leaf tree
        per round, leaves of 1%), ``beside`` (cells computed beside Table 1, shown in their own
        section), ``mlp`` (MLP keywords), ``classes``, ``sigma`` (blur;
        the smaller images of ``quick`` use ``10 * size / 100`` so that an image holds as many
        blobs as the paper's 100 x 100 ones and both labels occur in it). ``quick``'s MLP
        takes mini-batches of 100 instead of 1000 so that, with about a tenth of the pixels,
        it still makes about as many SGD steps per learning iteration as ``full``. ``full``'s
        MLP runs 8 epochs per fit (the papers do not say): with 2 the MLP cells are still learning at
        iteration 25 (MLP/MLP .018 against the paper's .008; 8 epochs: .012).
        ``mlp_pairwise`` (optional) updates ``mlp`` for pairwise MLPs: ``full``'s take 32 epochs,
        4x the unary's, as their SGD step is 1/5 of the unary's (.05 against .25); with 8, Linear/MLP
        was still falling at iteration 25 (.049 against the paper's .034; 32 epochs: .038).
    baselines : dict
        ``denoise`` (n_train, n_test, size, sigma), ``letters`` (n_train, n_test words; None
        for all), ``max_iter`` (iterations per baseline, by class name; pystruct's learner of
        the same name gets the same budget, its FrankWolfeSSVM that of SubgradientSSVM),
        ``slr_iter``, ``mp_sweeps``, ``peer`` (pystruct's learners to run on each data set
        when its environment exists; ``quick`` runs only the two cutting-plane SSVMs on
        denoising, where pystruct's LP inference takes minutes per learner), ``peer_timeout``
        (seconds per pystruct run), ``skip`` (methods, as named in the report, not run on a
        data set) and ``skip_reason`` (why, for the report): ``full`` skips both n-slack SSVMs
        on all 704 letters words, where the dual QP grows to thousands of dense constraints.
        ``slr_cells`` (per data set, further slr rows by name: ``unary`` and ``pairwise`` as
        ``(class in slr.oracles, keywords)``, ``epsilon``, ``max_iter``, ``mp_sweeps``; chosen on a validation
        split of the training words, docs/design.md section 6), ``slr_linear`` (per data set,
        solver settings of the ``slr:Linear`` row: ``mp_sweeps``, ``relaxation`` and ``linear``,
        keywords of its two ``Linear`` oracles besides the converted ridge) and ``crfsuite``
        (data sets that get CRFsuite's row, with :class:`baselines.crfsuite_peer.CRFsuiteChain`
        keywords) enter only their own cells' cache keys. ``tune`` (per data set: grids ``C`` and
        ``epsilon``) has each method's regularisation chosen on a validation split of the
        training data (:mod:`slr_suite.tuning`); data sets not in it keep ``C_VALUE``.
    bound : dict
        ``n_graphs``, ``max_nodes``, ``states``, ``epsilons``.
    """

    name: str
    denoise: dict[str, Any] = field(default_factory=dict)
    baselines: dict[str, Any] = field(default_factory=dict)
    bound: dict[str, Any] = field(default_factory=dict)


def _letters_cells(mlp: dict, mlp_iter: int, trees: dict, boost_iter: int, mp_sweeps: int = 5) -> dict:
    """The nonlinear slr rows on letters: MLP or boosted trees on the pixels, a constant pairwise table.
    On chains 5 message-passing iterations per half step gave the same validation curve as 25."""
    return {"slr:MLP": dict(unary=("MLP", mlp), pairwise=("Constant", {}), max_iter=mlp_iter, mp_sweeps=mp_sweeps),
            "slr:Boost": dict(unary=("BoostedTrees", trees), pairwise=("Constant", {}), max_iter=boost_iter,
                              mp_sweeps=mp_sweeps)}


def _budgets(one_slack: int, n_slack: int, subgradient: int, perceptron: int, alternation: int) -> dict:
    """Iterations per baseline: cheap iterations get more of them, so each runs to a plateau."""
    return dict(OneSlackSSVM=one_slack, NSlackSSVM=n_slack, SubgradientSSVM=subgradient,
                StructuredPerceptron=perceptron, GradientAlternation=alternation, PiecewiseTraining=1)


#: Oracle settings of the nonlinear letters rows, chosen on a validation split of each profile's
#: training words (docs/design.md section 6). Boosting warm-starts: each fit adds its rounds.
_LETTERS_MLP = dict(n_hidden=100, learning_rate=0.25, n_epochs=2, batch_size=100, standardize=False)
_LETTERS_TREES = dict(n_rounds=10, subsample=5000, warm_start=True)
#: Solver settings of slr:Linear on letters (the model and its ridge are unchanged): on chains 3
#: message-passing iterations per half step reach the objective of 5 and 25 (R 2,394.2 after 6
#: iterations with 3 and with 5), 10 warm-started L-BFGS iterations per fit instead of fits to
#: convergence make an iteration 2.7x cheaper for the same final error, and over-relaxed steps
#: (omega = 1.9) reach in 2 iterations the objective exact steps reach in 5 (docs/design.md
#: sections 1 and 6).
_LETTERS_LINEAR = dict(mp_sweeps=3, relaxation=1.9, linear=dict(max_iter=10))
#: quick's 100 words make too few mini-batches of 100 for the MLP to fit in a few iterations
_LETTERS_MLP_QUICK = dict(n_hidden=100, learning_rate=0.25, n_epochs=5, batch_size=20)
#: Each method's C (and the smoothed methods' eps) is chosen on a validation split of the
#: letters training words from these grids (slr_suite/tuning.py); denoising keeps the converted C.
#: quick leaves out C = .01, the worst value for every method on its 80 / 20 words, to keep
#: `make report` within 5 minutes.
_TUNE = dict(letters=dict(C=(0.01, 0.1, 1.0, 10.0), epsilon=(0.1, 1.0)))
_TUNE_QUICK = dict(letters=dict(C=(0.1, 1.0, 10.0), epsilon=(0.1, 1.0)))
#: Table 1 compares its Boost (the NIPS protocol) with the chapter's protocol on this cell.
_BESIDE = (("ChapterBoost", "ChapterBoost"),)


def _protocols(n_rounds: int, subsample: int) -> dict:
    """``trees`` (NIPS: per-class trees) and ``chapter_trees`` (chapter: one vector tree) of a profile."""
    return dict(trees=dict(n_rounds=n_rounds, subsample=subsample, tree="per_class"),
                chapter_trees=dict(n_rounds=n_rounds, subsample=subsample, tree="vector"), beside=_BESIDE)

PROFILES: dict[str, Profile] = {
    "tiny": Profile(
        name="tiny",
        denoise=dict(n_train=2, n_test=2, size=8, sigma=2.0, n_iter=2, mp_sweeps=5, epsilon=0.1,
                     **_protocols(3, 1000), mlp=dict(n_hidden=8, n_epochs=1,
                                                                     batch_size=100),
                     classes=FUNCTION_CLASSES),
        baselines=dict(denoise=dict(n_train=2, n_test=2, size=8, sigma=2.0),
                       letters=dict(n_train=10, n_test=10), max_iter=_budgets(2, 2, 2, 2, 2),
                       slr_iter=2, mp_sweeps=5, peer={}, peer_timeout=60.0,
                       slr_cells=dict(letters=_letters_cells(dict(n_hidden=8, n_epochs=1), 2,
                                                             dict(n_rounds=2, subsample=1000), 2)),
                       slr_linear=dict(letters=_LETTERS_LINEAR), crfsuite=dict(letters={}),
                       tune=dict(letters=dict(C=(0.1, 1.0), epsilon=(0.1, 1.0)))),
        bound=dict(n_graphs=3, max_nodes=4, states=(2, 3), epsilons=(0.1, 1.0)),
    ),
    "quick": Profile(
        name="quick",
        denoise=dict(n_train=16, n_test=16, size=32, sigma=3.2, n_iter=25, mp_sweeps=25,
                     epsilon=0.1, **_protocols(20, 5000),
                     mlp=dict(n_hidden=100, n_epochs=2, batch_size=100), classes=FUNCTION_CLASSES),
        baselines=dict(denoise=dict(n_train=8, n_test=8, size=32, sigma=3.2),
                       letters=dict(n_train=100, n_test=300), max_iter=_budgets(100, 20, 100, 30, 100),
                       slr_iter=40, mp_sweeps=25, peer=dict(letters=PEER_LEARNERS,
                                                                 denoising=("OneSlackSSVM", "NSlackSSVM")),
                       peer_timeout=600.0,
                       slr_cells=dict(letters=_letters_cells(_LETTERS_MLP_QUICK, 3, _LETTERS_TREES, 4)),
                       slr_linear=dict(letters=_LETTERS_LINEAR), crfsuite=dict(letters={}), tune=_TUNE_QUICK),
        bound=dict(n_graphs=12, max_nodes=6, states=(2, 3), epsilons=(0.03, 0.1, 0.3, 1.0)),
    ),
    "full": Profile(
        name="full",
        denoise=dict(n_train=16, n_test=16, size=100, sigma=10.0, n_iter=25, mp_sweeps=25,
                     epsilon=0.1, **_protocols(200, 10000),
                     mlp=dict(n_hidden=100, n_epochs=8, batch_size=1000), mlp_pairwise=dict(n_epochs=32),
                     classes=FUNCTION_CLASSES),
        baselines=dict(denoise=dict(n_train=16, n_test=16, size=100, sigma=10.0),
                       letters=dict(n_train=None, n_test=None), max_iter=_budgets(500, 100, 300, 100, 300),
                       slr_iter=50, mp_sweeps=25, peer=dict(letters=PEER_LEARNERS, denoising=PEER_LEARNERS),
                       peer_timeout=3600.0, skip=dict(letters=("NSlackSSVM", "pystruct:NSlackSSVM")),
                       slr_cells=dict(letters=_letters_cells(_LETTERS_MLP, 12, _LETTERS_TREES, 7)),
                       slr_linear=dict(letters=_LETTERS_LINEAR), crfsuite=dict(letters={}), tune=_TUNE,
                       skip_reason="the n-slack dual QP over thousands of dense constraints takes hours "
                                   "at this size"),
        bound=dict(n_graphs=50, max_nodes=8, states=(2, 3, 4), epsilons=(0.03, 0.1, 0.3, 1.0)),
    ),
}


def get_profile(name: str) -> Profile:
    """The profile called ``name`` (``tiny``, ``quick`` or ``full``)."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"profile must be one of {sorted(PROFILES)}, got {name!r}") from None
