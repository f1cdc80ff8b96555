"""The first torch operation of a new thread: what every click pays, since Streamlit runs
each script run (a fragment's too) in a thread of its own.

torch applies its thread count in each new thread at the thread's first parallel operation,
and with OpenMP and MKL free to use more than one thread that first matmul set up MKL's
threading for the thread: about 4 ms on an idle 2-core machine, 15-30 ms while the browser
draws on the same cores (the Heatmap's zoom window, 16 x 2,048 keys, took 15-30 ms a click
for 0.2 ms of work). attention/ui/__init__.py sets OMP_NUM_THREADS and MKL_NUM_THREADS to 1
before it imports torch, which makes that setup nothing.

Two fresh interpreters, each timing the first matmul (16 x 64 by 64 x 2,048, the zoom
window's scores) in 40 new threads: one imports attention.ui first, as the pages do; the
other imports torch first, so the variables come too late (what the pages paid before).
Ratio: first matmul with the variables / without. Target <= 0.5.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import json, threading, time
{first}
import attention.ui, torch
q, k = torch.randn(16, 64), torch.randn(2048, 64)
q @ k.T                                     # the process's own first matmul, not timed
times = []
def first_matmul():
    start = time.perf_counter()
    q @ k.T                                 # (16, 2048)
    times.append(time.perf_counter() - start)
for _ in range(40):
    thread = threading.Thread(target=first_matmul)
    thread.start()
    thread.join()
print(json.dumps(times))
"""


def first_matmuls(torch_first: bool) -> list[float]:
    """Seconds of the first matmul in each of 40 new threads of a fresh interpreter."""
    code = PROBE.format(first="import torch" if torch_first else "")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def run(quick: bool = False) -> list[dict]:
    from bench.timing import row

    with_vars, without = [], []
    for _ in range(1 if quick else 3):       # interleaved interpreters
        with_vars += first_matmuls(torch_first=False)
        without += first_matmuls(torch_first=True)
    fast, slow = statistics.median(with_vars), statistics.median(without)
    return [row("first torch matmul in a new thread (every rerun)", "torch imported first",
                fast / slow, 0.5, f"{fast * 1e3:.2f} ms vs {slow * 1e3:.2f} ms (median of "
                f"{len(with_vars)} threads each; slowest {max(with_vars) * 1e3:.1f} vs "
                f"{max(without) * 1e3:.1f} ms)")]


if __name__ == "__main__":
    from bench.timing import print_table

    print_table(run(quick="--quick" in sys.argv))
