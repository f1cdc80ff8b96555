"""What a newcomer meets on a phone (issue 44, "Done when": 390 x 844 shows no cut label):
the Corpus page's chart titles are broken into lines that fit (Vega cuts a long title with
an ellipsis instead of wrapping it), and every page carries the style rule that lets a row of
segmented buttons wrap. The browser test opens the Heatmap at 390 px and finds every view
button inside the screen."""
from __future__ import annotations

import json

import pytest

from attention.charts.size import _units, title_lines
from tests.apptest import PAGE_FILES, open_page

CORPUS = "pages/6_Corpus.py"


def test_title_lines_keep_every_character_and_fit():
    for text in ("To [SEP]: mean over the texts, per head (ring: at least half, on every text)",
                 "第 0 层，第 0 头：来自 390 段文本的 3,120 个查询和 3,120 个键（t-SNE）",
                 "short", "x" * 60):
        lines = title_lines(text)
        assert "".join(lines).replace(" ", "") == text.replace(" ", "")
        assert all(_units(line) <= 44 for line in lines) or lines == [text]   # one long word
    assert _units("指向") == 4 and _units("ab") == 2
    assert title_lines("a " * 30) == ["a " * 21 + "a", "a " * 7 + "a"]   # 43 + 15 half-widths


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_corpus_chart_titles_fit_a_phone(lang):
    at = open_page(CORPUS, timeout=300, lang=lang)
    assert not at.exception
    titles = [json.loads(c.proto.spec).get("title") for c in at.get("vega_lite_chart")]
    titles = [t for t in titles if t]
    assert len(titles) >= 2                                   # the head grid and the map
    for title in titles:
        lines = title if isinstance(title, list) else [title]
        assert all(_units(line) <= 44 for line in lines), lines
    assert any(isinstance(t, list) and len(t) > 1 for t in titles)   # one did need a break


def test_every_page_lets_segmented_buttons_wrap():
    for path in PAGE_FILES:
        at = open_page(path, timeout=300)
        styles = [h.proto.body for h in at.get("html")]
        assert any('[data-testid="stButtonGroup"] > div { flex-wrap: wrap;' in s for s in styles), path


@pytest.mark.browser
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_heatmap_view_buttons_stay_on_a_phones_screen(server, chromium, lang):
    from tests.conftest import UI_TIMEOUT, wait_for_app

    context = chromium.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        page.goto(f"{server.url}/Heatmap?lang={lang}")
        wait_for_app(page)
        buttons = page.locator('[data-testid="stMain"] [data-testid="stButtonGroup"] button')
        buttons.first.wait_for(timeout=UI_TIMEOUT)
        page.wait_for_function("""() => [...document.querySelectorAll(
            '[data-testid="stMain"] [data-testid="stButtonGroup"] button')].length === 3""",
                               timeout=UI_TIMEOUT)
        rights = buttons.evaluate_all("els => els.map(e => e.getBoundingClientRect().right)")
        assert len(rights) == 3 and max(rights) <= 390, rights
    finally:
        context.close()
