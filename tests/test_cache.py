"""Shared (process-wide) caches are keyed by content: two inputs that differ anywhere never
get each other's results, however alike their spec, shape or sums (issue 12, part 3)."""
from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from attention.files import upload
from attention.charts import heatmap as charts
from attention.analysis.pooled import pooled_matrices
from attention.spec import AttentionSpec
from attention.ui import cache
from attention.ui.views import heatmap as heatmap_view
from attention.ui.views import upload as upload_view

N, D, BIG = 100, 100, 1e4      # q.k gaps of 1e4 (1e3 scaled): every softmax row is exactly one-hot
SPEC = AttentionSpec()
TYPED = " ".join(f"t{i}" for i in range(N))


def npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array.astype(np.float32), allow_pickle=False)
    return buf.getvalue()


def one_hot_upload(targets: list[int]) -> tuple[tuple[str, bytes], tuple[str, bytes]]:
    """Q, K files where query i attends key targets[i] with weight exactly 1 (scaled and not)."""
    k = np.eye(N, D)                                              # (n, d)
    q = BIG * np.eye(D)[targets]                                  # (n, d)
    return ("q.npy", npy(q)), ("k.npy", npy(k))


def old_fingerprint(a) -> tuple:
    """The key heatmap_view used before: spec, shape and three sums of the weights."""
    w, u = a.scaled.weights, a.unscaled.weights
    return (tuple(sorted(a.spec.to_query().items())), tuple(w.shape),
            float(w.sum()), float(u.sum()), float(w[..., -1].sum()))


@pytest.fixture
def colliding():
    """Two uploads equal in spec, shape and every sum the old key used: the diagonal, and
    the anti-diagonal with the last row kept (so the last column sums to 1 in both)."""
    diagonal = list(range(N))
    anti = [N - 2 - i for i in range(N - 1)] + [N - 1]
    return [upload_view._qkv_analysis(SPEC, *one_hot_upload(t), None, TYPED)
            for t in (diagonal, anti)]


def test_crafted_uploads_collide_under_the_old_key_but_get_their_own_images(colliding):
    a, b = colliding
    assert old_fingerprint(a) == old_fingerprint(b)               # the collision is real
    assert a.digest != b.digest
    for analysis in (a, b):
        shown = heatmap_view._images(analysis, (0,), heatmap_view.OVERVIEW_BLOCKS, "max")
        pooled, _ = pooled_matrices(analysis, [0], heatmap_view.OVERVIEW_BLOCKS, "max")
        own = charts.pooled_images({v: m.numpy() for v, m in pooled.items()}, True, charts.VALUES)
        assert shown == own                                       # its own data, not the other's
    first = heatmap_view._images(a, (0,), heatmap_view.OVERVIEW_BLOCKS, "max")
    second = heatmap_view._images(b, (0,), heatmap_view.OVERVIEW_BLOCKS, "max")
    assert first["weight"] != second["weight"]


def test_the_weights_behind_the_images_are_each_uploads_own(colliding):
    a, b = colliding
    assert torch.equal(a.result(True, 0).weights, torch.eye(N))
    assert a.result(True, 0).weights.argmax(-1).tolist() == list(range(N))
    assert b.result(True, 0).weights.argmax(-1).tolist() == [N - 2 - i for i in range(N - 1)] + [N - 1]


