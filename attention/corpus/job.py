"""The corpus job: a corpus through a model into Parquet shards and a manifest, resumable.

    do_job(model, corpus, out, engine="local", address=None, settings=Settings()) -> Path

Layout of `out`:
    manifest.json            model, corpus digest, settings, code version, shards done
    <table>/part-NNNNN.parquet   one file per table per shard (compute.TABLES), shard NNNNN
                             holding texts NNNNN * batch_size ... (+ batch_size)
    view/                    what the Corpus page reads (attention.corpus.store)

A shard's files are written to a temporary name and renamed; the manifest (also renamed into
place) lists a shard only once all its files are there. A run killed at any moment and started
again with the same arguments recomputes exactly the shards not listed (a half-written shard's
files are overwritten by the same rows): nothing is lost or duplicated, and as the computation
of a text depends only on the text and its id, the result equals an uninterrupted run's.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable


from attention.corpus.compute import WHAT, Settings
from attention.corpus.shards import (Refused, identity, load_model_for_job, read_manifest,
                                      shard_count, shard_done, write_manifest)
from attention.errors import UserError
from attention.sweeps.settings import SWEEPS

def prepare(model_source: str, corpus_source: str, out: Path, settings: Settings):
    """(texts, manifest) for a run: refuses (Refused) a bad corpus, a bad setting or an
    output folder holding another run."""
    from attention.text.corpora import load

    if settings.batch_size < 1 or settings.batch_size > 4096:
        raise Refused(f"--batch-size must be between 1 and 4096, not {settings.batch_size}.")
    if settings.sample < 1 or settings.sample > 512:
        raise Refused(f"--sample must be between 1 and 512, not {settings.sample}.")
    bad = [w for w in settings.what if w not in WHAT]
    if bad or not settings.what:
        raise Refused(f"--what takes a comma-separated list of stats, importance, qk and nll, "
                      f"not {','.join(settings.what)!r}.")
    if "nll" in settings.what and (not settings.sweeps or
                                   any(s not in SWEEPS for s in settings.sweeps)):
        raise Refused(f"--sweeps takes a comma-separated list of {', '.join(SWEEPS)}, "
                      f"not {','.join(settings.sweeps)!r}.")
    if settings.limit < 0:
        raise Refused(f"--limit must be 0 (every text) or more, not {settings.limit}.")
    try:
        texts = load(corpus_source)
    except UserError as err:
        raise Refused(str(err)) from err
    if not texts:
        raise Refused(f"The corpus {corpus_source!r} holds no texts.")
    if settings.limit:
        texts = texts[:settings.limit]
    out = Path(out)
    ident = identity(model_source, corpus_source, texts, settings)
    old = read_manifest(out)
    if old is not None:
        same = {k: old.get(k) for k in ident} == ident
        if not same:
            raise Refused(f"The folder {str(out)!r} holds another run (model {old.get('model')!r}, "
                          f"corpus {old.get('corpus')!r}, or other settings or code): choose an "
                          f"empty folder for this one.")
        manifest = old
        for stale in out.glob("**/.*.tmp"):   # half-written files of a run that was killed
            stale.unlink(missing_ok=True)
    else:
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise Refused(f"The folder {str(out)!r} is not empty and holds no run of this job: "
                          f"choose an empty or new folder.")
        manifest = {**ident, "shards": shard_count(len(texts), settings.batch_size),
                    "shards_done": [], "tables": [], "complete": False}
    return texts, manifest


class ProgressBar:
    """tqdm over texts (texts/s, ETA) when asked; a callback otherwise (the page's bar)."""

    def __init__(self, total: int, done: int, show: bool, callback: Callable | None):
        self.callback, self.total, self.done = callback, total, done
        self.bar = None
        if show:
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(total=total, initial=done, unit="text", dynamic_ncols=True,
                                smoothing=0.1)

    def update(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        if self.callback is not None:
            self.callback(self.done, self.total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def do_job(model_source: str, corpus_source: str, out, *, engine: str = "local",
           address: str | None = None, settings: Settings = Settings(), progress: bool = False,
           on_progress: Callable[[int, int], None] | None = None, workers: int = 2,
           model=None) -> Path:
    """Do (or resume) the job; the output folder. Refused for anything a user got wrong.
    model: an already loaded model (the page's; on Ray the prepass's), else loaded here."""
    from attention.corpus import engines

    out = Path(out)
    texts, manifest = prepare(model_source, corpus_source, out, settings)
    if engine not in ("local", "ray"):
        raise Refused(f"--engine must be local or ray, not {engine!r}.")
    if engine == "ray":
        engines.check_ray()
    if model is None and engine == "local":
        model = load_model_for_job(model_source)
    elif engine == "ray" and model is None:
        load_model_for_job(model_source)        # refuse here, before a cluster starts
    out.mkdir(parents=True, exist_ok=True)
    bs = settings.batch_size
    done = {i for i in manifest["shards_done"] if shard_done(out, i, manifest["tables"] or ["texts"])}
    manifest["shards_done"] = sorted(done)
    write_manifest(out, manifest)
    pending = [i for i in range(manifest["shards"]) if i not in done]
    if pending and set(settings.what) & {"nll", "importance"}:
        _prepass(model or load_model_for_job(model_source), corpus_source, texts, out, settings)
    texts_done = sum(len(texts[i * bs:(i + 1) * bs]) for i in done)
    bar = ProgressBar(len(texts), texts_done, progress, on_progress)
    started = time.perf_counter()

    def finished(result: dict) -> None:
        done.add(result["shard"])
        manifest["shards_done"] = sorted(done)
        manifest["tables"] = sorted(set(manifest["tables"]) | set(result["tables"]))
        write_manifest(out, manifest)
        bar.update(result["texts"])

    try:
        if engine == "local":
            engines.process_local(model, out, texts, pending, settings, finished)
        else:
            engines.process_on_ray(model_source, out, texts, pending, settings, finished,
                            address=address, workers=workers)
    finally:
        bar.close()
    manifest["complete"] = len(done) == manifest["shards"]
    manifest["seconds_last_run"] = round(time.perf_counter() - started, 3)
    write_manifest(out, manifest)
    if manifest["complete"]:
        from attention.corpus.store import derive

        derive(out)
    return out


def _prepass(model, corpus_source: str, texts: list[str], out: Path, settings: Settings) -> None:
    """The corpus-level inputs of each product that has them (shards.prepass_files), once per
    run, before any shard (kept in the folder, written atomically): a shard never computes
    them from its own texts."""
    import json

    from attention.corpus.shards import _atomic_write, prepass_files

    files = prepass_files(settings)
    if "nll" in files and (model.head != "causal_lm" or not model.is_causal):
        raise Refused(f"--what nll measures a causal language model's next-piece loss; "
                      f"{model.name} is not one (it is {model.architecture}).")
    for product, name in files.items():
        if (out / name).is_file():
            continue
        if product == "nll":
            from attention.sweeps.table import prepass
            from attention.text.corpora import load

            pre = prepass(model, texts, load(corpus_source), settings.sweeps)
        else:
            from attention.importance.product import prepass

            pre = prepass(model, texts)
        _atomic_write(out / name, json.dumps(pre).encode())
