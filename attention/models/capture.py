"""One forward pass with its attention captured: `forward(model, enc, state)` runs the model
with a `Forward` state visible to core_attention_forward, and `ModelRun` holds what it saw."""
from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch

from attention.core import AttentionResult, attention
from attention.models.interventions import Intervention
from attention.models.registered import FORWARD, Forward


@dataclass(frozen=True, eq=False)
class ModelRun:
    """One text through a loaded model, everything captured in the same forward pass.

    Layer l is the l-th attention call of the forward (a model's attention layers in order).
    k and v are repeated to the query heads (grouped-query models), so every per-head tensor
    has `heads` rows."""
    tokens: tuple[str, ...]          # the model's own tokens, special tokens included
    ids: tuple[int, ...]             # their vocabulary ids
    weights: torch.Tensor            # (layers, heads, n, n) float32: what the forward used
    logits: torch.Tensor | None      # (n, vocab) with an LM head (causal or masked), else None
    embedding: torch.Tensor          # (hidden,) mean of last hidden states over tokens, L2-normalised
    last_hidden: torch.Tensor        # (n, hidden) the base model's last hidden states
    q: torch.Tensor                  # (layers, heads, n, d_head) as the attention saw them (RoPE'd)
    k: torch.Tensor                  # (layers, heads, n, d_head)
    v: torch.Tensor                  # (layers, heads, n, d_head)
    mask: torch.Tensor               # (layers, n, n) bool, True = may attend (causal, windows)
    scaling: tuple[float, ...]       # per layer: the module's own scale (1/sqrt(d_head) usually)
    sinks: torch.Tensor              # (n,) bool: first token and special tokens
    interventions: tuple[Intervention, ...] = ()

    @property
    def n(self) -> int:
        return len(self.tokens)

    def recompute(self, *, scaled: bool = True, temperature: float = 1.0) -> AttentionResult:
        """Every head again through core.attention from the captured q, k, v and masks:
        scaled with each layer's own scale, or scale 1 (`scaled=False`). Fields
        (layers, heads, n, ...); with no interventions `.weights` equals `self.weights`."""
        mask = None if bool(self.mask.all()) else self.mask.unsqueeze(1)   # (layers, 1, n, n)
        if not scaled or len(set(self.scaling)) == 1:
            scale = 1.0 if not scaled else self.scaling[0]
            return attention(self.q, self.k, self.v, scale=scale, mask=mask,
                             temperature=temperature)
        parts = [attention(self.q[i], self.k[i], self.v[i], scale=s, temperature=temperature,
                           mask=None if mask is None else mask[i])
                 for i, s in enumerate(self.scaling)]
        return AttentionResult(
            scores=torch.stack([p.scores for p in parts]),
            weights=torch.stack([p.weights for p in parts]),
            output=torch.stack([p.output for p in parts]), scale=self.scaling[0])




def forward(model, enc, state: Forward):
    """model(**enc) with `state` visible to core_attention_forward; the output and the base
    model's last hidden states (n, hidden)."""
    captured = {}

    def grab(_module, _args, output):
        captured["last"] = output[0] if isinstance(output, tuple) else output.last_hidden_state

    accepted = inspect.signature(model.forward).parameters
    inputs = {k: v for k, v in enc.items()
              if k in ("input_ids", "attention_mask") or k in accepted}
    hook = model.base_model.register_forward_hook(grab)
    token = FORWARD.set(state)
    try:
        with torch.no_grad():
            out = model(**inputs)
    finally:
        FORWARD.reset(token)
        hook.remove()
    return out, captured["last"][0]
