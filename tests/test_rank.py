"""attention.measures.rank.spearman, the project's one rank correlation, against hand-computed
cases and pandas' own rank correlation, with its convention for undefined cases."""
import math

import numpy as np
import pandas as pd
import pytest

from attention.measures.rank import spearman


def test_hand_computed_cases():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks (1, 2, 3) vs (1, 3, 2): 1 - 6 * (0 + 1 + 1) / (3 * 8) = 0.5
    assert spearman([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)
    # ranks (1, 2, 3, 4) vs (1, 2, 4, 3): 1 - 6 * 2 / (4 * 15) = 0.8
    assert spearman([1, 2, 3, 4], [10, 20, 30, 25]) == pytest.approx(0.8)


def test_ties_take_their_average_rank_as_pandas_does():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 5, 200).astype(float)            # many ties
    b = a + rng.normal(size=200)
    expected = pd.Series(a).rank().corr(pd.Series(b).rank())
    assert spearman(a, b) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("a, b", [
    ([1, 1, 1], [1, 2, 3]),            # constant: no ranking
    ([1, 2, 3], [5, 5, 5]),
    ([1, 2], [2, 1]),                  # fewer than 3 pairs
    ([], []),
    ([1, 2, float("nan")], [1, 2, 3]),
])
def test_undefined_cases_are_nan(a, b):
    assert math.isnan(spearman(a, b))


def test_unequal_lengths_are_a_programming_error():
    with pytest.raises(ValueError):
        spearman([1, 2, 3], [1, 2])
