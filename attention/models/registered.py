"""The attention function registered with transformers (AttentionInterface): every attention
layer of a loaded model calls `core_attention_forward`, which calls `core.attention`, so the
weights the pages draw are the ones the model used and an intervention changes its output.

Three things make it equal to eager attention (tests/test_models.py compares logits):
    - the eager mask is additive float (0 = may attend, dtype min = not): bool is `mask == 0`;
    - `attention_mask=None` on a causal module (`module.is_causal`) means a causal mask;
    - grouped k/v heads (kv_heads < heads) are repeated to the query heads.
The state of one forward pass (its interventions, what it captures) reaches the function
through a context variable, so concurrent sessions running one model do not see each other's.
"""
from __future__ import annotations

import contextvars
import math
import os
import threading
from dataclasses import dataclass, field
from functools import lru_cache

import torch

from attention import config
from attention.core import attention, causal_mask
from attention.measures.sinks import hide_sinks
from attention.models.interventions import HeadPlan

IMPLEMENTATION = "attention_explorer_core"   # the name registered with transformers
# Keyword arguments some architectures pass to change scores in ways core.attention does not.
UNSUPPORTED_KWARGS = ("softcap", "s_aux", "sinks", "position_bias")


@dataclass
class Forward:
    """State of one forward pass, seen by core_attention_forward through a context variable
    (per thread: concurrent sessions running the same model do not see each other's)."""
    plans: dict[int, tuple[HeadPlan, ...]] = field(default_factory=dict)
    sinks: torch.Tensor | None = None    # (n_k,) bool: keys that "hide_sinks" removes
    record: bool = True
    qkv: bool = True                     # with record: q, k, v too (capture.Capture.qkv)
    batch: bool = False                  # record every batch element (b, heads, ...), not the first
    calls: int = 0                       # attention calls so far = the next layer's index
    observe: object = None               # observe(layer, weights (b, heads, n_q, n_k)) per call
    q: list = field(default_factory=list)        # per layer (heads, n, d_head)
    k: list = field(default_factory=list)        # per layer (heads, n, d_head), repeated to heads
    v: list = field(default_factory=list)
    weights: list = field(default_factory=list)  # per layer (heads, n, n)
    masks: list = field(default_factory=list)    # per layer (n, n) bool, True = may attend
    scaling: list = field(default_factory=list)  # per layer: the module's own scale
    kv_heads: list = field(default_factory=list)
    modules: list = field(default_factory=list)


FORWARD: contextvars.ContextVar[Forward | None] = contextvars.ContextVar(
    "attention_explorer_forward", default=None)


class Unsupported(RuntimeError):
    """Raised inside a forward pass when a layer asks for something the core does not do."""


def bool_mask(module, attention_mask, n_q: int, n_k: int, kwargs) -> torch.Tensor | None:
    """The layer's mask as bool (..., n_q, n_k), True = may attend; None = every key."""
    if attention_mask is None:
        causal = kwargs.get("is_causal")
        causal = getattr(module, "is_causal", False) if causal is None else causal
        if causal and n_q > 1:
            return causal_mask(n_q, n_k)                               # (n_q, n_k)
        return None
    mask = attention_mask[..., :n_k]
    mask = mask if mask.dtype == torch.bool else mask == 0             # additive float -> bool
    return None if bool(mask.all()) else mask


