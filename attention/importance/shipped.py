"""Computing every frame of the "Does the model use it?" page for one (model, corpus); how they
are keyed, stored and read (and the constants below) is attention.importance.store.

    compute(source, texts, progress=None) -> diskcache.Record   one part after another
    ship(corpus, workers=2) -> Path  a bundled corpus's view, its parts in parallel processes,
                                     written into attention/data/importance/
    python -m attention.importance.shipped [CORPUS]  # remake the shipped files (also
    python scripts/ship_importance.py                 # scripts/ship_importance.py)

`ship` runs the parts of plan() in parallel processes (whole bundled corpora: about an hour on
2 CPUs; a killed run resumes from its finished parts);
`compute` runs the same parts one after another, so both give the same frames, and any part
sizes give the frames of one whole run (tests/test_importance_parts.py).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from attention import models as M
from attention.text.corpora import digest
from attention.errors import UserError
from attention import diskcache
from attention.importance import store
from attention.importance import (batch, concordance, curves, erasure, heads as heads_mod,
                                  targets, tokens as tokens_mod)


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


def compute(source: str, texts, progress: diskcache.Progress | None = None,
            timings: dict[str, float] | None = None) -> diskcache.Record:
    """Every frame of the page (module docstring), computed here in this process, part after
    part (ship runs the same parts at once); progress(fraction, stage). The parts that do not
    depend on the corpus (FIXED, on a sentence model) are read from their own record when an
    earlier corpus computed them. timings: filled with the seconds each stage took."""
    import time

    texts = list(texts)
    say = progress or (lambda fraction, stage: None)
    parts = plan(source, texts)
    done = {}
    free = corpus_free(M.load_model(source, trusted=True))
    fixed = store.read_fixed(source) if free else None
    if fixed is not None:
        done.update(unpack_fixed(fixed))
        parts = [j for j in parts if j[1] not in FIXED]
    begin = {1: 0.0, 2: 0.7, 3: 0.95}
    for phase in (1, 2, 3):
        now = [j for j in parts if j[0] == phase]
        for i, part in enumerate(now):
            say(begin[phase] + (begin.get(phase + 1, 1.0) - begin[phase]) * i / len(now), part[1])
            start = time.perf_counter()
            done[part[1:3]] = compute_part(part, source, texts, done if phase > 1 else None)
            if timings is not None:
                timings[part[1]] = timings.get(part[1], 0.0) + time.perf_counter() - start
        if phase == 1 and free and fixed is None:
            store.write_fixed(source, pack_fixed(done))
    say(1.0, "done")
    return assemble(source, texts, done)


# On a sentence model the pruning band's random orders and the temperature sweep measure the
# paraphrase retrieval on the project's sentence pairs (heads.Metric): nothing of the corpus.
FIXED = ("pruning", "sweep")


def corpus_free(model) -> bool:
    """Whether the FIXED parts are the same for every corpus (a sentence model's metric)."""
    return model.head == "none"


def pack_fixed(done: dict) -> diskcache.Record:
    randoms = np.concatenate([v for k, v in sorted(done.items()) if k[0] == "pruning"])
    sweep = pd.concat([v for k, v in sorted(done.items()) if k[0] == "sweep"],
                      ignore_index=True)
    return diskcache.Record(frames={
        "randoms": pd.DataFrame(randoms, columns=[f"p{i}" for i in range(randoms.shape[1])]),
        "sweep": sweep})


def unpack_fixed(record: diskcache.Record) -> dict:
    return {("pruning", 0): record.frames["randoms"].to_numpy(dtype=float),
            ("sweep", 0): record.frames["sweep"]}


def work(source: str, texts) -> dict[str, float]:
    """The units of work of each stage for these texts: pieces read times the passes that
    read them, so each stage's seconds scale with its units (attention.ui.estimate). FIXED
    stages count 0 when their record is stored (or shipped)."""
    model = M.load_model(source, trusted=True)
    n = [len(batch.ids_of(model, text)) for text in texts]
    metric = heads_mod.Metric(model, texts)
    read = sum(len(r) for r in metric.rows)                       # pieces of one metric pass
    points = len(curves._points(model.layers * model.heads, store.PRUNING_STEPS))
    units = {"tokens": float(sum(n)), "heads": float(sum(n[:store.HEAD_TEXTS])),
             "means": float(sum(n[:store.HEAD_TEXTS])),
             "faithfulness": float(sum(n)), "order": float(points * read),
             "pruning": float(store.ORDERS * points * read),
             "sweep": float(model.layers * (len(heads_mod.TAUS) + 1) * read)}
    if corpus_free(model) and store.has_fixed(source):
        units.update({stage: 0.0 for stage in FIXED})
    return units


# Seconds of a stage per unit, in seconds of one plain forward pass per piece: measured on
# all-MiniLM-L6-v2 over 5 bundled:zh texts (81 pieces; tokens 56 s, heads 35 s, pruning
# 209 s, sweep 69 s, order 16 s, faithfulness 6 s with a forward pass at 7.5 ms a piece on
# a busy machine). A probe times the forward pass on the server and these turn it into a
# first estimate; every later run is estimated from the rates of the server's own runs.
FORWARDS = {"tokens": 90.0, "heads": 55.0, "means": 1.0, "faithfulness": 10.0, "order": 0.5,
            "pruning": 0.4, "sweep": 0.4}


def probe(source: str, texts) -> float:
    """Seconds per piece of one batched forward pass over the first texts, timed here."""
    return batch.forward_rate(M.load_model(source, trusted=True), texts)


def plan(source: str, texts) -> list[tuple]:
    """The parts of the computation: (phase, stage, index, argument). Phase 1 needs nothing;
    phase 2 the token table (faithfulness) and the corpus's mean head outputs (every part of
    the heads ablates with the same means: parts equal the whole); phase 3 the heads (the
    importance order of the pruning curve)."""
    model = M.load_model(source, trusted=True)
    for i, text in enumerate(texts):
        n = len(batch.ids_of(model, text))
        if n > tokens_mod.MAX_PIECES:
            raise UserError("importance.too_long", text=i + 1, pieces=n,
                            limit=tokens_mod.MAX_PIECES)
    n = len(texts)
    token_parts = [list(range(s, min(n, s + store.TOKEN_CHUNK)))
                   for s in range(0, n, store.TOKEN_CHUNK)]
    heads_n = min(n, store.HEAD_TEXTS)
    head_parts = [list(range(s, min(heads_n, s + store.HEAD_CHUNK)))
                  for s in range(0, heads_n, store.HEAD_CHUNK)]
    order_parts = [list(range(s, min(store.ORDERS, s + store.ORDER_CHUNK)))
                   for s in range(0, store.ORDERS, store.ORDER_CHUNK)]
    layer_parts = [list(range(s, min(model.layers, s + store.LAYER_CHUNK)))
                   for s in range(0, model.layers, store.LAYER_CHUNK)]
    return ([(1, "tokens", i, p) for i, p in enumerate(token_parts)]
            + [(1, "means", 0, list(range(heads_n)))]
            + [(1, "pruning", i, p) for i, p in enumerate(order_parts)]
            + [(1, "sweep", i, p) for i, p in enumerate(layer_parts)]
            + [(2, "heads", i, p) for i, p in enumerate(head_parts)]
            + [(2, "faithfulness", i, p) for i, p in enumerate(token_parts)]
            + [(3, "order", 0, None)])


def compute_part(part: tuple, source: str, texts, done: dict | None = None):
    """One part of plan (in any process): its frame or array."""
    import torch

    torch.set_num_threads(1)
    _, stage, _, arg = part
    model = M.load_model(source, trusted=True)
    if stage == "tokens":
        frame = tokens_mod.token_importance(model, [texts[i] for i in arg])
        frame["text"] = frame["text"].map(dict(enumerate(arg)))
        return frame
    if stage == "means":
        return heads_mod.mean_outputs(model, [texts[i] for i in arg])
    if stage == "heads":
        return heads_mod.head_importance(model, [texts[i] for i in arg],
                                         fill=done[("means", 0)]).assign(_w=len(arg))
    if stage == "pruning":
        return curves.random_curves(model, texts, arg, orders=store.ORDERS, seed=store.SEED,
                                    steps=store.PRUNING_STEPS)
    if stage == "sweep":
        return pd.concat([curves.paired_sweep(model, texts, layer, n_boot=store.N_BOOT,
                                              seed=store.SEED)
                          for layer in arg], ignore_index=True)
    if stage == "faithfulness":
        return erasure.per_text(model, texts, store.FRACTIONS, _tokens(done), seed=store.SEED,
                                  which=arg)
    heads = _heads(done)
    randoms = np.concatenate([v for k, v in sorted(done.items()) if k[0] == "pruning"])
    return curves.pruning_with_band(model, heads, texts, orders=store.ORDERS, n_boot=store.N_BOOT,
                                    seed=store.SEED, steps=store.PRUNING_STEPS, randoms=randoms)


def _tokens(done: dict) -> pd.DataFrame:
    return pd.concat([v for k, v in sorted(done.items()) if k[0] == "tokens"],
                     ignore_index=True)


def _heads(done: dict) -> pd.DataFrame:
    return _weighted_mean([v for k, v in sorted(done.items()) if k[0] == "heads"])


def assemble(source: str, texts, done: dict) -> diskcache.Record:
    """The record from the parts' results."""
    model = M.load_model(source, trusted=True)
    tokens, heads = _tokens(done), _heads(done)
    boot = {"n_boot": store.N_BOOT, "seed": store.SEED}
    words = concordance.agreement(tokens, words_only=True, **boot)
    everything = concordance.agreement(tokens, words_only=False, **boot)
    parts = [v for k, v in sorted(done.items()) if k[0] == "faithfulness"]
    value = parts[0][0].copy()
    for other, _ in parts[1:]:
        value = np.where(np.isnan(value), other, value)
    faith = erasure.summarise(value, parts[0][1], store.FRACTIONS, **boot)
    sharp = pd.concat([curves.sharpness_agreement(heads, imp, s, **boot)
                       for imp in ("ablation", "mean_ablation") if imp in heads
                       for s in ("max_weight", "entropy")], ignore_index=True)
    sweep = pd.concat([v for k, v in sorted(done.items()) if k[0] == "sweep"],
                      ignore_index=True)
    values = {"model": model.name, "texts": len(texts),
              "head_texts": min(len(texts), store.HEAD_TEXTS), "layers": model.layers,
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


def _kept_part(folder: Path, part, source, texts, done):
    """compute_part, written into the work folder where it ran (a part that finished is kept
    whatever happens to the others) under a temporary name, then renamed: a kill leaves no
    half file."""
    import os
    import pickle

    got = compute_part(part, source, texts, done)
    target = folder / f"{part[1]}-{part[2]}.pickle"
    temporary = target.with_suffix(".tmp")
    temporary.write_bytes(pickle.dumps(got))
    os.replace(temporary, target)
    print(f"done: {part[1]} {part[2]}", file=sys.stderr, flush=True)
    return got


def ship(corpus: str = store.SHIPPED_CORPORA[0], workers: int = 2,
         work: Path | None = None, source: str = M.BUNDLED) -> Path:
    """Compute a bundled corpus's view afresh (never from a shipped file), its parts in
    `workers` processes, and write it into store.SHIPPED, replacing that corpus's older file
    (and the corpus-free parts' record, the same for every corpus). Each finished part is kept
    in a folder under `work` (default: the cache directory) named by the record's key, so a
    killed run resumes where it stopped when run again (whole corpora take about an hour).
    workers=1 runs the parts here, one after another; source: another model (tests)."""
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed

    texts = store.shipped_texts(corpus)
    parts = plan(source, texts)
    folder = (Path(work) if work else diskcache.cache_dir() / "importance-work") / (
        f"{corpus.replace(':', '_')}-{_parts_key(source, texts)}")
    folder.mkdir(parents=True, exist_ok=True)
    done = _kept_parts(folder)
    with ProcessPoolExecutor(workers) if workers > 1 else ThreadPoolExecutor(1) as pool:
        for phase in (1, 2, 3):
            now = [j for j in parts if j[0] == phase and j[1:3] not in done]
            before = dict(done) if phase > 1 else None     # pickled while `done` grows
            futures = {pool.submit(_kept_part, folder, j, source, texts, before): j[1:3]
                       for j in now}
            for future in as_completed(futures):
                done[futures[future]] = future.result()
    record = assemble(source, texts, done)
    path, fixed = store.shipped_path(corpus), store.fixed_path(M.BUNDLED, store.SHIPPED)
    current = {store.shipped_path(c) for c in store.SHIPPED_CORPORA} | {fixed}
    for old in store.SHIPPED.glob("*.zip"):
        if old not in current and (old.name.startswith("importance-fixed-")
                                   or _prefix_of(old, texts)):
            old.unlink()                                  # this corpus's older record
    diskcache.write(path, store.key(M.BUNDLED, texts), record)
    diskcache.write(fixed, store.fixed_key(M.BUNDLED), pack_fixed(done))
    return path


def _parts_key(source: str, texts) -> str:
    """The work folder's key: the code that computes a part and the settings, not this
    module's or the store's orchestration (editing them keeps the finished parts)."""
    orchestration = {Path(__file__).resolve(), Path(store.__file__).resolve()}
    return diskcache.fingerprint([p for p in store.SOURCES if p not in orchestration],
                                 store.settings(source, texts))


def _kept_parts(folder: Path) -> dict:
    """The parts an earlier run of the same key finished (the folder is this project's own)."""
    import pickle

    done = {}
    for path in folder.glob("*.pickle"):
        stage, index = path.stem.rsplit("-", 1)
        done[(stage, int(index))] = pickle.loads(path.read_bytes())
    return done


def _prefix_of(path: Path, texts: list[str]) -> bool:
    """Whether a stored record measured these texts or their first ones (an older, shorter
    record of the same corpus)."""
    record = diskcache.read(path, diskcache.stored_key(path) or "")
    if record is None:
        return False
    n = int(record.values.get("texts", -1))
    return 0 < n <= len(texts) and record.values.get("digest") == digest(list(texts[:n]))


def main(argv: list[str] | None = None) -> int:
    """python -m attention.importance.shipped [--workers K] [--work DIR] [CORPUS ...]: every
    bundled corpus by default; run again after a kill to resume."""
    import argparse

    import torch

    parser = argparse.ArgumentParser(prog="python -m attention.importance.shipped")
    parser.add_argument("corpora", nargs="*", default=list(store.SHIPPED_CORPORA))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--work", default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    for corpus in args.corpora:
        path = ship(corpus, workers=args.workers, work=args.work)
        print(f"shipped {corpus}: {path} ({path.stat().st_size / 1024:.0f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
