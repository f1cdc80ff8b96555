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
from attention.measures.pooling import blocks_for, pool

CLS, SEP = "[CLS]", "[SEP]"
HEAD_COLUMNS = ("entropy", "max_weight", "to_cls", "to_sep", "to_punct",
                "to_prev", "to_next", "to_self")
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


def _diagonal_share(weights: torch.Tensor, offset: int) -> torch.Tensor:
    """Mean over the queries that have one of weights[..., i, i + offset]: (...) from
    (..., n, n); 0 when no query has such a key (n = 1 with offset 1)."""
    diag = weights.diagonal(offset=offset, dim1=-2, dim2=-1)              # (..., n - |offset|)
    if diag.shape[-1] == 0:
        return weights.new_zeros(weights.shape[:-2])
    return diag.mean(dim=-1)


def head_stats(weights: torch.Tensor, tokens, cls: str | None = CLS,
               sep: str | None = SEP) -> dict[str, torch.Tensor]:
    """Clark et al. 2019's per-head summary of weights (..., n, n), rows over keys.

    Each value has the leading shape (...) (e.g. (layers, heads)): mean row entropy (nats),
    mean max weight, and the mean share of a row's weight that lands on [CLS], [SEP],
    punctuation, the previous token, the next token and the token itself."""
    stats = {
        "entropy": metrics.entropy(weights).mean(dim=-1),                 # (...)
        "max_weight": metrics.max_weight(weights).mean(dim=-1),           # (...)
    }
    for name, keys in token_classes(tokens, cls, sep).items():
        stats[name] = (weights * keys.to(weights.dtype)).sum(dim=-1).mean(dim=-1)  # (...)
    stats["to_prev"] = _diagonal_share(weights, -1)
    stats["to_next"] = _diagonal_share(weights, 1)
    stats["to_self"] = _diagonal_share(weights, 0)
    return stats


def head_table(weights: torch.Tensor, tokens, cls: str | None = CLS,
               sep: str | None = SEP) -> pd.DataFrame:
    """One row per (layer, head) of weights (layers, heads, n, n) with HEAD_COLUMNS."""
    return _per_head(head_stats(weights, tokens, cls, sep), HEAD_COLUMNS)


def _per_head(stats: dict[str, torch.Tensor], columns) -> pd.DataFrame:
    """name -> (layers, heads) tensors as one row per (layer, head)."""
    layers, heads = stats[columns[0]].shape
    ll, hh = torch.meshgrid(torch.arange(layers), torch.arange(heads), indexing="ij")
    frame = pd.DataFrame({"layer": ll.flatten().numpy(), "head": hh.flatten().numpy()})
    for name in columns:
        frame[name] = stats[name].flatten().numpy()
    return frame


# ---- attention sinks (Xiao et al. 2023, StreamingLLM; Clark et al. 2019 on [SEP]) --------

SINK_COLUMNS = ("to_first", "to_special")


def sink_table(weights: torch.Tensor, special: torch.Tensor) -> pd.DataFrame:
    """Per (layer, head) of weights (layers, heads, n, n): the mean share of a row's attention
    on the first token (to_first) and on the special tokens (to_special; special (n,) bool,
    the tokenizer's special tokens wherever they stand)."""
    keys = special.to(weights.dtype)                                      # (n,)
    stats = {"to_first": weights[..., 0].mean(dim=-1),                    # (layers, heads)
             "to_special": (weights * keys).sum(dim=-1).mean(dim=-1)}
    return _per_head(stats, SINK_COLUMNS)


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
