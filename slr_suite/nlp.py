"""Text tagging: named entities and parts of speech with sparse CRFsuite-style features.

Each corpus of :mod:`slr.datasets.tagged_text` (cut to its profile's size) is turned into chains
whose node features are the sklearn-crfsuite-style token dicts of
:mod:`slr.datasets.text_features` (neighbours up to ``window`` away), vectorised by
:class:`slr.formats.SequenceVectorizer` fitted on the training sentences. Every method is fitted
on the training sentences at each point of its grid and the point with the best validation score
(entity F1 for IOB-tagged corpora, token accuracy otherwise; the first point wins ties) is
reported on the test sentences, with its fit time and memory (the fit's peak resident set above
the process's at its start, :mod:`slr.suite.memory`: the same measure for every method, C
libraries included), and on IOB-tagged corpora its test entity F1 per entity type.

Every learner is fitted on the corpora's tags as they are, strings (``classes_``: the tags of
the training sentences), and predicts them; the metrics compare them with the true tags. On
IOB2-tagged corpora ours (slr's and :mod:`slr.baselines`') take ``allowed_transitions="BIO"``: they
never decode an ``I-X`` that does not continue an ``X`` entity. CRFsuite decodes all transitions,
as sklearn-crfsuite's users run it.

Methods: ``slr:Linear`` (Linear oracles, ridge ``l2 = eps / C``, C and eps on the grid),
``slr:LightGBM`` (a LightGBM unary with its defaults, the Linear pairwise of the grid's C),
``crfsuite:lbfgs`` (python-crfsuite's L-BFGS on the same feature columns, c1 and c2 on their grid,
all transitions), our structured SVMs and perceptron (:mod:`slr.baselines`, C on the grid), and
pystruct 0.3.2's 1-slack SSVM, which is given the training features as scipy.sparse matrices: its
row holds what it does with them, measured in its own environment (it fits nothing else). A method that fails keeps a
row whose status holds the error.

For the slr rows the test score after every iteration (measured outside the fit's clock) is kept,
so the report can give the time at which each reaches the best peer's test score.
"""
from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from slr.suite.common import RunContext, reuse_data
from slr.suite.experiment import Cell, ExperimentBase, Table
from slr.suite.memory import peak_memory
from slr.suite.provenance import PROVENANCE_COLUMNS, RunInfo, config_hash
from slr.suite.store import CellRecord, RecordSpec

__all__ = ["COLUMNS", "CorpusCut", "METHODS", "NAME", "Nlp", "NlpSpec", "SPECS", "TABLES", "entity_f1_by_type",
           "featurize", "score"]

NAME = "nlp"
SEED = 0
SLR_METHODS = ("slr:Linear", "slr:LightGBM")
CRFSUITE_METHOD = "crfsuite:lbfgs"
# not NSlackSSVM: its working set keeps a dense weight-sized vector per example and constraint, which on
# these corpora (hundreds of thousands of weights, thousands of sentences) takes gigabytes in a few iterations
OUR_BASELINES = ("OneSlackSSVM", "SubgradientSSVM", "StructuredPerceptron")
PYSTRUCT_METHOD = "pystruct:OneSlackSSVM"
METHODS = (*SLR_METHODS, CRFSUITE_METHOD, *OUR_BASELINES, PYSTRUCT_METHOD)

COLUMNS = ["config", "corpus", "method", "status", "params", "validation_score", "test_score", "test_accuracy",
           "test_entity_f1", "seconds", "fit_mb", "peak_mb", "n_fits", "grid_seconds", "n_features", "n_train_tokens",
           *PROVENANCE_COLUMNS]
_TEXT = ("config", "corpus", "method", "status", "params", "test_entity_f1", "commit", "code", "command", "machine",
         "computed_at")
_NUMBER = (int, float, str)   # a failed row's numbers are ""
#: The slr rows also keep their test-score curves (seconds, score per iteration).
RECORD = RecordSpec(row={c: (str,) if c in _TEXT else (bool,) if c == "dirty" else _NUMBER for c in COLUMNS},
                    optional=dict(seconds=("f", ("n",)), test_score=("f", ("n",))))


