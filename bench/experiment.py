"""How long the "Is sharper better?" sweeps take, relative to one forward pass of the toy model.

Baseline: one forward pass of the experiment's head (d_k 16, scaled) on one training batch of
256 fresh samples, without gradients, measured in the same run. The sweeps:

- sharpening: train one head for 300 steps of 256, then 7 test-time multipliers on the
  8192-sample held-out set, plus the sample and the leave-one-out view;
- scaling: 18 heads (d_k 16/64/256 x scaled/unscaled x 3 seeds), 250 steps of 128 each.

Targets, as ratios: a training step costs a few forward passes (forward, backward, Adam), so
300 steps are ~1,000-1,500 forward-equivalents, and the sharpening target (4,000) leaves about
2x for evaluation and overhead. The scaling sweep pushes 9x the samples per step (18 heads of
128 against one of 256) for 250 steps: ~10,000 forward-equivalents if every head had the
baseline's d_k 16; the d_k 64 and 256 keys are 4 and 16 times larger and make the average step
several times dearer, hence a target of 60,000.
One CPU thread; CPU time of this process (see bench.timing).

    python -m bench.experiment
"""
from __future__ import annotations

import time

import torch

from attention.experiment import training as ex

from .timing import interleaved_medians, print_table, row

TARGETS = {"sharpening_sweep": 4_000.0, "scaling_sweep": 60_000.0}
REPEATS = 2


def forward_baseline(repeats: int = 200) -> float:
    """Median CPU seconds of one no-grad forward pass of the head on a batch of 256."""
    head = ex.Heads(ex.SHARPEN_DK, True, (0,))
    x = ex.make_batch(ex.SHARPEN_BATCH, torch.Generator().manual_seed(0)).x[None]  # (1, b, n, f)

    def forward():
        with torch.no_grad():
            head.predict(x)

    return interleaved_medians({"forward": forward}, repeats, warmup=5)["forward"]


def run(quick: bool = False) -> list[dict]:
    """quick: the sharpening sweep once, no warm-up run, no scaling sweep."""
    if not quick:
        ex.sharpening_sweep(seed=0)  # warm-up: the first backward of a process pays lazy inits
    sweeps = {"sharpening_sweep": lambda: ex.sharpening_sweep(seed=0)}
    if not quick:
        sweeps["scaling_sweep"] = lambda: ex.scaling_sweep(seeds=(0, 1, 2))
    forward = forward_baseline(20 if quick else 200)
    rows = []
    for name, fn in sweeps.items():
        cpu, wall = [], []
        for _ in range(1 if quick else REPEATS):
            c, w = time.process_time(), time.perf_counter()
            fn()
            cpu.append(time.process_time() - c)
            wall.append(time.perf_counter() - w)
        best = min(cpu)
        rows.append(row(name, "one forward pass (batch 256)", best / forward, TARGETS[name],
                        f"{best:.2f} s CPU, {min(wall):.2f} s wall; forward {forward * 1e3:.2f} ms"))
    forward_after = forward_baseline(20 if quick else 200)   # the machine may have changed speed
    rows.append(row("forward pass, end vs start", "one forward pass (batch 256)",
                    forward_after / forward, 2.0, "a ratio far from 1 means a noisy machine"))
    return rows


if __name__ == "__main__":
    import sys

    torch.set_num_threads(1)
    print_table(run(quick="--quick" in sys.argv))
