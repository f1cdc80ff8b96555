"""The Input page (app.py): parsed tokens, validation, URL state."""
import pytest

from attention.analysis import analyze
from attention.text.examples import EXAMPLES
from attention.spec import AttentionSpec
from attention.text.tokens import MAX_TOKENS
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


ZH_DEFAULT = "为什么自注意力评分越高模型表现越好？"


def test_chinese_interface_starts_on_a_chinese_sentence_segmented():
    at = run_page("app.py", lang="zh")
    assert not at.exception
    assert at.sidebar.text_area(key="in_text").value == ZH_DEFAULT     # as a reader types it
    words = ["为什么", "自", "注意力", "评分", "越高", "模型", "表现", "越", "好", "？"]
    assert at.dataframe[0].value.iloc[:, 1].tolist() == words
    assert AttentionSpec.from_query(dict(at.query_params)).tokens == tuple(words)
    assert any("jieba" in c.value for c in at.caption)               # says how it split
    # a Chinese link with its own tokens keeps them
    at = run_page("app.py", AttentionSpec(tokens=("猫", "狗")), lang="zh")
    assert at.dataframe[0].value.iloc[:, 1].tolist() == ["猫", "狗"]


def test_pasted_chinese_example_is_segmented_and_the_link_reopens_it():
    at = run_page("app.py")
    at.sidebar.selectbox(key="in_example").set_value("chinese_mixed").run()
    assert not at.exception
    assert at.sidebar.text_area(key="in_text").value == EXAMPLES["chinese_mixed"]
    tokens = at.dataframe[0].value.iloc[:, 1].tolist()
    assert len(tokens) == 15 and tokens[:4] == ["深入", "解析", "Attention", "机制"]
    assert any("jieba" in c.value for c in at.caption)
    at.sidebar.selectbox(key="in_fmt").set_value("characters").run()
    assert at.dataframe[0].value.iloc[:, 1].tolist()[:5] == ["深", "入", "解", "析", "Attention"]
    spec = AttentionSpec.from_query(dict(at.query_params))
    again = run_page("app.py", spec)                                  # the link, in a new session
    assert again.dataframe[0].value.iloc[:, 1].tolist() == list(spec.tokens)
    assert AttentionSpec.from_query(dict(again.query_params)) == spec


def test_the_toy_source_still_reads_a_comma_list():
    at = run_page("app.py")
    at.sidebar.text_area(key="in_text").input("Wait, what").run()
    assert not at.exception
    assert at.dataframe[0].value.iloc[:, 1].tolist() == ["Wait", "what"]
    spec = AttentionSpec.from_query(dict(at.query_params))
    assert spec.tokens == ("Wait", "what") and spec.text == ""     # the toy reads no text
    again = run_page("app.py", **dict(at.query_params))        # the link: the box as typed
    assert again.sidebar.text_area(key="in_text").value == "Wait, what"
    assert again.dataframe[0].value.iloc[:, 1].tolist() == ["Wait", "what"]


def _pieces(at) -> list[str]:
    return at.dataframe[0].value.iloc[:, 1].tolist()


def test_the_pretrained_source_reads_the_text_as_typed_and_the_link_reopens_it():
    at = run_page("app.py", AttentionSpec(source="pretrained"))
    at.sidebar.text_area(key="in_text").input("Wait, what").run()
    assert not at.exception and not at.error
    assert _pieces(at) == ["[CLS]", "wait", ",", "what", "[SEP]"]     # the comma reaches MiniLM
    spec = AttentionSpec.from_query(dict(at.query_params))
    assert spec.text == "Wait, what" and spec.tokens == ("Wait", "what")
    again = run_page("app.py", spec)
    assert again.sidebar.text_area(key="in_text").value == "Wait, what"
    assert _pieces(again) == ["[CLS]", "wait", ",", "what", "[SEP]"]
    assert AttentionSpec.from_query(dict(again.query_params)) == spec
    # back to random projections: the same box is a token list again
    again.sidebar.radio(key="in_source").set_value("toy").run()
    assert _pieces(again) == ["Wait", "what"]


def test_the_pretrained_source_says_how_many_word_pieces_it_does_not_know():
    at = run_page("app.py", source="pretrained", lang="zh")       # the Chinese default
    assert not at.exception and not at.error
    pieces = _pieces(at)
    unknown = pieces.count("[UNK]")
    assert 0 < unknown < len(pieces) and "？" in pieces
    assert any(f"{len(pieces)} 个词片中有 {unknown} 个是 [UNK]" in w.value for w in at.warning)


def test_a_pretrained_link_reopens_its_text_under_the_format_that_gives_its_tokens():
    spec = AttentionSpec(tokens=("New York", "Paris"), source="pretrained", text="New York, Paris")
    at = run_page("app.py", spec)
    assert not at.exception and not at.error
    assert at.sidebar.text_area(key="in_text").value == "New York, Paris"
    assert at.sidebar.selectbox(key="in_fmt").value == "comma"
    assert AttentionSpec.from_query(dict(at.query_params)) == spec
    assert _pieces(at) == ["[CLS]", "new", "york", ",", "paris", "[SEP]"]
