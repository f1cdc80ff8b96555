"""One forward pass with its attention captured: `forward(model, enc, state)` runs the model
with a `Forward` state visible to core_attention_forward, and `ModelRun` holds what it saw."""
from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch

from attention.core import AttentionResult, attention
from attention.models import outcomes
from attention.models.interventions import Intervention
from attention.models.registered import FORWARD, Forward


@dataclass(frozen=True)
class Capture:
    """What a run keeps besides its tokens, weights, masks, hidden states and embedding,
    decided by its caller. FULL (the default) keeps everything: the pages that read q, k, v
    (Heatmap, Score analysis, value vectors, sinks hidden) or any logits row. An intervention
    outcome reads neither: its runs keep no q, k, v and, of the (n, vocab) logits (50 MB for
    SmolLM2 at 256 pieces), only the row it compares and each next token's loss, both taken
    as the run ends."""
    qkv: bool = True                 # every layer's q, k, v
    logits_row: int | None = None    # None: the whole logits; else only this row (negative:
                                     # from the end) and, a causal LM's, each next token's loss


FULL = Capture()


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
    q: torch.Tensor | None           # (layers, heads, n, d_head) as the attention saw them (RoPE'd)
    k: torch.Tensor | None           # (layers, heads, n, d_head); q, k, v None: Capture(qkv=False)
    v: torch.Tensor | None           # (layers, heads, n, d_head)
    mask: torch.Tensor               # (layers, n, n) bool, True = may attend (causal, windows)
    scaling: tuple[float, ...]       # per layer: the module's own scale (1/sqrt(d_head) usually)
    sinks: torch.Tensor              # (n,) bool: first token and special tokens
    interventions: tuple[Intervention, ...] = ()
    logits_at: int | None = None     # with logits None (Capture.logits_row): the kept row's
    logits_row: torch.Tensor | None = None   # position, and that row (vocab,)
    losses: torch.Tensor | None = None       # (n-1,) float64: each next token's loss, nats

    @property
    def n(self) -> int:
        return len(self.tokens)

    def logits_of(self, position: int) -> torch.Tensor:
        """The logits row (vocab,) at `position`: of the whole logits, or the one row a lean
        capture kept (ValueError for another)."""
        if self.logits is not None:
            return self.logits[position]
        if self.logits_row is None or position % self.n != self.logits_at:
            raise ValueError(f"the run kept the logits of position {self.logits_at}, "
                             f"not {position}")
        return self.logits_row

    def token_losses(self) -> torch.Tensor:
        """-ln P(token i+1 | tokens <= i), (n-1,) float64 (outcomes.token_losses)."""
        if self.losses is not None:
            return self.losses
        if self.logits is None:
            raise ValueError("the run kept neither the logits nor the losses")
        return outcomes.token_losses(self.logits, self.ids)

    def recompute(self, *, scaled: bool = True, temperature: float = 1.0) -> AttentionResult:
        """Every head again through core.attention from the captured q, k, v and masks:
        scaled with each layer's own scale, or scale 1 (`scaled=False`). Fields
        (layers, heads, n, ...); with no interventions `.weights` equals `self.weights`."""
        if self.q is None:
            raise ValueError("the run was captured without q, k, v (Capture(qkv=False))")
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
