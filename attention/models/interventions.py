"""Interventions: what a forward pass changes in some heads' attention, and the per-layer,
per-head plan core_attention_forward follows."""
from __future__ import annotations

import math
from dataclasses import dataclass

from attention.errors import UserError

KINDS = ("unscaled", "temperature", "ablate", "uniform", "hide_sinks")   # offered to visitors
# Kinds of the corpus sweeps (attention.sweeps), built in code: their values are not typed by
# a visitor (a scale, a reference length, a vector).
SWEEP_KINDS = ("scale", "ssmax", "replace")


@dataclass(frozen=True)
class Intervention:
    """A change to the attention of some heads, applied inside the model's forward pass.

    kind: "unscaled"    logits q.k with scale 1 instead of the module's 1/sqrt(d_head);
          "temperature" logits divided by `value` (tau > 0; tau > 1 flattens, < 1 sharpens);
          "ablate"      the head's output is zero (its slice of the output projection's input);
                        its weights are still computed and returned;
          "uniform"     equal weight on every key the mask allows (q set to zero);
          "hide_sinks"  no weight on the first token and special tokens, rows renormalised
                        (a row that may only see sinks, e.g. a causal model's first, keeps them);
          "scale"       logits q.k times `value` instead of the module's own scale (1/d: muP);
          "ssmax"       Scalable-Softmax (Nakanishi 2025): logits q.k times the module's scale
                        times log(n_i) / log(value), n_i the keys query i sees, so it equals
                        the trained scale where a query sees `value` keys (value > 1);
          "replace"     the head's output replaced by the vector `value` (d_head floats): mean
                        ablation with the head's mean output.
    layer, head: None = every layer / every head. Later interventions on the same head
    override earlier ones of the same kind; different kinds combine."""
    kind: str
    layer: int | None = None
    head: int | None = None
    value: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS + SWEEP_KINDS:
            raise UserError("model.bad_kind", kind=self.kind, kinds=", ".join(KINDS))
        if self.kind == "replace":
            vec = self.value
            if not isinstance(vec, tuple) or not vec or \
                    not all(isinstance(x, float) and math.isfinite(x) for x in vec):
                raise UserError("model.bad_vector")
        elif self.kind in ("temperature", "scale", "ssmax"):
            tau = self.value
            if not isinstance(tau, (int, float)) or isinstance(tau, bool) \
                    or not (math.isfinite(tau) and tau > (1 if self.kind == "ssmax" else 0)):
                raise UserError("model.bad_temperature" if self.kind == "temperature"
                                else "model.bad_value", kind=self.kind, value=tau)


@dataclass(frozen=True)
class HeadPlan:
    """What one head of one layer does differently (the defaults: nothing)."""
    unscaled: bool = False
    tau: float = 1.0
    ablate: bool = False
    uniform: bool = False
    hide: bool = False
    scale: float | None = None            # replaces the module's scale ("scale")
    ssmax: float | None = None            # reference length of Scalable-Softmax ("ssmax")
    fill: tuple[float, ...] | None = None  # the head's output replaced ("replace")


def plans(interventions: tuple[Intervention, ...], layers: int,
           heads: int) -> dict[int, tuple[HeadPlan, ...]]:
    """layer -> one HeadPlan per head, for the layers some intervention touches."""
    plans: dict[int, list[dict]] = {}
    for iv in interventions:
        for layer in range(layers) if iv.layer is None else (iv.layer,):
            row = plans.setdefault(layer, [{} for _ in range(heads)])
            for head in range(heads) if iv.head is None else (iv.head,):
                if iv.kind == "temperature":
                    row[head]["tau"] = float(iv.value)
                elif iv.kind in ("scale", "ssmax"):
                    row[head][iv.kind] = float(iv.value)
                elif iv.kind == "replace":
                    row[head]["fill"] = iv.value
                else:
                    row[head][{"hide_sinks": "hide"}.get(iv.kind, iv.kind)] = True
    return {layer: tuple(HeadPlan(**h) for h in row) for layer, row in plans.items()}
