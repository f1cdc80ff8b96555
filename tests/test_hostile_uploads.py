"""Every file a user can upload, made hostile: a snapshot (JSON) and Q/K/V or attention
weights (.npy, .csv). Each case must be refused at load time with one UserError whose
sentence exists in both languages and formats without a missing or stray placeholder; a
subset goes through the pages (AppTest uploads), which show one error and keep working.
"""
from __future__ import annotations

import copy
import io
import json
import math
import pickle
import re

import numpy as np
import pytest

from attention.files import snapshot

from attention.files import upload
from attention.analysis import analyze
from attention.errors import UserError
from attention.i18n import LANGUAGES, catalog
from attention.spec import AttentionSpec
from attention.text.tokens import MAX_TOKENS, tokens_to_text
from attention.ui.snapshot import BOX_KEY
from tests.apptest import open_menu, open_page

SPEC = AttentionSpec(tokens=("the", "cat", "sat", "on", "the", "mat"), heads=2, d_k=8,
                     causal=True, temperature=0.7, seed=3)
BASE = json.loads(snapshot.dumps(analyze(SPEC)))                     # a valid document
DEEP = 50_000                                                          # nesting levels


def doc(**changes) -> bytes:
    """BASE with dotted paths set (a value of ... deletes the key), as UTF-8 JSON."""
    data = copy.deepcopy(BASE)
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = data
        for p in parents:
            node = node[p]
        if value is ...:
            del node[last]
        else:
            node[last] = value
    return json.dumps(data, ensure_ascii=False).encode()


def spliced(raw_value: str, field: str = "metrics__scaled__entropy", length: int = 12) -> bytes:
    """BASE with the JSON text `raw_value` (which json.dumps would not write) as the first
    value of `field` (the others are the text "X": refused too, but later)."""
    return doc(**{field: ["X"] * length}).replace(b'"X"', raw_value.encode(), 1)


def npy(array, **kw) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.asarray(array, **kw), allow_pickle=True)
    return buf.getvalue()


