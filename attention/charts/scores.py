"""Charts of the Score analysis page: why attention divides q.k by sqrt(d_k).

Data functions turn an Analysis into small tables (pre-binned histograms, per-position means,
a bounded sample), so a 2048-token, 12-head input (50M scores) still ships a few thousand rows
to the browser; builders turn those tables into altair charts. Masked (causal) cells are
-inf logits and are dropped before anything is counted, so every chart value is finite.

Labels come from attention/locales/<lang>/scores.toml through `translate` (no streamlit here).
"""
from __future__ import annotations

import json
import math
from typing import Iterator

import altair as alt
import numpy as np
import pandas as pd
import torch

from .. import metrics
from ..analysis import Analysis
from ..core import attention
from ..i18n import translate

SERIES = ("raw", "scaled")               # q.k before any scale; the logits softmax sees
VARIANTS = ("scaled", "unscaled")        # the two AttentionResults of an Analysis
ROW_METRICS = ("entropy", "effective_tokens", "max_weight", "jacobian_norm")
SWEEP_METRICS = ("score_std", "entropy", "effective_tokens", "max_weight", "jacobian_norm", "gini")
SCORE_BINS = 60         # at most; fewer for small inputs (about sqrt of the score count)
METRIC_BINS = 30
FACET_SPACING = {"row": 30, "column": 36}
EVERY_LABEL = 24         # up to this many queries, every position gets its token label
MAX_POSITIONS = 512      # above this many queries, row metrics are shown as distributions
MAX_POINTS = 1500        # saturation scatter: at most this many rows per variant (sampled)
SATURATED = 0.99         # a row whose max weight is above this is called saturated
COLORS = {"scaled": "#1f77b4", "unscaled": "#d62728", "raw": "#d62728"}


def _t(lang: str, key: str, **values) -> str:
    return translate(lang, f"scores.{key}", **values)


def head_list(a: Analysis, head: int | None) -> list[int]:
    """The heads a view covers: all of them for None, else just `head`."""
    return list(range(a.heads)) if head is None else [head]


# ---- (a) raw vs scaled score distributions ------------------------------------------------

def _finite_scores(a: Analysis, heads: list[int]) -> Iterator[tuple[str, np.ndarray]]:
    """(series, 1-D float32 finite scores of one head), head by head so memory stays at one
    (n, n) copy however many heads there are.

    The scaled logits are q.k * scale / temperature, as core.attention makes them (one
    matmul per head, no softmax: the Analysis keeps q and k, not the n x n scores)."""
    keep = None if a.mask is None else np.flatnonzero(a.mask.numpy())   # allowed cells
    for h in heads:
        raw = a.raw_scores(h)                                             # (n, n) q.k
        scaled = (raw * (a.scale / a.spec.temperature)).numpy().ravel()   # (n * n,) logits
        raw = raw.numpy().ravel()                                         # (n * n,)
        for series, values in (("raw", raw), ("scaled", scaled)):
            yield series, (values if keep is None else values[keep])


def score_stats(a: Analysis, heads: list[int]) -> pd.DataFrame:
    """One row per series (raw, scaled): count, mean, std (unbiased, like torch.std), min, max
    and the std the theory expects: sqrt(d_k) for raw q.k with unit-variance components, and
    sqrt(d_k) * scale / temperature (= 1 / temperature) after scaling."""
    acc = {s: {"count": 0, "mean": 0.0, "m2": 0.0, "min": math.inf, "max": -math.inf}
           for s in SERIES}
    for series, x in _finite_scores(a, heads):
        n_b = x.size
        if n_b == 0:
            continue
        mean_b = float(x.mean(dtype=np.float64))
        m2_b = float(x.var(dtype=np.float64)) * n_b
        s = acc[series]
        n_a, total = s["count"], s["count"] + n_b
        delta = mean_b - s["mean"]                                # Chan et al. parallel variance
        s["m2"] += m2_b + delta * delta * n_a * n_b / total
        s["mean"] += delta * n_b / total
        s["count"] = total
        s["min"], s["max"] = min(s["min"], float(x.min())), max(s["max"], float(x.max()))
    d_k = a.q.shape[-1]
    expected = {"raw": math.sqrt(d_k),
                "scaled": math.sqrt(d_k) * a.scale / a.spec.temperature}
    rows = []
    for series in SERIES:
        s = acc[series]
        std = math.sqrt(s["m2"] / (s["count"] - 1)) if s["count"] > 1 else 0.0
        rows.append({"series": series, "count": s["count"], "mean": s["mean"], "std": std,
                     "min": s["min"], "max": s["max"], "expected_std": expected[series]})
    return pd.DataFrame(rows)


