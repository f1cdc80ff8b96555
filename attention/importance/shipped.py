"""Every frame of the "Does the model use it?" page for one (model, corpus), computed once and
kept on disk (attention.files.diskcache), keyed by the model, the corpus's digest, the
settings and the source of the code that computes them; the bundled corpus's results on the
bundled model ship with the code (attention/data/importance/), read under the same full key.

    results(source, corpus, texts, progress=None) -> diskcache.Record
        frames: tokens, agreement_words, agreement_all, faithfulness, heads, sharpness,
                pruning, sweep;  values: model, corpus, texts, digest, settings

    python -m attention.importance.shipped          # remake the shipped file (also
    python scripts/ship_importance.py                 # scripts/ship_importance.py)

The page's corpus is the first PAGE_TEXTS texts of the chosen source, head importance the
first HEAD_TEXTS of those (both stated on the page): on one busy CPU, 100 texts took longer
than a visitor (or this repository's shipping run) can wait. `ship` runs the parts of plan()
in parallel processes (about 10 minutes on 2 shared CPUs); `compute` runs the same parts one
after another, so both give the same frames.
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from attention import config
from attention import models as M
from attention.corpus import digest
from attention.errors import UserError
from attention.files import diskcache
from attention.importance import batch, curves, heads as heads_mod, targets, tokens as tokens_mod
from attention.measures import flow, heads as head_measures, rank, rollout

# the package re-exports the functions agreement and faithfulness under their modules' names
agreement_mod = importlib.import_module("attention.importance.agreement")
faith_mod = importlib.import_module("attention.importance.faithfulness")

SHIPPED = config.DATA / "importance"
SHIPPED_CORPUS = "bundled:en"
PAGE_TEXTS = 40                  # texts of a corpus the page measures (the first ones)
HEAD_TEXTS = 20                  # of those, the texts head importance is averaged over
TOKEN_CHUNK, HEAD_CHUNK, ORDER_CHUNK, LAYER_CHUNK = 10, 5, 5, 3     # texts, orders, layers a part
PRUNING_STEPS = 6                # points of the pruning curve past 0
N_BOOT = 1000
SEED = 0
FRACTIONS = (0.1, 0.2, 0.3, 0.5)
ORDERS = 20
SOURCES = tuple(Path(m.__file__) for m in (
    batch, targets, tokens_mod, heads_mod, agreement_mod, faith_mod, curves, rank, rollout,
    flow, head_measures)) + (Path(__file__),)
Progress = Callable[[float, str], None]


def settings(source: str, texts) -> dict:
    return {"model": source, "digest": digest(list(texts)), "texts": len(texts),
            "head_texts": HEAD_TEXTS, "chunks": [TOKEN_CHUNK, HEAD_CHUNK, ORDER_CHUNK],
            "steps": PRUNING_STEPS,
            "n_boot": N_BOOT, "seed": SEED, "fractions": list(FRACTIONS), "orders": ORDERS}


def key(source: str, texts) -> str:
    return diskcache.fingerprint(SOURCES, settings(source, texts))


def _chunks(model, texts) -> list[list[int]]:
    """Runs of text indices whose pieces stay under the page's per-run cap."""
    out, current, total = [], [], 0
    for i, text in enumerate(texts):
        n = len(batch.ids_of(model, text))
        if current and total + n > tokens_mod.MAX_TOTAL_PIECES:
            out.append(current)
            current, total = [], 0
        current.append(i)
        total += n
    return out + ([current] if current else [])


def compute(source: str, texts, progress: Progress | None = None) -> diskcache.Record:
    """Every frame of the page (module docstring), computed here in this process, part after
    part (ship runs the same parts at once); progress(fraction, stage)."""
    texts = list(texts)
    say = progress or (lambda fraction, stage: None)
    parts = plan(source, texts)
    done = {}
    for phase in (1, 2):
        jobs = [j for j in parts if j[0] == phase]
        for i, job in enumerate(jobs):
            say((0.8 * i / len(jobs)) if phase == 1 else 0.8 + 0.2 * i / len(jobs), job[1])
            done[job[1:3]] = run_job(job, source, texts, done if phase == 2 else None)
    say(1.0, "done")
    return assemble(source, texts, done)


