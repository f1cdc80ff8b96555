"""Is sharper attention a better sentence model: the sweeps' settings on a sentence model,
whose quality is paraphrase retrieval over a whole pair set. No torch: the page reads this.

    pair_settings(sweep, layers)  global: the trained model, the scale variants and every
                                  temperature in every layer; layers: tau 0.5 and 2 per layer
    summary(rows, n_boot=1000, seed=0) -> one row per setting:
        family, variant, layer, head, pairs, pieces
        accuracy, acc_lo, acc_hi      mean over pairs of hit (95% bootstrap over pairs)
        mrr, mrr_lo, mrr_hi           mean over pairs of reciprocal rank
        d_acc, d_acc_lo, d_acc_hi     mean over pairs of (setting - trained), paired
        d_mrr, d_mrr_lo, d_mrr_hi
        max_weight, mw_lo, mw_hi, entropy, ent_lo, ent_hi, own_max_weight, own_entropy
    path / read / write             the shipped files (attention/data/sweeps), keyed like the
                                    causal LM's (attention.sweeps.store.key) and by this
                                    code (SOURCES)

The rows (attention.sweeps.sentence.pair_table), one per (pair, setting):
    pair_id, family, variant, layer, head   the pair (its line in the set) and the setting
    hit, rr        mean over the pair's two sentences of [its pair is the nearest of every
                   other sentence] and 1 / its pair's rank (attention.measures.retrieval)
    pieces         the pair's two sentences' pieces
    max_weight, entropy, own_max_weight, own_entropy   as in attention.sweeps.table, per pair
                   the mean over its two sentences

Intervals: idx = attention.measures.retrieval.boot_indices(pairs, n_boot, seed), the same
idx for every setting and statistic (paired differences; the candidates stay the whole set),
so the trained model's accuracy interval is the one retrieval.quality gives."""
from __future__ import annotations

import numpy as np
import pandas as pd

from attention import diskcache
from attention.measures.retrieval import boot_indices
from attention.sweeps import store
from attention.sweeps.settings import SCALES, TAUS, Setting

SWEEPS = ("global", "layers")
LAYER_TAUS = ("0.5", "2")
KEYS = ["family", "variant", "layer", "head"]
COLUMNS = ("pair_id", *KEYS, "hit", "rr", "pieces", "max_weight", "entropy",
           "own_max_weight", "own_entropy")
SOURCES = ("sweeps/sentence.py", "sweeps/pairs.py", "measures/retrieval.py")
N_BOOT = 1000


def pair_settings(sweep: str, layers: int) -> list[Setting]:
    """The settings of one sweep, the trained model first."""
    out = [Setting("base")]
    if sweep == "global":
        out += [Setting("scale", s) for s in SCALES] + [Setting("tau", t) for t in TAUS]
    elif sweep == "layers":
        out += [Setting("tau", t, layer) for layer in range(layers) for t in LAYER_TAUS]
    else:
        raise ValueError(f"unknown pairs sweep {sweep!r}: one of {', '.join(SWEEPS)}")
    return out


def _interval(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = np.percentile(samples, [2.5, 97.5], axis=1)
    return lo, hi


def _wide(rows: pd.DataFrame, column: str, pairs: np.ndarray):
    table = rows.pivot_table(index=KEYS, columns="pair_id", values=column, aggfunc="first",
                             observed=True)
    return table.reindex(columns=pairs).to_numpy(float), table.index


def summary(rows: pd.DataFrame, *, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """The module docstring's per-setting table, the trained model first."""
    rows = rows.astype({"family": str, "variant": str})
    pairs = np.sort(rows["pair_id"].unique())
    n = len(pairs)
    idx = boot_indices(n, n_boot, seed)                                # (n_boot, n)
    hit, index = _wide(rows, "hit", pairs)                             # (settings, n)
    out = pd.DataFrame(list(index), columns=KEYS)
    base = [i for i, k in enumerate(index) if k[0] == "base"][0]
    out["pairs"] = n
    out["pieces"] = _wide(rows, "pieces", pairs)[0].sum(axis=1).astype(int)
    for column, short in (("hit", "acc"), ("rr", "mrr")):
        values = hit if column == "hit" else _wide(rows, column, pairs)[0]
        name = "accuracy" if column == "hit" else "mrr"
        out[name] = values.mean(axis=1)
        out[f"{short}_lo"], out[f"{short}_hi"] = _interval(values[:, idx].mean(axis=2))
        diff = values - values[base]
        out[f"d_{short}"] = diff.mean(axis=1)
        out[f"d_{short}_lo"], out[f"d_{short}_hi"] = _interval(diff[:, idx].mean(axis=2))
    for column, short in (("max_weight", "mw"), ("entropy", "ent")):
        values = _wide(rows, column, pairs)[0]
        out[column] = values.mean(axis=1)
        out[f"{short}_lo"], out[f"{short}_hi"] = _interval(values[:, idx].mean(axis=2))
    for column in ("own_max_weight", "own_entropy"):
        out[column] = _wide(rows, column, pairs)[0].mean(axis=1)
    order = (out["family"] != "base").to_numpy()
    return out.iloc[np.argsort(order, kind="stable")].reset_index(drop=True)


def path(model: str, source: str, pairs: list[tuple[str, str]], sweep: str) -> "store.Path":
    """The rows file of a sweep over the pair set: `<model>-<source>-pairs_<sweep>-<key>`,
    keyed like the causal LM's sweeps (attention.diskcache.fingerprint) on the code of both
    (store.SOURCES and SOURCES), the model, the source, the sentences and the sweep."""
    sentences = [s for pair in pairs for s in pair]
    name = f"pairs_{sweep}"
    key = diskcache.fingerprint(store.SOURCES + SOURCES, {
        "model": model, "corpus": source, "sweep": name,
        "texts": store.texts_digest(sentences), "limit": 0})[:16]
    return store.FOLDER / f"{store.slug(model)}-{store.slug(source)}-{name}-{key}.parquet"


def write(rows: pd.DataFrame, target) -> list:
    """The rows (compact) and their summary beside them; older keys of the sweep removed."""
    stem = target.name.rsplit("-", 1)[0]
    for old in target.parent.glob(f"{stem}-*"):
        old.unlink()
    compact = rows.astype({c: "float32" for c in ("hit", "rr", "max_weight", "entropy",
                                                  "own_max_weight", "own_entropy")})
    compact = compact.astype({"family": "category", "variant": "category"})
    target.parent.mkdir(parents=True, exist_ok=True)
    out = [store.write_table(compact, target)]
    out.append(store.write_table(summary(rows), store.derived(target, "summary")))
    return out


def read(model: str, source: str, pairs: list[tuple[str, str]],
         name: str = "summary") -> dict[str, pd.DataFrame]:
    """sweep -> the shipped table `name` ("rows" or "summary") under the current key."""
    out = {}
    for sweep in SWEEPS:
        p = path(model, source, pairs, sweep)
        p = p if name == "rows" else store.derived(p, name)
        if p.is_file():
            out[sweep] = pd.read_parquet(p).astype({"family": str, "variant": str})
    return out
