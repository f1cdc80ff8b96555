"""analyze(spec): everything the pages show about one input, computed once.

    tokens -> x (n, d_model) -> q, k, v (heads, n, d_k)
           -> core.attention with scale 1/sqrt(d_k)  ("scaled")
           -> core.attention with scale 1            ("unscaled")
           -> per-row metrics for both

What an Analysis keeps is small: q, k, v (O(heads n d)) and the per-row metrics
(O(heads n)). The n x n attention of all heads (four 12 x 2048 x 2048 float32 tensors,
~0.8 GB at the token limit) is never kept: it is made one head at a time while the metrics
are computed, and recomputed on demand through core.attention, for the heads and query rows
a view shows (`result`, O(h nq n d)). `scaled` / `unscaled` still give every head's full
AttentionResult, computed when read: tests and small inputs use them, pages use `result`.

The sweeps show how score spread, entropy and saturation move as d_k grows.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from functools import cached_property

import pandas as pd
import torch

from attention.measures import rows as metrics
from attention.config import SWEEP_MAX_HEADS, SWEEP_MAX_TOKENS
from attention.core import AttentionResult, attention, causal_mask, scores
from attention.models.toy import embed
from attention.models.toy import project
from attention.spec import AttentionSpec

__all__ = ["Analysis", "analyze", "analyze_qkv", "qkv_for", "model_mask", "head_metrics",
           "sweep_rows", "dk_sweep", "random_dk_sweep", "DK_SWEEP", "CHUNK_CELLS"]

DK_SWEEP = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
CHUNK_CELLS = 2048 * 2048  # analyze computes at most this many attention cells at once


Heads = int | list[int] | slice


@dataclass(frozen=True, eq=False)
class Analysis:
    spec: AttentionSpec
    tokens: tuple[str, ...]             # what the heads really saw (word pieces for a real model)
    q: torch.Tensor                     # (heads, n, d_k)
    k: torch.Tensor                     # (heads, n, d_k)
    v: torch.Tensor                     # (heads, n, d_v)
    mask: torch.Tensor | None           # (n, n) True = may attend; None = bidirectional
    scaled_metrics: dict[str, torch.Tensor]    # name -> (heads, n)
    unscaled_metrics: dict[str, torch.Tensor]  # name -> (heads, n)

    @property
    def heads(self) -> int:
        return self.q.shape[0]

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def scale(self) -> float:
        """The scaled variant's factor, 1/sqrt(d_k) (the unscaled one uses 1)."""
        return 1.0 / math.sqrt(self.q.shape[-1])

    def result(self, scaled: bool = True, heads: Heads = slice(None),
               queries: slice | range = slice(None)) -> AttentionResult:
        """core.attention of some heads (an int: one head, fields (nq, n, ...)) and query rows
        (a window of positions) against every key: each softmax row is whole, so its cells are
        those of the all-heads result. O(h nq n d_k) work; nothing is kept."""
        if isinstance(queries, range):
            queries = slice(queries.start, queries.stop)
        if isinstance(heads, list):
            heads = torch.tensor(heads, dtype=torch.long)
        q = self.q[heads][..., queries, :]                              # (h, nq, d_k) or (nq, d_k)
        mask = None if self.mask is None else self.mask[queries]        # (nq, n)
        return attention(q, self.k[heads], self.v[heads], scale=None if scaled else 1.0,
                         mask=mask, temperature=self.spec.temperature)

    @property
    def scaled(self) -> AttentionResult:
        """Every head at scale 1/sqrt(d_k): (heads, n, n) tensors made on each read (not kept)."""
        return self.result(True)

    @property
    def unscaled(self) -> AttentionResult:
        """Every head at scale 1: (heads, n, n) tensors made on each read (not kept)."""
        return self.result(False)

    def raw_scores(self, head: int | slice = slice(None)) -> torch.Tensor:
        """q.k^T before any scale or temperature (core.scores): (n, n) for one head, (heads, n, n)
        for a slice."""
        return scores(self.q[head], self.k[head])

    @cached_property
    def digest(self) -> str:
        """A hash of everything the attention is computed from (spec, tokens, q, k, v, mask):
        what shared caches of views derived from this Analysis are keyed by, so two inputs
        with different content never share an entry, whatever their shape or sums."""
        h = hashlib.blake2b(digest_size=20)
        h.update(json.dumps([sorted(self.spec.to_query().items()), list(self.tokens)]).encode())
        for t in (self.q, self.k, self.v, self.mask):
            if t is None:
                h.update(b"none")
                continue
            h.update(f"{t.dtype}{tuple(t.shape)}".encode())
            h.update(t.detach().contiguous().numpy().tobytes())
        return h.hexdigest()


def qkv_for(spec: AttentionSpec) -> tuple[tuple[str, ...], torch.Tensor, torch.Tensor, torch.Tensor]:
    """The tokens and the (heads, n, d_k) queries, keys and values the spec describes."""
    if spec.source == "pretrained":
        from attention.models.runs import layer_inputs  # lazy: only this path needs transformers

        return layer_inputs(spec.model_source, spec.model_text, spec.layer)
    x = embed(spec.tokens, spec.d_model, spec.seed, spec.positional)     # (n, d_model)
    q, k, v = project(x, spec.d_k, spec.heads, spec.seed)               # (heads, n, d_k) each
    return spec.tokens, q, k, v


