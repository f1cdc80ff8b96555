"""attention.models: the core registered inside real transformers models (tiny, built offline
from configs) gives what eager attention gives, and every intervention equals an independent
eager reference (hooks, patched scaling) or a hand-computed value."""
from __future__ import annotations

import inspect
import json
import shutil

import pytest
import torch

from attention import config
from attention.models import loading, registered
from attention import models as M
from attention.errors import UserError
from tests.tiny_models import (TINY, VOCAB, _configs, _output_projection,  # noqa: F401
                                _save, tiny)

pytestmark = pytest.mark.slow     # every architecture against eager transformers: left out of make test-fast

TEXT = "the cat sat on the mat and the dog barked at it ."


@pytest.fixture(autouse=True)
def _policy(monkeypatch):
    """Every test starts with the default policy on the developer's own machine (folders and
    Hub ids on, as `make run` sets it): no downloads, default caps, no allow-list. The shared
    server's default (folders off) is tests/test_policy.py's and test_hostile_models.py's."""
    for name in (config.ENV_DOWNLOADS, config.ENV_MAX_PARAMS, config.ENV_ALLOWED,
                 config.ENV_MODEL_MEMORY, config.ENV_RESULTS):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(config.ENV_LOCAL, "1")


def _eager(folder):
    """The same checkpoint loaded the ordinary way, with transformers' eager attention."""
    loaded = M.load_model(str(folder))
    cls = type(loaded.model)
    return cls.from_pretrained(folder, attn_implementation="eager").eval(), loaded


def _eager_out(model, loaded, text=TEXT):
    enc = loaded.encode(text)
    if "token_type_ids" not in inspect.signature(model.forward).parameters:
        enc.pop("token_type_ids", None)          # as models.run does: only what forward takes
    with torch.no_grad():
        return model(**enc, output_attentions=True, output_hidden_states=True)


def _attention_modules(model):
    return [m for m in model.modules() if hasattr(m, "scaling") and hasattr(m, "is_causal")]


ARCHS = ["bert", "bert_base", "gpt2", "llama", "qwen2"]


@pytest.mark.parametrize("name", ARCHS)
def test_weights_and_logits_equal_eager(tiny, name):
    eager, loaded = _eager(tiny[name])
    out = _eager_out(eager, loaded)
    run = loaded.run(TEXT)
    own = torch.stack(out.attentions)[:, 0]                        # (layers, heads, n, n)
    assert run.weights.shape == own.shape == (2, 4, run.n, run.n)
    assert run.weights.dtype == torch.float32
    assert (run.weights - own).abs().max().item() <= 1e-5
    if name == "bert_base":
        assert loaded.head == "none" and run.logits is None
    else:
        assert run.logits.shape == (run.n, VOCAB)
        assert (run.logits - out.logits[0]).abs().max().item() <= 1e-5
    # the model was not switched to eager by the reference: still the core inside
    assert loaded.model.config._attn_implementation == registered.IMPLEMENTATION


