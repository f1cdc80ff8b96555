"""The page's live compute: a visitor's own corpus or model, measured here in this process
while they wait, with the same per-text rows as the corpus job (attention.importance.product)
and the same record (attention.importance.record): the prepass once, then shards of
store.TOKEN_CHUNK texts, then the record. The bundled corpora on the bundled model ship
(`python -m attention.corpus ship --importance`).

    compute(source, texts, progress=None, timings=None) -> diskcache.Record
    work(source, texts) -> units of each stage;  FORWARDS, probe: the time estimate
"""
from __future__ import annotations

import pandas as pd

from attention import diskcache
from attention import models as M
from attention.errors import UserError
from attention.importance import store


def check(model, texts) -> None:
    """UserError naming the first text with more pieces than the page measures."""
    from attention.importance.batch import ids_of
    from attention.importance.tokens import MAX_PIECES

    for i, text in enumerate(texts):
        n = len(ids_of(model, text))
        if n > MAX_PIECES:
            raise UserError("importance.too_long", text=i + 1, pieces=n, limit=MAX_PIECES)


def compute(source: str, texts, progress: diskcache.Progress | None = None,
            timings: dict[str, float] | None = None) -> diskcache.Record:
    """Every frame of the page (module docstring); progress(fraction, stage); timings: filled
    with the seconds each stage took."""
    import time

    import torch

    from attention.importance import product, record

    torch.set_num_threads(1)          # as the corpus job's workers (FORWARDS measured so)
    texts = list(texts)
    say = progress or (lambda fraction, stage: None)
    model = M.load_model(source, trusted=True)
    check(model, texts)
    say(0.0, "means")
    start = time.perf_counter()
    pre = product.prepass(model, texts)
    if timings is not None:
        timings["means"] = timings.get("means", 0.0) + time.perf_counter() - start
    rows: dict[str, list[pd.DataFrame]] = {name: [] for name in product.TABLES}
    starts = list(range(0, len(texts), store.TOKEN_CHUNK))
    for i, first in enumerate(starts):
        say(0.05 + 0.75 * i / len(starts), "tokens")
        part = texts[first:first + store.TOKEN_CHUNK]
        got = product.text_tables(model, list(range(first, first + len(part))), part, pre,
                                  timings)
        for name, frame in got.items():
            rows[name].append(frame)
    say(0.8, "pruning")
    tables = {name: pd.concat(frames, ignore_index=True) for name, frames in rows.items()
              if frames}
    got, _ = record.build(model, source, texts, tables, timings)
    say(1.0, "done")
    return got


def work(source: str, texts) -> dict[str, float]:
    """The units of work of each stage for these texts: pieces read times the passes that
    read them, so each stage's seconds scale with its units (attention.ui.estimate). The
    FIXED stages count 0 when their record is stored (or shipped)."""
    from attention.importance import batch, curves, heads as heads_mod, record

    model = M.load_model(source, trusted=True)
    n = [len(batch.ids_of(model, text)) for text in texts]
    metric = heads_mod.Metric(model, texts)
    read = sum(len(r) for r in metric.rows)                       # pieces of one metric pass
    points = len(curves._points(model.layers * model.heads, store.PRUNING_STEPS))
    units = {"tokens": float(sum(n)), "heads": float(sum(n[:store.HEAD_TEXTS])),
             "means": float(sum(n[:store.HEAD_TEXTS])),
             "faithfulness": float(sum(n)), "order": float(points * read),
             "pruning": float(store.ORDERS * points * read),
             "sweep": float(model.layers * (len(heads_mod.TAUS) + 1) * read)}
    if record.corpus_free(model) and store.has_fixed(source):
        units.update({"pruning": 0.0, "sweep": 0.0})
    return units


# Seconds of a stage per unit, in seconds of one plain forward pass per piece: measured on
# all-MiniLM-L6-v2 over 5 bundled:zh texts (81 pieces; tokens 56 s, heads 35 s, pruning
# 209 s, sweep 69 s, order 16 s, faithfulness 6 s with a forward pass at 7.5 ms a piece on
# a busy machine). A probe times the forward pass on the server and these turn it into a
# first estimate; every later run is estimated from the rates of the server's own runs.
FORWARDS = {"tokens": 90.0, "heads": 55.0, "means": 1.0, "faithfulness": 10.0, "order": 0.5,
            "pruning": 0.4, "sweep": 0.4}


def probe(source: str, texts) -> float:
    """Seconds per piece of one batched forward pass over the first texts, timed here."""
    from attention.importance import batch

    return batch.forward_rate(M.load_model(source, trusted=True), texts)
