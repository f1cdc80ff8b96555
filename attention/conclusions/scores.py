"""The sentences a page writes from its measured numbers, in the reader's language.

Each sentence is picked by what the numbers show, then filled in with them (never a fixed
claim): at d_k = 1 the Score analysis page says scaling changed nothing, because it did not.
Text comes from attention/locales/<lang>/*.toml through `translate` (no streamlit, no torch
here); the numbers from the tables the compute modules make (attention/analysis/scorestats.py,
attention/analysis/, attention/experiment/training.py), so a conclusion is tested without a chart.
"""
from __future__ import annotations

import math

import pandas as pd

from attention.i18n import translate
from attention.experiment.task import ARGMAX, CEILING, m_label, multiplier_label

GAP = 0.01               # accuracy differences below this are called a tie
STRONG_AGREEMENT = 0.9   # top-token agreement from which attention is called a fair guide


def _sharper(lang: str, key: str, **values) -> str:
    return translate(lang, f"sharper.{key}", **values)


# ---- the Score analysis page ---------------------------------------------------------------


def score_findings(summ: pd.DataFrame, stats: pd.DataFrame, sweep: pd.DataFrame, d_k: int,
                   lang: str) -> list[str]:
    """The Score analysis page's findings: the score std against sqrt(d_k), whether unscaled
    rows are sharper, the gradient they pass, how many saturate, and the d_k sweep.

    summ: scorestats.summary (its `saturated_above` column is the threshold that defined
    `saturated`); stats: scorestats.score_stats; sweep: analysis.dk_sweep."""
    def say(key: str, **values) -> str:
        return translate(lang, f"scores.{key}", **values)

    s, u = summ.loc["scaled"], summ.loc["unscaled"]
    threshold = u.saturated_above
    sd = stats.set_index("series")["std"]
    out = [say("find_std", d_k=d_k, raw=sd["raw"], sqrt=math.sqrt(d_k), scaled=sd["scaled"])]
    out.append(say("find_sharper" if u.max_weight > s.max_weight else "find_not_sharper",
                   u_max=u.max_weight, s_max=s.max_weight,
                   u_eff=u.effective_tokens, s_eff=s.effective_tokens))
    if s.jacobian_norm > 0 and u.jacobian_norm < s.jacobian_norm:
        out.append(say("find_grad_falls", s_jac=s.jacobian_norm, u_jac=u.jacobian_norm,
                       ratio=u.jacobian_norm / s.jacobian_norm))
    else:
        out.append(say("find_grad_mean", s_jac=s.jacobian_norm, u_jac=u.jacobian_norm))
    if 0 < u.saturated < 1:
        out.append(say("find_saturated", u_sat=u.saturated, s_sat=s.saturated,
                       threshold=threshold, sat_jac=u.jacobian_saturated,
                       other_jac=u.jacobian_other))
    elif u.saturated == 1:
        out.append(say("find_all_saturated", threshold=threshold, sat_jac=u.jacobian_saturated))
    else:
        out.append(say("find_none_saturated", threshold=threshold))
    lo, hi = sweep["d_k"].min(), sweep["d_k"].max()
    by = sweep.set_index(["d_k", "scaled"])
    out.append(say("find_sweep", lo=lo, hi=hi,
                   u_max_lo=by.loc[(lo, False), "max_weight"],
                   u_max_hi=by.loc[(hi, False), "max_weight"],
                   u_jac_lo=by.loc[(lo, False), "jacobian_norm"],
                   u_jac_hi=by.loc[(hi, False), "jacobian_norm"],
                   s_max_hi=by.loc[(hi, True), "max_weight"],
                   s_jac_hi=by.loc[(hi, True), "jacobian_norm"],
                   u_std_hi=by.loc[(hi, False), "score_std"], sqrt_hi=math.sqrt(hi)))
    return out


# ---- the "Is sharper better?" page ---------------------------------------------------------

