"""Faithfulness of each importance method: comprehensiveness (DeYoung et al. 2020, ERASER).

    faithfulness(model, texts, fractions=(0.1, 0.2, 0.3, 0.5), table=None) -> DataFrame

For each method (every score column of token_importance's table, the layered ones at each
layer, occlusion itself, and the baselines of agreement: random, position_start,
position_end, inverse_frequency), each text and each fraction f: the ceil(f * n) pieces the
method ranks highest among the text's n removable pieces are removed together, and the change
of the model's target is measured:

    change = target(text) - target(text without them)    (comprehensiveness)

with the target of the model kind (targets.py): a sentence model's change is
1 - cos(e(text), e(text without them)), e the unit embedding; a causal LM's the drop in
log p(t | text), t the model's top next piece after the full text; a masked LM's the drop in
log p(true piece at m | text with m masked). Removable pieces: not special, with a defined
occlusion (occlusion is NaN where it never removes: special pieces, a masked LM's m).
Ties in a method's scores are broken by position (the earlier first); a text where the
method has a NaN among the removable pieces (flow past its cap) is left out of that method.

Per method and fraction: change = the mean over texts; ci_low, ci_high = the percentile
bootstrap over texts, idx = np.random.default_rng(seed).integers(0, T, size=(n_boot, T))
(as agreement does); texts = T. aopc = the mean of the method's changes over the fractions
(the area over the perturbation curve), aopc_low / aopc_high its bootstrap interval (each
text's own mean over the fractions, resampled with the same idx).

Removal sets shared by several methods (often: the top piece) are run once; each text's
variants go through the model in padded batches.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from attention.importance.concordance import BASELINES, methods_of, split_name, with_baselines

FRACTIONS = (0.1, 0.2, 0.3, 0.5)
COLUMNS = ["method", "layer", "fraction", "change", "ci_low", "ci_high", "aopc", "aopc_low",
           "aopc_high", "texts", "baseline"]


def removal_sets(scores: np.ndarray, removable: np.ndarray, fractions) -> list[tuple[int, ...]] | None:
    """Per fraction the positions (sorted) a method removes: the ceil(f * n) highest scores
    among the n removable positions, ties to the earlier position; None when a removable
    score is NaN."""
    where = np.flatnonzero(removable)
    values = scores[where]
    if len(where) == 0 or np.isnan(values).any():
        return None
    order = where[np.lexsort((where, -values))]                         # high first, then early
    return [tuple(sorted(order[:min(len(order), math.ceil(f * len(order) - 1e-9))].tolist()))
            for f in fractions]


def _target_changes(model, text: str, ids: list[int], removals: list[tuple[int, ...]]) -> np.ndarray:
    """change of the text's target (targets.py) for each removal set: comprehensiveness."""
    import torch

    from attention.importance import targets as T

    with torch.no_grad():
        masked = model.head == "masked_lm"
        m = T.default_mask_at(model, ids) if masked else None
        run = model.run(text, mask_at=m) if masked else model.run(text)
        target = T.target_of(model, run, ids, mask_at=m)
        prepared = target.prepare(ids, T.mask_id(model))
        variants = [[p for j, p in enumerate(prepared) if j not in r] for r in map(set, removals)]
        where = ([target.at - sum(1 for j in r if j < target.at) for r in removals]
                 if target.kind == "masked" else None)
        base = T.of_run(model, target, run)
        other = T.evaluate(model, target, variants, where)
        return T.change(base, other).double().numpy()


def faithfulness(model, texts, fractions=FRACTIONS, table: pd.DataFrame | None = None, *,
                 n_boot: int = 1000, seed: int = 0,
                 progress: Callable[[float], None] | None = None,
                 changes: Callable | None = None) -> pd.DataFrame:
    """Comprehensiveness per method and fraction (module docstring). table: token_importance
    of (model, texts) when the caller has it. changes(model, text, ids, removals) -> array
    replaces the model's target (tests)."""
    texts = list(texts)
    fractions = tuple(float(f) for f in fractions)
    if table is None:
        from attention.importance.tokens import token_importance

        table = token_importance(model, texts)
    value, methods = per_text(model, texts, fractions, table, seed=seed, progress=progress,
                              changes=changes)
    return summarise(value, methods, fractions, n_boot=n_boot, seed=seed)


def per_text(model, texts, fractions, table: pd.DataFrame, *, seed: int = 0, which=None,
             progress=None, changes=None) -> tuple[np.ndarray, list[str]]:
    """(value (texts, methods, fractions) of each text's change, NaN where left out; the
    methods). which: the text indices to measure (None = all; the others stay NaN)."""
    texts = list(texts)
    wanted = range(len(texts)) if which is None else which
    got, methods = text_changes(model, {int(i): texts[int(i)] for i in wanted}, fractions,
                                table, seed=seed, progress=progress, changes=changes)
    value = np.full((len(texts), len(methods), len(fractions)), np.nan)  # change per text
    for index, rows in got.items():
        value[index] = rows
    return value, methods


