"""attention.importance on tiny random models: every batched score equals the same quantity
computed one text at a time through independent code (plain transformers with eager
attention, the test's own hooks, finite differences), and the frames hold what their
docstrings say. tests/test_importance_targets.py checks the targets, readouts and
integrated gradients per model kind."""
from __future__ import annotations

import inspect
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import spearmanr

from attention import config
from attention import importance as I
from attention import models as M
from attention.importance import batch as B
from attention.importance import heads as H
from attention.importance import tokens as TK
from attention.measures.heads import head_stats
from attention.measures.rank import spearman
from attention.models import describe, loading
from tests.tiny_models import _output_projection, tiny  # noqa: F401

pytestmark = pytest.mark.slow     # occlusion and gradients on real and tiny models: left out of make test-fast

TEXT = "the cat sat on the mat ."
TEXTS = ("the cat sat on the mat .", "a dog barked at the moon tonight")
KINDS = ["bert_base", "gpt2", "llama", "bert"]       # sentence, causal, grouped k/v, masked


def _load(tiny, name):
    return M.load_model(str(tiny[name]), trusted=True)


def _fresh(tiny, name, dtype=torch.float32):
    """An uncached copy (float64 for finite differences), so the shared one stays as it is."""
    path = str(tiny[name])
    loaded = loading._load("folder", path, path, config.policy())
    loaded.model.to(dtype)                 # new parameter tensors: find W_O again
    width = loaded.heads * loaded.d_head
    return replace(loaded, w_o=tuple(describe._output_projection(loaded.model, m, width)
                                     for m in B.attention_modules(loaded)))


# ---------------------------------------------------------------------------- by hand


def _eager(path, dtype=torch.float32):
    """The checkpoint through plain transformers, eager attention: nothing of attention.*."""
    from transformers import (AutoConfig, AutoModel, AutoModelForCausalLM,
                              AutoModelForMaskedLM)

    arch = AutoConfig.from_pretrained(path).architectures[0]
    cls = (AutoModelForCausalLM if arch.endswith(("CausalLM", "LMHeadModel"))
           else AutoModelForMaskedLM if arch.endswith("MaskedLM") else AutoModel)
    return cls.from_pretrained(path, attn_implementation="eager", dtype=dtype).eval()


def _inputs(model, ids):
    """input_ids, and token type 0 where the forward takes it (as the tokenizer gives run())."""
    ids_t = torch.tensor([ids])
    takes = "token_type_ids" in inspect.signature(model.forward).parameters
    return {"input_ids": ids_t, **({"token_type_ids": torch.zeros_like(ids_t)} if takes else {})}


def _hand(model, ids, *, embed_scale=None, head_scale=None, head_fill=None, attentions=False):
    """model(ids) with the test's own hooks: embed_scale (j, s) multiplies piece j's word
    embedding by s; head_scale (layer, head, s) multiplies that head's slice at the output
    projection by s; head_fill (layer, head, vector) replaces it."""
    hooks = []
    if embed_scale is not None:
        j, s = embed_scale

        def scale_piece(_m, args, out):
            if not torch.equal(args[0], torch.tensor([ids])):    # GPT-2's token types
                return None
            out = out.clone()
            out[:, j] = out[:, j] * s
            return out
        hooks.append(model.get_input_embeddings().register_forward_hook(scale_piece))
    for spec, how in ((head_scale, "scale"), (head_fill, "fill")):
        if spec is None:
            continue
        layer, head, value = spec
        d = model.config.hidden_size // model.config.num_attention_heads

        def change_head(_m, args, value=value, head=head, how=how):
            x = args[0].clone()
            if how == "scale":
                x[..., head * d:(head + 1) * d] *= value
            else:
                x[..., head * d:(head + 1) * d] = value
            return (x, *args[1:])
        hooks.append(_output_projection(model, layer).register_forward_pre_hook(change_head))
    try:
        with torch.no_grad(), _float64_eager():
            return model(**_inputs(model, ids), output_attentions=attentions)
    finally:
        for h in hooks:
            h.remove()


@contextmanager
def _float64_eager():
    """Eager LLaMA takes its softmax and RMSNorm in float32 even in a float64 model (1e-7
    noise, 1e-2 in a finite difference): inside, float64 stays float64."""
    from transformers.models.llama import modeling_llama

    plain, norm = torch.nn.functional.softmax, modeling_llama.LlamaRMSNorm.forward

    def softmax(x, dim=None, _stacklevel=3, dtype=None):
        return plain(x, dim=dim, dtype=None if x.dtype == torch.float64 else dtype)

    def rms(self, x):
        if x.dtype != torch.float64:
            return norm(self, x)
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)
                                              + self.variance_epsilon))

    torch.nn.functional.softmax, modeling_llama.LlamaRMSNorm.forward = softmax, rms
    try:
        yield
    finally:
        torch.nn.functional.softmax, modeling_llama.LlamaRMSNorm.forward = plain, norm


