"""What an intervention changes inside the model: the attention of its heads before and after,
and every head's sharpness (mean max weight, mean entropy) before and after, as small tables.

    attention_change(before, after, interventions)   -> AttentionChange

before and after are two `ModelRun`s of the same text (without and with the interventions);
nothing here runs a model. An ablated head's own weights do not change (its output is what is
removed), the heads after it do: so besides the heads the interventions name, the heads that
changed most elsewhere are kept too, each with its before and after matrices.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from attention.measures.rows import entropy, max_weight
from attention.models.capture import ModelRun

NAMED_KEPT = 12      # the before/after matrices of at most this many named heads are kept
OTHERS_KEPT = 3      # and of this many other heads, those whose weights moved most
MOVED = 1e-6         # a head whose weights moved less than this (max |after - before|) did not change
SHARPNESS = ("max_weight", "entropy")


@dataclass(frozen=True, eq=False)
class AttentionChange:
    """The intervened run's attention against the plain run's."""
    heads: tuple[tuple[int, int], ...]   # (layer, head) of each kept matrix: named ones first
    named: int                           # how many of `heads` the interventions name
    before: torch.Tensor                 # (len(heads), n, n) weights without the interventions
    after: torch.Tensor                  # (len(heads), n, n) with them
    mask: torch.Tensor                   # (len(heads), n, n) bool: the keys each query may see
    table: pd.DataFrame                  # one row per (layer, head): named, moved (max |after -
                                         # before|), max_weight_/entropy_ before and after
    summary: pd.DataFrame                # rows "named", "all": each SHARPNESS before/after, heads


def named_heads(interventions, layers: int, heads: int) -> list[tuple[int, int]]:
    """Every (layer, head) some intervention names, in layer then head order."""
    named = {(layer, head) for iv in interventions
             for layer in (range(layers) if iv.layer is None else (iv.layer,))
             for head in (range(heads) if iv.head is None else (iv.head,))}
    return sorted(named)


def head_sharpness(weights: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """Mean over each head's query rows that see at least one key: max weight and entropy
    (nats). weights (layers, heads, n, n), mask (layers, n, n) -> each (layers, heads).
    One layer at a time in float64: a whole (layers, heads, n, n) copy is 137 MB for
    SmolLM2 at 252 pieces, and eight visitors at once would each make several."""
    out: dict[str, list[torch.Tensor]] = {"max_weight": [], "entropy": []}
    for w, m in zip(weights, mask):
        p = w.to(torch.float64)                                          # (heads, n, n)
        rows = m.any(dim=-1).to(torch.float64)[None, :]                  # (1, n)
        count = rows.sum(dim=-1).clamp_min(1.0)                          # (1,)
        out["max_weight"].append((max_weight(p) * rows).sum(-1) / count)  # (heads,)
        out["entropy"].append((entropy(p) * rows).sum(-1) / count)
    return {k: torch.stack(v) for k, v in out.items()}                  # (layers, heads)


def moved_by(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    """max |after - before| of each head's weights (layers, heads, n, n) -> (layers, heads),
    one layer at a time in float64."""
    return torch.stack([(a.to(torch.float64) - b.to(torch.float64)).abs().amax(dim=(-2, -1))
                        for b, a in zip(before, after)])


def attention_change(before: ModelRun, after: ModelRun, interventions) -> AttentionChange:
    """Each head's weights and sharpness, before and after (see the module's docstring)."""
    layers, heads = before.weights.shape[:2]
    named = named_heads(interventions, layers, heads)
    moved = moved_by(before.weights, after.weights)                     # (layers, heads)
    sharp_b = head_sharpness(before.weights, before.mask)
    sharp_a = head_sharpness(after.weights, after.mask)
    named_set = set(named)
    table = pd.DataFrame({
        "layer": [layer for layer in range(layers) for _ in range(heads)],
        "head": [head for _ in range(layers) for head in range(heads)],
        "named": [(layer, head) in named_set for layer in range(layers) for head in range(heads)],
        "moved": moved.flatten().numpy(),
        **{f"{m}_{when}": sharp[m].flatten().numpy()
           for m in SHARPNESS for when, sharp in (("before", sharp_b), ("after", sharp_a))}})
    others = table[~table["named"] & (table["moved"] > MOVED)].nlargest(OTHERS_KEPT, "moved")
    kept = named[:NAMED_KEPT] + [(int(r.layer), int(r.head)) for r in others.itertuples()]
    index = torch.tensor(kept, dtype=torch.long).reshape(-1, 2)          # (kept, 2)
    return AttentionChange(heads=tuple(kept), named=min(len(named), NAMED_KEPT),
                           before=before.weights[index[:, 0], index[:, 1]].clone(),
                           after=after.weights[index[:, 0], index[:, 1]].clone(),
                           mask=before.mask[index[:, 0]].clone(),
                           table=table, summary=_summary(table))


def _summary(table: pd.DataFrame) -> pd.DataFrame:
    """Mean sharpness over the named heads and over every head, before and after."""
    rows = []
    for which, part in (("named", table[table["named"]]), ("all", table)):
        row = {"heads": which, "count": len(part)}
        for m in SHARPNESS:
            for when in ("before", "after"):
                row[f"{m}_{when}"] = float(part[f"{m}_{when}"].mean()) if len(part) else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)
