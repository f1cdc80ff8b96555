"""Every bad model or model folder through the pages (AppTest): one sentence says what is
wrong, the page keeps working (no exception, the sidebar still drawn), nothing downloads.

On a server started with nothing set (a shared server's default) every folder path and Hub id
outside the allow-list gets the same sentence, quoting only the visitor's own string: it tells
nothing of the disk (test_a_shared_server_tells_nothing_of_its_disk). The folder cases below
run with folders turned on, as on one's own machine (`make run`)."""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from dataclasses import dataclass, field

import pytest

from attention import config
from attention import models as M
from attention.spec import AttentionSpec
from tests.apptest import open_page
from tests.test_hostile_input import _is_sentence, _template
from tests.tiny_models import build

MODEL_PAGE, HEATMAP = "pages/3_Model_heads.py", "pages/1_Heatmap.py"
TEXT = "the cat sat on the mat"
ENVS = (config.ENV_DOWNLOADS, config.ENV_MAX_PARAMS, config.ENV_ALLOWED, config.ENV_LOCAL,
        config.ENV_MODEL_MEMORY, config.ENV_RESULTS)


@dataclass(frozen=True)
class Case:
    name: str
    model: str                      # a folder name under the fixture's root, or a literal
    error: str | None = None        # i18n key of the page's one error
    warned: tuple = ()              # i18n keys found among the warnings
    env: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    text: str = TEXT
    pages: tuple = (MODEL_PAGE, HEATMAP)
    local: bool = True              # folders on (one's own machine)


CASES = [
    Case("no_folder", "/nonexistent/model-dir", "model.no_folder"),
    Case("html_name", "<script>alert(1)</script>", "model.no_folder"),
    Case("not_a_name", "not a model", "model.unknown_source"),
    Case("hub_id_offline", "someone/not-cached-model", "model.downloads_off"),
    Case("empty_folder", "@empty", "model.no_config"),
    Case("config_not_json", "@badjson", "model.no_config"),
    Case("no_weights", "@noweights", "model.no_weights"),
    Case("pickle_only", "@pickle", "model.no_weights"),
    Case("remote_code", "@remote", "model.remote_code"),
    Case("encoder_decoder", "@encdec", "model.encoder_decoder"),
    Case("unknown_type", "@unknowntype", "model.unknown_architecture"),
    Case("no_tokenizer", "@notok", "model.no_tokenizer"),
    Case("too_large", "@bert", "model.too_large", env={config.ENV_MAX_PARAMS: "1000"}),
    Case("not_allowed", "@bert", "model.not_allowed", env={config.ENV_ALLOWED: "gpt2"},
         local=False),
    Case("text_too_long", "@bert", "model.too_long", text=" ".join(["word"] * 100)),
    Case("layer_past_the_model", "@bert", warned=("sidebar.model_layer_clamped",),
         params={"layer": "7"}),
    Case("bad_interventions", "@bert", warned=("errors.iv_item", "model.bad_layer"),
         params={"iv": "bogus:1:1;ablate:9:0;ablate:0:0"}, pages=(MODEL_PAGE,)),
]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    base = tmp_path_factory.mktemp("bad_models")
    bert = build(base, ["bert"])["bert"]
    (base / "empty").mkdir()
    (base / "badjson").mkdir()
    (base / "badjson" / "config.json").write_text("{not json", encoding="utf-8")
    config = json.loads((bert / "config.json").read_text(encoding="utf-8"))

    def folder(name: str, weights: bool = True, tokenizer: bool = True, **changes):
        out = base / name
        shutil.copytree(bert, out)
        (out / "config.json").write_text(json.dumps({**config, **changes}), encoding="utf-8")
        if not weights:
            for f in out.glob("*.safetensors"):
                f.unlink()
        if not tokenizer:
            for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt",
                      "special_tokens_map.json"):
                (out / f).unlink(missing_ok=True)
        return out

    folder("noweights", weights=False)
    (folder("pickle", weights=False) / "pytorch_model.bin").write_bytes(b"\x80\x04K\x01.")
    folder("remote", auto_map={"AutoModel": "modeling_evil.EvilModel"})
    folder("encdec", is_encoder_decoder=True)
    folder("unknowntype", model_type="no-such-architecture-xyz")
    folder("notok", tokenizer=False)
    return base


@pytest.mark.parametrize("case, page", [
    pytest.param(c, p, id=f"{c.name}-{p.rsplit('/', 1)[-1][:-3]}") for c in CASES for p in c.pages])