def intervened(query, key, value, scaling: float, mask, plan: tuple[HeadPlan, ...],
                sinks: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights (b, heads, n_q, n_k) and output (b, heads, n_q, d_v) with a layer's plan: one
    core.attention call per group of heads sharing a scale and temperature."""
    b, heads, n_q, _ = query.shape
    n_k = key.shape[-2]
    weights = query.new_empty(b, heads, n_q, n_k)
    output = query.new_empty(b, heads, n_q, value.shape[-1])
    groups: dict[tuple, list[int]] = {}
    for h, p in enumerate(plan):
        scale = 1.0 if p.unscaled else scaling if p.scale is None else p.scale
        groups.setdefault((scale, p.tau, p.ssmax), []).append(h)
    for (scale, tau, ssmax), idx in groups.items():
        pick = slice(None) if len(idx) == heads else torch.tensor(idx)
        q = query[:, pick]                                             # (b, g, n_q, d)
        if ssmax is not None:                                          # Scalable-Softmax
            q = q * ssmax_factor(mask, n_q, n_k, ssmax).to(q.dtype)   # (b, g, n_q, d)
        uniform = [i for i, h in enumerate(idx) if plan[h].uniform]
        if uniform:
            q = q.clone()
            q[:, uniform] = 0.0                                        # every logit 0: uniform rows
        m = mask
        hide = [i for i, h in enumerate(idx) if plan[h].hide]
        if hide and sinks is not None:
            shape = (b, len(idx), n_q, n_k)
            base = torch.ones(shape, dtype=torch.bool) if mask is None else mask.expand(shape)
            m = base.clone()
            m[:, hide] = hide_sinks(mask, sinks, (b, len(hide), n_q, n_k))
        res = attention(q, key[:, pick], value[:, pick], scale=scale, temperature=tau, mask=m)
        weights[:, pick] = res.weights
        output[:, pick] = res.output
    ablate = [h for h, p in enumerate(plan) if p.ablate]
    if ablate:
        output[:, ablate] = 0.0
    for h, p in enumerate(plan):
        if p.fill is not None:                                         # mean ablation
            output[:, h] = torch.tensor(p.fill, dtype=output.dtype)    # (d_v,) on every row
    return weights, output


def ssmax_factor(mask, n_q: int, n_k: int, reference: float) -> torch.Tensor:
    """log(n_i) / log(reference) per query row, n_i the keys row i may see: (..., n_q, 1)."""
    seen = torch.full((n_q, 1), float(n_k)) if mask is None else \
        mask.sum(dim=-1, keepdim=True).to(torch.float32)               # (..., n_q, 1)
    return torch.log(seen.clamp(min=1.0)) / math.log(reference)


def core_attention_forward(module, query, key, value, attention_mask, scaling=None,
                           dropout=0.0, **kwargs):
    """The attention function every layer of a loaded model calls (transformers'
    AttentionInterface signature). query (b, heads, n_q, d), key/value (b, kv_heads, n_k, d),
    q and k already position-encoded (RoPE). Returns ((b, n_q, heads, d), (b, heads, n_q, n_k))."""
    for name in UNSUPPORTED_KWARGS:
        if kwargs.get(name) is not None:
            raise Unsupported(name)
    heads, kv_heads = query.shape[1], key.shape[1]
    if kv_heads != heads:                                              # grouped-query attention
        key = key.repeat_interleave(heads // kv_heads, dim=1)          # (b, heads, n_k, d)
        value = value.repeat_interleave(heads // kv_heads, dim=1)
    scaling = query.shape[-1] ** -0.5 if scaling is None else float(scaling)
    mask = bool_mask(module, attention_mask, query.shape[-2], key.shape[-2], kwargs)
    state = FORWARD.get()
    plan = None if state is None else state.plans.get(state.calls)
    if plan is None:
        res = attention(query, key, value, scale=scaling, mask=mask)
        weights, output = res.weights, res.output
    else:
        weights, output = intervened(query, key, value, scaling, mask, plan, state.sinks)
    if dropout and module.training:
        weights = torch.nn.functional.dropout(weights, p=dropout, training=True)
        output = weights @ value
    if state is not None:
        if state.observe is not None:
            state.observe(state.calls, weights)
        state.calls += 1
        if state.record:
            first = slice(None) if state.batch else 0                  # batch: keep every element
            if state.qkv:
                state.q.append(query[first])
                state.k.append(key[first])
                state.v.append(value[first])
            state.weights.append(weights[first])
            n_q, n_k = query.shape[-2], key.shape[-2]
            full = torch.ones(n_q, n_k, dtype=torch.bool)
            state.masks.append(full if mask is None else mask.expand(
                *mask.shape[:-2], n_q, n_k).reshape(-1, n_q, n_k)[0])
            state.scaling.append(scaling)
            state.kv_heads.append(kv_heads)
            state.modules.append(module)
    return output.transpose(1, 2).contiguous(), weights


_IMPORT_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def register() -> None:
    """Register the core with transformers (once per process) and keep it offline unless
    downloads are allowed. Imports transformers.

    Under a lock: transformers is a lazy module, and two threads importing it for the first
    time at once (two visitors loading models of their own) saw it half-initialised ("cannot
    import name 'AttentionInterface'"). Every name this module takes from transformers is
    resolved here, once, before any other thread can ask."""
    with _IMPORT_LOCK:
        if not config.downloads_allowed():
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import transformers
        from transformers.masking_utils import AttentionMaskInterface, eager_mask
        from transformers.models.auto import modeling_auto  # noqa: F401  (load() reads it)

        for name in ("AutoConfig", "AutoTokenizer", "AutoModel", "AutoModelForCausalLM",
                     "AutoModelForMaskedLM"):
            getattr(transformers, name)
        transformers.AttentionInterface.register(IMPLEMENTATION, core_attention_forward)
        AttentionMaskInterface.register(IMPLEMENTATION, eager_mask)
