"""Shared plumbing of the linear baseline learners: parameters, a transactional fit, history,
primal objective."""
from __future__ import annotations

import copy
import sys
from typing import Any, Callable, Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from slr.baselines.features import StructuredData
from slr.baselines.weights import CLASS_WEIGHT
from slr._params import Boolean, Integer, NJobs, Options, RandomState, Real, validate_params
from slr.estimator import FitHistory, StructuredEstimator, validation_data
from slr.labels import check_class_count, encode_class_weight, encode_labels, fit_labels, integer_classes
from slr.models import INFERENCE
from slr.transitions import TRANSITIONS, resolve_scheme

__all__ = ["BaseStructuredLearner"]


def _is_fitted_name(name: str) -> bool:
    """scikit-learn's rule for a fitted attribute: a trailing underscore, no leading double one."""
    return name.endswith("_") and not name.startswith("__")


class BaseStructuredLearner(StructuredEstimator):
    """Base class: a linear model over :class:`slr.baselines.features.StructuredData`.

    Subclasses declare ``_parameter_constraints`` (this class's merged with their own; see
    :mod:`slr._params`) and implement ``_fit(data)``, which sets ``self.w_`` and records every
    iteration through :meth:`_log`; ``data`` carries the checked ``sample_weight`` and
    ``class_weight`` (:meth:`StructuredData.weigh`), which ``_fit`` honours. The contract
    (``fit``, ``predict``, ``score``, ``history_``) is :class:`slr.estimator.StructuredEstimator`'s;
    ``objective`` in the history is the learner's primal objective.

    ``fit`` is transactional: it checks the parameters, ``X``, ``Y``, ``X_val`` and ``Y_val``
    before any work, fits a twin of the estimator that holds the checked parameters and no
    fitted state, and only when that has succeeded replaces the fitted attributes. A fit that
    raises leaves a fitted model exactly as it was. Prediction uses the inference settings
    (``model``, ``max_sweeps``, ``inference_tol``, ``n_jobs``) of the last successful fit, so a
    ``set_params`` takes effect at the next fit.

    Attributes
    ----------
    w_ : ndarray of shape (L * d_u + L * L * d_e,)
        The weights (layout in :mod:`slr.baselines.features`; ``L (L + 1) / 2 * d_e`` pairwise ones
        with ``symmetric_pairwise``).
    n_states_ : int
    classes_ : ndarray of shape (n_classes,)
        The labels, sorted (``arange(n_states_)`` for integer labels).
    dims_ : tuple of int
        ``(d_u, d_e)`` of the training data.
    inference_ : dict
        The prediction inference settings of the fit, and its pairwise tying (keywords of
        :class:`StructuredData`).
    class_weight_ : ndarray of shape (n_states,)
        The weight of each label in the fit (ones for ``class_weight=None``; see :mod:`slr.baselines.weights`).
    history_ : pandas.DataFrame
    """

    _parameter_constraints: dict = {
        "model": Options(INFERENCE),
        "n_states": (None, Integer(2)),
        "max_sweeps": Integer(1),
        "inference_tol": Real(0.0),
        "n_jobs": NJobs(),
        "verbose": (Integer(0), Boolean()),
        "random_state": RandomState(),
        "class_weight": CLASS_WEIGHT,
        "allowed_transitions": TRANSITIONS,
    }

    def fit(self, X: Sequence, Y: Sequence, X_val: Sequence | None = None,
            Y_val: Sequence | None = None, sample_weight: Sequence | None = None) -> "BaseStructuredLearner":
        """Learn the weights.

        Parameters
        ----------
        X : sequence of (node_features (n, d_u), edges (m, 2), edge_features (m, d_e))
            Feature matrices dense or ``scipy.sparse`` (kept sparse: the joint feature map and the
            potentials are sparse-dense products).
        Y : sequence of label arrays (n,)
            Integer labels, or labels of any hashable type that sort (``classes_``; see
            :mod:`slr.labels`).
        X_val, Y_val : optional
            Validation data in the same format, for ``history_["val_error"]``.
        sample_weight : array-like of shape (len(X),), optional
            Weight of each example's term in the objective (finite, >= 0, not all 0); see
            :mod:`slr.baselines.weights`.

        Returns
        -------
        self
        """
        params = self._checked_params()
        codes, classes = fit_labels(Y, None)
        return self._fit_on(params, lambda settings, n_states: StructuredData(X, codes, n_states, **settings),
                            X_val, Y_val, sample_weight, classes)

    def _checked_params(self) -> dict[str, Any]:
        """Every parameter checked (:func:`slr._params.validate_params` and :meth:`_validate_extra`),
        before any data is read."""
        params = validate_params(self)
        self._validate_extra()
        return params

    def _fit_on(self, params: dict[str, Any], make_data: Callable[[dict[str, Any], int | None], StructuredData],
                X_val: Sequence | None = None, Y_val: Sequence | None = None,
                sample_weight: Sequence | None = None, classes: np.ndarray | None = None) -> "BaseStructuredLearner":
        """:meth:`fit` with the checked ``params`` on the data ``make_data(inference settings, n_states)``
        builds (a latent SSVM's completed labellings, with the nodes its loss counts and the states they
        may take), its codes those of ``classes`` (None: integer labels, :func:`slr.labels.fit_labels`)."""
        fitting = self._twin(params)
        fitting.inference_ = fitting._inference_settings(classes)
        data = make_data(fitting.inference_, fitting.n_states)
        check_class_count(classes, fitting.n_states)
        fitting.classes_ = integer_classes(data.n_states) if classes is None else classes
        if data.energy.transitions is not None:
            data.energy.transitions.check_labels(data.batch, data.labels)
        fitting.class_weight_ = data.weigh(sample_weight, encode_class_weight(fitting.class_weight, classes))
        fitting.n_states_ = data.n_states
        fitting.dims_ = (data.d_u, data.d_e)
        fitting._history = FitHistory(data, validation_data(X_val, Y_val,
                                                            lambda X, Y: fitting._data(X, encode_labels(Y, classes),
                                                                                       "X_val")))
        # the products here are small; BLAS threads only contend with the OpenMP kernels
        # and other jobs on a shared machine (as in slr.oracles.linear)
        with threadpool_limits(limits=1, user_api="blas"):
            fitting._fit(data)
        fitting.history_ = fitting._history.frame()
        self._commit_fit({name: value for name, value in vars(fitting).items() if _is_fitted_name(name)})
        return self

    def _validate_extra(self) -> None:
        """Checks beyond ``_parameter_constraints`` (nested oracles, optional dependencies)."""

    def _twin(self, params: dict[str, Any]) -> "BaseStructuredLearner":
        """A shallow copy holding the checked parameters (ints as int, reals as float, verbose as
        an int) and none of the fitted state: the object a fit works on. Parameters are shared,
        not copied, so a Generator given as ``random_state`` advances as the caller expects."""
        twin = copy.copy(self)
        for name in [name for name in vars(twin) if _is_fitted_name(name)]:
            delattr(twin, name)
        params["verbose"] = int(params["verbose"])
        vars(twin).update(params)
        return twin

    def _inference_settings(self, classes: np.ndarray | None = None) -> dict[str, Any]:
        """The keywords of :class:`StructuredData` the fit sets: inference (a tagging scheme of
        ``allowed_transitions`` resolved to its mask over the tags ``classes``, where they are not
        integers), and the pairwise tying of the learners that take ``symmetric_pairwise``."""
        settings = dict(model=self.model, max_sweeps=self.max_sweeps, tol=self.inference_tol, n_jobs=self.n_jobs,
                        allowed_transitions=resolve_scheme(self.allowed_transitions,
                                                           None if classes is None else classes.tolist()))
        if "symmetric_pairwise" in self._parameter_constraints:
            settings["symmetric_pairwise"] = self.symmetric_pairwise
        return settings

    def _data(self, X: Sequence, Y: Sequence | None = None, name: str = "X") -> StructuredData:
        return StructuredData(X, Y, self.n_states_, dims=self.dims_, name=name, **self.inference_)

    def _fit(self, data: StructuredData) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers
    def _log(self, iteration: int, objective: float, w: np.ndarray | None,
             train_error: float = float("nan")) -> None:
        """A history row for the weights ``w`` (the fitted state when None); the validation
        error is measured under them."""
        decode = self._predict_flat if w is None else (lambda data: data.decode(*data.potentials(w)))
        row = self._history.record(iteration, objective, train_error, decode=decode)
        if self.verbose:
            print(f"[{type(self).__name__}] iter {iteration:4d}  objective {objective:.6g}  "
                  f"train error {row['train_error']:.4f}  {row['seconds']:.2f}s", file=sys.stderr)

    @staticmethod
    def _primal(w: np.ndarray, data: StructuredData, slack: np.ndarray, C: float) -> float:
        """``0.5 ||w||^2 + C sum_k sample_weight[k] slack_k`` (the weights of ``data``)."""
        return float(0.5 * w @ w + C * data.weighted_sum(slack))

    @staticmethod
    def _train_error(data: StructuredData, w: np.ndarray) -> float:
        return BaseStructuredLearner._node_error(data, data.decode(*data.potentials(w)))

    @staticmethod
    def _node_error(data: StructuredData, labels: np.ndarray) -> float:
        """The per-node error of a flat labelling, each node weighted by its example's weight."""
        wrong = labels != data.labels
        weights = data.node_weights()
        return float(np.mean(wrong) if weights is None else np.average(wrong, weights=weights))

    # ------------------------------------------------------------------ public
    def _predict_flat(self, data: StructuredData) -> np.ndarray:
        return data.decode(*self._potentials(data))

    def _potentials(self, data: StructuredData) -> tuple[np.ndarray, np.ndarray]:
        return data.potentials(self.w_)

    def decision_potentials(self, X: Sequence) -> tuple[StructuredData, np.ndarray, np.ndarray]:
        """The data in flat form and its potentials ``theta_nodes``, ``theta_edges`` under the fit."""
        self._check_fitted()
        data = self._data(X)
        return (data, *self._potentials(data))

    def primal_objective(self, X: Sequence, Y: Sequence, C: float | None = None,
                         sample_weight: Sequence | None = None) -> float:
        """``0.5 ||w||^2 + C * sum_k sample_weight[k] slack_k`` at ``w_`` (``C`` defaults to the
        learner's), the slacks under the fit's weighted Hamming loss (``class_weight_``)."""
        self._check_fitted()
        C = getattr(self, "C", 1.0) if C is None else C
        data = self._data(X, self._fitted_labels(Y))
        data.weigh(sample_weight)
        if self.class_weight is not None:
            data.class_weight = self.class_weight_
        return self._primal(self.w_, data, data.loss_augmented(self.w_)[3], C)
