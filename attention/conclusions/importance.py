"""Sentences written from the importance frames and their intervals (never fixed text): each
conclusion is a locale key plus parameters formatted here from the frames on screen.

    conclusions(agreement=None, faithfulness=None, sharpness=None, pruning=None, sweep=None)
        -> list[Conclusion];  Conclusion.text(lang) -> str

agreement: importance.agreement; faithfulness: importance.faithfulness; sharpness:
curves.sharpness_agreement; pruning: curves.pruning_with_band; sweep: curves.paired_sweep.

The rules every sentence follows:
  - it states its 95% interval and how many texts (or pairs, or heads) it rests on;
  - where the interval overlaps the null band (what scores unrelated to the target give), or
    includes 0 for a difference, or the corpus has fewer than MIN_TEXTS texts, the sentence
    says the data cannot tell, and why;
  - two methods are called different only when their intervals do not overlap;
  - about heads, nothing beyond what ablation measured: a correlation across heads is
    reported as one, never as sharpness causing importance;
  - the baselines come before the methods: the best one (highest mean rho) and, named, the
    rows that beat it (interval wholly above its interval: above_baseline);
  - a pruning or sweep sentence names what its metric was measured on (a sentence model's is
    the project's fixed English pairs, whatever the corpus), and the page's corpus needs
    MIN_TEXTS texts for either, as for every other corpus-level sentence.
The answer above the page's charts (conclusions.answer) follows the same rules.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from attention.i18n import translate

MIN_TEXTS = 20       # below this many texts a corpus-level statement is not made
KEEP = 0.95          # (kept for callers of the old pruning rule)
MAIN = ("attention", "rollout", "flow", "norm")           # layered families, layer means
SINGLE = ("gradient", "integrated_gradients")             # methods without layers
BASELINES = ("random", "position_start", "position_end", "inverse_frequency")
TOP = 4              # rows named in a sentence; beyond, how many more


def fmt(x) -> str:
    """Every number in a sentence: two decimals, a minus sign for negatives, n/a for NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{float(x):.2f}".replace("-0.00", "0.00")