def npy_header(shape, dtype="<f4") -> bytes:
    """A .npy header (magic included) announcing `shape`, with no data after it."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue()


GOOD_NPY = npy(np.full((2, 6, 8), 0.5, np.float32))
GOOD_CSV = upload.to_csv(analyze(SPEC).q[0], SPEC.tokens)

# ---- snapshot documents ------------------------------------------------------------------
SNAPSHOTS = {
    "empty file": b"",
    "only whitespace": b" \n\t ",
    "truncated": snapshot.dumps(analyze(SPEC))[:300],
    "not JSON": b"this is not json",
    "UTF-16 LE with BOM": snapshot.dumps(analyze(SPEC)).decode().encode("utf-16"),
    "UTF-16 BE with BOM": b"\xfe\xff" + snapshot.dumps(analyze(SPEC)).decode().encode("utf-16-be"),
    "UTF-16 without BOM": snapshot.dumps(analyze(SPEC)).decode().encode("utf-16-le"),
    "latin-1 bytes": doc(tokens=["café"]).replace("café".encode(), "café".encode("latin-1")),
    "nesting 50,000 deep": b"[" * DEEP + b"]" * DEEP,
    "nesting 50,000 deep in a field": doc(spec__tokens="X").replace(
        b'"X"', b"[" * DEEP + b"]" * DEEP),
    "nesting 40 deep in metrics": spliced("[" * 40 + "]" * 40),
    "nesting 50,000 deep in metrics": spliced("[" * DEEP + "]" * DEEP),
    "a list, not an object": b"[1, 2, 3]",
    "a number": b"42",
    "wrong format": doc(format="someone-else/snapshot@1"),
    "format missing": doc(format=...),
    "spec missing": doc(spec=...),
    "spec a string": doc(spec="heads=2"),
    "spec value a list": doc(spec__heads=[2]),
    "spec value an object": doc(spec__seed={"x": 1}),
    "spec value true": doc(spec__causal=True),
    "spec out of range": doc(spec__heads="99"),
    "tokens missing": doc(tokens=...),
    "tokens a string": doc(tokens="the cat"),
    "tokens not the spec's": doc(tokens=["a", "b", "c", "d", "e", "f"]),
    "tokens numbers": doc(tokens=[1, 2, 3, 4, 5, 6]),
    "shape missing": doc(shape=...),
    "shape wrong": doc(shape=[2, 6, 5]),
    "shape strings": doc(shape=["2", "6", "6"]),
    "shape floats": doc(shape=[2.0, 6, 6]),
    "shape booleans": doc(shape=[True, 6, 6]),
    "shape of other heads": doc(shape=[3, 6, 6]),
    "metrics missing": doc(metrics=...),
    "metrics a string": doc(metrics="none"),
    "metrics a list": doc(metrics=[1, 2]),
    "metrics.scaled missing": doc(metrics__scaled=...),
    "metrics.unscaled a number": doc(metrics__unscaled=3),
    "a metric missing": doc(metrics__scaled__entropy=...),
    "a metric short": doc(metrics__scaled__entropy=[0.5] * 11),
    "a metric long": doc(metrics__unscaled__max_weight=[0.5] * 13),
    "a metric huge": doc(metrics__scaled__gini=[0.5] * 2_000_000),
    "a metric a string": doc(metrics__scaled__entropy="0.5"),
    "strings for numbers": doc(metrics__scaled__entropy=["0.5"] * 12),
    "booleans for numbers": doc(metrics__scaled__entropy=[True] * 12),
    "lists for numbers": doc(metrics__scaled__entropy=[[0.5]] * 12),
    "NaN": spliced("NaN"),
    "Infinity": spliced("Infinity"),
    "-Infinity": spliced("-Infinity"),
    "1e400 (inf once read)": spliced("1e400"),
    "an integer of 400 digits": spliced("9" * 400),
    "an integer of 5,000 digits": spliced("9" * 5000),
    "weights a string": doc(weights="none"),
    "weights.scaled missing": doc(weights__scaled=...),
    "weights short": doc(weights__unscaled=[0.1] * 71),
    "weights strings": doc(weights__scaled=["0.1"] * 72),
    "weights NaN": spliced("NaN", "weights__scaled", 72),
    "weights 1e400": spliced("-1e400", "weights__unscaled", 72),
    "weights on a view too large to store them": b"",   # built below (needs a large view)
    "larger than the limit": b" " * (snapshot.MAX_SNAPSHOT_BYTES + 1),
}


def _large_view_with_weights() -> bytes:
    big = AttentionSpec(tokens=tuple(f"t{i}" for i in range(600)), heads=4)
    data = snapshot.snapshot(analyze(big))
    data["weights"] = {"scaled": [], "unscaled": []}
    return json.dumps(data).encode()


SNAPSHOTS["weights on a view too large to store them"] = _large_view_with_weights()

# ---- Q / K / V and attention-weight files --------------------------------------------------
# (name, bytes, what to do with the file): "read" = upload.read_file, "matrix" = an attention
# matrix upload, "qk" = the file as Q and K (GOOD_NPY's twin as the other one).
ARRAYS = {
    "npy: empty file": ("q.npy", b"", "read"),
    "npy: a plain pickle": ("q.npy", pickle.dumps(np.zeros((2, 2))), "read"),
    "npy: pickled objects (object dtype)": ("q.npy", npy([{"a": 1}, [1, 2]], dtype=object), "read"),
    "npy: object dtype of numbers": ("q.npy", npy([[1.0, 2.0]], dtype=object), "read"),
    "npy: structured dtype": ("q.npy", npy(np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")])),
                              "read"),
    "npy: complex numbers": ("q.npy", npy(np.ones((3, 2), np.complex64)), "read"),
    "npy: strings": ("q.npy", npy(np.array([["a", "b"]])), "read"),
    "npy: bytes": ("q.npy", npy(np.array([[b"a", b"b"]])), "read"),
    "npy: datetimes": ("q.npy", npy(np.array(["2024-01-01"] * 4, dtype="datetime64[D]")), "read"),
    "npy: 0-d array": ("q.npy", npy(np.float32(1.5)), "read"),
    "npy: 1-d array": ("q.npy", npy(np.zeros(5)), "read"),
    "npy: 4-d array": ("q.npy", npy(np.zeros((1, 2, 3, 4))), "read"),
    "npy: no rows": ("q.npy", npy(np.zeros((0, 5))), "read"),
    "npy: NaN": ("q.npy", npy([[np.nan, 1.0]]), "read"),
    "npy: inf": ("q.npy", npy([[np.inf, 1.0]]), "read"),
    "npy: -inf in float16": ("q.npy", npy(np.array([[-np.inf, 1.0]], np.float16)), "read"),
    "npy: values past float32": ("q.npy", npy([[1e39, 1.0]]), "read"),
    "npy: values whose products overflow": ("q.npy", npy([[-1e20, 1.0]]), "read"),
    "npy: truncated": ("q.npy", GOOD_NPY[: len(GOOD_NPY) // 2], "read"),
    "npy: header only": ("q.npy", npy_header((2, 6, 8)), "read"),
    "npy: header announcing 2^40 values": ("q.npy", npy_header((2**20, 2**20)) + b"\0" * 64,
                                           "read"),
    "npy: trailing garbage": ("q.npy", GOOD_NPY + b"\0" * 40, "read"),
    "npy: magic then garbage": ("q.npy", b"\x93NUMPY\x01\x00garbage", "read"),
    "npy: unknown format version": ("q.npy", b"\x93NUMPY\x09\x00" + GOOD_NPY[8:], "read"),
    "npy: not numpy at all": ("q.npy", b"PK\x03\x04 a zip file", "read"),
    "npy: 17 heads": ("q.npy", npy(np.zeros((17, 2, 2))), "read"),
    "npy: more tokens than the limit": ("q.npy", npy(np.zeros((1, MAX_TOKENS + 1, 1),
                                                              np.float16)), "read"),
    "npy: over 16 MB": ("q.npy", b"\x93NUMPY" + b"0" * upload.MAX_BYTES, "read"),
    "npy: 67M attention cells from 64 kB": ("q.npy", npy(np.zeros((16, MAX_TOKENS, 1),
                                                                  np.float16)), "qk"),
    "file with another extension": ("q.txt", b"1,2\n3,4\n", "read"),
    "file without extension": ("q", GOOD_NPY, "read"),
    "csv: empty file": ("q.csv", b"", "read"),
    "csv: only blank lines": ("q.csv", b"\n\n,,\n", "read"),
    "csv: header only": ("q.csv", b"token,d0,d1\n", "read"),
    "csv: UTF-16 with BOM": ("q.csv", GOOD_CSV.decode().encode("utf-16"), "read"),
    "csv: UTF-16 without BOM": ("q.csv", "1,2\n3,4\n".encode("utf-16-le"), "read"),
    "csv: latin-1 bytes": ("q.csv", "token,d0\ncafé,1\n".encode("latin-1"), "read"),
    "csv: NaN": ("q.csv", b"1,nan\n3,4\n", "read"),
    "csv: inf": ("q.csv", b"1,inf\n3,-Infinity\n", "read"),
    "csv: 1e999": ("q.csv", b"1,1e999\n3,4\n", "read"),
    "csv: text for a number": ("q.csv", b"token,d0,d1\nthe,0.1,0.2\ncat,0.3,abc\n", "read"),
    "csv: ragged rows": ("q.csv", b"1,2\n3\n", "read"),
    "csv: truncated mid-row": ("q.csv", GOOD_CSV[: len(GOOD_CSV) - 20], "read"),
    "csv: a cell over csv's field limit": ("q.csv", b'"' + b"1" * 200_000 + b'",2\n', "read"),
    "csv: more rows than tokens allowed": ("q.csv", b"0\n" * (MAX_TOKENS + 5), "read"),
    "csv: a million rows": ("q.csv", b"0\n" * 1_000_000, "read"),
    "csv: 3,000 columns": ("q.csv", b",".join([b"0"] * 3000) + b"\n", "read"),
    "matrix: negative weight": ("w.npy", npy([[1.5, -0.5], [0.5, 0.5]]), "matrix"),
    "matrix: rows not summing to 1": ("w.npy", npy(np.full((3, 3), 0.3)), "matrix"),
    "matrix: not square": ("w.npy", npy(np.full((3, 4), 0.25)), "matrix"),
    "matrix: 600 tokens": ("w.npy", npy(np.full((1, 600, 600), 1 / 600, np.float16)), "matrix"),
    "matrix: csv with NaN": ("w.csv", b"0.5,nan\n0.5,0.5\n", "matrix"),
    "qk: K of another shape": ("k.npy", npy(np.zeros((2, 6, 4), np.float32)), "qk"),
}


def refused(call) -> UserError:
    with pytest.raises(UserError) as info:
        call()
    return info.value


def keys_of(err: UserError):
    yield err.key
    for value in err.values.values():
        if isinstance(value, UserError):
            yield from keys_of(value)


def assert_one_sentence_in_every_language(err: UserError) -> None:
    for key in keys_of(err):
        for lang in LANGUAGES:
            assert key in catalog(lang), (lang, key)
    for lang in LANGUAGES:
        text = err.message(lang)                          # no KeyError/IndexError from format
        assert text.strip() and "\n" not in text, (lang, text)
        assert not re.search(r"\{[^}]*\}", text), (lang, text)           # no unfilled {field}
        assert "Traceback" not in text and len(text) < 400, (lang, text)


def run_array_case(name: str, data: bytes, how: str):
    if how == "read":
        return upload.read_file(name, data)
    if how == "matrix":
        return upload.matrix_upload((name, data), "", ())
    # "qk": a K file goes with a good Q; a Q file is uploaded as both Q and K.
    q = ("q.npy", GOOD_NPY) if name.startswith("k") else (name, data)
    return upload.qkv_analysis(SPEC, q, (name, data), None)


@pytest.mark.parametrize("case", list(SNAPSHOTS))
def test_hostile_snapshot_is_refused_with_one_sentence(case):
    err = refused(lambda: snapshot.load(SNAPSHOTS[case]))
    assert err.key.startswith("snapshot."), err.key
    assert_one_sentence_in_every_language(err)


@pytest.mark.parametrize("case", list(ARRAYS))
def test_hostile_array_file_is_refused_with_one_sentence(case):
    err = refused(lambda: run_array_case(*ARRAYS[case]))
    assert_one_sentence_in_every_language(err)


def test_the_cases_are_counted():
    """The number the issue asks for: every hostile file tried above."""
    assert len(SNAPSHOTS) >= 55 and len(ARRAYS) >= 50
    print(f"\nhostile uploads: {len(SNAPSHOTS)} snapshots + {len(ARRAYS)} arrays "
          f"= {len(SNAPSHOTS) + len(ARRAYS)}")


def test_specific_sentences_for_the_common_mistakes():
    expected = {"empty file": "snapshot.empty", "UTF-16 LE with BOM": "snapshot.utf16",
                "UTF-16 without BOM": "snapshot.utf16", "latin-1 bytes": "snapshot.not_utf8",
                "nesting 50,000 deep": "snapshot.too_nested",
                "nesting 50,000 deep in a field": "snapshot.too_nested",
                "NaN": "snapshot.json_constant", "1e400 (inf once read)": "snapshot.not_finite",
                "strings for numbers": "snapshot.bad_number", "a metric short":
                "snapshot.wrong_length", "metrics missing": "snapshot.missing",
                "metrics a string": "snapshot.wrong_type", "tokens not the spec's":
                "snapshot.tokens_mismatch", "shape wrong": "snapshot.bad_shape",
                "truncated": "snapshot.not_json"}
    for case, key in expected.items():
        assert refused(lambda: snapshot.load(SNAPSHOTS[case])).key == key, case
    arrays = {"npy: header announcing 2^40 values": "model.upload_npy_size",
              "npy: 0-d array": "model.upload_scalar", "npy: object dtype of numbers":
              "model.upload_pickle", "csv: UTF-16 without BOM": "model.upload_encoding",
              "csv: a cell over csv's field limit": "model.upload_bad_csv",
              "csv: a million rows": "model.upload_csv_rows", "npy: truncated":
              "model.upload_npy_size", "npy: empty file": "model.upload_bad_npy"}
    for case, key in arrays.items():
        assert refused(lambda: run_array_case(*ARRAYS[case])).key == key, case


def test_what_load_returns_is_clean_and_compare_never_raises():
    spec, data = snapshot.load(snapshot.dumps(analyze(SPEC)))
    assert spec == SPEC and snapshot.compare(analyze(spec), data) < 1e-6
    for series in data["metrics"]["scaled"].values():
        assert all(x is None or (type(x) is float and math.isfinite(x)) for x in series)
    # Unknown spec keys are ignored, as in a URL (and never echoed in a message).
    assert snapshot.load(doc(spec__extra=["<img src=x>", {"a": 1}]))[0] == SPEC
    # A UTF-8 byte-order mark (Notepad adds one) is fine; the document is the same.
    assert snapshot.load(b"\xef\xbb\xbf" + snapshot.dumps(analyze(SPEC)))[0] == SPEC
    # compare() called on anything at all answers a number, never an exception.
    a = analyze(SPEC)
    for junk in ({}, {"tokens": list(SPEC.tokens), "shape": [2, 6, 6]},
                 {**BASE, "metrics": "x"}, {**BASE, "metrics": {"scaled": {}}},
                 {**BASE, "weights": {"scaled": ["a"] * 72, "unscaled": [None] * 72}},
                 {**BASE, "weights": {"scaled": [10**400] * 72, "unscaled": [0] * 72}}):
        assert snapshot.compare(a, junk) == math.inf


# ---- through the pages -------------------------------------------------------------------

SNAPSHOT_PAGE_CASES = ["UTF-16 LE with BOM", "nesting 50,000 deep", "NaN", "metrics a string",
                       "strings for numbers", "a metric short", "truncated", "empty file"]


def _upload_snapshot(at, name: str, raw: bytes):
    at.sidebar.file_uploader(key="snapshot_file").set_value((name, raw, "application/json"))
    return at.run()


def test_hostile_snapshots_in_the_page_show_one_error_and_the_page_keeps_working():
    at = open_menu(open_page("app.py", AttentionSpec()), BOX_KEY)
    before = at.session_state["in_text"]
    for case in SNAPSHOT_PAGE_CASES:
        _upload_snapshot(at, f"{case}.json", SNAPSHOTS[case])
        assert not at.exception, case
        shown = [e.value for e in at.error]
        assert len(at.sidebar.error) == 1 and len(shown) == 1, (case, shown)
        assert at.sidebar.error[0].value == refused(lambda: snapshot.load(SNAPSHOTS[case])) \
            .message("en"), case
        assert at.session_state["in_text"] == before, case          # nothing else changed
        assert at.get("metric"), case                                 # the page still draws
    # ... and a good snapshot still loads in the same session, setting the sidebar.
    _upload_snapshot(at, "good.json", snapshot.dumps(analyze(SPEC)))
    assert not at.exception and not at.error
    assert at.session_state["in_text"] == tokens_to_text(SPEC.tokens)
    assert AttentionSpec.from_query(dict(at.query_params)) == SPEC
    assert any("match" in s.value for s in at.sidebar.success)


ARRAY_PAGE_CASES = ["npy: pickled objects (object dtype)", "npy: 0-d array", "npy: NaN",
                    "npy: header announcing 2^40 values", "csv: UTF-16 with BOM",
                    "csv: latin-1 bytes", "csv: a cell over csv's field limit",
                    "csv: a million rows"]


def test_hostile_q_files_in_the_page_show_one_error_and_the_page_keeps_working():
    toy = AttentionSpec(tokens=SPEC.tokens, heads=2, d_k=8)
    at = open_page("pages/3_Model_heads.py", toy, mh_tab="upload")
    at.file_uploader(key="up_k").set_value(("k.npy", GOOD_NPY, "application/octet-stream"))
    for case in ARRAY_PAGE_CASES:
        name, data, _ = ARRAYS[case]
        at.file_uploader(key="up_q").set_value((name, data, "application/octet-stream"))
        at.run()
        assert not at.exception, case
        assert len(at.error) == 1, (case, [e.value for e in at.error])
        assert at.error[0].value == refused(lambda: upload.read_file(name, data)).message("en")
    at.file_uploader(key="up_q").set_value(("q.npy", GOOD_NPY, "application/octet-stream"))
    at.run()
    assert not at.exception and not at.error
    assert any("2 head(s), 6 tokens, d_k = 8" in s.value for s in at.success)


def test_hostile_attention_matrix_in_the_page_shows_one_error_then_a_good_one_draws():
    at = open_page("pages/3_Model_heads.py", SPEC, up_kind="matrix", mh_tab="upload")
    for case in ("matrix: rows not summing to 1", "matrix: csv with NaN", "npy: truncated"):
        name, data, _ = ARRAYS[case]
        at.file_uploader(key="up_w").set_value(("w" + name[1:], data, "application/octet-stream"))
        at.run()
        assert not at.exception, case
        assert len(at.error) == 1, (case, [e.value for e in at.error])
    at.file_uploader(key="up_w").set_value(("w.npy", npy(np.full((6, 6), 1 / 6)),
                                            "application/octet-stream"))
    at.run()
    assert not at.exception and not at.error
    assert any("6 × 6" in s.value for s in at.success)
