"""`python -m attention.corpus ship`: run (or resume) the sweeps' corpus jobs and write their
per-text rows under attention/data/sweeps (attention.sweeps.store), one command; with
`--importance`, the importance page's job (`--what importance`) over each bundled corpus and
its record under attention/data/importance (ship_importance).

The job sits above the measures it runs: this module drives the corpus job over the sweeps'
`nll` product and ships through the sweeps' store; nothing in attention.sweeps imports the
job. Each sweep is its own job folder under --work (resumable after a kill: run the command
again); shards are small (SHARD texts) so that a stopped run keeps most of its work.
`--now` computes nothing and ships what the folders hold, finished shards only (the rows say
which texts: the page states the count)."""
from __future__ import annotations

from pathlib import Path

SHARD = {"global": 26, "layers": 10, "heads": 5, "layers_rest": 10}


def ship(model_source: str, corpus: str, work: Path, sweeps, *, engine: str = "local",
         address: str | None = None, workers: int = 2, now: bool = False,
         progress: bool = True) -> list[Path]:
    from attention.corpus.compute import Settings
    from attention.corpus.job import do_job
    from attention.corpus.store import read_table
    from attention.corpus.shards import load_model_for_job
    from attention.sweeps import store
    from attention.sweeps.ship import derive
    from attention.text.corpora import load

    model = load_model_for_job(model_source)
    texts = load(corpus)
    written = []
    for sweep in sweeps:
        limit = store.PLAN[sweep]
        out = Path(work) / f"{store.slug(model.name)}-{store.slug(corpus)}-{sweep}"
        if not now:
            do_job(model_source, corpus, out, engine=engine, address=address, workers=workers,
                   model=model if engine == "local" else None, progress=progress,
                   settings=Settings(what=("nll",), batch_size=SHARD[sweep], sweeps=(sweep,),
                                     limit=limit))
        rows = read_table(out, "nll")
        if not len(rows):
            continue
        target = store.path(model.name, corpus, texts, sweep, limit)
        for old in target.parent.glob(f"{store.slug(model.name)}-{store.slug(corpus)}-"
                                      f"{sweep}-*"):
            old.unlink()
        written.append(store.write(rows, target))
        written += derive(rows, target, sweep)
    return written


IMPORTANCE_SHARD = 5      # texts a shard of the importance job: a kill loses little


def ship_importance(corpus: str, work: Path, *, engine: str = "local",
                    address: str | None = None, workers: int = 2,
                    source: str | None = None, progress: bool = True) -> Path:
    """Run (or resume) the corpus job's importance product over every text of a bundled
    corpus (`--what importance`, shards of IMPORTANCE_SHARD texts, in `work`/<corpus>-<key>),
    assemble the page's record from its rows (attention.importance.record.build) and write it
    into attention/data/importance with the model's fixed record, replacing the older
    records of the same corpus and model. source: another model than the bundled one (tests).
    Returns the record's path."""
    from attention import config, diskcache
    from attention.corpus.compute import Settings
    from attention.corpus.job import do_job
    from attention.corpus.store import read_table
    from attention.corpus.shards import load_model_for_job
    from attention.importance import product, record, store

    source = source or config.BUNDLED
    model = load_model_for_job(source)
    texts = store.shipped_texts(corpus)
    out = Path(work) / f"{corpus.replace(':', '_')}-{store.code_key()}"
    do_job(source, corpus, out, engine=engine, address=address, workers=workers, model=model,
           progress=progress, settings=Settings(what=("importance",),
                                                batch_size=IMPORTANCE_SHARD))
    tables = {name: read_table(out, name) for name in product.TABLES}
    got, corpus_tables = record.build(model, source, texts, tables)
    key = store.key(source, texts)
    path = diskcache.path_for("importance", key, store.SHIPPED)
    fixed = store.fixed_path(source, store.SHIPPED)
    store.SHIPPED.mkdir(parents=True, exist_ok=True)
    free = record.corpus_free(model)
    for old in store.SHIPPED.glob("importance-*.zip"):
        if old not in (path, fixed) and (old.name.startswith("importance-fixed-") and free
                                         or _older(old, model.name, texts)):
            old.unlink()
    diskcache.write(path, key, got)
    written = [path]
    if free:
        diskcache.write(fixed, store.fixed_key(source),
                        record.pack_fixed(corpus_tables["randoms"], corpus_tables["sweep"]))
        written.append(fixed)
    for p in written:
        p.chmod(0o644)
    return path


def _older(path: Path, model: str, texts: list[str]) -> bool:
    """Whether a shipped record is an older one of the same model over these texts or their
    first ones (a shorter record of the same corpus)."""
    from attention import diskcache
    from attention.text.corpora import digest

    if path.name.startswith("importance-fixed-"):
        return False
    old = diskcache.read(path, diskcache.stored_key(path) or "")
    if old is None:
        return False
    n = int(old.values.get("texts", -1))
    return (old.values.get("model") == model and 0 < n <= len(texts)
            and old.values.get("digest") == digest(list(texts[:n])))
