"""AttentionSpec: exact URL round trip, tolerant parsing, validation, frozen and hashable."""
from __future__ import annotations

import dataclasses
import json
import re
import warnings
from urllib.parse import parse_qsl, urlencode

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from attention.spec import (LIMITS, MAX_CELLS, SOURCES, AttentionSpec, SpecError,
                            SpecWarning)
from attention.text.tokens import (LINK_FORMAT, MAX_TOKENS, parse_tokens, tokens_from_link,
                              tokens_to_text)
from tests.test_tokens import valid_token as token

CJK = re.compile(r"[\u4e00-\u9fff]")

awkward = st.sampled_from(["New York", "a,b", "[x]", "[", "]", '"q"', "it's", "👋🏽", "猫",
                           " ", "\u2028", "%20", "&amp;", "#1", "+", "=", "?"])


def bounded(name):
    lo, hi = LIMITS[name]
    return st.integers(lo, hi)


specs = st.builds(
    AttentionSpec,
    tokens=st.lists(token | awkward, min_size=1, max_size=30).map(tuple),
    d_model=bounded("d_model"), d_k=bounded("d_k"), heads=bounded("heads"),
    seed=bounded("seed"), positional=st.booleans(), causal=st.booleans(),
    temperature=st.floats(*LIMITS["temperature"]),
    source=st.sampled_from(SOURCES), layer=bounded("layer"),
    model=st.sampled_from(["", "all-MiniLM-L6-v2", "gpt2", "/tmp/my model", "org/名前", "a&b=c"]),
    hide_sinks=st.booleans(),
    text=st.just("") | st.text(st.characters(codec="utf-8"), max_size=60) | st.sampled_from(
        ["Wait, what", "  a,b  ", "猫坐在垫子上，因为它很累。", '["x", "y"]', "a\n\tb", "%20&=#?+"]),
)


def no_warnings(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpecWarning)
        return fn(*args)


@settings(max_examples=200, deadline=None)
@given(spec=specs)
def test_query_round_trip_is_exact(spec):
    query = spec.to_query()
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in query.items())
    assert no_warnings(AttentionSpec.from_query, query) == spec
    # through a real URL: percent-encoding and parsing back, as a share link does
    url_params = dict(parse_qsl(urlencode(query), keep_blank_values=True))
    assert no_warnings(AttentionSpec.from_query, url_params) == spec


def test_default_spec_round_trips_and_is_plain_in_the_url():
    spec = AttentionSpec()
    assert spec.to_query()["tokens"] == " ".join(spec.tokens)
    assert AttentionSpec.from_query(spec.to_query()) == spec
    assert AttentionSpec.from_query({}) == spec


def test_tokens_that_need_json_are_encoded_as_json():
    assert AttentionSpec(tokens=("New York", "Paris")).to_query()["tokens"] == '["New York", "Paris"]'
    assert AttentionSpec(tokens=("[x", "y")).to_query()["tokens"] == '["[x", "y"]'


def _old_link_tokens(tokens):
    """How spec.py wrote a link's tokens before it used tokens.tokens_to_text (its own
    encoder, kept here verbatim so the links it made are checked to open the same view)."""
    plain = " ".join(tokens)
    if plain.split() == list(tokens) and not plain.startswith("["):
        return plain
    return json.dumps(list(tokens), ensure_ascii=False)


@settings(max_examples=200, deadline=None)
@given(tokens=st.lists(token | awkward, min_size=1, max_size=30).map(tuple))
def test_links_made_before_the_shared_encoder_open_the_same_view(tokens):
    # One token that pasted text splits ("猫坐", "a,b") is the exception: a link's value
    # without spaces is read as pasted text (a Chinese sentence as typed becomes its words).
    assume(len(tokens) > 1 or _old_link_tokens(tokens).startswith("[")
           or tokens_from_link(tokens[0]) == list(tokens))
    spec = AttentionSpec(tokens=tokens)
    old = {**spec.to_query(), "tokens": _old_link_tokens(tokens)}
    assert no_warnings(AttentionSpec.from_query, old) == spec
    assert spec.to_query()["tokens"] == old["tokens"]      # and new links read as they did


def test_the_link_uses_the_token_modules_encoder():
    for tokens in (("the", "cat"), ("Hello,", "world"), ("New York",), ("[x", "y"), ("猫坐",)):
        assert AttentionSpec(tokens=tokens).to_query()["tokens"] == tokens_to_text(tokens,
                                                                                   LINK_FORMAT)
    # a link keeps "Hello, world" plain (it splits on spaces only); the text box cannot
    assert AttentionSpec(tokens=("Hello,", "world")).to_query()["tokens"] == "Hello, world"


