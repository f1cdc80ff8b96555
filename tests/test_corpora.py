"""Corpus sources: the bundled corpora meet their bounds, every format gives back the texts
written to it, and every refusal is a UserError whose sentence names the user's own string."""
from __future__ import annotations

import hashlib
import io
import json
import re
import string
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from attention.text import corpora
from attention.text.corpora import (BUNDLED, MAX_TEXT_CHARS, MAX_TEXTS, MAX_UPLOAD_BYTES,
                                      MAX_UPLOAD_TEXTS, digest, from_upload, load, parse_lines)
from attention.errors import UserError
from attention.i18n import LANGUAGES, catalog

CORPORA = Path(corpora.__file__).resolve().parent.parent / "data" / "corpora"
TEXTS = ["The cat sat on the mat.", "它睡着了。", 'A cell with a comma, and "quotes".',
         "same text", "same text", "Ends here?"]        # a repeat is kept


def raw_lines(name: str) -> list[str]:
    return (CORPORA / name).read_text(encoding="utf-8").split("\n")[:-1]   # ends with "\n"


# The bundled corpora

def test_english_corpus_counts_lengths_and_no_repeats():
    lines = raw_lines("en.txt")
    assert len(lines) >= 320
    assert all(5 <= len(line.split()) <= 40 for line in lines), \
        [line for line in lines if not 5 <= len(line.split()) <= 40]
    assert len(set(lines)) == len(lines)
    assert all(line == line.strip() and line.isascii() for line in lines)
    assert not lines[0].startswith("#")                   # pure data, documented in README.md
    assert load("bundled:en") == lines
    assert sum("?" in line for line in lines) >= 10       # questions, not only statements


def test_chinese_corpus_counts_lengths_and_no_repeats():
    lines = raw_lines("zh.txt")
    assert len(lines) >= 110
    assert all(6 <= len(line) <= 40 for line in lines), \
        [line for line in lines if not 6 <= len(line) <= 40]
    assert len(set(lines)) == len(lines)
    assert not any(re.search(r"\s|[A-Za-z]", line) for line in lines)
    assert all(re.search(r"[\u4e00-\u9fff]", line) for line in lines)
    assert load("bundled:zh") == lines
    for needed in ("把", "被", "？", "他", "她", "它"):
        assert sum(needed in line for line in lines) >= 3, needed


def test_bundled_names_and_readme():
    assert BUNDLED == ("bundled:en", "bundled:zh")
    assert load(" BUNDLED:EN ") == load("bundled:en")     # a stray space or capital is forgiven
    readme = (CORPORA / "README.md").read_text(encoding="utf-8")
    assert "en.txt" in readme and "zh.txt" in readme and "licen" in readme.lower()


# Every format gives back the texts

def write(tmp_path: Path, name: str, frame_or_text) -> Path:
    path = tmp_path / name
    if name.endswith(".parquet"):
        frame_or_text.to_parquet(path, engine="pyarrow", index=False)
    elif name.endswith(".csv"):
        frame_or_text.to_csv(path, index=False)
    else:
        path.write_text(frame_or_text, encoding="utf-8")
    return path


@pytest.mark.parametrize("name,content,column", [
    ("a.txt", "\n".join(f"  {t}  " for t in TEXTS[:3]) + "\n\n \r\n" + "\r\n".join(TEXTS[3:]),
     None),
    ("a.csv", pd.DataFrame({"id": range(6), "text": TEXTS, "note": list("abcdef")}), None),
    ("b.csv", pd.DataFrame({"id": range(6), "sentence": TEXTS}), None),   # the only text column
    ("c.csv", pd.DataFrame({"body": TEXTS, "note": list("abcdef")}), "body"),
    ("a.jsonl", "\n".join(json.dumps({"text": t, "n": 1}, ensure_ascii=False) for t in TEXTS[:4])
     + "\n\n" + "\n".join(json.dumps(t) for t in TEXTS[4:]), None),     # bare strings count too
    ("b.jsonl", "\n".join(json.dumps({"s": t}) for t in TEXTS) + '\n{"s": null}', "s"),
    ("a.parquet", pd.DataFrame({"id": range(6), "text": TEXTS}), None),
    ("b.parquet", pd.DataFrame({"n": range(6), "s": TEXTS}), None),
    ("c.parquet", pd.DataFrame({"s": TEXTS, "t": TEXTS[::-1]}), "s"),
])
def test_every_format_round_trips(tmp_path, monkeypatch, name, content, column):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, name, content)
    assert load(name, column=column) == TEXTS
    assert load(str(path), column=column) == TEXTS
    assert from_upload(name, path.read_bytes(), column) == TEXTS


