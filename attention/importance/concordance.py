"""How well each score ranks a text's pieces as the target does, over a corpus, with a
bootstrap interval and a null band: the table every agreement sentence is written from.

    agreement(table, against="occlusion", words_only=True, n_boot=1000, seed=0) -> DataFrame

`table` is token_importance's frame (one row per piece: text, position, token, special and
one column per score). Every numeric score column is a method: `<family>_<layer>` (attention_3,
rollout_5, flow_0, norm_2, attention_mean_1, ...) is that family at that layer; a column
without a layer suffix (gradient, integrated_gradients, occlusion when it is not the target,
...) has layer NaN. The bare `rollout` / `flow` (copies of the last layer) and diagnostics
(ig_gap, ...) are not methods. Baselines are rows of the same table:

    random             uniform scores, seeded per text (default_rng([seed, 2, text]), one per
                       piece in table order)
    position_start     distance from the start of the text (the piece's position)
    position_end       distance from the end (last position of the text - position)
    inverse_frequency  -log(count of the piece's string over the whole table)

and every layered family gets a row `layer_mean` = True, layer NaN: per text the mean of its
layers' rho (NaN layers skipped), then the same statistic, interval and band.

The statistic, per method: each text's Spearman rho between the method and `against` over
the text's pieces where both are defined (attention.measures.rank.spearman's convention:
NaN below 3 pairs or for a constant side), then the mean over the texts with a rho.
`texts` counts them; `skipped` counts the texts that had pieces but no rho; `pieces` sums
the pairs of the counted texts.

Interval (percentile bootstrap over texts, not pieces): with T the texts that have at least
one piece after filtering, in order of `text`,
    idx = np.random.default_rng(seed).integers(0, T, size=(n_boot, T))
    boot[b] = nanmean(rho[idx[b]])          # a resample with no rho at all is left out
    ci_low, ci_high = np.nanpercentile(boot, [2.5, 97.5])

Null band (permutation within texts): rng = np.random.default_rng([seed, 1]); for each
text in order with n >= 3 valid pairs, perm = rng.permuted(np.tile(np.arange(n), (n_boot, 1)),
axis=1) permutes the target's values within the text (the same permutations for every
method whose scores are all defined there; a method with NaN among them draws its own
permutations of its own pairs from the same generator, after). null[b] = nanmean over texts of
the rho with permutation b; null_low, null_high = nanpercentile(null, [2.5, 97.5]). It is the
spread the statistic would have if the method's ranking within each text were unrelated to
the target's, for these texts and these lengths.

Everything is vectorised (ranks once per text, one matrix product per text for the null):
1000 resamples over 300 texts and 50 methods take about a second.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from attention.measures import rank
from attention.measures.rank import MIN_PAIRS

LAYERED = re.compile(r"^(?P<family>.+)_(?P<layer>\d+)$")
NOT_METHODS = frozenset({"text", "position", "special", "ig_gap", "completeness_gap", "layer",
                         "head", "index"})
ALIASES = ("rollout", "flow")        # copies of <name>_<last layer>
BASELINES = ("random", "position_start", "position_end", "inverse_frequency")
COLUMNS = ["method", "layer", "spearman", "ci_low", "ci_high", "null_low", "null_high",
           "texts", "skipped", "pieces", "baseline", "layer_mean"]


def methods_of(table: pd.DataFrame, against: str) -> list[str]:
    """The score columns of `table` that are methods (module docstring), in table order."""
    out = []
    for name in table.columns:
        if name == against or name in NOT_METHODS or name in BASELINES:
            continue
        if not pd.api.types.is_numeric_dtype(table[name]) or table[name].dtype == bool:
            continue
        if name in ALIASES and any(LAYERED.match(c) and LAYERED.match(c)["family"] == name
                                   for c in table.columns):
            continue
        out.append(name)
    return out


def split_name(name: str) -> tuple[str, float]:
    """(family, layer) of a method column; layer NaN for a column without one."""
    m = LAYERED.match(name)
    return (m["family"], float(m["layer"])) if m else (name, float("nan"))


def with_baselines(table: pd.DataFrame, seed: int = 0, counts: dict | None = None) -> pd.DataFrame:
    """`table` plus the baseline columns (module docstring). counts: each piece's count over
    the whole corpus when `table` holds a part of it (inverse_frequency is then the corpus's,
    so parts equal the whole); by default the table's own counts."""
    out = table.copy()
    codes = out["text"].to_numpy()
    order = np.argsort(codes, kind="stable")
    cuts = np.flatnonzero(np.diff(codes[order])) + 1
    scores = np.empty(len(out))
    for rows in np.split(order, cuts) if len(order) else []:
        scores[rows] = np.random.default_rng([seed, 2, int(codes[rows[0]])]).random(len(rows))
    out["random"] = scores
    if "position" in out:
        position = out["position"].astype(float)
        out["position_start"] = position
        out["position_end"] = out.groupby("text")["position"].transform("max").astype(float) \
            - position
    if "token" in out:
        found = out["token"].map(out["token"].value_counts() if counts is None else counts)
        out["inverse_frequency"] = -np.log(found.astype(float))
    return out


