"""Batched forwards of a loaded model with the core inside: padded batches with attention
masks, head gates and per-copy head rows at an output projection, and chunks of a batch.

Batches are right-padded with id 0 and an attention mask, so every real piece keeps its
position (0 .. length - 1) and a padded element gives what it gives alone (to float error;
tests/test_importance.py checks 1e-5)."""
from __future__ import annotations

import inspect
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from attention import config
from attention import models as M
from attention.models.capture import forward as model_forward
from attention.models.interventions import plans
from attention.models.loaded import per_model
from attention.models.registered import FORWARD, Forward

BATCH_TOKENS = config.IMPORTANCE_BATCH_TOKENS


@per_model
def projections(model: M.LoadedModel) -> tuple:
    """Per layer the output projection module (its weight is model.w_o[l]), found by
    storage; a model without one cannot be gated."""
    by_ptr = {m.weight.data_ptr(): m for m in model.model.modules()
              if isinstance(getattr(m, "weight", None), torch.Tensor)}
    found = tuple(by_ptr.get(w.data_ptr()) if w is not None else None for w in model.w_o)
    if any(m is None for m in found):
        raise ValueError(f"{model.name}: no output projection found for every layer")
    return found


@per_model
def attention_modules(model: M.LoadedModel) -> tuple:
    """The attention modules in layer order (as the core sees them: a probe forward)."""
    state = Forward()
    model_forward(model.model, model.tokenizer("a b", return_tensors="pt"), state)
    return tuple(state.modules)


def _heads_of(model: M.LoadedModel, x: torch.Tensor) -> torch.Tensor:
    return x.view(*x.shape[:-1], model.heads, model.d_head)           # (..., n, heads, d)


@contextmanager
def gated(model: M.LoadedModel, gate: torch.Tensor | None):
    """Inside, head h of layer l of batch element b has its output multiplied by
    gate[b, l, h] (gate (b, layers, heads), or (layers, heads) for every element)."""
    if gate is None:
        yield
        return

    def hook_for(layer):
        def pre(_module, args):
            x = args[0]                                                # (b, n, heads * d_head)
            g = gate[..., layer, :]                                    # (b, heads) or (heads,)
            g = g.reshape(-1, 1, model.heads, 1) if g.ndim == 2 else g.view(1, 1, -1, 1)
            return ((_heads_of(model, x) * g.to(x.dtype)).reshape(x.shape), *args[1:])
        return pre

    hooks = []
    try:
        for layer, module in enumerate(projections(model)):
            hooks.append(module.register_forward_pre_hook(hook_for(layer)))
        yield
    finally:
        for h in hooks:
            h.remove()


@contextmanager
def expanded(model: M.LoadedModel, expand):
    """See `forward_batch`'s expand: later layers broadcast the batch-1 mask and positions."""
    if expand is None:
        yield
        return
    layer, rows, fill = (*expand, None)[:3]

    def pre(_module, args):
        x = args[0]                                                    # (1, n, heads * d_head)
        copies = _heads_of(model, x.expand(rows.shape[0], *x.shape[1:]))  # (c, n, heads, d)
        keep = rows.to(x.dtype).view(-1, 1, model.heads, 1)
        shaped = copies * keep
        if fill is not None:                                           # (heads, d_head)
            shaped = shaped + (1 - keep) * fill.to(x.dtype)
        return (shaped.reshape(copies.shape[0], *x.shape[1:]), *args[1:])

    hook = projections(model)[layer].register_forward_pre_hook(pre)
    try:
        yield
    finally:
        hook.remove()


@per_model
def takes_token_types(model: M.LoadedModel) -> bool:
    """True when the tokenizer makes token_type_ids and the forward takes them (run() passes
    them: GPT-2 read with a BERT tokenizer adds the embedding of type 0)."""
    names = getattr(model.tokenizer, "model_input_names", ())
    return "token_type_ids" in names and \
        "token_type_ids" in inspect.signature(model.model.forward).parameters


