"""The "is sharper better?" experiments, kept on disk (attention.diskcache) between server starts.

A seed's results depend on the code of experiment/training.py, core.py, measures/rows.py and
measures/rank.py, on the
experiment's settings (its upper-case constants: steps, batch sizes, d_k values, the held-out
set) and on the library versions; all of them go into the key, so a change to any of them
recomputes and nothing is trusted across versions. Same signatures as the functions in
attention.experiment.training, which they wrap.

The page's default seed also ships with the code (SHIPPED, attention/data/experiments/), so a
freshly started server whose disk cache was never filled shows it at once instead of training
for about 15 s. Those files are read only under the same full key as above: after any change
to the experiment's code, settings or libraries they are ignored (and the page trains) until
they are made again with `--ship`; tests/test_diskcache.py fails until then.

    python -m attention.experiment.store [SEED ...]   # precompute (default: seed 0)
    python -m attention.experiment.store --ship       # remake the shipped files of seed 0
"""
from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import pandas as pd

from attention import config, diskcache
from attention.experiment import task
from attention.diskcache import Progress
from attention.experiment.task import SharpeningStudy

# The code the results come from, named by path: importing the training would load
# torch just to read a file (a cold link to the page never loads it: docs/architecture.md,
# "Imports"). Training imports it.
_PACKAGE = Path(__file__).resolve().parent.parent                      # attention/
SOURCES = tuple(_PACKAGE / name for name in (
    "experiment/training.py", "core.py", "measures/rows.py", "measures/rank.py"))
SHIPPED = config.DATA / "experiments"
SHIPPED_SEED = 0
_CONSTANT = (int, float, str, tuple)


def constants() -> dict[str, object]:
    """The experiment's upper-case constants (steps, batch sizes, d_k values, the held-out
    set) as they are now: the live module's while it is imported (tests patch them to shorten
    training), else the same values read from its source without importing it."""
    live = sys.modules.get("attention.experiment.training")
    if live is not None:
        return {name: value for name, value in vars(live).items()
                if name.isupper() and isinstance(value, _CONSTANT)}
    return dict(_source_constants())


