"""attention/corpus/qkmap.py: the AttentionViz normalisation keeps every row's softmax, the
joint map puts queries next to the keys they attend to, and the quality measure measures it."""
from __future__ import annotations

import numpy as np
import pytest

from attention.corpus.qkmap import embed, neighbour_agreement, normalise


def softmax_rows(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """softmax(q k^T / sqrt(d)) row by row, written out in float64: exp, then divide by the sum."""
    logits = np.asarray(q, np.float64) @ np.asarray(k, np.float64).T / np.sqrt(q.shape[1])
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def head(n_q: int, n_k: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Queries and keys as a real head has them: far apart (each set with its own large offset)
    and of very different lengths; logits of a few units, so a wrong rescaling shows."""
    rng = np.random.default_rng(seed)
    q = 2.0 * rng.normal(size=(n_q, d)) + 6.0 * rng.normal(size=d)
    k = 0.5 * rng.normal(size=(n_k, d)) + 20.0 * rng.normal(size=d)
    return q.astype(np.float32), k.astype(np.float32)


def clustered(n_clusters: int = 40, per: int = 5, d: int = 32, seed: int = 0):
    """Well-separated key clusters of `per` keys; each query attends to exactly one cluster (its
    logits to that cluster's keys are far above all others). The queries' offset lies along a
    direction in which the keys do not vary, so it moves each row's logits by one constant and
    changes no attention; the keys' offset never does. Also returns each query's cluster."""
    rng = np.random.default_rng(seed)
    centres = 3.0 * rng.normal(size=(n_clusters, d))
    centres[:, 0] = 0.0
    k = np.repeat(centres, per, axis=0) + 0.2 * rng.normal(size=(n_clusters * per, d))
    target = np.repeat(np.arange(n_clusters), per)
    q = 2.0 * centres[target] + 0.2 * rng.normal(size=(len(target), d))
    q[:, 0] += 30.0
    return q.astype(np.float32), (k - 8.0).astype(np.float32), target


@pytest.mark.parametrize("n_q,n_k,d,seed", [(40, 40, 16, 0), (30, 70, 8, 1), (100, 25, 64, 2),
                                            (1, 5, 4, 3)])
def test_normalise_keeps_every_rows_softmax(n_q, n_k, d, seed):
    q, k = head(n_q, n_k, d, seed)
    qn, kn = normalise(q, k)
    assert qn.shape == q.shape and kn.shape == k.shape
    assert qn.dtype == np.float32 and kn.dtype == np.float32
    before, after = softmax_rows(q, k), softmax_rows(qn, kn)
    assert before.max(axis=1).mean() > 0.05  # not flat: rescaling q and k alike would show
    np.testing.assert_allclose(after, before, atol=2e-5)
    # translation: row i's logits move by one constant q_i . c (and scaling moves none)
    raw = q.astype(np.float64) @ k.T.astype(np.float64)
    shift = qn.astype(np.float64) @ kn.T.astype(np.float64) - raw
    np.testing.assert_allclose(shift - shift[:, :1], 0.0, atol=1e-5 * np.abs(raw).max())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_normalise_equal_means_and_equal_mean_norms(seed):
    q, k = head(50, 80, 24, seed)
    qn, kn = normalise(q, k)
    scale = np.linalg.norm(qn, axis=1).mean()
    np.testing.assert_allclose(kn.mean(axis=0), qn.mean(axis=0), atol=1e-5 * scale)
    assert np.linalg.norm(qn, axis=1).mean() == pytest.approx(np.linalg.norm(kn, axis=1).mean(),
                                                              rel=1e-5)
    # the raw sets were far apart and of unequal size: something did move
    assert not np.allclose(k.mean(axis=0), q.mean(axis=0), atol=1.0)
    assert np.linalg.norm(k, axis=1).mean() > 2 * np.linalg.norm(q, axis=1).mean()


def test_normalise_handles_zero_mean_queries_and_refuses_bad_shapes():
    rng = np.random.default_rng(5)
    q = rng.normal(size=(20, 6)).astype(np.float32)
    q -= q.mean(axis=0)  # mean(q) = 0: the keys are centred, then only rescaled
    k = (rng.normal(size=(30, 6)) + 4.0).astype(np.float32)
    qn, kn = normalise(q, k)
    np.testing.assert_allclose(kn.mean(axis=0), 0.0, atol=1e-5)
    assert np.linalg.norm(qn, axis=1).mean() == pytest.approx(np.linalg.norm(kn, axis=1).mean(), rel=1e-5)
    np.testing.assert_allclose(softmax_rows(qn, kn), softmax_rows(q, k), atol=2e-5)
    with pytest.raises(ValueError):
        normalise(q, k[:, :5])
    with pytest.raises(ValueError):
        normalise(q[:0], k)


@pytest.mark.parametrize("method", ["pca", "tsne", "auto"])
def test_embed_shape_finite_and_deterministic(method):
    q, k = head(120, 90, 16, 7)
    xy = embed(q, k, method=method, seed=3)
    assert xy.shape == (210, 2) and xy.dtype == np.float32
    assert np.isfinite(xy).all()
    assert xy.std(axis=0).min() > 0  # not collapsed to a point or a line
    np.testing.assert_array_equal(embed(q, k, method=method, seed=3), xy)


def test_embed_refuses_too_many_points_and_unknown_methods():
    q, k = head(60, 50, 8, 0)
    with pytest.raises(ValueError, match="max_points"):
        embed(q, k, max_points=109)
    assert embed(q, k, method="pca", max_points=110).shape == (110, 2)
    with pytest.raises(ValueError, match="method"):
        embed(q, k, method="mds")


def test_neighbour_agreement_exact_values_on_hand_made_maps():
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    best = (q @ k.T).argmax(axis=1)
    kxy = np.arange(6.0)[:, None] * np.array([[10.0, 0.0]])  # keys 10 apart on a line
    on_best = np.concatenate([kxy[best] + 0.1, kxy])  # each query right by its top key
    assert neighbour_agreement(q, k, on_best, top=1, neighbours=1) == 1.0
    wrong = (best + 1) % 6  # each query right by a key it does not attend to most
    on_wrong = np.concatenate([kxy[wrong] + 0.1, kxy])
    assert neighbour_agreement(q, k, on_wrong, top=1, neighbours=1) == 0.0
    half = np.where(np.arange(6) < 3, best, wrong)
    assert neighbour_agreement(q, k, np.concatenate([kxy[half] + 0.1, kxy]), top=1,
                               neighbours=1) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        neighbour_agreement(q, k, on_best[:-1])


def test_clustered_head_queries_land_by_the_keys_they_attend_to():
    q, k, target = clustered()
    # the constructed attention: each query's top-5 keys are exactly its cluster
    top5 = np.argsort(-(q @ k.T), axis=1)[:, :5]
    assert (top5 // 5 == target[:, None]).all()
    xy = embed(q, k, seed=0)
    good = neighbour_agreement(q, k, xy)
    shuffled = neighbour_agreement(q, k, xy[np.random.default_rng(1).permutation(len(xy))])
    assert good > 0.5, good
    assert shuffled < 0.2, shuffled
    # without the normalisation the queries (offset +5, doubled) sit apart from the keys
    raw = np.concatenate([q, k])
    centred = raw - raw.mean(axis=0)
    pca_raw = centred @ np.linalg.svd(centred, full_matrices=False)[2][:2].T
    assert neighbour_agreement(q, k, pca_raw) < good
