"""A corpus run's folder, shard by shard: the manifest, each shard's Parquet files (written to
a temporary name and renamed), computing one shard, and the model a run loads. The job
(attention.corpus.job), its engines and the results reader all build on these."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from attention.corpus.compute import Settings, compute_shard
from attention.errors import UserError


MANIFEST = "manifest.json"
FORMAT = 1


class Refused(Exception):
    """A run that cannot start: one sentence for the user, exit code 2 on the command line."""


def code_version() -> str:
    """The code that makes the captured products' rows (compute.SOURCES, as
    attention.diskcache.fingerprint reads them: comments and docstrings do not count), so an
    edit elsewhere (a page, a chart, a sentence) does not stop a resume."""
    from attention import diskcache
    from attention.corpus.compute import SOURCES

    return diskcache.fingerprint(SOURCES, {})[:16]


def shard_name(index: int) -> str:
    return f"part-{index:05d}.parquet"


def shard_count(texts: int, batch_size: int) -> int:
    return (texts + batch_size - 1) // batch_size


def identity(model: str, corpus: str, texts: list[str], settings: Settings) -> dict:
    """What makes two runs the same run (the engine does not: both write the same shards)."""
    from attention.text.corpora import digest

    if tuple(settings.what) == ("nll",):      # only the code that changes its numbers
        from attention.sweeps.store import code_key
        version = code_key()
    elif tuple(settings.what) == ("importance",):
        from attention.importance.store import code_key
        version = code_key()
    else:
        version = code_version()
    return {"format": FORMAT, "model": model, "corpus": corpus, "corpus_digest": digest(texts),
            "texts": len(texts), "settings": settings.as_dict(), "code_version": version}


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_manifest(out: Path) -> dict | None:
    path = Path(out) / MANIFEST
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_manifest(out: Path, manifest: dict) -> None:
    _atomic_write(Path(out) / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode())


def write_shard(out: Path, index: int, tables: dict[str, pd.DataFrame]) -> list[str]:
    """Each table to <out>/<table>/part-<index>.parquet through a temporary name; the names."""
    names = []
    for name, frame in tables.items():
        folder = Path(out) / name
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / shard_name(index)
        tmp = folder / f".{shard_name(index)}.{os.getpid()}.tmp"
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, final)
        names.append(name)
    return sorted(names)


def prepass_files(settings: Settings) -> dict[str, str]:
    """{product: the file of its corpus-level inputs} for the products of a run that have
    them (written once by the job before any shard: attention.corpus.job)."""
    out = {}
    if "nll" in settings.what:
        from attention.sweeps.table import PREPASS
        out["nll"] = PREPASS
    if "importance" in settings.what:
        from attention.importance.product import PREPASS
        out["importance"] = PREPASS
    return out


def read_prepass(out: Path, settings: Settings) -> dict:
    """{product: its prepass} of the run in `out` (those written)."""
    got = {}
    for product, name in prepass_files(settings).items():
        path = Path(out) / name
        if path.is_file():
            got[product] = json.loads(path.read_text(encoding="utf-8"))
    return got


def shard_done(out: Path, index: int, tables: list[str]) -> bool:
    return all((Path(out) / t / shard_name(index)).is_file() for t in tables)


def process_shard(model, out: Path, index: int, texts: list[str], settings: Settings) -> dict:
    """The one per-batch function both engines call: compute shard `index` of `texts` (the
    shard's own texts) and write it. Returns {"shard", "texts", "tables"}."""
    first = index * settings.batch_size
    tables = compute_shard(model, first, texts, settings, prepass=read_prepass(out, settings))
    names = write_shard(out, index, tables)
    return {"shard": index, "texts": len(texts), "tables": names}


def load_model_for_job(source: str):
    """load_model as the operator's own (folders and any Hub id); Refused with the sentence."""
    from attention.models import load_model

    try:
        return load_model(source, trusted=True)
    except UserError as err:
        raise Refused(str(err)) from err
