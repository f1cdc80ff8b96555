"""A loaded model's runs as the pages use them: one function from (model source, text, layer)
to that layer's q, k, v and mask (the Heatmap and Score analysis pages), the per-head report
of the Model heads page, and what an intervention changes at the output, for any model
`load_model` accepts. Every model's runs are kept in RUNS, one byte budget for all of them.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd
import torch

from attention import config
from attention.bounded import ByteLRU
from attention.errors import UserError
from attention.measures import heads as headstats
from attention.measures.rollout import rollout
from attention.measures.sinks import hide_sinks as hidden_sinks
from attention.models import outcomes
from attention.models.capture import FULL, Capture, ModelRun
from attention.models.changes import AttentionChange, attention_change
from attention.models.loaded import LoadedModel
from attention.models.loading import load_model

RUNS = ByteLRU(config.RUN_BYTES)


def run(source: str, text: str, interventions: tuple = (), *,
        mask_at: int | None = None, capture: Capture = FULL) -> ModelRun:
    """One forward pass of `text` through the model `source` names (UserError otherwise);
    full runs without interventions are kept in RUNS (one already kept is returned for any
    capture: it holds everything)."""
    if not interventions and mask_at is None:
        if capture == FULL or (source, text) in RUNS:
            return RUNS.get_or_compute((source, text), lambda: load_model(source).run(text))
    return load_model(source).run(text, interventions, mask_at=mask_at, capture=capture)


def attention_weights(text: str, *, scaled: bool = True) -> tuple[tuple[str, ...], torch.Tensor]:
    """The bundled model's word pieces and all heads' weights (layers, heads, n, n): as
    core.attention computed them inside the forward, or (scaled=False) recomputed from the
    same q and k without the 1/sqrt(d_head). Public as attention.pretrained.attention_weights."""
    r = run(config.BUNDLED, text)
    return r.tokens, r.weights if scaled else r.recompute(scaled=False).weights


def check_layer(loaded: LoadedModel, layer: int) -> int:
    if not 0 <= layer < loaded.layers:
        raise UserError("model.bad_layer", layer=layer, last=loaded.layers - 1, name=loaded.name)
    return layer


def layer_inputs(source: str, text: str, layer: int) -> tuple[tuple[str, ...], torch.Tensor,
                                                               torch.Tensor, torch.Tensor]:
    """The model's tokens and layer `layer`'s q, k, v (heads, n, d_head) as its attention saw
    them (RoPE applied, grouped k/v repeated to the query heads)."""
    check_layer(load_model(source), layer)
    r = run(source, text)
    return r.tokens, r.q[layer], r.k[layer], r.v[layer]


def layer_mask(source: str, text: str, layer: int, *, hide_sinks: bool = False) -> torch.Tensor | None:
    """The layer's own mask (n, n) bool, True = may attend (causal for a causal model), without
    the sink keys when hide_sinks (a row left with no key keeps its keys); None = every key."""
    r = run(source, text)
    mask = r.mask[layer]                                                 # (n, n)
    if hide_sinks:
        mask = hidden_sinks(mask, r.sinks, mask.shape)                   # (n, n)
    return None if bool(mask.all()) else mask


def special_names(loaded: LoadedModel) -> tuple[str | None, str | None]:
    """The model's opening and separating special tokens for Clark et al.'s [CLS] and [SEP]
    columns: cls_token (else bos_token) and sep_token (else eos_token); None when absent."""
    tok = loaded.tokenizer
    opening = getattr(tok, "cls_token", None) or getattr(tok, "bos_token", None)
    closing = getattr(tok, "sep_token", None) or getattr(tok, "eos_token", None)
    return opening, closing


def unknown_count(loaded: LoadedModel, ids) -> tuple[str | None, int]:
    """The tokenizer's unknown token and how many of `ids` are it."""
    unk_id = getattr(loaded.tokenizer, "unk_token_id", None)
    unk = getattr(loaded.tokenizer, "unk_token", None)
    return unk, 0 if unk_id is None else sum(1 for i in ids if i == unk_id)


@dataclass(frozen=True, eq=False)
class HeadsReport:
    """What the Model heads page shows about one text through one model, computed once."""
    name: str
    tokens: tuple[str, ...]
    weights: torch.Tensor        # (layers, heads, n, n) as the model computed them
    shown: torch.Tensor          # (layers, heads, n, n) weights as drawn (sinks hidden or not)
    table: pd.DataFrame          # one row per (layer, head): HEAD_COLUMNS + SINK_COLUMNS
    rollout: torch.Tensor        # (layers, n, n)
    special: tuple[str | None, str | None]   # the tokens the [CLS] / [SEP] columns count
    unk: tuple[str | None, int]  # the unknown token and how many pieces are it
    is_causal: bool
    has_values: bool             # the output projection is known: value-weighted norms work


def heads_report(source: str, text: str, *, hide_sinks: bool = False) -> HeadsReport:
    """Every head of `text` through `source`: Clark et al.'s table with the model's own
    special tokens and the sink shares in one table, the rollout (of the weights as the
    model used them)."""
    loaded = load_model(source)
    r = run(source, text)
    weights = r.weights                                                  # (layers, heads, n, n)
    special = special_names(loaded)
    special_keys = torch.tensor([i in loaded.special_ids for i in r.ids], dtype=torch.bool)
    return HeadsReport(
        name=loaded.name, tokens=r.tokens, weights=weights,
        shown=without_sinks(r) if hide_sinks else weights,
        table=headstats.head_table(weights, r.tokens, *special).merge(
            headstats.sink_table(weights, special_keys), on=["layer", "head"]),
        rollout=rollout(weights), special=special,
        unk=unknown_count(loaded, r.ids), is_causal=loaded.is_causal,
        has_values=all(w is not None for w in loaded.w_o))


