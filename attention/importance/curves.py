"""The head experiments with their uncertainty: the pruning curve beside random orders, the
temperature sweep's paired differences, and head sharpness against importance per layer.

    pruning_with_band(model, heads, texts, by="ablation", orders=20, n_boot=1000, seed=0)
    paired_sweep(model, texts, layer, taus=TAUS, n_boot=1000, seed=0)
    sharpness_agreement(heads, importance="ablation", sharpness="max_weight", n_boot=1000, seed=0)

The metric is heads.Metric's (a sentence model's paraphrase retrieval accuracy over the
project's sentence pairs; an LM's minus mean loss over the texts), computed here per unit so
it can be resampled: the units are the sentence pairs (each pair's mean retrieval hit over
its two sentences, measures.retrieval) or the texts (each text's minus mean loss); the
metric is the mean of its units, and every row says how many units it rests on (`units`).

Intervals are percentile bootstraps over units with rng = np.random.default_rng(seed),
idx = rng.integers(0, U, size=(n_boot, U)). Every point of a curve and every tau of a
sweep is resampled with the same idx, so differences are paired.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from attention import models as M
from attention.importance import heads as H
from attention.measures import rank

ORDERS = 20          # random head orders of the pruning band
STEPS = 12           # points of a pruning curve


# ---------------------------------------------------------------------------- metric per unit


class Units:
    """heads.Metric evaluated per unit: `__call__(gate, interventions)` -> (units (U,), mean
    max weight per layer); `value(units)` the metric (their mean); `boot(units)` (n_boot,)
    resampled metrics with this object's fixed idx (the same for every setting: paired)."""

    def __init__(self, model: M.LoadedModel, texts, *, n_boot: int = 1000, seed: int = 0,
                 pairs=None):
        self.metric = H.Metric(model, texts, pairs)
        self.name = self.metric.name
        self.model = model
        self.count = self.metric.count
        self.idx = np.random.default_rng(seed).integers(0, self.count,
                                                        size=(n_boot, self.count))

    def __call__(self, gate=None, interventions=()) -> tuple[np.ndarray, np.ndarray]:
        return self.metric.units(gate, interventions)

    def value(self, units: np.ndarray) -> float:
        return self.metric.value(units)

    def boot(self, units: np.ndarray) -> np.ndarray:
        return units[self.idx].mean(axis=1)


def _interval(samples: np.ndarray) -> tuple[float, float]:
    s = samples[~np.isnan(samples)]
    if not len(s):
        return math.nan, math.nan
    low, high = np.percentile(s, [2.5, 97.5])
    return float(low), float(high)


# ---------------------------------------------------------------------------- pruning


