"""A finished run as the Corpus page reads it: small tables in <out>/view/, made from the
shards once (`derive`), and one head's joint query/key map made on first use (`embedding`).

    view/texts.parquet     text_id, text, pieces, error
    view/pieces.parquet    text_id, position, token, special, frequency (the token's count
                           in the whole corpus)
    view/summary.parquet   per (layer, head) and Clark column: mean, 95% interval of the mean,
                           sd, cv over the texts; and the head's pattern (its largest share
                           column), that column's cv, and `fixed` (mark_fixed)
    view/map-L<l>-H<h>.parquet   kind (q/k), text_id, position, x, y (float16), method

A shipped result (attention/data/corpus/<name>/) holds the manifest and view/ only.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from attention.measures.columns import HEAD_COLUMNS, SINK_COLUMNS

VIEW = "view"
COLUMNS = HEAD_COLUMNS + SINK_COLUMNS
SHARES = ("to_cls", "to_sep", "to_punct", "to_prev", "to_next", "to_self")
FIXED_SHARE = 0.5        # a "fixed" head puts at least half of a row's weight on its pattern
FIXED_CV = 0.25          # ... and that share varies less than this (sd / mean) across texts
MAP_POINTS = 10_000      # queries + keys in one map at most (qkmap.embed's limit)
Z95 = 1.959964


def done_files(out: Path, table: str) -> list[Path]:
    from attention.corpus.shards import read_manifest, shard_name

    manifest = read_manifest(out) or {}
    return [Path(out) / table / shard_name(i) for i in manifest.get("shards_done", [])
            if (Path(out) / table / shard_name(i)).is_file()]


def read_table(out: Path, table: str, columns=None, filters=None) -> pd.DataFrame:
    """One table of every finished shard, in shard order."""
    files = done_files(out, table)
    if not files:
        return pd.DataFrame(columns=columns)
    return pd.concat([pd.read_parquet(f, columns=columns, filters=filters) for f in files],
                     ignore_index=True)


def summarise(stats: pd.DataFrame) -> pd.DataFrame:
    """Per (layer, head): <col>_mean, _lo, _hi (mean +- 1.96 sd / sqrt(texts)), _sd, _cv; then
    pattern, pattern_mean, pattern_cv and fixed."""
    g = stats.groupby(["layer", "head"])
    n = g.size().rename("texts")
    parts = [n]
    for c in COLUMNS:
        mean, sd = g[c].mean(), g[c].std(ddof=1).fillna(0.0)
        half = Z95 * sd / np.sqrt(n)
        parts += [mean.rename(f"{c}_mean"), (mean - half).rename(f"{c}_lo"),
                  (mean + half).rename(f"{c}_hi"), sd.rename(f"{c}_sd"),
                  (sd / mean.where(mean.abs() > 1e-12)).rename(f"{c}_cv")]
    frame = pd.concat(parts, axis=1).reset_index()
    means = frame[[f"{c}_mean" for c in SHARES]].to_numpy()
    pick = means.argmax(axis=1)
    frame["pattern"] = [SHARES[i] for i in pick]
    frame["pattern_mean"] = means[np.arange(len(frame)), pick]
    frame["pattern_cv"] = [frame.at[r, f"{SHARES[i]}_cv"] for r, i in enumerate(pick)]
    return mark_fixed(frame)


def mark_fixed(summary: pd.DataFrame) -> pd.DataFrame:
    """`fixed`: the head puts most of its weight on one kind of key, the same way on every
    text: its pattern's mean share >= FIXED_SHARE and that share's cv < FIXED_CV. (A cv alone
    marked 62 of MiniLM's 72 heads on bundled:en, most of them with 15-45% on [CLS]: steady,
    but not a pattern the head follows.)"""
    summary["fixed"] = (summary["pattern_mean"] >= FIXED_SHARE) & (summary["pattern_cv"] < FIXED_CV)
    return summary


RING_RULE = {**{c: "share" for c in SHARES + SINK_COLUMNS}, "max_weight": "top",
             "entropy": None}


def ringed(summary: pd.DataFrame, stat: str) -> pd.Series:
    """The heads the grid of `stat` rings: those whose mean of `stat` is at least FIXED_SHARE
    with a cv below FIXED_CV, the same on every text (a share: at least half of the weight on
    that kind of key; max weight: the top key gets at least half). Entropy is not a share:
    no head is ringed under it (RING_RULE)."""
    if RING_RULE.get(stat) is None:
        return pd.Series(False, index=summary.index)
    return (summary[f"{stat}_mean"] >= FIXED_SHARE) & (summary[f"{stat}_cv"] < FIXED_CV)


def derive(out: Path) -> None:
    """Write view/texts, view/pieces and view/summary from the shards."""
    out = Path(out)
    view = out / VIEW
    view.mkdir(exist_ok=True)
    from attention.corpus.shards import _atomic_write  # noqa: the job's own writer

    def put(name: str, frame: pd.DataFrame) -> None:
        tmp = view / f".{name}.tmp"
        frame.to_parquet(tmp, index=False)
        tmp.replace(view / name)

    put("texts.parquet", read_table(out, "texts"))
    pieces = read_table(out, "pieces")
    if len(pieces):
        pieces["frequency"] = pieces.groupby("token")["token"].transform("size").astype(np.int32)
    put("pieces.parquet", pieces)
    stats = read_table(out, "stats")
    if len(stats):
        put("summary.parquet", summarise(stats))
    _atomic_write(view / "done", b"1")


def is_result(folder: Path) -> bool:
    return (Path(folder) / "manifest.json").is_file()


def manifest(folder: Path) -> dict:
    try:
        return json.loads((Path(folder) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def view_table(folder: Path, name: str) -> pd.DataFrame | None:
    """view/<name>.parquet, derived from the shards first when the run is complete."""
    folder = Path(folder)
    path = folder / VIEW / f"{name}.parquet"
    if not path.is_file() and (folder / "texts").is_dir() and manifest(folder).get("complete"):
        derive(folder)
    return pd.read_parquet(path) if path.is_file() else None


def map_sample(qk: pd.DataFrame, limit: int = MAP_POINTS // 2) -> pd.DataFrame:
    """At most `limit` sampled pieces of one head: whole texts, lowest ids first."""
    if len(qk) <= limit:
        return qk
    counts = qk.groupby("text_id").size().cumsum()
    keep = counts.index[counts <= limit]
    return qk[qk["text_id"].isin(keep)]


def embedding(folder: Path, layer: int, head: int, *, method: str = "auto") -> pd.DataFrame | None:
    """One head's joint map (kind, text_id, position, x, y), cached in view/ (when the folder
    can be written); None when the run kept no queries and keys."""
    from attention.corpus.qkmap import AUTO, embed

    folder = Path(folder)
    path = folder / VIEW / f"map-L{layer}-H{head}.parquet"
    if path.is_file():
        return pd.read_parquet(path)
    qk = read_table(folder, "qk", columns=["text_id", "layer", "head", "position", "q", "k"],
                    filters=[("layer", "=", layer), ("head", "=", head)])
    if not len(qk):
        return None
    qk = map_sample(qk.sort_values(["text_id", "position"], kind="stable"))
    q, k = np.stack(qk["q"].to_numpy()), np.stack(qk["k"].to_numpy())   # (m, d) each
    xy = embed(q, k, method=method, seed=0)                              # (2m, 2)
    m = len(qk)
    frame = pd.DataFrame({
        "kind": ["q"] * m + ["k"] * m,
        "text_id": np.concatenate([qk["text_id"].to_numpy()] * 2).astype(np.int32),
        "position": np.concatenate([qk["position"].to_numpy()] * 2).astype(np.int32),
        "x": xy[:, 0].astype(np.float16), "y": xy[:, 1].astype(np.float16)})
    frame["method"] = AUTO if method == "auto" else method
    try:
        (folder / VIEW).mkdir(exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        frame.to_parquet(tmp, index=False)
        tmp.replace(path)
    except OSError:
        pass                                     # a read-only folder: the page caches it
    return frame
