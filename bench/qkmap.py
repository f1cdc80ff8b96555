"""The joint query/key map (attention/corpus/qkmap.py): time and quality of each method.

A synthetic head that attends by word identity: 500 words (50 in quick mode), each occurring 10
times in a random context (token = word vector + context noise of the same size), keys and
queries from the same tokens through W and W^-T, so q.k follows the tokens' similarity; each
set has its own offset and scale, as in real heads. 5,000 queries + 5,000 keys = 10k points
(1k in quick mode), d_k = 64. Quality is `neighbour_agreement`: the fraction of each query's
5 most-attended keys among its 10 nearest keys in the map (random map: about 10 / 5,000).

Each method is timed end to end through `embed` (normalise included), one BLAS/OpenMP thread,
as the dashboard runs (attention/ui sets OMP_NUM_THREADS=1); the ratio is against PCA's time
in the same process, by CPU time (on a shared machine wall time swings with the load; it is
printed beside).
"tsne, not normalised" is the same t-SNE on the raw q and k, which shows why `normalise`
exists (in quick mode, or with --not-normalised: it doubles the time; at 10k points it scored
0.002 against 0.72).

    python -m bench.qkmap                     # 10k points, about 25 s of CPU
    python -m bench.qkmap --not-normalised    # 10k points with the raw t-SNE, about 45 s
    python -m bench.qkmap --quick             # 1k points, all three
"""
from __future__ import annotations

import sys
import time
from typing import Callable

import numpy as np
from threadpoolctl import threadpool_limits

from attention.corpus import qkmap

from .timing import print_table, row

D_K, OCCURRENCES = 64, 10
TARGET = 100.0  # t-SNE's CPU time within 100x PCA's (about 15 s of CPU at 10k points)


def synthetic(n_points: int, seed: int = 0, context: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """n_points / 2 tokens -> q (n/2, 64), k (n/2, 64) float32; query i attends most to the keys
    of the other occurrences of its word (and of words whose vectors happen to be close)."""
    rng = np.random.default_rng(seed)
    n_tok = n_points // 2
    words = np.repeat(np.arange(n_tok // OCCURRENCES), OCCURRENCES)  # (n_tok,)
    x = rng.normal(size=(words.max() + 1, D_K))[words] + context * rng.normal(size=(n_tok, D_K))
    o, _ = np.linalg.qr(rng.normal(size=(D_K, D_K)))
    w = o * np.exp(rng.uniform(-0.3, 0.3, size=D_K))  # (64, 64), q.k = 0.9 x_i.x_j
    q = 3.0 * x @ w + 4.0 * rng.normal(size=D_K)  # long queries, their own offset
    k = 0.3 * x @ np.linalg.inv(w).T + 10.0 * rng.normal(size=D_K)  # short keys, far away
    return q.astype(np.float32), k.astype(np.float32)


def _clock(fn: Callable[[], np.ndarray]) -> tuple[np.ndarray, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def measure(quick: bool = False, not_normalised: bool | None = None) -> list[dict]:
    """One dict per method: name, wall and CPU seconds, ratios to PCA, agreement."""
    q, k = synthetic(1_000 if quick else 10_000)
    import openTSNE  # noqa: F401  (imported before the clock starts: ~1 s, once per process)
    methods: dict[str, Callable[[], np.ndarray]] = {
        "pca": lambda: qkmap.embed(q, k, method="pca"),
        "tsne": lambda: qkmap.embed(q, k, method="tsne"),
    }
    if quick if not_normalised is None else not_normalised:
        raw = np.concatenate([q, k]).astype(np.float64)  # (n, 64): no normalise
        methods["tsne, not normalised"] = lambda: qkmap._tsne(raw, 0)
    try:
        import umap  # noqa: F401  (not a dependency: measured only where someone installed it)

        methods["umap (umap-learn)"] = lambda: umap.UMAP(random_state=0, n_jobs=1).fit_transform(
            np.concatenate(qkmap.normalise(q, k)))
    except ImportError:
        pass
    results = []
    with threadpool_limits(limits=1):
        for name, fn in methods.items():
            xy, wall, cpu = _clock(fn)
            results.append({"method": name, "wall": wall, "cpu": cpu,
                            "agreement": qkmap.neighbour_agreement(q, k, xy)})
    base = results[0]
    for r in results:
        r["ratio"], r["wall_ratio"] = r["cpu"] / base["cpu"], r["wall"] / base["wall"]
    return results


def main(quick: bool = False, not_normalised: bool | None = None) -> list[dict]:
    """Print the table (ratios against PCA) and return its rows."""
    results = measure(quick, not_normalised)
    n = "1k" if quick else "10k"
    print(f"{'method (' + n + ' points)':<24} {'cpu s':>7} {'x pca':>7} {'wall s':>7} {'x pca':>7}"
          f"  agreement")
    for r in results:
        print(f"{r['method']:<24} {r['cpu']:>7.2f} {r['ratio']:>7.1f} {r['wall']:>7.2f} "
              f"{r['wall_ratio']:>7.1f}  {r['agreement']:.3f}")
    print(f"auto = {qkmap.AUTO}")
    return results


def run(quick: bool = False) -> list[dict]:
    """Rows for `python -m bench qkmap`: t-SNE's time against PCA's at 10k points (1k with
    quick, without the raw t-SNE)."""
    by = {r["method"]: r for r in measure(quick, not_normalised=False)}
    return [row(f"qkmap.embed tsne {'1k' if quick else '10k'} points", "qkmap.embed pca",
                by["tsne"]["ratio"], TARGET,
                f"agreement tsne {by['tsne']['agreement']:.2f}, pca {by['pca']['agreement']:.2f}")]


if __name__ == "__main__":
    main(quick="--quick" in sys.argv[1:],
         not_normalised=True if "--not-normalised" in sys.argv[1:] else None)
