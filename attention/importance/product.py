"""The corpus job's `importance` product: the "Does the model use it?" page's per-text rows.

    prepass(model, texts) -> dict          once per corpus, before any shard (JSON: PREPASS)
    text_tables(model, ids, texts, pre, timings=None) -> dict[table name, DataFrame]

Tables (TABLES), one row per:

    importance    (text, piece): token_importance's columns, `text` replaced by text_id
    faithfulness  (text, method, fraction): text_id, method, fraction, change (the text's
                  comprehensiveness, erasure.text_changes; NaN where the method leaves the
                  text out)
    heads         (text, layer, head) for the texts with text_id < head_texts:
                  head_importance of the text alone, with text_id

The corpus-level inputs come from the prepass, computed over the whole corpus once: `counts`
(each word piece's count over the measured texts: the inverse-frequency baseline of
faithfulness), `fill` (the mean head outputs over the first `head_texts` texts: mean
ablation replaces a head's output by the corpus's mean, never a shard's), `head_texts`. A
text's rows then depend only on the text, its id and the prepass: a table computed in shards
equals the table computed whole (tests/test_importance_parts.py), and any statistic of the
page is recomputed from the rows (attention.importance.record).
"""
from __future__ import annotations

import time
from collections import Counter

import pandas as pd

from attention.importance import store

TABLES = ("importance", "faithfulness", "heads")
PREPASS = "importance-prepass.json"


def prepass(model, texts: list[str]) -> dict:
    """{"counts": {piece: count over texts}, "fill": (layers, heads, d_head) as lists,
    "head_texts": how many of the first texts head importance measures}."""
    from attention.importance.batch import ids_of
    from attention.importance.heads import mean_outputs
    from attention.importance.tokens import item

    counts = Counter()
    for text in texts:
        counts.update(model.pieces(ids_of(model, text)))
    head_texts = min(len(texts), store.HEAD_TEXTS)
    fill = mean_outputs(model, [item(model, t) for t in texts[:head_texts]]) if head_texts else None
    return {"counts": dict(counts), "head_texts": head_texts,
            "fill": fill.tolist() if fill is not None else None}


def _timed(timings: dict | None, stage: str, start: float) -> None:
    if timings is not None:
        timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - start


def text_tables(model, ids: list[int], texts: list[str], pre: dict,
                timings: dict[str, float] | None = None) -> dict[str, pd.DataFrame]:
    """The rows of these texts (ids: their text ids in the corpus; module docstring).
    timings: filled with the seconds each table took."""
    import torch

    from attention.importance.erasure import text_changes
    from attention.importance.heads import head_importance
    from attention.importance.tokens import token_importance

    ids = [int(i) for i in ids]
    start = time.perf_counter()
    tokens = token_importance(model, texts)
    tokens["text"] = tokens["text"].map(dict(enumerate(ids)))
    _timed(timings, "tokens", start)

    start = time.perf_counter()
    got, methods = text_changes(model, dict(zip(ids, texts)), store.FRACTIONS, tokens,
                                seed=store.SEED, counts=pre["counts"])
    faith = pd.DataFrame([{"text_id": i, "method": name, "fraction": float(fraction),
                           "change": float(got[i][m, f])}
                          for i in ids if i in got for m, name in enumerate(methods)
                          for f, fraction in enumerate(store.FRACTIONS)],
                         columns=["text_id", "method", "fraction", "change"])
    _timed(timings, "faithfulness", start)

    start = time.perf_counter()
    heads = []
    fill = None if pre.get("fill") is None else torch.tensor(pre["fill"], dtype=torch.float32)
    for text_id, text in zip(ids, texts):
        if text_id < pre["head_texts"]:
            frame = head_importance(model, [text], fill=fill)
            frame.insert(0, "text_id", text_id)
            heads.append(frame)
    _timed(timings, "heads", start)

    out = {"importance": tokens.rename(columns={"text": "text_id"}), "faithfulness": faith}
    if heads:
        out["heads"] = pd.concat(heads, ignore_index=True)
    return out