def test_bad_model(case, page, root, monkeypatch):
    for name in ENVS:
        monkeypatch.delenv(name, raising=False)
    if case.local:
        monkeypatch.setenv(config.ENV_LOCAL, "1")
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    model = str(root / case.model[1:]) if case.model.startswith("@") else case.model
    spec = AttentionSpec(tokens=tuple(case.text.split()), source="pretrained", model=model)
    at = open_page(page, spec, **case.params)
    assert not at.exception, [e.value for e in at.exception]
    errors, warnings = [e.value for e in at.error], [w.value for w in at.warning]
    for text in errors + warnings:
        assert _is_sentence(text), text
    if case.error is not None:
        assert len(errors) == 1 and _template(case.error).search(errors[0]), errors
    else:
        assert not errors, errors
    for key in case.warned:
        assert any(_template(key).search(w) for w in warnings), (key, warnings)
    # the page keeps working: the sidebar is drawn with the model box holding the input
    assert at.sidebar.text_input(key="in_model").value == model
    if case.name == "html_name":   # user text is shown literally, never as HTML
        assert "<script>alert(1)</script>" in errors[0]


def test_a_model_name_with_control_characters_in_the_link_is_ignored():
    at = open_page(MODEL_PAGE, source="pretrained", tokens="a b", model="evil\x07name")
    assert not at.exception
    assert any(_template("errors.spec_model_control").search(w.value) for w in at.warning)
    assert "model" not in at.query_params      # MiniLM shown instead
    assert not at.error


# ---- a shared server (nothing set) tells nothing of its disk ----------------------------------

# "@name" is a folder under the fixture's root (absolute); "@@name" the same relative to the
# working directory through a `..` chain; everything else is literal.
PROBES = [
    "/", "/root", "/etc", "/etc/passwd", "/nonexistent/model-dir", "/proc/self",
    "/proc/self/cwd", "/proc/1/root", "/proc/self/environ", "/dev/null",
    "relative/path", "./models", "tests", "attention/data", "app.py", ".", "..",
    "../../../../../../etc", "~", "~/.cache/huggingface/hub", "~root",
    "file:///etc/passwd", "file://localhost/proc/self", "$HOME", "${HOME}/models",
    "%USERPROFILE%\\models", "C:\\Windows\\System32", "\\\\server\\share\\model",
    "bert-base-uncased", "gpt2", "a/b", "../a/b", "sentence-transformers/all-MiniLM-L6-v2",
    "all-MiniLM-L6-v2/../../etc", "<script>alert(1)</script>", "/" + "deep/" * 58,
    "@bert", "@link", "@bert/../bert", "@@bert", "@empty", "@missing", "@badjson", "@proc",
]


def _probe(probe: str, root: Path) -> str:
    if probe.startswith("@@"):
        return os.path.relpath(root / probe[2:], Path.cwd())          # ../../tmp/...
    return str(root / probe[1:]) if probe.startswith("@") else probe


@pytest.fixture(scope="module")
def hostile_root(root):
    """The bad-models root plus a symlink to the real tiny model and one to /proc/self."""
    (root / "link").symlink_to(root / "bert", target_is_directory=True)
    (root / "proc").symlink_to("/proc/self", target_is_directory=True)
    return root


def _secrets(root: Path) -> list[str]:
    """What no message may contain (outside the visitor's own quoted string)."""
    pid = str(os.getpid())
    return [f"/proc/{pid}", str(Path.home()), str(root), str(Path.cwd()), str(Path("/proc/self")
            .resolve()), os.environ.get("USER", "\0"), os.environ.get("HOSTNAME", "\0")]


def _page_texts(at) -> list[str]:
    return [e.value for kind in ("error", "warning", "caption", "markdown", "info", "exception")
            for e in getattr(at, kind)] + [e.value for e in at.sidebar.get("caption")]


def _check_refused(at, typed: str, root: Path) -> str:
    """The page's one error, with the visitor's quoted string cut out; asserts no secret."""
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert len(errors) == 1, errors
    expected = M.load_model.__globals__["UserError"](
        "model.not_allowed", source=config.shown(typed),
        allowed=", ".join(config.BUNDLED_SOURCES), env=config.ENV_LOCAL)
    assert errors[0] == str(expected), (typed, errors[0])
    rest = errors[0].replace(f"'{config.shown(typed)}'", "'…'", 1)
    everything = "\n".join(_page_texts(at)).replace(config.shown(typed), "…")
    for secret in _secrets(root):
        assert secret not in everything, (typed, secret)
    assert not re.search(r"/proc/\d", everything), typed
    assert not any(_template("sidebar.pretrained_fixed").search(c.value)
                   for c in at.sidebar.get("caption"))                 # nothing loaded
    return rest


@pytest.fixture
def shared_server(monkeypatch):
    """The environment of a server started as a deployer starts it: nothing set."""
    for name in ENVS:
        monkeypatch.delenv(name, raising=False)
    from attention.models import loading

    loading.clear_kept()


