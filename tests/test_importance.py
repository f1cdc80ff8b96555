"""attention.importance on tiny random models: every batched score equals the same quantity
computed one text at a time through independent code (hand-written hooks, finite differences,
plain forwards), and the frames hold what their docstrings say."""
from __future__ import annotations

import inspect
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import spearmanr

from attention.models import loading
from attention.measures import flow
from attention import importance as I
from attention import models as M
from attention.measures.heads import head_stats
from attention.measures.rollout import rollout
from tests.tiny_models import _output_projection, tiny  # noqa: F401

TEXT = "the cat sat on the mat ."
TEXTS = ("the cat sat on the mat .", "a dog barked at the moon tonight")


def _fresh(tiny, name, dtype=torch.float32):
    """An uncached copy (float64 for finite differences), so the shared one stays as it is."""
    loaded = loading._load("folder", str(tiny[name]))
    loaded.model.to(dtype)                 # new parameter tensors: find W_O again
    width = loaded.heads * loaded.d_head
    return replace(loaded, w_o=tuple(loading._output_projection(loaded.model, m, width)
                                     for m in I.attention_modules(loaded)))


def _inputs(loaded, ids):
    """input_ids, and token type 0 where the forward takes it (as the tokenizer gives run())."""
    ids_t = torch.tensor([ids])
    takes = "token_type_ids" in inspect.signature(loaded.model.forward).parameters
    return {"input_ids": ids_t, **({"token_type_ids": torch.zeros_like(ids_t)} if takes else {})}


def _hand_output(loaded, ids, *, embed_scale=None, head_scale=None):
    """The documented scalar of a text, with plain model(...) calls and the test's own hooks:
    embed_scale (j, s) multiplies piece j's input embedding by s; head_scale (layer, head, s)
    multiplies that head's slice at the output projection by s. Returns (scalar, embedding
    or None)."""
    hooks = []
    if embed_scale is not None:
        j, s = embed_scale

        def scale_piece(_m, args, out):
            if not torch.equal(args[0], torch.tensor([ids])):    # GPT-2's token types
                return None
            out = out.clone()
            out[:, j] = out[:, j] * s
            return out
        hooks.append(loaded.model.get_input_embeddings().register_forward_hook(scale_piece))
    if head_scale is not None:
        layer, head, s = head_scale
        d = loaded.d_head

        def scale_head(_m, args):
            x = args[0].clone()
            x[..., head * d:(head + 1) * d] *= s
            return (x, *args[1:])
        hooks.append(_output_projection(loaded.model, layer).register_forward_pre_hook(scale_head))
    try:
        with torch.no_grad():
            out = loaded.model(**_inputs(loaded, ids))
    finally:
        for h in hooks:
            h.remove()
    if loaded.head == "none":
        mean = out.last_hidden_state[0].mean(dim=0)
        return mean.norm(), F.normalize(mean, dim=0)
    logits, target = out.logits[0], torch.tensor(ids)
    if loaded.is_causal:
        return F.cross_entropy(logits[:-1], target[1:]), None
    return F.cross_entropy(logits, target), None


def _hand_logits(loaded, ids):
    with torch.no_grad():
        return loaded.model(**_inputs(loaded, ids)).logits[0]


@pytest.mark.parametrize("name", ["bert_base", "gpt2", "bert"])
def test_gradient_x_input_equals_finite_differences(tiny, name):
    loaded = _fresh(tiny, name, torch.float64)
    ids = I.ids_of(loaded, TEXT)
    grad_x, grad_gate = I.gradients(loaded, ids)
    eps = 1e-5
    for j in (0, 2, len(ids) - 1):
        # d/ds f(x_j * s) at s = 1 is grad_j . x_j
        up = _hand_output(loaded, ids, embed_scale=(j, 1 + eps))[0]
        down = _hand_output(loaded, ids, embed_scale=(j, 1 - eps))[0]
        fd = abs((up - down).item() / (2 * eps))
        assert grad_x[j].item() == pytest.approx(fd, rel=1e-4, abs=1e-8)
    for layer, head in ((0, 1), (1, 3)):
        up = _hand_output(loaded, ids, head_scale=(layer, head, 1 + eps))[0]
        down = _hand_output(loaded, ids, head_scale=(layer, head, 1 - eps))[0]
        fd = abs((up - down).item() / (2 * eps))
        assert grad_gate[layer, head].item() == pytest.approx(fd, rel=1e-4, abs=1e-8)