@dataclass(frozen=True)
class CorpusCut:
    """A corpus of :data:`slr.datasets.tagged_text.TAGGED_CORPORA` cut to its first sentences per split
    (None: all)."""

    name: str
    n_train: int | None = None
    n_validation: int | None = None
    n_test: int | None = None

    def load(self):
        from slr.datasets.tagged_text import load_tagged_corpus

        return load_tagged_corpus(self.name).head(self.n_train, self.n_validation, self.n_test)


@dataclass(frozen=True)
class NlpSpec:
    """The corpora, features and grids of one profile.

    Attributes
    ----------
    corpora : tuple of CorpusCut
    window : int
        Neighbours on each side whose features a token gets.
    C, epsilon : tuple of float
        The ridge grid of every ridged method and slr:Linear's eps grid.
    crfsuite_c1, crfsuite_c2 : tuple of float
        CRFsuite's L1 and L2 grids.
    crfsuite_max_iter : int
        L-BFGS iterations of CRFsuite (sklearn-crfsuite's tutorial: 100).
    budgets : mapping
        Iterations of our baselines, by class name.
    lightgbm_rounds, lightgbm_max_iter : int
        Boosting rounds of slr:LightGBM's unary oracle at each fit, and that learner's iterations.
    methods : tuple of str
    held_out : tuple of str
        Corpora kept out of every choice of the library's defaults.
    """

    corpora: tuple[CorpusCut, ...]
    window: int
    C: tuple[float, ...]
    epsilon: tuple[float, ...]
    crfsuite_c1: tuple[float, ...]
    crfsuite_c2: tuple[float, ...]
    crfsuite_max_iter: int
    budgets: Mapping[str, int]
    lightgbm_rounds: int = 20
    lightgbm_max_iter: int = 10
    methods: tuple[str, ...] = METHODS
    held_out: tuple[str, ...] = ("hironsan", "turkish")
    pystruct_timeout: float = 600.0

    def config(self) -> dict[str, Any]:
        """Every setting, as the ``config`` column hashes it."""
        return asdict(self) | {"budgets": dict(self.budgets)}

    def grid(self, method: str) -> list[dict[str, float]]:
        """The parameter points tried for ``method``."""
        if method == "slr:Linear":
            return [dict(C=C, epsilon=eps) for eps in self.epsilon for C in self.C]
        if method == "slr:LightGBM":
            return [dict(C=C, epsilon=self.epsilon[0]) for C in self.C]
        if method == CRFSUITE_METHOD:
            return [dict(c1=c1, c2=c2) for c1 in self.crfsuite_c1 for c2 in self.crfsuite_c2]
        if method in ("StructuredPerceptron", PYSTRUCT_METHOD):
            return [{}]
        return [dict(C=C) for C in self.C]


_BUDGETS_TINY = dict(OneSlackSSVM=3, SubgradientSSVM=2, StructuredPerceptron=2)
_BUDGETS = dict(OneSlackSSVM=50, SubgradientSSVM=20, StructuredPerceptron=10)

SPECS = {
    "tiny": NlpSpec((CorpusCut("hironsan", 12, 6, 6),), window=1, C=(1.0,), epsilon=(0.1,), crfsuite_c1=(0.1,),
                    crfsuite_c2=(0.1,), crfsuite_max_iter=20, budgets=_BUDGETS_TINY, lightgbm_rounds=5,
                    lightgbm_max_iter=3),
    # cut for make report: the grids on the whole corpora would take most of its time, so 200 of the
    # Japanese training sentences and a tenth of the Turkish parts of speech
    "quick": NlpSpec((CorpusCut("hironsan", 200), CorpusCut("turkish", 400, 100, 485)), window=2, C=(0.1, 1.0),
                     epsilon=(0.1,), crfsuite_c1=(0.0, 0.1), crfsuite_c2=(0.01, 0.1), crfsuite_max_iter=100,
                     budgets=_BUDGETS, lightgbm_rounds=10, lightgbm_max_iter=5),
    "full": NlpSpec((CorpusCut("hironsan"), CorpusCut("turkish"), CorpusCut("conll2003"), CorpusCut("indonesian")),
                    window=2, C=(0.1, 1.0, 10.0), epsilon=(0.1, 1.0), crfsuite_c1=(0.0, 0.05, 0.1, 0.2),
                    crfsuite_c2=(0.01, 0.1, 1.0), crfsuite_max_iter=100, budgets=_BUDGETS),
}