def bin_range(lo: float, hi: float) -> tuple[float, float]:
    """The histogram range for values in [lo, hi]; one repeated value gets a unit-wide range."""
    return (lo - 0.5, hi + 0.5) if not hi > lo else (lo, hi)


def _bins_frame(counts: np.ndarray, lo: float, hi: float, **columns) -> pd.DataFrame:
    edges = np.linspace(lo, hi, len(counts) + 1)                      # as numpy.histogram's
    return pd.DataFrame({**columns, "bin_start": edges[:-1], "bin_end": edges[1:],
                         "count": counts})


def score_bins(count: int) -> int:
    """How many bins a histogram of `count` scores gets: about sqrt(count), 10 to SCORE_BINS."""
    return int(min(SCORE_BINS, max(10, round(math.sqrt(count)))))


def score_histogram(a: Analysis, heads: list[int], stats: pd.DataFrame | None = None,
                    bins: int | None = None) -> pd.DataFrame:
    """Pre-binned distribution of every finite score of the heads, one bin range per series
    (numpy.histogram with `bins` equal bins over [min, max], default score_bins(count)):
    columns series, bin_start, bin_end, count, share (count / finite scores of the series)."""
    stats = score_stats(a, heads) if stats is None else stats
    bins = score_bins(int(stats["count"].max())) if bins is None else bins
    ranges = {row.series: bin_range(row.min, row.max) for row in stats.itertuples()
              if row.count > 0}
    counts = {s: np.zeros(bins, dtype=np.int64) for s in ranges}
    for series, values in _finite_scores(a, heads):
        if series in ranges:
            counts[series] += np.histogram(values, bins=bins, range=ranges[series])[0]
    parts = [_bins_frame(counts[s], *ranges[s], series=s) for s in ranges]
    frame = pd.concat(parts, ignore_index=True)
    frame["share"] = frame["count"] / frame.groupby("series")["count"].transform("sum")
    return frame


