"""The settings of the causal-LM sweeps, and the interventions each one is.

A setting is (family, variant, layer, head); layer and head -1 mean every layer / head:

    base    ""                          the model as trained (module.scaling, tau 1)
    scale   "none" | "inv_d" | "ssmax"  logits times 1, 1/d_head (muP), or the trained scale
                                        times log n_i / log n_bar (Scalable-Softmax, n_i the
                                        keys query i sees, n_bar the corpus's mean length)
    tau     "0.25" ... "4"              logits divided by tau
    sinks   ""                          the first position's key hidden (Xiao et al. 2023)
    zero    ""                          one head's output zeroed (Michel et al. 2019)
    mean    ""                          one head's output replaced by its mean over the corpus

Nothing here imports torch: the page reads the same names."""
from __future__ import annotations

from dataclasses import dataclass

SCALES = ("none", "inv_d", "ssmax")
TAUS = ("0.25", "0.5", "0.75", "1.5", "2", "4")        # tau 1 is the base setting
ALL_TAUS = ("0.25", "0.5", "0.75", "1", "1.5", "2", "4")
# Per layer, the settings shipped first (a per-layer sweep costs layers x settings forwards
# from that layer on); "layers_rest" holds the other variants, per layer.
LAYER_VARIANTS = (("tau", "0.5"), ("tau", "2"), ("sinks", ""))
SWEEPS = ("global", "layers", "heads", "layers_rest")
FAMILIES = ("base", "scale", "tau", "sinks", "zero", "mean")


@dataclass(frozen=True, order=True)
class Setting:
    family: str
    variant: str = ""
    layer: int = -1          # -1: every layer
    head: int = -1           # -1: every head

    @property
    def first(self) -> int:
        """The first layer the setting changes (0 for every layer and for the base)."""
        return max(self.layer, 0)


BASE = Setting("base")


def settings_of(sweeps, layers: int, heads: int) -> list[Setting]:
    """The settings of the named sweeps, base first: global = every variant in every layer;
    layers = LAYER_VARIANTS in each layer alone, layers_rest the other variants in each
    layer alone; heads = zero and mean ablation per head."""
    out = [BASE]
    variants = [("scale", s) for s in SCALES] + [("tau", t) for t in TAUS] + [("sinks", "")]
    if "global" in sweeps:
        out += [Setting(f, v) for f, v in variants]
    for sweep, chosen in (("layers", [v for v in variants if v in LAYER_VARIANTS]),
                          ("layers_rest", [v for v in variants if v not in LAYER_VARIANTS])):
        if sweep in sweeps:
            out += [Setting(f, v, layer) for layer in range(layers) for f, v in chosen]
    if "heads" in sweeps:
        out += [Setting(f, "", layer, head) for layer in range(layers) for head in range(heads)
                for f in ("zero", "mean")]
    return out


def interventions(setting: Setting, *, d_head: int, reference: float, fill=None) -> tuple:
    """The model interventions of a setting. reference: the corpus's mean length in pieces
    (Scalable-Softmax); fill (layers, heads, d_head) nested lists: the heads' mean outputs."""
    from attention.models.interventions import Intervention

    layer = None if setting.layer < 0 else setting.layer
    head = None if setting.head < 0 else setting.head
    f, v = setting.family, setting.variant
    if f == "base":
        return ()
    if f == "scale":
        if v == "ssmax":
            return (Intervention("ssmax", layer, value=float(reference)),)
        return (Intervention("scale", layer, value=1.0 if v == "none" else 1.0 / d_head),)
    if f == "tau":
        return (Intervention("temperature", layer, value=float(v)),)
    if f == "sinks":
        return (Intervention("hide_sinks", layer),)
    if f == "zero":
        return (Intervention("ablate", layer, head),)
    if f == "mean":
        return (Intervention("replace", layer, head,
                             value=tuple(float(x) for x in fill[setting.layer][setting.head])),)
    raise ValueError(f"unknown setting family {f!r}")