def plan(source: str, texts) -> list[tuple]:
    """The parts of the computation: (phase, stage, index, argument). Phase 1 needs nothing;
    phase 2 the token table (faithfulness) and the heads (the importance order)."""
    model = M.load_model(source, trusted=True)
    for i, text in enumerate(texts):
        n = len(batch.ids_of(model, text))
        if n > tokens_mod.MAX_PIECES:
            raise UserError("importance.too_long", text=i + 1, pieces=n,
                            limit=tokens_mod.MAX_PIECES)
    n = len(texts)
    token_parts = [list(range(s, min(n, s + TOKEN_CHUNK))) for s in range(0, n, TOKEN_CHUNK)]
    heads_n = min(n, HEAD_TEXTS)
    head_parts = [list(range(s, min(heads_n, s + HEAD_CHUNK)))
                  for s in range(0, heads_n, HEAD_CHUNK)]
    order_parts = [list(range(s, min(ORDERS, s + ORDER_CHUNK)))
                   for s in range(0, ORDERS, ORDER_CHUNK)]
    layer_parts = [list(range(s, min(model.layers, s + LAYER_CHUNK)))
                   for s in range(0, model.layers, LAYER_CHUNK)]
    return ([(1, "tokens", i, p) for i, p in enumerate(token_parts)]
            + [(1, "heads", i, p) for i, p in enumerate(head_parts)]
            + [(1, "pruning", i, p) for i, p in enumerate(order_parts)]
            + [(1, "sweep", i, p) for i, p in enumerate(layer_parts)]
            + [(2, "faithfulness", i, p) for i, p in enumerate(token_parts)]
            + [(2, "order", 0, None)])


def run_job(job: tuple, source: str, texts, done: dict | None = None):
    """One part of plan (in any process): its frame or array."""
    import torch

    torch.set_num_threads(1)
    _, stage, _, arg = job
    model = M.load_model(source, trusted=True)
    if stage == "tokens":
        frame = tokens_mod.token_importance(model, [texts[i] for i in arg])
        frame["text"] = frame["text"].map(dict(enumerate(arg)))
        return frame
    if stage == "heads":
        return heads_mod.head_importance(model, [texts[i] for i in arg]).assign(_w=len(arg))
    if stage == "pruning":
        return curves.random_curves(model, texts, arg, orders=ORDERS, seed=SEED,
                                    steps=PRUNING_STEPS)
    if stage == "sweep":
        return pd.concat([curves.paired_sweep(model, texts, layer, n_boot=N_BOOT, seed=SEED)
                          for layer in arg], ignore_index=True)
    tokens, heads = _tokens(done), _heads(done)
    if stage == "faithfulness":
        return faith_mod.per_text(model, texts, FRACTIONS, tokens, seed=SEED, which=arg)
    randoms = np.concatenate([v for k, v in sorted(done.items()) if k[0] == "pruning"])
    return curves.pruning_with_band(model, heads, texts, orders=ORDERS, n_boot=N_BOOT,
                                    seed=SEED, steps=PRUNING_STEPS, randoms=randoms)


def _tokens(done: dict) -> pd.DataFrame:
    return pd.concat([v for k, v in sorted(done.items()) if k[0] == "tokens"],
                     ignore_index=True)


def _heads(done: dict) -> pd.DataFrame:
    return _weighted_mean([v for k, v in sorted(done.items()) if k[0] == "heads"])


