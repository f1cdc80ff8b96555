"""Results kept on disk between server starts, keyed by the code and settings that made them.

A record is a few named DataFrames plus JSON values, stored as one zip file: `meta.json` (the
full key and the values) and one Arrow IPC stream per frame. No pickle: a file in the cache
directory is read as data, never run as code.

    key  = sha256(format, library versions, the parsed code of the modules, settings)
    file = <cache dir>/<name>-<key[:32]>.zip        (meta.json repeats the full key)

A caller may also name a directory of records shipped with the code (read, never written
here), looked in after the cache directory: a fresh machine then starts with them, as long as
its code, settings and library versions give the same full key.

This is the one key of every results store (the experiment's, importance's, the sweeps' and
the corpus job's): `fingerprint(sources, settings)`. A module counts as its syntax tree without
docstrings (comments are not in it), so editing prose forces no re-run; a data file counts
as its bytes. A result is recomputed whenever the code of a named module, a setting or the
torch/pandas/numpy version changes; a file that cannot be read, or that holds another key, is ignored and rewritten.
Writes are atomic (a temporary file in the same directory, then os.replace), so a reader in
another thread or process sees the old file or the new one, never half of one. At most
`keep` files stay: the least recently used beyond that are deleted. A read-only or missing
cache directory only costs the recomputation.

The directory: $ATTENTION_EXPLORER_CACHE, else $XDG_CACHE_HOME/attention-explorer, else
~/.cache/attention-explorer.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import io
import json
import logging
import os
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from attention.config import ENV_CACHE as ENV

# The one progress callback of a long computation (a store's miss, a GGUF conversion, the
# experiment's training): called with the fraction done, 0..1, and the stage it is in (a
# word its caller names, e.g. models.convert's stage keys; "" when there is one stage).
Progress = Callable[[float, str], None]

# torch.__version__ as installed, read without importing torch (a page that only reads
# stored results never loads it: docs/architecture.md, "Imports")
TORCH_VERSION = importlib.metadata.version("torch")

FORMAT = 1          # bump when the file layout changes
KEEP = 64           # files kept in the directory (each a few tens of kB)
META = "meta.json"

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class Record:
    frames: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    values: Mapping[str, object] = field(default_factory=dict)   # JSON-serialisable


def cache_dir() -> Path:
    """Where records live: $ATTENTION_EXPLORER_CACHE or the user's cache directory."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "attention-explorer"


PACKAGE = Path(__file__).resolve().parent                    # attention/


def fingerprint(sources: Iterable[str | Path], settings: Mapping[str, object]) -> str:
    """sha256 hex of everything a result depends on: the file format, Python and library
    versions, the code of each source (code_of) under its name, and the settings (JSON,
    sorted keys). sources: paths relative to attention/ ("core.py", "measures/rows.py",
    "data/paraphrase_pairs.tsv"; a folder stands for every module under it) or absolute."""
    h = hashlib.sha256()
    versions = (FORMAT, sys.version_info[:2], TORCH_VERSION, np.__version__, pd.__version__)
    h.update(repr(versions).encode())
    for path in _files(sources):
        name = path.relative_to(PACKAGE).as_posix() if path.is_relative_to(PACKAGE) else path.name
        h.update(name.encode() + b"\0" + code_of(path) + b"\0")
    h.update(json.dumps(settings, sort_keys=True, default=repr).encode())
    return h.hexdigest()


def _files(sources: Iterable[str | Path]) -> list[Path]:
    out = []
    for src in sources:
        path = PACKAGE / src if not Path(src).is_absolute() else Path(src)
        out += sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts) \
            if path.is_dir() else [path]
    return out


_CODE: dict[tuple[Path, int, int], bytes] = {}    # (path, mtime, size) -> code_of: a page
_CODE_LOCK = threading.Lock()                     # reads a key on every run; parse once