def _nan(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


@dataclass(frozen=True)
class Conclusion:
    key: str                     # "importance.<key>"
    params: tuple                # ((name, value as shown or a label key), ...)

    def text(self, lang: str) -> str:
        values = {}
        for name, value in self.params:
            if isinstance(value, (Label, Names, Phrase)):
                value = value.text(lang)
            values[name] = value
        return translate(lang, f"importance.{self.key}", **values)


@dataclass(frozen=True)
class Phrase:
    """A part of a sentence that is itself a locale key with parameters."""
    key: str                     # "importance.<key>"
    params: tuple = ()

    def text(self, lang: str) -> str:
        return translate(lang, f"importance.{self.key}", **dict(self.params))


@dataclass(frozen=True)
class Names:
    """Rows named in the reader's language: the first labels, then how many more."""
    labels: tuple                # (Label, ...)
    more: int = 0                # rows left unnamed

    def text(self, lang: str) -> str:
        names = translate(lang, "importance.list_sep").join(x.text(lang) for x in self.labels)
        if self.more:
            return translate(lang, "importance.list_more", names=names, more=self.more)
        return names


@dataclass(frozen=True)
class Label:
    """A method's name in the reader's language: family, layer (None = none), layer mean."""
    method: str
    layer: int | None = None
    mean: bool = False

    def text(self, lang: str) -> str:
        if self.method.startswith(("metric_", "unit_")):
            return translate(lang, f"importance.{self.method}")
        name = translate(lang, f"importance.method_{self.method}") \
            if _known(lang, self.method) else self.method
        if self.mean:
            return translate(lang, "importance.label_mean", method=name)
        if self.layer is not None:
            return translate(lang, "importance.label_layer", method=name, layer=self.layer)
        return name


def _known(lang: str, method: str) -> bool:
    try:
        translate(lang, f"importance.method_{method}")
    except KeyError:                 # a column of the user's own: its name as it is
        return False
    return True


def label_of(row) -> Label:
    layer = None if _nan(row["layer"]) else int(row["layer"])
    return Label(str(row["method"]), layer, bool(row.get("layer_mean", False)))


def _interval(row, low="ci_low", high="ci_high") -> tuple:
    return (("low", fmt(row[low])), ("high", fmt(row[high])))


def overlaps_null(row) -> bool:
    if any(_nan(row[c]) for c in ("ci_low", "ci_high", "null_low", "null_high")):
        return True
    return not (row["ci_low"] > row["null_high"] or row["ci_high"] < row["null_low"])


# ---------------------------------------------------------------------------- agreement


def _rows(agreement: pd.DataFrame, method: str, *, mean: bool = False, layer=None):
    got = agreement[(agreement["method"] == method) & (agreement["layer_mean"] == mean)]
    got = got[got["layer"].isna()] if layer is None else got[got["layer"] == layer]
    return got.iloc[0] if len(got) else None


def agreement_sentence(row, against: str = "occlusion") -> Conclusion:
    """One method's agreement: clear (positive or negative), cannot tell (null), or too few."""
    params = (("method", label_of(row)), ("rho", fmt(row["spearman"])), *_interval(row),
              ("texts", str(int(row["texts"]))), ("null_low", fmt(row["null_low"])),
              ("null_high", fmt(row["null_high"])), ("min", str(MIN_TEXTS)),
              ("against", Label(against)))
    if int(row["texts"]) < MIN_TEXTS:
        return Conclusion("c_agree_few", params)
    if _nan(row["spearman"]) or overlaps_null(row):
        return Conclusion("c_agree_null", params)
    return Conclusion("c_agree_pos" if row["spearman"] > 0 else "c_agree_neg", params)


def agreement_conclusions(agreement: pd.DataFrame, against: str = "occlusion") -> list[Conclusion]:
    out = []
    texts = int(agreement["texts"].max()) if len(agreement) else 0
    base = baseline_sentence(agreement, texts)       # first: what a trivial guess reaches
    if base is not None:
        out.append(base)
    picked = [r for r in (_rows(agreement, m, mean=True) for m in MAIN) if r is not None]
    picked += [r for r in (_rows(agreement, m) for m in SINGLE) if r is not None]
    for row in picked:
        out.append(agreement_sentence(row, against))
    raw, roll = _rows(agreement, "attention", mean=True), _rows(agreement, "rollout", mean=True)
    if raw is not None and roll is not None and texts >= MIN_TEXTS:
        out.append(_compare(roll, raw, texts))
    return out


def best_baseline(agreement: pd.DataFrame):
    """The baseline row with the highest mean rho (None without one)."""
    base = agreement[agreement["baseline"]].dropna(subset=["spearman"])
    return base.loc[base["spearman"].idxmax()] if len(base) else None


def scored_rows(agreement: pd.DataFrame, families=MAIN + SINGLE) -> pd.DataFrame:
    """The rows a baseline is set against: each layer of the layered families and the methods
    without layers (layer means left out: they repeat their layers)."""
    return agreement[~agreement["baseline"] & ~agreement["layer_mean"]
                     & agreement["method"].isin(families)].dropna(subset=["ci_low"])


def above_baseline(agreement: pd.DataFrame, families=MAIN + SINGLE) -> pd.DataFrame:
    """The rows that beat the best baseline: their 95% interval lies wholly above its interval
    (ci_low > the baseline's ci_high), highest mean rho first."""
    best = best_baseline(agreement)
    scored = scored_rows(agreement, families)
    if best is None:
        return scored.iloc[:0]
    return scored[scored["ci_low"] > best["ci_high"]].sort_values("spearman", ascending=False)


def names_of(rows: pd.DataFrame, top: int = TOP) -> Names:
    return Names(tuple(label_of(r) for _, r in rows.head(top).iterrows()),
                 max(len(rows) - top, 0))


def baseline_sentence(agreement: pd.DataFrame, texts: int) -> Conclusion | None:
    """The best baseline and the rows above it, named (the first TOP, then how many more)."""
    best = best_baseline(agreement)
    if best is None or texts < MIN_TEXTS:
        return None
    above = above_baseline(agreement)
    params = (("baseline", label_of(best)), ("rho", fmt(best["spearman"])), *_interval(best),
              ("above", str(len(above))), ("total", str(len(scored_rows(agreement)))),
              ("texts", str(texts)), ("names", names_of(above)))
    return Conclusion("c_baseline" if len(above) else "c_baseline_none", params)


def _compare(a, b, texts: int) -> Conclusion:
    params = (("a", label_of(a)), ("b", label_of(b)), ("a_rho", fmt(a["spearman"])),
              ("a_low", fmt(a["ci_low"])), ("a_high", fmt(a["ci_high"])),
              ("b_rho", fmt(b["spearman"])), ("b_low", fmt(b["ci_low"])),
              ("b_high", fmt(b["ci_high"])), ("texts", str(texts)))
    if a["ci_low"] > b["ci_high"]:
        return Conclusion("c_compare_above", params)
    if a["ci_high"] < b["ci_low"]:
        return Conclusion("c_compare_below", params)
    return Conclusion("c_compare_overlap", params)


# ---------------------------------------------------------------------------- faithfulness


def faithfulness_conclusions(faith: pd.DataFrame) -> list[Conclusion]:
    per = faith.drop_duplicates(subset=["method", "layer"]).copy()
    per["layer_mean"] = False
    rand = per[per["method"] == "random"]
    if not len(rand):
        return []
    rand = rand.iloc[0]
    fractions = ", ".join(f"{100 * f:.0f}%" for f in sorted(faith["fraction"].unique()))
    last = per["layer"].max()
    out = []
    for method in ("occlusion", *SINGLE, *MAIN):
        rows = per[per["method"] == method]
        if method in MAIN:
            rows = rows[rows["layer"] == last]
        if not len(rows):
            continue
        row = rows.iloc[0]
        params = (("method", label_of(row)), ("aopc", fmt(row["aopc"])),
                  ("low", fmt(row["aopc_low"])), ("high", fmt(row["aopc_high"])),
                  ("random", fmt(rand["aopc"])), ("random_low", fmt(rand["aopc_low"])),
                  ("random_high", fmt(rand["aopc_high"])), ("texts", str(int(row["texts"]))),
                  ("fractions", fractions), ("min", str(MIN_TEXTS)))
        if int(row["texts"]) < MIN_TEXTS:
            key = "c_faith_few"
        elif row["aopc_low"] > rand["aopc_high"]:
            key = "c_faith_above"
        elif row["aopc_high"] < rand["aopc_low"]:
            key = "c_faith_below"
        else:
            key = "c_faith_null"
        out.append(Conclusion(key, params))
    return out


# ---------------------------------------------------------------------------- heads


def sharpness_conclusions(sharp: pd.DataFrame, texts: int) -> list[Conclusion]:
    """Pooled and per layer: which layers' intervals exclude their null bands, and the
    pooled one; nothing causal (see the module docstring)."""
    if not len(sharp):
        return []
    pooled = sharp[sharp["layer"].isna()]
    layers = sharp[sharp["layer"].notna()]
    out = []
    if len(pooled):
        row = pooled.iloc[0]
        params = (("rho", fmt(row["spearman"])), *_interval(row),
                  ("null_low", fmt(row["null_low"])), ("null_high", fmt(row["null_high"])),
                  ("heads", str(int(row["heads"]))), ("texts", str(texts)),
                  ("min", str(MIN_TEXTS)), ("sharpness", Label(str(row["sharpness"]))),
                  ("importance", Label(str(row["importance"]))))
        key = ("c_sharp_few" if texts < MIN_TEXTS else "c_sharp_null" if overlaps_null(row)
               else "c_sharp_pos" if row["spearman"] > 0 else "c_sharp_neg")
        out.append(Conclusion(key, params))
        if texts >= MIN_TEXTS and off_zero(row):
            out.append(Conclusion("c_null_off_zero", (("null_low", fmt(row["null_low"])),
                                                      ("null_high", fmt(row["null_high"])))))
    if len(layers):
        clear = layers[[not overlaps_null(r) for _, r in layers.iterrows()]]
        span = (("low_rho", fmt(layers["spearman"].min())),
                ("high_rho", fmt(layers["spearman"].max())),
                ("layers", str(len(layers))), ("clear", str(len(clear))),
                ("clear_list", ", ".join(f"{int(r['layer'])} ({fmt(r['spearman'])}, "
                                         f"{fmt(r['ci_low'])} – {fmt(r['ci_high'])})"
                                         for _, r in clear.iterrows())),
                ("heads", str(int(layers["heads"].iloc[0]))), ("texts", str(texts)))
        out.append(Conclusion("c_sharp_layers" if len(clear) else "c_sharp_layers_none", span))
    return out


def off_zero(row) -> bool:
    """Whether a null band lies wholly on one side of 0 (the pooled sharpness row's can: its
    permutations stay within layers, so the layers' differences stay in it)."""
    if _nan(row["null_low"]) or _nan(row["null_high"]):
        return False
    return bool(row["null_low"] > 0 or row["null_high"] < 0)


def measured_on(metric_name: str, units: int, texts: int | None, *, order: bool) -> Phrase:
    """What a pruning or sweep metric was measured on: the project's sentence pairs (the same
    for every corpus; `order`: the heads' order still comes from the corpus's texts) or the
    corpus's own texts."""
    if metric_name == "retrieval_accuracy":
        key = "measured_pairs_order" if order else "measured_pairs"
    else:
        key = "measured_texts"
    return Phrase(key, (("units", units), ("texts", texts if texts is not None else "n/a")))


def pruning_conclusions(pruning: pd.DataFrame, texts: int | None = None) -> list[Conclusion]:
    """How many heads go, least important first, before the metric leaves the full model's
    own interval; the same for the random orders' mean. Fewer than MIN_TEXTS units of the
    metric (`units`: pairs or texts) or texts behind the importance order: cannot tell."""
    rows = pruning.sort_values("removed")
    full = rows.iloc[0]
    total = int(rows["removed"].iloc[-1])

    def kept(values) -> int:
        inside = values.to_numpy() >= full["ci_low"]
        k = 0
        for removed, ok in zip(rows["removed"], inside):
            if not ok:
                break
            k = int(removed)
        return k

    own = kept(rows["metric"])
    units = int(full["units"]) if "units" in rows and not _nan(full["units"]) else MIN_TEXTS
    few = min(units, MIN_TEXTS if texts is None else texts) < MIN_TEXTS
    key = "c_pruning_few" if few else "c_pruning_null" if own >= total else "c_pruning"
    return [Conclusion(key, (
        ("units", str(units)), ("texts", str(texts if texts is not None else units)),
        ("min", str(MIN_TEXTS)), ("unit", Label("unit_" + str(full["metric_name"]))),
        ("kept", str(own)), ("random_kept", str(kept(rows["random_mean"]))),
        ("total", str(total)), ("full", fmt(full["metric"])), ("low", fmt(full["ci_low"])),
        ("high", fmt(full["ci_high"])), ("orders", str(int(full.get("orders", 0)))),
        ("last", fmt(rows["metric"].iloc[-1])),
        ("metric", Label("metric_" + str(full["metric_name"]))),
        ("measured", measured_on(str(full["metric_name"]), units, texts, order=True))))]


def sweep_conclusions(sweep: pd.DataFrame, texts: int | None = None) -> list[Conclusion]:
    """Per layer, the best and worst temperature against tau = 1, paired; fewer than
    MIN_TEXTS units of the metric (`units`: pairs or texts), or a corpus of fewer than
    MIN_TEXTS `texts` (the page's rule, even where the metric is the fixed pairs'): no claim."""
    out = []
    for layer, rows in sweep.groupby("layer"):
        rows = rows[rows["tau"] != 1.0]
        if not len(rows):
            continue
        best = rows.loc[rows["diff"].idxmax()]
        worst = rows.loc[rows["diff"].idxmin()]
        params = (("layer", str(int(layer))), ("tau", fmt(best["tau"])),
                  ("diff", fmt(best["diff"])), ("low", fmt(best["diff_low"])),
                  ("high", fmt(best["diff_high"])), ("worst_tau", fmt(worst["tau"])),
                  ("worst", fmt(worst["diff"])), ("worst_low", fmt(worst["diff_low"])),
                  ("worst_high", fmt(worst["diff_high"])),
                  ("metric", Label("metric_" + str(best["metric_name"]))),
                  ("units", str(int(best["units"]) if "units" in rows else "n/a")),
                  ("unit", Label("unit_" + str(best["metric_name"]))), ("min", str(MIN_TEXTS)),
                  ("texts", str(texts if texts is not None else "n/a")),
                  ("measured", measured_on(str(best["metric_name"]),
                                           int(best["units"]) if "units" in rows else MIN_TEXTS,
                                           texts, order=False)))
        if "units" in rows and int(best["units"]) < MIN_TEXTS:
            key = "c_sweep_few"
        elif texts is not None and texts < MIN_TEXTS:
            key = "c_sweep_few_texts"
        elif best["diff_low"] > 0:
            key = "c_sweep_sharper" if best["tau"] < 1 else "c_sweep_flatter"
        else:
            key = "c_sweep_null"
        out.append(Conclusion(key, params))
    return out


def conclusions(agreement=None, faithfulness=None, sharpness=None, pruning=None, sweep=None,
                *, texts: int | None = None) -> list[Conclusion]:
    """Every sentence the page shows, from the frames given (any may be None). texts: the
    corpus's size for the head sentences (default: the agreement's largest count)."""
    if texts is None:
        texts = int(agreement["texts"].max()) if agreement is not None and len(agreement) else 0
    out = []
    if agreement is not None and len(agreement):
        out += agreement_conclusions(agreement)
    if faithfulness is not None and len(faithfulness):
        out += faithfulness_conclusions(faithfulness)
    if sharpness is not None and len(sharpness):
        out += sharpness_conclusions(sharpness, texts)
    if pruning is not None and len(pruning):
        out += pruning_conclusions(pruning, texts if texts else None)
    if sweep is not None and len(sweep):
        out += sweep_conclusions(sweep, texts if texts else None)
    return out
