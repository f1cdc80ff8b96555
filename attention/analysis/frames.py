"""Tensors -> tidy pandas DataFrames: one row per (head, query, key) cell, for charts and CSV."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from attention.analysis import Analysis
from attention.core import scores

CELL_COLUMNS = ["head", "query_pos", "query_token", "key_pos", "key_token",
                "raw_score", "scaled_score", "weight", "unscaled_weight", "difference"]


WINDOW_COLUMNS = ("raw_score", "scaled_score", "weight", "unscaled_weight", "difference")


def flat_frame(**columns: torch.Tensor) -> pd.DataFrame:
    """One column per tensor, each flattened in the same (row-major) order: tensors of one
    shape, e.g. (heads, queries, keys) from torch.meshgrid beside the values."""
    return pd.DataFrame({name: t.flatten().numpy() for name, t in columns.items()})

def window(a: Analysis, head: int, queries: range, keys: range) -> dict[str, np.ndarray]:
    """The numbers of `cells` for one head and window as (queries, keys) float64 matrices,
    NaN where the mask hides a cell: what a click draws, with no table made (the table, for
    a download, is `cells`)."""
    queries = range(max(queries.start, 0), min(queries.stop, a.n))
    keys = range(max(keys.start, 0), min(keys.stop, a.n))
    qs, ks = slice(queries.start, queries.stop), slice(keys.start, keys.stop)
    raw = scores(a.q[head, qs], a.k[head, ks])                        # (nq, nk)
    sc, un = a.result(True, head, qs), a.result(False, head, qs)      # (nq, n) each
    w, uw = sc.weights[:, ks], un.weights[:, ks]                      # (nq, nk)
    out = {"raw_score": raw, "scaled_score": sc.scores[:, ks], "weight": w,
           "unscaled_weight": uw, "difference": w - uw}
    out = {name: m.to(torch.float64).numpy().copy() for name, m in out.items()}   # own memory
    if a.mask is not None:
        hidden = ~a.mask[qs, ks].numpy()                               # (nq, nk)
        for m in out.values():
            m[hidden] = np.nan
    return out


def cells(a: Analysis, heads: list[int] | None = None, queries: range | None = None,
          keys: range | None = None) -> pd.DataFrame:
    """Tidy cells for the given heads and query/key windows (default: everything).

    raw_score = q.k; scaled_score = the scaled logit (after temperature); weight and
    unscaled_weight are the two softmaxes; difference = weight - unscaled_weight.
    Masked (causal) cells are left out, so no non-finite number reaches a chart.
    """
    heads = list(range(a.heads)) if heads is None else list(heads)
    # windows are clipped to the sequence, so a zoom past the end gives fewer cells, not an error
    queries = range(a.n) if queries is None else range(max(queries.start, 0), min(queries.stop, a.n))
    keys = range(a.n) if keys is None else range(max(keys.start, 0), min(keys.stop, a.n))
    qs, ks = slice(queries.start, queries.stop), slice(keys.start, keys.stop)
    h = torch.tensor(heads, dtype=torch.long)
    # only the window's query rows are computed (each softmax row over every key), then cut
    raw = scores(a.q[:, qs][h], a.k[:, ks][h])                        # (h, nq, nk)
    sc, un = a.result(True, heads, qs), a.result(False, heads, qs)    # (h, nq, n) each
    scaled, w, uw = sc.scores[..., ks], sc.weights[..., ks], un.weights[..., ks]  # (h, nq, nk)
    hh, qq, kk = torch.meshgrid(h, torch.arange(queries.start, queries.stop),
                                torch.arange(keys.start, keys.stop), indexing="ij")
    frame = flat_frame(head=hh, query_pos=qq, key_pos=kk, raw_score=raw, scaled_score=scaled,
                       weight=w, unscaled_weight=uw)
    frame["difference"] = frame["weight"] - frame["unscaled_weight"]
    tokens = pd.Series(a.tokens, dtype="string")
    frame.insert(2, "query_token", tokens.iloc[frame["query_pos"]].to_numpy())
    frame.insert(4, "key_token", tokens.iloc[frame["key_pos"]].to_numpy())
    if a.mask is not None:
        frame = frame[a.mask.numpy()[frame["query_pos"].to_numpy(), frame["key_pos"].to_numpy()]]
    return frame.reset_index(drop=True)[CELL_COLUMNS]


def row_metrics(a: Analysis) -> pd.DataFrame:
    """One row per (head, query, scaled?) with every row metric."""
    parts = []
    for scaled, values in ((True, a.scaled_metrics), (False, a.unscaled_metrics)):
        heads, n = next(iter(values.values())).shape
        hh, qq = torch.meshgrid(torch.arange(heads), torch.arange(n), indexing="ij")
        part = pd.DataFrame({"head": hh.flatten().numpy(), "query_pos": qq.flatten().numpy()})
        part["query_token"] = pd.Series(a.tokens, dtype="string").iloc[part["query_pos"]].to_numpy()
        part["scaled"] = scaled
        for name, t in values.items():
            part[name] = t.flatten().numpy()
        parts.append(part)
    return pd.concat(parts, ignore_index=True)