def code_of(path: Path) -> bytes:
    """What a source counts as in a key: a Python module's syntax tree without its
    docstrings (comments never reach the tree), any other file's bytes."""
    stat = path.stat()
    memo = (path, stat.st_mtime_ns, stat.st_size)
    with _CODE_LOCK:
        if memo in _CODE:
            return _CODE[memo]
    data = path.read_bytes()
    if path.suffix == ".py":
        tree = ast.parse(data)
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef)) and body \
                    and isinstance(body[0], ast.Expr) \
                    and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
        data = ast.dump(tree).encode()
    with _CODE_LOCK:
        _CODE[memo] = data
    return data


def path_for(name: str, key: str, directory: Path | None = None) -> Path:
    return (directory or cache_dir()) / f"{name}-{key[:32]}.zip"


def _frame_bytes(frame: pd.DataFrame) -> bytes:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def stored_key(path: Path) -> str | None:
    """The full key a record file was written under (None if unreadable): for re-keying
    shipped records after a change that moves code but changes no number."""
    try:
        with zipfile.ZipFile(path) as zf:
            return json.loads(zf.read(META)).get("key")
    except Exception:                 # any damage: no key
        return None


def read(path: Path, key: str) -> Record | None:
    """The record stored at `path` for `key`, or None if it is missing, unreadable, corrupt or
    was written for another key."""
    try:
        with zipfile.ZipFile(path) as zf:
            meta = json.loads(zf.read(META))
            if meta.get("key") != key:
                return None
            frames = {name: pa.ipc.open_stream(zf.read(f"{name}.arrow")).read_all().to_pandas()
                      for name in meta["frames"]}
        return Record(frames=frames, values=meta["values"])
    except FileNotFoundError:
        return None
    except Exception as err:          # any damage (truncated zip, bad JSON/Arrow): recompute
        log.warning("ignoring unreadable cache file %s: %s", path, err)
        return None


def holds(path: Path, key: str) -> bool:
    """Whether `path` holds a record written for `key` (reads its small header only: a page
    asks this before deciding to say how long a computation will take)."""
    try:
        with zipfile.ZipFile(path) as zf:
            return json.loads(zf.read(META)).get("key") == key
    except Exception:                 # missing or damaged: read() would not return it either
        return False


def write(path: Path, key: str, record: Record) -> None:
    """Store `record` at `path` atomically; a directory that cannot be written is skipped."""
    meta = {"key": key, "frames": list(record.frames), "values": dict(record.values)}
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            with zipfile.ZipFile(fh, "w") as zf:
                zf.writestr(META, json.dumps(meta))
                for name, frame in record.frames.items():
                    zf.writestr(f"{name}.arrow", _frame_bytes(frame))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as err:
        log.warning("could not write cache file %s: %s", path, err)
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def prune(directory: Path, keep: int = KEEP) -> None:
    """Delete the least recently used record files beyond the newest `keep`."""
    try:
        files = sorted(directory.glob("*.zip"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in files[keep:]:
            old.unlink(missing_ok=True)
    except OSError as err:            # a file removed by another process meanwhile
        log.warning("could not prune cache directory %s: %s", directory, err)


_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock(path: Path) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(path, threading.Lock())


def load_or_compute(name: str, key: str, compute: Callable[[], Record], *,
                    directory: Path | None = None, keep: int = KEEP,
                    shipped: Path | None = None) -> Record:
    """The stored record for (name, key), else the one shipped with the code (`shipped`: a
    read-only directory of records, used only under the same full key), else compute(), store
    it and return it.

    One computation per key in this process: a second caller waits for the first and then
    reads its file (or, if it could not be written, computes again)."""
    directory = directory or cache_dir()
    path = path_for(name, key, directory)
    with _lock(path):
        record = read(path, key)
        if record is not None:
            try:
                os.utime(path)        # recently used: kept longest by prune()
            except OSError:
                pass
            return record
        if shipped is not None:
            record = read(path_for(name, key, shipped), key)
            if record is not None:
                return record
        record = compute()
        write(path, key, record)
        prune(directory, keep)
        return record
