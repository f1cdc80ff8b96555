"""The Input page (app.py): parsed tokens, validation, URL state."""
import pytest

from attention.analysis import analyze
from attention.spec import AttentionSpec
from attention.tokens import MAX_TOKENS
from tests.apptest import run_page


def test_tokens_from_the_url_are_parsed_with_positions():
    spec = AttentionSpec(tokens=("the", "cat", "sat", "on", "the", "mat"), d_k=8)
    at = run_page("app.py", spec)
    assert not at.exception
    table = at.dataframe[0].value
    assert table.iloc[:, 1].tolist() == list(spec.tokens)        # order and duplicates kept
    assert table.iloc[:, 0].tolist() == list(range(6))
    assert table.iloc[:, 2].tolist() == [2, 1, 1, 1, 2, 1]       # "the" occurs twice
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Tokens"] == "6" and metrics["Distinct tokens"] == "5"
    assert float(metrics["Scale 1/√d_k"]) == pytest.approx(analyze(spec).scaled.scale, abs=1e-4)


def test_url_is_written_back_and_round_trips():
    spec = AttentionSpec(tokens=("a", "b,c", "[x]"), heads=2, causal=True, temperature=0.5)
    at = run_page("app.py", spec)
    assert not at.exception
    assert AttentionSpec.from_query(dict(at.query_params)) == spec


def test_editing_the_sidebar_updates_the_url():
    at = run_page("app.py")
    at.sidebar.text_area(key="in_text").input("one two two").run()
    at.sidebar.number_input(key="in_heads").set_value(3).run()
    assert not at.exception
    spec = AttentionSpec.from_query(dict(at.query_params))
    assert spec.tokens == ("one", "two", "two") and spec.heads == 3


@pytest.mark.parametrize("text", ["", "   \n ", "[1, 2]", '["a"', "x" * 500,
                                  " ".join(["t"] * (MAX_TOKENS + 1))])
def test_bad_input_shows_a_message_not_a_traceback(text):
    at = run_page("app.py")
    at.sidebar.text_area(key="in_text").input(text).run()
    assert not at.exception
    assert len(at.error) == 1 and at.error[0].value.endswith(".")


def test_example_picker_fills_the_token_box():
    at = run_page("app.py")
    at.sidebar.selectbox(key="in_example").set_value("repeated").run()
    assert not at.exception
    assert at.sidebar.text_area(key="in_text").value.startswith("the cat sat on the mat")
    assert at.dataframe[0].value.shape[0] == 13


def test_malformed_url_falls_back_with_a_warning():
    at = run_page("app.py", d_k="banana", heads="99")
    assert not at.exception
    assert len(at.warning) == 2
    assert AttentionSpec.from_query(dict(at.query_params)) == AttentionSpec()


def test_chinese_interface():
    at = run_page("app.py", lang="zh")
    assert not at.exception
    assert at.title[0].value == "输入"
    assert at.sidebar.selectbox(key="lang").value == "zh"