@pytest.mark.parametrize("name", ARCHS)
def test_metadata(tiny, name):
    m = M.load_model(str(tiny[name]))
    causal = name in ("gpt2", "llama", "qwen2")
    kv = {"llama": 2, "qwen2": 1}.get(name, 4)
    assert (m.layers, m.heads, m.kv_heads, m.d_head, m.hidden) == (2, 4, kv, 8, 32)
    assert m.is_causal is causal and m.max_tokens == 64
    assert m.name == name and m.source == str(tiny[name])
    assert {"[CLS]", "[SEP]"} <= set(m.special_tokens)
    run = m.run(TEXT)
    assert run.tokens[0] == "[CLS]" and run.tokens[-1] == "[SEP]"
    assert run.sinks[0] and run.sinks[-1] and not run.sinks[1:-1].any()
    tri = torch.ones(run.n, run.n, dtype=torch.bool).tril()
    assert torch.equal(run.mask[0], tri if causal else torch.ones_like(tri))
    assert run.q.shape == run.k.shape == run.v.shape == (2, 4, run.n, 8)
    assert M.load_model(str(tiny[name])) is m                      # cached


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_recomputed_from_captured_qkv(tiny, name):
    run = M.load_model(str(tiny[name])).run(TEXT)
    assert (run.recompute().weights - run.weights).abs().max().item() <= 1e-6
    # unscaled = softmax(q k^T) on the captured (RoPE'd) q, k, masked as the forward was
    logits = run.q @ run.k.transpose(-2, -1)                       # (layers, heads, n, n)
    logits = logits.masked_fill(~run.mask.unsqueeze(1), float("-inf"))
    ref = torch.softmax(logits, dim=-1)
    assert (run.recompute(scaled=False).weights - ref).abs().max().item() <= 1e-5


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "qwen2"])
def test_ablate_equals_zeroing_the_heads_slice_at_the_output_projection(tiny, name):
    eager, loaded = _eager(tiny[name])
    layer, head, d = 1, 2, loaded.d_head

    def zero_head(_module, args):
        x = args[0].clone()
        x[..., head * d:(head + 1) * d] = 0.0
        return (x,)

    hook = _output_projection(eager, layer).register_forward_pre_hook(zero_head)
    try:
        out = _eager_out(eager, loaded)
    finally:
        hook.remove()
    run = loaded.run(TEXT, [M.Intervention("ablate", layer=layer, head=head)])
    ref = out.logits[0] if run.logits is not None else out.last_hidden_state[0]
    mine = run.logits if run.logits is not None else run.last_hidden
    assert (mine - ref).abs().max().item() <= 1e-5
    base = loaded.run(TEXT)
    ref_base = base.logits if base.logits is not None else base.last_hidden
    assert (mine - ref_base).abs().max().item() > 1e-3           # the ablation did something


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
@pytest.mark.parametrize("kind,tau", [("unscaled", None), ("temperature", 2.5),
                                      ("temperature", 0.4)])
def test_unscaled_and_temperature_equal_eager_with_patched_scaling(tiny, name, kind, tau):
    eager, loaded = _eager(tiny[name])
    modules = _attention_modules(eager)
    assert len(modules) == 2
    saved = [m.scaling for m in modules]
    for m in modules:
        m.scaling = 1.0 if kind == "unscaled" else m.scaling / tau
    try:
        out = _eager_out(eager, loaded)
    finally:
        for m, s in zip(modules, saved):
            m.scaling = s
    run = loaded.run(TEXT, [M.Intervention(kind, value=tau)])
    own = torch.stack(out.attentions)[:, 0]
    assert (run.weights - own).abs().max().item() <= 1e-5
    ref = out.logits[0] if run.logits is not None else out.last_hidden_state[0]
    assert (run.logits - ref).abs().max().item() <= 1e-4


def test_one_heads_intervention_leaves_the_other_heads_alone(tiny):
    m = M.load_model(str(tiny["llama"]))
    base = m.run(TEXT)
    run = m.run(TEXT, [M.Intervention("unscaled", layer=0, head=1)])
    others = [0, 2, 3]
    assert (run.weights[0, others] - base.weights[0, others]).abs().max().item() <= 1e-6
    logits = (run.q[0, 1] @ run.k[0, 1].T).masked_fill(~run.mask[0], float("-inf"))
    assert (run.weights[0, 1] - torch.softmax(logits, -1)).abs().max().item() <= 1e-5
    assert (run.weights[0, 1] - base.weights[0, 1]).abs().max().item() > 1e-3


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_uniform_rows_are_one_over_the_allowed_keys(tiny, name):
    m = M.load_model(str(tiny[name]))
    run = m.run(TEXT, [M.Intervention("uniform", layer=1)])
    allowed = run.mask[1].float()                                   # (n, n)
    ref = allowed / allowed.sum(-1, keepdim=True)
    assert (run.weights[1] - ref).abs().max().item() <= 1e-6
    assert (run.weights[0] - m.run(TEXT).weights[0]).abs().max().item() <= 1e-6


@pytest.mark.parametrize("name", ["bert", "llama"])
def test_hide_sinks_renormalises_rows_without_the_sinks(tiny, name):
    m = M.load_model(str(tiny[name]))
    run = m.run(TEXT, [M.Intervention("hide_sinks", head=3)])
    base_q = run.q[0, 3] @ run.k[0, 3].T * run.scaling[0]          # (n, n) layer 0 unchanged
    keep = run.mask[0] & ~run.sinks
    only_sinks = ~keep.any(-1)                                      # causal row 0: keeps [CLS]
    keep[only_sinks] = run.mask[0][only_sinks]
    ref = torch.softmax(base_q.masked_fill(~keep, float("-inf")), -1)
    w = run.weights[:, 3]                                           # (layers, n, n)
    assert (w[0] - ref).abs().max().item() <= 1e-5
    assert torch.allclose(w.sum(-1), torch.ones_like(w.sum(-1)), atol=1e-5)
    rows = ~only_sinks
    assert w[:, rows][..., run.sinks].abs().max().item() == 0.0
    assert int(only_sinks.sum()) == (1 if m.is_causal else 0)


