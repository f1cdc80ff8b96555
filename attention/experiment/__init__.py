"""Is sharper better? The experiment that answers it, with data: its task, its training and
its results store.

    sharpening_study(seed) -> SharpeningStudy   one head trained, then sharpened at test time
    sharpening_sweep(seed) -> DataFrame          its table (multiplier, accuracy, max_weight, ...)
    scaling_sweep(seeds)   -> DataFrame          trained with and without 1/sqrt(d_k)

The modules:
    task      the task's fixed numbers and the study's type (no torch: the pages and charts)
    training  the heads, their training and the sweeps (torch)
    store     the results on disk, keyed by the code that trains them, the shipped default
              seed and the command line (`python -m attention.experiment.store --ship`)

The face trains afresh, as it always did; a page reads the store (store.sharpening_study).
Importing the face imports no torch (a cold link to the page reads stored results): the
training is imported when one of the three is first called.
"""
from __future__ import annotations

import pandas as pd

from attention.diskcache import Progress
from attention.experiment.task import SharpeningStudy

__all__ = ["sharpening_study", "sharpening_sweep", "scaling_sweep", "SharpeningStudy"]


def sharpening_study(seed: int = 0, progress: Progress | None = None) -> SharpeningStudy:
    """training.sharpening_study: one head trained, sharpened, its sample and leave-one-out effects."""
    from attention.experiment import training

    return training.sharpening_study(seed, progress)


def sharpening_sweep(seed: int = 0, progress: Progress | None = None) -> pd.DataFrame:
    """training.sharpening_sweep: one row per m in {0, 0.5, 1, 2, 4, 8, argmax}."""
    from attention.experiment import training

    return training.sharpening_sweep(seed, progress)


def scaling_sweep(seeds: tuple[int, ...] = (0, 1, 2),
                  progress: Progress | None = None) -> pd.DataFrame:
    """training.scaling_sweep: one row per (d_k, scaled, seed)."""
    from attention.experiment import training

    return training.scaling_sweep(seeds, progress)