@pytest.mark.parametrize("name, raw", [
    ("d_k", "abc"), ("d_k", "4.0"), ("d_k", "0"), ("d_k", "1025"), ("d_k", ""),
    ("heads", "-1"), ("heads", "17"), ("d_model", "9" * 5000), ("seed", "-1"),
    ("seed", str(2**31)), ("temperature", "nan"), ("temperature", "inf"),
    ("temperature", "0.001"), ("temperature", "1000"), ("temperature", "warm"),
    ("positional", "maybe"), ("causal", "2"), ("layer", "256"), ("layer", "-1"), ("model", "a\nb"), ("model", "x" * 301), ("source", "gpu"),
    ("tokens", ""), ("tokens", "   "), ("tokens", '["a", 1]'), ("tokens", "[broken"),
    ("tokens", " ".join(["w"] * (MAX_TOKENS + 1))),
])
def test_malformed_params_fall_back_with_a_warning(name, raw):
    default = AttentionSpec()
    query = {"heads": "2", name: raw}  # one good parameter next to the bad one
    spec, problems = AttentionSpec.parse_query(query)
    assert getattr(spec, name) == getattr(default, name)
    assert spec.heads == (2 if name != "heads" else default.heads)
    assert [p.key for p in problems] == ["errors.url_param"]
    assert problems[0].values["name"] == name
    assert CJK.search(problems[0].message("zh"))
    with pytest.warns(SpecWarning, match=name):
        assert AttentionSpec.from_query(query) == spec


def test_repeated_params_last_one_wins_and_a_bad_last_one_falls_back():
    assert no_warnings(AttentionSpec.from_query, {"heads": ["2", "3"]}).heads == 3
    spec, problems = AttentionSpec.parse_query({"heads": ["2", "x"]})
    assert spec.heads == AttentionSpec().heads and len(problems) == 1
    spec, problems = AttentionSpec.parse_query({"heads": []})
    assert spec.heads == AttentionSpec().heads and len(problems) == 1


def test_booleans_accept_the_usual_spellings():
    for raw, value in [("1", True), ("true", True), ("On", True), ("0", False), ("no", False)]:
        assert no_warnings(AttentionSpec.from_query, {"causal": raw}).causal is value


def test_unknown_params_are_left_to_the_pages():
    # the URL also carries view settings (head, zoom, language) that are not part of the spec
    assert no_warnings(AttentionSpec.from_query, {"head": "3", "lang": "zh"}) == AttentionSpec()


def test_settings_that_cannot_go_together_give_the_default_example():
    query = {"tokens": " ".join(["w"] * MAX_TOKENS), "heads": "16"}
    spec, problems = AttentionSpec.parse_query(query)
    assert spec == AttentionSpec()
    assert [p.key for p in problems] == ["errors.url_spec"]
    assert problems[0].values["detail"].key == "errors.spec_cells"


@pytest.mark.parametrize("changes, key", [
    ({"tokens": ()}, "errors.tokens_empty"),
    ({"tokens": ("w",) * (MAX_TOKENS + 1)}, "errors.tokens_too_many"),
    ({"d_k": 0}, "errors.spec_range"),
    ({"d_model": 1025}, "errors.spec_range"),
    ({"heads": 17}, "errors.spec_range"),
    ({"temperature": float("nan")}, "errors.spec_range"),
    ({"temperature": float("inf")}, "errors.spec_range"),
    ({"temperature": 0.0}, "errors.spec_range"),
    ({"layer": -1}, "errors.spec_range"),
    ({"source": "gpu"}, "errors.spec_source"),
    ({"tokens": ("w",) * MAX_TOKENS, "heads": 13}, "errors.spec_cells"),
])
def test_validate_refuses_out_of_bounds_specs(changes, key):
    spec = dataclasses.replace(AttentionSpec(), **changes)
    with pytest.raises(SpecError) as info:
        spec.validate()
    assert info.value.key == key and isinstance(info.value, ValueError)
    assert CJK.search(info.value.message("zh"))
    if key == "errors.spec_cells":
        assert info.value.values["max_heads"] == 12


def test_the_limits_themselves_are_valid():
    AttentionSpec(tokens=("w",) * MAX_TOKENS, heads=12).validate()
    assert 12 * MAX_TOKENS * MAX_TOKENS == MAX_CELLS
    for name, (lo, hi) in LIMITS.items():
        for value in (lo, hi):
            dataclasses.replace(AttentionSpec(), **{name: value}).validate()


def test_frozen_hashable_and_equal_by_value():
    a = AttentionSpec(tokens=["the", "cat"])
    b = AttentionSpec(tokens=("the", "cat"))
    assert a == b and hash(a) == hash(b) and isinstance(a.tokens, tuple)
    assert {a: "cached"}[b] == "cached"
    assert a != dataclasses.replace(a, causal=True)
    assert hash(AttentionSpec()) == hash(AttentionSpec())
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.d_k = 32
    assert a.n == 2