def score_distribution_chart(hist: pd.DataFrame, stats: pd.DataFrame, lang: str,
                             width: int = 370, height: int = 220) -> alt.HConcatChart:
    """Raw q.k next to the scaled logits, each with its measured std (solid rules at
    mean +- std) and the std the theory expects (dashed rules at +- expected)."""
    panels = []
    for row in stats.itertuples():
        data = hist[hist["series"] == row.series]
        title = _t(lang, f"hist_title_{row.series}", std=row.std, expected=row.expected_std)
        base = alt.Chart(data).encode(
            x=alt.X("bin_start:Q", title=_t(lang, f"axis_{row.series}"),
                    scale=alt.Scale(nice=False)),
            x2="bin_end:Q")
        bars = base.mark_rect(color=COLORS[row.series], opacity=0.85).encode(
            y=alt.Y("share:Q", title=_t(lang, "axis_share"), axis=alt.Axis(format="%")),
            y2=alt.datum(0),
            tooltip=[alt.Tooltip("bin_start:Q", title=_t(lang, "tip_from"), format=".3f"),
                     alt.Tooltip("bin_end:Q", title=_t(lang, "tip_to"), format=".3f"),
                     alt.Tooltip("count:Q", title=_t(lang, "tip_count"), format=","),
                     alt.Tooltip("share:Q", title=_t(lang, "axis_share"), format=".2%")])
        marks = pd.DataFrame({
            "x": [row.mean - row.std, row.mean + row.std, -row.expected_std, row.expected_std],
            "kind": [_t(lang, "rule_measured")] * 2 + [_t(lang, "rule_expected")] * 2,
        })
        marks = marks[marks["x"].between(row.min, row.max)]       # keep the x range the data's
        rules = alt.Chart(marks).mark_rule(strokeWidth=2).encode(
            x="x:Q",
            strokeDash=alt.StrokeDash("kind:N", title=None, scale=alt.Scale(
                domain=[_t(lang, "rule_measured"), _t(lang, "rule_expected")],
                range=[[1, 0], [6, 4]]), legend=alt.Legend(orient="top")),
            color=alt.value("#333333"),
            tooltip=[alt.Tooltip("kind:N", title=" "), alt.Tooltip("x:Q", format=".3f")])
        panels.append(alt.layer(bars, rules).properties(
            title=title, width=width, height=height))
    return alt.hconcat(*panels).resolve_scale(x="independent", y="independent")


# ---- (b) per-query row metrics ---------------------------------------------------------

def row_metric_frame(a: Analysis, heads: list[int]) -> pd.DataFrame:
    """Per query position, the row metrics averaged over the heads, scaled and unscaled:
    columns query_pos, query_token, variant, metric, value (long format)."""
    parts = []
    for variant, values in (("scaled", a.scaled_metrics), ("unscaled", a.unscaled_metrics)):
        for name in ROW_METRICS:
            mean = values[name][heads].mean(dim=0)                # (n,) mean over heads
            parts.append(pd.DataFrame({"query_pos": np.arange(a.n), "variant": variant,
                                       "metric": name, "value": mean.numpy()}))
    frame = pd.concat(parts, ignore_index=True)
    frame.insert(1, "query_token", np.asarray(a.tokens, dtype=object)[frame["query_pos"]])
    return frame


def row_metric_bins(a: Analysis, heads: list[int], bins: int = METRIC_BINS) -> pd.DataFrame:
    """Distributions of the row metrics over every (head, query) row, for long inputs:
    columns metric, variant, bin_start, bin_end, count (bins shared by the two variants)."""
    parts = []
    for name in ROW_METRICS:
        per = {v: m[name][heads].flatten().numpy()                # (heads * n,)
               for v, m in (("scaled", a.scaled_metrics), ("unscaled", a.unscaled_metrics))}
        lo, hi = bin_range(min(float(x.min()) for x in per.values()),
                           max(float(x.max()) for x in per.values()))
        for variant, values in per.items():
            counts = np.histogram(values, bins=bins, range=(lo, hi))[0]
            parts.append(_bins_frame(counts, lo, hi, metric=name, variant=variant))
    return pd.concat(parts, ignore_index=True)


def position_label_expr(tokens: tuple[str, ...] | list[str]) -> str:
    """Vega expression that labels an integer position axis with `token ·pos`; the axis is
    keyed by position, so repeated tokens keep their own tick. ASCII-escaped: Vega's
    expression parser rejects a raw U+2028/U+2029 inside a string literal (the whole chart
    then fails to draw), and a JSON token list can carry them."""
    table = json.dumps(list(tokens), ensure_ascii=True)
    return (f"datum.value == floor(datum.value) && datum.value >= 0 && "
            f"datum.value < {len(tokens)} ? {table}[datum.value] + ' ·' + datum.value : ''")


