"""Targets and readouts of attention.importance per kind of model (docs/science.md, "Targets
and readouts"), each against an independent computation: plain transformers with eager
attention and the test's own hooks, torch.func.jvp, networkx's max-flow and Captum's
IntegratedGradients on the input embeddings. Tiny BERT (masked LM), GPT-2, LLaMA (grouped
k/v), a tiny sentence model, and the bundled MiniLM."""
from __future__ import annotations

import inspect

import networkx as nx
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention import importance as I
from attention import models as M
from attention.importance import targets as T
from attention.importance import tokens as TK
from tests.test_importance import KINDS, TEXT, TEXTS, _eager, _hand, _hand_target, _load
from tests.tiny_models import _output_projection, tiny  # noqa: F401

pytestmark = pytest.mark.slow     # every target on five models, integrated gradients: left out of make test-fast

KIND = {"bert_base": "embedding", "gpt2": "next", "llama": "next", "bert": "masked"}


def _readout(kind, n, m):
    p = torch.zeros(n)
    if kind == "embedding":
        p[:] = 1.0 / n
    else:
        p[n - 1 if kind == "next" else m] = 1.0
    return p


# ---------------------------------------------------------------------------- targets


@pytest.mark.parametrize("name", KINDS)
def test_the_target_is_what_the_model_outputs(tiny, name):
    loaded = _load(tiny, name)
    eager = _eager(tiny[name])
    ids = loaded.tokenizer(TEXT)["input_ids"]
    it = TK.item(loaded, TEXT)
    kind = KIND[name]
    assert it.target.kind == kind and it.ids == ids
    special = set(loaded.tokenizer.all_special_ids)
    assert it.special == [i in special for i in ids]
    if kind == "masked":                      # m: the last piece that is not special
        m = max(j for j, i in enumerate(ids) if i not in special)
        assert it.target.at == m and it.target.token == ids[m]
        assert it.read == ids[:m] + [loaded.tokenizer.mask_token_id] + ids[m + 1:]
    else:
        assert it.read == ids
    out = _hand(eager, it.read)
    if kind == "next":                        # t: the model's top next piece
        assert it.target.token == int(out.logits[0, -1].argmax())
    want = _hand_target(kind, out, token=it.target.token, at=it.target.at)
    got = T.of_run(loaded, it.target, it.run)
    assert torch.allclose(got, want, atol=1e-5)
    piece = loaded.tokenizer.convert_ids_to_tokens(it.target.token) if kind != "embedding" else ""
    assert it.target.label == {"embedding": "cos(e, e(text))", "next": f"log p('{piece}')",
                               "masked": f"log p('{piece}' at {it.target.at})"}[kind]
    assert torch.allclose(it.target.rows(len(ids)), _readout(kind, len(ids), it.target.at))


def test_a_given_target_word_and_mask_position(tiny):
    causal = _load(tiny, "gpt2")
    eager = _eager(tiny["gpt2"])
    frame = I.token_importance(causal, [TEXT], target="dog")
    dog = causal.tokenizer.convert_tokens_to_ids("dog")
    assert (frame["target"] == "log p('dog')").all()
    ids = causal.tokenizer(TEXT)["input_ids"]
    base = _hand_target("next", _hand(eager, ids), token=dog)
    rest = ids[:2] + ids[3:]
    drop = float(base - _hand_target("next", _hand(eager, rest), token=dog))
    assert frame["occlusion"][2] == pytest.approx(drop, abs=1e-5)
    with pytest.raises(ValueError, match="more than one piece"):
        I.token_importance(causal, [TEXT], target="unbelievabilityness")
    masked = _load(tiny, "bert")
    frame = I.token_importance(masked, [TEXT], mask_at=2)
    assert (frame["target"] == "log p('cat' at 2)").all()
    assert np.isnan(frame["occlusion"][2]) and not frame["special"][2]
    assert frame["token"][2] == "cat"          # the text's own piece, not [MASK]


# ---------------------------------------------------------------------------- readouts


