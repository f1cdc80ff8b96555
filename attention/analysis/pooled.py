"""The Heatmap's pooled panels of an Analysis: every head's scaled, unscaled and difference
matrices pooled into blocks (attention.measures.pooling), one head at a time."""
from __future__ import annotations

import pandas as pd
import torch

from attention.analysis import Analysis
from attention.analysis.frames import flat_frame
from attention.measures.pooling import HOWS, Blocks, block_counts, block_preview, blocks_for, pool


def pooled_matrices(a: Analysis, heads: list[int], max_blocks: int,
                    how: str = "max") -> tuple[dict[str, torch.Tensor], Blocks]:
    """The three heatmap panels of some heads, pooled: {"weight", "unscaled_weight",
    "difference"} -> (h, b, b), NaN for a block with no allowed cell.

    weight / unscaled_weight: the scaled / unscaled attention pooled with `how`; difference:
    the difference matrix (scaled - unscaled) pooled on its own ("extreme" when how is "max",
    since max(w) - max(u) is not the largest change). Each head's (n, n) weights are
    recomputed from the Analysis's q and k and pooled before the next head's are made."""
    if how not in HOWS:
        raise ValueError(f"how must be one of {HOWS}, got {how!r}")
    parts: dict[str, list[torch.Tensor]] = {"weight": [], "unscaled_weight": [], "difference": []}
    blocks = blocks_for(a.n, max_blocks)
    for head in heads:            # one head's (n, n) weights at a time, recomputed from q, k
        w, u = a.result(True, head).weights, a.result(False, head).weights   # (n, n) each
        parts["weight"].append(pool(w, max_blocks, how, a.mask)[0])          # (b, b)
        parts["unscaled_weight"].append(pool(u, max_blocks, how, a.mask)[0])
        parts["difference"].append(pool(w.sub_(u), max_blocks,
                                        "extreme" if how == "max" else how, a.mask)[0])
        del w, u
    b = blocks.count
    return {v: torch.stack(p) if p else torch.empty(0, b, b) for v, p in parts.items()}, blocks


POOLED_COLUMNS = ["head", "query_block", "key_block", "query_start", "query_stop",
                  "key_start", "key_stop", "query_range", "key_range", "query_tokens",
                  "key_tokens", "cells", "weight", "unscaled_weight", "difference"]


def pooled_cells(a: Analysis, heads: list[int], max_blocks: int, how: str = "max") -> pd.DataFrame:
    """One row per (head, query block, key block) with the block's pooled weights (see
    pooled_matrices). start/stop are positions (stop exclusive); blocks with only masked
    cells are left out, like masked cells in frames.cells."""
    pooled, blocks = pooled_matrices(a, heads, max_blocks, how)
    pw, pu, pd_ = (pooled[v] for v in ("weight", "unscaled_weight", "difference"))
    h, b = torch.tensor(heads, dtype=torch.long), blocks.count
    hh, qb, kb = torch.meshgrid(h, torch.arange(b), torch.arange(b), indexing="ij")
    frame = flat_frame(head=hh, query_block=qb, key_block=kb, weight=pw, unscaled_weight=pu,
                       difference=pd_)
    axis = pd.DataFrame({
        "start": [blocks.start(i) for i in range(b)],
        "stop": [blocks.stop(i) for i in range(b)],
        "range": pd.array(blocks.labels(), dtype="string"),
        "tokens": pd.array([block_preview(a.tokens, blocks, i) for i in range(b)], dtype="string"),
    })
    for name in ("query", "key"):
        part = axis.iloc[frame[f"{name}_block"].to_numpy()].reset_index(drop=True)
        for col in axis.columns:
            frame[f"{name}_{col}"] = part[col].to_numpy()
    counts = block_counts(a.n, blocks, a.mask)                          # (b, b)
    frame["cells"] = counts[qb.flatten(), kb.flatten()].numpy()
    frame = frame[frame["cells"] > 0]
    return frame.reset_index(drop=True)[POOLED_COLUMNS]
