"""The profiles' letters cut: words drawn at random from the folds, not a fold's first words."""
from __future__ import annotations

import numpy as np

from slr.suite.methods import LettersData


def test_the_cut_draws_distinct_words_of_each_part_in_the_folds_order_and_the_same_each_time():
    folds = np.repeat([1, 2, 3, 1, 4], [50, 40, 30, 50, 30])
    train, test = LettersData(n_train=30, n_test=40).indices(folds)
    assert train.size == np.unique(train).size == 30 and np.all(np.diff(train) > 0)
    assert test.size == np.unique(test).size == 40 and np.all(np.diff(test) > 0)
    assert np.all(folds[train] == 1) and np.all(folds[test] != 1)
    assert train.max() >= 50   # from the whole of fold 1, not its first words
    again = LettersData(n_train=30, n_test=40).indices(folds)
    np.testing.assert_array_equal(train, again[0])
    np.testing.assert_array_equal(test, again[1])
    # the training words do not depend on how many test words are drawn
    np.testing.assert_array_equal(train, LettersData(n_train=30, n_test=None).indices(folds)[0])


def test_none_or_more_than_a_part_holds_takes_all_of_it():
    folds = np.repeat([1, 2], [10, 20])
    train, test = LettersData(n_train=None, n_test=500).indices(folds)
    np.testing.assert_array_equal(train, np.arange(10))
    np.testing.assert_array_equal(test, np.arange(10, 30))