def test_model_sources_keep_the_text_as_typed_and_links_carry_it_only_when_it_matters():
    spec = AttentionSpec(tokens=("Wait", "what"), source="pretrained", text=" Wait, what\x00 ")
    assert spec.text == "Wait, what" and spec.model_text == "Wait, what"
    query = no_warnings(spec.to_query)
    assert query["text"] == "Wait, what" and query["tokens"] == "Wait what"
    url_params = dict(parse_qsl(urlencode(query), keep_blank_values=True))
    assert no_warnings(AttentionSpec.from_query, url_params) == spec
    # the text says nothing more than the tokens: left out (one spec, one link per view)
    plain = AttentionSpec(tokens=("the", "cat"), source="pretrained", text="the cat")
    assert plain.text == "" and "text" not in plain.to_query() and plain.model_text == "the cat"
    # the random-projection source reads tokens only
    toy = AttentionSpec(tokens=("Wait", "what"), text="Wait, what")
    assert toy.text == "" and toy == AttentionSpec(tokens=("Wait", "what"))


def test_links_made_before_the_text_field_open_as_before():
    old = {"tokens": "Wait what", "source": "pretrained", "layer": "2"}
    spec = no_warnings(AttentionSpec.from_query, old)
    assert spec.text == "" and spec.model_text == "Wait what" and spec.layer == 2


def test_an_oversized_text_in_a_link_falls_back_with_a_warning():
    spec, problems = AttentionSpec.parse_query(
        {"source": "pretrained", "tokens": "a", "text": "x" * 200_001})
    assert spec.text == "" and spec.tokens == ("a",)
    assert [p.values["name"] for p in problems] == ["text"]


def test_model_and_hide_sinks_are_in_the_link_only_when_set():
    old = AttentionSpec(tokens=("a", "b"), source="pretrained")
    assert "model" not in old.to_query() and "hide_sinks" not in old.to_query()
    # an old link (source=pretrained, no model) opens MiniLM
    assert AttentionSpec.from_query(old.to_query()).model_source == "all-MiniLM-L6-v2"
    mine = AttentionSpec(tokens=("a", "b"), source="pretrained", model=" /tmp/tiny ",
                         hide_sinks=True)
    assert mine.model == "/tmp/tiny"
    assert mine.to_query()["model"] == "/tmp/tiny" and mine.to_query()["hide_sinks"] == "1"
    assert no_warnings(AttentionSpec.from_query, mine.to_query()) == mine
    # the bundled name and the toy source carry no model: one spec per view
    assert AttentionSpec(source="pretrained", model="all-MiniLM-L6-v2").model == ""
    assert AttentionSpec(model="gpt2", hide_sinks=True) == AttentionSpec()


@pytest.mark.parametrize("model, key", [("x" * 301, "errors.spec_model_long"),
                                        ("a\x07b", "errors.spec_model_control"),
                                        ("a\tb", "errors.spec_model_control")])
def test_bad_model_names_are_refused_with_a_sentence(model, key):
    with pytest.raises(SpecError) as err:
        AttentionSpec(source="pretrained", model=model).validate()
    assert err.value.key == key


def test_a_hand_written_chinese_link_reads_as_pasted_text():
    """Issue 44, item 5: `?tokens=<a sentence as typed>` is the words the box would make."""
    typed = "我昨天在图书馆借了三本关于历史的书。"
    spec = no_warnings(AttentionSpec.from_query, {"tokens": typed})
    assert spec.tokens == tuple(parse_tokens(typed)) and len(spec.tokens) == 12
    pretrained = no_warnings(AttentionSpec.from_query, {"tokens": typed, "source": "pretrained"})
    assert pretrained.model_text == typed          # a model reads it as typed
    assert pretrained.to_query()["tokens"] == typed and "text" not in pretrained.to_query()
    assert no_warnings(AttentionSpec.from_query, pretrained.to_query()) == pretrained


@pytest.mark.parametrize("link, tokens", [
    ("the animal didn't cross", ("the", "animal", "didn't", "cross")),
    ("Hello, world", ("Hello,", "world")),                  # spaces: split on them, as before
    ("我 昨天 在 图书馆 借 了", ("我", "昨天", "在", "图书馆", "借", "了")),
    ("手机 没电 了", ("手机", "没电", "了")),                   # not re-segmented: "没 电"
    ("a , b", ("a", ",", "b")),
    (",", (",",)),                                           # no token as pasted: one token
    ('["New York", "猫坐"]', ("New York", "猫坐")),
])
def test_links_the_app_made_before_open_the_same_view(link, tokens):
    assert no_warnings(AttentionSpec.from_query, {"tokens": link}).tokens == tokens
