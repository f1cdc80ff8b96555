"""Links as a user writes and shares them (issue 44, items 5 and 8): a hand-written Chinese
link is parsed as pasted text, the app's links keep the text as typed, links made before open
the same view, and an emptied token box leaves no old sentence in the address bar."""
from urllib.parse import parse_qsl, urlencode

from attention.spec import AttentionSpec
from attention.text.tokens import parse_tokens
from tests.apptest import run_page

TYPED = "我昨天在图书馆借了三本关于历史的书。"


def _tokens(at) -> list[str]:
    return at.dataframe[0].value.iloc[:, 1].tolist()


def _as_shared(at) -> dict[str, str]:
    """The address bar's parameters after a trip through a URL (what a shared link carries)."""
    return dict(parse_qsl(urlencode(dict(at.query_params))))


def test_a_hand_written_chinese_link_gives_the_words_pasted_text_gives():
    words = parse_tokens(TYPED)
    assert len(words) == 12
    at = run_page("pages/1_Heatmap.py", tokens=TYPED)
    assert not at.exception and not at.error and not at.warning
    box = run_page("app.py", tokens=TYPED)
    assert _tokens(box) == words                                    # 12 words, not one token
    assert box.sidebar.text_area(key="in_text").value == TYPED      # the box shows it as typed
    assert at.query_params["tokens"] == TYPED                       # and so does the link


def test_the_apps_link_keeps_the_text_as_typed_and_reopens_the_same_view():
    at = run_page("app.py")
    at.sidebar.text_area(key="in_text").input(TYPED).run()
    assert _tokens(at) == parse_tokens(TYPED)
    shared = _as_shared(at)
    assert shared["tokens"] == TYPED                                # not "我 昨天 在 …"
    again = run_page("app.py", **shared)
    assert again.sidebar.text_area(key="in_text").value == TYPED
    assert _tokens(again) == parse_tokens(TYPED)


def test_a_format_chosen_by_hand_survives_the_link():
    at = run_page("app.py")
    at.sidebar.text_area(key="in_text").input("猫坐在垫子上").run()
    at.sidebar.selectbox(key="in_fmt").set_value("characters").run()
    assert _tokens(at) == list("猫坐在垫子上")
    again = run_page("app.py", **_as_shared(at))
    assert _tokens(again) == list("猫坐在垫子上")
    assert again.sidebar.text_area(key="in_text").value == "猫坐在垫子上"
    assert again.sidebar.selectbox(key="in_fmt").value == "characters"


def test_an_old_style_link_opens_the_same_view():
    """A link as the app wrote it before: the words joined by spaces, old key names."""
    old = {"tokens": "手机 没电 了 ， 我 没法 给 你 打电话", "d_model": "64", "d_k": "16",
           "heads": "4", "seed": "0", "positional": "1", "causal": "0", "temperature": "1.0",
           "source": "toy", "layer": "0", "head": "2"}
    at = run_page("pages/2_Score_analysis.py", **old)
    assert not at.exception and not at.warning
    spec = AttentionSpec.from_query(dict(at.query_params))
    assert spec.tokens == tuple(old["tokens"].split())              # "没电" stays one token
    assert at.query_params["sc_head"] == "2" and "head" not in at.query_params   # RENAMED


def test_emptying_the_token_box_clears_the_old_sentence_from_the_url():
    at = run_page("app.py", tokens=TYPED)
    assert at.query_params["tokens"] == TYPED
    at.sidebar.text_area(key="in_text").input("").run()
    assert not at.exception and len(at.error) == 1
    assert "tokens" not in at.query_params and "text" not in at.query_params
    assert at.query_params["lang"] == "en"
