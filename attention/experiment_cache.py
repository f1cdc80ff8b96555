"""The "is sharper better?" experiments, kept on disk (attention.diskcache) between server starts.

A seed's results depend on the source of experiment.py, core.py and metrics.py, on the
experiment's settings (its upper-case constants: steps, batch sizes, d_k values, the held-out
set) and on the library versions; all of them go into the key, so a change to any of them
recomputes and nothing is trusted across versions. Same signatures as the functions in
attention.experiment, which they wrap.

    python -m attention.experiment_cache [SEED ...]   # precompute (default: seed 0)
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from . import core, diskcache, experiment, metrics
from .experiment import Progress, SharpeningStudy

SOURCES = tuple(Path(m.__file__) for m in (experiment, core, metrics))


def settings(kind: str, **params: object) -> dict[str, object]:
    """What a result depends on besides the source text: the kind, its parameters and the
    experiment's constants as they are now (tests patch them to shorten training)."""
    constants = {name: value for name, value in vars(experiment).items()
                 if name.isupper() and isinstance(value, (int, float, str, tuple))}
    return {"kind": kind, "params": params, "constants": constants}


def key(kind: str, **params: object) -> str:
    return diskcache.fingerprint(SOURCES, settings(kind, **params))


def sharpening_study(seed: int = 0, progress: Progress | None = None) -> SharpeningStudy:
    """experiment.sharpening_study(seed), from disk when this code has computed it before."""
    def compute() -> diskcache.Record:
        s = experiment.sharpening_study(seed, progress)
        return diskcache.Record(
            frames={"sweep": s.sweep, "sample": s.sample, "importance": s.importance},
            values={"seed": s.seed, "spearman_pooled": s.spearman_pooled,
                    "spearman_within": s.spearman_within})

    record = diskcache.load_or_compute("sharpening", key("sharpening", seed=int(seed)), compute)
    frames, values = record.frames, record.values
    return SharpeningStudy(seed=int(values["seed"]), sweep=frames["sweep"],
                           sample=frames["sample"], importance=frames["importance"],
                           spearman_pooled=float(values["spearman_pooled"]),
                           spearman_within=float(values["spearman_within"]))


def scaling_sweep(seeds: tuple[int, ...] = (0, 1, 2),
                  progress: Progress | None = None) -> pd.DataFrame:
    """experiment.scaling_sweep(seeds), from disk when this code has computed it before."""
    seeds = tuple(int(s) for s in seeds)

    def compute() -> diskcache.Record:
        return diskcache.Record(frames={"sweep": experiment.scaling_sweep(seeds, progress)})

    record = diskcache.load_or_compute("scaling", key("scaling", seeds=list(seeds)), compute)
    return record.frames["sweep"]


def scaling_seeds(seed: int) -> tuple[int, int, int]:
    """The scaling experiment's seeds for the page's seed: it and the next two."""
    return (seed, seed + 1, seed + 2)


def precompute(seed: int = 0) -> None:
    """Both experiments the page shows for `seed`."""
    sharpening_study(seed)
    scaling_sweep(scaling_seeds(seed))


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)        # tiny heads: a second thread only adds synchronisation
    for s in [int(a) for a in sys.argv[1:]] or [0]:
        precompute(s)
        print(f"seed {s}: stored in {diskcache.cache_dir()}")
