"""The causal-LM sweeps (attention.sweeps) on tiny GPT-2 and LLaMA (grouped k/v), each
quantity against an independent computation: NLL from eager transformers, every setting from
a hand-patched eager attention, sharpness from eager's own weights, the prefix-sharing run
against recomputing every setting, shards against the whole, and the job's refusals."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from attention.corpus import job
from attention.corpus.compute import Settings
from attention.corpus.store import read_table
from attention.models import load_model
from attention.sweeps import table as sweep_table
from attention.sweeps.engine import run_batch
from attention.sweeps.settings import BASE, Setting, settings_of
from tests.tiny_models import _output_projection, tiny  # noqa: F401

TEXTS = ["the cat sat on the mat", "A dog barked twice at night .", "hello there",
         "Water boils at a lower temperature on a mountain because the air is thin .",
         "she said that it was late"]
REFERENCE = 7.5
CAUSAL = ("gpt2", "llama")


def _eager(folder):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()


def _patched_attention(setting: Setting, fill=None):
    """An eager attention written here (not the project's): the setting's change by hand."""
    def fn(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        heads, kv = query.shape[1], key.shape[1]
        key = key.repeat_interleave(heads // kv, dim=1)                # (b, heads, n, d)
        value = value.repeat_interleave(heads // kv, dim=1)
        d, n = query.shape[-1], query.shape[-2]
        scale = d ** -0.5 if scaling is None else scaling
        here = setting.layer in (-1, module.layer_idx)
        causal = torch.ones(n, n).tril().bool()                        # (n, n) one text, no padding
        logits = query @ key.transpose(-1, -2)                         # (b, heads, n, n)
        f, v = setting.family, setting.variant
        if here and f == "scale" and v == "none":
            logits = logits * 1.0
        elif here and f == "scale" and v == "inv_d":
            logits = logits / d
        elif here and f == "scale" and v == "ssmax":
            seen = torch.arange(1, n + 1, dtype=torch.float32)[:, None]  # keys row i sees
            logits = logits * scale * torch.log(seen) / math.log(REFERENCE)
        elif here and f == "tau":
            logits = logits * scale / float(v)
        else:
            logits = logits * scale
        allowed = causal.clone()
        if here and f == "sinks":
            allowed[1:, 0] = False                                     # rows after the first
        logits = logits.masked_fill(~allowed, float("-inf"))
        weights = torch.softmax(logits, dim=-1)
        out = weights @ value                                          # (b, heads, n, d)
        if here and f == "zero":
            out[:, setting.head] = 0.0
        if here and f == "mean":
            out[:, setting.head] = torch.as_tensor(fill[module.layer_idx][setting.head])
        return out.transpose(1, 2).contiguous(), weights
    return fn


def _reference(folder, text_ids, setting: Setting, fill=None):
    """Per text (mean NLL, max weight, entropy over every layer, head and row) from eager
    transformers with the hand-patched attention."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    name = f"h8_reference_{abs(hash(setting))}"
    AttentionInterface.register(name, _patched_attention(setting, fill))
    AttentionMaskInterface.register(name, eager_mask)
    model = _eager(folder)
    model.set_attn_implementation(name)
    captured = []

    def grab(_m, _a, out):
        captured.append(out[1])

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    hooks = [m.register_forward_hook(grab) for m in model.modules()
             if type(m).__name__.endswith("Attention")]
    out = []
    try:
        for ids in text_ids:
            captured.clear()
            x = torch.tensor([ids])
            kw = {"token_type_ids": torch.zeros_like(x)} if "token_type_ids" in \
                tok.model_input_names and "gpt2" in str(folder) else {}
            with torch.no_grad():
                logits = model(input_ids=x, **kw).logits[0]            # (n, vocab)
            logp = torch.log_softmax(logits.double(), dim=-1)
            nll = -logp[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].mean().item()
            w = torch.stack([c[0] for c in captured]).double()         # (layers, heads, n, n)
            mw = w.max(dim=-1).values.mean().item()
            ent = (-(w * torch.log(torch.where(w > 0, w, 1.0))).sum(-1)).mean().item()
            out.append((nll, mw, ent))
    finally:
        for h in hooks:
            h.remove()
    return np.array(out)


def _ids(model):
    return [model.encode(t)["input_ids"][0].tolist() for t in TEXTS]


@pytest.mark.parametrize("name", CAUSAL)
def test_global_settings_against_hand_patched_eager(tiny, name):  # noqa: F811
    model = load_model(str(tiny[name]), trusted=True)
    ids = _ids(model)
    settings = settings_of(("global",), model.layers, model.heads)
    res = sweep_table.nll_table(model, list(range(len(ids))), ids, ("global",),
                                {"reference": REFERENCE}, limit=3)
    assert len(res) == len(ids) * len(settings)
    for s in settings:
        got = res[(res.family == s.family) & (res.variant == s.variant) & (res.layer == -1)]
        want = _reference(tiny[name], ids, s)
        np.testing.assert_allclose(got["nll"], want[:, 0], atol=2e-5, err_msg=str(s))
        np.testing.assert_allclose(got["max_weight"], want[:, 1], atol=2e-5, err_msg=str(s))
        np.testing.assert_allclose(got["entropy"], want[:, 2], atol=2e-5, err_msg=str(s))
        assert (got["predicted"].to_numpy() == [len(i) - 1 for i in ids]).all()


@pytest.mark.parametrize("name", CAUSAL)
def test_one_layer_and_one_head_against_hand_patched_eager(tiny, name):  # noqa: F811
    model = load_model(str(tiny[name]), trusted=True)
    ids = _ids(model)
    fill = _mean_outputs(tiny[name], ids)
    pre = sweep_table.prepass(model, TEXTS, TEXTS, ("heads",))
    np.testing.assert_allclose(np.array(pre["fill"]), fill, atol=1e-5)
    pre["reference"] = REFERENCE
    chosen = [Setting("scale", "none", 1), Setting("scale", "ssmax", 1), Setting("tau", "0.5", 1),
              Setting("sinks", "", 1), Setting("zero", "", 1, 2), Setting("mean", "", 0, 3),
              Setting("scale", "inv_d", 0)]
    res = run_batch(model, sorted(ids, key=len), [BASE, *chosen], reference=REFERENCE,
                    fill=pre["fill"])
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    for i, s in enumerate(chosen, start=1):
        want = _reference(tiny[name], [ids[j] for j in order], s, fill)
        np.testing.assert_allclose(res.nll[i] / res.predicted, want[:, 0], atol=2e-5,
                                   err_msg=str(s))
        layers_heads_rows = res.max_weight[i].sum(axis=(0, 1)) / (model.layers * model.heads)
        np.testing.assert_allclose(layers_heads_rows / res.rows, want[:, 1], atol=2e-5)


def _mean_outputs(folder, ids):
    """Each head's output at the output projection's input, averaged over every position of
    every text (each text alone): the corpus mean of mean ablation, by hand."""
    model = _eager(folder)
    n_layers = model.config.num_hidden_layers
    sums, count = [0.0] * n_layers, 0
    hooks = []
    for layer in range(n_layers):
        def pre(_m, args, layer=layer):
            sums[layer] = sums[layer] + args[0][0].double().sum(dim=0)
        hooks.append(_output_projection(model, layer).register_forward_pre_hook(pre))
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    for row in ids:
        x = torch.tensor([row])
        kw = {"token_type_ids": torch.zeros_like(x)} if "token_type_ids" in \
            tok.model_input_names and "gpt2" in str(folder) else {}
        with torch.no_grad():
            model(input_ids=x, **kw)
        count += len(row)
    for h in hooks:
        h.remove()
    heads = model.config.num_attention_heads
    return torch.stack([s / count for s in sums]).view(n_layers, heads, -1).numpy()


def test_shared_prefix_equals_recomputing_every_setting(tiny):  # noqa: F811
    model = load_model(str(tiny["llama"]), trusted=True)
    ids = sorted(_ids(model), key=len)
    settings = settings_of(("layers", "heads"), model.layers, model.heads)
    pre = sweep_table.prepass(model, TEXTS, TEXTS, ("heads",))
    a = run_batch(model, ids, settings, reference=pre["reference"], fill=pre["fill"])
    b = run_batch(model, ids, settings, reference=pre["reference"], fill=pre["fill"],
                  share=False)
    np.testing.assert_allclose(a.nll, b.nll, atol=1e-6)
    np.testing.assert_allclose(a.max_weight, b.max_weight, atol=1e-6)
    np.testing.assert_allclose(a.entropy, b.entropy, atol=1e-6)
    assert a.layer_tokens < b.layer_tokens


def test_job_in_shards_equals_the_job_whole(tiny, tmp_path):  # noqa: F811
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(TEXTS + ["x"]) + "\n", encoding="utf-8")
    frames = []
    for size in (2, 8):
        out = tmp_path / f"run{size}"
        job.do_job(str(tiny["llama"]), str(corpus), out,
                   settings=Settings(what=("nll",), batch_size=size, sweeps=("global", "heads")))
        frames.append(read_table(out, "nll").sort_values(
            ["text_id", "family", "variant", "layer", "head"], ignore_index=True))
        assert sorted(frames[-1].text_id.unique()) == list(range(len(TEXTS) + 1))
    a, b = frames
    assert len(a) == len(b) > 0
    for c in ("nll", "max_weight", "entropy", "own_max_weight", "own_entropy"):
        np.testing.assert_allclose(a[c], b[c], atol=1e-5)