def assemble(source: str, texts, done: dict) -> diskcache.Record:
    """The record from the parts' results."""
    model = M.load_model(source, trusted=True)
    tokens, heads = _tokens(done), _heads(done)
    words = agreement_mod.agreement(tokens, words_only=True, n_boot=N_BOOT, seed=SEED)
    everything = agreement_mod.agreement(tokens, words_only=False, n_boot=N_BOOT, seed=SEED)
    parts = [v for k, v in sorted(done.items()) if k[0] == "faithfulness"]
    value = parts[0][0].copy()
    for other, _ in parts[1:]:
        value = np.where(np.isnan(value), other, value)
    faith = faith_mod.summarise(value, parts[0][1], FRACTIONS, n_boot=N_BOOT, seed=SEED)
    sharp = pd.concat([curves.sharpness_agreement(heads, imp, s, n_boot=N_BOOT, seed=SEED)
                       for imp in ("ablation", "mean_ablation") if imp in heads
                       for s in ("max_weight", "entropy")], ignore_index=True)
    sweep = pd.concat([v for k, v in sorted(done.items()) if k[0] == "sweep"],
                      ignore_index=True)
    values = {"model": model.name, "texts": len(texts),
              "head_texts": min(len(texts), HEAD_TEXTS), "layers": model.layers,
              "head": model.head, "digest": digest(list(texts))}
    return diskcache.Record(frames={
        "tokens": tokens, "agreement_words": words, "agreement_all": everything,
        "faithfulness": faith, "heads": heads, "sharpness": sharp,
        "pruning": done[("order", 0)], "sweep": sweep}, values=values)


def _weighted_mean(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """head_importance of several runs of texts as one: each column's mean weighted by the
    texts of its run (every column is a mean over texts), gradient renormalised per layer."""
    both = pd.concat(frames, ignore_index=True)
    cols = [c for c in both.columns if c not in ("layer", "head", "_w")]
    weighted = both[cols].mul(both["_w"], axis=0).assign(layer=both["layer"], head=both["head"],
                                                         _w=both["_w"])
    total = weighted.groupby(["layer", "head"], sort=True).sum()
    out = total[cols].div(total["_w"], axis=0).reset_index()
    if "gradient_raw" in out:
        norm = out.groupby("layer")["gradient_raw"].transform(lambda g: (g ** 2).sum() ** 0.5)
        out["gradient"] = out["gradient_raw"] / norm.where(norm > 0, 1.0)
    return out


def results(source: str, texts, progress: Progress | None = None) -> diskcache.Record:
    """The page's frames for (source, texts): from the cache directory, else shipped, else
    computed (and stored)."""
    texts = list(texts)
    return diskcache.load_or_compute("importance", key(source, texts),
                                     lambda: compute(source, texts, progress), shipped=SHIPPED)


def shipped_texts() -> list[str]:
    from attention.corpus import load

    return load(SHIPPED_CORPUS)[:PAGE_TEXTS]


def shipped_path() -> Path:
    return diskcache.path_for("importance", key(M.BUNDLED, shipped_texts()), SHIPPED)


def _job(job, source, texts, done):
    got = run_job(job, source, texts, done)
    print(f"done: {job[1]} {job[2]}", file=sys.stderr, flush=True)
    return got


def ship(workers: int = 14) -> Path:
    """Compute the default view afresh (never from a file), its parts in `workers` processes,
    and write it into SHIPPED, replacing older files."""
    from concurrent.futures import ProcessPoolExecutor

    texts = shipped_texts()
    parts = plan(M.BUNDLED, texts)
    done = {}
    with ProcessPoolExecutor(workers) as pool:
        for phase in (1, 2):
            jobs = [j for j in parts if j[0] == phase]
            futures = {j[1:3]: pool.submit(_job, j, M.BUNDLED, texts,
                                           done if phase == 2 else None) for j in jobs}
            done.update({k: f.result() for k, f in futures.items()})
    record = assemble(M.BUNDLED, texts, done)
    path = shipped_path()
    for old in SHIPPED.glob("*.zip"):
        if old != path:
            old.unlink()
    diskcache.write(path, key(M.BUNDLED, texts), record)
    return path


def main() -> int:
    import torch

    torch.set_num_threads(1)
    path = ship()
    print(f"shipped {path} ({path.stat().st_size / 1024:.0f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
