"""attention.importance.curves against hand computations: the pruning curve and its random
band, the random curves computed apart, the paired temperature sweep and head sharpness
against importance. The models' numbers come from plain transformers with the test's own
hooks (eager attention; a head gated at its output projection, a layer's queries divided by
tau), the intervals from the documented draw (default_rng(seed).integers(0, U, (n_boot, U)))
replayed here, the ranks from scipy."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import spearmanr

from attention import models as M
from attention.importance import curves
from tests.tiny_models import tiny  # noqa: F401

TEXTS = ("the cat sat on the mat .", "a dog barked at the moon tonight",
         "it rained all day", "we walked home along the river after dinner")
PAIRS = [("the cat sat on the mat", "a cat was sitting on the mat"),
         ("the dog barked", "a dog was barking"),
         ("it rained all day", "rain fell the whole day"),
         ("we walked home", "we went home on foot")]


def eager(path):
    from transformers import AutoModel, AutoModelForCausalLM

    arch = str(path).rsplit("/", 1)[-1]
    cls = AutoModelForCausalLM if arch == "gpt2" else AutoModel
    return cls.from_pretrained(path, attn_implementation="eager").eval()


def ids(tok, text):
    return tok(text)["input_ids"]


def run(model, tok, text, *, gate=None, tau_layer=None, tau=1.0, attentions=False):
    """model(text) with the test's hooks: gate (layers, heads) multiplies each head's slice at
    its output projection (c_proj for GPT-2, attention.output.dense for BERT); tau divides
    the queries of layer tau_layer (GPT-2: the first third of c_attn's output)."""
    hooks = []
    base = model.base_model
    layers = base.h if hasattr(base, "h") else base.encoder.layer
    heads = model.config.num_attention_heads
    if gate is not None:
        for layer, block in enumerate(layers):
            proj = block.attn.c_proj if hasattr(block, "attn") else block.attention.output.dense

            def pre(_m, args, g=gate[layer]):
                x = args[0]
                shaped = x.view(*x.shape[:-1], heads, -1) * g.view(heads, 1)
                return (shaped.reshape(x.shape),)
            hooks.append(proj.register_forward_pre_hook(pre))
    if tau_layer is not None:
        def post(_m, _args, out):
            width = out.shape[-1] // 3
            return torch.cat([out[..., :width] / tau, out[..., width:]], dim=-1)
        hooks.append(layers[tau_layer].attn.c_attn.register_forward_hook(post))
    try:
        with torch.no_grad():
            enc = tok(text, return_tensors="pt")
            return model(**enc, output_attentions=attentions)
    finally:
        for h in hooks:
            h.remove()


def neg_loss(model, tok, text, **kw):
    out = run(model, tok, text, **kw)
    i = torch.tensor(ids(tok, text))
    return -float(F.cross_entropy(out.logits[0, :-1], i[1:]))


def boot_means(units, n_boot, seed):
    idx = np.random.default_rng(seed).integers(0, len(units), size=(n_boot, len(units)))
    return np.array([np.mean(np.asarray(units)[row]) for row in idx])


def pct(samples):
    return tuple(np.percentile(samples, [2.5, 97.5]))


@pytest.fixture(scope="module")
def gpt2(tiny):
    from transformers import AutoTokenizer

    path = tiny["gpt2"]
    return M.load_model(str(path), trusted=True), eager(path), AutoTokenizer.from_pretrained(path)


def test_paired_sweep_by_hand(gpt2):
    loaded, model, tok = gpt2
    layer, n_boot, seed = 1, 300, 4
    table = curves.paired_sweep(loaded, TEXTS, layer, taus=(0.5, 2.0), n_boot=n_boot, seed=seed)
    assert list(table["tau"]) == [0.5, 1.0, 2.0]
    base = [neg_loss(model, tok, t) for t in TEXTS]
    base_boot = boot_means(base, n_boot, seed)
    for _, row in table.iterrows():
        units = [neg_loss(model, tok, t, tau_layer=layer, tau=row["tau"]) for t in TEXTS]
        assert row["metric"] == pytest.approx(np.mean(units), abs=1e-5)
        boot = boot_means(units, n_boot, seed)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(pct(boot), abs=1e-5)
        assert row["diff"] == pytest.approx(np.mean(units) - np.mean(base), abs=1e-5)
        assert (row["diff_low"], row["diff_high"]) == pytest.approx(pct(boot - base_boot),
                                                                    abs=1e-5)
        w = [run(model, tok, t, tau_layer=layer, tau=row["tau"], attentions=True).attentions[layer]
             for t in TEXTS]                                     # (1, heads, n, n) each
        rows = torch.cat([a[0].amax(dim=-1).mean(dim=0) for a in w])   # every real query row
        assert row["max_weight"] == pytest.approx(float(rows.mean()), abs=1e-5)
        assert row["units"] == len(TEXTS) and row["metric_name"] == "negative_loss"
    sharp = table.set_index("tau")["max_weight"]
    assert sharp[0.5] > sharp[1.0] > sharp[2.0]


def test_pruning_with_band_and_random_curves_by_hand(gpt2):
    loaded, model, tok = gpt2
    rng = np.random.default_rng(7)
    heads = pd.DataFrame([(l, h) for l in range(2) for h in range(4)], columns=["layer", "head"])
    heads["ablation"] = rng.permutation(8).astype(float)
    orders, n_boot, seed, steps = 3, 200, 2, 4
    table = curves.pruning_with_band(loaded, heads, TEXTS, orders=orders, n_boot=n_boot,
                                     seed=seed, steps=steps)
    points = [0, 2, 4, 6, 8]                                     # range(0, 9, 8 // 4) and all
    assert list(table["removed"]) == points

    def metric_units(order, k):
        gate = torch.ones(2, 4)
        for layer, head in order[:k]:
            gate[int(layer), int(head)] = 0.0
        return [neg_loss(model, tok, t, gate=gate) for t in TEXTS]

    ranked = heads.sort_values("ablation", kind="stable")[["layer", "head"]].to_numpy()
    layer_major = np.array([(l, h) for l in range(2) for h in range(4)])
    perm_rng = np.random.default_rng([seed, 3])
    shuffled = [layer_major[perm_rng.permutation(8)] for _ in range(orders)]
    randoms = np.array([[np.mean(metric_units(o, k)) for k in points] for o in shuffled])
    for p, (_, row) in enumerate(table.iterrows()):
        units = metric_units(ranked, points[p])
        assert row["metric"] == pytest.approx(np.mean(units), abs=1e-5)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(
            pct(boot_means(units, n_boot, seed)), abs=1e-5)
        assert row["random_mean"] == pytest.approx(randoms[:, p].mean(), abs=1e-5)
        assert (row["random_low"], row["random_high"]) == pytest.approx(pct(randoms[:, p]),
                                                                        abs=1e-5)
        assert row["orders"] == orders and row["units"] == len(TEXTS)
    apart = curves.random_curves(loaded, TEXTS, [2, 0], orders=orders, seed=seed, steps=steps)
    assert np.allclose(apart, randoms[[2, 0]], atol=1e-5)       # parts of the band, any order
    again = curves.pruning_with_band(loaded, heads, TEXTS, orders=orders, n_boot=n_boot,
                                     seed=seed, steps=steps,
                                     randoms=curves.random_curves(loaded, TEXTS, [0, 1, 2],
                                                                  orders=orders, seed=seed,
                                                                  steps=steps))
    assert np.allclose(again.drop(columns="metric_name").to_numpy(float),
                       table.drop(columns="metric_name").to_numpy(float), atol=1e-9)


def hand_retrieval(e):
    """Each sentence's hit and reciprocal rank among all the others, by loops."""
    e = [v / np.linalg.norm(v) for v in e]
    hits, rrs = [], []
    for i in range(len(e)):
        p = i + 1 if i % 2 == 0 else i - 1
        target = float(e[i] @ e[p])
        rank = 1 + sum(1 for j in range(len(e)) if j not in (i, p) and float(e[i] @ e[j]) >= target)
        hits.append(rank == 1)
        rrs.append(1 / rank)
    return np.array(hits, float).reshape(-1, 2).mean(1), np.array(rrs).reshape(-1, 2).mean(1)


def test_sentence_model_sweep_is_retrieval_on_the_pairs(tiny):
    from transformers import AutoTokenizer

    path = tiny["bert_base"]
    loaded, model, tok = M.load_model(str(path), trusted=True), eager(path), \
        AutoTokenizer.from_pretrained(path)
    e = [run(model, tok, s).last_hidden_state[0].mean(dim=0).numpy() for p in PAIRS for s in p]
    hit, _ = hand_retrieval(e)
    table = curves.paired_sweep(loaded, [], 0, taus=(1.0,), n_boot=100, seed=1, pairs=PAIRS)
    assert table["metric_name"].iloc[0] == "retrieval_accuracy"
    assert table["metric"].iloc[0] == pytest.approx(hit.mean())
    assert (table["ci_low"].iloc[0], table["ci_high"].iloc[0]) == pytest.approx(
        pct(boot_means(hit, 100, 1)))
    assert table["units"].iloc[0] == len(PAIRS)
    from attention.importance.heads import Metric
    got, _, rr = Metric(loaded, [], PAIRS).units(rr=True)
    assert np.allclose(got, hit) and np.allclose(rr, hand_retrieval(e)[1])


def spearman_rows(x, y):
    return np.array([spearmanr(a, b).statistic if np.ptp(a) and np.ptp(b) else math.nan
                     for a, b in zip(x, y)])


def test_sharpness_agreement_by_hand():
    rng = np.random.default_rng(0)
    heads = pd.DataFrame([(l, h) for l in range(3) for h in range(5)], columns=["layer", "head"])
    heads["ablation"] = rng.normal(size=15)
    heads["max_weight"] = heads["ablation"] * 0.5 + rng.normal(size=15)
    heads.loc[3, "max_weight"] = heads.loc[4, "max_weight"]      # a tie: average ranks
    n_boot, seed = 400, 5
    table = curves.sharpness_agreement(heads.sample(frac=1, random_state=1), n_boot=n_boot,
                                       seed=seed)
    boot_rng, null_rng = np.random.default_rng(seed), np.random.default_rng([seed, 1])
    bx, by, ny, xs, ys = [], [], [], [], []
    for layer in range(3):
        g = heads[heads["layer"] == layer].sort_values("head")
        x, y = g["ablation"].to_numpy(), g["max_weight"].to_numpy()
        idx = boot_rng.integers(0, 5, size=(n_boot, 5))
        perm = null_rng.permuted(np.tile(np.arange(5), (n_boot, 1)), axis=1)
        row = table[table["layer"] == layer].iloc[0]
        assert row["spearman"] == pytest.approx(spearmanr(x, y).statistic)
        boot = spearman_rows(x[idx], y[idx])
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(pct(boot[~np.isnan(boot)]))
        null = spearman_rows(np.tile(x, (n_boot, 1)), y[perm])
        assert (row["null_low"], row["null_high"]) == pytest.approx(pct(null))
        assert row["heads"] == 5
        bx.append(x[idx]); by.append(y[idx]); ny.append(y[perm]); xs.append(x); ys.append(y)  # noqa: E702
    pooled = table[table["layer"].isna()].iloc[0]
    x, y = np.concatenate(xs), np.concatenate(ys)
    assert pooled["spearman"] == pytest.approx(spearmanr(x, y).statistic)
    boot = spearman_rows(np.concatenate(bx, axis=1), np.concatenate(by, axis=1))
    assert (pooled["ci_low"], pooled["ci_high"]) == pytest.approx(pct(boot))
    null = spearman_rows(np.tile(x, (n_boot, 1)), np.concatenate(ny, axis=1))
    assert (pooled["null_low"], pooled["null_high"]) == pytest.approx(pct(null))
    assert pooled["heads"] == 15