@dataclass(frozen=True)
class Batch:
    ids: torch.Tensor        # (b, n) right-padded with 0
    real: torch.Tensor       # (b, n) bool

    @property
    def last(self) -> torch.Tensor:
        """(b,) the position of each element's last real piece."""
        return self.real.sum(dim=1) - 1


def batch_of(rows: list[list[int]]) -> Batch:
    n = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), n, dtype=torch.long)
    real = torch.zeros(len(rows), n, dtype=torch.bool)
    for b, r in enumerate(rows):
        ids[b, :len(r)] = torch.tensor(r, dtype=torch.long)
        real[b, :len(r)] = True
    return Batch(ids, real)


def forward_batch(model: M.LoadedModel, batch: Batch, *, gate=None, interventions=(),
            grad: bool = False, embed_hook=None, expand=None):
    """One batched forward with the core inside: (logits (b, n, vocab) | None,
    last hidden states (b, n, hidden)). `interventions` apply to every element;
    `embed_hook(output)` may replace the input (word) embeddings (e.g. with a leaf for
    gradients, or dual numbers); expand = (layer, rows (c, heads)[, fill (heads, d_head)])
    turns a batch of 1 into c copies at that layer's output projection, copy i with head h
    multiplied by rows[i, h] (plus (1 - rows[i, h]) * fill[h]: mean ablation)."""
    captured = {}

    def grab(_module, _args, output):
        captured["last"] = output[0] if isinstance(output, tuple) else output.last_hidden_state

    state = Forward(plans=plans(model.check(interventions), model.layers, model.heads),
                    record=False)
    hooks = [model.model.base_model.register_forward_hook(grab)]
    if embed_hook is not None:
        def on_ids(_module, args, out):      # not GPT-2's second call, on token types
            return embed_hook(out) if torch.equal(args[0], batch.ids) else None
        hooks.append(model.model.get_input_embeddings().register_forward_hook(on_ids))
    inputs = {"input_ids": batch.ids, "attention_mask": batch.real.long()}
    if takes_token_types(model):                # as LoadedModel.run passes the tokenizer's
        inputs["token_type_ids"] = torch.zeros_like(batch.ids)
    token = FORWARD.set(state)
    try:
        with torch.set_grad_enabled(grad), gated(model, gate), expanded(model, expand):
            out = model.model(**inputs)
    finally:
        FORWARD.reset(token)
        for h in hooks:
            h.remove()
    logits = out.logits if model.head != "none" else None
    return logits, captured["last"]


def pooled(last: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Mean of the last hidden states over real tokens: (b, hidden) from (b, n, hidden)."""
    w = real.to(last.dtype).unsqueeze(-1)                              # (b, n, 1)
    return (last * w).sum(dim=1) / w.sum(dim=1)


def chunks(count: int, length: int, tokens: int | None = None):
    """Slices of `count` elements of `length` pieces, about `tokens` (BATCH_TOKENS) pieces
    per slice."""
    size = max(1, (BATCH_TOKENS if tokens is None else tokens) // max(length, 1))
    for start in range(0, count, size):
        yield slice(start, min(count, start + size))


def ids_of(model: M.LoadedModel, text: str) -> list[int]:
    return model.encode(text)["input_ids"][0].tolist()


def forward_rate(model: M.LoadedModel, texts) -> float:
    """Seconds per piece of one batched no-grad forward over the first 4 texts, timed here:
    the median of three passes (one pass on a busy machine varies by a factor of 3). The
    probe of a first estimate (attention.ui.estimate)."""
    import time

    b = batch_of([ids_of(model, text) for text in list(texts)[:4]])
    seconds = []
    with torch.no_grad():
        forward_batch(model, b)                                          # warm
        for _ in range(3):
            start = time.perf_counter()
            forward_batch(model, b)
            seconds.append(time.perf_counter() - start)
    return sorted(seconds)[1] / max(1, int(b.real.sum()))
