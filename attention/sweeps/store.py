"""The sweeps' per-text results that ship with the code (attention/data/sweeps), read
without torch, and the key that names them.

One Parquet file per (model, corpus, sweep): `<model>-<corpus>-<sweep>-<key>.parquet` holding
the job's `nll` rows (attention.sweeps.table). The key covers only what changes the numbers:
the model's name, the corpus's texts, the sweep and its text limit, and the code that
computes them (SOURCES, as attention.diskcache.fingerprint reads them: comments and
docstrings do not count), so an unrelated edit keeps the shipped results. `python -m attention.corpus ship` re-ships (and resumes).
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pandas as pd

from attention import config
from attention import diskcache

FOLDER = config.DATA / "sweeps"
PACKAGE = Path(__file__).resolve().parent.parent            # attention/
SOURCES = ("sweeps/engine.py", "sweeps/settings.py", "sweeps/table.py", "core.py",
           "models/interventions.py", "models/registered.py", "measures/sinks.py")
# What ships: every text for the global settings, the first 100 for each layer and head
# (a text limit per sweep; layers_rest is not shipped).
PLAN = {"global": 0, "layers": 100, "heads": 100, "layers_rest": 100}


def code_key() -> str:
    """The code that computes the sweeps' numbers (the corpus job's key of an nll job)."""
    return diskcache.fingerprint(SOURCES, {})[:16]


def texts_digest(texts: list[str]) -> str:
    """sha256 over each text's own sha256: no two lists of texts share it."""
    h = hashlib.sha256()
    for text in texts:
        h.update(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest())
    return h.hexdigest()


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "_", name).strip("_")


def key(model: str, corpus: str, texts: list[str], sweep: str, limit: int) -> str:
    return diskcache.fingerprint(SOURCES, {"model": model, "corpus": corpus, "sweep": sweep,
                                           "texts": texts_digest(texts), "limit": limit})[:16]


def path(model: str, corpus: str, texts: list[str], sweep: str, limit: int | None = None) -> Path:
    """The rows file of a sweep over the corpus `texts` (its first `limit`, PLAN's by default)."""
    limit = PLAN[sweep] if limit is None else limit
    texts = texts[:limit] if limit else texts
    return FOLDER / (f"{slug(model)}-{slug(corpus)}-{sweep}-"
                     f"{key(model, corpus, texts, sweep, limit)}.parquet")


def write(frame: pd.DataFrame, target: Path) -> Path:
    """The rows, compact (float32, categories), to `target` through a temporary name."""
    frame = frame.astype({c: "float32" for c in ("nll", "max_weight", "entropy",
                                                 "own_max_weight", "own_entropy")})
    frame = frame.astype({"family": "category", "variant": "category"})
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    frame.to_parquet(tmp, index=False, compression="zstd")
    tmp.replace(target)
    return target


def derived(target: Path, name: str) -> Path:
    """A table derived from the rows file `target` (summary, heads, agreement)."""
    return target.with_name(target.name.replace(".parquet", f".{name}.parquet"))


def write_table(frame: pd.DataFrame, target: Path) -> Path:
    tmp = target.with_name(f".{target.name}.tmp")
    frame.to_parquet(tmp, index=False, compression="zstd")
    tmp.replace(target)
    return target


def read(model: str, corpus: str, texts: list[str], name: str = "summary") -> dict[str, pd.DataFrame]:
    """sweep -> the shipped table `name` ("rows", "summary", "heads", "agreement") of `model`
    on `corpus` under the current key (sweeps not shipped left out)."""
    out = {}
    for sweep in PLAN:
        p = path(model, corpus, texts, sweep)
        p = p if name == "rows" else derived(p, name)
        if p.is_file():
            frame = pd.read_parquet(p)
            if "family" in frame.columns:
                frame = frame.astype({"family": str, "variant": str})
            out[sweep] = frame
    return out
