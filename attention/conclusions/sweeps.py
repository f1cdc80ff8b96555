"""The sentences of the real-models section of "Is sharper better?", written from the shipped
sweeps' summaries (attention.sweeps.stats): no torch, no streamlit.

Every sentence states its interval and its count of texts. A difference whose 95% interval
includes 0 is "the data cannot tell"; a corpus of fewer than MIN_TEXTS texts makes no claim.
"""
from __future__ import annotations

import pandas as pd

from attention.conclusions.importance import MIN_TEXTS
from attention.i18n import translate


def _t(lang: str, key: str, **values) -> str:
    return translate(lang, f"realsharp.{key}", **values)


def setting_name(row, lang: str) -> str:
    """A setting in words: "τ = 2 in every layer", "no scale in layer 3", "head 4.2 zeroed"."""
    fam, var = row["family"], row["variant"]
    where = _t(lang, "where_all") if int(row["layer"]) < 0 else _t(lang, "where_layer",
                                                                    layer=int(row["layer"]))
    if fam == "base":
        return _t(lang, "set_base")
    if fam == "scale":
        return _t(lang, f"set_scale_{var}", where=where)
    if fam == "tau":
        return _t(lang, "set_tau", tau=var, where=where)
    if fam == "sinks":
        return _t(lang, "set_sinks", where=where)
    return _t(lang, f"set_{fam}", layer=int(row["layer"]), head=int(row["head"]))


def short_name(row, lang: str) -> str:
    """A global setting's label on a chart: "trained", "no scale", "τ=2", ..."""
    fam, var = row["family"], row["variant"]
    if fam == "tau":
        return f"τ={var}"
    return _t(lang, f"short_{fam}_{var}" if fam == "scale" else f"short_{fam}")


def _side(lo: float, hi: float, above: str, below: str) -> str:
    """`above` when a 95% interval [lo, hi] lies above 0, `below` when below, else unclear."""
    return above if lo > 0 else below if hi < 0 else "unclear"


def verdict(row) -> str:
    """worse / better / unclear: the paired ΔNLL's 95% interval against 0."""
    return _side(row["d_lo"], row["d_hi"], "worse", "better")


def _interval(row) -> dict:
    return {"d": row["d_nll"], "lo": row["d_lo"], "hi": row["d_hi"], "texts": int(row["texts"])}


def _few(table: pd.DataFrame, lang: str) -> str | None:
    texts = int(table["texts"].max()) if len(table) else 0
    return _t(lang, "too_few", texts=texts, min=MIN_TEXTS) if texts < MIN_TEXTS else None


def _sides(g: pd.DataFrame, judge) -> tuple:
    """A global summary read for its answer: the trained row, the no-scale row (None when
    absent), the other settings, and how many settings lie on each side of the trained max
    weight (sharper, flatter) with how many of each `judge` calls worse and better."""
    base = g[g["family"] == "base"].iloc[0]
    none = g[(g["family"] == "scale") & (g["variant"] == "none") & (g["layer"] < 0)]
    others = g[g["family"] != "base"]
    sharper = others[others["max_weight"] > base["max_weight"]]
    flatter = others[others["max_weight"] <= base["max_weight"]]
    count = lambda t, v: int((t.apply(judge, axis=1) == v).sum()) if len(t) else 0  # noqa: E731
    n = {"sharper": len(sharper), "flatter": len(flatter),
         "s_worse": count(sharper, "worse"), "s_better": count(sharper, "better"),
         "f_worse": count(flatter, "worse"), "f_better": count(flatter, "better")}
    return base, none.iloc[0] if len(none) else None, others, n


def _opening(g: pd.DataFrame, judge, key: str, model: str, lang: str, values) -> tuple:
    """An answer's first sentence, what removing the scale does (none when the sweep has no
    such setting), as a list to add to, with what `_sides` reads of `g`. `values(base, none)`
    gives the sentence's own figures."""
    base, none, others, n = _sides(g, judge)
    if none is None:
        return [], base, others, n
    sharper = _t(lang, "sharper" if none["max_weight"] > base["max_weight"] else "flatter")
    return [_t(lang, f"{key}_{judge(none)}", model=model, sharper=sharper,
               mw0=base["max_weight"], mw1=none["max_weight"], **values(base, none))], \
        base, others, n


def answer(g: pd.DataFrame, model: str, lang: str) -> list[str]:
    """At most three sentences: what removing the scale does, whether the sharper settings
    are the better ones, and whether a setting beats the trained model."""
    few = _few(g, lang)
    if few:
        return [few]
    out, base, others, n = _opening(g, verdict, "scale", model, lang, lambda base, none: {
        "ppl0": base["ppl"], "ppl1": none["ppl"], **_interval(none)})
    lead = "neither" if n["s_worse"] == n["sharper"] and n["f_worse"] == n["flatter"] \
        else "not" if n["s_worse"] > n["s_better"] \
        else "yes" if n["s_better"] > n["s_worse"] else "mixed"
    out.append(_t(lang, "sharper_count", lead=_t(lang, f"lead_{lead}"), **n,
                  texts=int(base["texts"])))
    best = others.sort_values("d_nll").iloc[0]
    key = {"better": "best_better", "unclear": "best_unclear", "worse": "best_worse"}[verdict(best)]
    out.append(_t(lang, key, setting=setting_name(best, lang), mw0=base["max_weight"],
                  mw1=best["max_weight"], **_interval(best)))
    return out