def _hand_target(kind, out, *, token=None, at=None):
    """The documented target from a plain output: unit mean embedding, or log p."""
    if kind == "embedding":
        return F.normalize(out.last_hidden_state[0].mean(dim=0), dim=0)
    logits = out.logits[0]
    return F.log_softmax(logits[-1 if kind == "next" else at], dim=-1)[token]


def _hand_change(kind, base, other):
    return 1 - float(base @ other) if kind == "embedding" else float(base - other)


def _setup(loaded, eager, text=TEXT):
    """The text's item (attention.importance) and what the hand code needs: ids read, kind,
    token, m; the token and m are checked against eager in test_importance_targets."""
    it = TK.item(loaded, text)
    return it, it.read, it.target.kind, it.target.token, it.target.at


# ---------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("name", KINDS)
def test_gradient_x_input_equals_finite_differences(tiny, name):
    loaded = _fresh(tiny, name, torch.float64)
    eager = _eager(tiny[name], torch.float64)
    it, ids, kind, token, at = _setup(loaded, eager)
    (got,) = TK.gradient_x_input(loaded, [it])
    eps = 1e-5
    for j in range(len(ids)):
        # d/ds f(x_j * s) at s = 1 is J_j x_j (sentence) or grad_j . x_j (log p)
        up = _hand_target(kind, _hand(eager, ids, embed_scale=(j, 1 + eps)), token=token, at=at)
        down = _hand_target(kind, _hand(eager, ids, embed_scale=(j, 1 - eps)), token=token, at=at)
        fd = (up - down) / (2 * eps)
        expected = float(fd.norm()) if kind == "embedding" else float(fd)
        assert got[j].item() == pytest.approx(expected, rel=1e-4, abs=1e-8), j


@pytest.mark.parametrize("name", KINDS)
def test_head_gradient_equals_finite_differences_and_is_normalised_per_layer(tiny, name):
    loaded = _fresh(tiny, name, torch.float64)
    eager = _eager(tiny[name], torch.float64)
    it, ids, kind, token, at = _setup(loaded, eager)
    got = H.head_gradient(loaded, it)                                  # (layers, heads)
    eps = 1e-5
    for layer, head in ((0, 1), (1, 3)):
        up = _hand_target(kind, _hand(eager, ids, head_scale=(layer, head, 1 + eps)),
                          token=token, at=at)
        down = _hand_target(kind, _hand(eager, ids, head_scale=(layer, head, 1 - eps)),
                            token=token, at=at)
        fd = (up - down) / (2 * eps)
        expected = float(fd.norm()) if kind == "embedding" else abs(float(fd))
        assert got[layer, head].item() == pytest.approx(expected, rel=1e-4, abs=1e-8)
    normed = H.per_layer(got)
    assert np.allclose(normed.norm(dim=1), 1.0)
    assert np.allclose(normed[1] * got[1].norm(), got[1])


# ---------------------------------------------------------------------------- heads


@pytest.mark.parametrize("name", KINDS)
def test_zero_and_mean_head_ablation_equal_hand_written_hooks(tiny, name):
    loaded = _load(tiny, name)
    eager = _eager(tiny[name])
    items = [TK.item(loaded, t) for t in TEXTS]
    it, ids, kind, token, at = _setup(loaded, eager)
    base = _hand_target(kind, _hand(eager, ids), token=token, at=at)
    zero = H.head_ablation(loaded, it)                                 # (layers, heads)
    fill = H.mean_outputs(loaded, items)                               # (layers, heads, d)
    mean = H.head_ablation(loaded, it, fill)
    d = loaded.d_head
    for layer in range(loaded.layers):
        # the head's mean slice over every real position of both texts, by hand
        seen = []
        hook = _output_projection(eager, layer).register_forward_pre_hook(
            lambda _m, args: seen.append(args[0][0]))
        for other in items:
            _hand(eager, other.read)
        hook.remove()
        by_hand = torch.cat(seen).mean(dim=0)                          # (heads * d,)
        for head in range(loaded.heads):
            assert np.allclose(fill[layer, head], by_hand[head * d:(head + 1) * d], atol=1e-5)
            out = _hand(eager, ids, head_scale=(layer, head, 0.0))
            expected = _hand_change(kind, base, _hand_target(kind, out, token=token, at=at))
            assert zero[layer, head].item() == pytest.approx(expected, abs=2e-5)
            out = _hand(eager, ids, head_fill=(layer, head, by_hand[head * d:(head + 1) * d]))
            expected = _hand_change(kind, base, _hand_target(kind, out, token=token, at=at))
            assert mean[layer, head].item() == pytest.approx(expected, abs=2e-5)


