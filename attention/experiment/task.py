"""The "Is sharper better?" task's fixed numbers and result type, for the pages and charts (no
torch here).

The task (attention/experiment/training.py trains on it): 16 tokens, 4 relevant; averaging the 4
relevant tokens' evidence gives accuracy Phi(1), one relevant token or uniform attention
Phi(0.5) (docs/science.md). A trained head is sharpened at test time by multiplying its
logits by m in MULTIPLIERS, or replaced by a one-hot on its top key (ARGMAX).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from attention.i18n import translate

CEILING = 0.5 * (1.0 + math.erf(1.0 / math.sqrt(2.0)))     # Phi(1) = 0.8413
ONE_TOKEN = 0.5 * (1.0 + math.erf(0.5 / math.sqrt(2.0)))   # Phi(0.5) = 0.6915
MULTIPLIERS = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)
ARGMAX = "argmax"


@dataclass(frozen=True, eq=False)
class SharpeningStudy:
    """Everything measured on the one head trained for a seed (attention.experiment), as the
    page draws it."""
    seed: int
    sweep: pd.DataFrame        # one row per multiplier
    sample: pd.DataFrame       # one eval sample's weights at m = 1 and at argmax
    leave_one_out: pd.DataFrame  # weight and leave-one-out effect per (sample, token)
    spearman_pooled: float     # rank correlation over all (sample, token) pairs
    spearman_within: float     # mean rank correlation inside one sample


def multiplier_label(m: float | str) -> str:
    """'0', '0.5', '1', ... or 'argmax': the values of the `multiplier` column."""
    return m if isinstance(m, str) else f"{m:g}"


def m_label(multiplier: str, lang: str) -> str:
    """'m = 2' or the word for argmax: how a point of the sweep is named to a reader."""
    if multiplier == ARGMAX:
        return translate(lang, "sharper.argmax")
    return translate(lang, "sharper.m_is", m=multiplier)