def test_job_refusals(tiny, tmp_path):  # noqa: F811
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    with pytest.raises(job.Refused, match="--sweeps"):
        job.do_job(str(tiny["llama"]), str(corpus), tmp_path / "a",
                   settings=Settings(what=("nll",), sweeps=("everything",)))
    with pytest.raises(job.Refused, match="causal"):
        job.do_job(str(tiny["bert"]), str(corpus), tmp_path / "b", settings=Settings(what=("nll",)))


def test_summary_bootstrap_against_a_hand_computation():
    from attention.sweeps.stats import summary

    rng = np.random.default_rng(5)
    t = 7
    base = rng.normal(3.0, 0.5, t)
    worse = base + rng.normal(0.4, 0.2, t)
    rows = []
    for text in range(t):
        for fam, var, value in (("base", "", base[text]), ("tau", "2", worse[text])):
            rows.append({"text_id": 10 + text, "family": fam, "variant": var, "layer": -1,
                         "head": -1, "nll": value, "predicted": 3 + text,
                         "max_weight": 0.5 + 0.01 * text, "entropy": 1.0 - 0.01 * text,
                         "own_max_weight": 0.5, "own_entropy": 1.0})
    got = summary(pd.DataFrame(rows), n_boot=200, seed=3).set_index("family")
    draws = np.random.default_rng(3).integers(0, t, size=(200, t))
    means_base = [base[d].mean() for d in draws]
    diffs = [(worse[d] - base[d]).mean() for d in draws]
    assert got.loc["tau", "d_nll"] == pytest.approx((worse - base).mean())
    assert got.loc["tau", "d_lo"] == pytest.approx(np.percentile(diffs, 2.5))
    assert got.loc["tau", "d_hi"] == pytest.approx(np.percentile(diffs, 97.5))
    assert got.loc["base", "nll_lo"] == pytest.approx(np.percentile(means_base, 2.5))
    assert got.loc["base", "ppl"] == pytest.approx(math.exp(base.mean()))
    pieces = np.arange(3, 3 + t)
    assert got.loc["tau", "pooled_nll"] == pytest.approx((worse * pieces).sum() / pieces.sum())
    assert got.loc["base", "d_nll"] == 0 and got.loc["tau", "texts"] == t
