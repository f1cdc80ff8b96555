"""The sweeps' engine for a sentence model: its quality is paraphrase retrieval over a whole
pair set (attention.measures.retrieval), the settings those of the causal LM's sweeps
(attention.sweeps.settings), run through the same shared-prefix machinery (engine.py).

    embed_batch(model, rows, settings, reference=..., share=True) -> EmbedResult
    pair_table(model, pairs, sweep, reference=None) -> one row per (pair, setting)

Per sentence and setting: the sentence embedding as LoadedModel.run makes it (the mean of the
last hidden states over real pieces, L2-normalised) and, per layer and head, the sums over
its real query rows of the row's max weight and entropy. Per pair (attention.sweeps.pairs):
hit and reciprocal rank of retrieval over every sentence of the set under that setting
(retrieval_units: the mean over the pair's two sentences), and the pair's sharpness (the mean
over its two sentences of each one's mean over layers, heads and real query rows).

A setting whose first changed layer is L runs from layer L on, the layers below returning the
unmodified forward's kept outputs (share=False recomputes from the start: the tests' check)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from attention.models.registered import FORWARD, Forward
from attention.sweeps.engine import _inputs, each_setting, padded
from attention.sweeps.pairs import COLUMNS, pair_settings
from attention.sweeps.table import _own, batches


@dataclass(frozen=True)
class EmbedResult:
    settings: tuple
    embedding: np.ndarray       # (settings, b, hidden) unit rows, float64
    max_weight: np.ndarray      # (settings, layers, heads, b) sums over real query rows
    entropy: np.ndarray         # (settings, layers, heads, b)
    rows: np.ndarray            # (b,) real query rows (the length)


def _embed(model, inputs: dict, real: torch.Tensor, state: Forward) -> torch.Tensor:
    """(b, hidden) float64 unit rows: the mean of the last hidden states over real pieces."""
    token = FORWARD.set(state)
    try:
        with torch.no_grad():
            last = model.model(**inputs).last_hidden_state             # (b, n, hidden)
    finally:
        FORWARD.reset(token)
    w = real.to(last.dtype).unsqueeze(-1)                              # (b, n, 1)
    pooled = (last * w).sum(dim=1) / w.sum(dim=1)                      # (b, hidden)
    return F.normalize(pooled.double(), dim=-1)


def embed_batch(model, rows: list[list[int]], settings, *, reference: float,
                share: bool = True) -> EmbedResult:
    """Every setting on one batch of sentences (rows: each sentence's piece ids)."""
    settings = tuple(settings)
    ids, real = padded(rows)                                           # (b, n), (b, n)
    inputs = _inputs(model, ids, real)
    inputs.pop("use_cache")                  # an encoder keeps no cache (BertModel refuses it)
    done = each_setting(model, real, settings, lambda state: _embed(model, inputs, real, state),
                        reference=reference, share=share)
    return EmbedResult(settings=settings, embedding=torch.stack([d[0] for d in done]).numpy(),
                       max_weight=torch.stack([d[1].max for d in done]).numpy(),
                       entropy=torch.stack([d[1].ent for d in done]).numpy(),
                       rows=real.sum(dim=1).numpy())


def mean_length(model, sentences: list[str]) -> float:
    """The set's mean pieces per sentence: Scalable-Softmax's reference length."""
    return float(np.mean([len(model.tokenizer(s)["input_ids"]) for s in sentences]))


def pair_table(model, pairs: list[tuple[str, str]], sweep: str, *,
               reference: float | None = None, tokens: int = 2048, share: bool = True,
               progress=None) -> pd.DataFrame:
    """The rows (attention.sweeps.pairs.COLUMNS) of every pair under the sweep's settings.
    Pair p's sentences are rows 2p and 2p + 1 of the set, the candidates every sentence."""
    from attention.measures.retrieval import retrieval_units

    sentences = [s for pair in pairs for s in pair]                    # pair p: 2p, 2p + 1
    reference = mean_length(model, sentences) if reference is None else reference
    settings = pair_settings(sweep, model.layers)
    ids = [model.encode(s)["input_ids"][0].tolist() for s in sentences]
    count, k = len(sentences), len(settings)
    emb = None                                                         # (k, 2n, hidden)
    top = np.zeros((k, model.layers, model.heads, count))
    ent = np.zeros_like(top)
    lengths = np.zeros(count)
    groups = batches([len(r) for r in ids], limit=64, tokens=tokens)
    for done, group in enumerate(groups):
        res = embed_batch(model, [ids[i] for i in group], settings, reference=reference,
                          share=share)
        if emb is None:
            emb = np.zeros((k, count, res.embedding.shape[2]))
        emb[:, group] = res.embedding
        top[..., group] = res.max_weight
        ent[..., group] = res.entropy
        lengths[group] = res.rows
        if progress is not None:
            progress(done + 1, len(groups))
    n = len(pairs)
    cols: dict[str, list] = {c: [] for c in COLUMNS}
    for i, s in enumerate(settings):
        hit, rr = retrieval_units(emb[i])                              # (n,), (n,)
        cols["pair_id"] += list(range(n))
        cols["family"] += [s.family] * n
        cols["variant"] += [s.variant] * n
        cols["layer"] += [s.layer] * n
        cols["head"] += [s.head] * n
        cols["hit"] += list(hit)
        cols["rr"] += list(rr)
        cols["pieces"] += list(lengths.reshape(n, 2).sum(axis=1))
        for name, values in (("max_weight", top[i]), ("entropy", ent[i])):
            per = values.mean(axis=(0, 1)) / lengths                   # (2n,)
            cols[name] += list(per.reshape(n, 2).mean(axis=1))
            cols[f"own_{name}"] += list(_own(values, s, lengths).reshape(n, 2).mean(axis=1))
    frame = pd.DataFrame(cols)
    return frame.astype({"pair_id": np.int64, "layer": np.int16, "head": np.int16,
                         "pieces": np.int32})
