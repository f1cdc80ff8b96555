"""AttentionSpec: every choice that determines a computed view, frozen and URL-serialisable.

The spec is the cache key of `analyze()` and, encoded as a query string, the share link.
`to_query()` and `from_query()` round-trip exactly; malformed parameters fall back to the
default with a warning instead of raising.

Two inputs: `tokens`, the list the random-projection source embeds, and `text`, the input as
typed for a source that runs a real model with its own tokenizer ("Wait, what" keeps its
comma). `text` is "" when it would say nothing more than the tokens joined by spaces (and
always for the toy source): `model_text` is what a model reads. A link's `tokens` value is
read by `tokens.tokens_from_link` (a text without spaces as pasted text is: a Chinese
sentence becomes its words); when it is the text as typed, the link carries no `text`, and a
link without one gives a model its `tokens` value as the text. Links made before read the same.

Which real model: `source="pretrained"` with `model` "" (the bundled all-MiniLM-L6-v2, what
links made before `model` existed open) or a local folder path / Hugging Face id, given to
`models.load_model`. `hide_sinks` renormalises a real model's weights without the first
token and special tokens. Both, like `text`, are written to a link only when set.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, fields, replace
from typing import Mapping

from attention.config import BUNDLED, LIMITS, MAX_CELLS, MAX_MODEL_CHARS, MAX_WORK
from attention.errors import UserError
from attention.text.tokens import (CONTROL, LINK_FORMAT, MAX_TOKENS, check_length, tokens_from_link,
                     tokens_to_text)

DEFAULT_TOKENS = ("the", "animal", "didn't", "cross", "the", "street",
                  "because", "it", "was", "too", "tired")
SOURCES = ("toy", "pretrained")

OPTIONAL = ("text", "model", "hide_sinks")   # written to a link only when set


class SpecWarning(UserWarning):
    """A URL parameter was malformed and its default was used."""


class SpecError(UserError):
    """A combination of settings the server will not compute; the message is for the user."""


@dataclass(frozen=True)
class AttentionSpec:
    tokens: tuple[str, ...] = DEFAULT_TOKENS
    d_model: int = 64
    d_k: int = 16
    heads: int = 4
    seed: int = 0
    positional: bool = True
    causal: bool = False
    temperature: float = 1.0
    source: str = "toy"  # "toy": hashed embeddings + random projections; "pretrained": a model
    layer: int = 0       # which model layer's heads (source="pretrained" only)
    text: str = ""       # the input as typed, for model sources; "" = the tokens joined by spaces
    model: str = ""      # source="pretrained": "" = bundled MiniLM, else a folder path or Hub id
    hide_sinks: bool = False  # source="pretrained": no weight on first/special tokens, renormalised

    def __post_init__(self) -> None:
        object.__setattr__(self, "tokens", tuple(self.tokens))
        text = CONTROL.sub("", self.text).strip()
        if self.source == "toy" or text == " ".join(self.tokens):
            text = ""                                # one spec (one link, one cache key) per view
        object.__setattr__(self, "text", text)
        model = self.model.strip() if isinstance(self.model, str) else self.model
        if self.source == "toy" or model == BUNDLED:
            model = ""
        object.__setattr__(self, "model", model)
        if self.source == "toy":
            object.__setattr__(self, "hide_sinks", False)

    @property
    def model_source(self) -> str:
        """What `models.load_model` is given: the bundled model's name or `model`."""
        return self.model or BUNDLED

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def model_text(self) -> str:
        """What a real model's tokenizer reads: the text as typed, else the tokens joined."""
        return self.text or " ".join(self.tokens)

    def validate(self) -> None:
        """Raise SpecError with a sentence for the user when the spec is out of bounds."""
        if not self.tokens:
            raise SpecError("errors.tokens_empty")
        if len(self.tokens) > MAX_TOKENS:
            raise SpecError("errors.tokens_too_many", count=len(self.tokens), limit=MAX_TOKENS)
        for name, (lo, hi) in LIMITS.items():
            value = getattr(self, name)
            if not lo <= value <= hi or (isinstance(value, float) and not math.isfinite(value)):
                raise SpecError("errors.spec_range", name=name, value=value, lo=lo, hi=hi)
        if self.source not in SOURCES:
            raise SpecError("errors.spec_source", source=self.source, sources=", ".join(SOURCES))
        check_model(self.model)
        if self.heads * self.n * self.n > MAX_CELLS:
            raise SpecError("errors.spec_cells", heads=self.heads, n=self.n,
                            max_heads=max(1, MAX_CELLS // (self.n * self.n)))
        per_d_k = self.heads * self.n * (self.n + self.d_model)
        if self.source == "toy" and per_d_k * self.d_k > MAX_WORK:
            raise SpecError("errors.spec_work", heads=self.heads, n=self.n, d_k=self.d_k,
                            d_model=self.d_model, max_d_k=max(1, MAX_WORK // per_d_k))

    # ---- URL query string ---------------------------------------------------------------

    def to_query(self) -> dict[str, str]:
        """Every field as a string; tokens space-joined when that is unambiguous, else JSON;
        text only when there is one. A text that reads back as a link's tokens value into the
        tokens (a Chinese sentence as typed, "Wait, what") is written as that value alone."""
        query = {}
        merged = bool(self.text) and _reads_as(self.text, self.tokens)
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "text" and merged:
                continue
            if f.name == "tokens" and merged:
                query[f.name] = self.text
            elif f.name in OPTIONAL:
                if value:
                    query[f.name] = "1" if value is True else value
            elif f.name == "tokens":
                query[f.name] = tokens_to_text(value, LINK_FORMAT)
            elif isinstance(value, bool):
                query[f.name] = "1" if value else "0"
            else:
                query[f.name] = repr(value) if isinstance(value, float) else str(value)
        return query

    @classmethod
    def parse_query(cls, params: Mapping[str, object]) -> tuple["AttentionSpec", list[UserError]]:
        """Spec from query params, plus one problem per parameter that fell back to its default."""
        default, values, problems = cls(), {}, []
        for f in fields(cls):
            if f.name not in params:
                continue
            raw = _last(params[f.name])
            try:
                values[f.name] = _decode(f.name, str(raw), getattr(default, f.name))
            except UserError as err:
                problems.append(UserError("errors.url_param", name=f.name, detail=err))
            except (ValueError, OverflowError):
                problems.append(UserError("errors.url_param", name=f.name,
                                          detail=UserError("errors.not_a_value", raw=str(raw)[:40])))
        raw_tokens = values.get("tokens") and str(_last(params["tokens"]))
        if "text" not in params and raw_tokens and not raw_tokens.lstrip().startswith("["):
            values["text"] = raw_tokens       # the tokens value is the text as typed
        spec = replace(default, **values)
        try:
            spec.validate()
        except SpecError as err:
            problems.append(UserError("errors.url_spec", detail=err))
            spec = default
        return spec, problems

    @classmethod
    def from_query(cls, params: Mapping[str, object]) -> "AttentionSpec":
        spec, problems = cls.parse_query(params)
        for problem in problems:
            warnings.warn(str(problem), SpecWarning, stacklevel=2)
        return spec


def _last(raw: object) -> object:
    """A repeated key's values: the last one wins."""
    if isinstance(raw, (list, tuple)):
        return raw[-1] if raw else ""
    return raw


def _reads_as(text: str, tokens: tuple[str, ...]) -> bool:
    try:
        return not text.lstrip().startswith("[") and tokens_from_link(text) == list(tokens)
    except UserError:
        return False


def check_model(model: object) -> str:
    """`model` itself when it can name a model (a string of at most MAX_MODEL_CHARS characters
    without control characters), else SpecError. Whether it loads is models.load_model's call."""
    if not isinstance(model, str):
        raise SpecError("errors.spec_model_type")
    if len(model) > MAX_MODEL_CHARS:
        raise SpecError("errors.spec_model_long", chars=len(model), limit=MAX_MODEL_CHARS)
    if CONTROL.search(model) or any(ch in model for ch in "\n\r\t"):
        raise SpecError("errors.spec_model_control")
    return model


def _decode(name: str, raw: str, default: object) -> object:
    """One query value -> the field's type; raises UserError (or ValueError) when malformed."""
    if name == "tokens":
        return tuple(tokens_from_link(raw))
    if name == "text":
        return check_length(raw)
    if name == "model":
        return check_model(raw.strip())
    if isinstance(default, bool):
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(raw)
    if isinstance(default, int):
        value = int(raw)
    elif isinstance(default, float):
        value = float(raw)
        if not math.isfinite(value):
            raise ValueError(raw)
    else:
        value = raw
        if name == "source" and value not in SOURCES:
            raise UserError("errors.spec_source", source=raw[:40], sources=", ".join(SOURCES))
    if name in LIMITS:
        lo, hi = LIMITS[name]
        if not lo <= value <= hi:
            raise UserError("errors.spec_range", name=name, value=raw[:40], lo=lo, hi=hi)
    return value