def text_changes(model, texts: dict[int, str], fractions, table: pd.DataFrame, *,
                 seed: int = 0, counts: dict | None = None, progress=None,
                 changes=None) -> tuple[dict[int, np.ndarray], list[str]]:
    """({text id: (methods, fractions) change, NaN where a method leaves the text out}, the
    methods) for the texts of `table` (its `text` column: the ids of `texts`) that `texts`
    names. counts: the corpus's piece counts (concordance.with_baselines) when `table` is a
    part of the corpus, so that a text's rows do not depend on the part it is measured in."""
    changes = changes or _target_changes
    full = with_baselines(table, seed, counts)
    methods = methods_of(table, against="") + [b for b in BASELINES if b in full]
    groups = [(int(i), g) for i, g in full.groupby("text", sort=True) if int(i) in texts]
    out = {}
    for t, (index, rows) in enumerate(groups):
        rows = rows.sort_values("position")
        removable = ~rows["special"].astype(bool).to_numpy()
        if "occlusion" in rows:
            removable &= rows["occlusion"].notna().to_numpy()
        ids = _ids(model, texts[index], rows)
        if getattr(model, "head", None) == "masked_lm":                # m is read, never removed
            from attention.importance.targets import default_mask_at

            removable[default_mask_at(model, ids)] = False
        sets = {}
        per_method = []
        for name in methods:
            got = removal_sets(rows[name].to_numpy(dtype=float), removable, fractions)
            per_method.append(got)
            for s in got or ():
                sets.setdefault(s, len(sets))
        value = np.full((len(methods), len(fractions)), np.nan)
        if sets:
            measured = changes(model, texts[index], ids, list(sets))
            for m, got in enumerate(per_method):
                if got is not None:
                    value[m] = [measured[sets[s]] for s in got]
        out[index] = value
        if progress is not None:
            progress((t + 1) / max(len(groups), 1))
    return out, methods


def _ids(model, text: str, rows: pd.DataFrame) -> list[int]:
    """The text's ids, as many as the table has pieces (model None, with a `changes` of a
    test: the positions)."""
    if model is None:
        return list(range(len(rows)))
    ids = model.encode(text)["input_ids"][0].tolist()
    if len(ids) != len(rows):
        raise ValueError("faithfulness: the table's pieces are not the model's for this text")
    return ids


def summarise(value: np.ndarray, methods: list[str], fractions, *, n_boot: int = 1000,
              seed: int = 0) -> pd.DataFrame:
    """value (texts, methods, fractions) of per-text changes (NaN = left out) -> the frame
    of the module docstring."""
    t_count = value.shape[0]
    defined = ~np.isnan(value)
    with np.errstate(all="ignore"):
        mean = np.where(defined, value, 0.0).sum(axis=0) / defined.sum(axis=0)   # (m, f)
        per_text_aopc = value.mean(axis=2)                              # NaN if any fraction is
    weight = np.zeros((n_boot, t_count))
    if t_count:
        idx = np.random.default_rng(seed).integers(0, t_count, size=(n_boot, t_count))
        np.add.at(weight, (np.arange(n_boot)[:, None], idx), 1.0)

    def boot(x: np.ndarray) -> np.ndarray:                                # (T, k) -> (2, k)
        ok = ~np.isnan(x)
        with np.errstate(all="ignore"):
            b = (weight @ np.where(ok, x, 0.0)) / (weight @ ok)
        out = np.full((2, x.shape[1]), np.nan)
        for i in range(x.shape[1]):
            col = b[:, i][~np.isnan(b[:, i])]
            if len(col):
                out[:, i] = np.percentile(col, [2.5, 97.5])
        return out

    m_count, f_count = len(methods), len(fractions)
    ci = boot(value.reshape(t_count, m_count * f_count)).reshape(2, m_count, f_count)
    aopc_ci = boot(per_text_aopc)
    ok = ~np.isnan(per_text_aopc)
    with np.errstate(all="ignore"):
        aopc = np.where(ok, per_text_aopc, 0.0).sum(axis=0) / ok.sum(axis=0)
    rows = []
    for m, name in enumerate(methods):
        family, layer = split_name(name)
        for f, fraction in enumerate(fractions):
            rows.append({"method": family, "layer": layer, "fraction": fraction,
                         "change": mean[m, f], "ci_low": ci[0, m, f], "ci_high": ci[1, m, f],
                         "aopc": aopc[m], "aopc_low": aopc_ci[0, m], "aopc_high": aopc_ci[1, m],
                         "texts": int(defined[:, m, f].sum()), "baseline": name in BASELINES})
    return pd.DataFrame(rows, columns=COLUMNS)