@dataclass
class Featurized:
    """A corpus's chains and tags (string arrays) per split, and what scores them."""

    corpus: Any
    X: dict[str, list]
    Y: dict[str, list]
    n_features: int
    sentences: dict[str, Any] = field(default_factory=dict)


def featurize(cut: CorpusCut, window: int) -> Featurized:
    """The corpus's token dicts vectorised by a :class:`SequenceVectorizer` fitted on its training split."""
    from slr.datasets.text_features import sentence_features
    from slr.formats import SequenceVectorizer

    corpus = cut.load()
    dicts = {split: [sentence_features(tokens, None if s.pos is None else s.pos[k], window)
                     for k, tokens in enumerate(s.tokens)]
             for split, s in (("train", corpus.train), ("validation", corpus.validation), ("test", corpus.test))}
    vectorizer = SequenceVectorizer().fit(dicts["train"])
    X = {split: vectorizer.transform(d) for split, d in dicts.items()}
    Y = {split: [np.array(tags) for tags in corpus.split(split).tags] for split in X}
    return Featurized(corpus, X, Y, vectorizer.n_features_)


def score(corpus, Y_true: Sequence[np.ndarray], Y_pred: Sequence[np.ndarray]) -> tuple[float, float]:
    """``(score, token accuracy)`` of predicted tags: the score is entity F1 (conlleval's) for IOB
    tags, token accuracy otherwise."""
    from slr.metrics import entity_f1, node_accuracy

    accuracy = node_accuracy(Y_true, [np.asarray(y) for y in Y_pred])
    if corpus.scheme != "iob2":
        return accuracy, accuracy
    return entity_f1(Y_true, Y_pred), accuracy


def entity_f1_by_type(corpus, Y_true: Sequence[np.ndarray], Y_pred: Sequence[np.ndarray]) -> str:
    """The test entity F1 of every entity type (of the true and predicted tags) as JSON
    ``{type: f1}``; ``""`` for a corpus that is not IOB-tagged."""
    from slr.metrics import entity_scores_by_type

    if corpus.scheme != "iob2":
        return ""
    return json.dumps({kind: scores.f1 for kind, scores in entity_scores_by_type(Y_true, Y_pred).items()})


# -- the methods ------------------------------------------------------------------------------

def _transitions(corpus) -> str | None:
    """The ``allowed_transitions`` of our learners on ``corpus``: IOB2's rules on an IOB2 corpus
    (no ``I-X`` after anything but ``B-X`` or ``I-X``, nor first), none on plain tags."""
    return "BIO" if corpus.scheme == "iob2" else None


def _slr(method: str, point: Mapping[str, float], spec: NlpSpec, n_threads: int | None, transitions: str | None):
    from slr.learner import StructuredLogisticRegression
    from slr.oracles import LightGBM, Linear

    eps, l2 = point["epsilon"], point["epsilon"] / point["C"]
    if method == "slr:Linear":
        return StructuredLogisticRegression(Linear(l2=l2), Linear(l2=l2), epsilon=eps, monitor=False,
                                            n_jobs=n_threads, random_state=SEED, allowed_transitions=transitions)
    # LightGBM's own default of one thread unless the run sets a count: on a shared machine its
    # OpenMP threads spin against slr's
    unary = LightGBM(n_rounds=spec.lightgbm_rounds, n_jobs=n_threads or 1, random_state=SEED)
    return StructuredLogisticRegression(unary, Linear(l2=l2), epsilon=eps, monitor=False,
                                        max_iter=spec.lightgbm_max_iter, n_jobs=n_threads, random_state=SEED,
                                        allowed_transitions=transitions)


