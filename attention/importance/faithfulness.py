"""Faithfulness (comprehensiveness, DeYoung et al. 2020) of each importance method.

Placeholder: the statistics part of issue 33 replaces this body."""
from __future__ import annotations

import pandas as pd


def faithfulness(model, texts, fractions=(0.1, 0.2, 0.3, 0.5)) -> pd.DataFrame:
    """Columns method, fraction, change, ci_low, ci_high, aopc."""
    raise NotImplementedError("faithfulness is not written yet")