def test_head_frame(tiny):
    loaded = _load(tiny, "gpt2")
    frame = I.head_importance(loaded, TEXTS)
    assert list(frame.columns) == ["layer", "head", "ablation", "mean_ablation", "gradient",
                                   "gradient_raw", "entropy", "max_weight"]
    stats = [head_stats(loaded.run(t).weights, loaded.run(t).tokens) for t in TEXTS]
    want = (stats[0]["max_weight"] + stats[1]["max_weight"]) / 2
    assert np.allclose(frame["max_weight"], want.flatten(), atol=1e-6)
    items = [TK.item(loaded, t) for t in TEXTS]
    one, two = (H.head_ablation(loaded, it) for it in items)
    assert np.allclose(frame["ablation"], ((one + two) / 2).flatten(), atol=1e-6)
    raw = (H.head_gradient(loaded, items[0]) + H.head_gradient(loaded, items[1])) / 2
    assert np.allclose(frame["gradient_raw"], raw.flatten(), atol=1e-6)
    assert np.allclose(frame["gradient"], (raw / raw.norm(dim=1, keepdim=True)).flatten(),
                       atol=1e-6)


# ---------------------------------------------------------------------------- occlusion


@pytest.mark.parametrize("name", KINDS)
@pytest.mark.parametrize("mode", ["remove", "replace"])
def test_batched_occlusion_equals_one_forward_per_variant(tiny, name, mode, monkeypatch):
    """Both texts' variants share padded batches (chunks of 5 variants, the last shorter):
    each equals the change of its own unpadded forward, to 1e-5."""
    loaded = _load(tiny, name)
    eager = _eager(tiny[name])
    monkeypatch.setattr(B, "BATCH_TOKENS", 5 * 9)
    items = [TK.item(loaded, t) for t in TEXTS]
    got = TK.occlude(loaded, items, mode)
    tok = loaded.tokenizer
    fill = next(i for i in (tok.mask_token_id, tok.unk_token_id, tok.pad_token_id)
                if i is not None)
    for it, values in zip(items, got):
        ids, kind, token, m = it.read, it.target.kind, it.target.token, it.target.at
        base = _hand_target(kind, _hand(eager, ids), token=token, at=m)
        for j in range(len(ids)):
            if j == m:
                assert np.isnan(values[j].item()), j           # never occluded
                continue                                       # (special pieces are: words off)
            if mode == "remove":
                other, at = ids[:j] + ids[j + 1:], None if m is None else m - (j < m)
            else:
                other, at = ids[:j] + [fill] + ids[j + 1:], m
            out = _hand_target(kind, _hand(eager, other), token=token, at=at)
            assert values[j].item() == pytest.approx(_hand_change(kind, base, out), abs=1e-5), j


@pytest.mark.parametrize("name", KINDS)
def test_every_column_of_several_texts_equals_one_text_at_a_time(tiny, name, monkeypatch):
    loaded = _load(tiny, name)
    monkeypatch.setattr(B, "BATCH_TOKENS", 64)        # several chunks of mixed texts
    together = I.token_importance(loaded, TEXTS)
    for index, text in enumerate(TEXTS):
        alone = I.token_importance(loaded, [text])
        mine = together[together["text"] == index].reset_index(drop=True)
        numeric = [c for c in alone.columns
                   if c not in ("text", "token", "target", "special", "unknown")]
        assert list(mine["token"]) == list(alone["token"])
        assert (mine["target"] == alone["target"]).all()
        assert np.allclose(mine[numeric], alone[numeric], atol=1e-5, equal_nan=True)


# ---------------------------------------------------------------------------- the frames


def test_token_frame_columns(tiny):
    loaded = _load(tiny, "bert_base")
    frame = I.token_importance(loaded, TEXTS)
    runs = [loaded.run(t) for t in TEXTS]
    assert len(frame) == sum(r.n for r in runs)
    layered = [f"{s}_{layer}" for s in ("attention", "rollout", "flow", "norm")
               for layer in range(loaded.layers)]
    assert list(frame.columns) == ["text", "position", "token", "special", "unknown",
                                   "occlusion", "gradient", "integrated_gradients", "ig_gap",
                                   *layered, "rollout", "flow", "target"]
    assert list(frame["special"][:2]) == [True, False] and frame["special"].sum() == 4
    assert frame["occlusion"].notna().all()       # [CLS] and [SEP] too ("Words only" off)
    unk = loaded.tokenizer.unk_token_id
    assert list(frame["unknown"]) == [i == unk for t in TEXTS
                                      for i in loaded.tokenizer(t)["input_ids"]]
    assert (frame["target"] == "cos(e, e(text))").all()
    assert frame.groupby("text")["ig_gap"].nunique().eq(1).all()
    with pytest.raises(ValueError, match="remove"):
        I.token_importance(loaded, TEXTS, occlusion="blank")