def _crfsuite_items(nodes):
    """python-crfsuite items of one chain: attribute ``<column>`` with its value, zeros omitted."""
    import pycrfsuite
    import scipy.sparse as sp

    rows = sp.csr_matrix(nodes)
    return pycrfsuite.ItemSequence([
        {str(j): float(v) for j, v in zip(rows.indices[a:b], rows.data[a:b])}
        for a, b in zip(rows.indptr[:-1], rows.indptr[1:])])


class _CRFsuite:
    """CRFsuite's L-BFGS on the chains' feature columns, as sklearn-crfsuite runs it (state features
    of the attributes seen with each label, every transition)."""

    def __init__(self, c1: float, c2: float, max_iter: int) -> None:
        self.params = {"c1": c1, "c2": c2, "max_iterations": max_iter, "feature.possible_transitions": True}

    def fit(self, X, Y) -> "_CRFsuite":
        import pycrfsuite

        trainer = pycrfsuite.Trainer(algorithm="lbfgs", verbose=False)
        trainer.set_params(self.params)
        for (nodes, _, _), y in zip(X, Y):
            trainer.append(_crfsuite_items(nodes), [str(tag) for tag in y])
        with tempfile.TemporaryDirectory(prefix="slr-crfsuite-") as tmp:
            path = str(Path(tmp) / "model.crfsuite")
            trainer.train(path)
            self.model_bytes_ = Path(path).read_bytes()
        return self

    def predict(self, X) -> list[np.ndarray]:
        import pycrfsuite

        tagger = pycrfsuite.Tagger()
        tagger.open_inmemory(self.model_bytes_)
        return [np.array(tagger.tag(_crfsuite_items(nodes))) for nodes, _, _ in X]


def _learner(method: str, point: Mapping[str, float], spec: NlpSpec, n_threads: int | None,
             transitions: str | None):
    if method in SLR_METHODS:
        return _slr(method, point, spec, n_threads, transitions)
    if method == CRFSUITE_METHOD:
        return _CRFsuite(point["c1"], point["c2"], spec.crfsuite_max_iter)
    from slr import baselines

    own = {} if method == "StructuredPerceptron" else dict(C=point["C"])
    if method == "SubgradientSSVM":
        own["batch_size"] = 1
    return getattr(baselines, method)(max_iter=spec.budgets[method], random_state=SEED, n_jobs=n_threads,
                                      allowed_transitions=transitions, **own)


@dataclass
class _Fit:
    point: dict
    validation_score: float
    seconds: float
    fit_mb: float
    peak_mb: float
    model: Any
    curve: tuple[list[float], list[float]]


def _fit_point(method: str, point: Mapping[str, float], spec: NlpSpec, data: Featurized,
               n_threads: int | None) -> _Fit:
    """One fit on the training split, timed and measured; scored on the validation split."""
    model = _learner(method, point, spec, n_threads, _transitions(data.corpus))
    seconds, scores = [], []
    kwargs = {}
    if method in SLR_METHODS:
        def record(iterate) -> None:
            seconds.append(iterate.seconds)
            scores.append(score(data.corpus, data.Y["test"], iterate.predict(data.X["test"]))[0])

        kwargs["callback"] = record
    with peak_memory() as memory:
        start = time.perf_counter()
        model.fit(data.X["train"], data.Y["train"], **kwargs)
        wall = time.perf_counter() - start
    if method in SLR_METHODS:
        wall = float(model.history_["seconds"].iloc[-1])   # the fit's clock, callback excluded
    validation = score(data.corpus, data.Y["validation"], model.predict(data.X["validation"]))[0]
    return _Fit(dict(point), validation, wall, memory.extra_mb, memory.peak_mb, model, (seconds, scores))