def analyze(spec: AttentionSpec) -> Analysis:
    spec.validate()
    tokens, q, k, v = qkv_for(spec)
    return analyze_qkv(spec, tokens, q, k, v, mask=model_mask(spec))


def model_mask(spec: AttentionSpec) -> torch.Tensor | None:
    """A real model's own mask for the spec's layer (causal for a causal model; without the
    sink keys when spec.hide_sinks), or None."""
    if spec.source != "pretrained":
        return None
    from attention.models.runs import layer_mask

    return layer_mask(spec.model_source, spec.model_text, spec.layer, hide_sinks=spec.hide_sinks)


def analyze_qkv(spec: AttentionSpec, tokens, q: torch.Tensor, k: torch.Tensor,
                v: torch.Tensor, mask: torch.Tensor | None = None) -> Analysis:
    """Scaled and unscaled attention of given q, k (heads, n, d_k) and v (heads, n, d_v)
    (from a spec, a real model or an upload), with the spec's mask and temperature, and
    `mask` (n, n) (a model's own) on top."""
    n = len(tokens)
    causal = causal_mask(n) if spec.causal else None                    # (n, n)
    mask = causal if mask is None else mask if causal is None else mask & causal
    scaled, unscaled = head_metrics(q, k, mask, spec.temperature)
    return Analysis(spec=spec, tokens=tuple(tokens), q=q, k=k, v=v, mask=mask,
                    scaled_metrics=scaled, unscaled_metrics=unscaled)


def head_metrics(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None,
                 temperature: float) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Per-row metrics (name -> (heads, n)) of the scaled and the unscaled attention of
    q, k: (heads, n, d_k), a few heads at a time (at most CHUNK_CELLS cells: one head at
    n = 2048), so the (h, n, n) scores and weights that exist at once stay at 16 MB each
    instead of 4 x 200 MB for 12 heads. The values are empty (d_v = 0): the metrics need the
    weights only, not weights @ v."""
    heads, n = q.shape[0], q.shape[1]
    step = max(1, CHUNK_CELLS // max(1, n * n))
    none = k.new_empty(*k.shape[:-1], 0)                                 # (heads, n, 0)
    parts: dict[bool, list[dict[str, torch.Tensor]]] = {True: [], False: []}
    for h in range(0, heads, step):
        for scaled in (True, False):
            res = attention(q[h:h + step], k[h:h + step], none[h:h + step],
                            scale=None if scaled else 1.0, mask=mask,
                            temperature=temperature)                      # (step, n, n)
            parts[scaled].append(metrics.row_metrics(res.weights))
            del res
    return tuple({name: torch.cat([p[name] for p in ps]) if ps else q.new_empty(0, n)
                  for name in metrics.ROW_METRICS} for ps in (parts[True], parts[False]))


def sweep_rows(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None = None,
               temperature: float = 1.0) -> list[dict]:
    """Two summary rows (scaled, unscaled) for q: (..., n, d_k) against k: (..., n, d_k)."""
    d_k = q.shape[-1]
    rows = []
    for scaled in (True, False):
        res = attention(q, k, k, scale=None if scaled else 1.0, mask=mask, temperature=temperature)
        finite = res.scores[torch.isfinite(res.scores)]
        rows.append({
            "d_k": d_k,
            "scaled": scaled,
            "score_std": finite.std().item() if finite.numel() > 1 else 0.0,
            **{name: val.mean().item() for name, val in metrics.row_metrics(res.weights).items()},
        })
    return rows


def dk_sweep(spec: AttentionSpec, d_ks: tuple[int, ...] = DK_SWEEP) -> pd.DataFrame:
    """The spec's input projected to each d_k: one row per (d_k, scaled) with score_std,
    entropy, effective_tokens, max_weight, gini and jacobian_norm (means over heads and rows;
    the first SWEEP_MAX_TOKENS tokens, at most SWEEP_MAX_HEADS heads)."""
    tokens = spec.tokens[:SWEEP_MAX_TOKENS]
    heads = min(spec.heads, SWEEP_MAX_HEADS)
    x = embed(tokens, spec.d_model, spec.seed, spec.positional)          # (n, d_model)
    mask = causal_mask(len(tokens)) if spec.causal else None
    rows = []
    for d_k in d_ks:
        q, k, _ = project(x, d_k, heads, spec.seed)                      # (heads, n, d_k)
        rows += sweep_rows(q, k, mask, spec.temperature)
    return pd.DataFrame(rows)


def random_dk_sweep(n: int = 16, d_ks: tuple[int, ...] = DK_SWEEP, samples: int = 256,
                    seed: int = 0) -> pd.DataFrame:
    """The same table for q, k ~ N(0, I) at initialisation (docs/science.md, "The d_k sweep")."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for d_k in d_ks:
        q = torch.randn(samples, n, d_k, generator=gen)                  # (samples, n, d_k)
        k = torch.randn(samples, n, d_k, generator=gen)                  # (samples, n, d_k)
        rows += sweep_rows(q, k)
    return pd.DataFrame(rows)
