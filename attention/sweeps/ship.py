"""`python -m attention.corpus ship`: run (or resume) the sweeps' corpus jobs and write their
per-text rows under attention/data/sweeps (attention.sweeps.shipped), one command.

Each sweep is its own job folder under --work (resumable after a kill: run the command
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
    from attention.corpus.job import run
    from attention.corpus.results import read_table
    from attention.corpus.shards import load_model_for_job
    from attention.text.corpora import load
    from attention.sweeps import shipped

    model = load_model_for_job(model_source)
    texts = load(corpus)
    written = []
    for sweep in sweeps:
        limit = shipped.PLAN[sweep]
        out = Path(work) / f"{shipped.slug(model.name)}-{shipped.slug(corpus)}-{sweep}"
        if not now:
            run(model_source, corpus, out, engine=engine, address=address, workers=workers,
                model=model if engine == "local" else None, progress=progress,
                settings=Settings(what=("nll",), batch_size=SHARD[sweep], sweeps=(sweep,),
                                  limit=limit))
        rows = read_table(out, "nll")
        if not len(rows):
            continue
        target = shipped.path(model.name, corpus, texts, sweep, limit)
        for old in target.parent.glob(f"{shipped.slug(model.name)}-{shipped.slug(corpus)}-"
                                      f"{sweep}-*"):
            old.unlink()
        written.append(shipped.write(rows, target))
        written += derive(rows, target, sweep)
    return written


def derive(rows, target: Path, sweep: str) -> list[Path]:
    """The page's tables beside the rows (stats.summary; for heads also the per-head table
    and its agreement with sharpness), so a page reads them without computing."""
    from attention.sweeps import shipped, stats

    table = stats.summary(rows)
    out = [shipped.write_table(table, shipped.derived(target, "summary"))]
    if sweep == "heads":
        per_head = stats.heads(table)
        out.append(shipped.write_table(per_head, shipped.derived(target, "heads")))
        out.append(shipped.write_table(stats.agreement(per_head),
                                       shipped.derived(target, "agreement")))
    return out


def ship_pairs(model_source: str, source: str, sweeps=("global", "layers"), *,
               progress: bool = True) -> list[Path]:
    """A sentence model's sweeps over a whole pair set (attention.sweeps.sentence), shipped
    beside the causal LM's: per sweep, one row per (pair, setting) and their summary. The
    retrieval of a pair needs every sentence of the set under the same setting, so a sweep
    runs whole (MiniLM on the 320 bundled pairs: minutes on one core)."""
    import sys
    import time

    from attention.corpus.shards import load_model_for_job
    from attention.sweeps import pairs as P
    from attention.sweeps.sentence import pair_table
    from attention.text.corpora import pairs as load_pairs

    model = load_model_for_job(model_source)
    got = load_pairs(source)
    written = []
    for sweep in sweeps:
        start = time.perf_counter()
        tick = (lambda done, total: sys.stderr.write(f"\r{sweep}: batch {done}/{total}")) \
            if progress else None
        rows = pair_table(model, got, sweep, progress=tick)
        if progress:
            sys.stderr.write(f"\r{sweep}: {len(got)} pairs x "
                             f"{rows.groupby(P.KEYS).ngroups} settings in "
                             f"{time.perf_counter() - start:.0f} s\n")
        written += P.write(rows, P.path(model.name, source, got, sweep))
    return written