def test_value_vectors_rebuild_the_output_projection(tiny):
    """sum_h alpha_h @ f_h = W_O (context) (without bias), for BERT, GPT-2's Conv1D and LLaMA."""
    for name in ("bert", "gpt2", "llama"):
        m = M.load_model(str(tiny[name]))
        run = m.run(TEXT)
        layer = 1
        res = run.recompute()
        context = res.output[layer].transpose(0, 1).reshape(run.n, -1)   # (n, heads * d)
        proj = _output_projection(m.model, layer)
        with torch.no_grad():
            ref = proj(context) - (proj.bias if proj.bias is not None else 0.0)
        f = m.value_vectors(run, layer)                                  # (heads, n, hidden)
        mine = (run.weights[layer] @ f).sum(0)
        assert torch.allclose(mine, ref, atol=1e-4), name


# ---------------------------------------------------------------------------- MiniLM


def test_minilm_all_72_heads_and_embedding_match_eager():
    from transformers import AutoModel

    m = M.load_model(M.BUNDLED)
    assert M.load_model() is m
    assert (m.layers, m.heads, m.d_head, m.hidden, m.is_causal) == (6, 12, 32, 384, False)
    eager = AutoModel.from_pretrained(M.bundled_path(), attn_implementation="eager").eval()
    text = 'The quick brown fox jumps over the lazy dog. Wait... "no"; 50%!'
    run = m.run(text)
    with torch.no_grad():
        out = eager(**m.tokenizer(text, return_tensors="pt"), output_attentions=True)
    own = torch.stack(out.attentions)[:, 0]
    assert run.weights.shape == (6, 12, run.n, run.n)
    assert (run.weights - own).abs().max().item() <= 1e-5
    emb = torch.nn.functional.normalize(out.last_hidden_state[0].mean(0), dim=0)
    assert (run.embedding - emb).abs().max().item() <= 1e-6
    assert abs(run.embedding.norm().item() - 1.0) < 1e-6
    assert run.logits is None


# ---------------------------------------------------------------------------- bad cases


def _key(fn, *args, **kwargs) -> str:
    with pytest.raises(UserError) as err:
        fn(*args, **kwargs)
    str(err.value)                        # the English sentence formats
    err.value.message("zh")               # and the Chinese one
    return err.value.key


def test_bad_folders(tmp_path, tiny):
    assert _key(M.load_model, str(tmp_path / "nope")) == "model.no_folder"
    assert _key(M.load_model, "./nope") == "model.no_folder"
    assert _key(M.load_model, "") == "model.unknown_source"
    assert _key(M.load_model, str(tmp_path)) == "model.no_config"
    (tmp_path / "config.json").write_text("[1, 2")
    assert _key(M.load_model, str(tmp_path)) == "model.no_config"
    no_weights = tmp_path / "no_weights"
    no_weights.mkdir()
    shutil.copy(tiny["llama"] / "config.json", no_weights / "config.json")
    (no_weights / "pytorch_model.bin").write_bytes(b"not loaded")
    assert _key(M.load_model, str(no_weights)) == "model.no_weights"


def test_remote_code_and_encoder_decoder_are_refused(tmp_path, tiny):
    for field, key in (("auto_map", "model.remote_code"),
                       ("is_encoder_decoder", "model.encoder_decoder")):
        folder = tmp_path / field
        shutil.copytree(tiny["llama"], folder)
        config = json.loads((folder / "config.json").read_text())
        config[field] = {"AutoModel": "modeling_evil.Evil"} if field == "auto_map" else True
        (folder / "config.json").write_text(json.dumps(config))
        assert _key(M.load_model, str(folder)) == key


def test_unknown_model_type(tmp_path, tiny):
    folder = tmp_path / "unknown"
    shutil.copytree(tiny["llama"], folder)
    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = "no_such_architecture"
    (folder / "config.json").write_text(json.dumps(config))
    assert _key(M.load_model, str(folder)) == "model.unknown_architecture"