def test_parquet_dictionary_and_large_strings(tmp_path):
    table = pa.table({"text": pa.array(TEXTS).dictionary_encode(),
                      "other": pa.array([str(i) for i in range(6)], pa.large_string())})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    assert from_upload("d.parquet", buf.getvalue()) == TEXTS
    assert from_upload("d.parquet", buf.getvalue(), "other") == [str(i) for i in range(6)]


def test_csv_keeps_na_like_text_and_multiline_cells():
    data = 'text\nNA\n"two\nlines"\nnull\n'.encode()
    assert from_upload("n.csv", data) == ["NA", "two\nlines", "null"]


def test_parse_lines_strips_and_keeps_order_and_repeats():
    assert parse_lines(" b \n\n a\r\nb\r  \n") == ["b", "a", "b"]
    assert parse_lines("one\n") == ["one"]


def test_byte_order_mark_is_not_text():
    assert from_upload("bom.txt", "\ufefffirst\nsecond".encode("utf-8")) == ["first", "second"]


# Every refusal

def refusal(call) -> UserError:
    with pytest.raises(UserError) as caught:
        call()
    err = caught.value
    for lang in LANGUAGES:
        text = err.message(lang)
        assert text.strip() and "\n" not in text and "Traceback" not in text, text
        assert not re.search(r"\{[^}]*\}", text), text                  # no unfilled field
    return err