def sinks_sentence(g: pd.DataFrame, layers: pd.DataFrame | None, lang: str) -> str:
    few = _few(g, lang)
    if few:
        return few
    r = g[(g["family"] == "sinks") & (g["layer"] < 0)].iloc[0]
    text = _t(lang, f"sinks_{verdict(r)}", **_interval(r))
    if layers is not None and len(layers) and not _few(layers, lang):
        per = layers[layers["family"] == "sinks"]
        hurt = per[per["d_lo"] > 0].sort_values("d_nll", ascending=False)
        if len(hurt):
            top = hurt.iloc[0]
            text += " " + _t(lang, "sinks_layers", count=len(hurt), total=len(per),
                             layer=int(top["layer"]), **_interval(top))
        else:
            text += " " + _t(lang, "sinks_layers_none", total=len(per),
                             texts=int(per["texts"].max()))
    return text


def scale_layers_sentence(rest: pd.DataFrame, lang: str) -> str:
    """The scale variants one layer at a time (the layers_rest sweep): for each, in how many
    layers it makes the model worse or better (paired interval clear of 0) and its largest
    change."""
    per = rest[rest["family"] == "scale"]
    few = _few(per, lang)
    if few:
        return few
    parts = []
    for variant in ("none", "inv_d", "ssmax"):
        v = per[per["variant"] == variant]
        if not len(v):
            continue
        top = v.loc[v["d_nll"].abs().idxmax()]
        name = short_name(top, lang)
        parts.append(_t(lang, "scale_layers", name=name[:1].upper() + name[1:],
                        worse=int((v["d_lo"] > 0).sum()), better=int((v["d_hi"] < 0).sum()),
                        total=len(v), layer=int(top["layer"]), **_interval(top)))
    return " ".join(parts)


# Of settings with no effect at all, the share whose 95% interval clears 0 by chance alone
# (two-sided): with many per-layer settings a few clear it with no effect behind them.
CHANCE = 0.05


def temperature_sentence(g: pd.DataFrame, layers: pd.DataFrame | None, lang: str) -> str:
    few = _few(g, lang)
    if few:
        return few
    taus = g[g["family"] == "tau"].sort_values("d_nll")
    best = taus.iloc[0]
    text = _t(lang, f"tau_{verdict(best)}", tau=best["variant"], **_interval(best))
    if layers is not None and len(layers) and not _few(layers, lang):
        per = layers[layers["family"] == "tau"]
        worse, better = per[per["d_lo"] > 0], per[per["d_hi"] < 0]
        top = per.sort_values("d_nll", ascending=False).iloc[0]
        text += " " + _t(lang, "tau_layers", clear=len(worse) + len(better), total=len(per),
                         worse=len(worse), better=len(better),
                         chance=f"{CHANCE * len(per):.1f}",
                         tau=top["variant"], layer=int(top["layer"]), **_interval(top))
        if len(better):
            # the per-layer settings that lower the NLL, best first: named, since a setting
            # other than the trained one that is better is said plainly (issue 43)
            best = better.sort_values("d_nll").iloc[0]
            text += " " + _t(lang, "tau_layers_better", count=len(better),
                             tau=best["variant"], layer=int(best["layer"]), **_interval(best))
    return text


def heads_sentence(agree: pd.DataFrame, per_head: pd.DataFrame, lang: str) -> str:
    """Whether sharper heads are the ones the loss depends on (zero ablation, max weight),
    pooled within layers, against its null band."""
    texts = int(per_head["texts"].max()) if len(per_head) else 0
    if texts < MIN_TEXTS:
        return _t(lang, "too_few", texts=texts, min=MIN_TEXTS)
    rows = agree[(agree["importance"] == "zero") & (agree["sharpness"] == "max_weight")]
    pooled = rows[rows["layer"].isna()].iloc[0]
    layers = rows[rows["layer"].notna()]
    clear = layers[(layers["ci_low"] > layers["null_high"]) | (layers["ci_high"] < layers["null_low"])]
    side = "yes" if pooled["ci_low"] > pooled["null_high"] else \
        "opposite" if pooled["ci_high"] < pooled["null_low"] else "unclear"
    return _t(lang, f"heads_{side}", rho=pooled["spearman"], lo=pooled["ci_low"], hi=pooled["ci_high"],
              nlo=pooled["null_low"], nhi=pooled["null_high"], heads=int(pooled["heads"]),
              texts=texts, clear=len(clear), layers=len(layers))