def test_architectures_the_core_cannot_reproduce(tmp_path):
    from transformers import Gemma2Config, GPTNeoConfig

    gemma = _save(Gemma2Config(**TINY, num_key_value_heads=2, head_dim=8,
                               attn_logit_softcapping=50.0,
                               architectures=["Gemma2ForCausalLM"]), tmp_path / "gemma2")
    assert _key(M.load_model, str(gemma)) == "model.unsupported_feature"
    neo = _save(GPTNeoConfig(vocab_size=VOCAB, hidden_size=32, num_layers=2, num_heads=4,
                             attention_types=[[["global", "local"], 1]],
                             max_position_embeddings=64, architectures=["GPTNeoForCausalLM"]),
                tmp_path / "neo")
    assert _key(M.load_model, str(neo)) == "model.unsupported"


def test_size_cap_and_allow_list(tiny, monkeypatch):
    folder = str(tiny["gpt2"])
    params = M.load_model(folder).params
    assert 900_000 < params < 1_200_000                              # 30522 x 32 embedding + layers
    monkeypatch.setenv(config.ENV_MAX_PARAMS, str(params - 1))
    assert _key(M.load_model, folder) == "model.too_large"          # cached model too
    assert _key(M.load_model, str(tiny["qwen2"])) == "model.too_large"
    monkeypatch.setenv(config.ENV_MAX_PARAMS, "1000")
    loading.clear_kept()
    assert _key(M.load_model, str(tiny["bert_base"])) == "model.too_large"
    assert M.load_model(M.BUNDLED).params > 1000                     # bundled: always allowed
    monkeypatch.delenv(config.ENV_MAX_PARAMS)
    monkeypatch.setenv(config.ENV_ALLOWED, "gpt2, Qwen/Qwen2-0.5B")
    assert M.load_model(folder).params == params                     # local: folders too
    monkeypatch.delenv(config.ENV_LOCAL)                              # a shared server
    assert _key(M.load_model, folder) == "model.not_allowed"
    assert M.load_model(M.BUNDLED).layers == 6
    assert M.load_model(folder, trusted=True).params == params       # the operator's own call
    monkeypatch.setenv(config.ENV_ALLOWED, f"gpt2, {folder}")        # a folder the deployer lists
    assert M.load_model(folder).params == params
    assert _key(M.load_model, str(tiny["qwen2"])) == "model.not_allowed"


def test_hub_id_without_downloads_never_touches_the_network(monkeypatch):
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError("network used")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    assert _key(M.load_model, "someone/not-cached-model-xyz") == "model.downloads_off"
    assert _key(M.load_model, "not!a model") == "model.unknown_source"
    assert _key(M.load_model, "a/b/c") == "model.no_folder"


def test_bad_text_and_interventions(tiny):
    m = M.load_model(str(tiny["llama"]))
    assert _key(m.run, "   ") == "model.empty_text"
    assert _key(m.run, "word " * 100) == "model.too_long"
    assert _key(m.run, TEXT, [M.Intervention("ablate", layer=2)]) == "model.bad_layer"
    assert _key(m.run, TEXT, [M.Intervention("ablate", layer=-1)]) == "model.bad_layer"
    assert _key(m.run, TEXT, [M.Intervention("ablate", head=4)]) == "model.bad_head"
    assert _key(M.Intervention, "melt") == "model.bad_kind"
    assert _key(M.Intervention, "temperature") == "model.bad_temperature"
    assert _key(M.Intervention, "temperature", value=0.0) == "model.bad_temperature"
    assert _key(M.Intervention, "temperature", value=float("nan")) == "model.bad_temperature"
    with pytest.raises(UserError) as err:
        m.run("word " * 100)
    assert err.value.values == {"pieces": 102, "limit": 64, "name": "llama"}


def test_non_bundled_cache_is_bounded(tiny):
    loading.clear_kept()
    for name in ("gpt2", "llama", "qwen2"):
        M.load_model(str(tiny[name]))
    assert loading.kept() == (str(tiny["llama"]), str(tiny["qwen2"]))
    assert len(loading.kept()) == config.MODELS_KEPT == 2