def without_sinks(r: ModelRun) -> torch.Tensor:
    """Every head's weights (layers, heads, n, n) recomputed from the run's q and k with the
    sink keys masked (attention.measures.sinks): the softmax over the other keys."""
    return replace(r, mask=hidden_sinks(r.mask, r.sinks, r.mask.shape)).recompute().weights


def value_weighted(source: str, text: str, layer: int, head: int):
    """One head's weights alpha (n, n), ||alpha_ij f(x_j)|| (n, n) and ||f(x_j)|| (n,)
    (Kobayashi et al. 2020); None when the model's output projection was not found."""
    loaded = load_model(source)
    r = run(source, text)
    f = loaded.value_vectors(r, layer)
    if f is None:
        return None
    alpha = r.weights[layer, head]                                       # (n, n)
    f = f[head]                                                          # (n, hidden)
    return alpha, headstats.value_weighted_norms(alpha, f), f.norm(dim=-1)


# ---- what an intervention changes at the output (summaries: a few rows, not n x vocab) ------


@dataclass(frozen=True, eq=False)
class LmOutcome:
    """A language model's prediction at one position, before and after the interventions."""
    position: int                # the position whose prediction is compared
    token: str                   # the token there (the masked piece for a masked LM)
    top: pd.DataFrame            # outcomes.compare_top
    kl: float                    # KL(before || after) at that position, nats
    losses: pd.DataFrame | None  # outcomes.loss_table over the text (causal LM only)
    attention: AttentionChange   # the heads' weights and sharpness before and after


def lm_outcome(source: str, text: str, interventions: tuple, *,
               mask_at: int | None = None, lean: bool = True) -> LmOutcome:
    """Causal LM (mask_at None): the next token after the text, and each token's loss.
    Masked LM: the prediction at `mask_at` (that piece replaced by the mask token), or, when
    mask_at is None, at the first mask token already in the text.
    lean: both runs capture only what the outcome reads (no q, k, v; one logits row and the
    losses), unless the plain run is kept in RUNS already; False: full runs (the same numbers)."""
    loaded = load_model(source)
    ids = loaded.encode(text)["input_ids"][0].tolist()                  # the text's own ids
    if loaded.head == "causal_lm":
        position = -1
    elif mask_at is not None:
        position = mask_at
    else:
        position = ids.index(loaded.tokenizer.mask_token_id)
    capture = Capture(qkv=False, logits_row=position) if lean else FULL
    before = run(source, text, mask_at=mask_at, capture=capture)
    after = run(source, text, interventions, mask_at=mask_at, capture=capture)
    decode = lambda i: loaded.pieces([i])[0]                             # noqa: E731
    position %= before.n
    if loaded.head == "causal_lm":
        losses = outcomes.losses_frame(before.token_losses(), after.token_losses(),
                                       before.tokens) if before.n > 1 else None
        token = before.tokens[position]
    else:
        losses = None
        token = loaded.pieces(ids)[position]                             # before any masking
    b, a = before.logits_of(position), after.logits_of(position)       # (vocab,) each
    return LmOutcome(position=position, token=token, top=outcomes.compare_top(b, a, decode),
                     kl=outcomes.kl_divergence(b, a), losses=losses,
                     attention=attention_change(before, after, interventions))


@dataclass(frozen=True, eq=False)
class EmbeddingOutcome:
    """An embedding model's text before and after the interventions."""
    cosine: float                # cos(embedding before, embedding after) of the whole text
    lines: pd.DataFrame | None   # two lines or more: each line's own cosine (sentence, cosine)
    pairs: pd.DataFrame | None   # and every pair of lines' (outcomes.similarity_frame)
    attention: AttentionChange   # the whole text's heads before and after


def embedding_outcome(source: str, text: str, interventions: tuple,
                      lines: tuple[str, ...]) -> EmbeddingOutcome:
    """The cosine between the text's embeddings before and after; with two lines or more,
    each line's own cosine before against after, and every pair of lines' cosine before and
    after (outcomes.similarity_frame)."""
    lean = Capture(qkv=False)
    before = run(source, text, capture=lean)
    after = run(source, text, interventions, capture=lean)
    change = attention_change(before, after, interventions)
    cos = outcomes.cosine(before.embedding, after.embedding)
    if len(lines) < 2:
        return EmbeddingOutcome(cosine=cos, lines=None, pairs=None, attention=change)
    loaded = load_model(source)
    plain = torch.stack([loaded.run(line, capture=lean).embedding for line in lines])  # (s, hidden)
    changed = torch.stack([loaded.run(line, interventions, capture=lean).embedding
                           for line in lines])
    each = pd.DataFrame({"sentence": list(lines),
                         "cosine": [outcomes.cosine(p, c) for p, c in zip(plain, changed)]})
    return EmbeddingOutcome(cosine=cos, lines=each, pairs=outcomes.similarity_frame(
        plain, changed, lines), attention=change)