def test_a_different_content_never_returns_another_inputs_cached_result():
    """Uploads alike in all but one value, or in all but the typed tokens, or in all but the
    file name's format, each get an Analysis of their own content."""
    gen = np.random.default_rng(0)
    q, k = gen.standard_normal((2, 70, 8)), gen.standard_normal((2, 70, 8))
    q2 = q.copy()
    q2[1, 69, 7] = np.nextafter(np.float32(q[1, 69, 7]), np.float32(np.inf))   # one ulp
    typed = " ".join(f"a{i}" for i in range(70))
    cases = [(q, typed), (q2, typed), (q, typed.replace("a69", "z69"))]
    seen = []
    for values, tokens in cases + cases:                         # the second pass hits the cache
        a = upload_view._qkv_analysis(SPEC, ("q.npy", npy(values)), ("k.npy", npy(k)), None,
                                      tokens)
        assert torch.equal(a.q, torch.from_numpy(values.astype(np.float32)))
        assert a.tokens == tuple(tokens.split())
        seen.append(a)
    assert len({id(a) for a in seen}) == 3 and [id(a) for a in seen[:3]] == [id(a) for a in seen[3:]]
    assert len({a.digest for a in seen}) == 3
    for a in seen[:2]:
        heatmap_view._images(a, (1,), heatmap_view.OVERVIEW_BLOCKS, "max")
    kept = [key for key in cache.store().keys() if key[0] == "images"]
    assert sorted(key[1] for key in kept) == sorted(a.digest for a in seen[:2])  # one ulp: 2 entries


def test_file_keys_hash_every_byte():
    data = npy(np.zeros((3, 4)))
    changed = data[:-1] + bytes([data[-1] ^ 1])
    assert cache.file_key(("q.npy", data)) != cache.file_key(("q.npy", changed))
    assert cache.file_key(("q.npy", data)) != cache.file_key(("q.csv", data))
    assert cache.file_key(None) is None


def test_matrix_uploads_are_keyed_by_their_bytes():
    w1 = np.full((1, 70, 70), 1 / 70)
    w2 = w1.copy()
    w2[0, 5] = np.eye(70)[3]                                     # same shape and row sums
    tokens = tuple(f"m{i}" for i in range(70))
    got = [upload_view._matrix(("w.npy", npy(w)), "", tokens)[1] for w in (w1, w2)]
    assert not torch.equal(got[0], got[1]) and float(got[1][0, 5, 3]) == 1.0


def test_upload_analysis_is_the_upload_modules(colliding):
    a, _ = colliding
    direct = upload.qkv_analysis(SPEC, *one_hot_upload(list(range(N))), None, TYPED)
    assert direct.digest == a.digest


def test_a_built_chart_is_kept_per_content_and_is_the_chart_its_builder_makes():
    """cache.built freezes a chart of stored results once per content of its arguments: the
    same frames (equal, not the same object) give the kept figure, a frame that differs in
    one value gives its own; what it sends is what the builder's chart sends; a builder of
    Panels is frozen panel by panel."""
    import pandas as pd

    from attention.charts import experiment as sharper
    from attention.charts.vega import Figure, page_spec

    def same_chart(a, b) -> bool:       # the same spec and the same data sets
        spec_a, spec_b = page_spec(a), page_spec(b)
        data_a, data_b = spec_a.pop("datasets", {}), spec_b.pop("datasets", {})
        return (spec_a == spec_b and data_a.keys() == data_b.keys()
                and all(data_a[name].equals(data_b[name]) for name in data_a))

    cache.store().clear()
    sweep = pd.DataFrame({"multiplier": [0.5, 1.0, 2.0], "accuracy": [0.61, 0.8, 0.72],
                          "max_weight": [0.3, 0.5, 0.7], "effective_tokens": [5.0, 3.0, 1.5],
                          "relevant_mass": [0.4, 0.6, 0.65]})
    kept = cache.built(sharper.mass_chart, sweep, "en")
    assert isinstance(kept, Figure)
    assert cache.built(sharper.mass_chart, sweep.copy(), "en") is kept
    assert same_chart(kept, sharper.mass_chart(sweep, "en"))
    changed = sweep.copy()
    changed.loc[1, "accuracy"] = 0.81
    assert cache.built(sharper.mass_chart, changed, "en") is not kept
    assert cache.built(sharper.mass_chart, sweep, "zh") is not kept
    panels = cache.built(sharper.sharpening_panels, sweep, "en")
    direct = sharper.sharpening_panels(sweep, "en")
    assert len(panels.charts) == len(direct.charts) == 2
    assert all(map(same_chart, panels.charts, direct.charts))
    assert all(isinstance(p, Figure) for p in panels.charts)
