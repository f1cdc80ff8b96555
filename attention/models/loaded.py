"""A loaded model as the pages see it: its shape, its tokenizer, and `run(text)`."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Callable, TypeVar

import torch

from attention import config
from attention.errors import UserError
from attention.models import outcomes
from attention.models.capture import FULL, Capture, ModelRun, forward
from attention.models.interventions import Intervention, plans
from attention.models.registered import Forward


T = TypeVar("T")


def per_model(fn: Callable[[LoadedModel], T]) -> Callable[[LoadedModel], T]:
    """fn(model) computed once per model and kept on the model itself, so it goes when the
    model goes: a cache keyed by the model (functools.lru_cache) would keep an evicted
    model's weights alive, outside the models' store and its memory cap."""
    key = f"{fn.__module__}.{fn.__qualname__}"

    @functools.wraps(fn)
    def once(model: LoadedModel) -> T:
        if key not in model.memo:
            model.memo[key] = fn(model)
        return model.memo[key]

    return once


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A transformers model running core.attention, with what the pages need to know of it."""
    source: str                      # as given to load_model (bundled name, folder or Hub id)
    name: str                        # short display name (folder name or Hub id)
    model: object                    # transformers PreTrainedModel, eval mode, float32
    tokenizer: object
    head: str                        # "causal_lm", "masked_lm" or "none" (embeddings only)
    architecture: str                # the transformers class name, e.g. "LlamaForCausalLM"
    layers: int
    heads: int
    kv_heads: int                    # < heads for grouped-query attention
    d_head: int
    hidden: int
    is_causal: bool                  # queries see only earlier keys
    max_tokens: int                  # longest text (tokens incl. special ones) it can run
    params: int
    special_ids: frozenset[int]
    special_tokens: tuple[str, ...]
    w_o: tuple[torch.Tensor | None, ...]  # per layer (hidden, heads * d_head) output
                                          # projection weight, None where not found
    memo: dict = field(default_factory=dict, repr=False, init=False)  # per_model: dies with it,
                                                                     # a copy (replace) starts empty

    def encode(self, text: str) -> dict[str, torch.Tensor]:
        """The tokenizer's tensors for `text` (batch of 1); UserError when empty, beyond
        `max_tokens`, or holding more attention than one run keeps."""
        if not isinstance(text, str) or not text.strip():
            raise UserError("model.empty_text")
        enc = self.tokenizer(text, return_tensors="pt", truncation=False, verbose=False)
        n = enc["input_ids"].shape[1]
        if n > self.max_tokens:
            raise UserError("model.too_long", pieces=n, limit=self.max_tokens, name=self.name)
        if self.layers * self.heads * n * n > config.MAX_WEIGHT_CELLS:
            raise UserError("model.too_many_cells", layers=self.layers, heads=self.heads,
                            n=n, max_n=math.isqrt(config.MAX_WEIGHT_CELLS // (self.layers * self.heads)))
        return enc

    def pieces(self, ids) -> tuple[str, ...]:
        """The pieces of `ids` as the pages show them. A byte-level BPE vocabulary (GPT-2,
        LLaMA-3, SmolLM2: "Ġcapital") is shown as the bytes it stands for, a leading space as
        "▁" and a newline as "↵"; a piece that is part of a character (a Chinese character
        is often 2-3 pieces) as its bytes in hex, "‹e6 88›"; other vocabularies as the
        tokenizer names them."""
        tokens = self.tokenizer.convert_ids_to_tokens([int(i) for i in ids])
        if not _byte_level(self.tokenizer):
            return tuple(tokens)
        special = set(self.special_tokens)
        return tuple(tok if tok in special else _shown(tok) for tok in tokens)

    def check(self, interventions) -> tuple[Intervention, ...]:
        """The interventions as a tuple; UserError for a layer or head the model lacks."""
        out = tuple(interventions)
        for iv in out:
            if not isinstance(iv, Intervention):
                raise TypeError(f"expected Intervention, got {type(iv).__name__}")
            if iv.layer is not None and not 0 <= iv.layer < self.layers:
                raise UserError("model.bad_layer", layer=iv.layer, last=self.layers - 1,
                                name=self.name)
            if iv.head is not None and not 0 <= iv.head < self.heads:
                raise UserError("model.bad_head", head=iv.head, last=self.heads - 1,
                                name=self.name)
        return out

    def run(self, text: str, interventions=(), *, mask_at: int | None = None,
            capture: Capture = FULL) -> ModelRun:
        """One forward pass of `text` with core.attention (and the interventions) inside.
        mask_at: replace the token at that position by the tokenizer's mask token first (a
        masked LM's prediction there); UserError when there is no mask token or position.
        capture: what the run keeps (capture.Capture; everything by default)."""
        interventions = self.check(interventions)
        enc = self.encode(text)
        if mask_at is not None:
            mask_id = getattr(self.tokenizer, "mask_token_id", None)
            if mask_id is None:
                raise UserError("model.no_mask_token", name=self.name)
            n = enc["input_ids"].shape[1]
            if not 0 <= mask_at < n:
                raise UserError("model.bad_position", position=mask_at, last=n - 1)
            enc["input_ids"] = enc["input_ids"].clone()
            enc["input_ids"][0, mask_at] = mask_id
        ids = enc["input_ids"][0]                                      # (n,)
        sinks = torch.isin(ids, torch.tensor(sorted(self.special_ids), dtype=ids.dtype))
        sinks[0] = True                                                # (n,) first token too
        state = Forward(plans=plans(interventions, self.layers, self.heads), sinks=sinks,
                        qkv=capture.qkv)
        out, last = forward(self.model, enc, state)
        real = enc["attention_mask"][0].bool()                         # (n,)
        pooled = last[real].mean(dim=0)                                # (hidden,)
        logits = out.logits[0] if self.head != "none" else None        # (n, vocab)
        del out
        lean = {}
        if logits is not None and capture.logits_row is not None:
            at = capture.logits_row % len(ids)
            lean = dict(logits_at=at, logits_row=logits[at].clone(),  # (vocab,)
                        losses=outcomes.token_losses(logits, ids.tolist())
                        if self.head == "causal_lm" else None)         # (n-1,)
            logits = None
        weights = _stacked(state.weights)
        q, k, v = (_stacked(part) if capture.qkv else None for part in (state.q, state.k, state.v))
        return ModelRun(
            tokens=self.pieces(ids.tolist()),
            ids=tuple(ids.tolist()), weights=weights,
            logits=logits, embedding=torch.nn.functional.normalize(pooled, dim=0),
            last_hidden=last, q=q, k=k, v=v, mask=torch.stack(state.masks),
            scaling=tuple(state.scaling), sinks=sinks, interventions=interventions, **lean)

    def value_vectors(self, run: ModelRun, layer: int) -> torch.Tensor | None:
        """f_h(x_j) = v_h(x_j) W_O[:, h] (Kobayashi et al. 2020): what head h adds to the
        residual stream per unit of weight on token j. (heads, n, hidden), or None when the
        output projection of this architecture was not found."""
        w_o = self.w_o[layer]
        if w_o is None:
            return None
        w = w_o.view(w_o.shape[0], self.heads, self.d_head).permute(1, 2, 0)  # (heads, d, hidden)
        return run.v[layer] @ w                                        # (heads, n, hidden)


def _byte_level(tokenizer) -> bool:
    """Whether the tokenizer's pieces are GPT-2's byte-level alphabet ("Ġ" a space)."""
    try:
        return tokenizer.convert_tokens_to_string(["Ġa"]) == " a"
    except Exception:                 # a tokenizer that cannot join an unknown piece
        return False


def _byte_alphabet() -> dict[str, int]:
    """GPT-2's byte-level alphabet: the character that stands for each byte -> the byte."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in kept:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


_BYTES = _byte_alphabet()


def _shown(token: str) -> str:
    """A byte-level piece as the text it stands for (see LoadedModel.pieces)."""
    if not all(c in _BYTES for c in token):
        return token
    raw = bytes(_BYTES[c] for c in token)
    try:
        return raw.decode("utf-8").replace(" ", "▁").replace("\n", "↵")
    except UnicodeDecodeError:
        return "‹" + " ".join(f"{b:02x}" for b in raw) + "›"


def _stacked(layers: list[torch.Tensor]) -> torch.Tensor:
    """The per-layer tensors stacked (layers, ...), the list emptied at once: the layers'
    own tensors are freed before the next part is stacked (SmolLM2 at 252 pieces holds 69 MB
    of weights and 17 MB each of q, k, v; stacked all at once they were there twice)."""
    out = torch.stack(layers)
    layers.clear()
    return out
