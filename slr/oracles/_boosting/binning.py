"""Binning of the features for the histogram split search (:mod:`.histogram`)."""
from __future__ import annotations

import numpy as np

__all__ = ["MAX_BINS", "bin_features"]

#: Bins per feature at most (the bin codes are uint8).
MAX_BINS = 255


def bin_features(features: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bin every feature into at most ``MAX_BINS`` intervals of its values, in order.

    A feature with at most ``MAX_BINS`` distinct values gets one bin per value (so the
    histogram split search finds the exact search's splits); one with more gets bins of
    about equal row counts, whose edges lie between distinct values (quantiles).

    Parameters
    ----------
    features : ndarray of shape (N, d), float64

    Returns
    -------
    codes : ndarray of shape (d, N), uint8
        The bin of every value; bins are numbered by increasing values.
    n_bins : ndarray of shape (d,), intp
    bin_low, bin_high : ndarray of shape (d, MAX_BINS), float64
        Smallest and largest value in each bin (zero beyond ``n_bins``).
    """
    n, d = features.shape
    codes = np.empty((d, n), dtype=np.uint8)
    n_bins = np.empty(d, dtype=np.intp)
    bin_low = np.zeros((d, MAX_BINS))
    bin_high = np.zeros((d, MAX_BINS))
    for f, column in enumerate(np.ascontiguousarray(features.T)):
        order = np.argsort(column)
        ordered = column[order]
        first = np.empty(n, dtype=bool)  # the first of each distinct value, in order
        first[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
        value_of = np.cumsum(first) - 1  # distinct value number of every ordered entry
        values = ordered[first]
        if values.size <= MAX_BINS:
            ends = np.arange(values.size)
        else:
            ends = _quantile_ends(np.append(np.flatnonzero(first[1:]), n - 1) + 1)
        n_bins[f] = ends.size
        bin_high[f, :ends.size] = values[ends]
        bin_low[f, :ends.size] = values[np.concatenate(([0], ends[:-1] + 1))]
        bin_of_value = np.repeat(np.arange(ends.size, dtype=np.uint8), np.diff(ends, prepend=-1))
        codes[f, order] = bin_of_value[value_of]
    return codes, n_bins, bin_low, bin_high


def _quantile_ends(cumulative: np.ndarray) -> np.ndarray:
    """The last value of each of ``MAX_BINS`` bins of about equal counts.

    ``cumulative[v]`` counts the rows with a value up to distinct value ``v``. Greedy:
    each bin takes its share of the rows left for the bins left, so a value holding
    many rows fills one bin and the others share the rest.
    """
    cumulative = cumulative.astype(np.float64)  # searchsorted would convert it every call
    n_values, n = cumulative.size, cumulative[-1]
    ends: list[int] = []
    end = -1
    for bins_left in range(MAX_BINS, 0, -1):
        if n_values - 1 - end <= bins_left:
            ends.extend(range(end + 1, n_values))
            break
        done = cumulative[end] if end >= 0 else 0
        end = max(end + 1, int(np.searchsorted(cumulative, done + (n - done) / bins_left)))
        ends.append(end)
        if end == n_values - 1:
            break
    return np.asarray(ends, dtype=np.intp)
