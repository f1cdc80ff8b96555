"""Spearman's rank correlation, the one every page and script uses.

Convention: Pearson's r of the ranks, ties given their average rank (scipy.stats.spearmanr).
NaN, never a number, when it is undefined or meaningless: fewer than 3 pairs, a NaN in
either input, or a constant input (no ranking to correlate). Callers average with nanmean
and count the texts that had a value.
"""
from __future__ import annotations

import math

import numpy as np

MIN_PAIRS = 3


def spearman(a, b) -> float:
    """rho of two equal-length sequences, or NaN (see the module's convention)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"expected two 1-D sequences of one length, got {x.shape} and {y.shape}")
    if x.size < MIN_PAIRS or np.isnan(x).any() or np.isnan(y).any():
        return math.nan
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    from scipy.stats import spearmanr   # lazily: docs/architecture.md, "Imports"
    return float(spearmanr(x, y).statistic)


def ranks(x: np.ndarray, axis: int) -> np.ndarray:
    """Average ranks along `axis` (ties share their mean rank, 1-based), float64: the ranks
    spearman correlates, for callers that correlate many rows at once."""
    from scipy.stats import rankdata   # lazily: docs/architecture.md, "Imports"
    return rankdata(x, axis=axis)
