"""Bad and hostile input through every page (AppTest): no exception, a sentence where input is
refused, only finite numbers in chart data, and user text kept as literal text.

Each case is sent the way a shared link or a user sends it: as URL query parameters on a fresh
session, or typed into the sidebar's token box. Cases refused by the parser before anything is
computed run on the Input page and one chart page; cases that reach chart data run on every
page that reads what they change (the Model heads page reads only the text; the
Is-sharper-better page only its own seed, and runs a selection). `pytest -s` prints which
cases are refused with which message.
"""
from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from attention.i18n import catalog, translate
from attention.spec import AttentionSpec
from attention.text.tokens import MAX_INPUT_CHARS, MAX_TOKEN_CHARS, MAX_TOKENS
from attention.ui.layout import TUCKED_KEY
from attention.ui.pages import by_title
from attention.ui.views.scores import FIGURES as score_figures
from tests.apptest import ROOT, chart_frames, figures, open_menu, open_page
from tests.tiny_models import tiny  # noqa: F401  (fixture)

INPUT, HEATMAP, SCORES, MODEL, SHARPER, IMPORTANCE = (
    by_title(key).script for key in ("nav.input", "nav.heatmap", "nav.scores", "nav.model",
                                     "nav.sharper", "nav.importance"))
PARSER_PAGES = (INPUT, HEATMAP)   # refused before any computation: the sidebar is the same
TOKEN_PAGES = (INPUT, HEATMAP, SCORES)  # pages that show the input tokens themselves
SPEC_PAGES = (INPUT, HEATMAP, SCORES)   # settings only the toy model reads (d_k, heads, seed)
TEXT_PAGES = (INPUT, HEATMAP, SCORES, MODEL)  # the Model heads page reads the text too
SENTENCE_END = (".", "。", "!", "！", "?", "？")


@dataclass(frozen=True)
class Case:
    name: str
    params: dict = field(default_factory=dict)  # URL query parameters of a fresh session
    text: str | None = None                     # then typed into the sidebar's token box
    fmt: str | None = None                      # sidebar token format chosen before typing
    refused: str | None = None    # i18n key of the st.error that refuses typed input
    warned: tuple = ()            # i18n keys of the URL warnings (link settings ignored)
    tokens: tuple | None = None   # the tokens the page must show, literally
    pages: tuple = TEXT_PAGES
    page_errors: dict = field(default_factory=dict)  # page -> i18n key of its own refusal


def _words(n: int) -> str:
    return " ".join(f"w{i % 97}" for i in range(n))


HTML = ["<img src=x onerror=window.__xss=1>", "<script>alert(1)</script>", "<b>bold</b>",
        "&amp;", "</textarea>", "<!--"]
MARKDOWN = ["**x**", "_y_", "#", "[a](javascript:alert(1))", "`code`", ">", "---", "|a|b|"]
LATEX = ["$x$", "$$\\frac{1}{0}$$", "\\(x\\)", "\\begin{align}", "$\\infty$"]
EXPR = ["it's", "a\\b", '"q"', "datum.value", "${x}", "' + alert(1) + '", "</script>"]
TOO_LONG_PIECES = {MODEL: "model.too_long"}  # MiniLM reads at most 512 word pieces


def _han(n: int) -> str:
    """n Chinese characters without a space, in no dictionary order."""
    return "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(n))


def parser(name: str, text: str, key: str, fmt: str | None = None, **params) -> Case:
    """Typed input the parser refuses with the message `key`, before anything is computed."""
    return Case(name, params=params, text=text, fmt=fmt, refused=key, pages=PARSER_PAGES)


def url(name: str, *keys: str, pages: tuple = SPEC_PAGES, **params) -> Case:
    """A link whose parameters are ignored with one warning per key (defaults are shown)."""
    return Case(name, params=params, warned=keys, pages=pages)


def setting(name: str, **params) -> Case:
    """A legal but extreme setting, computed and drawn."""
    return Case(name, params=params, pages=SPEC_PAGES)


