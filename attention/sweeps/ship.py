"""What the sweeps ship beside their rows, with no corpus job: the page's tables derived from
a causal LM's rows (`derive`, called by attention.corpus.ship once the job has run) and a
sentence model's sweeps over a pair set (`ship_pairs`). `python -m attention.corpus ship`
calls both; this package never imports the corpus job."""
from __future__ import annotations

from pathlib import Path


def derive(rows, target: Path, sweep: str) -> list[Path]:
    """The page's tables beside the rows (stats.summary; for heads also the per-head table
    and its agreement with sharpness), so a page reads them without computing."""
    from attention.sweeps import stats, store

    table = stats.summary(rows)
    out = [store.write_table(table, store.derived(target, "summary"))]
    if sweep == "heads":
        per_head = stats.heads(table)
        out.append(store.write_table(per_head, store.derived(target, "heads")))
        out.append(store.write_table(stats.agreement(per_head),
                                       store.derived(target, "agreement")))
    return out


def ship_pairs(model_source: str, source: str, sweeps=("global", "layers"), *,
               progress: bool = True) -> list[Path]:
    """A sentence model's sweeps over a whole pair set (attention.sweeps.sentence), shipped
    beside the causal LM's: per sweep, one row per (pair, setting) and their summary. The
    retrieval of a pair needs every sentence of the set under the same setting, so a sweep
    runs whole (MiniLM on the 320 bundled pairs: minutes on one core)."""
    import sys
    import time

    from attention.models import load_model
    from attention.sweeps import pairs as P
    from attention.sweeps.sentence import pair_table
    from attention.text.corpora import pairs as load_pairs

    model = load_model(model_source, trusted=True)     # the operator's own: any folder or id
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
