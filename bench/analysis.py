"""The cost of analyze(spec) beyond attention itself, and its peak memory.

analyze() runs core.attention twice (scaled and unscaled) and computes five metrics for every
row of both; the baseline is one core.attention call on the same q, k, v. 12 heads, d_k = 64,
one CPU thread (analyze makes no weights @ v: its metrics need the weights only).
Targets: analyze within 4x of core.attention at n = 2048, and under 1 GB of
peak resident memory at n = 2048 (measured in a fresh subprocess: peak RSS after analyze
minus peak RSS after the imports and a warm-up; see peak_kb).

    python -m bench.analysis [--quick]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from attention.analysis import analyze, qkv_for
from attention.core import attention
from attention.spec import AttentionSpec

from .timing import interleaved_medians, print_table, row

HEADS, D_K = 12, 64
SIZES = {64: 30, 512: 8, 2048: 4}  # n -> repeats
QUICK_SIZES, QUICK_MEMORY_N = {64: 5, 128: 3, 256: 2}, 256   # three sizes, as the full run
TIME_TARGET = 4.0
MEMORY_N, MEMORY_TARGET_GB = 2048, 1.0
ROOT = Path(__file__).resolve().parent.parent


def spec_for(n: int) -> AttentionSpec:
    """n tokens from a 500-word vocabulary (so some repeat), 12 heads of d_k 64."""
    return AttentionSpec(tokens=tuple(f"w{i % 500}" for i in range(n)), d_model=64, d_k=D_K,
                         heads=HEADS)


def time_rows(sizes: dict[int, int] = SIZES) -> list[dict]:
    rows = []
    for n, repeats in sizes.items():
        spec = spec_for(n)
        _, q, k, v = qkv_for(spec)                                    # (heads, n, d_k) each
        med = interleaved_medians({
            "attention": lambda: attention(q, k, v),
            "analyze": lambda: analyze(spec),
        }, repeats)
        target = TIME_TARGET if n == max(sizes) else float("inf")
        rows.append(row(f"analyze n={n}", "one core.attention call", med["analyze"] / med["attention"],
                        target, f"{HEADS} heads, d_k {D_K}, median of {repeats}"))
    return rows


_MEASURE = """
import json, sys, torch
torch.set_num_threads(1)
from attention.analysis import analyze
from attention.bounded import nbytes, return_freed_memory
from bench.analysis import peak_kb, spec_for
return_freed_memory()                                   # as the server does (attention/ui/cache.py)
analyze(spec_for(16))                                   # warm-up: lazy inits, allocator
before = peak_kb()
a = analyze(spec_for(int(sys.argv[1])))
after = peak_kb()
kept = nbytes(a)                                        # q, k, v and the per-row metrics
print(json.dumps({"delta_kb": after - before, "kept_bytes": kept}))
"""


def peak_kb() -> int:
    """This process's peak resident memory in KiB.

    On Linux, VmHWM from /proc: ru_maxrss would do, except that a child started by
    subprocess (vfork + exec) starts with ru_maxrss already at its parent's peak, which hides
    the child's own growth whenever the parent has been bigger. VmHWM belongs to the new
    address space, so it starts from the child's own imports."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak // 1024 if sys.platform == "darwin" else peak  # bytes on macOS


def peak_memory(n: int = MEMORY_N) -> dict:
    """Peak resident growth of one analyze(spec_for(n)) in a fresh interpreter, measured
    against the same process after its imports and a small warm-up."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", _MEASURE, str(n)], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def memory_row(n: int = MEMORY_N) -> dict:
    m = peak_memory(n)
    gb = m["delta_kb"] * 1024 / 1e9
    return row(f"analyze n={n} peak memory (GB)", "RSS after imports", gb, MEMORY_TARGET_GB,
               f"{HEADS} heads; the Analysis keeps {m['kept_bytes'] / 1e9:.3f} GB (q, k, v, "
               f"metrics; the n x n results are recomputed per view, a head at a time)")


def run(quick: bool = False) -> list[dict]:
    torch.set_num_threads(1)
    if quick:
        return time_rows(QUICK_SIZES) + [memory_row(QUICK_MEMORY_N)]
    return time_rows() + [memory_row()]


if __name__ == "__main__":
    print_table(run(quick="--quick" in sys.argv))
