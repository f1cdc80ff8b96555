"""Sentences written from the importance frames (never fixed text): each conclusion is a
locale key plus parameters formatted here from the numbers of the frames on screen.

    conclusions(agreement, heads, sweep, pruning) -> list[Conclusion]
    Conclusion.text(lang) -> str

agreement: `importance.layer_agreement`; heads: `importance.head_importance`;
sweep: `importance.temperature_sweep`; pruning: `importance.pruning_curve` (any may be None).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from attention.i18n import translate
from attention.measures.rank import spearman

CLEAR = 0.3          # |Spearman| below this: "says little"
FLAT = 0.005         # metric changes smaller than this count as no change
KEEP = 0.95          # pruning: heads removable while the metric keeps 95% of the full model's


def fmt(x: float) -> str:
    """Every number in a sentence: two decimals, a minus sign for negatives, n/a for NaN."""
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


@dataclass(frozen=True)
class Conclusion:
    key: str                     # "importance.<key>"
    params: tuple                # ((name, value as shown), ...)

    def text(self, lang: str) -> str:
        return translate(lang, f"importance.{self.key}", **dict(self.params))


def _mean(agreement: pd.DataFrame, score: str, target: str) -> float:
    rows = agreement[(agreement["score"] == score) & (agreement["target"] == target)]
    values = rows["spearman"].dropna()
    return float(values.mean()) if len(values) else float("nan")


def agreement_conclusions(agreement: pd.DataFrame) -> list[Conclusion]:
    out = []
    means = {(s, t): _mean(agreement, s, t) for s in ("attention", "rollout", "flow")
             for t in ("occlusion", "gradient")}
    out.append(Conclusion("c_agreement", (
        ("layers", str(agreement["layer"].nunique())),
        ("raw_occ", fmt(means["attention", "occlusion"])),
        ("roll_occ", fmt(means["rollout", "occlusion"])),
        ("flow_occ", fmt(means["flow", "occlusion"])),
        ("raw_grad", fmt(means["attention", "gradient"])),
        ("roll_grad", fmt(means["rollout", "gradient"])),
        ("flow_grad", fmt(means["flow", "gradient"])))))
    raw = means["attention", "occlusion"]
    best = max(means["rollout", "occlusion"], means["flow", "occlusion"],
               key=lambda v: -math.inf if math.isnan(v) else v)
    if not (math.isnan(raw) or math.isnan(best)):
        out.append(Conclusion("c_rollout_better" if best > raw else "c_raw_better",
                              (("raw", fmt(raw)), ("best", fmt(best)))))
    rows = agreement[(agreement["score"] == "attention") & (agreement["target"] == "occlusion")]
    rows = rows.dropna(subset=["spearman"]).sort_values("layer")
    if len(rows) >= 2:
        first, last = rows.iloc[0], rows.iloc[-1]
        key = "c_raw_drops" if last["spearman"] < first["spearman"] else "c_raw_holds"
        out.append(Conclusion(key, (("first_layer", str(int(first["layer"]))),
                                    ("first", fmt(float(first["spearman"]))),
                                    ("last_layer", str(int(last["layer"]))),
                                    ("last", fmt(float(last["spearman"]))))))
    return out


def sharpness_conclusions(heads: pd.DataFrame) -> list[Conclusion]:
    rho = spearman(heads["ablation"], heads["max_weight"])
    rho_entropy = spearman(heads["ablation"], heads["entropy"])
    if math.isnan(rho):
        return []
    key = ("c_sharp_matter" if rho >= CLEAR else "c_flat_matter" if rho <= -CLEAR
           else "c_sharp_unrelated")
    return [Conclusion(key, (("rho", fmt(rho)), ("rho_entropy", fmt(rho_entropy)),
                             ("heads", str(len(heads)))))]


def sweep_conclusions(sweep: pd.DataFrame) -> list[Conclusion]:
    out = []
    for layer, rows in sweep.groupby("layer"):
        rows = rows.sort_values("tau")
        metric = rows["metric"].to_numpy()
        best = int(metric.argmax())
        peak = float(metric[best])
        ends = float(metric[0]), float(metric[-1])
        interior = 0 < best < len(metric) - 1 and min(peak - ends[0], peak - ends[1]) > FLAT
        if interior:
            key = "c_inverted_u"
        elif peak - min(metric) <= FLAT:
            key = "c_sweep_flat"
        else:
            key = "c_sharper_better" if best == 0 else "c_flatter_better" \
                if best == len(metric) - 1 else "c_sweep_mixed"
        at_one = rows[rows["tau"] == 1.0]["metric"]
        out.append(Conclusion(key, (
            ("layer", str(int(layer))), ("tau", fmt(float(rows["tau"].iloc[best]))),
            ("peak", fmt(peak)), ("max_weight", fmt(float(rows["max_weight"].iloc[best]))),
            ("base", fmt(float(at_one.iloc[0])) if len(at_one) else "n/a"),
            ("low", fmt(ends[0])), ("high", fmt(ends[1])))))
    return out


def pruning_conclusions(pruning: pd.DataFrame) -> list[Conclusion]:
    rows = pruning.sort_values("removed")
    full = float(rows["metric"].iloc[0])
    total = int(rows["removed"].iloc[-1])
    if rows["metric_name"].iloc[0] == "negative_loss":
        ok = rows["metric"] >= full - abs(full) * (1 - KEEP)      # loss within 5% of the full
    else:
        ok = rows["metric"] >= full * KEEP
    bad = rows[~ok]
    kept = int(rows[ok & (rows["removed"] < (bad["removed"].min() if len(bad) else math.inf))]
               ["removed"].max())
    return [Conclusion("c_pruning", (("kept", str(kept)), ("total", str(total)),
                                     ("share", fmt(100 * kept / total) if total else "n/a"),
                                     ("full", fmt(full)),
                                     ("last", fmt(float(rows["metric"].iloc[-1])))))]


def conclusions(agreement=None, heads=None, sweep=None, pruning=None) -> list[Conclusion]:
    out = []
    if agreement is not None and len(agreement):
        out += agreement_conclusions(agreement)
    if heads is not None and len(heads):
        out += sharpness_conclusions(heads)
    if pruning is not None and len(pruning):
        out += pruning_conclusions(pruning)
    if sweep is not None and len(sweep):
        out += sweep_conclusions(sweep)
    return out
