"""analyze(spec): everything the pages show about one input, computed once.

    tokens -> x (n, d_model) -> q, k, v (heads, n, d_k)
           -> core.attention with scale 1/sqrt(d_k)  ("scaled")
           -> core.attention with scale 1            ("unscaled")
           -> per-row metrics for both

The sweeps show how score spread, entropy and saturation move as d_k grows.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from . import metrics
from .core import AttentionResult, attention, causal_mask
from .embed import embed
from .heads import project
from .spec import AttentionSpec

DK_SWEEP = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
SWEEP_MAX_TOKENS = 256  # the sweep uses the first tokens only, so it stays fast at any n
SWEEP_MAX_HEADS = 4     # and at most 4 heads (its rows are means over heads): d_model 1024 with
                        # 16 heads took 3.4 s of CPU, with 4 heads 0.9 s


@dataclass(frozen=True, eq=False)
class Analysis:
    spec: AttentionSpec
    tokens: tuple[str, ...]             # what the heads really saw (word pieces for a real model)
    q: torch.Tensor                     # (heads, n, d_k)
    k: torch.Tensor                     # (heads, n, d_k)
    v: torch.Tensor                     # (heads, n, d_v)
    mask: torch.Tensor | None           # (n, n) True = may attend; None = bidirectional
    scaled: AttentionResult             # scale 1/sqrt(d_k), all heads
    unscaled: AttentionResult           # scale 1, all heads
    scaled_metrics: dict[str, torch.Tensor]    # name -> (heads, n)
    unscaled_metrics: dict[str, torch.Tensor]  # name -> (heads, n)

    @property
    def heads(self) -> int:
        return self.q.shape[0]

    @property
    def n(self) -> int:
        return len(self.tokens)

    def raw_scores(self, head: int | slice = slice(None)) -> torch.Tensor:
        """q.k^T before any scale or temperature: (n, n) for one head, (heads, n, n) for a slice."""
        return self.q[head] @ self.k[head].transpose(-2, -1)


def qkv_for(spec: AttentionSpec) -> tuple[tuple[str, ...], torch.Tensor, torch.Tensor, torch.Tensor]:
    """The tokens and the (heads, n, d_k) queries, keys and values the spec describes."""
    if spec.source == "pretrained":
        from .modelrun import layer_inputs  # lazy: only this path needs transformers

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
    from .modelrun import layer_mask

    return layer_mask(spec.model_source, spec.model_text, spec.layer, hide_sinks=spec.hide_sinks)


def analyze_qkv(spec: AttentionSpec, tokens, q: torch.Tensor, k: torch.Tensor,
                v: torch.Tensor, mask: torch.Tensor | None = None) -> Analysis:
    """Scaled and unscaled attention of given q, k (heads, n, d_k) and v (heads, n, d_v)
    (from a spec, a real model or an upload), with the spec's mask and temperature, and
    `mask` (n, n) (a model's own) on top."""
    n = len(tokens)
    causal = causal_mask(n) if spec.causal else None                    # (n, n)
    mask = causal if mask is None else mask if causal is None else mask & causal
    scaled = attention(q, k, v, mask=mask, temperature=spec.temperature)
    unscaled = attention(q, k, v, scale=1.0, mask=mask, temperature=spec.temperature)
    return Analysis(
        spec=spec, tokens=tuple(tokens), q=q, k=k, v=v, mask=mask,
        scaled=scaled, unscaled=unscaled,
        scaled_metrics=metrics.row_metrics(scaled.weights),
        unscaled_metrics=metrics.row_metrics(unscaled.weights),
    )


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
    """The same table for q, k ~ N(0, I) at initialisation (SCIENCE.md's measured setting)."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for d_k in d_ks:
        q = torch.randn(samples, n, d_k, generator=gen)                  # (samples, n, d_k)
        k = torch.randn(samples, n, d_k, generator=gen)                  # (samples, n, d_k)
        rows += sweep_rows(q, k)
    return pd.DataFrame(rows)