def _centred_ranks(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average ranks per column, centred, and their norms (0 for a constant column)."""
    r = rank.ranks(x, axis=0)
    r = r - r.mean(axis=0)
    return r, np.sqrt((r * r).sum(axis=0))


def _families(methods: list[str]) -> dict[str, list[int]]:
    """family -> indices of its layered columns (families with at least one layer)."""
    out: dict[str, list[int]] = {}
    for i, name in enumerate(methods):
        family, layer = split_name(name)
        if not np.isnan(layer):
            out.setdefault(family, []).append(i)
    return out


def agreement(table: pd.DataFrame, against: str = "occlusion", words_only: bool = True,
              n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """One row per method and layer (module docstring): method, layer, spearman, ci_low,
    ci_high, null_low, null_high, texts, skipped, pieces, baseline, layer_mean."""
    if against not in table:
        raise ValueError(f"agreement: the table has no column {against!r}")
    full = with_baselines(table, seed)
    rows = full[~full["special"].astype(bool)] if words_only and "special" in full else full
    rows = rows[rows[against].notna()]
    methods = methods_of(table, against) + [b for b in BASELINES if b in full]
    families = _families(methods)
    m_count = len(methods)
    k = m_count + len(families)                 # methods, then one layer mean per family

    rows = rows.sort_values("text", kind="stable")
    all_x = rows[methods].to_numpy(dtype=float)                         # (pieces, methods)
    all_y = rows[against].to_numpy(dtype=float)                         # (pieces,)
    _, starts = np.unique(rows["text"].to_numpy(), return_index=True)
    bounds = list(zip(starts, [*starts[1:], len(rows)]))
    t_count = len(bounds)
    rho = np.full((t_count, k), np.nan)
    pairs = np.zeros((t_count, k))
    null_sum = np.zeros((n_boot, k))
    null_count = np.zeros((n_boot, k))
    null_rng = np.random.default_rng([seed, 1])

    for t, (start, stop) in enumerate(bounds):
        x, y = all_x[start:stop], all_y[start:stop]                    # (n, methods), (n,)
        n = len(y)
        whole = ~np.isnan(x).any(axis=0)                               # methods defined everywhere
        text_rho = np.full(m_count, np.nan)
        text_null = np.full((n_boot, m_count), np.nan)
        text_pairs = np.where(whole, n, (~np.isnan(x)).sum(axis=0)).astype(float)
        if n >= MIN_PAIRS:
            yc, y_norm = _centred_ranks(y)
            cols = np.flatnonzero(whole)
            if len(cols) and y_norm > 0:
                xc, x_norm = _centred_ranks(x[:, cols])
                ok = x_norm > 0
                denom = np.where(ok, x_norm * y_norm, np.nan)
                text_rho[cols] = (yc @ xc) / denom
                perm = null_rng.permuted(np.tile(np.arange(n), (n_boot, 1)), axis=1)
                text_null[:, cols] = (yc[perm] @ xc) / denom
        for c in np.flatnonzero(~whole):                               # NaN among the scores
            keep = ~np.isnan(x[:, c])
            if keep.sum() < MIN_PAIRS:
                continue
            yc, y_norm = _centred_ranks(y[keep])
            xc, x_norm = _centred_ranks(x[keep, c])
            if x_norm == 0 or y_norm == 0:
                continue
            text_rho[c] = float(yc @ xc) / (x_norm * y_norm)
            perm = null_rng.permuted(np.tile(np.arange(keep.sum()), (n_boot, 1)), axis=1)
            text_null[:, c] = (yc[perm] @ xc) / (x_norm * y_norm)
        rho[t, :m_count] = text_rho
        pairs[t, :m_count] = np.where(np.isnan(text_rho), 0.0, text_pairs)
        nulls = [text_null]
        for f, idx in enumerate(families.values()):
            with np.errstate(all="ignore"):
                rho[t, m_count + f] = _nanmean(text_rho[idx])
                nulls.append(_nanmean(text_null[:, idx], axis=1)[:, None])
            got = ~np.isnan(text_rho[idx])
            pairs[t, m_count + f] = pairs[t, [idx[i] for i in np.flatnonzero(got)]].mean() \
                if got.any() else 0.0
        everything = np.concatenate(nulls, axis=1)                     # (n_boot, k)
        defined = ~np.isnan(everything)
        null_sum += np.where(defined, everything, 0.0)
        null_count += defined

    with np.errstate(all="ignore"):
        stat = _nanmean(rho, axis=0) if t_count else np.full(k, np.nan)
        null = null_sum / null_count                                   # NaN where 0 / 0
    if t_count:
        idx = np.random.default_rng(seed).integers(0, t_count, size=(n_boot, t_count))
        weight = np.zeros((n_boot, t_count))                           # times text t drawn
        np.add.at(weight, (np.arange(n_boot)[:, None], idx), 1.0)
        defined = ~np.isnan(rho)
        with np.errstate(all="ignore"):                                # a resample with no rho: NaN
            boot = (weight @ np.where(defined, rho, 0.0)) / (weight @ defined)
    else:
        boot = np.full((n_boot, k), np.nan)
    ci = _percentiles(boot)
    band = _percentiles(null)
    counted = ~np.isnan(rho)
    texts_per = counted.sum(axis=0)
    skipped = t_count - texts_per

    names = methods + list(families)
    out = []
    for i, name in enumerate(names):
        mean_row = i >= m_count
        family, layer = (name, float("nan")) if mean_row else split_name(name)
        out.append({"method": family, "layer": layer, "spearman": stat[i],
                    "ci_low": ci[0, i], "ci_high": ci[1, i],
                    "null_low": band[0, i], "null_high": band[1, i],
                    "texts": int(texts_per[i]), "skipped": int(skipped[i]),
                    "pieces": int(round(pairs[counted[:, i], i].sum())),
                    "baseline": name in BASELINES, "layer_mean": mean_row})
    frame = pd.DataFrame(out, columns=COLUMNS)
    return _ordered(frame)


def _ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """Methods in first-seen order, each family's layers ascending then its layer mean,
    baselines last."""
    first = {m: i for i, m in reversed(list(enumerate(frame["method"])))}
    key = frame.assign(_m=frame["method"].map(first), _b=frame["baseline"],
                       _l=frame["layer"].fillna(np.inf), _mean=frame["layer_mean"])
    key = key.sort_values(["_b", "_m", "_mean", "_l"], kind="stable")
    return frame.loc[key.index].reset_index(drop=True)


def _nanmean(a: np.ndarray, axis=None):
    defined = ~np.isnan(a)
    with np.errstate(all="ignore"):
        return np.where(defined, a, 0.0).sum(axis=axis) / defined.sum(axis=axis)


def _percentiles(samples: np.ndarray) -> np.ndarray:
    """(2, k): the 2.5th and 97.5th percentiles of each column, NaN samples left out (an
    all-NaN column gives NaN)."""
    out = np.full((2, samples.shape[1]), np.nan)
    for i in range(samples.shape[1]):
        col = samples[:, i]
        col = col[~np.isnan(col)]
        if len(col):
            out[:, i] = np.percentile(col, [2.5, 97.5])
    return out


def beyond_null(row) -> bool:
    """True when the row's interval lies wholly outside its null band (either side)."""
    return bool(row["ci_low"] > row["null_high"] or row["ci_high"] < row["null_low"])
