"""Every frame of the "Does the model use it?" page for one (model, corpus), computed once and
kept on disk (attention.files.diskcache), keyed by the model, the corpus's digest, the
settings and the source of the code that computes them; the bundled corpus's results on the
bundled model ship with the code (attention/data/importance/), read under the same full key.

    results(source, corpus, texts, progress=None) -> diskcache.Record
        frames: tokens, agreement_words, agreement_all, faithfulness, heads, sharpness,
                pruning, sweep;  values: model, corpus, texts, digest, settings

    python -m attention.importance.shipped          # remake the shipped file (also
    python scripts/ship_importance.py                 # scripts/ship_importance.py)

The page's corpus is the first PAGE_TEXTS texts of the chosen source (the count is stated on
the page): the whole bundled:en (390 sentences) takes about half an hour on one CPU thread.
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from attention import config
from attention import models as M
from attention.corpus import digest
from attention.files import diskcache
from attention.importance import batch, curves, heads as heads_mod, targets, tokens as tokens_mod
from attention.measures import flow, heads as head_measures, rank, rollout

# the package re-exports the functions agreement and faithfulness under their modules' names
agreement_mod = importlib.import_module("attention.importance.agreement")
faith_mod = importlib.import_module("attention.importance.faithfulness")

SHIPPED = config.DATA / "importance"
SHIPPED_CORPUS = "bundled:en"
PAGE_TEXTS = 100                 # texts of a corpus the page measures (the first ones)
HEAD_TEXTS = 40                  # of those, the texts head importance is averaged over
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
            "head_texts": HEAD_TEXTS,
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
    """Every frame of the page (module docstring), computed here; progress(fraction, stage)."""
    texts = list(texts)
    say = progress or (lambda fraction, stage: None)
    frames = token_part(source, texts, lambda f, stage: say(0.65 * f, stage))
    more, values = head_part(source, texts, lambda f, stage: say(0.65 + 0.35 * f, stage))
    say(1.0, "done")
    return diskcache.Record(frames={**frames, **more}, values=values)


def token_part(source: str, texts, say: Progress) -> dict[str, pd.DataFrame]:
    """tokens, agreement_words, agreement_all, faithfulness of every text."""
    model = M.load_model(source, trusted=True)
    for i, text in enumerate(texts):
        n = len(batch.ids_of(model, text))
        if n > tokens_mod.MAX_PIECES:
            raise ValueError(f"text {i + 1} has {n} pieces (at most {tokens_mod.MAX_PIECES})")
    frames = []
    parts = _chunks(model, texts)
    for step, part in enumerate(parts):
        say(0.7 * step / len(parts), "tokens")
        frame = tokens_mod.token_importance(model, [texts[i] for i in part])
        frame["text"] = frame["text"].map(dict(enumerate(part)))
        frames.append(frame)
    tokens = pd.concat(frames, ignore_index=True)
    say(0.7, "agreement")
    words = agreement_mod.agreement(tokens, words_only=True, n_boot=N_BOOT, seed=SEED)
    everything = agreement_mod.agreement(tokens, words_only=False, n_boot=N_BOOT, seed=SEED)
    faith = faith_mod.faithfulness(model, texts, FRACTIONS, table=tokens, n_boot=N_BOOT,
                                   seed=SEED,
                                   progress=lambda f: say(0.75 + 0.25 * f, "faithfulness"))
    return {"tokens": tokens, "agreement_words": words, "agreement_all": everything,
            "faithfulness": faith}


def head_part(source: str, texts, say: Progress) -> tuple[dict[str, pd.DataFrame], dict]:
    """heads (over the first HEAD_TEXTS texts), sharpness, pruning, sweep; and the values."""
    model = M.load_model(source, trusted=True)
    head_texts = list(texts)[:HEAD_TEXTS]
    say(0.0, "heads")
    head_frames = []
    for part in _chunks(model, head_texts):
        h = heads_mod.head_importance(model, [head_texts[i] for i in part])
        head_frames.append(h.assign(_w=len(part)))
    heads = _weighted_mean(head_frames)
    sharp = pd.concat([curves.sharpness_agreement(heads, imp, s, n_boot=N_BOOT, seed=SEED)
                       for imp in ("ablation", "mean_ablation") if imp in heads
                       for s in ("max_weight", "entropy")], ignore_index=True)
    say(0.4, "pruning")
    pruning = curves.pruning_with_band(model, heads, texts, orders=ORDERS, n_boot=N_BOOT,
                                       seed=SEED,
                                       progress=lambda f: say(0.4 + 0.45 * f, "pruning"))
    sweeps = []
    for layer in range(model.layers):
        say(0.85 + 0.15 * layer / model.layers, "sweep")
        sweeps.append(curves.paired_sweep(model, texts, layer, n_boot=N_BOOT, seed=SEED))
    values = {"model": model.name, "texts": len(texts), "head_texts": len(head_texts),
              "layers": model.layers, "head": model.head, "digest": digest(list(texts))}
    return ({"heads": heads, "sharpness": sharp, "pruning": pruning,
             "sweep": pd.concat(sweeps, ignore_index=True)}, values)


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


def _part(which: str, source: str, texts: list[str]):
    """One half of compute in a process of its own (ship runs both at once)."""
    import torch

    torch.set_num_threads(1)

    def say(fraction: float, stage: str) -> None:
        print(f"{which}: {100 * fraction:.0f}% {stage}", file=sys.stderr, flush=True)
    return token_part(source, texts, say) if which == "tokens" else head_part(source, texts, say)


def ship(progress: Progress | None = None) -> Path:
    """Compute the default view afresh (never from a file), its two halves in two processes,
    and write it into SHIPPED, replacing older files."""
    from concurrent.futures import ProcessPoolExecutor

    texts = shipped_texts()
    path = shipped_path()
    with ProcessPoolExecutor(2) as pool:
        tokens = pool.submit(_part, "tokens", M.BUNDLED, texts)
        heads = pool.submit(_part, "heads", M.BUNDLED, texts)
        frames, (more, values) = tokens.result(), heads.result()
    record = diskcache.Record(frames={**frames, **more}, values=values)
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
