"""The numbers of the Score analysis page, as small tables computed from an Analysis.

Pre-binned histograms, per-position means, a bounded sample and the page's summary, so a
2048-token, 12-head input (50M scores) still ships a few thousand rows to the browser and
attention/charts/scores.py only has to draw tables. Masked (causal) cells are -inf logits
and are dropped before anything is counted, so every value is finite.
"""
from __future__ import annotations

import math
from typing import Iterator

import numpy as np
import pandas as pd

from attention.measures import rows as metrics
from attention.core import logits
from attention.analysis import Analysis

SERIES = ("raw", "scaled")       # q.k before any scale; the logits the softmax sees
VARIANTS = ("scaled", "unscaled")  # the two AttentionResults of an Analysis
# The per-row views show every row metric but the Gini index, which the d_k sweep shows.
ROW_VIEW_METRICS = tuple(name for name in metrics.ROW_METRICS if name != "gini")
SCORE_BINS = 60       # at most; fewer for small inputs (about sqrt of the score count)
METRIC_BINS = 30
MAX_POINTS = 1500     # saturation scatter: at most this many rows per variant (sampled)
SATURATED = 0.99      # a row whose max weight is above this is called saturated


def head_list(a: Analysis, head: int | None) -> list[int]:
    """The heads a view covers: all of them for None, else just `head`."""
    return list(range(a.heads)) if head is None else [head]


def _variants(a: Analysis):
    return (("scaled", a.scaled_metrics), ("unscaled", a.unscaled_metrics))


# ---- raw vs scaled score distributions ---------------------------------------------------

def _finite_scores(a: Analysis, heads: list[int]) -> Iterator[tuple[str, np.ndarray]]:
    """(series, 1-D float32 finite scores of one head), head by head so memory stays at one
    (n, n) copy however many heads there are.

    The scaled logits are q.k * scale / temperature made by core.logits, as core.attention
    makes them (saturating where they would leave float range; one matmul per head, no
    softmax: the Analysis keeps q and k, not the n x n scores)."""
    keep = None if a.mask is None else np.flatnonzero(a.mask.numpy())   # allowed cells
    factor = a.scale / a.spec.temperature
    for h in heads:
        raw = a.raw_scores(h)                                             # (n, n) q.k
        scaled = logits(a.q[h], a.k[h], factor, raw=raw).numpy().ravel()  # (n * n,) logits
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


# ---- per-query row metrics ---------------------------------------------------------------

def row_metric_frame(a: Analysis, heads: list[int]) -> pd.DataFrame:
    """Per query position, the row metrics of ROW_VIEW_METRICS averaged over the heads, scaled
    and unscaled: columns query_pos, query_token, variant, metric, value (long format)."""
    parts = []
    for variant, values in _variants(a):
        for name in ROW_VIEW_METRICS:
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
    for name in ROW_VIEW_METRICS:
        per = {v: m[name][heads].flatten().numpy() for v, m in _variants(a)}  # (heads * n,)
        lo, hi = bin_range(min(float(x.min()) for x in per.values()),
                           max(float(x.max()) for x in per.values()))
        for variant, values in per.items():
            counts = np.histogram(values, bins=bins, range=(lo, hi))[0]
            parts.append(_bins_frame(counts, lo, hi, metric=name, variant=variant))
    return pd.concat(parts, ignore_index=True)


# ---- saturation: the gradient that survives ----------------------------------------------

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
    for variant, values in _variants(a):
        parts.append(pd.DataFrame({
            "head": hh.flatten()[keep], "query_pos": qq.flatten()[keep], "variant": variant,
            "max_weight": values["max_weight"][heads].flatten().numpy()[keep],
            "jacobian_norm": values["jacobian_norm"][heads].flatten().numpy()[keep]}))
    frame = pd.concat(parts, ignore_index=True)
    frame.insert(2, "query_token", np.asarray(a.tokens, dtype=object)[frame["query_pos"]])
    return frame


# ---- the numbers behind the page's metrics and its written conclusions --------------------

def summary(a: Analysis, heads: list[int]) -> pd.DataFrame:
    """Means over the heads' rows, index variant (scaled, unscaled): one column per metric of
    ROW_VIEW_METRICS, `saturated` (share of rows with max weight above SATURATED, which
    `saturated_above` repeats for the sentences) and the mean
    Jacobian norm of the saturated and of the other rows (`jacobian_saturated`,
    `jacobian_other`; NaN where there is no such row: these two are for sentences, never for
    a chart)."""
    rows = {}
    for variant, values in _variants(a):
        row = {name: values[name][heads].mean().item() for name in ROW_VIEW_METRICS}
        sat = values["max_weight"][heads] > SATURATED                 # (len(heads), n)
        jac = values["jacobian_norm"][heads]                          # (len(heads), n)
        row["saturated"] = sat.double().mean().item()
        row["saturated_above"] = SATURATED
        row["jacobian_saturated"] = jac[sat].mean().item() if sat.any() else math.nan
        row["jacobian_other"] = jac[~sat].mean().item() if (~sat).any() else math.nan
        rows[variant] = row
    return pd.DataFrame.from_dict(rows, orient="index")
