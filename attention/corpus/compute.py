"""The per-batch computation of the corpus job: one function both engines call.

    compute_shard(model, first_id, texts, settings) -> dict[table name, DataFrame]

A shard's texts go through the model in padded batches (right-padded with id 0 and an
attention mask, so every real piece keeps its position and a text gives what it gives alone,
to float error; tests/test_corpus_job.py checks 1e-5 against `batched=False`, one
`LoadedModel.run` per text). Tables, one row per:

    texts       text: text_id, text, pieces, error ("" or why the text was skipped)
    pieces      piece of every text: text_id, position, token, special
    stats       (text, layer, head): Clark et al.'s HEAD_COLUMNS and the SINK_COLUMNS
    qk          (text, layer, head, sampled piece): position, token, q, k (lists of d_head)
    importance  whatever attention.importance.token_importance returns, with text_id

The sampled pieces (`settings.sample` per text, the same for every head) are drawn by a
generator seeded with (SEED, text_id): a text's sample does not depend on its batch or engine.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attention import config
from attention.errors import UserError
from attention.measures.heads import head_table, sink_table
from attention.models.capture import forward
from attention.models.registered import Forward
from attention.models.runs import special_names

SEED = 0
WHAT = ("stats", "importance", "qk")
DEFAULT_WHAT = ("stats", "qk")
DEFAULT_SAMPLE = 8
TABLES = ("texts", "pieces", "stats", "qk", "importance")


@dataclass(frozen=True)
class Settings:
    what: tuple[str, ...] = DEFAULT_WHAT
    batch_size: int = 32          # texts per shard (and at most per forward)
    sample: int = DEFAULT_SAMPLE  # pieces per text whose q and k are kept

    def as_dict(self) -> dict:
        return {"what": list(self.what), "batch_size": self.batch_size, "sample": self.sample}


@dataclass(frozen=True)
class Captured:
    """One text's forward, cut to its own n pieces."""
    ids: list[int]
    tokens: list[str]
    weights: torch.Tensor         # (layers, heads, n, n)
    q: torch.Tensor               # (layers, heads, n, d_head)
    k: torch.Tensor               # (layers, heads, n, d_head)


def sample_positions(text_id: int, n: int, sample: int) -> np.ndarray:
    """Sorted positions of up to `sample` pieces of a text of n pieces, fixed by its id."""
    rng = np.random.default_rng([SEED, int(text_id)])
    return np.sort(rng.choice(n, size=min(sample, n), replace=False))


def _encode(model, text: str) -> tuple[dict | None, str]:
    try:
        return model.encode(text), ""
    except UserError as err:
        return None, str(err)


def _forward_group(model, encs: list[dict]) -> list[Captured]:
    """One padded forward of a few encoded texts: each text's own (layers, heads, n, ...)."""
    lengths = [e["input_ids"].shape[1] for e in encs]
    n = max(lengths)
    batch = {}
    for key in encs[0]:
        if not isinstance(encs[0][key], torch.Tensor):
            continue
        full = torch.zeros(len(encs), n, dtype=encs[0][key].dtype)       # (b, n), pad id 0
        for i, e in enumerate(encs):
            full[i, :lengths[i]] = e[key][0]
        batch[key] = full
    if "attention_mask" not in batch:
        batch["attention_mask"] = torch.zeros(len(encs), n, dtype=torch.long)
        for i, m in enumerate(lengths):
            batch["attention_mask"][i, :m] = 1
    state = Forward(batch=True)
    forward(model.model, batch, state)
    weights = torch.stack(state.weights, dim=1)                           # (b, layers, heads, n, n)
    q, k = torch.stack(state.q, dim=1), torch.stack(state.k, dim=1)       # (b, layers, heads, n, d)
    out = []
    for i, m in enumerate(lengths):
        ids = batch["input_ids"][i, :m].tolist()
        out.append(Captured(ids=ids, tokens=list(model.tokenizer.convert_ids_to_tokens(ids)),
                            weights=weights[i, :, :, :m, :m].contiguous(),
                            q=q[i, :, :, :m].contiguous(), k=k[i, :, :, :m].contiguous()))
    return out


def _groups(order: list[int], lengths: list[int], model, limit: int) -> list[list[int]]:
    """Texts (indices, by length) in groups whose padded weights stay within MAX_WEIGHT_CELLS."""
    groups, current = [], []
    for i in order:
        n = lengths[i]                  # sorted ascending: the last one is the longest
        if current and (len(current) + 1 > limit or (len(current) + 1) * model.layers
                        * model.heads * n * n > config.MAX_WEIGHT_CELLS):
            groups.append(current)
            current = []
        current.append(i)
    if current:
        groups.append(current)
    return groups


