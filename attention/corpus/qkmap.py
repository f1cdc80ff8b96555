"""Joint 2-D map of queries and keys (AttentionViz, Yeh et al., IEEE VIS 2023).

One head's queries and keys are laid out in the same plane, so that a query lands near the keys
it attends to. Raw q and k usually sit in two separate regions (a head's keys share a large
common offset that softmax ignores), so they are first moved using the two freedoms softmax
leaves:

* translation: k_j -> k_j + c shifts row i's logits by q_i.c / sqrt(d), the same for every key
  of that row, so every row's softmax is unchanged;
* scaling: q -> a q, k -> k / a leaves every q.k unchanged.

`normalise` uses both so that afterwards mean(k) == mean(q) and mean |q| == mean |k|: the two
steps AttentionViz describes (keys translated so their centroid is the queries' centroid, then
queries and keys scaled to the same average norm). Its reference repository,
catherinesyeh/attention-viz, does not contain that step: its Python is a Flask back end that
serves precomputed per-head JSON (tsne_x/y, umap_x/y, pca_x/y and a norm per token) and
archive scripts that copy coordinates out of plotly HTML, and its Vue front end only rescales
those coordinates to each plot's cell. So the exact formula is not checkable there.
One difference follows from the algebra: done one after the other, the steps undo each other.
Translating first and then scaling by a != 1 leaves mean(k') = mean(q') / a^2; scaling first
and then translating changes mean |k| again. Here one s = a^2 is solved for, so that both
equalities hold together (`_shift_for`).

`embed` projects the normalised points with PCA or t-SNE (see `AUTO` for the measured choice);
`neighbour_agreement` scores a map by whether each query's top attended keys are among its
nearest keys in the plane.
"""
from __future__ import annotations

import numpy as np

# Measured by bench/qkmap.py at 10k points, one thread: t-SNE's agreement 0.72 against PCA's
# 0.02, for 39-45x PCA's time (14-16 s of CPU). UMAP (umap-learn 0.5.12, measured outside the
# venv) scored 0.73 in 18 s when warm, but its first call in a process took 46 s to import and
# 96 s to compile (numba; llvmlite alone is 173 MB), so it is not offered.
AUTO = "tsne"
METHODS = ("pca", "tsne")


def _shift_for(q: np.ndarray, k: np.ndarray) -> float:
    """The s = a^2 > 0 with s * mean|q| == mean|k - mean(k) + s * mean(q)|, by bisection.

    q' = sqrt(s) q and k' = (k - mean(k) + s mean(q)) / sqrt(s) then have equal means and equal
    mean norms. f(s) = mean|k - mean(k) + s mean(q)| - s mean|q| is convex, positive at 0 and
    has slope |mean(q)| - mean|q| < 0 at infinity (triangle inequality), so it has one root,
    about s0 / sqrt(2 r (1 - r)) for r = |mean(q)| / mean|q| and s0 = mean|k - mean(k)| / mean|q|.
    If all queries point one way (r = 1: one query, say) there is none; s is capped at 100 s0
    (r would have to be within 5e-5 of 1), where float32 still keeps the logits to ~1e-5."""
    kc = k - k.mean(axis=0)  # (n_k, d)
    mq = q.mean(axis=0)  # (d,)
    nq, nk = float(np.linalg.norm(q, axis=1).mean()), float(np.linalg.norm(kc, axis=1).mean())
    if nq == 0.0 or nk == 0.0:  # all queries zero, or all keys equal: nothing to scale
        return 1.0
    cap = 100.0 * nk / nq

    def f(s: float) -> float:
        return float(np.linalg.norm(kc + s * mq, axis=1).mean()) - s * nq

    lo, hi = 0.0, nk / nq
    while f(hi) > 0.0:
        if hi >= cap:
            return cap
        lo, hi = hi, min(2.0 * hi, cap)
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) > 0.0 else (lo, mid)
    return 0.5 * (lo + hi)


