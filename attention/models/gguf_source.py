"""GGUF sources for load_model: the bundled SmolLM2-135M-Instruct and a .gguf file a user
names, each loaded from its converted folder (attention.models.convert).

A caller that may wait (the Python API, the command line) converts in its own thread, with
tqdm on a terminal. A page never converts inside a click: it passes wait=False and gets
`Pending`, whose job converts in the background and tells the page how far it has got (the
app's warm-up starts the bundled model's conversion as soon as the server is quiet).
"""
from __future__ import annotations

import sys
from pathlib import Path

from attention import config
from attention.errors import UserError
from attention.models import convert


class Pending(UserError):
    """The model's conversion is running in the background: `job` has its progress."""

    def __init__(self, job: convert.Job):
        super().__init__("model.converting", source=job.source)
        self.job = job


def bundled_gguf() -> Path:
    """The bundled causal LM's GGUF; UserError with the install command when the package is
    not installed."""
    path = convert.packaged_gguf()
    if path is None:
        raise UserError("model.lm_missing", source=config.BUNDLED_LM,
                        install=config.BUNDLED_LM_INSTALL)
    return path


def ready_folder(gguf: Path, source: str, *, wait: bool, max_params: int | None = None) -> Path:
    """The converted folder of `gguf`: found, else converted now (wait=True) or in the
    background (wait=False: raises Pending while it runs, its UserError once it failed)."""
    try:
        folder = convert.converted(gguf)
    except OSError as err:
        raise UserError("model.gguf_unreadable", source=config.shown(source)) from err
    if folder is not None:
        return folder
    if not wait:
        job = convert.start(gguf, source, max_params=max_params)
        if not job.done.is_set():
            raise Pending(job)
        if job.error is not None:
            raise job.error
        return job.folder
    job = convert.job(gguf)
    if job is not None and not job.done.is_set():      # the background one: wait for it
        job.done.wait()
        if job.error is not None:
            raise job.error
        return job.folder
    return convert.convert(gguf, source=source, max_params=max_params,
                           show=bool(getattr(sys.stderr, "isatty", lambda: False)()))


def pending(source: str) -> convert.Job | None:
    """The running background conversion for `source` (the bundled LM's name or a .gguf
    path), or None when there is none (not started, finished, or not a GGUF source)."""
    if source == config.BUNDLED_LM:
        gguf = convert.packaged_gguf()
    elif source.endswith(".gguf"):
        gguf = Path(source).expanduser()
    else:
        return None
    job = None if gguf is None else convert.job(gguf)
    return job if job is not None and not job.done.is_set() else None
