"""Collins' structured perceptron with weight averaging."""
from __future__ import annotations

import numpy as np

from slr.baselines.base import BaseStructuredLearner
from slr.baselines.features import StructuredData
from slr._params import Boolean, Integer
from slr.validation import check_generator

__all__ = ["StructuredPerceptron"]


class StructuredPerceptron(BaseStructuredLearner):
    """Structured perceptron (Collins 2002): online, plain MAP inference, averaged weights.

    For each example in turn, ``y_hat = argmax_y w . psi(x, y)``; if ``y_hat != y`` then
    ``w += psi(x, y) - psi(x, y_hat)``. The returned weights are the average of ``w`` over
    all example visits (Collins' averaged perceptron) when ``average=True``. On separable
    data with exact inference the number of mistakes is bounded (Novikoff / Collins), so
    training error reaches zero.

    Weights (:mod:`slr.baselines.weights`) scale the updates; decoding stays plain MAP (no
    loss-augmented decoding, so no margin). Example ``k`` of weight ``s_k`` updates by
    ``s_k (psi(x, y) - psi(x, y_hat))``, with each node's unary term scaled by
    ``class_weight[y_i]``: class weights scale the updates of the mislabelled nodes by the
    weight of their true label (correct nodes add nothing to an update) and leave the
    pairwise terms alone. An example of weight 0 is never visited (no update, not counted in
    the average), so it is the same as leaving it out.

    Parameters
    ----------
    max_iter : int, default=50
        Epochs. Training stops early once the returned weights make no training error.
    average : bool, default=True
    shuffle : bool, default=True
        Visit the examples in a random order each epoch.
    model, max_sweeps, inference_tol, n_states, n_jobs, verbose, symmetric_pairwise, allowed_transitions
        As in :class:`slr.baselines.ssvm.OneSlackSSVM`.
    random_state : None, int or Generator
        Seed of the visiting order.
    class_weight : None, "balanced" or dict, default=None
        Label weights of the unary updates (see above).

    Attributes
    ----------
    history_ : pandas.DataFrame
        Per epoch: ``objective`` is NaN (the perceptron has no objective),
        ``train_error`` the per-node error of the returned weights' MAP prediction (each node
        weighted by its example's ``sample_weight``); training stops early when it is 0.
    n_mistakes_ : list of int
        Examples mispredicted during each epoch.
    """

    _parameter_constraints = {**BaseStructuredLearner._parameter_constraints,
                              "max_iter": Integer(1), "average": Boolean(), "shuffle": Boolean(),
                              "symmetric_pairwise": Boolean()}

    def __init__(self, max_iter: int = 50, average: bool = True, shuffle: bool = True,
                 model: str = "auto", max_sweeps: int = 200, inference_tol: float = 1e-7,
                 n_states: int | None = None, n_jobs: int | None = None, verbose: int = 0,
                 random_state=None, class_weight=None,
                 symmetric_pairwise: bool = False, allowed_transitions=None) -> None:
        self.max_iter, self.average, self.shuffle = max_iter, average, shuffle
        self.model, self.max_sweeps, self.inference_tol = model, max_sweeps, inference_tol
        self.n_states, self.n_jobs, self.verbose, self.random_state = n_states, n_jobs, verbose, random_state
        self.class_weight = class_weight
        self.allowed_transitions = allowed_transitions
        self.symmetric_pairwise = symmetric_pairwise

    def _fit(self, data: StructuredData) -> None:
        rng = check_generator(self.random_state)
        # one single-example StructuredData per example of positive weight, built once
        # (inference per example)
        visited = range(data.n_examples) if data.sample_weight is None else np.flatnonzero(data.sample_weight)
        singles = [data.subset([k]) for k in visited]
        w = np.zeros(data.size)
        u = np.zeros(data.size)  # sum of c * update: average = w - u / c
        c = 1
        self.n_mistakes_ = []
        for epoch in range(self.max_iter):
            order = rng.permutation(len(singles)) if self.shuffle else range(len(singles))
            mistakes = 0
            for k in order:
                single = singles[k]
                y_hat = single.decode(*single.potentials(w))
                y = single.labels
                if np.any(y_hat != y):
                    mistakes += 1
                    update = self._update(single, y, y_hat)
                    w += update
                    u += c * update
                c += 1
            w_ret = w - u / c if self.average else w
            self.n_mistakes_.append(mistakes)
            error = self._train_error(data, w_ret)
            self._log(epoch, float("nan"), w_ret, error)
            if error == 0.0 and (mistakes == 0 or self.average):
                break
        self.w_ = w - u / c if self.average else w.copy()
        self.n_iter_ = epoch + 1

    @staticmethod
    def _update(single: StructuredData, y: np.ndarray, y_hat: np.ndarray) -> np.ndarray:
        true_n, true_e = single.onehot(y)
        hat_n, hat_e = single.onehot(y_hat)
        node, edge = true_n - hat_n, true_e - hat_e
        if single.class_weight is not None:
            node *= single.class_weight[y][:, None]
        update = single.joint_feature(node, edge)
        return update if single.sample_weight is None else single.sample_weight[0] * update
