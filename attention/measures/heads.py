"""Summaries of many heads at once: Clark et al. 2019's per-head table, attention rollout
(Abnar and Zuidema 2020), value-weighted norms (Kobayashi et al. 2020) and the pooled grid of
every head. Pure torch on weights that already came out of core.attention; nothing here
computes attention. Definitions and their differences from the papers: docs/science.md.
"""
from __future__ import annotations

import unicodedata

import pandas as pd
import torch

from attention.measures import rows as metrics
from attention.measures.columns import HEAD_COLUMNS, SINK_COLUMNS
from attention.measures.pooling import blocks_for, pool

CLS, SEP = "[CLS]", "[SEP]"
GRID_CELLS = 12    # a head in the grid is at most 12 x 12 blocks: 72 heads, <= 10,368 rects


def is_punctuation(token: str) -> bool:
    """True for a token made only of punctuation or symbols (".", ",", "--", "?!")."""
    text = token.removeprefix("##")
    return bool(text) and all(unicodedata.category(ch)[0] in "PS" for ch in text)


def token_classes(tokens: tuple[str, ...] | list[str], cls: str | None = CLS,
                  sep: str | None = SEP) -> dict[str, torch.Tensor]:
    """Boolean (n,) masks of the keys each share column counts. cls and sep: the model's own
    opening and separating special tokens ([CLS] and [SEP] for BERT; None: no such token)."""
    return {
        "to_cls": torch.tensor([cls is not None and t == cls for t in tokens], dtype=torch.bool),
        "to_sep": torch.tensor([sep is not None and t == sep for t in tokens], dtype=torch.bool),
        "to_punct": torch.tensor([is_punctuation(t) for t in tokens], dtype=torch.bool),
    }


def _query_mean(x: torch.Tensor, length: torch.Tensor | None, drop: int = 0) -> torch.Tensor:
    """Mean of x (..., m) over its last dim, the queries; 0 when m = 0. length: None (every
    query counts), or (b, 1, 1) real pieces per text of a right-padded batch, of which the
    first length - drop entries of x count (a diagonal at offset +-drop has that many)."""
    if length is None:
        return x.mean(dim=-1) if x.shape[-1] else x.new_zeros(x.shape[:-1])
    valid = torch.arange(x.shape[-1]) < (length - drop).unsqueeze(-1)     # (b, 1, 1, m)
    return torch.where(valid, x, 0.0).sum(dim=-1) / (length - drop).clamp_min(1)