@lru_cache(maxsize=1)
def _source_constants() -> tuple[tuple[str, object], ...]:
    """training.py's top-level upper-case names: literal assignments (`A, B = 1, 2` too)
    and the names it imports from attention.experiment.task."""
    out: dict[str, object] = {}
    for node in ast.parse(SOURCES[0].read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module == "attention.experiment.task":
            out.update({a.asname or a.name: getattr(task, a.name) for a in node.names})
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            names = ([target.id] if isinstance(target, ast.Name) else
                     [e.id for e in target.elts] if isinstance(target, ast.Tuple) else [])
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            out.update(zip(names, value if len(names) > 1 else (value,)))
    return tuple((name, value) for name, value in out.items()
                 if name.isupper() and isinstance(value, _CONSTANT))


def settings(kind: str, **params: object) -> dict[str, object]:
    """What a result depends on besides the source text: the kind, its parameters and the
    experiment's constants as they are now."""
    return {"kind": kind, "params": params, "constants": constants()}


def key(kind: str, **params: object) -> str:
    return diskcache.fingerprint(SOURCES, settings(kind, **params))


def _study_record(seed: int, progress: Progress | None = None) -> diskcache.Record:
    from attention.experiment import training     # torch: only to train

    s = training.sharpening_study(seed, progress)
    return diskcache.Record(
        frames={"sweep": s.sweep, "sample": s.sample, "leave_one_out": s.leave_one_out},
        values={"seed": s.seed, "spearman_pooled": s.spearman_pooled,
                "spearman_within": s.spearman_within})


def _scaling_record(seeds: tuple[int, ...], progress: Progress | None = None) -> diskcache.Record:
    from attention.experiment import training     # torch: only to train

    return diskcache.Record(frames={"sweep": training.scaling_sweep(seeds, progress)})


def _study_key(seed: int) -> str:
    return key("sharpening", seed=int(seed))


def _scaling_key(seeds: tuple[int, ...]) -> str:
    return key("scaling", seeds=[int(s) for s in seeds])


def sharpening_study(seed: int = 0, progress: Progress | None = None) -> SharpeningStudy:
    """training.sharpening_study(seed), from disk when this code has computed it before."""
    record = diskcache.load_or_compute("sharpening", _study_key(seed),
                                       lambda: _study_record(seed, progress), shipped=SHIPPED)
    frames, values = record.frames, record.values
    return SharpeningStudy(seed=int(values["seed"]), sweep=frames["sweep"],
                           sample=frames["sample"], leave_one_out=frames["leave_one_out"],
                           spearman_pooled=float(values["spearman_pooled"]),
                           spearman_within=float(values["spearman_within"]))


def scaling_sweep(seeds: tuple[int, ...] = (0, 1, 2),
                  progress: Progress | None = None) -> pd.DataFrame:
    """training.scaling_sweep(seeds), from disk when this code has computed it before."""
    seeds = tuple(int(s) for s in seeds)
    record = diskcache.load_or_compute("scaling", _scaling_key(seeds),
                                       lambda: _scaling_record(seeds, progress), shipped=SHIPPED)
    return record.frames["sweep"]


def scaling_seeds(seed: int) -> tuple[int, int, int]:
    """The scaling experiment's seeds for the page's seed: it and the next two."""
    return (seed, seed + 1, seed + 2)


def stored(seed: int) -> dict[str, bool]:
    """Whether each of `seed`'s two experiments ("sharpening", "scaling") is on disk or
    shipped, so showing it trains nothing."""
    keys = {"sharpening": _study_key(seed), "scaling": _scaling_key(scaling_seeds(seed))}
    return {name: any(diskcache.holds(diskcache.path_for(name, k, where), k)
                      for where in (None, SHIPPED)) for name, k in keys.items()}


# A run's seconds per training step, evaluation included, over a bare step's (the probe's):
# measured on two cores, sharpening 1.35-2.3 (its evaluation of 7 multipliers on the held-out
# set weighs against 300 small steps), scaling 0.7-1.4. A server's first estimate only; later
# ones use the rate its own last run measured (attention/ui/views/experiment.py).
OVERHEAD = {"sharpening": 1.6, "scaling": 1.1}


def step_seconds(kind: str, seed: int = 0, steps: int = 8) -> float:
    """Seconds one training step of `kind` ("sharpening" or "scaling") takes where it runs:
    throwaway heads of that run's shapes, two untimed steps (the first calls warm torch up),
    then `steps` timed ones. Lives here, not in training.py, whose code is part of every
    result's key."""
    import time

    from attention.experiment import training as ex     # torch: only to time training

    if kind == "sharpening":
        stacks, batch = [ex.Heads(ex.SHARPEN_DK, True, (seed,))], ex.SHARPEN_BATCH
    else:
        stacks = [ex.Heads(d_k, scaled, scaling_seeds(seed))
                  for d_k in ex.SCALING_DKS for scaled in (True, False)]
        batch = ex.SCALING_BATCH
    ex.train(stacks, 2, batch)
    start = time.perf_counter()
    ex.train(stacks, steps, batch)
    return (time.perf_counter() - start) / steps


def precompute(seed: int = 0) -> None:
    """Both experiments the page shows for `seed`."""
    sharpening_study(seed)
    scaling_sweep(scaling_seeds(seed))


def _shipped(seed: int) -> list[tuple[Path, str, Callable[[], diskcache.Record]]]:
    """(file in SHIPPED, full key, how to train it) of both experiments of `seed`."""
    seeds = scaling_seeds(seed)
    entries = (("sharpening", _study_key(seed), lambda: _study_record(seed)),
               ("scaling", _scaling_key(seeds), lambda: _scaling_record(seeds)))
    return [(diskcache.path_for(name, k, SHIPPED), k, make) for name, k, make in entries]


def shipped_paths(seed: int = SHIPPED_SEED) -> list[Path]:
    """The files SHIPPED must hold for the current code to start with `seed`'s results."""
    return [path for path, _, _ in _shipped(seed)]


def ship(seed: int = SHIPPED_SEED) -> list[Path]:
    """Train `seed` afresh (never from a file) and write its records into SHIPPED, replacing
    the files older code made."""
    entries = _shipped(seed)
    paths = [path for path, _, _ in entries]
    for old in SHIPPED.glob("*.zip"):
        if old not in paths:
            old.unlink()
    for path, full_key, make in entries:
        diskcache.write(path, full_key, make())
    return paths


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)        # tiny heads: a second thread only adds synchronisation
    if sys.argv[1:] == ["--ship"]:
        for path in ship():
            print(f"shipped {path}")
        sys.exit(0)
    for s in [int(a) for a in sys.argv[1:]] or [0]:
        precompute(s)
        print(f"seed {s}: stored in {diskcache.cache_dir()}")
