"""Chinese text as a reader pastes it (no spaces between words) -> tokens.

Two ways, both keeping Latin words ("Attention", "self-attention", "2.13") whole and making
each punctuation mark its own token:

- `words`: every run of Han characters is split into words by jieba (its dictionary ships in
  the package: offline). jieba is imported and its dictionary loaded once per process, on the
  first Chinese text, never on a page without Chinese (about 0.6-0.9 s, then instant).
- `characters`: every Han character its own token; needs no dictionary.

Both stop as soon as they have more than `limit` tokens, so a hostile 200,000-character paste
costs no more than its first few thousand characters.
"""
from __future__ import annotations

import logging
import re
import threading
from typing import Iterator

# CJK unified ideographs (basic, extension A, compatibility, extensions B-G)
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_HAN = re.compile(f"[{HAN}]")
# A Han run; a Latin word (letters/digits, joined by ' - . inside: "it's", "self-attention",
# "2.13"); any other mark on its own (with the combining marks and emoji modifiers after it).
_PIECE = re.compile(
    rf"(?P<han>[{HAN}]+)"
    rf"|(?:(?![{HAN}])[^\W_])+(?:['’\-.](?:(?![{HAN}])[^\W_])+)*[\u0300-\u036f]*"
    r"|\S[\u0300-\u036f\u200d\ufe0f\U0001f3fb-\U0001f3ff]*")
# jieba sees at most this many Han characters at once: a run without punctuation longer than
# this is not prose, and cutting it keeps the cost of hostile input bounded.
_CHUNK = 200

_lock = threading.Lock()
_tokenizer = None


def has_han(text: str) -> bool:
    return _HAN.search(text) is not None


def _jieba():
    """jieba's tokenizer, its dictionary loaded; once per process, safe under threads."""
    global _tokenizer
    with _lock:
        if _tokenizer is None:
            import jieba

            # jieba logs "Building prefix dict..." to stderr, and a traceback when its cache
            # file (in tempfile.gettempdir()) cannot be written, which only costs a rebuild.
            jieba.setLogLevel(logging.CRITICAL)
            tokenizer = jieba.Tokenizer()   # the default dictionary, from the package
            tokenizer.initialize()
            _tokenizer = tokenizer
    return _tokenizer


def _han_words(run: str) -> Iterator[str]:
    tokenizer = _jieba()
    for start in range(0, len(run), _CHUNK):
        yield from tokenizer.cut(run[start:start + _CHUNK], HMM=True)


def pieces(text: str, how: str, limit: int) -> list[str]:
    """At most limit + 1 tokens of `text`, segmented `how` ("words" or "characters")."""
    out: list[str] = []
    for match in _PIECE.finditer(text):
        run = match.group("han")
        if run is None:
            out.append(match.group())
        elif how == "characters":
            out.extend(run[:limit + 1 - len(out)])
        else:
            for word in _han_words(run):
                out.append(word)
                if len(out) > limit:
                    break
        if len(out) > limit:
            break
    return out
