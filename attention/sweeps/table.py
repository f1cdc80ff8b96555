"""The corpus job's `nll` product: one row per (text, setting).

    text_id, family, variant, layer, head     the text and the setting (settings.Setting)
    nll          mean negative log-likelihood per predicted piece (nats)
    predicted    pieces predicted (every piece but the first)
    max_weight, entropy          mean over layers, heads and the text's real query rows of
                                 the row's max weight / entropy (nats), under the setting
    own_max_weight, own_entropy  the same over the part the setting changes: its layer (a
                                 per-layer setting), its head (a per-head one), else the model

A text of fewer than two pieces predicts nothing and has no rows (texts.error says why).
Corpus-level inputs (the Scalable-Softmax reference length, the mean outputs of mean
ablation) come from `prepass`, computed over the whole corpus before any shard, so a table
computed in shards equals the table computed whole."""
from __future__ import annotations

import numpy as np
import pandas as pd

from attention.sweeps.settings import Setting, settings_of

PREPASS = "prepass.json"
COLUMNS = ("text_id", "family", "variant", "layer", "head", "nll", "predicted", "max_weight",
           "entropy", "own_max_weight", "own_entropy")


def prepass(model, texts: list[str], corpus: list[str], sweeps) -> dict:
    """{"reference": mean pieces per text of the whole corpus, "fill": (layers, heads,
    d_head) mean head outputs over `texts` (only for the heads sweep)}."""
    from attention.sweeps.engine import mean_outputs

    lengths = [len(model.tokenizer(t)["input_ids"]) for t in corpus]
    out = {"reference": float(np.mean(lengths))}
    if "heads" in sweeps:
        rows = sorted((ids for ids in (_ids(model, t) for t in texts) if ids and len(ids) > 1),
                      key=len)
        out["fill"] = mean_outputs(model, rows).tolist()
    return out


def _ids(model, text: str) -> list[int] | None:
    from attention.errors import UserError

    try:
        return model.encode(text)["input_ids"][0].tolist()
    except UserError:
        return None


def batches(lengths: list[int], limit: int, tokens: int = 512) -> list[list[int]]:
    """Indices sorted by length in groups of at most `limit` texts and `tokens` padded pieces."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups, current = [], []
    for i in order:
        if current and (len(current) + 1 > limit or (len(current) + 1) * lengths[i] > tokens):
            groups.append(current)
            current = []
        current.append(i)
    return groups + ([current] if current else [])


def nll_table(model, text_ids: list[int], rows: list[list[int]], sweeps, pre: dict, *,
              limit: int = 16, share: bool = True) -> pd.DataFrame:
    """The rows (module docstring) of the texts `rows` (piece ids, at least 2 each)."""
    from attention.sweeps.engine import run_batch

    settings = settings_of(sweeps, model.layers, model.heads)
    frames = []
    for group in batches([len(r) for r in rows], limit):
        res = run_batch(model, [rows[i] for i in group], settings,
                        reference=pre["reference"], fill=pre.get("fill"), share=share)
        frames.append(_frame(res, [text_ids[i] for i in group]))
    if not frames:
        return pd.DataFrame({c: [] for c in COLUMNS})
    return pd.concat(frames, ignore_index=True).sort_values(
        ["text_id", "family", "variant", "layer", "head"], kind="stable", ignore_index=True)


def _own(values: np.ndarray, s: Setting, rows: np.ndarray) -> np.ndarray:
    """(b,) mean over the changed part's heads and real rows; values (layers, heads, b)."""
    if s.head >= 0:
        part = values[s.layer, s.head]
    elif s.layer >= 0:
        part = values[s.layer].mean(axis=0)
    else:
        part = values.mean(axis=(0, 1))
    return part / rows


def _frame(res, text_ids: list[int]) -> pd.DataFrame:
    b = len(text_ids)
    cols: dict[str, list] = {c: [] for c in COLUMNS}
    for i, s in enumerate(res.settings):
        cols["text_id"] += text_ids
        cols["family"] += [s.family] * b
        cols["variant"] += [s.variant] * b
        cols["layer"] += [s.layer] * b
        cols["head"] += [s.head] * b
        cols["nll"] += list(res.nll[i] / res.predicted)
        cols["predicted"] += list(res.predicted)
        cols["max_weight"] += list(res.max_weight[i].mean(axis=(0, 1)) / res.rows)
        cols["entropy"] += list(res.entropy[i].mean(axis=(0, 1)) / res.rows)
        cols["own_max_weight"] += list(_own(res.max_weight[i], s, res.rows))
        cols["own_entropy"] += list(_own(res.entropy[i], s, res.rows))
    frame = pd.DataFrame(cols)
    return frame.astype({"text_id": np.int64, "layer": np.int16, "head": np.int16,
                         "predicted": np.int32})
