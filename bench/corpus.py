"""The corpus job: batched local engine vs one text at a time, Ray (2 workers) vs local, and
peak RSS at two corpus sizes (each in its own process). Ratios, measured in the same run.

    python -m bench.corpus [--quick]
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = ("the cat sat on a mat while dogs ran past , and she said that it was late . "
         "every student who came read his book because they liked it").split()


def _corpus(folder: Path, n: int) -> Path:
    import numpy as np

    rng = np.random.default_rng(1)
    path = folder / f"c{n}.txt"
    path.write_text("\n".join(" ".join(rng.choice(WORDS, size=int(rng.integers(5, 25))))
                              for _ in range(n)) + "\n", encoding="utf-8")
    return path


def _rss_runs(jobs: dict[int, tuple[Path, Path]]) -> dict[int, float]:
    """Peak RSS (MB) of a whole job over each corpus, each in its own fresh process, run side
    by side (one process's peak does not depend on the other's)."""
    script = ("import resource, sys, torch; torch.set_num_threads(1)\n"
              "from attention.corpus import job\n"
              "job.do_job('all-MiniLM-L6-v2', sys.argv[1], sys.argv[2])\n"
              "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")
    procs = {n: subprocess.Popen([sys.executable, "-c", script, str(corpus), str(out)], cwd=ROOT,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for n, (corpus, out) in jobs.items()}
    peaks = {}
    for n, proc in procs.items():
        stdout, stderr = proc.communicate()
        if proc.returncode:
            raise RuntimeError(f"the {n}-text run failed: {stderr[-2000:]}")
        peaks[n] = float(stdout.strip().splitlines()[-1])
    return peaks


def run(quick: bool = False) -> list[dict]:
    import torch

    from attention.corpus import job
    from attention.corpus.compute import Settings, compute_shard
    from attention.models import load_model
    from bench.timing import row

    torch.set_num_threads(1)
    rows = []
    model = load_model("all-MiniLM-L6-v2")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        texts = _corpus(tmp, 64).read_text().splitlines()
        settings = Settings(batch_size=64)
        compute_shard(model, 0, texts[:4], settings)                      # warm
        times = {False: [], True: []}
        for _ in range(1 if quick else 5):                                # interleaved
            for batched in (False, True):
                t0 = time.perf_counter()
                compute_shard(model, 0, texts, settings, batched=batched)
                times[batched].append(time.perf_counter() - t0)
        times = {b: sorted(t)[len(t) // 2] for b, t in times.items()}     # medians
        rows.append(row("batched local engine, 64 texts (time)", "one text at a time",
                        times[True] / times[False], 0.33,
                        f"{times[False] / times[True]:.1f}x the texts per second"))
        try:
            import ray  # noqa: F401
            corpus = _corpus(tmp, 64 if quick else 512)
            t0 = time.perf_counter()
            job.do_job("all-MiniLM-L6-v2", str(corpus), tmp / "local", settings=Settings(batch_size=32),
                       model=model)
            local = time.perf_counter() - t0
            t0 = time.perf_counter()
            job.do_job("all-MiniLM-L6-v2", str(corpus), tmp / "ray", engine="ray",
                       settings=Settings(batch_size=32), workers=2)
            ray_s = time.perf_counter() - t0
            rows.append(row("Ray, 2 workers, vs local (texts/s, incl. Ray start)", "local engine",
                            local / ray_s, float("inf"), "reported, no target"))
        except ImportError:
            rows.append(row("Ray vs local", "-", float("nan"), float("inf"), "Ray not installed"))
        except job.Refused as err:        # a Ray node that did not start (a loaded machine)
            rows.append(row("Ray vs local", "-", float("nan"), float("inf"), f"not measured: {err}"))
        small, large = (100, 400) if quick else (1000, 10000)
        rss = _rss_runs({n: (_corpus(tmp, n), tmp / f"rss{n}") for n in (small, large)})
        rows.append(row(f"peak RSS {large} texts / {small} texts", "the smaller corpus",
                        rss[large] / rss[small], 1.2, f"{rss[large]:.0f} / {rss[small]:.0f} MB"))
    return rows


if __name__ == "__main__":
    from bench.timing import print_table

    print_table(run(quick="--quick" in sys.argv))