@pytest.mark.parametrize("name", ["bert_base", "gpt2", "llama"])
def test_batched_head_ablation_equals_a_hand_written_hook(tiny, name):
    loaded = M.load_model(str(tiny[name]))
    ids = I.ids_of(loaded, TEXT)
    batched = I.head_ablation(loaded, ids)                             # (layers, heads)
    base, e = _hand_output(loaded, ids)
    for layer in range(loaded.layers):
        for head in range(loaded.heads):
            out, e2 = _hand_output(loaded, ids, head_scale=(layer, head, 0.0))
            expected = 1 - float(e @ e2) if e is not None else float(out - base)
            assert batched[layer, head].item() == pytest.approx(expected, abs=2e-5)
    # and the models.py intervention says the same for one head
    run = loaded.run(TEXT, (M.Intervention("ablate", layer=1, head=2),))
    if loaded.head == "none":
        assert batched[1, 2].item() == pytest.approx(
            1 - float(run.embedding @ loaded.run(TEXT).embedding), abs=2e-5)


@pytest.mark.parametrize("name", ["bert_base", "gpt2", "bert"])
@pytest.mark.parametrize("how", ["one_batch", "chunks_of_2_base_from_run"])
def test_batched_occlusion_equals_one_forward_per_removal(tiny, name, how, monkeypatch):
    loaded = M.load_model(str(tiny[name]))
    ids = I.ids_of(loaded, TEXT)
    if how == "one_batch":
        got = I.occlusion(loaded, ids)
    else:   # several forwards (the last one shorter), the base taken from the text's run
        monkeypatch.setattr(I, "BATCH_TOKENS", 2 * (len(ids) - 1))
        got = I.occlusion(loaded, ids, loaded.run(TEXT))
    n = len(ids)
    for j in range(n):
        rest = ids[:j] + ids[j + 1:]
        if loaded.head == "none":
            e = _hand_output(loaded, ids)[1]
            e2 = _hand_output(loaded, rest)[1]
            expected = 1 - float(e @ e2)
        else:
            # the same targets in both: every other piece the model predicts in both texts
            def nll(seq):
                logits = _hand_logits(loaded, seq)
                if loaded.is_causal:
                    return F.cross_entropy(logits[:-1], torch.tensor(seq[1:]), reduction="none")
                return F.cross_entropy(logits, torch.tensor(seq), reduction="none")
            full, part = nll(ids), nll(rest)
            if loaded.is_causal:   # full[i - 1] predicts piece i; part[k - 1] predicts rest[k]
                keep = [i for i in range(1, n) if i != j and not (j == 0 and i == 1)]
                mine = [i - 1 - (i > j) for i in keep]
                expected = float(part[mine].mean() - full[[i - 1 for i in keep]].mean())
            else:
                keep = [i for i in range(n) if i != j]
                expected = float(part.mean() - full[keep].mean())
        assert got[j].item() == pytest.approx(expected, abs=2e-5), j


def test_token_frame_columns_are_the_runs_attention(tiny, monkeypatch):
    loaded = M.load_model(str(tiny["bert_base"]))
    frame = I.token_importance(loaded, TEXTS)
    runs = [loaded.run(t) for t in TEXTS]
    assert len(frame) == sum(r.n for r in runs)
    assert list(frame.columns[:6]) == ["text", "position", "token", "special", "occlusion",
                                       "gradient"]
    assert list(frame["special"][:2]) == [True, False] and frame["special"].sum() == 4
    first = frame[frame["text"] == 1]
    run = runs[1]
    assert tuple(first["token"]) == run.tokens
    for layer in range(loaded.layers):
        assert np.allclose(first[f"attention_{layer}"], run.weights[layer, :, 0].mean(0), atol=1e-6)
        assert np.allclose(first[f"attention_mean_{layer}"], run.weights[layer].mean((0, 1)),
                           atol=1e-6)
        assert np.allclose(first[f"rollout_{layer}"], rollout(run.weights)[layer, 0], atol=1e-6)
    assert np.allclose(first["flow"], flow.attention_flow(run.weights, 0)[-1], atol=1e-6)
    causal = M.load_model(str(tiny["gpt2"]))
    frame = I.token_importance(causal, TEXTS[:1])
    run = causal.run(TEXTS[0])
    assert np.allclose(frame["attention_1"], run.weights[1, :, -1].mean(0), atol=1e-6)
    monkeypatch.setattr(flow, "MAX_PIECES", 5)
    assert I.token_importance(causal, TEXTS[:1])["flow"].isna().all()


