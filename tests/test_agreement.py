"""attention.importance.concordance (agreement) and erasure (faithfulness) against hand computations: scipy's
Spearman text by text, and bootstraps and permutations written out here with the same
documented seeds; faithfulness's targets against plain transformers forwards."""
from __future__ import annotations

import inspect
import math
import time

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import spearmanr

from attention.importance.concordance import agreement, beyond_null
from attention.importance.erasure import faithfulness, removal_sets
from attention import models as M
from tests.tiny_models import tiny  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow     # faithfulness forwards on tiny models: left out of make test-fast


def _table(texts=8, layers=2, seed=0, lengths=(6, 14)) -> pd.DataFrame:
    """A token_importance-like frame: [CLS] w ... w [SEP], occlusion NaN on the specials,
    gradient correlated with occlusion, attention_<l> noisier with depth."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(texts):
        n = int(rng.integers(*lengths))
        occ = rng.random(n)
        for p in range(n):
            special = p in (0, n - 1)
            row = {"text": t, "position": p,
                   "token": "[CLS]" if p == 0 else "[SEP]" if special else f"w{rng.integers(6)}",
                   "special": special, "occlusion": np.nan if special else occ[p],
                   "gradient": occ[p] + rng.normal(0, 0.3), "ig_gap": 0.01}
            for layer in range(layers):
                row[f"attention_{layer}"] = rng.random() + 0.3 * layer * occ[p]
                row[f"rollout_{layer}"] = rng.random() + occ[p] * (layer + 1)
            rows.append(row)
    table = pd.DataFrame(rows)
    table["rollout"] = table[f"rollout_{layers - 1}"]          # the alias: not a method
    return table


def _row(frame, method, layer=None, mean=False):
    got = frame[(frame["method"] == method) & (frame["layer_mean"] == mean)]
    got = got[got["layer"].isna()] if layer is None else got[got["layer"] == layer]
    assert len(got) == 1, (method, layer, mean)
    return got.iloc[0]


def _per_text(table, column, against="occlusion"):
    words = table[~table["special"]]
    return np.array([spearmanr(g[column], g[against]).statistic
                     for _, g in words.groupby("text")])


def _boot(per_text, n_boot, seed):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(per_text), size=(n_boot, len(per_text)))
    means = [np.nanmean(per_text[i]) for i in idx]
    return np.percentile(means, [2.5, 97.5])


def test_statistic_is_the_mean_of_scipys_spearman_per_text():
    table = _table()
    got = agreement(table, n_boot=50)
    for column, (method, layer) in {"gradient": ("gradient", None),
                                    "attention_1": ("attention", 1.0),
                                    "rollout_0": ("rollout", 0.0)}.items():
        row = _row(got, method, layer)
        rho = _per_text(table, column)
        assert row["spearman"] == pytest.approx(rho.mean(), abs=1e-12)
        assert row["texts"] == 8 and row["skipped"] == 0
        assert row["pieces"] == int((~table["special"]).sum())
    # the bare alias and the diagnostics are no methods; baselines are rows
    assert not ((got["method"] == "rollout") & got["layer"].isna() & ~got["layer_mean"]).any()
    assert "ig_gap" not in set(got["method"])
    assert {"random", "position_start", "position_end", "inverse_frequency"} <= set(got["method"])
    assert got["baseline"].sum() == 4


def test_words_only_off_pairs_only_where_both_are_defined():
    table = _table()
    table.loc[table["special"], "occlusion"] = 0.0         # now defined on the specials too
    got = agreement(table, words_only=False, n_boot=20)
    want = [spearmanr(g["gradient"], g["occlusion"]).statistic for _, g in table.groupby("text")]
    assert _row(got, "gradient")["spearman"] == pytest.approx(np.mean(want), abs=1e-12)
    assert _row(got, "gradient")["pieces"] == len(table)


def test_bootstrap_interval_is_the_documented_percentile_bootstrap():
    table = _table(texts=12)
    got = agreement(table, n_boot=400, seed=3)
    for column, method, layer in (("gradient", "gradient", None), ("attention_0", "attention", 0.0)):
        low, high = _boot(_per_text(table, column), 400, 3)
        row = _row(got, method, layer)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), abs=1e-12)


def test_nan_texts_are_skipped_and_counted():
    table = _table(texts=6)
    table.loc[table["text"] == 2, "attention_0"] = 0.5      # constant: no rho
    table.loc[table["text"] == 4, "rollout_1"] = np.nan     # e.g. flow past its cap
    got = agreement(table, n_boot=100, seed=1)
    for column, method, layer in (("attention_0", "attention", 0.0), ("rollout_1", "rollout", 1.0)):
        rho = _per_text(table, column)
        assert np.isnan(rho).sum() == 1
        row = _row(got, method, layer)
        assert row["spearman"] == pytest.approx(np.nanmean(rho), abs=1e-12)
        assert row["texts"] == 5 and row["skipped"] == 1
        low, high = _boot(rho, 100, 1)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), abs=1e-12)


def test_null_band_is_the_documented_permutation_within_texts():
    table = _table(texts=5)
    n_boot, seed = 120, 7
    got = agreement(table, n_boot=n_boot, seed=seed)
    words = table[~table["special"]]
    rng = np.random.default_rng([seed, 1])
    columns = ["gradient", "attention_0", "attention_1"]
    null = np.zeros((n_boot, len(columns)))
    for _, g in words.groupby("text"):
        y = g["occlusion"].to_numpy()
        perm = rng.permuted(np.tile(np.arange(len(y)), (n_boot, 1)), axis=1)
        for c, column in enumerate(columns):
            null[:, c] += [spearmanr(g[column], y[p]).statistic for p in perm]
    null /= 5
    for c, (method, layer) in enumerate((("gradient", None), ("attention", 0.0),
                                         ("attention", 1.0))):
        row = _row(got, method, layer)
        low, high = np.percentile(null[:, c], [2.5, 97.5])
        assert (row["null_low"], row["null_high"]) == pytest.approx((low, high), abs=1e-10)


def test_layer_mean_row_is_the_per_text_mean_over_layers():
    table = _table(texts=10, layers=3)
    got = agreement(table, n_boot=300, seed=2)
    per_text = np.mean([_per_text(table, f"attention_{layer}") for layer in range(3)], axis=0)
    row = _row(got, "attention", mean=True)
    assert np.isnan(row["layer"])
    assert row["spearman"] == pytest.approx(per_text.mean(), abs=1e-12)
    low, high = _boot(per_text, 300, 2)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), abs=1e-12)


def test_baselines_are_what_they_say():
    table = _table(texts=10)
    got = agreement(table, n_boot=200)
    words = table[~table["special"]].copy()
    last = table.groupby("text")["position"].transform("max")
    words["start"] = words["position"]
    words["end"] = last[words.index] - words["position"]
    counts = table["token"].value_counts()
    words["freq"] = -np.log(words["token"].map(counts).astype(float))
    assert _row(got, "position_start")["spearman"] == pytest.approx(
        _per_text(words.assign(special=False), "start").mean(), abs=1e-12)
    assert _row(got, "position_end")["spearman"] == pytest.approx(
        -_row(got, "position_start")["spearman"], abs=1e-12)
    freq = _per_text(words.assign(special=False), "freq")
    assert _row(got, "inverse_frequency")["spearman"] == pytest.approx(np.nanmean(freq), abs=1e-12)
    # random scores sit inside their null band; a copy of the target lies far outside it
    rand = _row(got, "random")
    assert rand["ci_low"] < rand["null_high"] and rand["ci_high"] > rand["null_low"]
    same = agreement(table.assign(copy=table["occlusion"] * 2), n_boot=200)
    row = _row(same, "copy")
    assert row["spearman"] == pytest.approx(1.0) and beyond_null(row)


def test_seeded_and_fast_enough_for_a_page():
    table = _table(texts=300, layers=6, lengths=(8, 30))
    for family in ("flow", "norm", "attention_mean"):
        for layer in range(6):
            table[f"{family}_{layer}"] = np.random.default_rng(layer).random(len(table))
    start = time.process_time()            # CPU time: a busy machine does not count
    got = agreement(table, n_boot=1000)
    took = time.process_time() - start
    assert len(got) >= 40
    assert took < 20, f"{took:.1f} s for 300 texts x {len(got)} rows x 1000 resamples"
    again = agreement(table, n_boot=1000)
    pd.testing.assert_frame_equal(got, again)


# ---------------------------------------------------------------------------- faithfulness


def test_removal_sets_take_the_ceiling_of_the_removable_pieces():
    scores = np.array([9.0, 0.3, 0.9, 0.1, 0.9, 0.5, 9.0])
    removable = np.array([False, True, True, True, True, True, False])   # 5 words
    got = removal_sets(scores, removable, (0.1, 0.2, 0.3, 0.5, 1.0))
    assert got == [(2,), (2,), (2, 4), (2, 4, 5), (1, 2, 3, 4, 5)]       # ceil 0.5, 1, 1.5, 2.5
    assert removal_sets(np.array([1, np.nan, 2.0]), np.array([True, True, True]), (0.5,)) is None


def test_faithfulness_is_the_mean_change_with_a_text_bootstrap():
    """A fake target whose change is the summed hidden weight of the removed pieces: each
    method's change is computed here by hand from its top pieces."""
    table = _table(texts=9)
    weight = np.random.default_rng(5).random(len(table))
    table["truth"] = weight
    fractions = (0.2, 0.5)

    start_of = {t: int(g.index.min()) for t, g in table.groupby("text")}

    def per_text(column):
        out = np.zeros((9, len(fractions)))
        for t, g in table.groupby("text"):
            words = g[~g["special"]]
            order = words.sort_values(column, ascending=False, kind="stable")
            for f, fraction in enumerate(fractions):
                k = math.ceil(fraction * len(words))
                out[t, f] = weight[order.index[:k]].sum()
        return out

    def by_text(model, text, ids, removals):
        t = int(text)
        return np.array([weight[start_of[t] + np.array(r)].sum() for r in removals])

    got = faithfulness(None, [str(t) for t in range(9)], fractions, table=table, n_boot=300,
                       seed=4, changes=by_text)
    for column, method, layer in (("truth", "truth", None), ("gradient", "gradient", None),
                                  ("attention_1", "attention", 1.0)):
        want = per_text(column)
        rows = got[(got["method"] == method)]
        rows = rows[rows["layer"].isna()] if layer is None else rows[rows["layer"] == layer]
        assert np.allclose(rows["change"], want.mean(axis=0), atol=1e-12)
        for f in range(len(fractions)):
            low, high = _boot(want[:, f], 300, 4)
            assert rows["ci_low"].iloc[f] == pytest.approx(low, abs=1e-12)
            assert rows["ci_high"].iloc[f] == pytest.approx(high, abs=1e-12)
        assert rows["aopc"].iloc[0] == pytest.approx(want.mean(), abs=1e-12)
        low, high = _boot(want.mean(axis=1), 300, 4)
        assert (rows["aopc_low"].iloc[0], rows["aopc_high"].iloc[0]) == pytest.approx((low, high))
        assert (rows["texts"] == 9).all()
    # the true weights beat the random order, every method and baseline is a row
    assert got[got["method"] == "truth"]["aopc"].iloc[0] > got[got["method"] == "random"]["aopc"].iloc[0]
    assert {"random", "occlusion", "gradient", "position_start"} <= set(got["method"])


