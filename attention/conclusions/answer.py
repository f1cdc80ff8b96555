"""The importance page's answer first: at most three sentences, above its charts, that say in
a newcomer's words what the page found. Each is written from the same frames and under the
same rules as the detailed conclusions (attention.conclusions.importance): its interval and
how many texts, and "the data cannot tell" where the intervals or the count do not allow more.

    answer(agreement, sharpness, texts, unreadable=None) -> list (each has .text(lang))

In order: how much of the corpus the model cannot read (only where it cannot read most of
it: unknown.THRESHOLD), whether some way of reading attention picks out the pieces the
output depends on better than the best trivial baseline (the rows named, the rule of
importance.above_baseline), and whether sharper heads are the ones the model needs (the
pooled ablation/max-weight row: a correlation across heads, never a cause).
"""
from __future__ import annotations

import pandas as pd

from attention.conclusions import unknown
from attention.conclusions.importance import (MAIN, MIN_TEXTS, Conclusion, Label, _interval,
                                              above_baseline, best_baseline, fmt, label_of,
                                              names_of, overlaps_null, scored_rows)


def attention_answer(agreement: pd.DataFrame) -> Conclusion | None:
    """Attention's families read at each layer (MAIN) against the best baseline: those whose
    interval lies wholly above the baseline's, named, and the highest of them (or, with none,
    the highest of all)."""
    texts = int(agreement["texts"].max()) if len(agreement) else 0
    base = best_baseline(agreement)
    readings = scored_rows(agreement, MAIN)
    if base is None or not len(readings):
        return None
    if texts < MIN_TEXTS:
        return Conclusion("answer_attention_few", (("texts", str(texts)), ("min", str(MIN_TEXTS))))
    above = above_baseline(agreement, MAIN)
    top = above.iloc[0] if len(above) else readings.loc[readings["spearman"].idxmax()]
    params = (("baseline", label_of(base)), ("b_rho", fmt(base["spearman"])),
              ("b_low", fmt(base["ci_low"])), ("b_high", fmt(base["ci_high"])),
              ("best", label_of(top)), ("rho", fmt(top["spearman"])), *_interval(top),
              ("count", str(len(above))), ("total", str(len(readings))),
              ("names", names_of(above)), ("texts", str(texts)))
    return Conclusion("answer_attention_above" if len(above) else "answer_attention_none", params)


def sharpness_answer(sharp: pd.DataFrame, texts: int) -> Conclusion | None:
    """The pooled row of head sharpness against head importance."""
    pooled = sharp[sharp["layer"].isna()] if len(sharp) else sharp
    if not len(pooled):
        return None
    row = pooled.iloc[0]
    params = (("rho", fmt(row["spearman"])), *_interval(row),
              ("null_low", fmt(row["null_low"])), ("null_high", fmt(row["null_high"])),
              ("heads", str(int(row["heads"]))), ("texts", str(texts)), ("min", str(MIN_TEXTS)),
              ("sharpness", Label(str(row["sharpness"]))),
              ("importance", Label(str(row["importance"]))))
    key = ("answer_sharp_few" if texts < MIN_TEXTS else "answer_sharp_null" if overlaps_null(row)
           else "answer_sharp_pos" if row["spearman"] > 0 else "answer_sharp_neg")
    return Conclusion(key, params)


def answer(agreement: pd.DataFrame | None, sharpness: pd.DataFrame | None, texts: int,
           unreadable: unknown.Conclusion | None = None) -> list:
    """At most three sentences. texts: what the head measures rest on; unreadable: the
    unknown-piece sentence (unknown.sentence), first where the share is high."""
    out = []
    if unreadable is not None and unreadable.key.startswith("high_"):
        out.append(unknown.Conclusion("short_importance", unreadable.params))
    if agreement is not None and len(agreement):
        out.append(attention_answer(agreement))
    if sharpness is not None and len(sharpness):
        out.append(sharpness_answer(sharpness, texts))
    return [c for c in out if c is not None][:3]