def _variant_color(lang: str) -> alt.Color:
    return alt.Color("variant:N", title=None, legend=alt.Legend(orient="top", labelExpr=(
        f"datum.value == 'scaled' ? {json.dumps(_t(lang, 'variant_scaled'), ensure_ascii=False)}"
        f" : {json.dumps(_t(lang, 'variant_unscaled'), ensure_ascii=False)}")),
        scale=alt.Scale(domain=list(VARIANTS), range=[COLORS[v] for v in VARIANTS]))


def _small_multiples(chart: alt.Chart, names: tuple[str, ...], labels: dict[str, str],
                     columns: int) -> alt.FacetChart:
    """One panel per metric name, in `names` order, headed by its label in the user's language."""
    facet = alt.Facet("metric:N", sort=list(names), title=None,
                      header=alt.Header(labelExpr=_lookup_expr(labels), labelFontSize=13,
                                        labelFontWeight="bold"))
    return chart.facet(facet, columns=columns, spacing=FACET_SPACING)


def _metric_labels(lang: str, names: tuple[str, ...]) -> dict[str, str]:
    return {name: _t(lang, f"metric_{name}") for name in names}


def _lookup_expr(labels: dict[str, str]) -> str:
    return f"{json.dumps(labels, ensure_ascii=False)}[datum.value]"


def row_metric_chart(frame: pd.DataFrame, tokens: tuple[str, ...], lang: str,
                     width: int = 380, height: int = 170) -> alt.FacetChart:
    """Four small multiples (entropy, effective tokens, max weight, Jacobian norm) against
    the query position, scaled vs unscaled."""
    n = len(tokens)
    tooltip = [alt.Tooltip("query_token:N", title=_t(lang, "tip_token")),
               alt.Tooltip("query_pos:Q", title=_t(lang, "tip_position")),
               alt.Tooltip("variant:N", title=" "),
               alt.Tooltip("value:Q", title=_t(lang, "tip_value"), format=".4f")]
    base = alt.Chart(frame).encode(
        x=alt.X("query_pos:Q", title=_t(lang, "axis_query"),
                scale=alt.Scale(domain=[0, max(n - 1, 1)], nice=False),
                axis=alt.Axis(labelExpr=position_label_expr(tokens), tickMinStep=1,
                              values=list(range(n)) if n <= EVERY_LABEL else alt.Undefined,
                              labelOverlap=n > EVERY_LABEL, labelAngle=-45 if n <= 40 else 0,
                              labelLimit=90)),
        y=alt.Y("value:Q", title=None),
        color=_variant_color(lang), tooltip=tooltip)
    line = base.mark_line(strokeWidth=1.5, point=n <= 64)
    chart = line.properties(width=width, height=height)
    return (_small_multiples(chart, ROW_METRICS, _metric_labels(lang, ROW_METRICS), 2)
            .resolve_scale(y="independent"))


def row_metric_hist_chart(bins: pd.DataFrame, lang: str, width: int = 380,
                          height: int = 180) -> alt.FacetChart:
    """The same four metrics as distributions over all rows (for long inputs)."""
    chart = alt.Chart(bins).mark_rect(opacity=0.6).encode(
        x=alt.X("bin_start:Q", title=None, scale=alt.Scale(nice=False)), x2="bin_end:Q",
        y=alt.Y("count:Q", title=_t(lang, "axis_rows"), stack=None), y2=alt.datum(0),
        color=_variant_color(lang),
        tooltip=[alt.Tooltip("variant:N", title=" "),
                 alt.Tooltip("bin_start:Q", title=_t(lang, "tip_from"), format=".3f"),
                 alt.Tooltip("bin_end:Q", title=_t(lang, "tip_to"), format=".3f"),
                 alt.Tooltip("count:Q", title=_t(lang, "tip_count"), format=",")])
    chart = chart.properties(width=width, height=height)
    return (_small_multiples(chart, ROW_METRICS, _metric_labels(lang, ROW_METRICS), 2)
            .resolve_scale(x="independent", y="independent"))


# ---- (c) the d_k sweep ----------------------------------------------------------------