CASES = [
    # ---- refused by the parser (typed into the sidebar) -------------------------------------
    parser("empty", "", "errors.tokens_empty"),
    parser("whitespace_only", "  \n\t \u3000 \r\n ", "errors.tokens_empty"),
    parser("control_only", "\x00\x01\x07\x1b\x7f", "errors.tokens_empty"),
    parser("one_past_limit", _words(MAX_TOKENS + 1), "errors.tokens_too_many"),
    parser("token_100k_chars", "x" * 100_000, "errors.token_too_long"),
    parser("token_one_past_chars", "ok " + "y" * (MAX_TOKEN_CHARS + 1), "errors.token_too_long"),
    parser("input_over_chars", "a " * (MAX_INPUT_CHARS // 2 + 1), "errors.tokens_too_many_chars"),
    parser("json_object", '{"tokens": ["a"]}', "errors.tokens_json_shape", fmt="json"),
    parser("json_numbers", "[1, 2, 3]", "errors.tokens_json_shape"),
    parser("json_nested_list", '["a", ["b"]]', "errors.tokens_json_shape"),
    parser("json_null", "[null, true]", "errors.tokens_json_shape"),
    parser("json_deeply_nested", "[" * 50_000 + "]" * 50_000, "errors.tokens_json_parse"),
    parser("json_broken_quote", '["a", "b]', "errors.tokens_json_parse"),
    parser("json_unclosed", '["a", "b"', "errors.tokens_json_parse"),
    parser("json_single_quotes", "['a', 'b']", "errors.tokens_json_parse"),
    parser("json_empty_list", "[]", "errors.tokens_empty"),
    parser("json_only_empty_strings", '["", "\\u0000"]', "errors.tokens_empty"),
    # Chinese without spaces: the token limit applies to the words after segmentation
    parser("chinese_words_one_past_limit", "我们" * (MAX_TOKENS + 1), "errors.tokens_too_many_words"),
    parser("chinese_characters_one_past_limit", "猫" * (MAX_TOKENS + 1),
           "errors.tokens_too_many_words", fmt="characters"),
    parser("chinese_no_spaces_at_char_limit", _han(MAX_INPUT_CHARS), "errors.tokens_too_many_words"),
    parser("heads_times_cells_over_cap", _words(MAX_TOKENS), "errors.spec_cells", heads="16"),
    parser("work_over_cap", _words(MAX_TOKENS), "errors.spec_work", d_k="1024", d_model="1024"),
    # ---- hostile text that is computed and drawn ---------------------------------------------
    Case("one_token", params={"tokens": "hello"}, tokens=("hello",)),
    Case("at_token_limit", params={"tokens": _words(MAX_TOKENS)}, page_errors=TOO_LONG_PIECES),
    Case("emoji_zwj_typed", text="😀 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇺🇳",
         tokens=("😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇳")),
    Case("right_to_left", params={"tokens": "שלום עולם مرحبا \u202eevil\u202c abc"},
         tokens=("שלום", "עולם", "مرحبا", "\u202eevil\u202c", "abc")),
    Case("zero_width", params={"tokens": "a\u200bb \u200d \ufeffc \u2060"},
         tokens=("a\u200bb", "\u200d", "\ufeffc", "\u2060")),
    Case("control_chars_typed", text="a\x00b c\x07d \x1b[31mred\x1b[0m",
         tokens=("ab", "cd", "[31mred[0m")),
    Case("html_script", params={"tokens": json.dumps(HTML)}, tokens=tuple(HTML)),
    Case("markdown", params={"tokens": json.dumps(MARKDOWN)}, tokens=tuple(MARKDOWN)),
    Case("latex_typed", text=" ".join(LATEX), tokens=tuple(LATEX)),
    Case("vega_expression_quotes", params={"tokens": json.dumps(EXPR)}, tokens=tuple(EXPR)),
    Case("numbers_as_text", params={"tokens": "NaN inf -inf 1e309 -0 null None"},
         tokens=("NaN", "inf", "-inf", "1e309", "-0", "null", "None")),
    Case("line_separators_json", params={"tokens": json.dumps(["a\u2028b", "c\u2029d", "e"])},
         tokens=("a\u2028b", "c\u2029d", "e")),
    Case("lone_surrogates_json", params={"tokens": '["a", "\\ud800", "b\\udfff"]'},
         tokens=("a", "b")),
    Case("whitespace_tokens_json", params={"tokens": '["  ", "\\t", "x"]'},
         tokens=("  ", "\t", "x")),
    Case("longest_tokens", params={"tokens": " ".join(c * MAX_TOKEN_CHARS for c in "abc")}),
    Case("row_view_html", params={"tokens": "<i>a</i> b c", "hm_view": "row", "hm_row": "2"},
         tokens=("<i>a</i>", "b", "c")),
    Case("long_input_zoom_clamped", params={"tokens": _words(300), "hm_win": "64",
                                            "hm_q": "99999", "hm_k": "-5", "hm_pool": "evil"},
         page_errors=TOO_LONG_PIECES),
    Case("pretrained_hostile_text", params={"source": "pretrained", "tokens": json.dumps(HTML)}),
    Case("chinese_words_at_limit_typed", text="我们" * MAX_TOKENS, tokens=("我们",) * MAX_TOKENS,
         pages=(INPUT,)),
    Case("chinese_mixed_html_typed", text="注意力<b>机制</b>：<script>x</script>为什么？",
         tokens=("注意力", "<", "b", ">", "机制", "<", "/", "b", ">", "：", "<", "script", ">",
                 "x", "<", "/", "script", ">", "为什么", "？")),
    Case("pretrained_hostile_text_field", params={
        "source": "pretrained", "tokens": "a", "lang": "zh",
        "text": "<img src=x onerror=alert(1)> 注意力，$x$ **b** \u2028 \x00"}),
    url("url_text_oversized", "errors.tokens_too_many_chars", pages=TEXT_PAGES,
        source="pretrained", text="x" * (MAX_INPUT_CHARS + 1)),
    Case("pretrained_too_long", params={"source": "pretrained", "tokens": _words(600)},
         refused="model.too_long"),
    # the importance page removes each piece in turn: refused past its own caps on MiniLM
    # (before any forward pass), while MiniLM itself would read them
    Case("importance_text_over_cap", params={"tokens": _words(100), "imp_corpus": "sidebar"},
         pages=(IMPORTANCE,),
         page_errors={IMPORTANCE: "importance.too_long"}),
    Case("temperature_min_causal_dk_max", params={"temperature": "0.01", "causal": "1",
                                                  "d_k": "1024"}),
    # ---- extreme settings ---------------------------------------------------------------------
    Case("identical_no_positions", params={"tokens": "x x x x", "positional": "0",
                                           "d_model": "1", "d_k": "1", "heads": "1"},
         tokens=("x",) * 4, pages=SPEC_PAGES),
    setting("dk_1", d_k="1"),
    setting("dk_dmodel_heads_max", d_k="1024", d_model="1024", heads="16"),
    setting("dmodel_1", d_model="1"),
    setting("heads_not_dividing_dmodel", heads="3", d_model="10", d_k="7"),
    setting("temperature_max", temperature="100"),
    setting("seed_max", seed=str(2**31 - 1)),
    setting("all_heads_grid_pooled", tokens=_words(100), heads="16", hm_view="grid",
            hm_grid="difference"),
    url("heads_0", "errors.spec_range", heads="0"),
    url("heads_17", "errors.spec_range", heads="17"),
    url("temperature_tiny", "errors.spec_range", temperature="1e-300"),
    url("temperature_0", "errors.spec_range", temperature="0"),
    url("temperature_huge", "errors.spec_range", temperature="1e308"),
    url("temperature_nan_dk_inf", "errors.not_a_value", "errors.not_a_value",
        temperature="nan", d_k="inf"),
    url("seed_negative", "errors.spec_range", seed="-1"),
    url("seed_enormous", "errors.spec_range", seed=str(10**30)),
    url("seed_5000_digits", "errors.not_a_value", seed="9" * 5000),
    # ---- malformed, oversized and repeated URL parameters ---------------------------------
    url("malformed_types", *["errors.not_a_value"] * 4, d_k="banana", heads="1.5",
        causal="maybe", positional="2"),
    url("source_script", "errors.spec_source", pages=TEXT_PAGES,
        source="<script>alert(1)</script>"),
    url("layer_out_of_range", "errors.spec_range", pages=TEXT_PAGES, source="pretrained",
        layer="300"),   # past any model; a layer the model lacks: tests/test_hostile_models.py
    url("url_tokens_empty", "errors.tokens_empty", tokens=""),
    url("url_tokens_json_shape", "errors.tokens_json_shape", tokens='[{"a": 1}]'),
    url("url_tokens_oversized", "errors.tokens_too_many_chars",
        tokens="a " * (MAX_INPUT_CHARS // 2 + 1)),
    url("url_tokens_one_past_limit", "errors.tokens_too_many", tokens=_words(MAX_TOKENS + 1)),
    url("url_cells_over_cap", "errors.url_spec", tokens=_words(MAX_TOKENS), heads="16"),
    url("url_work_over_cap", "errors.url_spec", tokens=_words(MAX_TOKENS), d_k="1024"),
    url("url_chinese_refusal", "errors.tokens_json_shape", pages=TEXT_PAGES, lang="zh",
        tokens="[1]"),
    Case("url_repeated", params={"heads": ["2", "3"], "tokens": ["a b", "c d e"]},
         tokens=("c", "d", "e")),
    Case("train_seed_malformed", params={"sh_seed": "9" * 5000}, pages=()),
    Case("train_seed_negative", params={"sh_seed": "-1", "seed": "-1"},
         warned=("errors.spec_range",), pages=()),
    Case("url_unknown_and_view_params", params={
        "foo": "<b>x</b>", "lang": "xx", "__proto__": "1", "hm_view": "<script>", "hm_head": "99",
        "hm_shared": "maybe", "sc_head": "999", "mh_layer": "9", "mh_head": "abc", "mh_stat": "evil",
        "head": "-1", "mlayer": "<b>", "mstat": "1e999"}),   # old names too (state.RENAMED)
]

# The Is-sharper-better page trains its own heads and ignores the sidebar's spec: it runs the
# cases that reach its own URL parameter (seed) or could break the shared sidebar / share link,
# all in one test so its training (about 40 s, cached per seed) happens once per run.
SHARPER_CASES = ("empty", "html_script", "lone_surrogates_json", "at_token_limit", "seed_max",
                 "seed_negative", "seed_5000_digits", "url_repeated", "url_chinese_refusal",
                 "train_seed_malformed", "train_seed_negative")
RESULTS: list[tuple[str, str, str]] = []


def _runs():
    for case in CASES:
        for page in case.pages:
            yield pytest.param(case, page, id=f"{case.name}-{page.rsplit('/', 1)[-1][:-3]}")


@pytest.fixture(autouse=True)
def _clear_streamlit_caches():
    """Keep Streamlit's caches in this module: every case has its own spec (its own cache key)
    and the Is-sharper-better page's training is cached per seed. Cleared when the module ends."""
    yield


@pytest.fixture(scope="module", autouse=True)
def _module_setup():
    """Scan the installed packages for Streamlit components once, not once per AppTest (about
    1 s each), and print the table of outcomes when the module ends (`pytest -s`)."""
    import streamlit as st
    from streamlit.components.v2 import manifest_scanner

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(manifest_scanner, "scan_component_manifests",
                   functools.cache(manifest_scanner.scan_component_manifests))
        yield
    st.cache_data.clear()
    st.cache_resource.clear()
    print(f"\n\n{len(CASES)} cases; case | page | outcome")
    for row in sorted(set(RESULTS)):
        print(" | ".join(row))


def _open(case: Case, page: str) -> AppTest:
    """A fresh session on the case's URL, then the case's text typed into the sidebar."""
    at = open_page(page, **case.params)
    if case.text is not None:
        assert not at.exception, [e.value for e in at.exception]
        if case.fmt is not None:
            at.sidebar.selectbox(key="in_fmt").set_value(case.fmt)
        at.sidebar.text_area(key="in_text").input(case.text).run()
    return at


def _template(key: str, lang: str = "en") -> re.Pattern:
    """A regex that matches the message of `key` with any values filled in."""
    parts = re.split(r"\{[^{}]*\}", catalog(lang)[key])
    return re.compile(".+?".join(re.escape(p) for p in parts), re.S)


def _lang(case: Case) -> str:
    return case.params.get("lang") if case.params.get("lang") in ("en", "zh") else "en"


def _is_sentence(text: str) -> bool:
    return len(text) >= 15 and text.rstrip().endswith(SENTENCE_END) and "Traceback" not in text


def _assert_finite_frame(frame: pd.DataFrame, where: str) -> None:
    numbers = frame.select_dtypes(include=[np.number]).to_numpy(dtype=float)
    assert np.isfinite(numbers).all(), f"non-finite number in {where}: {frame.head()}"
    for column in frame.select_dtypes(include=["object"]).columns:
        floats = [v for v in frame[column] if isinstance(v, float)]
        assert all(math.isfinite(v) for v in floats), f"non-finite {column} in {where}"


def _refuse_constant(name: str):
    raise AssertionError(f"a chart spec holds {name}")


def _strings(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return []


def _chart_strings(at: AppTest) -> list[str]:
    """Every string of every chart, from its spec (labels, expressions, titles) and its data,
    and of every canvas figure; asserts on the way that no spec or figure holds NaN or
    Infinity and no dataset a non-finite number."""
    strings = [s for figure in figures(at) for s in _strings(figure)]
    for chart in at.get("vega_lite_chart"):
        strings += _strings(json.loads(chart.proto.spec, parse_constant=_refuse_constant))
    # Vega's expression parser rejects a raw line separator inside a string literal, and the
    # chart then does not draw at all (a JSON token may hold one).
    expressions = [s for s in strings if "datum" in s]
    assert not [e for e in expressions if "\u2028" in e or "\u2029" in e], "raw U+2028/9"
    for i, frame in enumerate(chart_frames(at)):
        _assert_finite_frame(frame, f"chart dataset {i}")
        for column in frame.columns:
            strings += [v for v in frame[column] if isinstance(v, str)]
    return strings


def _shows(token: str, strings: list[str]) -> bool:
    """The token as text, or as a string literal inside a Vega expression (label lookups)."""
    forms = {token, json.dumps(token)[1:-1], json.dumps(token, ensure_ascii=False)[1:-1]}
    return any(form in s for s in strings for form in forms)


def _outcome(at: AppTest, case: Case, page: str) -> str:
    messages = [e.value for e in at.error] + [w.value for w in at.warning]
    if not messages:
        return "shown"
    keys = [k for k in (case.page_errors.get(page), case.refused, *case.warned) if k]
    found = [k for k in dict.fromkeys(keys)
             if any(_template(k, _lang(case)).search(m) for m in messages)]
    kind = "refused" if at.error else "warned"
    return f"{kind}: {', '.join(found or ['(other)'])} — “{messages[0][:100]}”"


FIGURE_KEY = "view_sc_figure"    # Score analysis draws one figure at a time


def check(case: Case, page: str) -> None:
    """Open the page on the case and assert everything the hardening issue asks for."""
    at = _open(case, page)
    assert not at.exception, [e.value for e in at.exception]
    lang = _lang(case)
    errors, warnings = [e.value for e in at.error], [w.value for w in at.warning]
    RESULTS.append((case.name, page, _outcome(at, case, page)))

    # Every message the page shows is a sentence, never a traceback.
    for text in errors + warnings:
        assert _is_sentence(text), text
    # Typed input that is refused: exactly one error, the expected one. The Is-sharper-better
    # page does not use the sidebar's input, so it refuses nothing.
    refusal = case.page_errors.get(page) or (case.refused if page != SHARPER else None)
    if refusal is not None:
        assert len(errors) == 1 and _template(refusal, lang).fullmatch(errors[0]), errors
    else:
        assert not errors, errors
    # Link parameters that are ignored: one warning each, naming what was wrong.
    outer = _template("errors.url_param", lang)
    for key in case.warned:
        if key == "errors.url_spec":
            matching = [w for w in warnings if _template(key, lang).fullmatch(w)]
        else:  # "The link's 'x' setting was ignored: <the parser's sentence>"
            inner = _template(key, lang)
            matching = [w for w in warnings if outer.fullmatch(w) and inner.search(w)]
        assert matching, (key, warnings)
    assert len([w for w in warnings if outer.fullmatch(w)]) == \
        len([k for k in case.warned if k != "errors.url_spec"]), warnings

    # Only finite numbers: chart data and specs, metrics, tables.
    strings = _chart_strings(at)
    if page == SCORES and any(c.key == FIGURE_KEY for c in at.get("segmented_control")):
        for figure in score_figures[1:]:       # one figure at a time: every one of them
            shown = _open(replace(case, params={**case.params, "sc_figure": figure}), page)
            assert not shown.exception, [e.value for e in shown.exception]
            strings += _chart_strings(shown)
    for metric in at.metric:
        assert not re.search(r"nan|inf", metric.value, re.I), (metric.label, metric.value)
    for i, table in enumerate(at.dataframe):
        _assert_finite_frame(table.value, f"table {i}")

    if case.tokens is None or refusal is not None:
        return
    # User text is shown literally: the token table and the charts carry the exact tokens...
    if page == INPUT:
        assert at.dataframe[0].value.iloc[:, 1].tolist() == list(case.tokens)
    elif page == SCORES and len(case.tokens) == 1:   # nothing to compare: a notice, no chart
        assert [i.value for i in at.info] == [translate(lang, "scores.one_token")]
    elif page in TOKEN_PAGES:
        missing = [tok for tok in case.tokens if not _shows(tok, strings)]
        assert not missing, missing
    # ...and the address bar (the share link) holds them, so it reproduces the view.
    assert AttentionSpec.parse_query(dict(at.query_params))[0].tokens == case.tokens


@pytest.mark.parametrize("case, page", list(_runs()))
def test_hostile_input(case: Case, page: str):
    check(case, page)


def test_hostile_input_on_the_sharper_page(monkeypatch):
    """One test, so the page's training runs once (shortened as in test_page_sharper.py: the
    sidebar and the page's own URL parameter are under test here, not the experiment)."""
    from attention.experiment import training as ex

    monkeypatch.setattr(ex, "SHARPEN_STEPS", 40)
    monkeypatch.setattr(ex, "SCALING_STEPS", 30)
    monkeypatch.setattr(ex, "EVAL_SIZE", 2048)
    warm = AppTest.from_file(str(ROOT / INPUT), default_timeout=600)
    warm.switch_page(SHARPER)
    assert not warm.run().exception   # trains seed 0 (cached): later runs are quick
    failures = []
    for case in (c for c in CASES if c.name in SHARPER_CASES):
        try:
            check(case, SHARPER)
        except AssertionError as err:
            failures.append(f"{case.name}: {err}")
    import streamlit as st

    st.cache_data.clear()             # no shortened run outlives this test
    assert not failures, "\n".join(failures)


# The importance page on everything else that reaches a model, on a tiny BERT sentence model
# (on MiniLM each case costs half a minute: occlusion, 72 ablations, pruning and a sweep).
IMPORTANCE_CASES = ("empty", "one_token", "at_token_limit", "emoji_zwj_typed", "html_script",
                    "markdown", "vega_expression_quotes", "numbers_as_text", "zero_width",
                    "control_chars_typed", "chinese_mixed_html_typed",
                    "pretrained_hostile_text_field", "url_chinese_refusal")


@pytest.mark.slow
@pytest.mark.parametrize("name, model", [*((n, "bert_base") for n in IMPORTANCE_CASES),
                                         ("one_token", "gpt2"), ("html_script", "gpt2")])
def test_hostile_input_on_the_importance_page(name, model, tiny, monkeypatch):
    """The same checks as every page; gpt2: an LM's loss instead of an embedding."""
    from attention.ui.views import importance as importance_view

    monkeypatch.setattr(importance_view, "model_source", lambda spec: str(tiny[model]))
    monkeypatch.setenv("ATTENTION_EXPLORER_LOCAL_MODELS", "1")      # a tiny model's folder
    case = next(c for c in CASES if c.name == name)
    case = replace(case, params={**case.params, "imp_corpus": "sidebar"})  # the typed text
    if name == "at_token_limit":         # the tiny model reads 64 pieces
        case = replace(case, page_errors={IMPORTANCE: "model.too_long"})
    check(case, IMPORTANCE)


def test_the_cases_cover_the_brief():
    """At least 40 distinct cases; the sharper page's list names real cases."""
    names = [c.name for c in CASES]
    assert len(set(names)) == len(names) >= 40
    assert set(SHARPER_CASES) <= set(names) and set(IMPORTANCE_CASES) <= set(names)


@pytest.mark.parametrize("page", [HEATMAP, SCORES, MODEL])   # the sidebar is the same on all
def test_deep_link_then_page_switch_keeps_the_sidebar(page):
    """A shared link opened on the Input page, then another page: the sidebar (and so the
    view) must be the link's, not empty defaults (Streamlit mounted URL-seeded persistent
    widgets at their defaults on the first page switch; state.keep_across_pages)."""
    spec = AttentionSpec(tokens=("<b>x</b>", "y", "y"), d_k=4, heads=1, seed=12345)
    at = open_page(INPUT, spec)
    at.switch_page(page).run()
    assert not at.exception and not at.error
    assert at.sidebar.text_area(key="in_text").value == '<b>x</b> y y'
    if page == MODEL:       # a page that does not use the toy's settings keeps them closed
        assert [w.key for w in at.sidebar.number_input] == ["in_temperature"]
        assert AttentionSpec.parse_query(dict(at.query_params))[0] == spec   # the link holds them
        open_menu(at, TUCKED_KEY)
    assert [at.sidebar.number_input(key=f"in_{n}").value for n in ("d_k", "heads", "seed")] \
        == [4, 1, 12345]


# ---- the caps themselves: pure checks, no page ------------------------------------------------

def _npy(array) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


@pytest.mark.parametrize("make, key", [
    (lambda: AttentionSpec(tokens=("w",) * MAX_TOKENS, heads=12, d_k=65, d_model=64).validate(),
     "errors.spec_work"),
    (lambda: AttentionSpec(tokens=("w",) * 512, heads=16, d_k=1024, d_model=1024).validate(),
     "errors.spec_work"),
    # A 64 kB upload (float16 Q and K of 16 x 2048 x 1) asks for 67M attention cells.
    (lambda: _upload_qkv(np.zeros((16, MAX_TOKENS, 1), np.float16)), "errors.spec_cells"),
    (lambda: _upload_qkv(np.zeros((12, MAX_TOKENS, 128), np.float16)), "errors.upload_work"),
    # 2048 x 2048 in float16 is 8 MB: it fits the upload size but not a cell-by-cell chart.
    (lambda: _upload_matrix(np.full((1, 600, 600), 1 / 600, np.float16)),
     "errors.upload_matrix_tokens"),
])
def test_caps_refuse_with_a_sentence_in_both_languages(make, key):
    from attention.errors import UserError

    with pytest.raises(UserError) as caught:
        make()
    assert caught.value.key == key
    for lang in ("en", "zh"):
        text = caught.value.message(lang)
        assert _is_sentence(text) and _template(key, lang).fullmatch(text), text


def _upload_qkv(values):
    from attention.files import upload

    table = upload.read_file("q.npy", _npy(values))
    return upload.qkv(table, table, None)


def _upload_matrix(values):
    from attention.files import upload

    return upload.attention_matrix(upload.read_file("w.npy", _npy(values)))


def test_caps_leave_the_largest_allowed_views_alone():
    from attention.spec import MAX_WORK

    AttentionSpec(tokens=("w",) * MAX_TOKENS, heads=12, d_k=64, d_model=64).validate()
    AttentionSpec(tokens=("w",) * 11, heads=16, d_k=1024, d_model=1024).validate()
    assert 12 * MAX_TOKENS * MAX_TOKENS * 64 <= MAX_WORK           # MiniLM-sized heads pass
    _upload_qkv(np.zeros((12, 512, 64), np.float32))               # a BERT-base layer
    _upload_matrix(np.full((1, 512, 512), 1 / 512, np.float32))


def test_server_config_suits_a_public_demo():
    import tomllib

    from attention.files import upload
    from tests.apptest import ROOT

    server = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]
    assert server["enableXsrfProtection"] is True
    assert server["maxMessageSize"] <= 50                          # MB, both directions
    # The server's upload cap lets the page's own per-file cap (with its message) speak first.
    assert upload.MAX_BYTES / 2**20 <= server["maxUploadSize"] <= 50