def test_layer_agreement_is_the_mean_of_per_text_spearman(tiny):
    loaded = M.load_model(str(tiny["bert_base"]))
    frame = I.token_importance(loaded, TEXTS)
    table = I.layer_agreement(frame).set_index(["layer", "score", "target"])
    expected = np.mean([spearmanr(g["rollout_1"], g["occlusion"]).statistic
                        for _, g in frame.groupby("text")])
    assert table.loc[(1, "rollout", "occlusion"), "spearman"] == pytest.approx(expected)
    assert set(table.index.get_level_values("score")) == set(I.SCORES)
    words = I.layer_agreement(frame, words_only=True).set_index(["layer", "score", "target"])
    expected = np.mean([spearmanr(g["rollout_1"], g["occlusion"]).statistic
                        for _, g in frame[~frame["special"]].groupby("text")])
    assert words.loc[(1, "rollout", "occlusion"), "spearman"] == pytest.approx(expected)


def test_spearman_and_ranking_accuracy_by_hand():
    assert I.spearman([1, 2, 3, 4], [10, 20, 30, 25]) == pytest.approx(0.8)
    assert np.isnan(I.spearman([1, 1, 1], [1, 2, 3]))
    # paraphrase sims .9 .5; non .6 .1: of 4 comparisons 3 are right
    assert I.ranking_accuracy([0.9, 0.5, 0.6, 0.1], [1, 1, 0, 0]) == pytest.approx(0.75)


def test_head_frame_sharpness_is_head_stats(tiny):
    loaded = M.load_model(str(tiny["gpt2"]))
    frame = I.head_importance(loaded, TEXTS)
    assert list(frame.columns) == ["layer", "head", "ablation", "gradient", "entropy",
                                   "max_weight"]
    stats = [head_stats(loaded.run(t).weights, loaded.run(t).tokens) for t in TEXTS]
    want = (stats[0]["max_weight"] + stats[1]["max_weight"]) / 2
    assert np.allclose(frame["max_weight"], want.flatten(), atol=1e-6)
    one = I.head_ablation(loaded, I.ids_of(loaded, TEXTS[0]))
    two = I.head_ablation(loaded, I.ids_of(loaded, TEXTS[1]))
    assert np.allclose(frame["ablation"], ((one + two) / 2).flatten(), atol=1e-6)


def test_pruning_and_temperature_metric_equal_unpadded_runs(tiny):
    """Texts of different lengths share a padded batch: the LM metric must equal the mean of
    each text's own loss, and tau = 1 must change nothing."""
    loaded = M.load_model(str(tiny["gpt2"]))
    ids = [I.ids_of(loaded, t) for t in TEXTS]
    loss = np.mean([float(_hand_output(loaded, i)[0]) for i in ids])
    heads = I.head_importance(loaded, TEXTS)
    curve = I.pruning_curve(loaded, heads, TEXTS, steps=4)
    assert curve["removed"].iloc[0] == 0 and curve["removed"].iloc[-1] == 8
    assert curve["metric"].iloc[0] == pytest.approx(-loss, abs=1e-5)
    # the first point after 0 removes the least important heads: equal to the hand hook
    k = int(curve["removed"].iloc[1])
    order = heads.sort_values("ablation", kind="stable")[["layer", "head"]].to_numpy()[:k]
    gate = torch.ones(2, 4)
    for layer, head in order:
        gate[layer, head] = 0
    assert curve["metric"].iloc[1] == pytest.approx(I.Metric(loaded, TEXTS)(gate=gate)[0])
    sweep = I.temperature_sweep(loaded, TEXTS, taus=(0.5, 1.0, 2.0))
    at_one = sweep[sweep["tau"] == 1.0]
    assert np.allclose(at_one["metric"], -loss, atol=1e-5)
    # the metric's mean is over every real query row of the batch (texts weighted by length)
    rows = [loaded.run(t).weights.amax(-1).mean(1) for t in TEXTS]   # (layers, n) each
    weighted = torch.cat(rows, dim=1).mean(dim=1)
    assert np.allclose(at_one["max_weight"], weighted, atol=1e-5)
    low, high = (sweep[sweep["tau"] == t]["max_weight"].to_numpy() for t in (0.5, 2.0))
    assert (low > high).all()                     # sharper at lower temperature


def test_sentence_model_metric_is_ranking_accuracy_on_the_pairs(tiny):
    loaded = M.load_model(str(tiny["bert_base"]))
    pairs = I.sentence_pairs()
    assert len(pairs.label) == 40 and sum(pairs.label) == 20
    value, _ = I.Metric(loaded, TEXTS)()
    sims = [float(_hand_output(loaded, I.ids_of(loaded, a))[1]
                  @ _hand_output(loaded, I.ids_of(loaded, b))[1])
            for a, b in zip(pairs.first, pairs.second)]
    assert value == pytest.approx(I.ranking_accuracy(sims, pairs.label), abs=1e-9)
