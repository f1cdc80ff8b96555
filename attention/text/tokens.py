"""Parse pasted token lists: whitespace, commas, new lines, a JSON list of strings, or Chinese
text as written (no spaces), segmented into words or characters (see segment.py).

Order and duplicates are kept: position, not text, identifies a token.
"""
from __future__ import annotations

import json
import re
from itertools import islice

from attention.text import segment
from attention.config import MAX_INPUT_CHARS, MAX_TOKEN_CHARS, MAX_TOKENS
from attention.errors import UserError

FORMATS = ("auto", "whitespace", "comma", "newline", "json", "chinese", "characters")
SEGMENTED = {"chinese": "words", "characters": "characters"}  # format -> segment.pieces(how)
# The comma format also splits on the full-width comma, the enumeration comma and the
# full-width semicolon, as Chinese text writes its lists.
_COMMAS = re.compile(r"[,，、；]")
LINK_FORMAT = "link"  # tokens_to_text's format for a link's `tokens` value (tokens_from_link)
_COMMA = re.compile(",")           # what "auto" takes for a comma in text without Chinese

# Control characters (NUL, bell, ...) are dropped; zero-width joiners and RTL marks are kept.
# So are lone surrogates (a JSON "\ud800" escape): no UTF-8 text can carry them, and the page
# would fail to send them to the browser.
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


class TokenError(UserError):
    """Input that cannot become a token list; the message is written for the user."""


def _split_json(text: str) -> list[str]:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as err:
        # Where it broke, not Python's English reason, so the message reads in any language.
        raise TokenError("errors.tokens_json_parse", line=getattr(err, "lineno", 1),
                         column=getattr(err, "colno", 1)) from None
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise TokenError("errors.tokens_json_shape")
    return value


def _one_word_each(pieces: list[str]) -> bool:
    return all(len(p.split()) <= 1 for p in pieces)


def _one_chinese_word_each(pieces: list[str]) -> bool:
    """Each piece one word as jieba cuts it. Only the first MAX_TOKENS + 1 pieces are looked at:
    with more, the input is refused whichever way it is split."""
    pieces = islice((p for p in pieces if p.strip()), MAX_TOKENS + 1)
    return all(len(segment.pieces(p, "words", 1)) <= 1 for p in pieces)


def _detect(text: str) -> str:
    """JSON if it opens with "["; one token per line or per comma when every piece is a single
    word ("the, cat, sat"); otherwise prose, split on whitespace ("Hello, world").

    Text with Chinese characters is judged by words as jieba cuts them: lines or comma pieces
    of one word each ("猫，狗，鸟") are a list, text already spaced word by word ("猫 坐 在 垫子
    上") is split on the spaces, and anything else (a sentence as written) is segmented."""
    stripped = text.strip()
    if stripped.startswith("["):
        return "json"
    han = segment.has_han(stripped)
    one_each = _one_chinese_word_each if han else _one_word_each
    if "\n" in stripped and one_each(stripped.splitlines()):
        return "newline"
    commas = _COMMAS if han else _COMMA
    if commas.search(stripped) and one_each(commas.split(stripped)):
        return "comma"
    if han and not one_each(stripped.split()):
        return "chinese"
    return "whitespace"


def check_length(text: str) -> str:
    """`text` itself, or TokenError when it is too long to parse at all."""
    if len(text) > MAX_INPUT_CHARS:
        raise TokenError("errors.tokens_too_many_chars", chars=len(text), limit=MAX_INPUT_CHARS)
    return text


def parse(text: str, fmt: str = "auto", *, max_tokens: int = MAX_TOKENS) -> tuple[list[str], str]:
    """The tokens of `text` and the format they were split by (what "auto" detected)."""
    if fmt not in FORMATS:
        raise TokenError("errors.tokens_format", fmt=fmt, formats=", ".join(FORMATS))
    if not isinstance(text, str):
        raise TokenError("errors.tokens_not_text")
    check_length(text)
    fmt = _detect(text) if fmt == "auto" else fmt
    if fmt in SEGMENTED:
        raw = segment.pieces(CONTROL.sub("", text), SEGMENTED[fmt], max_tokens)
        if len(raw) > max_tokens:   # segmentation stopped there: the full count is not known
            raise TokenError("errors.tokens_too_many_words", limit=max_tokens)
    elif fmt == "json":
        raw = _split_json(text)
    elif fmt == "comma":
        raw = _COMMAS.split(text)
    elif fmt == "newline":
        raw = text.splitlines()
    else:
        raw = text.split()
    # JSON strings are taken as written (only control characters go); split text is trimmed.
    cleaned = (CONTROL.sub("", t) for t in raw)
    tokens = [t for t in cleaned if t] if fmt == "json" else [t.strip() for t in cleaned if t.strip()]
    if not tokens:
        raise TokenError("errors.tokens_empty")
    if len(tokens) > max_tokens:
        raise TokenError("errors.tokens_too_many", count=len(tokens), limit=max_tokens)
    too_long = next((i for i, t in enumerate(tokens) if len(t) > MAX_TOKEN_CHARS), None)
    if too_long is not None:
        raise TokenError("errors.token_too_long", index=too_long, chars=len(tokens[too_long]),
                         limit=MAX_TOKEN_CHARS)
    return tokens, fmt


def parse_tokens(text: str, fmt: str = "auto", *, max_tokens: int = MAX_TOKENS) -> list[str]:
    """Split `text` into tokens; raise TokenError with a user-facing sentence if it cannot."""
    return parse(text, fmt, max_tokens=max_tokens)[0]


def tokens_to_text(tokens, fmt: str = "auto") -> str:
    """Text that reads back into exactly these tokens: the tokens joined by spaces when that
    reads back and does not open with "[", else a JSON list. Read back by
    parse_tokens(text, fmt), or by tokens_from_link for fmt=LINK_FORMAT.

    The one token encoder: the sidebar's text box ("auto") and the share link
    (spec.to_query, LINK_FORMAT)."""
    tokens = list(tokens)
    plain = " ".join(tokens)
    try:
        read = tokens_from_link(plain) if fmt == LINK_FORMAT else parse_tokens(plain, fmt)
        if not plain.startswith("[") and read == tokens:
            return plain
    except TokenError:
        pass
    return json.dumps(tokens, ensure_ascii=False)


def tokens_from_link(text: str) -> list[str]:
    """The tokens of a link's `tokens` value: a JSON list if it opens with "["; split on
    whitespace if it has any (how the app has always written a list of tokens, so every link
    it made reads back the same, and how a hand-made list reads: "猫 坐 在"); otherwise read
    as pasted text is ("auto"): a sentence written without spaces, as Chinese is, becomes its
    words, and "a,b,c" three tokens (a one-token link the app made before, "a,b" or "猫坐",
    now reads so too; the app writes such a token as JSON)."""
    stripped = text.strip()
    if stripped.startswith("["):
        return parse_tokens(text, "json")
    if len(stripped.split()) > 1:
        return parse_tokens(text, "whitespace")
    try:
        return parse_tokens(text)
    except TokenError:            # "," alone: no token as pasted text, one in a link
        return parse_tokens(text, "whitespace")