def _stats(weights: torch.Tensor, keys: dict[str, torch.Tensor],
           length: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """HEAD_COLUMNS (and any other key share) of weights (..., n, n): each a mean over the
    queries (the first `length` of each text when padded; padding keys weigh 0, so a row's
    sums and its entropy and max are those of the text alone). keys: name -> (..., n) bool."""
    stats = {
        "entropy": _query_mean(metrics.entropy(weights), length),         # (...)
        "max_weight": _query_mean(metrics.max_weight(weights), length),   # (...)
    }
    for name, k in keys.items():                                         # row share on k
        stats[name] = _query_mean((weights * k.unsqueeze(-2).to(weights.dtype)).sum(dim=-1),
                                  length)
    for name, offset in (("to_prev", -1), ("to_next", 1), ("to_self", 0)):
        diag = weights.diagonal(offset=offset, dim1=-2, dim2=-1)          # (..., n - |offset|)
        stats[name] = _query_mean(diag, length, abs(offset))
    return stats


def head_stats(weights: torch.Tensor, tokens, cls: str | None = CLS,
               sep: str | None = SEP) -> dict[str, torch.Tensor]:
    """Clark et al. 2019's per-head summary of weights (..., n, n), rows over keys.

    Each value has the leading shape (...) (e.g. (layers, heads)): mean row entropy (nats),
    mean max weight, and the mean share of a row's weight that lands on [CLS], [SEP],
    punctuation, the previous token, the next token and the token itself."""
    return _stats(weights, token_classes(tokens, cls, sep))


def head_table(weights: torch.Tensor, tokens, cls: str | None = CLS,
               sep: str | None = SEP) -> pd.DataFrame:
    """One row per (layer, head) of weights (layers, heads, n, n) with HEAD_COLUMNS."""
    return _per_head(head_stats(weights, tokens, cls, sep), HEAD_COLUMNS)


def _per_head(stats: dict[str, torch.Tensor], columns) -> pd.DataFrame:
    """name -> (..., layers, heads) tensors as one row per (..., layer, head): columns text
    (the leading index, when there is one), layer, head, then `columns`."""
    shape = stats[columns[0]].shape
    index = torch.meshgrid(*[torch.arange(s) for s in shape], indexing="ij")
    names = ["text", "layer", "head"][-len(shape):]
    frame = pd.DataFrame({name: i.flatten().numpy() for name, i in zip(names, index)})
    for name in columns:
        frame[name] = stats[name].flatten().numpy()
    return frame


# ---- attention sinks (Xiao et al. 2023, StreamingLLM; Clark et al. 2019 on [SEP]) --------

def sink_table(weights: torch.Tensor, special: torch.Tensor) -> pd.DataFrame:
    """Per (layer, head) of weights (layers, heads, n, n): the mean share of a row's attention
    on the first token (to_first) and on the special tokens (to_special; special (n,) bool,
    the tokenizer's special tokens wherever they stand)."""
    keys = special.to(weights.dtype)                                      # (n,)
    stats = {"to_first": weights[..., 0].mean(dim=-1),                    # (layers, heads)
             "to_special": (weights * keys).sum(dim=-1).mean(dim=-1)}
    return _per_head(stats, SINK_COLUMNS)


def padded_table(weights: torch.Tensor, tokens: list[list[str]], special: list[list[bool]],
                 cls: str | None = CLS, sep: str | None = SEP) -> pd.DataFrame:
    """head_table merged with sink_table for each of b texts of one right-padded batch, in one
    pass: weights (b, layers, heads, n, n) with 0 on padding keys; tokens and special (the
    tokenizer's special tokens) per text, each of its own length. One row per (text, layer,
    head): text (0..b-1), layer, head, HEAD_COLUMNS, SINK_COLUMNS; each text's rows equal
    what the two tables give for it alone (tests/test_headstats.py)."""
    b, n = weights.shape[0], weights.shape[-1]

    def padded(masks: list[torch.Tensor]) -> torch.Tensor:               # (b, 1, 1, n) bool
        out = torch.zeros(b, n, dtype=torch.bool)
        for i, m in enumerate(masks):
            out[i, :len(m)] = m
        return out[:, None, None]

    classes = [token_classes(t, cls, sep) for t in tokens]
    keys = {name: padded([c[name] for c in classes]) for name in classes[0]}
    keys["to_special"] = padded([torch.tensor(s, dtype=torch.bool) for s in special])
    keys["to_first"] = torch.arange(n) == 0                              # (n,)
    length = torch.tensor([len(t) for t in tokens]).view(b, 1, 1)
    return _per_head(_stats(weights, keys, length), HEAD_COLUMNS + SINK_COLUMNS)


def value_weighted_norms(weights: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """||alpha_ij f(x_j)|| for weights (..., n, n) and transformed vectors f (..., n, hidden):
    since alpha_ij >= 0 this is alpha_ij * ||f(x_j)||. Returns (..., n, n)."""
    norms = f.norm(dim=-1)                                                # (..., n)
    return weights * norms.unsqueeze(-2)                                  # (..., n, n)


# ---- every head at a glance: the pooled grid of the Model heads page -------------------

def _spans(blocks) -> list[tuple[int, int]]:
    """Each block's (first, last) position."""
    return [(blocks.start(i), blocks.stop(i) - 1) for i in range(blocks.count)]


def _span_label(tokens, first: int, last: int) -> str:
    return f"{tokens[first]} ·{first}" if first == last else f"·{first}–·{last}"


def grid_blocks(weights: torch.Tensor, cells: int = GRID_CELLS) -> tuple[torch.Tensor, list]:
    """weights (layers, heads, n, n) pooled to (layers, heads, b, b), b <= cells, the blocks of the
    heatmap's pooling (so a block covers the same positions on every page): a block row is
    the share of its queries' attention that lands on each key block. With each block's
    (first, last) position."""
    pooled, blocks = pool(weights, cells, "share")                     # (layers, heads, b, b)
    return pooled, _spans(blocks)


def grid_image(weights: torch.Tensor, cells: int = GRID_CELLS):
    """The all-heads grid as one array for an image: (layers * (b + 1), heads * (b + 1))
    float64 numpy, head (l, h) at rows l(b+1).., columns h(b+1).., NaN in the one-block gaps
    between heads (drawn transparent). Returns (array, b)."""
    import numpy as np

    pooled, spans = grid_blocks(weights, cells)
    layers, heads, b, _ = pooled.shape
    step = b + 1
    out = np.full((layers * step, heads * step), np.nan)
    padded = np.full((layers, heads, step, step), np.nan)
    padded[:, :, :b, :b] = pooled.numpy()
    out[:, :] = padded.transpose(0, 2, 1, 3).reshape(layers * step, heads * step)
    return out, b


def grid_labels(tokens, cells: int = GRID_CELLS) -> list[str]:
    """The label of each block of the grid (`grid_image`'s rows and columns within a head):
    "token ·pos" for a block of one position, "·first–·last" for more."""
    spans = _spans(blocks_for(len(tokens), cells))
    return [_span_label(tokens, *span) for span in spans]


def grid_frame(weights: torch.Tensor, tokens, cells: int = GRID_CELLS) -> pd.DataFrame:
    """weights (layers, heads, n, n) -> one row per (layer, head, query block, key block):
    layer, head, qb, kb (block index), query, key (labels), weight (pooled share)."""
    layers, heads, n, _ = weights.shape
    pooled, spans = grid_blocks(weights, cells)                          # (layers, heads, b, b)
    b = len(spans)
    ll, hh, qq, kk = torch.meshgrid(torch.arange(layers), torch.arange(heads),
                                    torch.arange(b), torch.arange(b), indexing="ij")
    labels = pd.Series([_span_label(tokens, *s) for s in spans], dtype="string")
    frame = pd.DataFrame({"layer": ll.flatten().numpy(), "head": hh.flatten().numpy(),
                          "qb": qq.flatten().numpy(), "kb": kk.flatten().numpy(),
                          "weight": pooled.flatten().numpy()})
    frame["query"] = labels.iloc[frame["qb"]].to_numpy()
    frame["key"] = labels.iloc[frame["kb"]].to_numpy()
    return frame
