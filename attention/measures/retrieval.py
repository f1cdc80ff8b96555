"""Paraphrase retrieval: the quality of a sentence model on pairs of sentences that say the
same thing (attention.text.corpora.pairs), measured over the whole set at once.

Every sentence of N pairs is a query; the candidates are the other 2N - 1 sentences; the
answer is its own pair's other sentence. With s the cosine of the sentence embeddings,

    rank_i = 1 + #{j not in (i, partner): s_ij >= s_i,partner}     (a tie counts against)
    hit_i  = [rank_i == 1],   rr_i = 1 / rank_i

accuracy = mean hit_i, MRR = mean rr_i over the 2N sentences. The units of resampling are
the pairs: unit_p = the mean over the pair's two sentences, so accuracy = mean unit_p, and a
95% interval is the percentile bootstrap of that mean over pairs drawn with replacement,
idx = default_rng(seed).integers(0, N, size=(n_boot, N)) (the candidates stay the whole set).
"""
from __future__ import annotations

import numpy as np


def retrieval_units(embeddings) -> tuple[np.ndarray, np.ndarray]:
    """embeddings (2N, hidden), unit rows, pair p's sentences at rows 2p and 2p + 1 ->
    (hit (N,), rr (N,)): per pair, the mean over its two sentences."""
    e = np.asarray(embeddings, dtype=np.float64)
    count = e.shape[0]
    if count < 4 or count % 2:
        raise ValueError(f"need an even number of at least 4 sentences, got {count}")
    sims = e @ e.T                                                     # (2N, 2N)
    rows = np.arange(count)
    partner = rows ^ 1                                                 # 2p <-> 2p + 1
    target = sims[rows, partner]                                       # (2N,)
    beaten = sims >= target[:, None]                                   # (2N, 2N)
    beaten[rows, rows] = False
    beaten[rows, partner] = False
    rank = 1 + beaten.sum(axis=1)                                      # (2N,)
    hit = (rank == 1).astype(np.float64)
    rr = 1.0 / rank
    return hit.reshape(-1, 2).mean(axis=1), rr.reshape(-1, 2).mean(axis=1)


def boot_indices(units: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, units) resampled unit indices, the one convention of every interval here."""
    return np.random.default_rng(seed).integers(0, units, size=(n_boot, units))


def interval(samples: np.ndarray) -> tuple[float, float]:
    """2.5 and 97.5 percentiles of the finite samples (NaN, NaN when there are none)."""
    s = np.asarray(samples, dtype=np.float64)
    s = s[np.isfinite(s)]
    if not len(s):
        return float("nan"), float("nan")
    low, high = np.percentile(s, [2.5, 97.5])
    return float(low), float(high)


def quality(embeddings, *, n_boot: int = 1000, seed: int = 0) -> dict:
    """accuracy, acc_low, acc_high, mrr, mrr_low, mrr_high (95% bootstrap over pairs), pairs."""
    hit, rr = retrieval_units(embeddings)
    idx = boot_indices(len(hit), n_boot, seed)
    acc_low, acc_high = interval(hit[idx].mean(axis=1))
    mrr_low, mrr_high = interval(rr[idx].mean(axis=1))
    return {"accuracy": float(hit.mean()), "acc_low": acc_low, "acc_high": acc_high,
            "mrr": float(rr.mean()), "mrr_low": mrr_low, "mrr_high": mrr_high,
            "pairs": len(hit)}