def test_layer_agreement_is_the_mean_of_per_text_spearman(tiny):
    loaded = _load(tiny, "bert_base")
    frame = I.token_importance(loaded, TEXTS)
    table = I.layer_agreement(frame, words_only=False).set_index(["layer", "score", "target"])
    expected = np.mean([spearmanr(g["rollout_1"], g["gradient"]).statistic
                        for _, g in frame.groupby("text")])
    assert table.loc[(1, "rollout", "gradient"), "spearman"] == pytest.approx(expected)
    assert set(table.index.get_level_values("score")) == set(TK.SCORES)
    assert set(table.index.get_level_values("target")) == set(TK.METHODS)
    words = I.layer_agreement(frame).set_index(["layer", "score", "target"])   # words only
    expected = np.mean([spearmanr(g["rollout_1"], g["occlusion"]).statistic
                        for _, g in frame[~frame["special"]].groupby("text")])
    assert words.loc[(1, "rollout", "occlusion"), "spearman"] == pytest.approx(expected)


def test_spearman_by_hand():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 25]) == pytest.approx(0.8)
    assert np.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_pruning_and_temperature_metric_equal_unpadded_runs(tiny):
    """Texts of different lengths share a padded batch: the LM metric must equal the mean of
    each text's own loss, and tau = 1 must change nothing."""
    loaded = _load(tiny, "gpt2")
    eager = _eager(tiny["gpt2"])

    def loss(ids):
        logits = _hand(eager, ids).logits[0]
        return float(F.cross_entropy(logits[:-1], torch.tensor(ids[1:])))

    mean_loss = np.mean([loss(B.ids_of(loaded, t)) for t in TEXTS])
    heads = I.head_importance(loaded, TEXTS)
    curve = I.pruning_curve(loaded, heads, TEXTS, steps=4)
    assert curve["removed"].iloc[0] == 0 and curve["removed"].iloc[-1] == 8
    assert curve["metric"].iloc[0] == pytest.approx(-mean_loss, abs=1e-5)
    k = int(curve["removed"].iloc[1])
    order = heads.sort_values("ablation", kind="stable")[["layer", "head"]].to_numpy()[:k]
    gate = torch.ones(2, 4)
    for layer, head in order:
        gate[layer, head] = 0
    assert curve["metric"].iloc[1] == pytest.approx(H.Metric(loaded, TEXTS)(gate=gate)[0])
    sweep = I.temperature_sweep(loaded, TEXTS, taus=(0.5, 1.0, 2.0))
    at_one = sweep[sweep["tau"] == 1.0]
    assert np.allclose(at_one["metric"], -mean_loss, atol=1e-5)
    rows = [loaded.run(t).weights.amax(-1).mean(1) for t in TEXTS]   # (layers, n) each
    weighted = torch.cat(rows, dim=1).mean(dim=1)
    assert np.allclose(at_one["max_weight"], weighted, atol=1e-5)
    low, high = (sweep[sweep["tau"] == t]["max_weight"].to_numpy() for t in (0.5, 2.0))
    assert (low > high).all()                     # sharper at lower temperature


def test_sentence_model_metric_is_retrieval_on_the_bundled_pairs(tiny):
    from attention.text.corpora import pairs

    loaded = _load(tiny, "bert_base")
    eager = _eager(tiny["bert_base"])
    bundled = pairs("bundled:en")
    value, _ = H.Metric(loaded, TEXTS)()

    def e(text):
        return _hand_target("embedding", _hand(eager, B.ids_of(loaded, text)))

    emb = torch.stack([e(s) for pair in bundled for s in pair])       # (2N, hidden) unit rows
    sims = emb @ emb.T
    hits = []
    for i in range(len(emb)):
        p = i ^ 1
        others = torch.cat([sims[i, :min(i, p)], sims[i, min(i, p) + 1:max(i, p)],
                            sims[i, max(i, p) + 1:]])
        hits.append(float(bool((others < sims[i, p]).all())))
    assert value == pytest.approx(np.mean(hits), abs=1e-6)
