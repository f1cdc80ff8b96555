"""One batch of texts through a causal LM under many settings, sharing what can be shared.

    run_batch(model, rows, settings, reference=..., fill=None, share=True) -> BatchResult

The unmodified forward runs once per batch and keeps every decoder layer's output; a setting
whose first changed layer is L (settings.Setting.first) then runs from layer L on: the layers
below it return their kept outputs instead of computing (`share=False` recomputes every
setting from the start: the benchmark's reference, and the tests' check that both agree).
Batches are right-padded with id 0 and an attention mask, so every real piece keeps its
position and a text gives what it gives alone (to float error).

Per text and setting: the negative log-likelihood summed over the predicted pieces (every
piece but the first, from the logits of the pieces before it) and, for every layer and head,
the sums over the text's real query rows of the row's max weight and entropy (nats, 0 log 0
= 0). The layers below L keep the unmodified model's sums: their attention did not change.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from attention.models.interventions import plans
from attention.models.loaded import LoadedModel, per_model
from attention.models.registered import FORWARD, Forward
from attention.sweeps.settings import BASE, Setting, interventions


@per_model
def layer_modules(model: LoadedModel) -> tuple:
    """The decoder layers in order: the ModuleList whose i-th element holds layer i's
    attention module (as the core sees them). Kept on the model (per_model), so it goes
    when the model store evicts the model."""
    from attention.importance.batch import attention_modules

    attn = attention_modules(model)
    for module in model.model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == len(attn) and all(
                any(m is a for m in block.modules()) for block, a in zip(module, attn)):
            return tuple(module)
    raise ValueError(f"{model.name}: no list of decoder layers found")


@contextmanager
def skipped(blocks: tuple, kept: list, first: int):
    """Inside, the layers below `first` return their kept outputs without computing."""
    for i in range(first):
        blocks[i].forward = (lambda out: lambda *args, **kwargs: out)(kept[i])
    try:
        yield
    finally:
        for i in range(first):
            del blocks[i].forward


class Sharpness:
    """Per layer, head and text: sums over real query rows of max weight and entropy."""

    def __init__(self, layers: int, heads: int, real: torch.Tensor):
        self.real = real.to(torch.float64)                             # (b, n)
        b = real.shape[0]
        self.max = torch.zeros(layers, heads, b, dtype=torch.float64)  # (layers, heads, b)
        self.ent = torch.zeros(layers, heads, b, dtype=torch.float64)

    def __call__(self, layer: int, weights: torch.Tensor) -> None:
        w = weights.detach()                                           # (b, heads, n, n)
        real = self.real[:, None, : w.shape[2]]                        # (b, 1, n)
        top = w.max(dim=-1).values.double()                            # (b, heads, n)
        ent = -torch.xlogy(w, w).sum(dim=-1).double()                  # (b, heads, n)
        self.max[layer] = (top * real).sum(dim=-1).T                   # (heads, b)
        self.ent[layer] = (ent * real).sum(dim=-1).T


@dataclass(frozen=True)
class BatchResult:
    settings: tuple[Setting, ...]
    nll: np.ndarray             # (settings, b) summed over predicted pieces
    predicted: np.ndarray       # (b,) pieces predicted (length - 1)
    max_weight: np.ndarray      # (settings, layers, heads, b) sums over real query rows
    entropy: np.ndarray         # (settings, layers, heads, b)
    rows: np.ndarray            # (b,) real query rows (the length)
    layer_tokens: int           # real pieces times layers computed: the work done


def _inputs(model, ids: torch.Tensor, real: torch.Tensor) -> dict:
    from attention.importance.batch import takes_token_types

    inputs = {"input_ids": ids, "attention_mask": real.long(), "use_cache": False}
    if takes_token_types(model):       # as LoadedModel.run passes the tokenizer's (zeros)
        inputs["token_type_ids"] = torch.zeros_like(ids)
    return inputs


def _nll(logits: torch.Tensor, ids: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """(b,) summed NLL of every real piece after the first, in float64."""
    ce = F.cross_entropy(logits[:, :-1].transpose(1, 2).float(), ids[:, 1:],
                         reduction="none")                             # (b, n - 1)
    return (ce.double() * real[:, 1:]).sum(dim=1)


def _forward(model, inputs: dict, state: Forward):
    token = FORWARD.set(state)
    try:
        with torch.no_grad():
            return model.model(**inputs).logits                        # (b, n, vocab)
    finally:
        FORWARD.reset(token)


def padded(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    n = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), n, dtype=torch.long)                  # (b, n), pad id 0
    real = torch.zeros(len(rows), n, dtype=torch.bool)                 # (b, n)
    for b, r in enumerate(rows):
        ids[b, :len(r)] = torch.tensor(r, dtype=torch.long)
        real[b, :len(r)] = True
    return ids, real


def each_setting(model, real: torch.Tensor, settings: tuple, quality, *, reference: float,
                 fill=None, sinks: torch.Tensor | None = None, share: bool = True) -> list:
    """[(quality, Sharpness, first changed layer)] per setting: `quality(state)` runs one
    forward under `state` and reduces it (so no setting's full output is kept). The
    unmodified forward runs once with every layer's output kept; each other setting runs
    from its first changed layer on, the layers below returning the kept outputs (share=False
    recomputes from the start: the tests' check). real (b, n) bool: the real pieces."""
    blocks = layer_modules(model)
    kept: list = []
    hooks = [blk.register_forward_hook(lambda _m, _a, out: kept.append(out)) for blk in blocks]
    base = Sharpness(model.layers, model.heads, real)
    try:
        base_quality = quality(Forward(record=False, observe=base, sinks=sinks))
    finally:
        for h in hooks:
            h.remove()
    out = []
    for s in settings:
        if s == BASE:
            out.append((base_quality, base, 0))
            continue
        first = s.first if share else 0
        seen = Sharpness(model.layers, model.heads, real)
        seen.max[:first], seen.ent[:first] = base.max[:first], base.ent[:first]
        ivs = model.check(interventions(s, d_head=model.d_head, reference=reference, fill=fill))
        state = Forward(plans=plans(ivs, model.layers, model.heads), sinks=sinks,
                        record=False, observe=seen, calls=first)
        with skipped(blocks, kept, first):
            out.append((quality(state), seen, first))
    return out


def run_batch(model, rows: list[list[int]], settings, *, reference: float, fill=None,
              share: bool = True) -> BatchResult:
    """Every setting on one batch of texts (rows: each text's piece ids, at least 2 each)."""
    settings = tuple(settings)
    ids, real = padded(rows)                                           # (b, n), (b, n)
    inputs = _inputs(model, ids, real)
    sinks = torch.zeros(ids.shape[1], dtype=torch.bool)
    sinks[0] = True                                                    # (n,) the first position
    done = each_setting(model, real, settings,
                        lambda state: _nll(_forward(model, inputs, state), ids, real),
                        reference=reference, fill=fill, sinks=sinks, share=share)
    tokens = int(real.sum())
    work = tokens * model.layers + sum(tokens * (model.layers - first)
                                       for s, (_, _, first) in zip(settings, done) if s != BASE)
    lengths = real.sum(dim=1)
    return BatchResult(settings=settings, nll=torch.stack([d[0] for d in done]).numpy(),
                       predicted=(lengths - 1).numpy(),
                       max_weight=torch.stack([d[1].max for d in done]).numpy(),
                       entropy=torch.stack([d[1].ent for d in done]).numpy(),
                       rows=lengths.numpy(), layer_tokens=work)


def mean_outputs(model, rows: list[list[int]], batch: int = 16) -> np.ndarray:
    """(layers, heads, d_head): each head's output (its slice at the output projection's
    input) averaged over every real position of every text: the corpus mean of mean
    ablation, computed over the whole corpus before any shard."""
    from attention.importance.batch import projections

    total = torch.zeros(model.layers, model.heads * model.d_head, dtype=torch.float64)
    box: dict = {}

    def hook_for(layer):
        def pre(_module, args):
            total[layer] += args[0][box["real"]].double().sum(dim=0)  # (heads * d_head,)
        return pre

    hooks = [m.register_forward_pre_hook(hook_for(i)) for i, m in enumerate(projections(model))]
    count = 0
    try:
        for start in range(0, len(rows), batch):
            ids, real = padded(rows[start:start + batch])
            box["real"] = real
            _forward(model, _inputs(model, ids, real), Forward(record=False))
            count += int(real.sum())
    finally:
        for h in hooks:
            h.remove()
    return (total / count).view(model.layers, model.heads, model.d_head).numpy()
