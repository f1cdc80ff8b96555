"""The "Does the model use it?" page's record, assembled from the corpus job's per-text rows
(attention.importance.product) and the corpus-level tables computed here.

    build(model, source, texts, tables, timings=None) -> (record, corpus tables)
    assemble(model, texts, tables, corpus) -> diskcache.Record

tables: the product's rows of every measured text ({"importance", "faithfulness",
"heads"}); corpus: {"randoms" (orders, points) the pruning band's random orders, "sweep"
the temperature sweep, "pruning" the pruning curve in the heads' order with its band}. On a
sentence model the random orders and the sweep measure the paraphrase retrieval on the
project's sentence pairs (heads.Metric): nothing of the corpus (FIXED), so they are read from
(and written to) the model's own "fixed" record (store.fixed_key) and computed once per model.

The record holds every frame the page reads and the per-text rows it is made of
(`faithfulness_texts`: text_id, method, fraction, change; `heads_texts`: head_importance of
each text alone, with text_id), so any statistic on the page can be recomputed from them.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from attention import diskcache
from attention.importance import store
from attention.text.corpora import digest

# On a sentence model the pruning band's random orders and the temperature sweep measure the
# paraphrase retrieval on the project's sentence pairs (heads.Metric): nothing of the corpus.
FIXED = ("randoms", "sweep")


def corpus_free(model) -> bool:
    """Whether the FIXED tables are the same for every corpus (a sentence model's metric)."""
    return model.head == "none"


def pack_fixed(randoms: np.ndarray, sweep: pd.DataFrame) -> diskcache.Record:
    return diskcache.Record(frames={
        "randoms": pd.DataFrame(randoms, columns=[f"p{i}" for i in range(randoms.shape[1])]),
        "sweep": sweep})


def unpack_fixed(record: diskcache.Record) -> dict:
    return {"randoms": record.frames["randoms"].to_numpy(dtype=float),
            "sweep": record.frames["sweep"]}


def fixed_tables(model, source: str, texts, timings: dict | None = None) -> dict:
    """{"randoms", "sweep"}: a sentence model's from its fixed record when one is stored (or
    shipped), else computed (and stored for a sentence model)."""
    from attention.importance import curves

    free = corpus_free(model)
    fixed = store.read_fixed(source) if free else None
    if fixed is not None:
        return unpack_fixed(fixed)
    start = time.perf_counter()
    randoms = curves.random_curves(model, texts, list(range(store.ORDERS)), orders=store.ORDERS,
                                   seed=store.SEED, steps=store.PRUNING_STEPS)
    _timed(timings, "pruning", start)
    start = time.perf_counter()
    sweep = pd.concat([curves.paired_sweep(model, texts, layer, n_boot=store.N_BOOT,
                                           seed=store.SEED) for layer in range(model.layers)],
                      ignore_index=True)
    _timed(timings, "sweep", start)
    if free:
        store.write_fixed(source, pack_fixed(randoms, sweep))
    return {"randoms": randoms, "sweep": sweep}


def _timed(timings: dict | None, stage: str, start: float) -> None:
    if timings is not None:
        timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - start


def build(model, source: str, texts, tables: dict[str, pd.DataFrame],
          timings: dict[str, float] | None = None) -> tuple[diskcache.Record, dict]:
    """The page's record from the per-text rows of every text (module docstring), and the
    corpus tables it computed or read."""
    from attention.importance import curves

    texts = list(texts)
    corpus = fixed_tables(model, source, texts, timings)
    start = time.perf_counter()
    corpus["pruning"] = curves.pruning_with_band(
        model, mean_heads(tables["heads"]), texts, orders=store.ORDERS, n_boot=store.N_BOOT,
        seed=store.SEED, steps=store.PRUNING_STEPS, randoms=corpus["randoms"])
    _timed(timings, "order", start)
    return assemble(model, texts, tables, corpus), corpus


def tokens_of(rows: pd.DataFrame) -> pd.DataFrame:
    """token_importance's table of the corpus (column `text`: the text id) from the rows."""
    return rows.rename(columns={"text_id": "text"}).sort_values(
        ["text", "position"], kind="stable", ignore_index=True)


def mean_heads(rows: pd.DataFrame) -> pd.DataFrame:
    """head_importance of the texts together from each text's own rows: every column the
    mean over texts, the gradient renormalised per layer (heads.per_layer)."""
    cols = [c for c in rows.columns if c not in ("text_id", "layer", "head")]
    out = rows.groupby(["layer", "head"], sort=True)[cols].mean().reset_index()
    if "gradient_raw" in out:
        norm = out.groupby("layer")["gradient_raw"].transform(lambda g: (g ** 2).sum() ** 0.5)
        out["gradient"] = out["gradient_raw"] / norm.where(norm > 0, 1.0)
    return out


def faithfulness_values(rows: pd.DataFrame, texts: int) -> tuple[np.ndarray, list[str]]:
    """(value (texts, methods, fractions), methods) from the long per-text rows (NaN where a
    text has no row)."""
    methods = list(pd.unique(rows["method"].astype(str)))
    m_index = {name: i for i, name in enumerate(methods)}
    f_index = {f: i for i, f in enumerate(store.FRACTIONS)}
    value = np.full((texts, len(methods), len(store.FRACTIONS)), np.nan)
    value[rows["text_id"].to_numpy(dtype=int),
          rows["method"].astype(str).map(m_index).to_numpy(dtype=int),
          rows["fraction"].map(f_index).to_numpy(dtype=int)] = rows["change"].to_numpy(float)
    return value, methods


def assemble(model, texts, tables: dict[str, pd.DataFrame], corpus: dict) -> diskcache.Record:
    """The record from the per-text rows and the corpus tables."""
    from attention.importance import concordance, curves, erasure

    texts = list(texts)
    tokens, heads = tokens_of(tables["importance"]), mean_heads(tables["heads"])
    boot = {"n_boot": store.N_BOOT, "seed": store.SEED}
    words = concordance.agreement(tokens, words_only=True, **boot)
    everything = concordance.agreement(tokens, words_only=False, **boot)
    value, methods = faithfulness_values(tables["faithfulness"], len(texts))
    faith = erasure.summarise(value, methods, store.FRACTIONS, **boot)
    sharp = pd.concat([curves.sharpness_agreement(heads, imp, s, **boot)
                       for imp in ("ablation", "mean_ablation") if imp in heads
                       for s in ("max_weight", "entropy")], ignore_index=True)
    faith_texts = tables["faithfulness"].sort_values("text_id", kind="stable", ignore_index=True)
    faith_texts = faith_texts.astype({"text_id": np.int32}).assign(
        method=pd.Categorical(faith_texts["method"].astype(str), categories=methods))
    heads_texts = tables["heads"].sort_values(["text_id", "layer", "head"], kind="stable",
                                              ignore_index=True).astype({"text_id": np.int32})
    values = {"model": model.name, "texts": len(texts),
              "head_texts": min(len(texts), store.HEAD_TEXTS), "layers": model.layers,
              "head": model.head, "digest": digest(texts)}
    return diskcache.Record(frames={
        "tokens": tokens, "agreement_words": words, "agreement_all": everything,
        "faithfulness": faith, "heads": heads, "sharpness": sharp,
        "pruning": corpus["pruning"], "sweep": corpus["sweep"],
        "faithfulness_texts": faith_texts, "heads_texts": heads_texts}, values=values)