def _plain_outputs(model, rows):
    """Plain transformers forwards, one id list at a time: unit mean-pooled embeddings
    (sentence model) or the final logits."""
    out = []
    with torch.no_grad():
        for ids in rows:
            x = torch.tensor([ids])
            takes = "token_type_ids" in inspect.signature(model.model.forward).parameters
            kw = {"token_type_ids": torch.zeros_like(x)} if takes else {}   # as run() passes
            got = model.model(input_ids=x, **kw)
            out.append(F.normalize(got.last_hidden_state[0].mean(dim=0), dim=0)
                       if model.head == "none" else got.logits[0])
    return out


@pytest.mark.parametrize("name", ["bert_base", "gpt2"])
def test_faithfulness_targets_are_plain_forwards(tiny, name):
    from attention.importance import token_importance

    model = M.load_model(str(tiny[name]), trusted=True)
    texts = ["the cat sat on the mat .", "a dog barked at the moon tonight"]
    table = token_importance(model, texts)
    got = faithfulness(model, texts, (0.3,), table=table, n_boot=50)
    for t, text in enumerate(texts):
        rows = table[table["text"] == t].sort_values("position")
        ids = model.encode(text)["input_ids"][0].tolist()
        removable = ~rows["special"].to_numpy() & rows["occlusion"].notna().to_numpy()
        (removed,) = removal_sets(rows["gradient"].to_numpy(), removable, (0.3,))
        kept = [p for j, p in enumerate(ids) if j not in removed]
        full, cut = _plain_outputs(model, [ids, kept])
        if model.head == "none":
            want = 1.0 - float(full @ cut)
        else:
            top = int(full[-1].argmax())
            want = float(F.log_softmax(full[-1], -1)[top] - F.log_softmax(cut[-1], -1)[top])
        rows_got = faithfulness(model, [text], (0.3,), table=table[table["text"] == t]
                                .assign(text=0), n_boot=10)
        value = rows_got[rows_got["method"] == "gradient"]["change"].iloc[0]
        assert value == pytest.approx(want, abs=1e-5)
    assert set(got["fraction"]) == {0.3}
    assert (got.groupby("method")["texts"].max() <= 2).all()
