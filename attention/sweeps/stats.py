"""Per-setting summaries of the sweeps' per-text rows, paired by text against the base
(the model as trained), without torch.

    summary(rows, n_boot=1000, seed=0) -> one row per setting:
        family, variant, layer, head, texts, pieces
        nll, nll_lo, nll_hi       mean over texts of each text's mean NLL per predicted piece
        ppl, ppl_lo, ppl_hi       exp of those (the perplexity of the text-averaged NLL)
        pooled_nll                sum of NLL over every predicted piece / their count
        d_nll, d_lo, d_hi         mean over texts of (setting - base) per text, paired
        max_weight, mw_lo, mw_hi, entropy, ent_lo, ent_hi, own_max_weight, own_entropy
    heads(summary) -> one row per head: layer, head, zero, zero_lo, zero_hi, mean, mean_lo,
        mean_hi (d_nll of zero and mean ablation), max_weight, entropy (the head's own)

Intervals are percentile bootstraps over texts (2.5 and 97.5): rng = default_rng(seed),
idx = rng.integers(0, T, size=(n_boot, T)), the same idx for every setting and statistic, so
differences are paired.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

KEYS = ["family", "variant", "layer", "head"]
N_BOOT = 1000


def _wide(rows: pd.DataFrame, column: str, texts: np.ndarray) -> np.ndarray:
    """(settings, texts) of one column, settings in the order of `_settings`."""
    table = rows.pivot_table(index=KEYS, columns="text_id", values=column, aggfunc="first",
                             observed=True)
    return table.reindex(columns=texts).to_numpy(float), table.index


def _interval(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = np.percentile(samples, [2.5, 97.5], axis=1)
    return lo, hi


def summary(rows: pd.DataFrame, *, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """The module docstring's per-setting table; texts lacking any setting's row are left
    out of every setting (pairs need both)."""
    rows = rows.astype({"family": str, "variant": str})
    counts = rows.groupby("text_id").size()
    texts = np.sort(counts.index[counts == counts.max()].to_numpy())
    rows = rows[rows["text_id"].isin(texts)]
    t = len(texts)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, t, size=(n_boot, t))
    weights = np.zeros((n_boot, t))                                   # multiplicities
    np.add.at(weights, (np.arange(n_boot)[:, None], idx), 1.0)
    weights /= t
    nll, index = _wide(rows, "nll", texts)                            # (settings, texts)
    base = nll[[i for i, k in enumerate(index) if k[0] == "base"][0]]
    diff = nll - base
    out = pd.DataFrame(list(index), columns=KEYS)
    out["texts"] = t
    predicted, _ = _wide(rows, "predicted", texts)
    out["pieces"] = predicted.sum(axis=1).astype(int)
    out["nll"] = nll.mean(axis=1)
    out["nll_lo"], out["nll_hi"] = _interval(nll @ weights.T)
    out["ppl"], out["ppl_lo"], out["ppl_hi"] = (np.exp(out[c]) for c in ("nll", "nll_lo", "nll_hi"))
    out["pooled_nll"] = (nll * predicted).sum(axis=1) / predicted.sum(axis=1)
    out["d_nll"] = diff.mean(axis=1)
    out["d_lo"], out["d_hi"] = _interval(diff @ weights.T)
    for column, short in (("max_weight", "mw"), ("entropy", "ent")):
        values, _ = _wide(rows, column, texts)
        out[column] = values.mean(axis=1)
        out[f"{short}_lo"], out[f"{short}_hi"] = _interval(values @ weights.T)
    for column in ("own_max_weight", "own_entropy"):
        out[column] = _wide(rows, column, texts)[0].mean(axis=1)
    return out


def heads(summary_table: pd.DataFrame) -> pd.DataFrame:
    """One row per head (module docstring) from a heads sweep's summary."""
    s = summary_table
    zero = s[s["family"] == "zero"].set_index(["layer", "head"])
    mean = s[s["family"] == "mean"].set_index(["layer", "head"])
    out = pd.DataFrame({"zero": zero["d_nll"], "zero_lo": zero["d_lo"], "zero_hi": zero["d_hi"]})
    out = out.join(pd.DataFrame({"mean": mean["d_nll"], "mean_lo": mean["d_lo"],
                                 "mean_hi": mean["d_hi"]}))
    out["max_weight"] = zero["own_max_weight"]
    out["entropy"] = zero["own_entropy"]
    out["texts"] = zero["texts"]
    return out.reset_index().sort_values(["layer", "head"], ignore_index=True)


def agreement(head_table: pd.DataFrame, *, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """Spearman between each head's dNLL (zero, mean ablation) and its sharpness (max
    weight, entropy), per layer and pooled, with bootstrap intervals over heads and null
    bands from permuted sharpness (attention.importance.curves.sharpness_agreement). Imports
    torch (that module's): run when shipping, not on a page."""
    from attention.importance.curves import sharpness_agreement

    frames = [sharpness_agreement(head_table, importance=kind, sharpness=sharp, n_boot=n_boot,
                                  seed=seed)
              for kind in ("zero", "mean") for sharp in ("max_weight", "entropy")]
    return pd.concat(frames, ignore_index=True)