def sweep_long(sweep: pd.DataFrame) -> pd.DataFrame:
    """dk_sweep's wide table -> d_k, variant, metric, value (one row per point drawn)."""
    frame = sweep.assign(variant=np.where(sweep["scaled"], "scaled", "unscaled"))
    return frame.melt(id_vars=["d_k", "variant"], value_vars=list(SWEEP_METRICS),
                      var_name="metric", value_name="value")


def sweep_reference(d_ks, temperature: float) -> pd.DataFrame:
    """The std of unscaled q.k that unit-variance components give: sqrt(d_k) / temperature."""
    d_ks = np.asarray(sorted(set(d_ks)), dtype=float)
    return pd.DataFrame({"d_k": d_ks, "metric": "score_std",
                         "value": np.sqrt(d_ks) / temperature})


def sweep_chart(sweep: pd.DataFrame, lang: str, *, temperature: float = 1.0,
                current_dk: int | None = None, width: int = 235,
                height: int = 170) -> alt.FacetChart:
    """Six small multiples against d_k on a log2 axis, scaled vs unscaled; the score-std panel
    carries the sqrt(d_k) reference (dashed) and a vertical rule marks the spec's d_k."""
    long = sweep_long(sweep)
    ref = sweep_reference(sweep["d_k"], temperature)
    ref_label = _t(lang, "ref_sqrt_dk" if temperature == 1.0 else "ref_sqrt_dk_t")
    ref = ref.assign(variant="reference", reference=ref_label)
    data = pd.concat([long, ref], ignore_index=True)
    data["is_ref"] = data["reference"].notna()
    data["reference"] = data["reference"].fillna("")
    x = alt.X("d_k:Q", title="d_k", scale=alt.Scale(type="log", base=2, nice=False),
              axis=alt.Axis(values=[d for d in sorted(set(sweep["d_k"].tolist()))
                                    if math.log2(d) % 2 == 0], format="d"))
    tooltip = [alt.Tooltip("d_k:Q", format="d"), alt.Tooltip("variant:N", title=" "),
               alt.Tooltip("value:Q", title=_t(lang, "tip_value"), format=".4f")]
    lines = alt.Chart().transform_filter("!datum.is_ref").mark_line(point=True).encode(
        x=x, y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False)),
        color=_variant_color(lang), tooltip=tooltip)
    refline = alt.Chart().transform_filter("datum.is_ref").mark_line(
        strokeDash=[6, 4], color="#555555").encode(
        x=x, y="value:Q",
        tooltip=[alt.Tooltip("d_k:Q", format="d"), alt.Tooltip("reference:N", title=" "),
                 alt.Tooltip("value:Q", format=".3f")])
    layers = [lines, refline]
    if current_dk is not None:
        layers.append(alt.Chart().mark_rule(color="#999999", strokeDash=[2, 2]).encode(
            x=alt.datum(current_dk)))
    chart = alt.layer(*layers, data=data).properties(width=width, height=height)
    labels = _metric_labels(lang, SWEEP_METRICS)
    labels["score_std"] = _t(lang, "metric_score_std", ref=ref_label)
    return _small_multiples(chart, SWEEP_METRICS, labels, 3).resolve_scale(y="independent")


# ---- (d) saturation: the gradient that survives ----------------------------------------

def saturation_frame(a: Analysis, heads: list[int], max_points: int = MAX_POINTS,
                     seed: int = 0) -> pd.DataFrame:
    """One point per (head, query) row: max weight and softmax-Jacobian norm, scaled and
    unscaled; beyond max_points rows per variant a seeded uniform sample is kept."""
    hh, qq = np.meshgrid(heads, np.arange(a.n), indexing="ij")    # (len(heads), n)
    rows = len(heads) * a.n
    keep = np.arange(rows)
    if rows > max_points:
        keep = np.sort(np.random.default_rng(seed).choice(rows, max_points, replace=False))
    parts = []
    for variant, values in (("scaled", a.scaled_metrics), ("unscaled", a.unscaled_metrics)):
        parts.append(pd.DataFrame({
            "head": hh.flatten()[keep], "query_pos": qq.flatten()[keep], "variant": variant,
            "max_weight": values["max_weight"][heads].flatten().numpy()[keep],
            "jacobian_norm": values["jacobian_norm"][heads].flatten().numpy()[keep]}))
    frame = pd.concat(parts, ignore_index=True)
    frame.insert(2, "query_token", np.asarray(a.tokens, dtype=object)[frame["query_pos"]])
    return frame