_PYSTRUCT_PROBE = """
import json, sys, numpy as np, scipy.sparse as sp
from pystruct.models import ChainCRF
from pystruct.learners import OneSlackSSVM
z = np.load(sys.argv[1])
rows = sp.csr_matrix((z['data'], z['indices'], z['indptr']), shape=tuple(z['shape']))
bounds = np.concatenate([[0], np.cumsum(z['lengths'])])
X = [rows[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
Y = [z['labels'][a:b] for a, b in zip(bounds[:-1], bounds[1:])]
try:
    OneSlackSSVM(ChainCRF(n_states=int(z['L']), n_features=rows.shape[1]), C=1.0, max_iter=5).fit(X, Y)
    out = 'ok'
except Exception as exc:
    out = type(exc).__name__ + ': ' + (str(exc).splitlines() or [''])[0]
print(json.dumps(out))
"""


def pystruct_on_sparse(X: Sequence, Y: Sequence, timeout: float) -> str:
    """What pystruct 0.3.2's ``OneSlackSSVM(ChainCRF)`` does with the chains' node features as
    scipy.sparse CSR matrices (one per chain), run in its environment: ``"ok"``, or its error as
    ``Type: message``. The tags go to pystruct as the codes slr's learners use (pystruct takes
    integer labels only).

    Raises
    ------
    RuntimeError
        When the pystruct environment is not available here.
    """
    import scipy.sparse as sp

    from slr.baselines.peer import peer_python
    from slr.labels import fit_labels

    python = peer_python()
    if python is None:
        raise RuntimeError("the pystruct 0.3.2 environment is not built here")
    rows = sp.csr_matrix(sp.vstack([sp.csr_matrix(nodes) for nodes, _, _ in X]))
    codes, classes = fit_labels(Y, None)
    n_states = len(classes) if classes is not None else int(max(np.max(y) for y in codes)) + 1
    with tempfile.TemporaryDirectory(prefix="slr-pystruct-sparse-") as tmp:
        path = Path(tmp) / "problem.npz"
        np.savez(path, data=rows.data, indices=rows.indices, indptr=rows.indptr, shape=np.array(rows.shape),
                 lengths=np.array([len(y) for y in Y]), labels=np.concatenate(codes), L=n_states)
        proc = subprocess.run([str(python), "-c", _PYSTRUCT_PROBE, str(path)], capture_output=True, text=True,
                              timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return f"the pystruct process failed (status {proc.returncode}): {proc.stderr.strip()[-300:]}"
    return json.loads(lines[-1])


# -- cells -------------------------------------------------------------------------------------

def _failed_row(spec: NlpSpec, cut: CorpusCut, method: str, status: str, info: RunInfo) -> dict:
    row = {c: "" for c in COLUMNS}
    row.update(config=config_hash(spec.config()), corpus=cut.name, method=method, status=status, params="",
               **info.row_fields())
    return row


def compute_cell(spec: NlpSpec, cut: CorpusCut, method: str, info: RunInfo, n_threads: int | None) -> CellRecord:
    """Fit ``method`` on ``cut`` at every grid point; the validation's best on the test split."""
    from slr.suite.methods import failure_status

    data = reuse_data(f"nlp/{cut} window={spec.window}", lambda: featurize(cut, spec.window))
    if method == PYSTRUCT_METHOD:
        from slr.baselines.peer import peer_python

        if peer_python() is None:
            status = "skipped: the pystruct 0.3.2 environment is not built here"
        else:
            try:
                outcome = pystruct_on_sparse(data.X["train"], data.Y["train"], spec.pystruct_timeout)
            except Exception as exc:
                outcome = failure_status(exc)
            status = "ok" if outcome == "ok" else f"failed on sparse input: {outcome}"[:300]
        return CellRecord(row=_failed_row(spec, cut, method, status, info))
    grid_start = time.perf_counter()
    try:
        fits = [_fit_point(method, point, spec, data, n_threads) for point in spec.grid(method)]
    except Exception as exc:
        return CellRecord(row=_failed_row(spec, cut, method, failure_status(exc), info))
    best = max(fits, key=lambda f: f.validation_score)   # the first of equal scores
    test_pred = best.model.predict(data.X["test"])
    test_score, test_accuracy = score(data.corpus, data.Y["test"], test_pred)
    row = dict(config=config_hash(spec.config()), corpus=cut.name, method=method, status="ok",
               params=json.dumps(best.point, sort_keys=True), validation_score=best.validation_score,
               test_score=test_score, test_accuracy=test_accuracy,
               test_entity_f1=entity_f1_by_type(data.corpus, data.Y["test"], test_pred),
               seconds=best.seconds, fit_mb=best.fit_mb,
               peak_mb=best.peak_mb, n_fits=len(fits), grid_seconds=time.perf_counter() - grid_start,
               n_features=int(data.n_features), n_train_tokens=int(sum(len(y) for y in data.Y["train"])),
               **info.row_fields())
    arrays = {}
    if best.curve[0]:
        arrays = {"seconds": np.asarray(best.curve[0], dtype=float),
                  "test_score": np.asarray(best.curve[1], dtype=float)}
    return CellRecord(row=row, arrays=arrays)


def _curve_rows(record: CellRecord) -> list[dict]:
    row, arrays = record.row, record.arrays
    return [{"config": row["config"], "corpus": row["corpus"], "method": row["method"], "point": i,
             "seconds": float(s), "test_score": float(v)}
            for i, (s, v) in enumerate(zip(arrays.get("seconds", ()), arrays.get("test_score", ())))]


TABLES = (Table("nlp_results.csv", COLUMNS, ("config", "corpus", "method")),
          Table("nlp_curves.csv", ["config", "corpus", "method", "point", "seconds", "test_score"],
                ("config", "corpus", "method", "point"), _curve_rows))

#: Relative cost of a method's cell (the costliest start first).
_COST = {"slr:LightGBM": 4.0, "OneSlackSSVM": 3.0, "slr:Linear": 2.0, "SubgradientSSVM": 2.0}


class Nlp(ExperimentBase):
    """Text tagging as an :class:`slr.suite.experiment.Experiment`."""

    name = NAME
    record = RECORD
    help = "text tagging (entities, parts of speech) with sparse token features: slr against CRFsuite and the SSVMs"
    specs = SPECS
    tables = TABLES

    def cells(self, profile, selection, done, ctx: RunContext) -> list[Cell]:
        spec = self.spec(profile)
        config = dict(window=spec.window, C=spec.C, epsilon=spec.epsilon, c1=spec.crfsuite_c1, c2=spec.crfsuite_c2,
                      crfsuite_max_iter=spec.crfsuite_max_iter, budgets=dict(spec.budgets))
        return [Cell(label=f"{cut.name}:{method}", identity=dict(corpus=cut.name, method=method),
                     config=dict(config, corpus=asdict(cut)), seed=SEED, args=(cut, method),
                     cost=_COST.get(method, 1.0) * (cut.n_train or 1000))
                for cut in spec.corpora for method in spec.methods]

    def compute(self, spec: NlpSpec, cells: Sequence[Cell], info: RunInfo, *,
                n_threads: int | None) -> list[CellRecord]:
        return [compute_cell(spec, *c.args, info, n_threads) for c in cells]

    def keep(self, record: CellRecord) -> bool:
        return record.row["status"] == "ok"

    def describe(self, record: CellRecord) -> str:
        row = record.row
        if row["status"] != "ok":
            return f"{row['corpus']}: {row['method']}: {row['status']}"
        return (f"{row['corpus']}: {row['method']} {row['params']}: test={row['test_score']:.4f} "
                f"({row['seconds']:.1f}s, {row['fit_mb']:.0f} MB)")
