"""attention.config's policy: read from the environment on each call; result folders only
under the configured root (one sentence for every refused name); the memory cap on loaded
models evicts the least recently used one, or refuses with a sentence (never an OOM kill)."""
from __future__ import annotations

import gc
import os
import shutil
from pathlib import Path

import pytest

from attention import config
from attention import models as M
from attention.config import Policy, shown
from attention.errors import UserError
from attention.models import convert, loading
from tests.tiny_models import build

ENVS = (config.ENV_DOWNLOADS, config.ENV_MAX_PARAMS, config.ENV_ALLOWED, config.ENV_LOCAL,
        config.ENV_MODEL_MEMORY, config.ENV_RESULTS)


@pytest.fixture(autouse=True)
def _nothing_set(monkeypatch):
    """A server started as a deployer starts it: nothing set."""
    for name in ENVS:
        monkeypatch.delenv(name, raising=False)
    loading.clear_kept()
    yield
    loading.clear_kept()


def _refusal(fn, *args, **kwargs) -> UserError:
    with pytest.raises(UserError) as err:
        fn(*args, **kwargs)
    err.value.message("zh")                  # the Chinese sentence formats too
    return err.value


# ---- the policy from the environment ---------------------------------------------------------

def test_nothing_set_is_the_safe_default():
    assert config.policy() == Policy() == Policy(
        allowed=(), local=False, downloads=False, max_params=500_000_000,
        model_memory_bytes=1_500_000_000, results_root=None)
    assert config.policy().sources == (config.BUNDLED, config.BUNDLED_LM)
    assert not config.policy().permits("/tmp") and config.policy().permits(config.BUNDLED)
    assert config.policy().permits(config.BUNDLED_LM)       # the second bundled model
    assert config.policy().allowed == () and not config.downloads_allowed()
    assert config.policy().max_params == config.DEFAULT_MAX_PARAMS


def test_policy_is_read_from_the_environment_on_each_call(monkeypatch, tmp_path):
    monkeypatch.setenv(config.ENV_ALLOWED, " gpt2 , Qwen/Qwen2-0.5B,,gpt2,all-MiniLM-L6-v2")
    monkeypatch.setenv(config.ENV_LOCAL, "yes")
    monkeypatch.setenv(config.ENV_DOWNLOADS, "ON")
    monkeypatch.setenv(config.ENV_MAX_PARAMS, "200_000_000")
    monkeypatch.setenv(config.ENV_MODEL_MEMORY, "2.5G")
    monkeypatch.setenv(config.ENV_RESULTS, str(tmp_path))
    p = config.policy()
    assert p.allowed == ("gpt2", "Qwen/Qwen2-0.5B", "all-MiniLM-L6-v2")
    assert p.sources == (config.BUNDLED, config.BUNDLED_LM, "gpt2", "Qwen/Qwen2-0.5B")
    assert p.local and p.downloads and p.max_params == 200_000_000
    assert p.model_memory_bytes == 2_500_000_000 and p.results_root == tmp_path
    assert p.permits("/anything") and config.downloads_allowed()
    assert config.policy().max_params == 2e8 and config.policy().allowed == p.allowed
    with pytest.raises(Exception):
        p.local = False                                  # frozen
    monkeypatch.setenv(config.ENV_LOCAL, "0")
    assert not config.policy().permits("/anything") and config.policy().permits("gpt2")


@pytest.mark.parametrize("raw, expected", [("1500MB", 1_500_000_000), ("2GiB", 2 * 2**30),
                                           ("123456", 123456), ("1e9", 10**9),
                                           ("lots", 1_500_000_000), ("-5", 1_500_000_000),
                                           ("0", 1_500_000_000), ("3 parsecs", 1_500_000_000)])
def test_memory_cap_units_and_malformed_values(monkeypatch, raw, expected):
    """A typo falls back to the default: it neither widens the cap nor breaks the pages."""
    monkeypatch.setenv(config.ENV_MODEL_MEMORY, raw)
    assert config.policy().model_memory_bytes == expected