def saturation_curve(n_keys: int, points: int = 101) -> pd.DataFrame:
    """||J||_F of a row where one key holds weight m and the other n_keys - 1 share the rest
    evenly, for m from 1/n_keys (uniform) to 1 (one-hot): the reference line of the view."""
    m = torch.linspace(1.0 / n_keys, 1.0, points, dtype=torch.float64)      # (points,)
    rest = ((1.0 - m) / max(n_keys - 1, 1))[:, None].expand(points, max(n_keys - 1, 0))
    rows = torch.cat([m[:, None], rest], dim=1)                              # (points, n_keys)
    return pd.DataFrame({"max_weight": m.numpy(),
                         "jacobian_norm": metrics.jacobian_norm(rows).numpy()})


def saturation_chart(points: pd.DataFrame, curve: pd.DataFrame, n_keys: int,
                     lang: str, height: int = 320) -> alt.LayerChart:
    """Jacobian norm against max weight: as a row saturates (max weight -> 1) the gradient
    it passes back goes to 0. The grey curve is the one-peak row of saturation_curve."""
    tooltip = [alt.Tooltip("query_token:N", title=_t(lang, "tip_token")),
               alt.Tooltip("query_pos:Q", title=_t(lang, "tip_position")),
               alt.Tooltip("head:Q", title=_t(lang, "tip_head")),
               alt.Tooltip("variant:N", title=" "),
               alt.Tooltip("max_weight:Q", title=_t(lang, "metric_max_weight"), format=".4f"),
               alt.Tooltip("jacobian_norm:Q", title=_t(lang, "metric_jacobian_norm"),
                           format=".2e")]
    x = alt.X("max_weight:Q", title=_t(lang, "metric_max_weight"),
              scale=alt.Scale(domain=[0, 1]))
    y = alt.Y("jacobian_norm:Q", title=_t(lang, "axis_jacobian"), scale=alt.Scale(zero=True))
    dots = alt.Chart(points).mark_circle(size=28, opacity=0.55).encode(
        x=x, y=y, color=_variant_color(lang), tooltip=tooltip)
    line = alt.Chart(curve.assign(label=_t(lang, "curve_label", n=n_keys))).mark_line(
        color="#777777", strokeDash=[5, 3]).encode(
        x=x, y=y, tooltip=[alt.Tooltip("label:N", title=" "),
                           alt.Tooltip("max_weight:Q", format=".3f"),
                           alt.Tooltip("jacobian_norm:Q", format=".3e")])
    return alt.layer(line, dots).properties(height=height)


def one_logit_ahead(gaps=(0.0, 2.0, 5.0, 10.0, 20.0), n_keys: int = 4) -> pd.DataFrame:
    """SCIENCE.md's saturation table, computed through the core: a row of n_keys logits, one
    of them ahead of the others by g. Columns gap, max_weight, jacobian_norm."""
    gaps_t = torch.tensor(gaps, dtype=torch.float64)
    q = gaps_t[:, None, None]                                    # (rows, 1, 1) the query is g
    k = torch.zeros(len(gaps), n_keys, 1, dtype=torch.float64)   # (rows, n_keys, 1)
    k[:, 0, 0] = 1.0                                             # logits (g, 0, ..., 0)
    p = attention(q, k, k, scale=1.0).weights[:, 0]              # (rows, n_keys)
    return pd.DataFrame({"gap": gaps_t.numpy(), "max_weight": metrics.max_weight(p).numpy(),
                         "jacobian_norm": metrics.jacobian_norm(p).numpy()})


