"""The Corpus page's per-head summary (attention.corpus.store.summarise) against hand
computations: each column's mean, its 95% interval (mean +- 1.96 sd / sqrt(texts)), the cv,
the head's pattern and the rule that rings a head as following its pattern on every text."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from attention.corpus import store


def _stats(rows: dict[tuple[int, int], list[dict]]) -> pd.DataFrame:
    """Per-text rows of store.COLUMNS (0 where not given) for each (layer, head)."""
    out = []
    for (layer, head), texts in rows.items():
        for i, given in enumerate(texts):
            out.append({"text_id": i, "layer": layer, "head": head,
                        **{c: 0.0 for c in store.COLUMNS}, **given})
    return pd.DataFrame(out)


def test_means_intervals_and_patterns_by_hand():
    cls = [0.8, 0.7, 0.9, 0.8]                       # steady and large: follows [CLS]
    low = [0.20, 0.15, 0.25, 0.20]                  # steady but small: not a pattern it follows
    wild = [0.9, 0.1, 0.8, 0.2]                      # large on average but varies
    summary = store.summarise(_stats({
        (0, 0): [{"to_cls": v} for v in cls],
        (0, 1): [{"to_cls": v, "to_prev": 0.05} for v in low],
        (1, 0): [{"to_sep": v} for v in wild]})).set_index(["layer", "head"])
    mean, sd = np.mean(cls), np.std(cls, ddof=1)
    row = summary.loc[(0, 0)]
    assert row.texts == 4
    assert row.to_cls_mean == pytest.approx(mean)
    assert row.to_cls_lo == pytest.approx(mean - 1.959964 * sd / math.sqrt(4))
    assert row.to_cls_hi == pytest.approx(mean + 1.959964 * sd / math.sqrt(4))
    assert row.to_cls_cv == pytest.approx(sd / mean)
    assert row.pattern == "to_cls" and row.pattern_cv == pytest.approx(sd / mean)
    assert math.isnan(row.to_sep_cv)                 # a mean of 0 has no cv
    assert summary.loc[(0, 1)].pattern == "to_cls" and summary.loc[(1, 0)].pattern == "to_sep"
    # the ring: only the head with a large share that is steady across texts
    assert summary.loc[(0, 1)].pattern_cv < store.FIXED_CV       # steady, yet too small
    assert summary["fixed"].to_dict() == {(0, 0): True, (0, 1): False, (1, 0): False}
