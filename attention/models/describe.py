"""A loaded model measured as the pages see it: a two-token probe forward checks that every
attention layer goes through the core and gives the heads, head size and causality; the
output projection of each layer (for value-weighted measures) and the longest text."""
from __future__ import annotations

import torch

from attention.errors import UserError
from attention.models.capture import forward
from attention.models.loaded import LoadedModel
from attention.models.registered import Forward, Unsupported


def _max_tokens(config, tokenizer) -> int:
    for name in ("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    value = getattr(tokenizer, "model_max_length", None)
    return value if isinstance(value, int) and 0 < value < 10 ** 7 else 2048


def _output_projection(model, module, width: int) -> torch.Tensor | None:
    """The weight (hidden, width) of the linear map applied to an attention module's output:
    o_proj / out_proj / c_proj (GPT-2's Conv1D stores it transposed) / dense on the module,
    or its parent's `output.dense` (BERT). None when none has `width` inputs."""
    parents = {id(child): parent for parent in model.modules() for child in parent.children()}
    candidates = [getattr(module, name, None) for name in ("o_proj", "out_proj", "c_proj", "dense")]
    parent = parents.get(id(module))
    output = getattr(parent, "output", None)
    candidates.append(getattr(output, "dense", None))
    for cand in candidates:
        w = getattr(cand, "weight", None)
        if not isinstance(w, torch.Tensor) or w.ndim != 2:
            continue
        if type(cand).__name__ == "Conv1D":
            w = w.t()                                                  # (in, out) -> (out, in)
        if w.shape[1] == width:
            return w.detach()
    return None


def _probe(model, tokenizer, source: str) -> Forward:
    """A two-token forward that checks every attention layer goes through the core."""
    enc = tokenizer("a b", return_tensors="pt")
    state = Forward()
    try:
        forward(model, enc, state)
    except Unsupported as err:
        raise UserError("model.unsupported_feature", source=source, feature=str(err)) from err
    if not state.calls:
        raise UserError("model.unsupported", source=source,
                        architecture=type(model).__name__)
    shapes = {(q.shape[0], q.shape[-1]) for q in state.q}
    if len(shapes) != 1 or len(set(state.kv_heads)) != 1:
        raise UserError("model.unsupported_feature", source=source, feature="heads per layer")
    return state


def describe(model, tokenizer, *, source: str, name: str, head: str, params: int,
              config) -> LoadedModel:
    """A loaded model and its tokenizer as the pages see them, measured by a probe forward.
    config: the (text) config, for the hidden size and the longest text."""
    probe = _probe(model, tokenizer, source)
    q = probe.q[0]                                                     # (heads, 2+, d_head)
    heads, d_head = q.shape[0], q.shape[-1]
    n = q.shape[1]
    is_causal = n > 1 and not bool(probe.masks[0][0, 1:].any())
    special = frozenset(int(i) for i in tokenizer.all_special_ids)
    return LoadedModel(
        source=source, name=name, model=model, tokenizer=tokenizer, head=head,
        architecture=type(model).__name__,
        layers=probe.calls, heads=heads, kv_heads=probe.kv_heads[0], d_head=d_head,
        hidden=int(getattr(config, "hidden_size", probe.v[0].shape[-1] * heads)),
        is_causal=is_causal, max_tokens=_max_tokens(config, tokenizer), params=params,
        special_ids=special, special_tokens=tuple(tokenizer.all_special_tokens),
        w_o=tuple(_output_projection(model, m, heads * d_head) for m in probe.modules))
