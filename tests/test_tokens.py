"""parse_tokens: every format, auto detection, each refusal and its translation, properties."""
from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention.text.tokens import (FORMATS, LINK_FORMAT, MAX_TOKEN_CHARS, MAX_TOKENS, TokenError,
                              parse_tokens, tokens_from_link, tokens_to_text)

CJK = re.compile(r"[\u4e00-\u9fff]")
DROPPED = "".join(map(chr, [*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F]))  # by the parser


@pytest.mark.parametrize("text, fmt, expected", [
    ("the cat  sat\ton the\nmat", "whitespace", ["the", "cat", "sat", "on", "the", "mat"]),
    ("the, cat ,sat,, on", "comma", ["the", "cat", "sat", "on"]),
    ("New York\nSan Francisco\n\n Paris ", "newline", ["New York", "San Francisco", "Paris"]),
    ('["a b", " c", "a b", "[x]"]', "json", ["a b", " c", "a b", "[x]"]),
    ("猫 坐 在 垫子 上", "whitespace", ["猫", "坐", "在", "垫子", "上"]),
    ("👋🏽, e\u0301", "comma", ["👋🏽", "e\u0301"]),
])
def test_each_format(text, fmt, expected):
    assert parse_tokens(text, fmt) == expected


@pytest.mark.parametrize("text, expected", [
    ("the cat sat", ["the", "cat", "sat"]),
    ("Hello, world. I said, hi", ["Hello,", "world.", "I", "said,", "hi"]),  # prose stays prose
    ("a, b, c", ["a", "b", "c"]),
    ("a,b,c", ["a", "b", "c"]),
    ("one\ntwo\nthree", ["one", "two", "three"]),
    ("the cat\nsat down", ["the", "cat", "sat", "down"]),  # lines of several words: prose
    ('  ["x", "y"]  ', ["x", "y"]),
    ('"quoted"', ['"quoted"']),  # a JSON string, not a list: an ordinary token
])
def test_auto_detection(text, expected):
    assert parse_tokens(text) == expected


def test_order_and_duplicates_are_kept():
    assert parse_tokens("b a b a b") == ["b", "a", "b", "a", "b"]
    assert parse_tokens('["z", "z", "a"]') == ["z", "z", "a"]


def refusal(text, fmt="auto", **kwargs) -> TokenError:
    with pytest.raises(TokenError) as info:
        parse_tokens(text, fmt, **kwargs)
    err = info.value
    assert isinstance(err, ValueError)
    assert CJK.search(err.message("zh")), err.message("zh")  # a real Chinese sentence
    assert not CJK.search(str(err))
    assert "{" not in err.message("en") and "{" not in err.message("zh")  # every value filled in
    return err


@pytest.mark.parametrize("text, fmt, key", [
    ("", "auto", "errors.tokens_empty"),
    ("   \n\t  ", "auto", "errors.tokens_empty"),
    (",,, ,", "comma", "errors.tokens_empty"),
    ("[]", "auto", "errors.tokens_empty"),
    ('{"a": 1}', "json", "errors.tokens_json_shape"),
    ("[1, 2]", "auto", "errors.tokens_json_shape"),
    ('["a", 1]', "auto", "errors.tokens_json_shape"),
    ('[["a"]]', "auto", "errors.tokens_json_shape"),
    ('"a"', "json", "errors.tokens_json_shape"),
    ('["a", "b"', "auto", "errors.tokens_json_parse"),
    ("[" * 100_000, "auto", "errors.tokens_json_parse"),  # deeper than the JSON parser goes
    ("a b", "tsv", "errors.tokens_format"),
])
def test_each_refusal(text, fmt, key):
    assert refusal(text, fmt).key == key


def test_the_token_limit():
    assert len(parse_tokens(" ".join(["w"] * MAX_TOKENS))) == MAX_TOKENS
    err = refusal(" ".join(["w"] * (MAX_TOKENS + 1)))
    assert err.key == "errors.tokens_too_many"
    assert f"{MAX_TOKENS + 1:,}" in str(err) and f"{MAX_TOKENS:,}" in str(err)
    assert parse_tokens("a b c", max_tokens=3) == ["a", "b", "c"]
    assert refusal("a b c d", max_tokens=3).key == "errors.tokens_too_many"


def test_the_token_length_limit():
    assert parse_tokens("x" * MAX_TOKEN_CHARS) == ["x" * MAX_TOKEN_CHARS]
    err = refusal("ok " + "x" * (MAX_TOKEN_CHARS + 1))
    assert err.key == "errors.token_too_long" and err.values["index"] == 1


def test_control_characters_are_dropped():
    assert parse_tokens("a\x00b c\x07") == ["ab", "c"]


texts = st.text(st.characters(codec="utf-8"), max_size=300) | st.from_regex(
    r'\A\[?( *"[^"]{0,5}" *,?){0,6}\]?\Z', fullmatch=True)


@settings(max_examples=150, deadline=None)
@given(text=texts, fmt=st.sampled_from(FORMATS))
def test_parser_raises_only_token_errors(text, fmt):
    try:
        tokens = parse_tokens(text, fmt)
    except TokenError as err:
        assert err.message("en") and err.message("zh")
        return
    assert tokens and all(isinstance(t, str) and t for t in tokens)
    assert len(tokens) <= MAX_TOKENS and all(len(t) <= MAX_TOKEN_CHARS for t in tokens)


# what a parsed token can be: none of the dropped control characters, no lone surrogates
# (tabs, new lines and C1 controls can sit inside a JSON string), 1..100 characters
valid_token = st.text(
    st.characters(codec="utf-8", exclude_characters=DROPPED, exclude_categories=("Cs",)),
    min_size=1, max_size=MAX_TOKEN_CHARS)
token_lists = st.lists(valid_token, min_size=1, max_size=40)


@settings(max_examples=100, deadline=None)
@given(tokens=token_lists, ascii_only=st.booleans())
def test_json_lists_round_trip(tokens, ascii_only):
    text = json.dumps(tokens, ensure_ascii=ascii_only)
    assert parse_tokens(text) == tokens
    assert parse_tokens(text, "json") == tokens


@settings(max_examples=100, deadline=None)
@given(tokens=token_lists)
def test_tokens_to_text_round_trips(tokens):
    assert parse_tokens(tokens_to_text(tokens)) == tokens


def test_tokens_to_text_prefers_plain_text():
    assert tokens_to_text(["the", "cat"]) == "the cat"
    assert tokens_to_text(["New York", "Paris"]) == '["New York", "Paris"]'
    assert tokens_to_text(["a,", "b"]) == '["a,", "b"]'  # "a, b" would read as two commas


@settings(max_examples=100, deadline=None)
@given(tokens=token_lists)
def test_link_form_round_trips(tokens):
    assert tokens_from_link(tokens_to_text(tokens, LINK_FORMAT)) == tokens


def test_link_form_is_plain_wherever_spaces_split_it():
    assert tokens_to_text(["a,", "b"], LINK_FORMAT) == "a, b"          # the box needs JSON here
    assert tokens_to_text(["[x", "y"], LINK_FORMAT) == '["[x", "y"]'   # would read as JSON
    assert tokens_to_text(["New York"], LINK_FORMAT) == '["New York"]'