def csv_bytes(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode()


def parquet_bytes(frame: pd.DataFrame, **options) -> bytes:
    buf = io.BytesIO()
    frame.to_parquet(buf, engine="pyarrow", index=False, **options)
    return buf.getvalue()


# 300 rows of 9,000 characters, as a few kilobytes: one value repeated (a dictionary of one
# entry: small declared size, large decoded) and distinct values (a large declared size).
SAME = parquet_bytes(pd.DataFrame({"text": ["z" * 9_000] * MAX_UPLOAD_TEXTS}), compression="zstd")
DISTINCT = parquet_bytes(pd.DataFrame({"text": [f"{i:04d}" + "z" * 9_000
                                                for i in range(MAX_UPLOAD_TEXTS)]}),
                         compression="zstd")


FILES = {   # name -> bytes written to the temporary folder for the load() refusals below
    "latin.txt": "first line\ncaf\u00e9 au lait\n".encode("latin-1"),
    "blank.txt": b"\n  \n\t\n",
    "long.txt": ("short\n" * 2 + "x" * (MAX_TEXT_CHARS + 1) + "\n").encode(),
    "five.txt": b"a\nb\nc\nd\ne\n",
    "numbers.csv": csv_bytes(pd.DataFrame({"id": [1, 2], "score": [0.5, 1e3]})),
    "two.csv": csv_bytes(pd.DataFrame({"title": ["a", "b"], "body": ["c", "d"]})),
    "ragged.csv": b"text,n\nfine,1\nnot fine,2,3\n",
    "quote.csv": b'text\n"never closed\n',
    "bad.jsonl": b'{"text": "fine"}\n{"text": broken\n',
    "key.jsonl": b'{"text": "fine"}\n{"body": "x", "id": 3}\n',
    "number.jsonl": b'{"text": 12}\n',
    "list.jsonl": b'"fine"\n["a", "b"]\n',
    "junk.parquet": b"PAR1 this is not parquet PAR1",
    "ints.parquet": parquet_bytes(pd.DataFrame({"text": ["a", "b"], "n": [1, 2]})),
    "long.parquet": parquet_bytes(pd.DataFrame({"text": ["ok", "y" * (MAX_TEXT_CHARS + 5)]})),
    "empty.parquet": parquet_bytes(pd.DataFrame({"text": pd.Series([], dtype=str)})),
}

CASES = [   # (source, keyword arguments, expected key, expected values[, also in the message])
    ("bundled:fr", {}, "corpus.unknown_bundled", {}),
    ("notes.docx", {}, "corpus.unknown_source", {}),
    ("corpus", {}, "corpus.unknown_source", {}),
    ("missing.txt", {}, "corpus.not_found", {}),
    ("sub/../missing.csv", {}, "corpus.not_found", {}),
    ("folder.txt", {}, "corpus.not_found", {}),
    ("nul\x00byte.txt", {}, "corpus.not_found", {}),
    ("latin.txt", {}, "corpus.encoding", {"line": 2}),
    ("blank.txt", {}, "corpus.empty", {}),
    ("long.txt", {}, "corpus.text_too_long", {"number": 3, "chars": MAX_TEXT_CHARS + 1}),
    ("five.txt", {"limit": 4}, "corpus.too_many", {"count": 5, "limit": 4}),
    ("numbers.csv", {}, "corpus.no_text_column", {}, "“id”, “score”"),
    ("two.csv", {}, "corpus.ambiguous_column", {}, "“title”, “body”"),
    ("two.csv", {"column": "headline"}, "corpus.missing_column", {}, "“title”, “body”"),
    ("ragged.csv", {}, "corpus.csv_ragged", {"line": 3, "cells": 3, "width": 2}),
    ("quote.csv", {}, "corpus.csv_unreadable", {}),
    ("bad.jsonl", {}, "corpus.jsonl_parse", {"line": 2}),
    ("key.jsonl", {}, "corpus.jsonl_missing_key", {"line": 2}, "“body”, “id”"),
    ("number.jsonl", {}, "corpus.jsonl_not_text", {"line": 1}),
    ("list.jsonl", {}, "corpus.jsonl_shape", {"line": 2}),
    ("junk.parquet", {}, "corpus.parquet_unreadable", {}),
    ("ints.parquet", {"column": "n"}, "corpus.column_not_text", {}),
    ("ints.parquet", {"column": "nope"}, "corpus.missing_column", {}, "“text”, “n”"),
    ("ints.parquet", {"limit": 1}, "corpus.too_many", {"count": 2, "limit": 1}),
    ("long.parquet", {}, "corpus.text_too_long_row", {"number": 2}),
    ("empty.parquet", {}, "corpus.empty", {}),
]


@pytest.mark.parametrize("source,kwargs,key,values,also", [(*c, "")[:5] for c in CASES],
                         ids=[f"{i}-{c[2]}" for i, c in enumerate(CASES)])
def test_load_refusals_quote_the_users_string(tmp_path, monkeypatch, source, kwargs, key, values,
                                              also):
    monkeypatch.chdir(tmp_path)
    for name, data in FILES.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "folder.txt").mkdir()
    err = refusal(lambda: load(source, **kwargs))
    assert err.key == key
    assert {k: err.values[k] for k in values} == values
    shown = source.replace("\x00", "\\x00")                 # a control character is made visible
    for lang in LANGUAGES:
        text = err.message(lang)
        assert shown in text, text
        assert str(tmp_path) not in text and str(tmp_path.resolve()) not in text, text
        assert also in text, text                              # the columns or keys found
    if "column" in kwargs:
        assert f"“{kwargs['column']}”" in str(err)


def test_unreadable_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "locked.txt").write_text("a text\n")

    def denied(self):
        raise PermissionError(13, "Permission denied", str(self.resolve()))
    monkeypatch.setattr(Path, "read_bytes", denied)
    err = refusal(lambda: load("locked.txt"))
    assert err.key == "corpus.unreadable"
    assert "“locked.txt”" in str(err) and str(tmp_path) not in str(err)


def test_load_refuses_more_than_max_texts_unless_the_limit_is_raised(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "many.txt").write_text("t\n" * (MAX_TEXTS + 1))
    err = refusal(lambda: load("many.txt"))
    assert (err.key, err.values["count"], err.values["limit"]) == \
        ("corpus.too_many", MAX_TEXTS + 1, 100_000)
    assert "100,001" in str(err) and "“many.txt”" in str(err)
    assert len(load("many.txt", limit=MAX_TEXTS + 1)) == MAX_TEXTS + 1


