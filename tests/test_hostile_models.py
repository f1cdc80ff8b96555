"""Every bad model or model folder through the pages (AppTest): one sentence says what is
wrong, the page keeps working (no exception, the sidebar still drawn), nothing downloads."""
from __future__ import annotations

import json
import shutil
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


CASES = [
    Case("no_folder", "/nonexistent/model-dir", "models.no_folder"),
    Case("html_name", "<script>alert(1)</script>", "models.no_folder"),
    Case("not_a_name", "not a model", "models.unknown_source"),
    Case("hub_id_offline", "someone/not-cached-model", "models.downloads_off"),
    Case("empty_folder", "@empty", "models.no_config"),
    Case("config_not_json", "@badjson", "models.no_config"),
    Case("no_weights", "@noweights", "models.no_weights"),
    Case("pickle_only", "@pickle", "models.no_weights"),
    Case("remote_code", "@remote", "models.remote_code"),
    Case("encoder_decoder", "@encdec", "models.encoder_decoder"),
    Case("unknown_type", "@unknowntype", "models.unknown_architecture"),
    Case("no_tokenizer", "@notok", "models.no_tokenizer"),
    Case("too_large", "@bert", "models.too_large", env={config.ENV_MAX_PARAMS: "1000"}),
    Case("not_allowed", "@bert", "models.not_allowed", env={config.ENV_ALLOWED: "gpt2"}),
    Case("text_too_long", "@bert", "models.too_long", text=" ".join(["word"] * 100)),
    Case("layer_past_the_model", "@bert", warned=("sidebar.model_layer_clamped",),
         params={"layer": "7"}),
    Case("bad_interventions", "@bert", warned=("errors.iv_item", "models.bad_layer"),
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
    for name in (config.ENV_DOWNLOADS, config.ENV_MAX_PARAMS, config.ENV_ALLOWED):
        monkeypatch.delenv(name, raising=False)
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
