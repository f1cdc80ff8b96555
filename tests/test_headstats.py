"""Per-head table, attention rollout and value-weighted norms against hand computations."""
from __future__ import annotations

import math

import pytest
import torch

from attention.measures import heads as headstats
from attention.measures.rollout import rollout


def test_rollout_two_layers_by_hand():
    w = torch.tensor([
        [[[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]],   # layer 0: mean [[1,0],[.5,.5]]
        [[[0.0, 1.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]],   # layer 1: mean [[0,1],[.5,.5]]
    ])                                                           # (layers=2, heads=2, n=2, n=2)
    r = rollout(w)
    # A_0 = 0.5 mean + 0.5 I = [[1, 0], [.25, .75]];  A_1 = [[.5, .5], [.25, .75]]
    # R_0 = A_0;  R_1 = A_1 @ A_0 = [[.625, .375], [.4375, .5625]]
    assert torch.allclose(r[0], torch.tensor([[1.0, 0.0], [0.25, 0.75]]))
    assert torch.allclose(r[1], torch.tensor([[0.625, 0.375], [0.4375, 0.5625]]))


def test_rollout_renormalises_a_fully_masked_row():
    w = torch.tensor([[[[0.0, 0.0], [0.0, 1.0]]]])              # (1, 1, 2, 2): row 0 all masked
    assert torch.allclose(rollout(w)[0], torch.eye(2))


def test_patterns_identity_and_shift():
    n = 5
    tokens = ["[CLS]", "a", ",", "b", "[SEP]"]
    eye = torch.eye(n)
    prev = torch.diag(torch.ones(n - 1), -1)
    prev[0, 0] = 1.0                                             # row 0 has no previous token
    stats = headstats.head_stats(torch.stack([eye, prev]), tokens)   # (2,)
    assert stats["to_self"].tolist() == pytest.approx([1.0, 0.2])
    assert stats["to_prev"].tolist() == pytest.approx([0.0, 1.0])
    assert stats["to_next"].tolist() == pytest.approx([0.0, 0.0])
    assert stats["entropy"].tolist() == pytest.approx([0.0, 0.0], abs=1e-7)
    assert stats["max_weight"].tolist() == pytest.approx([1.0, 1.0])
    # identity: the query [CLS] puts 1 on [CLS] -> share 1/5; prev: rows 0 and 1 -> 2/5
    assert stats["to_cls"].tolist() == pytest.approx([0.2, 0.4])
    assert stats["to_sep"].tolist() == pytest.approx([0.2, 0.0])
    assert stats["to_punct"].tolist() == pytest.approx([0.2, 0.2])


def test_padded_table_equals_each_text_alone():
    """Three texts of 1, 4 and 6 pieces right-padded to 6 (padding keys weigh 0, padding
    query rows hold junk, even NaN): each text's rows equal head_table + sink_table of its
    own cut weights."""
    g = torch.Generator().manual_seed(0)
    tokens = [["[CLS]"], ["[CLS]", "a", ",", "[SEP]"], ["[CLS]", "b", ".", "c", "d", "[SEP]"]]
    special = [[True], [True, False, False, True], [True, False, False, False, False, True]]
    n = 6
    weights = torch.full((3, 2, 3, n, n), float("nan"))                 # (b, layers, heads, n, n)
    alone = []
    for i, toks in enumerate(tokens):
        m = len(toks)
        w = torch.rand(2, 3, m, m, generator=g).softmax(dim=-1)          # (layers, heads, m, m)
        weights[i, :, :, :m, :] = 0.0
        weights[i, :, :, :m, :m] = w
        alone.append(headstats.head_table(w, toks).merge(
            headstats.sink_table(w, torch.tensor(special[i])), on=["layer", "head"]))
    got = headstats.padded_table(weights, tokens, special)
    assert list(got.columns) == ["text", "layer", "head", *headstats.HEAD_COLUMNS,
                                 *headstats.SINK_COLUMNS]
    for i, ref in enumerate(alone):
        mine = got[got.text == i].drop(columns="text").reset_index(drop=True)
        assert list(mine.columns) == list(ref.columns)
        assert torch.allclose(torch.tensor(mine.to_numpy(dtype=float)),
                              torch.tensor(ref.to_numpy(dtype=float)), atol=1e-6, rtol=0)
    # the one-piece text: no previous or next token, all its weight on itself
    one = got[got.text == 0]
    assert (one.to_prev == 0).all() and (one.to_next == 0).all() and (one.to_self == 1).all()


def test_punctuation_tokens():
    assert all(map(headstats.is_punctuation, [".", ",", "--", "?!", "$", "##.", '"']))
    assert not any(map(headstats.is_punctuation, ["a", "[SEP]", "##s", "3", "", "it's"]))


def test_head_table_agrees_with_the_model_tensors():
    from attention.config import BUNDLED
    from attention.models import runs

    text = "the cat sat on the mat, then it slept."
    run = runs.run(BUNDLED, text)
    tokens, w = run.tokens, run.weights                          # (6, 12, n, n)
    table = headstats.head_table(w, tokens)
    n = len(tokens)
    assert len(table) == 72
    assert list(table.columns) == ["layer", "head", *headstats.HEAD_COLUMNS]
    punct = [j for j, tok in enumerate(tokens) if tok in (",", ".")]
    sep = tokens.index("[SEP]")
    for layer, head in [(0, 0), (2, 7), (5, 11)]:
        row = table.set_index(["layer", "head"]).loc[(layer, head)]
        m = w[layer, head].tolist()
        ent = sum(-sum(p * math.log(p) for p in r if p > 0) for r in m) / n
        assert row.entropy == pytest.approx(ent, rel=1e-4)
        assert row.max_weight == pytest.approx(sum(max(r) for r in m) / n, rel=1e-5)
        assert row.to_cls == pytest.approx(sum(r[0] for r in m) / n, rel=1e-5)
        assert row.to_sep == pytest.approx(sum(r[sep] for r in m) / n, rel=1e-5)
        assert row.to_punct == pytest.approx(sum(r[j] for r in m for j in punct) / n, rel=1e-5)
        assert row.to_prev == pytest.approx(sum(m[i][i - 1] for i in range(1, n)) / (n - 1), rel=1e-5)
        assert row.to_next == pytest.approx(sum(m[i][i + 1] for i in range(n - 1)) / (n - 1), rel=1e-5)
        assert row.to_self == pytest.approx(sum(m[i][i] for i in range(n)) / n, rel=1e-5)
    # rollout of the real heads: every R_l is row-stochastic
    r = rollout(w)
    assert r.shape == (6, n, n)
    assert torch.allclose(r.sum(-1), torch.ones(6, n), atol=1e-5)


def test_value_weighted_norms_direct():
    gen = torch.Generator().manual_seed(0)
    alpha = torch.rand(3, 4, 4, generator=gen).softmax(-1)      # (heads, n, n)
    f = torch.randn(3, 4, 7, generator=gen)                      # (heads, n, hidden)
    got = headstats.value_weighted_norms(alpha, f)
    for h in range(3):
        for i in range(4):
            for j in range(4):
                direct = torch.linalg.vector_norm(alpha[h, i, j] * f[h, j]).item()
                assert got[h, i, j].item() == pytest.approx(direct, rel=1e-6)


def test_grid_frame_is_each_query_blocks_share_of_attention_per_key_block():
    """30 positions into at most 12 blocks, cut as the heatmap's pooling cuts them (blocks of
    ceil(30 / 12) = 3: position i in block i // 3, 10 blocks): a cell is the mean over the
    block's queries of the weight they put on the key block's positions, by hand."""
    gen = torch.Generator().manual_seed(7)
    w = torch.softmax(torch.randn(2, 3, 30, 30, generator=gen) * 2, dim=-1)   # (2, 3, 30, 30)
    tokens = [f"t{i}" for i in range(30)]
    frame = headstats.grid_frame(w, tokens, cells=12)
    assert len(frame) == 2 * 3 * 10 * 10
    block = [i // 3 for i in range(30)]
    for row in frame.sample(40, random_state=0).itertuples():
        qs = [i for i in range(30) if block[i] == row.qb]
        ks = [j for j in range(30) if block[j] == row.kb]
        want = sum(w[row.layer, row.head, i, j].item() for i in qs for j in ks) / len(qs)
        assert row.weight == pytest.approx(want, rel=1e-5)
        assert row.query == (f"t{qs[0]} ·{qs[0]}" if len(qs) == 1 else f"·{qs[0]}–·{qs[-1]}")
    sums = frame.groupby(["layer", "head", "qb"])["weight"].sum()
    assert sums.to_numpy() == pytest.approx(1.0, abs=1e-5)