def normalise(q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Translate the keys and rescale q by a, k by 1/a (softmax(q k^T / sqrt(d)) unchanged in
    every row) so that mean(k) == mean(q) and mean |q| == mean |k|.

    q: (n_q, d), k: (n_k, d) -> (n_q, d), (n_k, d) float32. Computed in float64."""
    q64, k64 = np.asarray(q, np.float64), np.asarray(k, np.float64)
    if q64.ndim != 2 or k64.ndim != 2 or q64.shape[1] != k64.shape[1] or not len(q64) or not len(k64):
        raise ValueError(f"need q (n_q, d) and k (n_k, d) with n_q, n_k >= 1, got {q64.shape}, {k64.shape}")
    s = _shift_for(q64, k64)
    a = np.sqrt(s)
    k_new = (k64 - k64.mean(axis=0) + s * q64.mean(axis=0)) / a  # (n_k, d): translate, then 1/a
    return (a * q64).astype(np.float32), k_new.astype(np.float32)


def _pca(x: np.ndarray) -> np.ndarray:
    """x (n, d) -> (n, 2): the top two principal components, signs fixed so that each axis's
    largest loading is positive (SVD's signs are otherwise arbitrary across BLAS builds)."""
    xc = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(xc, full_matrices=False)  # vt: (min(n, d), d)
    axes = vt[:2]
    axes = axes * np.sign(axes[np.arange(len(axes)), np.abs(axes).argmax(axis=1)])[:, None]
    out = xc @ axes.T
    return np.pad(out, ((0, 0), (0, 2 - out.shape[1])))  # d == 1: a zero second axis


def _tsne(x: np.ndarray, seed: int) -> np.ndarray:
    """x (n, d) -> (n, 2) with openTSNE, initialised from PCA (so the global layout is PCA's).

    Settings measured at 10k points, d = 64 (the data of bench/qkmap.py): openTSNE's defaults
    (250 exaggerated + 500 iterations, Annoy neighbours, perplexity 30) took 8x as long for no
    better agreement (0.70 vs 0.72); exact neighbours beat Annoy here (13 s vs 17 s);
    scikit-learn's TSNE, whose exaggerated phase is fixed at 250 iterations, needed 34-50 s for
    0.71-0.73. One thread, as the dashboard runs: on the shared 2-core box a second OpenMP or
    BLAS thread made t-SNE and the SVD slower, not faster.
    Deterministic for a seed: exact neighbours, PCA initialisation, one thread."""
    from openTSNE import TSNE  # imported here: the other pages never pay for it

    tsne = TSNE(n_components=2, perplexity=float(min(15.0, (len(x) - 1) / 3.0)), neighbors="exact",
                initialization="pca", early_exaggeration_iter=100, n_iter=150, random_state=seed,
                n_jobs=1, verbose=False)
    return np.asarray(tsne.fit(x))


def embed(q: np.ndarray, k: np.ndarray, *, method: str = "auto", seed: int = 0,
          max_points: int = 10_000) -> np.ndarray:
    """Normalise q (n_q, d) and k (n_k, d), then map all n_q + n_k points jointly to the plane.

    Returns (n_q + n_k, 2) float32: the queries' rows first, then the keys'. "auto" is `AUTO`.
    More than `max_points` points is refused (t-SNE's time and memory grow with n; sample first).
    """
    name = AUTO if method == "auto" else method
    if name not in METHODS:
        raise ValueError(f"method must be 'auto' or one of {METHODS}, got {method!r}")
    n = len(q) + len(k)
    if n > max_points:
        raise ValueError(f"{n} points is more than max_points={max_points}: sample them first")
    qn, kn = normalise(q, k)
    x = np.concatenate([qn, kn]).astype(np.float64)  # (n_q + n_k, d)
    if n < 3:
        xy = _pca(x)
    else:
        xy = _pca(x) if name == "pca" else _tsne(x, seed)
    return np.ascontiguousarray(xy, dtype=np.float32)


def neighbour_agreement(q: np.ndarray, k: np.ndarray, xy: np.ndarray, top: int = 5,
                        neighbours: int = 10) -> float:
    """The mean over queries of the fraction of the query's `top` most-attended keys (largest
    q.k / sqrt(d), i.e. largest softmax weight) found among its `neighbours` nearest keys in xy.

    q: (n_q, d), k: (n_k, d), xy: (n_q + n_k, 2), queries first. 1.0: the map puts every
    query next to the keys it attends to; a random map scores about neighbours / n_k.
    Rows are taken in blocks so that no (n_q, n_k) matrix is held whole."""
    q, k, xy = (np.asarray(a, np.float64) for a in (q, k, xy))
    n_q, n_k = len(q), len(k)
    if xy.shape != (n_q + n_k, 2):
        raise ValueError(f"xy must be ({n_q + n_k}, 2), got {xy.shape}")
    top, neighbours = min(top, n_k), min(neighbours, n_k)
    qxy, kxy = xy[:n_q], xy[n_q:]  # (n_q, 2), (n_k, 2)
    hits = 0
    for start in range(0, n_q, 1024):
        rows = slice(start, start + 1024)
        logits = q[rows] @ k.T  # (b, n_k); the 1/sqrt(d) does not change the order
        attended = np.argpartition(-logits, top - 1, axis=1)[:, :top]  # (b, top)
        dist = (qxy[rows] ** 2).sum(1)[:, None] - 2 * qxy[rows] @ kxy.T + (kxy ** 2).sum(1)  # (b, n_k)
        near = np.argpartition(dist, neighbours - 1, axis=1)[:, :neighbours]  # (b, neighbours)
        hits += sum(len(np.intersect1d(a, b)) for a, b in zip(attended, near))
    return hits / (n_q * top)