# ---- numbers for the page's metrics and its written conclusions ------------------------

def summary(a: Analysis, heads: list[int]) -> pd.DataFrame:
    """Means over the heads' rows, index variant (scaled, unscaled): one column per row
    metric, `saturated` (share of rows with max weight above SATURATED) and the mean Jacobian
    norm of the saturated and of the other rows (`jacobian_saturated`, `jacobian_other`;
    NaN where there is no such row: these two are for sentences, never for a chart)."""
    rows = {}
    for variant, values in (("scaled", a.scaled_metrics), ("unscaled", a.unscaled_metrics)):
        row = {name: values[name][heads].mean().item() for name in ROW_METRICS}
        sat = values["max_weight"][heads] > SATURATED                 # (len(heads), n)
        jac = values["jacobian_norm"][heads]                          # (len(heads), n)
        row["saturated"] = sat.double().mean().item()
        row["jacobian_saturated"] = jac[sat].mean().item() if sat.any() else math.nan
        row["jacobian_other"] = jac[~sat].mean().item() if (~sat).any() else math.nan
        rows[variant] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def conclusions(summ: pd.DataFrame, stats: pd.DataFrame, sweep: pd.DataFrame, d_k: int,
                lang: str) -> list[str]:
    """Plain-language findings written from the measured numbers, in `lang`: each sentence
    is picked by what the numbers show, then filled in with them."""
    s, u = summ.loc["scaled"], summ.loc["unscaled"]
    sd = stats.set_index("series")["std"]
    out = [_t(lang, "find_std", d_k=d_k, raw=sd["raw"], sqrt=math.sqrt(d_k), scaled=sd["scaled"])]
    out.append(_t(lang, "find_sharper" if u.max_weight > s.max_weight else "find_not_sharper",
                  u_max=u.max_weight, s_max=s.max_weight,
                  u_eff=u.effective_tokens, s_eff=s.effective_tokens))
    if s.jacobian_norm > 0 and u.jacobian_norm < s.jacobian_norm:
        out.append(_t(lang, "find_grad_falls", s_jac=s.jacobian_norm, u_jac=u.jacobian_norm,
                      ratio=u.jacobian_norm / s.jacobian_norm))
    else:
        out.append(_t(lang, "find_grad_mean", s_jac=s.jacobian_norm, u_jac=u.jacobian_norm))
    if u.saturated > 0 and u.saturated < 1:
        out.append(_t(lang, "find_saturated", u_sat=u.saturated, s_sat=s.saturated,
                      threshold=SATURATED, sat_jac=u.jacobian_saturated,
                      other_jac=u.jacobian_other))
    elif u.saturated == 1:
        out.append(_t(lang, "find_all_saturated", threshold=SATURATED,
                      sat_jac=u.jacobian_saturated))
    else:
        out.append(_t(lang, "find_none_saturated", threshold=SATURATED))
    lo, hi = sweep["d_k"].min(), sweep["d_k"].max()
    by = sweep.set_index(["d_k", "scaled"])
    out.append(_t(lang, "find_sweep", lo=lo, hi=hi,
                  u_max_lo=by.loc[(lo, False), "max_weight"],
                  u_max_hi=by.loc[(hi, False), "max_weight"],
                  u_jac_lo=by.loc[(lo, False), "jacobian_norm"],
                  u_jac_hi=by.loc[(hi, False), "jacobian_norm"],
                  s_max_hi=by.loc[(hi, True), "max_weight"],
                  s_jac_hi=by.loc[(hi, True), "jacobian_norm"],
                  u_std_hi=by.loc[(hi, False), "score_std"], sqrt_hi=math.sqrt(hi)))
    return out
