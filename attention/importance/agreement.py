"""Agreement of each importance method with a reference, with intervals and null bands.

Placeholder: the statistics part of issue 33 replaces this body."""
from __future__ import annotations

import pandas as pd


def agreement(table: pd.DataFrame, against: str = "occlusion", words_only: bool = True,
              n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """One row per method and layer: method, layer, spearman, ci_low, ci_high, null_low,
    null_high, texts, pieces."""
    raise NotImplementedError("agreement is not written yet")