def test_a_shared_server_tells_nothing_of_its_disk(hostile_root, shared_server):
    """Each probe by the link's model= parameter: the identical sentence apart from quoting
    the input; the real tiny model folder (by path, symlink, `..` chain) does not load."""
    from attention.models import loading

    assert len(PROBES) >= 25
    sentences = set()
    for probe in PROBES:
        typed = _probe(probe, hostile_root)
        at = open_page(MODEL_PAGE, source="pretrained", tokens="the cat sat", model=typed)
        sentences.add(_check_refused(at, typed, hostile_root))
        assert at.sidebar.text_input(key="in_model").value == typed
    assert len(sentences) == 1, sentences
    assert loading.kept() == ()


def test_the_sidebar_box_refuses_the_same_way(hostile_root, shared_server):
    """Typed into the sidebar's model box (not a link): the same sentence; and the Heatmap."""
    at = open_page(MODEL_PAGE, source="pretrained", tokens="the cat sat")
    assert not at.error
    for probe in ("/proc/self", "@bert", "@link", "~", "bert-base-uncased", "../a/b"):
        typed = _probe(probe, hostile_root)
        at.sidebar.selectbox(key="in_model_pick").set_value("own")
        at.run()
        at.sidebar.text_input(key="in_model").set_value(typed)
        at.run()
        _check_refused(at, typed, hostile_root)
    at = open_page(HEATMAP, source="pretrained", tokens="the cat sat",
                   model=str(hostile_root / "bert"))
    _check_refused(at, str(hostile_root / "bert"), hostile_root)


def test_link_with_control_characters_or_too_long_is_refused_before_the_policy(shared_server):
    """NUL bytes and names longer than a link may carry never reach the loader: the spec's
    own sentence, the same for every such name, and the bundled model shown instead."""
    for typed in ("/proc/self\x00", "a\x00b", "~\x00/.ssh", "/" + "x" * 400):
        at = open_page(MODEL_PAGE, source="pretrained", tokens="a b", model=typed)
        assert not at.exception and not at.error
        keys = ("errors.spec_model_control", "errors.spec_model_long")
        assert any(_template(k).search(w.value) for w in at.warning for k in keys)
        assert all("/proc/" not in w.value and str(Path.home()) not in w.value
                   for w in at.warning)


def test_the_allow_list_is_what_a_shared_server_offers(hostile_root, shared_server, monkeypatch):
    """A folder the deployer lists loads by exactly that string; the same folder by another
    spelling (symlink, `..`) is still refused with the one sentence."""
    folder = str(hostile_root / "bert")
    monkeypatch.setenv(config.ENV_ALLOWED, f"gpt2,{folder}")
    at = open_page(MODEL_PAGE, source="pretrained", tokens="the cat sat", model=folder)
    assert not at.error, [e.value for e in at.error]
    assert any(_template("sidebar.pretrained_fixed").search(c.value)
               for c in at.sidebar.get("caption"))
    for typed in (str(hostile_root / "link"), folder + "/../bert"):
        at = open_page(MODEL_PAGE, source="pretrained", tokens="the cat sat", model=typed)
        errors = [e.value for e in at.error]
        assert len(errors) == 1 and _template("model.not_allowed").search(errors[0])
        assert f"gpt2, {folder}" in errors[0]          # what it offers, as the deployer wrote


def test_folders_turned_on_locally_load_the_tiny_model_by_path(hostile_root, shared_server,
                                                                monkeypatch):
    """The same probes on one's own machine (ATTENTION_EXPLORER_LOCAL_MODELS=1, as `make run`
    sets it): the tiny model folder loads by its path, its symlink and a `..` chain; every
    other probe gets a sentence that quotes the typed string, never a resolved path."""
    monkeypatch.setenv(config.ENV_LOCAL, "1")
    loads = {"@bert", "@link", "@bert/../bert", "@@bert"}
    for probe in PROBES:
        typed = _probe(probe, hostile_root)
        at = open_page(MODEL_PAGE, source="pretrained", tokens="the cat sat", model=typed)
        assert not at.exception, (typed, [e.value for e in at.exception])
        errors = [e.value for e in at.error]
        if probe in loads:
            assert not errors, (typed, errors)
            assert any(_template("sidebar.pretrained_fixed").search(c.value)
                       for c in at.sidebar.get("caption")), typed
            continue
        assert len(errors) == 1 and _is_sentence(errors[0]), (typed, errors)
        assert f"'{config.shown(typed)}'" in errors[0] or config.shown(typed) in errors[0], \
            (typed, errors[0])
        rest = errors[0].replace(config.shown(typed), "…")
        assert not re.search(r"/proc/\d", rest) and str(Path.home()) not in rest, (typed, rest)
        assert str(Path("/proc/self").resolve()) not in rest
