"""A sentence model's sweeps (attention.sweeps.sentence, attention.sweeps.pairs) on a tiny
BERT built from a config: paraphrase retrieval and sharpness under every setting against an
independent computation (eager transformers with a hand-patched attention, embeddings pooled
and ranked here, no project helper), the shared prefix against recomputing, and the paired
bootstrap against a hand computation with a fixed seed."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from attention.models import load_model
from attention.sweeps.pairs import pair_settings, summary
from attention.sweeps.sentence import pair_table
from attention.sweeps.settings import Setting
from tests.tiny_models import build

PAIRS = [("the cat sat on the mat", "a cat was sitting on the mat"),
         ("the dog barked at night", "at night the dog was barking"),
         ("water boils at a lower temperature on a mountain", "on a mountain water boils sooner"),
         ("she said that it was late", "it was late, she said"),
         ("the cat sat on the dog", "a dog sat under the cat"),
         ("prices rose sharply this year", "this year prices went up a lot")]
REFERENCE = 8.25


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return build(tmp_path_factory.mktemp("tiny_bert"), ["bert_base"])["bert_base"]


def _patched(setting: Setting):
    """An eager attention written here: one sentence, no padding, the setting by hand."""
    def fn(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        d, n = query.shape[-1], key.shape[-2]
        scale = d ** -0.5
        here = setting.layer in (-1, module.layer_idx)
        logits = query @ key.transpose(-1, -2)                          # (1, heads, n, n)
        f, v = setting.family, setting.variant
        if here and f == "scale" and v == "none":
            pass
        elif here and f == "scale" and v == "inv_d":
            logits = logits / d
        elif here and f == "scale" and v == "ssmax":
            logits = logits * scale * math.log(n) / math.log(REFERENCE)
        elif here and f == "tau":
            logits = logits * scale / float(v)
        else:
            logits = logits * scale
        weights = torch.softmax(logits, dim=-1)                         # (1, heads, n, n)
        return (weights @ value).transpose(1, 2).contiguous(), weights
    return fn


def _reference(folder, sentences: list[str], setting: Setting):
    """(hit (pairs,), rr (pairs,), max weight (pairs,), entropy (pairs,)) by hand."""
    from transformers import AttentionInterface, AutoModel, AutoTokenizer
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    name = f"pairs_reference_{abs(hash(setting))}"
    AttentionInterface.register(name, _patched(setting))
    AttentionMaskInterface.register(name, eager_mask)
    model = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    model.set_attn_implementation(name)
    tok = AutoTokenizer.from_pretrained(folder)
    captured = []
    hooks = [m.register_forward_hook(lambda _m, _a, out: captured.append(out[1]))
             for m in model.modules() if type(m).__name__ == "BertSelfAttention"]
    emb, mw, ent = [], [], []
    try:
        for s in sentences:
            captured.clear()
            enc = tok(s, return_tensors="pt")
            with torch.no_grad():
                last = model(**enc).last_hidden_state[0]                # (n, hidden)
            e = last.double().mean(dim=0)
            emb.append((e / e.norm()).numpy())
            w = torch.stack([c[0] for c in captured]).double()          # (layers, heads, n, n)
            mw.append(w.max(dim=-1).values.mean().item())
            ent.append((-(w * torch.log(w)).sum(-1)).mean().item())
    finally:
        for h in hooks:
            h.remove()
    e = np.stack(emb)
    count = len(sentences)
    hits, rrs = [], []
    for i in range(count):
        partner = i + 1 if i % 2 == 0 else i - 1
        target = float(e[i] @ e[partner])
        rank = 1 + sum(1 for j in range(count) if j not in (i, partner)
                       and float(e[i] @ e[j]) >= target)
        hits.append(1.0 if rank == 1 else 0.0)
        rrs.append(1.0 / rank)
    per_pair = lambda xs: np.asarray(xs).reshape(-1, 2).mean(axis=1)  # noqa: E731
    return per_pair(hits), per_pair(rrs), per_pair(mw), per_pair(ent)


@pytest.mark.parametrize("sweep", ["global", "layers"])
def test_retrieval_under_each_setting_against_hand_patched_eager(bert, sweep):
    model = load_model(str(bert), trusted=True)
    sentences = [s for p in PAIRS for s in p]
    rows = pair_table(model, PAIRS, sweep, reference=REFERENCE, tokens=40)  # several batches
    settings = pair_settings(sweep, model.layers)
    assert len(rows) == len(PAIRS) * len(settings)
    varied = set()
    for s in settings:
        got = rows[(rows.family == s.family) & (rows.variant == s.variant)
                   & (rows.layer == s.layer)].sort_values("pair_id")
        hit, rr, mw, ent = _reference(bert, sentences, s)
        np.testing.assert_allclose(got["hit"], hit, atol=1e-12, err_msg=str(s))
        np.testing.assert_allclose(got["rr"], rr, atol=1e-12, err_msg=str(s))
        np.testing.assert_allclose(got["max_weight"], mw, atol=2e-5, err_msg=str(s))
        np.testing.assert_allclose(got["entropy"], ent, atol=2e-5, err_msg=str(s))
        varied.add(round(float(got["max_weight"].mean()), 4))
    assert len(varied) == len(settings)       # every setting changed the attention


def test_shared_prefix_equals_recomputing_every_setting(bert):
    model = load_model(str(bert), trusted=True)
    shared = pair_table(model, PAIRS, "layers", reference=REFERENCE)
    whole = pair_table(model, PAIRS, "layers", reference=REFERENCE, share=False)
    cols = ["hit", "rr", "max_weight", "entropy", "own_max_weight", "own_entropy"]
    np.testing.assert_allclose(shared[cols].to_numpy(float), whole[cols].to_numpy(float),
                               atol=1e-6)


def test_paired_bootstrap_against_a_hand_computation():
    rng = np.random.default_rng(11)
    n = 9
    base_hit = rng.integers(0, 3, n) / 2                           # 0, 0.5 or 1 per pair
    other_hit = np.clip(base_hit - rng.integers(0, 2, n) / 2, 0, 1)
    base_rr, other_rr = rng.uniform(0.3, 1, n), rng.uniform(0.1, 1, n)
    rows = []
    for p in range(n):
        for fam, var, hit, rr in (("base", "", base_hit[p], base_rr[p]),
                                  ("tau", "2", other_hit[p], other_rr[p])):
            rows.append({"pair_id": p, "family": fam, "variant": var, "layer": -1, "head": -1,
                         "hit": hit, "rr": rr, "pieces": 10 + p, "max_weight": 0.5 + 0.01 * p,
                         "entropy": 1.0, "own_max_weight": 0.5, "own_entropy": 1.0})
    got = summary(pd.DataFrame(rows), n_boot=300, seed=4).set_index("family")
    draws = np.random.default_rng(4).integers(0, n, size=(300, n))
    acc = [base_hit[d].mean() for d in draws]
    d_acc = [(other_hit[d] - base_hit[d]).mean() for d in draws]
    d_mrr = [(other_rr[d] - base_rr[d]).mean() for d in draws]
    assert got.loc["base", "accuracy"] == pytest.approx(base_hit.mean())
    assert got.loc["base", "acc_lo"] == pytest.approx(np.percentile(acc, 2.5))
    assert got.loc["base", "acc_hi"] == pytest.approx(np.percentile(acc, 97.5))
    assert got.loc["tau", "d_acc"] == pytest.approx((other_hit - base_hit).mean())
    assert got.loc["tau", "d_acc_lo"] == pytest.approx(np.percentile(d_acc, 2.5))
    assert got.loc["tau", "d_acc_hi"] == pytest.approx(np.percentile(d_acc, 97.5))
    assert got.loc["tau", "d_mrr_lo"] == pytest.approx(np.percentile(d_mrr, 2.5))
    assert got.loc["tau", "d_mrr_hi"] == pytest.approx(np.percentile(d_mrr, 97.5))
    assert got.loc["tau", "mrr"] == pytest.approx(other_rr.mean())
    assert got.loc["base", "d_acc"] == 0 and got.loc["tau", "pairs"] == n
    assert got.loc["tau", "pieces"] == sum(10 + p for p in range(n))
    assert list(got.index) == ["base", "tau"]                      # the trained model first


def test_ship_refusals_are_one_sentence_and_exit_2(capsys):
    from attention.corpus.__main__ import main

    assert main(["ship", "--model", "m", "--pairs", "bundled:en", "--sweeps", "heads"]) == 2
    assert "global, layers" in capsys.readouterr().err
    assert main(["ship", "--model", "m"]) == 2                 # neither --work nor --pairs
    assert "--work" in capsys.readouterr().err
    # a model that cannot be loaded: its sentence, exit 2 (ship_pairs loads with no corpus job)
    assert main(["ship", "--model", "/no/such/model", "--pairs", "bundled:en", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and err.strip()