def test_shown_quotes_the_users_string_visibly_and_short():
    assert shown("/proc/self") == "/proc/self"
    assert shown("a\x00b\n\u202e") == "a\\x00b\\x0a\\u202e"
    long = "/" + "x" * 5000
    assert len(shown(long)) <= config.SHOWN_CHARS and "\u2026" in shown(long)


def test_a_refused_source_is_decided_on_the_string_alone(monkeypatch):
    """Nothing on the disk is looked at for a refused source (no stat, no listing)."""
    touched = []
    for name in ("is_dir", "exists", "resolve", "stat", "expanduser"):
        original = getattr(Path, name)
        monkeypatch.setattr(Path, name, lambda self, *a, _o=original, _n=name, **k:
                            touched.append(str(self)) or _o(self, *a, **k))
    probes = ("/proc/self", "~", "bert-base-uncased", "a\x00b", "x" * 1000)
    for probe in probes:
        err = _refusal(M.load_model, probe)
        assert err.key == "model.not_allowed" and err.values["source"] == shown(probe)
    assert not [p for p in touched if p in probes or p.endswith(("self", "~", "uncased"))]


# ---- result folders ---------------------------------------------------------------------------

@pytest.fixture
def results(tmp_path, monkeypatch):
    root = tmp_path / "results"
    (root / "run1").mkdir(parents=True)
    (root / "run2").mkdir()
    (root / "notes.txt").write_text("x")
    outside = tmp_path / "secret"
    outside.mkdir()
    (root / "out").symlink_to(outside, target_is_directory=True)      # a symlink pointing out
    (root / "alias").symlink_to(root / "run1", target_is_directory=True)
    monkeypatch.setenv(config.ENV_RESULTS, str(root))
    return root


def test_result_dir_returns_a_plain_folder_under_the_root(results):
    assert config.result_dir("run1") == results / "run1"
    assert config.result_dirs() == ["run1", "run2"]


REFUSED_NAMES = ["..", "../secret", "run1/..", "run1/../../secret", "/etc", "/", "out", "alias",
                 "missing", "notes.txt", "", ".", " run1", "run1/", "a\x00b", "~", "$HOME",
                 "..\\secret", "x" * 400, "file:///etc"]


def test_result_dir_refuses_every_other_name_with_one_sentence(results):
    sentences = set()
    for name in REFUSED_NAMES:
        err = _refusal(config.result_dir, name)
        assert err.key == "model.result_refused"
        text = str(err)
        assert f"'{shown(name)}'" in text
        sentences.add(text.replace(f"'{shown(name)}'", "'…'", 1))
        assert str(results.parent) not in text.replace(shown(name), "")
    assert len(sentences) == 1, sentences


def test_no_result_folder_without_a_root(results, monkeypatch):
    monkeypatch.delenv(config.ENV_RESULTS)
    assert config.result_dirs() == []
    assert _refusal(config.result_dir, "run1").key == "model.result_refused"


# ---- the memory cap on loaded models ----------------------------------------------------------

@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """Two tiny models (and a copy of one with garbage weights) built from configs."""
    root = tmp_path_factory.mktemp("two_models")
    folders = build(root, ["gpt2", "llama"])
    garbage = root / "garbage"
    shutil.copytree(folders["gpt2"], garbage)
    for f in garbage.glob("*.safetensors"):
        f.write_bytes(b"not weights")
    return {**folders, "garbage": garbage}


# what the cap reserves for the bundled models, loaded or not (SmolLM2 when installed)
BUNDLED_BYTES = (config.BUNDLED_PARAMS + config.BUNDLED_LM_PARAMS
                 * (convert.packaged_gguf() is not None)) * 4