@pytest.mark.parametrize("name,data,key", [
    ("big.txt", b"a\n" * (MAX_UPLOAD_BYTES // 2 + 1), "corpus.upload_too_big"),
    ("notes.pdf", b"%PDF-1.4", "corpus.upload_format"),
    ("no_extension", b"a text", "corpus.upload_format"),
    ("many.txt", "\n".join(f"t{i}" for i in range(MAX_UPLOAD_TEXTS + 1)).encode(),
     "corpus.too_many"),
    ("utf16.txt", "a text".encode("utf-16"), "corpus.encoding"),
    ("empty.csv", b"", "corpus.empty"),
    ("header.csv", b"text,n\n", "corpus.empty"),
    ("same.parquet", SAME, "corpus.too_much_text"),
    ("distinct.parquet", DISTINCT, "corpus.too_much_text"),
])
def test_upload_refusals(name, data, key):
    err = refusal(lambda: from_upload(name, data))
    assert err.key == key
    for lang in LANGUAGES:
        assert f"“{name}”" in err.message(lang)
    if key == "corpus.too_many":
        assert (err.values["count"], err.values["limit"]) == (MAX_UPLOAD_TEXTS + 1, 300)


def test_the_parquet_bombs_are_small_files():
    assert len(SAME) < 20_000 and len(DISTINCT) < 200_000   # refused for what they inflate to
    meta = pq.ParquetFile(io.BytesIO(SAME)).metadata
    declared = sum(meta.row_group(g).column(0).total_uncompressed_size
                   for g in range(meta.num_row_groups))
    assert declared < MAX_UPLOAD_TEXTS * MAX_TEXT_CHARS      # only the decoded size gives it away


@pytest.mark.parametrize("raw,key,values", [
    ("", "corpus.empty", {}),
    ("\n \n\t", "corpus.empty", {}),
    ("\n".join(["x"] * (MAX_UPLOAD_TEXTS + 1)), "corpus.too_many", {"count": 301}),
    ("ok\n\n" + "é" * (MAX_TEXT_CHARS + 1), "corpus.text_too_long", {"number": 3}),
])
def test_pasted_refusals(raw, key, values):
    err = refusal(lambda: parse_lines(raw))
    assert err.key == key
    assert {k: err.values[k] for k in values} == values
    assert "the pasted lines" in str(err) and "粘贴的内容" in err.message("zh")


def test_a_long_or_strange_user_string_is_quoted_short_and_visible():
    err = refusal(lambda: load("x" * 500 + ".docx"))
    assert "x" * 120 + "…" in str(err) and "x" * 121 not in str(err)
    err = refusal(lambda: from_upload("two\nlines.pdf", b"x"))
    assert "“two\\nlines.pdf”" in str(err)


# Digest

def test_digest_names_exactly_the_texts():
    texts = ["one text", "another text", "a third"]
    framed = b"".join(len(t.encode()).to_bytes(8, "little") + t.encode() for t in texts)
    assert digest(texts) == hashlib.sha256(framed).hexdigest()
    # joined by newlines these two lists are one string: framed, they are two corpora
    assert digest(["a\nb", "c"]) != digest(["a", "b\nc"])
    assert digest(["ab", ""]) != digest(["a", "b"]) != digest(["", "ab"]) != digest(["ab"])
    assert digest([]) != digest([""])
    assert re.fullmatch(r"[0-9a-f]{64}", digest(texts))
    assert digest(list(texts)) == digest(texts)
    assert digest(["one text", "another text", "a third."]) != digest(texts)
    assert digest(texts[::-1]) != digest(texts)
    assert digest(texts + ["a third"]) != digest(texts)
    assert digest(load("bundled:en")) != digest(load("bundled:zh"))


# Messages

def test_corpus_messages_exist_in_both_languages_with_the_same_fields():
    keys = {lang: {k for k in catalog(lang) if k.startswith("corpus.")} for lang in LANGUAGES}
    assert keys["en"] and all(k == keys["en"] for k in keys.values())
    fields = lambda text: sorted(f for _, f, _, _ in string.Formatter().parse(text) if f)
    for key in keys["en"]:
        assert fields(catalog("en")[key]) == fields(catalog("zh")[key]), key
    used = set(re.findall(r'"(corpus\.[a-z_]+)"', Path(corpora.__file__).read_text()))
    assert used and used <= keys["en"]          # every message the reader raises exists
    # (the namespace also holds the Corpus page's text, some of it looked up by built names
    # such as f"corpus.colour_{by}", so "no message unused" is not checked over it)