# ---------------------------------------------------------------- a sentence model (retrieval)
# The same question on a sentence model, whose quality is paraphrase retrieval over a whole
# pair set (attention.sweeps.pairs): higher accuracy is better, intervals are paired over pairs.

def pair_verdict(row) -> str:
    """better / worse / unclear: the paired Δ accuracy's 95% interval against 0."""
    return _side(row["d_acc_lo"], row["d_acc_hi"], "better", "worse")


def _pair_interval(row) -> dict:
    return {"d": row["d_acc"], "lo": row["d_acc_lo"], "hi": row["d_acc_hi"],
            "acc1": row["accuracy"], "pairs": int(row["pairs"])}


def _few_pairs(table: pd.DataFrame, lang: str) -> str | None:
    pairs = int(table["pairs"].max()) if len(table) else 0
    return _t(lang, "pairs_too_few", pairs=pairs, min=MIN_TEXTS) if pairs < MIN_TEXTS else None


def pairs_answer(g: pd.DataFrame, model: str, lang: str) -> list[str]:
    """At most three sentences on a sentence model: what removing the scale does to its
    attention and its retrieval, whether the sharper settings retrieve better, and whether a
    setting beats the trained model."""
    few = _few_pairs(g, lang)
    if few:
        return [few]
    out, base, others, n = _opening(g, pair_verdict, "pairs_scale", model, lang,
                                    lambda base, none: {"acc0": base["accuracy"],
                                                        **_pair_interval(none)})
    lead = "neither" if n["s_better"] == 0 and n["f_better"] == 0 \
        else "not" if n["s_worse"] > n["s_better"] \
        else "flatter_worse" if n["s_better"] > n["s_worse"] and n["f_worse"] > n["f_better"] \
        else "yes" if n["s_better"] > n["s_worse"] else "mixed"
    out.append(_t(lang, "pairs_sharper_count", lead=_t(lang, f"lead_{lead}"), **n,
                  pairs=int(base["pairs"])))
    verdicts = others.apply(pair_verdict, axis=1)
    clear = others[verdicts == "better"] if (verdicts == "better").any() else others
    best = clear.sort_values("d_acc", ascending=False).iloc[0]    # a clear gain before a point
    out.append(_t(lang, f"pairs_best_{pair_verdict(best)}", setting=setting_name(best, lang),
                  acc0=base["accuracy"], mw0=base["max_weight"], mw1=best["max_weight"],
                  m0=base["mrr"], m1=best["mrr"], mlo=best["d_mrr_lo"], mhi=best["d_mrr_hi"],
                  **_pair_interval(best)))
    return out


def pairs_scale_sentence(g: pd.DataFrame, lang: str) -> str:
    """The scale variants in one sentence: each one's Δ accuracy with its interval."""
    few = _few_pairs(g, lang)
    if few:
        return few
    parts = [_t(lang, f"pairs_part_{pair_verdict(r)}", setting=setting_name(r, lang),
                **_pair_interval(r))
             for _, r in g[g["family"] == "scale"].sort_values("d_acc").iterrows()]
    return _t(lang, "pairs_scales", parts=_t(lang, "list_sep").join(parts),
              acc0=float(g.loc[g["family"] == "base", "accuracy"].iloc[0]),
              pairs=int(g["pairs"].max()))


def pairs_temperature_sentence(g: pd.DataFrame, layers: pd.DataFrame | None, lang: str) -> str:
    few = _few_pairs(g, lang)
    if few:
        return few
    taus = g[g["family"] == "tau"]
    better = taus[taus.apply(pair_verdict, axis=1) == "better"].sort_values("d_acc")
    worse = taus[taus.apply(pair_verdict, axis=1) == "worse"]
    name = lambda t: "、".join(t["variant"]) if lang == "zh" else ", ".join(t["variant"])  # noqa: E731
    if len(better):
        top = better.iloc[-1]
        text = _t(lang, "pairs_tau_better", taus=name(better.sort_values("d_acc",
                                                                          ascending=False)),
                  tau=top["variant"], worse=name(worse) or "—", **_pair_interval(top))
    else:
        top = taus.sort_values("d_acc").iloc[-1]
        text = _t(lang, f"pairs_tau_{pair_verdict(top)}", tau=top["variant"],
                  **_pair_interval(top))
    if layers is not None and len(layers) and not _few_pairs(layers, lang):
        per = layers[layers["family"] == "tau"]
        clear = per[per.apply(pair_verdict, axis=1) != "unclear"]
        big = per.loc[per["d_acc"].abs().idxmax()]
        text += " " + _t(lang, "pairs_tau_layers", clear=len(clear), total=len(per),
                         worse=int((per.apply(pair_verdict, axis=1) == "worse").sum()),
                         tau=big["variant"], layer=int(big["layer"]), **_pair_interval(big))
    return text