def _values_by_hook(eager, layer):
    """(heads, n, d) value vectors of one layer, from the eager model's own projections."""
    cfg = eager.config
    heads = cfg.num_attention_heads
    d = cfg.hidden_size // heads
    base = eager.base_model
    if hasattr(base, "encoder"):
        return base.encoder.layer[layer].attention.self.value, lambda v: v
    if hasattr(base, "h"):
        return base.h[layer].attn.c_attn, lambda qkv: qkv[..., 2 * heads * d:]
    return base.layers[layer].self_attn.v_proj, lambda v: v


def _kobayashi(eager, ids, layer, weights, p):
    """sum_i p_i ||alpha_ij f_h(x_j)||, mean over heads, f_h(x_j) = v_h(x_j) W_O[:, h]."""
    cfg = eager.config
    heads = cfg.num_attention_heads
    d = cfg.hidden_size // heads
    module, pick = _values_by_hook(eager, layer)
    seen = []
    hook = module.register_forward_hook(lambda _m, _a, out: seen.append(pick(out[0])))
    _hand(eager, ids)
    hook.remove()
    v = seen[0].view(len(ids), -1, d).transpose(0, 1)                  # (kv_heads, n, d)
    v = v.repeat_interleave(heads // v.shape[0], dim=0)                # (heads, n, d)
    proj = _output_projection(eager, layer)
    w = (proj.weight if type(proj).__name__ != "Conv1D" else proj.weight.t()).detach()  # (hidden, heads * d)
    f = torch.stack([v[h] @ w[:, h * d:(h + 1) * d].T for h in range(heads)])  # (heads, n, hidden)
    return ((p @ weights) * f.norm(dim=-1)).mean(dim=0)


def _flow_by_networkx(weights, p):
    """Max flow from a super-source (capacity p_i to row i after each layer) to each input
    token through A_l = rownorm(0.5 W_l + 0.5 I), normalised to sum to 1: (layers, n)."""
    layers, n = weights.shape[0], weights.shape[-1]
    a = 0.5 * weights.mean(dim=1).double() + 0.5 * torch.eye(n, dtype=torch.float64)
    a = a / a.sum(dim=-1, keepdim=True)
    out = np.zeros((layers, n))
    for top in range(layers):
        g = nx.DiGraph()
        for layer in range(top + 1):
            for i in range(n):
                for j in range(n):
                    g.add_edge((layer + 1, i), (layer, j), capacity=float(a[layer, i, j]))
        for i in range(n):
            g.add_edge("s", (top + 1, i), capacity=float(p[i]))
        for j in range(n):
            out[top, j] = nx.maximum_flow_value(g, "s", (0, j))
    return out / out.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("name", KINDS)
def test_attention_is_read_where_the_output_reads_it(tiny, name):
    """attention, rollout, flow and norm columns from eager attentions, read with the
    kind's readout (mean of every row, the last row, row m)."""
    loaded = _load(tiny, name)
    eager = _eager(tiny[name])
    frame = I.token_importance(loaded, [TEXT])
    it = TK.item(loaded, TEXT)
    n = len(it.read)
    p = _readout(KIND[name], n, it.target.at)
    w = torch.stack(_hand(eager, it.read, attentions=True).attentions)[:, 0]  # (layers, heads, n, n)
    a = 0.5 * w.mean(dim=1) + 0.5 * torch.eye(n)
    a = a / a.sum(dim=-1, keepdim=True)
    rolled = torch.eye(n)
    flow = _flow_by_networkx(w, p)
    for layer in range(loaded.layers):
        rolled = a[layer] @ rolled
        assert np.allclose(frame[f"attention_{layer}"], p @ w[layer].mean(dim=0), atol=1e-5)
        assert np.allclose(frame[f"rollout_{layer}"], p @ rolled, atol=1e-5)
        assert np.allclose(frame[f"flow_{layer}"], flow[layer], atol=1e-4)
        assert np.allclose(frame[f"norm_{layer}"], _kobayashi(eager, it.read, layer, w[layer], p),
                           atol=1e-4)
    assert np.allclose(frame["rollout"], frame[f"rollout_{loaded.layers - 1}"])


# ---------------------------------------------------------------------------- integrated gradients


def _captum_ig(eager, loaded, it, n_steps=32):
    """Captum's IntegratedGradients on the eager model's input embeddings (the word
    embeddings; the baseline: the pad piece at every non-special position but m)."""
    from captum.attr import IntegratedGradients

    words = eager.get_input_embeddings()
    ids = torch.tensor([it.read])
    base_ids = ids.clone()
    for j, s in enumerate(it.special):
        if not s and j != it.target.at:
            base_ids[0, j] = loaded.tokenizer.pad_token_id
    kind, token, at = it.target.kind, it.target.token, it.target.at
    ref = _hand_target("embedding", _hand(eager, it.read)) if kind == "embedding" else None
    takes = "token_type_ids" in inspect.signature(eager.forward).parameters

    def f(x):
        extra = {"token_type_ids": torch.zeros(x.shape[:2], dtype=torch.long)} if takes else {}
        out = eager(inputs_embeds=x, **extra)
        if kind == "embedding":
            return F.normalize(out.last_hidden_state.mean(dim=1), dim=-1) @ ref
        return F.log_softmax(out.logits[:, -1 if kind == "next" else at], dim=-1)[:, token]

    x, x0 = words(ids).detach(), words(base_ids).detach()
    attr = IntegratedGradients(f).attribute(x, baselines=x0, n_steps=n_steps)
    with torch.no_grad():
        gap = float(attr.sum() - (f(x) - f(x0)).sum())
    return attr.sum(dim=-1)[0].detach(), gap


@pytest.mark.parametrize("name", KINDS)
def test_integrated_gradients_equal_captum_on_the_input_embeddings(tiny, name):
    loaded = _load(tiny, name)
    eager = _eager(tiny[name])
    items = [TK.item(loaded, t) for t in TEXTS]
    got = TK.integrated_gradients(loaded, items)                       # both texts batched
    for it, (attr, gap) in zip(items, got):
        want, want_gap = _captum_ig(eager, loaded, it)
        scale = float(want.abs().max())
        assert np.allclose(attr, want, atol=1e-4 * scale + 1e-6)
        assert gap == pytest.approx(want_gap, abs=1e-4 * scale + 1e-6)
        assert abs(gap) < 1e-2 * float(attr.abs().sum()) + 1e-5      # completeness holds
        assert attr[[j for j, s in enumerate(it.special) if s]].abs().max() == 0.0


# ---------------------------------------------------------------------------- MiniLM


def test_minilm_sentence_target_against_eager(monkeypatch):
    """The bundled MiniLM (all-MiniLM-L6-v2, offline): occlusion, ||J_j x_j|| (torch.func.jvp
    on the eager model) and the mean-of-rows readout."""
    from transformers import AutoModel

    loaded = M.load_model()
    eager = AutoModel.from_pretrained(M.bundled_path(), attn_implementation="eager").eval()
    text = "The cat sat on the warm mat."
    frame = I.token_importance(loaded, [text])
    ids = loaded.tokenizer(text)["input_ids"]
    n = len(ids)
    e = _hand_target("embedding", _hand(eager, ids))
    x = eager.get_input_embeddings()(torch.tensor([ids])).detach()

    def unit(emb):
        out = eager(inputs_embeds=emb, token_type_ids=torch.zeros(1, n, dtype=torch.long))
        return F.normalize(out.last_hidden_state[0].mean(dim=0), dim=0)

    for j in range(n):
        e2 = _hand_target("embedding", _hand(eager, ids[:j] + ids[j + 1:]))
        assert frame["occlusion"][j] == pytest.approx(1 - float(e @ e2), abs=1e-5)
        if j in (0, n - 1):               # [CLS] and [SEP]: occluded too ("Words only" off)
            assert frame["special"][j]
            continue
        tangent = torch.zeros_like(x)
        tangent[0, j] = x[0, j]
        _, jv = torch.func.jvp(unit, (x,), (tangent,))
        assert frame["gradient"][j] == pytest.approx(float(jv.detach().norm()), rel=1e-3, abs=1e-6)
    w = torch.stack(_hand(eager, ids, attentions=True).attentions)[:, 0]
    assert np.allclose(frame["attention_5"], w[5].mean(dim=0).mean(dim=0), atol=1e-5)
    assert frame["ig_gap"].abs().max() < 1e-3