def _params(two) -> dict[str, int]:
    os.environ[config.ENV_LOCAL] = "1"
    try:
        out = {name: M.load_model(str(two[name])).params for name in ("gpt2", "llama")}
    finally:
        del os.environ[config.ENV_LOCAL]
    loading.clear_kept()
    return out


def _held_elsewhere() -> int:
    """Bytes of models that earlier tests in this process still hold (caches of other
    modules): alive, so counted against the cap like any model a caller holds."""
    gc.collect()
    return loading._alive_bytes()


def test_the_bundled_models_reserve_is_its_size():
    assert M.load_model(M.BUNDLED).params == config.BUNDLED_PARAMS


def test_a_second_model_evicts_the_least_recently_used_when_the_cap_holds_one(two, monkeypatch):
    sizes = _params(two)
    elsewhere = _held_elsewhere()
    monkeypatch.setenv(config.ENV_LOCAL, "1")
    monkeypatch.setenv(config.ENV_MODEL_MEMORY,                        # one fits (beside the
                       str(BUNDLED_BYTES + elsewhere + 4 * max(sizes.values()) + 1000))
    M.load_model(str(two["gpt2"]))
    assert loading.kept() == (str(two["gpt2"]),)
    llama = M.load_model(str(two["llama"]))                # nobody holds gpt2: it goes
    gc.collect()
    assert loading.kept() == (str(two["llama"]),) and llama.params == sizes["llama"]
    # gpt2 is gone from memory, llama in it. (What other tests' caches held may have been let
    # go meanwhile, so the bytes alive are bounded, not equal.)
    alive = {m.source for m in list(loading._ALIVE.values())}
    assert str(two["llama"]) in alive and str(two["gpt2"]) not in alive
    assert 4 * sizes["llama"] <= loading._alive_bytes() <= elsewhere + 4 * sizes["llama"]


def test_a_second_model_is_refused_while_the_first_is_in_use(two, monkeypatch):
    """The cap holds one: while a caller still holds the first, its memory is not free, so
    the second gets a sentence instead of both in memory (and an OOM kill on a small server)."""
    sizes = _params(two)
    monkeypatch.setenv(config.ENV_LOCAL, "1")
    monkeypatch.setenv(config.ENV_MODEL_MEMORY,
                       str(BUNDLED_BYTES + _held_elsewhere() + 4 * max(sizes.values()) + 1000))
    held = M.load_model(str(two["gpt2"]))
    err = _refusal(M.load_model, str(two["llama"]))
    assert err.key == "model.memory_busy", str(err)
    assert f"'{two['llama']}'" in str(err) and "MB" in str(err)
    assert held.run("the cat").weights.shape[0] == 2      # the first still works
    del held
    gc.collect()
    assert M.load_model(str(two["llama"])).params == sizes["llama"]   # once it is let go


def test_a_model_that_cannot_fit_even_alone_is_refused_before_its_weights_are_read(two,
                                                                                   monkeypatch):
    sizes = _params(two)
    monkeypatch.setenv(config.ENV_LOCAL, "1")
    monkeypatch.setenv(config.ENV_MODEL_MEMORY, str(BUNDLED_BYTES + 4 * sizes["gpt2"] - 1))
    for name in ("gpt2", "garbage"):          # garbage weights: never read, same sentence
        err = _refusal(M.load_model, str(two[name]))
        assert err.key == "model.memory_alone", str(err)
        assert err.values["need"] == -(-4 * sizes["gpt2"] // 10**6)
    assert loading.kept() == ()
    monkeypatch.setenv(config.ENV_MODEL_MEMORY, "1G")
    assert _refusal(M.load_model, str(two["garbage"])).key == "model.load_failed"


def test_the_default_cap_keeps_model_memory_within_one_and_a_half_gigabytes():
    p = config.policy()
    assert p.model_memory_bytes == 1_500_000_000
    # the largest model a default server takes, beside the bundled one
    assert (p.model_memory_bytes - BUNDLED_BYTES) // 4 < p.max_params