def capture(model, texts: list[str], *, batched: bool = True,
            limit: int = 64) -> list[Captured | str]:
    """Every text's forward (Captured), or the sentence why it was skipped (too long...)."""
    encoded = [_encode(model, t) for t in texts]
    out: list[Captured | str] = [err for _, err in encoded]
    ok = [i for i, (e, _) in enumerate(encoded) if e is not None]
    if not batched:
        for i in ok:
            r = model.run(texts[i])
            out[i] = Captured(ids=list(r.ids), tokens=list(r.tokens), weights=r.weights,
                              q=r.q, k=r.k)
        return out
    lengths = {i: encoded[i][0]["input_ids"].shape[1] for i in ok}
    order = sorted(ok, key=lambda i: lengths[i])
    for group in _groups(order, [lengths.get(i, 0) for i in range(len(texts))], model, limit):
        for i, cap in zip(group, _forward_group(model, [encoded[i][0] for i in group])):
            out[i] = cap
    return out


def _importance(model, texts: list[str], ids: list[int]) -> pd.DataFrame | None:
    """token_importance per text (a text it refuses is left out), with text_id."""
    from attention.importance import token_importance

    frames = []
    for text_id, text in zip(ids, texts):
        try:
            frame = token_importance(model, [text])
        except UserError:
            continue
        frame = frame.drop(columns=[c for c in ("text",) if c in frame.columns])
        frame.insert(0, "text_id", text_id)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else None


def compute_shard(model, first_id: int, texts: list[str], settings: Settings,
                  *, batched: bool = True) -> dict[str, pd.DataFrame]:
    """The tables of texts[0..] with ids first_id, first_id + 1, ... (module docstring)."""
    caps = capture(model, texts, batched=batched, limit=settings.batch_size)
    cls, sep = special_names(model)
    special = model.special_ids
    text_rows, pieces, stats, qk = [], [], [], []
    for offset, (text, cap) in enumerate(zip(texts, caps)):
        text_id = first_id + offset
        if isinstance(cap, str):
            text_rows.append({"text_id": text_id, "text": text, "pieces": 0, "error": cap})
            continue
        n = len(cap.ids)
        text_rows.append({"text_id": text_id, "text": text, "pieces": n, "error": ""})
        pieces.append(pd.DataFrame({"text_id": text_id, "position": np.arange(n, dtype=np.int32),
                                    "token": cap.tokens,
                                    "special": [i in special for i in cap.ids]}))
        if "stats" in settings.what:
            keys = torch.tensor([i in special for i in cap.ids], dtype=torch.bool)
            table = head_table(cap.weights, cap.tokens, cls, sep).merge(
                sink_table(cap.weights, keys), on=["layer", "head"])
            table.insert(0, "text_id", text_id)
            stats.append(table)
        if "qk" in settings.what:
            pos = sample_positions(text_id, n, settings.sample)
            layers, heads = cap.q.shape[:2]
            q = cap.q[:, :, pos].numpy().astype(np.float32)               # (layers, heads, s, d)
            k = cap.k[:, :, pos].numpy().astype(np.float32)
            ll, hh, pp = np.meshgrid(np.arange(layers), np.arange(heads), np.arange(len(pos)),
                                     indexing="ij")
            qk.append(pd.DataFrame({
                "text_id": text_id, "layer": ll.ravel().astype(np.int16),
                "head": hh.ravel().astype(np.int16), "position": pos[pp.ravel()].astype(np.int32),
                "token": [cap.tokens[p] for p in pos[pp.ravel()]],
                "q": list(q.reshape(-1, q.shape[-1])), "k": list(k.reshape(-1, k.shape[-1]))}))
    tables = {"texts": pd.DataFrame(text_rows, columns=["text_id", "text", "pieces", "error"])}
    tables["pieces"] = _concat(pieces, ["text_id", "position", "token", "special"])
    if "stats" in settings.what:
        tables["stats"] = _concat(stats, None)
    if "qk" in settings.what:
        tables["qk"] = _concat(qk, None)
    if "importance" in settings.what:
        ok = [(i, t) for i, (t, c) in enumerate(zip(texts, caps)) if not isinstance(c, str)]
        imp = _importance(model, [t for _, t in ok], [first_id + i for i, _ in ok])
        if imp is not None:
            tables["importance"] = imp
    return {name: frame for name, frame in tables.items() if frame is not None}


def _concat(frames: list[pd.DataFrame], columns) -> pd.DataFrame | None:
    if frames:
        return pd.concat(frames, ignore_index=True)
    return pd.DataFrame(columns=columns) if columns else None
