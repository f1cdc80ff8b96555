"""The "Does the model use it?" page's results on disk: every frame for one (model, corpus),
kept by attention.diskcache under a key of the model, the corpus's digest, the settings below
and the source of the code that computes them; every text of the bundled corpora on the
bundled model ships with the code (attention/data/importance/) and is read under the same
full key. The per-text rows are products of the corpus job (`python -m attention.corpus run
--what importance`, attention.importance.product); the record is assembled from them
(attention.importance.record); `python -m attention.corpus ship --importance` re-ships.

    results(source, texts, compute) -> diskcache.Record    compute: called on a miss
        frames: tokens, agreement_words, agreement_all, faithfulness, heads, sharpness,
                pruning, sweep, faithfulness_texts, heads_texts;
        values: model, texts, head_texts, layers, head, digest

Three keys, each over only the code and settings that change its numbers: code_key() the
per-text rows' (ROW_SOURCES: the corpus job's identity of an importance run), fixed_key() the
model-level parts that no corpus changes (FIXED_SOURCES), key() the page's record (SOURCES:
both and the assembling code).

Reading needs neither torch nor the model: a cold link to the page's default view imports
neither (docs/architecture.md, "Imports"); the caller imports attention.importance.live
only in the compute it passes, called on a miss. The page measures every text of a bundled
corpus (shipped) and the first PAGE_TEXTS texts of any other (computed while the visitor
waits: on one busy CPU, 100 texts took longer than a visitor can wait); head importance is
averaged over the first HEAD_TEXTS of those (both counts stated on the page).
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from attention import config
from attention.text.corpora import digest
from attention import diskcache

SHIPPED = config.DATA / "importance"
SHIPPED_CORPORA = ("bundled:en", "bundled:zh")   # the bundled corpora whose view ships
PAGE_TEXTS = 40                  # texts of a corpus computed live (the first ones)
HEAD_TEXTS = 100                 # of those, the texts head importance is averaged over
# texts a shard of the live compute (attention.importance.live): any size gives the same
# frames (tests/test_importance_parts.py), so it is not in the key
TOKEN_CHUNK = 10
PRUNING_STEPS = 6                # points of the pruning curve past 0
N_BOOT = 1000
SEED = 0
FRACTIONS = (0.1, 0.2, 0.3, 0.5)
ORDERS = 20

# The code the numbers come from (named by path: importing them would load torch just to
# read a file; attention.diskcache.fingerprint reads them without comments or docstrings).
# ROW_SOURCES: the per-text rows (attention.importance.product); FIXED_SOURCES: the parts no
# corpus changes on a sentence model (the pruning band's random orders and the temperature
# sweep on the project's sentence pairs); SOURCES: the page's record, both and the code that
# assembles it.
_PACKAGE = Path(__file__).resolve().parent.parent                      # attention/
_MEASURES = ("measures/rank.py", "measures/rollout.py", "measures/flow.py", "measures/heads.py",
             "measures/columns.py", "measures/rows.py", "measures/pooling.py")
ROW_SOURCES = tuple(_PACKAGE / name for name in (
    "importance/batch.py", "importance/targets.py", "importance/tokens.py",
    "importance/heads.py", "importance/concordance.py", "importance/erasure.py",
    "importance/product.py") + _MEASURES)
FIXED_SOURCES = tuple(_PACKAGE / name for name in (
    "importance/batch.py", "importance/targets.py", "importance/tokens.py",
    "importance/heads.py", "importance/curves.py") + _MEASURES
    + ("measures/retrieval.py", "data/paraphrase_pairs.tsv"))
SOURCES = tuple(dict.fromkeys(ROW_SOURCES + FIXED_SOURCES
                              + (_PACKAGE / "importance/record.py",)))


def row_settings() -> dict:
    """The settings that change the per-text rows."""
    return {"head_texts": HEAD_TEXTS, "seed": SEED, "fractions": list(FRACTIONS)}


def code_key() -> str:
    """The per-text rows' code and settings: the corpus job's identity of an importance run
    (an edit elsewhere keeps a job's finished shards)."""
    return diskcache.fingerprint(ROW_SOURCES, row_settings())[:16]


def settings(source: str, texts) -> dict:
    return {"model": source, "digest": digest(list(texts)), "texts": len(texts),
            "head_texts": HEAD_TEXTS, "steps": PRUNING_STEPS,
            "n_boot": N_BOOT, "seed": SEED, "fractions": list(FRACTIONS), "orders": ORDERS}


def key(source: str, texts) -> str:
    return diskcache.fingerprint(SOURCES, settings(source, texts))


def results(source: str, texts, compute: Callable[[], diskcache.Record]) -> diskcache.Record:
    """The page's frames for (source, texts): from the cache directory, else shipped, else
    compute() (attention.importance.live.compute on them, which the caller imports only
    then) and stored."""
    return diskcache.load_or_compute("importance", key(source, list(texts)), compute,
                                     shipped=SHIPPED)


def fixed_key(source: str) -> str:
    """The key of the parts that do not depend on the corpus (record.FIXED) for a model."""
    return diskcache.fingerprint(FIXED_SOURCES, {"model": source, "part": "fixed",
                                                 "steps": PRUNING_STEPS, "n_boot": N_BOOT,
                                                 "seed": SEED, "orders": ORDERS})


def fixed_path(source: str, directory: Path | None = None) -> Path:
    return diskcache.path_for("importance-fixed", fixed_key(source), directory)


def read_fixed(source: str) -> diskcache.Record | None:
    """The model's corpus-free parts from the cache directory, else shipped, else None."""
    k = fixed_key(source)
    return diskcache.read(fixed_path(source), k) or diskcache.read(fixed_path(source, SHIPPED), k)


def has_fixed(source: str) -> bool:
    return any(p.is_file() for p in (fixed_path(source), fixed_path(source, SHIPPED)))


def write_fixed(source: str, record: diskcache.Record) -> None:
    diskcache.write(fixed_path(source), fixed_key(source), record)


def shipped_texts(corpus: str = SHIPPED_CORPORA[0]) -> list[str]:
    """The texts of a bundled corpus the page measures, whose view ships with the code: all."""
    from attention.text.corpora import load

    return load(corpus)


def measured(source: str, corpus: str, texts: list[str]) -> list[str]:
    """The texts the page measures: every text of a bundled corpus on the bundled model
    (shipped), else the first PAGE_TEXTS (computed live)."""
    whole = source == config.BUNDLED and corpus in SHIPPED_CORPORA
    return list(texts) if whole else list(texts[:PAGE_TEXTS])


def shipped_path(corpus: str = SHIPPED_CORPORA[0]) -> Path:
    return diskcache.path_for("importance", key(config.BUNDLED, shipped_texts(corpus)), SHIPPED)