def _points(count: int, steps: int = STEPS) -> list[int]:
    return sorted({*range(0, count + 1, max(1, count // steps)), count})


def pruning_with_band(model: M.LoadedModel, heads: pd.DataFrame, texts, *, by: str = "ablation",
                      orders: int = ORDERS, n_boot: int = 1000, seed: int = 0,
                      steps: int = STEPS, randoms: np.ndarray | None = None,
                      progress: Callable[[float], None] | None = None,
                      pairs=None) -> pd.DataFrame:
    """Heads removed least important first (`heads[by]` ascending, as heads.pruning_curve),
    and in `orders` random orders (rng default_rng([seed, 3]), one permutation each).
    One row per number removed: removed, metric, ci_low, ci_high (the metric's bootstrap
    interval at that point), random_mean, random_low, random_high (mean and 2.5 / 97.5
    percentiles of the metric over the random orders), orders, units, metric_name. randoms: the
    random orders' metrics (orders, points) when computed apart (random_curves). pairs: a
    sentence model's pairs (default the bundled set)."""
    units = Units(model, texts, n_boot=n_boot, seed=seed, pairs=pairs)
    ranked = heads.sort_values(by, kind="stable")[["layer", "head"]].to_numpy()
    shuffles = random_orders(model, orders, seed)
    points = _points(len(ranked), steps)
    total = (orders + 1) * len(points)
    done = 0

    def measure(order, k):
        nonlocal done
        gate = torch.ones(model.layers, model.heads)
        for layer, head in order[:k]:
            gate[int(layer), int(head)] = 0.0
        got = units(gate=gate)[0]
        done += 1
        if progress is not None:
            progress(done / total)
        return got

    if randoms is None:
        randoms = np.array([[units.value(measure(order, k)) for k in points]
                            for order in shuffles])                     # (orders, points)
    rows = []
    for p, k in enumerate(points):
        own = measure(ranked, k)
        low, high = _interval(units.boot(own))
        values = randoms[:, p]
        rows.append({"removed": k, "metric": units.value(own), "ci_low": low, "ci_high": high,
                     "random_mean": float(values.mean()),
                     "random_low": float(np.percentile(values, 2.5)),
                     "random_high": float(np.percentile(values, 97.5)),
                     "orders": len(values), "units": units.count, "metric_name": units.name})
    return pd.DataFrame(rows)


def random_orders(model: M.LoadedModel, orders: int, seed: int = 0) -> list[np.ndarray]:
    """The random head orders of pruning_with_band: (layer, head) rows, layer-major table
    permuted by default_rng([seed, 3]), one permutation per order."""
    table = np.array([(layer, head) for layer in range(model.layers)
                      for head in range(model.heads)])
    rng = np.random.default_rng([seed, 3])
    return [table[rng.permutation(len(table))] for _ in range(orders)]


def random_curves(model: M.LoadedModel, texts, which, *, orders: int = ORDERS, seed: int = 0,
                  steps: int = STEPS, pairs=None) -> np.ndarray:
    """The metric of random orders `which` (indices into random_orders) at every point:
    (len(which), points), so the band can be computed in parts."""
    units = Units(model, texts, n_boot=1, seed=seed, pairs=pairs)
    shuffles = random_orders(model, orders, seed)
    points = _points(model.layers * model.heads, steps)
    out = np.empty((len(which), len(points)))
    for i, o in enumerate(which):
        for p, k in enumerate(points):
            gate = torch.ones(model.layers, model.heads)
            for layer, head in shuffles[o][:k]:
                gate[int(layer), int(head)] = 0.0
            out[i, p] = units.value(units(gate=gate)[0])
    return out


# ---------------------------------------------------------------------------- temperature


def paired_sweep(model: M.LoadedModel, texts, layer: int, *, taus=H.TAUS, n_boot: int = 1000,
                 seed: int = 0, pairs=None) -> pd.DataFrame:
    """Every head of `layer` at temperature tau: layer, tau, metric, ci_low, ci_high,
    max_weight, diff (metric - metric at tau = 1), diff_low, diff_high (paired bootstrap:
    both metrics on the same resampled units), units, metric_name."""
    units = Units(model, texts, n_boot=n_boot, seed=seed, pairs=pairs)
    taus = sorted({float(t) for t in taus} | {1.0})
    got = {}
    for tau in taus:
        interventions = () if tau == 1.0 else (
            M.Intervention("temperature", layer=layer, value=float(tau)),)
        got[tau] = units(interventions=interventions)
    base_units = got[1.0][0]
    base_boot = units.boot(base_units)
    rows = []
    for tau in taus:
        u, sharp = got[tau]
        boot = units.boot(u)
        low, high = _interval(boot)
        d_low, d_high = _interval(boot - base_boot)
        rows.append({"layer": int(layer), "tau": tau, "metric": units.value(u),
                     "ci_low": low, "ci_high": high, "max_weight": float(sharp[layer]),
                     "diff": units.value(u) - units.value(base_units),
                     "diff_low": d_low, "diff_high": d_high, "units": units.count,
                     "metric_name": units.name})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------- sharpness


def _rho_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman of each row pair of (b, n) arrays, NaN for a constant row."""
    rx, ry = rank.ranks(x, axis=1), rank.ranks(y, axis=1)
    rx = rx - rx.mean(axis=1, keepdims=True)
    ry = ry - ry.mean(axis=1, keepdims=True)
    denom = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
    with np.errstate(all="ignore"):
        return np.where(denom > 0, (rx * ry).sum(axis=1) / denom, np.nan)


def sharpness_agreement(heads: pd.DataFrame, importance: str = "ablation",
                        sharpness: str = "max_weight", *, n_boot: int = 1000,
                        seed: int = 0) -> pd.DataFrame:
    """Spearman between a head's importance and its sharpness, within each layer and pooled:
    layer (NaN = pooled), importance, sharpness, spearman, ci_low, ci_high (bootstrap over
    heads, within each layer; pooled: heads resampled within every layer, then pooled),
    null_low, null_high (sharpness permuted over the heads, within layers for the pooled
    row), heads. rng = default_rng(seed) for the bootstrap, default_rng([seed, 1]) for the
    permutations; layers in ascending order."""
    frame = heads.dropna(subset=[importance, sharpness]).sort_values(["layer", "head"])
    boot_rng = np.random.default_rng(seed)
    null_rng = np.random.default_rng([seed, 1])
    rows = []
    pooled_boot_x, pooled_boot_y, pooled_null_y, pooled_x, pooled_y = [], [], [], [], []
    for layer, group in frame.groupby("layer", sort=True):
        x, y = group[importance].to_numpy(float), group[sharpness].to_numpy(float)
        n = len(x)
        idx = boot_rng.integers(0, n, size=(n_boot, n))
        perm = null_rng.permuted(np.tile(np.arange(n), (n_boot, 1)), axis=1)
        bx, by_, ny = x[idx], y[idx], y[perm]
        pooled_boot_x.append(bx)
        pooled_boot_y.append(by_)
        pooled_null_y.append(ny)
        pooled_x.append(x)
        pooled_y.append(y)
        rows.append(_sharp_row(float(layer), importance, sharpness, x, y, bx, by_,
                               np.tile(x, (n_boot, 1)), ny))
    if rows:
        x, y = np.concatenate(pooled_x), np.concatenate(pooled_y)
        rows.append(_sharp_row(math.nan, importance, sharpness, x, y,
                               np.concatenate(pooled_boot_x, axis=1),
                               np.concatenate(pooled_boot_y, axis=1),
                               np.tile(x, (n_boot, 1)), np.concatenate(pooled_null_y, axis=1)))
    return pd.DataFrame(rows, columns=["layer", "importance", "sharpness", "spearman", "ci_low",
                                       "ci_high", "null_low", "null_high", "heads"])


def _sharp_row(layer, importance, sharpness, x, y, bx, by_, nx, ny) -> dict:
    rho = float(_rho_rows(x[None], y[None])[0])
    low, high = _interval(_rho_rows(bx, by_))
    n_low, n_high = _interval(_rho_rows(nx, ny))
    return {"layer": layer, "importance": importance, "sharpness": sharpness, "spearman": rho,
            "ci_low": low, "ci_high": high, "null_low": n_low, "null_high": n_high,
            "heads": len(x)}
