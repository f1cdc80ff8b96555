"""Parse pasted token lists: whitespace, commas, new lines or a JSON list of strings.

Order and duplicates are kept: position, not text, identifies a token.
"""
from __future__ import annotations

import json
import re

from .errors import UserError

MAX_TOKENS = 2048          # the longest sequence the dashboard computes
MAX_TOKEN_CHARS = 100      # a longer "token" is almost surely a paste gone wrong
MAX_INPUT_CHARS = 200_000  # raw text is refused before parsing beyond this
FORMATS = ("auto", "whitespace", "comma", "newline", "json")

# Control characters (NUL, bell, ...) are dropped; zero-width joiners and RTL marks are kept.
# So are lone surrogates (a JSON "\ud800" escape): no UTF-8 text can carry them, and the page
# would fail to send them to the browser.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


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


def _detect(text: str) -> str:
    """JSON if it opens with "["; one token per line or per comma when every piece is a single
    word ("the, cat, sat"); otherwise prose, split on whitespace ("Hello, world")."""
    stripped = text.strip()
    if stripped.startswith("["):
        return "json"
    if "\n" in stripped and _one_word_each(stripped.splitlines()):
        return "newline"
    if "," in stripped and _one_word_each(stripped.split(",")):
        return "comma"
    return "whitespace"


def parse_tokens(text: str, fmt: str = "auto", *, max_tokens: int = MAX_TOKENS) -> list[str]:
    """Split `text` into tokens; raise TokenError with a user-facing sentence if it cannot."""
    if fmt not in FORMATS:
        raise TokenError("errors.tokens_format", fmt=fmt, formats=", ".join(FORMATS))
    if not isinstance(text, str):
        raise TokenError("errors.tokens_not_text")
    if len(text) > MAX_INPUT_CHARS:
        raise TokenError("errors.tokens_too_many_chars", chars=len(text), limit=MAX_INPUT_CHARS)
    fmt = _detect(text) if fmt == "auto" else fmt
    if fmt == "json":
        raw = _split_json(text)
    elif fmt == "comma":
        raw = text.split(",")
    elif fmt == "newline":
        raw = text.splitlines()
    else:
        raw = text.split()
    # JSON strings are taken as written (only control characters go); split text is trimmed.
    cleaned = (_CONTROL.sub("", t) for t in raw)
    tokens = [t for t in cleaned if t] if fmt == "json" else [t.strip() for t in cleaned if t.strip()]
    if not tokens:
        raise TokenError("errors.tokens_empty")
    if len(tokens) > max_tokens:
        raise TokenError("errors.tokens_too_many", count=len(tokens), limit=max_tokens)
    too_long = next((i for i, t in enumerate(tokens) if len(t) > MAX_TOKEN_CHARS), None)
    if too_long is not None:
        raise TokenError("errors.token_too_long", index=too_long, chars=len(tokens[too_long]),
                         limit=MAX_TOKEN_CHARS)
    return tokens


def tokens_to_text(tokens) -> str:
    """Text that parse_tokens(text, "auto") turns back into exactly these tokens."""
    tokens = list(tokens)
    plain = " ".join(tokens)
    try:
        if parse_tokens(plain, "auto") == tokens:
            return plain
    except TokenError:
        pass
    return json.dumps(tokens, ensure_ascii=False)