def test_messages_quote_the_typed_string_never_the_resolved_path(tmp_path, tiny, monkeypatch):
    """/proc/self resolves to /proc/<pid>; a symlink to its target: neither is ever shown."""
    import os

    link = tmp_path / "link"
    link.symlink_to(tmp_path / "empty", target_is_directory=True)
    (tmp_path / "empty").mkdir()
    for typed in ("/proc/self", str(link), f"{tmp_path}/empty/../empty"):
        with pytest.raises(UserError) as err:
            M.load_model(typed)
        text = str(err.value)
        assert f"'{config.shown(typed)}'" in text, text
        assert f"/proc/{os.getpid()}" not in text and str(tmp_path / "empty") + "'" not in text
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as err:
        M.load_model("./empty")
    assert "'./empty'" in str(err.value) and str(tmp_path) not in str(err.value)


def test_the_pages_read_the_one_model_store(tiny):
    """ui.model.ensure_model keeps no model of its own: what it returns is the store's
    (models.load_model's) object, kept by the store's cap and evicted by it."""
    from attention.ui import model as page

    loading.clear_kept()
    first, second, third = (str(tiny[n]) for n in ("gpt2", "llama", "qwen2"))
    assert not M.is_kept(first)
    loaded = page.ensure_model(first)
    assert M.is_kept(first) and M.load_model(first) is loaded
    for source in (second, third):                    # the store's cap evicts the first
        assert page.ensure_model(source) is M.load_model(source)
    del loaded
    import gc

    gc.collect()
    assert not M.is_kept(first) and loading.kept() == (second, third)
    assert M.is_kept(M.BUNDLED) == (loading._bundled.cache_info().currsize > 0)
    assert not M.is_kept("not!a model") and not M.is_kept(str(tiny["gpt2"]) + "-nowhere")


@pytest.mark.parametrize("name, mask_at", [("llama", None), ("gpt2", None), ("bert", 3)])
def test_an_outcomes_lean_capture_equals_the_full_one(tiny, name, mask_at):
    """lm_outcome's runs keep no q, k, v and one logits row plus the losses (Capture): every
    number of the outcome equals the one computed from full runs to 1e-6."""
    from attention.models import runs
    from attention.models.capture import Capture

    source = str(tiny[name])
    ivs = (M.Intervention("temperature", 1, None, 2.0), M.Intervention("ablate", 0, 1))
    runs.RUNS.clear()                            # the plain run not kept: both runs lean
    lean = runs.lm_outcome(source, TEXT, ivs, mask_at=mask_at)
    full = runs.lm_outcome(source, TEXT, ivs, mask_at=mask_at, lean=False)
    runs.RUNS.clear()
    assert (lean.position, lean.token) == (full.position, full.token)
    assert abs(lean.kl - full.kl) <= 1e-6
    assert list(lean.top["before"]) == list(full.top["before"])
    assert list(lean.top["after"]) == list(full.top["after"])
    for col in ("p_before", "p_before_after", "p_after"):
        assert (lean.top[col] - full.top[col]).abs().max() <= 1e-6
    if full.losses is None:
        assert lean.losses is None
    else:
        assert list(lean.losses["token"]) == list(full.losses["token"])
        for col in ("loss_before", "loss_after", "change"):
            assert (lean.losses[col] - full.losses[col]).abs().max() <= 1e-6
    a, b = lean.attention, full.attention
    assert a.heads == b.heads and a.named == b.named
    for part in ("before", "after"):
        assert (getattr(a, part) - getattr(b, part)).abs().max().item() <= 1e-6
    assert torch.equal(a.mask, b.mask)
    numbers = [c for c in b.table.columns if c not in ("layer", "head", "named")]
    assert (a.table[numbers] - b.table[numbers]).abs().max().max() <= 1e-6
    # what a lean run keeps
    loaded = M.load_model(source)
    position = -1 if mask_at is None else mask_at
    r = loaded.run(TEXT, ivs, mask_at=mask_at, capture=Capture(qkv=False, logits_row=position))
    f = loaded.run(TEXT, ivs, mask_at=mask_at)
    assert r.q is None and r.k is None and r.v is None and r.logits is None
    assert torch.equal(r.logits_of(position), f.logits[position])
    with pytest.raises(ValueError):
        r.logits_of(position - 1)
    if loaded.head == "causal_lm":
        assert (r.token_losses() - f.token_losses()).abs().max().item() <= 1e-12
