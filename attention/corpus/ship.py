"""`python -m attention.corpus ship`: run (or resume) the sweeps' corpus jobs and write their
per-text rows under attention/data/sweeps (attention.sweeps.shipped), one command.

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
    from attention.corpus.results import read_table
    from attention.corpus.shards import load_model_for_job
    from attention.sweeps import shipped
    from attention.sweeps.ship import derive
    from attention.text.corpora import load

    model = load_model_for_job(model_source)
    texts = load(corpus)
    written = []
    for sweep in sweeps:
        limit = shipped.PLAN[sweep]
        out = Path(work) / f"{shipped.slug(model.name)}-{shipped.slug(corpus)}-{sweep}"
        if not now:
            do_job(model_source, corpus, out, engine=engine, address=address, workers=workers,
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
