"""Interventions in a link: `mh_iv=ablate:2:5;temperature:*:*:0.5` (no torch, no streamlit).

Each item is `kind:layer:head[:value]`, `*` meaning every layer or every head; items are
joined by `;`. `to_param` writes the canonical form and `from_param` reads it back exactly;
a malformed item is dropped and reported (a warning on the page, never an exception).
Whether a layer or head exists is the loaded model's call (`LoadedModel.check`).
"""
from __future__ import annotations

import math

from attention.config import INTERVENTION_LINK_CHARS as MAX_CHARS
from attention.config import INTERVENTION_LINK_INDEX as MAX_INDEX
from attention.config import INTERVENTION_LINK_ITEMS as MAX_ITEMS
from attention.errors import UserError
from attention.models.interventions import KINDS


def item(kind: str, layer: int | None, head: int | None, value: float | None = None) -> str:
    """One intervention as `kind:layer:head[:value]`."""
    part = lambda i: "*" if i is None else str(int(i))  # noqa: E731
    text = f"{kind}:{part(layer)}:{part(head)}"
    return text if value is None else f"{text}:{value!r}"


def to_param(interventions) -> str:
    """Interventions (models.Intervention or anything with kind, layer, head, value) -> iv."""
    return ";".join(item(iv.kind, iv.layer, iv.head, iv.value) for iv in interventions)


def from_param(raw: str) -> tuple[tuple[tuple[str, int | None, int | None, float | None], ...],
                                  list[UserError]]:
    """iv -> ((kind, layer, head, value), ...) and one problem per item that was dropped."""
    if not raw:
        return (), []
    if len(raw) > MAX_CHARS:
        return (), [UserError("errors.iv_long", chars=len(raw), limit=MAX_CHARS)]
    out, problems = [], []
    for text in raw.split(";"):
        if not text.strip():
            continue
        try:
            parsed = _item(text.strip())
        except (ValueError, OverflowError):
            problems.append(UserError("errors.iv_item", item=text.strip()[:40]))
            continue
        if len(out) == MAX_ITEMS:
            problems.append(UserError("errors.iv_many", limit=MAX_ITEMS))
            break
        if parsed not in out:
            out.append(parsed)
    return tuple(out), problems


def _item(text: str) -> tuple[str, int | None, int | None, float | None]:
    parts = text.split(":")
    if len(parts) not in (3, 4) or parts[0] not in KINDS:
        raise ValueError(text)
    kind = parts[0]
    layer, head = (_index(p) for p in parts[1:3])
    value = float(parts[3]) if len(parts) == 4 else None
    if kind == "temperature":
        if value is None or not (math.isfinite(value) and value > 0):
            raise ValueError(text)
    elif value is not None:
        raise ValueError(text)
    return kind, layer, head, value


def _index(part: str) -> int | None:
    if part == "*":
        return None
    if not part.isdigit() or int(part) > MAX_INDEX:
        raise ValueError(part)
    return int(part)