def scaling_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Mean, std (0 for one seed) and count over seeds per (d_k, scaled)."""
    grouped = table.groupby(["d_k", "scaled"], sort=True)
    out = grouped[["accuracy", "max_weight", "effective_tokens"]].mean()
    out["accuracy_std"] = grouped["accuracy"].std(ddof=1).fillna(0.0)
    out["seeds"] = grouped["seed"].count()
    return out.reset_index()



def sharpening_conclusion(sweep: pd.DataFrame, lang: str) -> str:
    """Where accuracy peaks, and what the sharpest and the flattest attention score."""
    rows = sweep.set_index("multiplier")
    best = rows["accuracy"].idxmax()
    sharp, flat = rows.loc[ARGMAX], rows.loc[multiplier_label(0.0)]
    values = dict(best=m_label(best, lang), best_acc=rows.loc[best, "accuracy"],
                  best_max=rows.loc[best, "max_weight"],
                  best_eff=rows.loc[best, "effective_tokens"],
                  sharp_acc=sharp["accuracy"], sharp_max=sharp["max_weight"],
                  flat_acc=flat["accuracy"], ceiling=CEILING)
    key = "sharpening_peak" if sharp["accuracy"] < values["best_acc"] - GAP else "sharpening_flat"
    return _sharper(lang, key, **values)


def mass_conclusion(sweep: pd.DataFrame, lang: str) -> str:
    """More weight on the right tokens, yet a worse model (or not, if that is what happened)."""
    rows = sweep.set_index("multiplier")
    one, sharp = rows.loc[multiplier_label(1.0)], rows.loc[ARGMAX]
    most = rows["relevant_mass"].idxmax()
    best = rows["accuracy"].idxmax()
    values = dict(mass_one=one["relevant_mass"], acc_one=one["accuracy"],
                  mass_sharp=sharp["relevant_mass"], acc_sharp=sharp["accuracy"],
                  most=m_label(most, lang), most_mass=rows.loc[most, "relevant_mass"],
                  most_acc=rows.loc[most, "accuracy"], best=m_label(best, lang),
                  best_mass=rows.loc[best, "relevant_mass"], best_acc=rows.loc[best, "accuracy"])
    worse = rows.loc[most, "accuracy"] < rows.loc[best, "accuracy"] - GAP
    return _sharper(lang, "mass_worse" if worse else "mass_same", **values)


def scaling_conclusion(table: pd.DataFrame, lang: str) -> str:
    """The gap at the largest d_k (mean +- std over seeds) and at the smallest."""
    summary = scaling_summary(table).set_index(["d_k", "scaled"])
    d_ks = sorted(set(table["d_k"]))
    big, small = d_ks[-1], d_ks[0]
    s, u = summary.loc[(big, True)], summary.loc[(big, False)]
    values = dict(d_k=big, acc_s=s["accuracy"], sd_s=s["accuracy_std"], acc_u=u["accuracy"],
                  sd_u=u["accuracy_std"], max_u=u["max_weight"], eff_u=u["effective_tokens"],
                  max_s=s["max_weight"], seeds=int(s["seeds"]), small=small,
                  gap_small=summary.loc[(small, True), "accuracy"]
                  - summary.loc[(small, False), "accuracy"])
    key = "scaling_worse" if u["accuracy"] < s["accuracy"] - GAP else "scaling_same"
    return _sharper(lang, key, **values)


def sample_conclusion(sample: pd.DataFrame, accuracy: dict[str, float], lang: str) -> str:
    """How this sample's attention is spread at m = 1 and where argmax puts all of it."""
    soft = sample[sample["multiplier"] == multiplier_label(1.0)]
    hard = sample[sample["multiplier"] == ARGMAX]
    pick = hard.loc[hard["weight"].idxmax()]
    return _sharper(lang, "sample", mass=float(soft.loc[soft["relevant"], "weight"].sum()),
              max_w=float(soft["weight"].max()), relevant=int(soft["relevant"].sum()),
              pos=int(pick["position"]),
              kind=_sharper(lang, "kind_relevant" if pick["relevant"] else "kind_noise"),
              acc_one=accuracy[multiplier_label(1.0)], acc_sharp=accuracy[ARGMAX])


def top_agreement(leave_one_out: pd.DataFrame) -> float:
    """Share of samples whose most-attended token is also the one with the largest effect."""
    by_sample = leave_one_out.groupby("sample")
    top_w = leave_one_out.loc[by_sample["weight"].idxmax(), ["sample", "position"]]
    top_e = leave_one_out.loc[by_sample["effect"].idxmax(), ["sample", "position"]]
    return float((top_w["position"].to_numpy() == top_e["position"].to_numpy()).mean())


def leave_one_out_conclusion(leave_one_out: pd.DataFrame, pooled: float, within: float,
                             lang: str) -> str:
    """Rank correlation, and how often the most-attended token is the one whose removal
    changes the output most."""
    top = top_agreement(leave_one_out)
    return _sharper(lang, "importance_strong" if top >= STRONG_AGREEMENT else "importance",
              points=len(leave_one_out), samples=leave_one_out["sample"].nunique(), pooled=pooled,
              within=within, top=top, miss=1.0 - top)
