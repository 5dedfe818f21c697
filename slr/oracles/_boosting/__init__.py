"""Kernels of the boosted regression trees (chapter Sec. 1.9.4), one concern a module.

:class:`slr.oracles.BoostedTrees` drives them; one round of boosting uses, in order:

* :mod:`.logistic` -- :func:`~.logistic.subset_gradient`: margins and the log-likelihood
  gradient on the round's rows, the targets of the trees;
* :mod:`.growth` -- :func:`~.growth.grow_tree` / :func:`~.growth.grow_tree_hist`: one
  regression tree, best split first, on the squared loss, with the split search of
  :mod:`.splitting` (exact, on every feature's sorted rows) or of :mod:`.histogram`
  (on the features binned once per fit by :mod:`.binning`);
* :mod:`.logistic` -- :func:`~.logistic.refit_leaves` / :func:`~.logistic.refit_class_leaves`:
  the leaves re-fitted to the biased logistic loss, splits fixed;
* :mod:`.predictor` -- :func:`~.predictor.add_tree`: the tree added to every row's scores;
  :func:`~.predictor.predict_ensemble` evaluates a whole ensemble.

Trees travel between them in the records of :mod:`.tree` (:class:`~.tree.GrownTree`,
:class:`~.tree.Tree`); ``common.pxd`` declares what the split searches share with the
growth. The Cython functions are ``nogil`` inside and check nothing: the Python layer
(``slr.oracles.trees``) validates their inputs.
"""
