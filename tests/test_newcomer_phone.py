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


@pytest.mark.browser
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_all_heads_value_buttons_wrap_whole_on_a_phone(server, chromium, lang):
    """The canvas figure's own value buttons (a long input's All heads) wrap as Streamlit's
    segmented control does: whole buttons on new rows, each one line, none past the screen."""
    from urllib.parse import urlencode

    from attention.spec import AttentionSpec
    from tests.conftest import UI_TIMEOUT, wait_for_app

    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(600)), heads=4)
    context = chromium.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        page.goto(f"{server.url}/Heatmap?{urlencode({**spec.to_query(), 'hm_view': 'grid'})}"
                  f"&lang={lang}")
        wait_for_app(page)
        buttons = page.locator(".ae-heatmap .ae-choices .ae-choice")
        page.wait_for_function("() => document.querySelectorAll("
                               "'.ae-heatmap .ae-choices .ae-choice').length === 3",
                               timeout=UI_TIMEOUT)
        boxes = buttons.evaluate_all("els => els.map(e => { const r = e.getBoundingClientRect();"
                                     " return [r.right, r.height]; })")
        assert all(right <= 390 for right, _ in boxes), boxes
        assert max(h for _, h in boxes) < 40, boxes            # one line each (14 px x 1.6 + 8)
    finally:
        context.close()


# Every chart of the page has drawn: Vega's marks are in each chart element (the page's charts
# come in one by one) and every canvas figure has painted and is not repainting.
CHARTS_DRAWN = """([vega, canvas]) => {
  const main = document.querySelector('[data-testid="stMain"]');
  if (!main) return false;
  const charts = [...main.querySelectorAll('[data-testid="stVegaLiteChart"]')];
  const figures = [...main.querySelectorAll('.ae-heatmap')];
  return charts.length >= vega && figures.length >= canvas
    && charts.every(c => c.querySelector('svg.marks, canvas.marks'))
    && figures.every(f => f.dataset.drawn && !f.dataset.pending);
}"""

# What runs past a phone's screen, as sentences (empty: nothing). A Vega chart: its box and
# every text it draws (a text past the box is cut by it: an axis title centred under a narrow
# plot was). A canvas figure: inside the screen, or, when its content is wider, a box that
# scrolls sideways with the line that says so shown.
PAST_THE_EDGE = """(W) => {
  const main = document.querySelector('[data-testid="stMain"]');
  const out = [];
  for (const chart of main.querySelectorAll('[data-testid="stVegaLiteChart"]')) {
    const box = chart.getBoundingClientRect();
    const name = (chart.getAttribute('aria-label') || chart.innerText || '').slice(0, 40);
    if (box.right > W + 0.5) out.push(`chart ${name}: right edge ${Math.round(box.right)}`);
    for (const text of chart.querySelectorAll('svg text')) {
      const r = text.getBoundingClientRect();
      if (!r.width || !text.textContent.trim()) continue;
      // a turned title's box pokes 2 px out on the left where its glyphs do not
      if (r.right > Math.min(W, box.right) + 1 || r.left < box.left - 3)
        out.push(`chart ${name}: "${text.textContent}" spans ${Math.round(r.left)}-${Math.round(r.right)}`);
    }
  }
  for (const figure of main.querySelectorAll('.ae-heatmap')) {
    const box = figure.getBoundingClientRect();
    const name = figure.innerText.slice(0, 40).replace(/\\n/g, ' ');
    if (box.right > W + 0.5) out.push(`figure ${name}: right edge ${Math.round(box.right)}`);
    if (figure.scrollWidth > figure.clientWidth + 1) {
      const hint = figure.querySelector(':scope > .ae-scroll-hint');
      if (!['auto', 'scroll'].includes(getComputedStyle(figure).overflowX))
        out.push(`figure ${name}: ${figure.scrollWidth} px wide in ${figure.clientWidth} px, no scrolling`);
      else if (!hint || !hint.offsetHeight || hint.getBoundingClientRect().right > W + 0.5)
        out.push(`figure ${name}: scrolls sideways without saying so`);
    } else {
      for (const el of figure.querySelectorAll('*')) {
        const r = el.getBoundingClientRect();
        if (r.width && r.right > W + 0.5) { out.push(`figure ${name}: a part ends at ${Math.round(r.right)}`); break; }
      }
    }
  }
  for (const label of main.querySelectorAll('[data-testid="stWidgetLabel"] [data-testid="stMarkdownContainer"]')) {
    if (label.scrollWidth > label.clientWidth + 1)      // Streamlit ends it with an ellipsis
      out.push(`label "${label.textContent}" cut (${label.scrollWidth} px in ${label.clientWidth})`);
  }
  return out;
}"""


@pytest.mark.browser
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("path, vega, canvas", [("Model_heads", 0, 5),
                                                ("Does_the_model_use_it", 6, 0),
                                                # one figure at a time: 2, 4 and 6
                                                # panels, the saturation chart
                                                ("Score_analysis", 2, 0),
                                                ("Score_analysis?sc_figure=rows", 4, 0),
                                                ("Score_analysis?sc_figure=sweep", 6, 0),
                                                ("Score_analysis?sc_figure=saturation", 1, 0),
                                                # 8 toy charts (3 figures of 2 panels); 9
                                                # of the real model: the link shows its
                                                # per-layer and per-head charts too
                                                ("Is_sharper_better?sh_part=toy", 8, 0),
                                                ("Is_sharper_better?sh_layers=True&sh_heads=True",
                                                 9, 0)])
def test_charts_stay_on_a_phones_screen(server, chromium, path, vega, canvas, lang):
    """At 390 x 844 no chart of Model heads, Score analysis, "Is sharper better?" or "Does
    the model use it?" passes the screen's right edge or cuts a text of its own (the panels
    of a two- or three-panel figure stack); the 72-head grid and the ||f(x_j)|| bars, which
    keep their cells' size, scroll sideways in their own box under a line that says so; no
    widget label is cut; the page itself does not scroll sideways."""
    from playwright.sync_api import Error as PlaywrightError

    from tests.conftest import UI_TIMEOUT, wait_for_app

    context = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                   has_touch=True)
    page = context.new_page()
    try:
        page.goto(f"{server.url}/{path}{'&' if '?' in path else '?'}lang={lang}")
        wait_for_app(page)
        page.wait_for_function(CHARTS_DRAWN, arg=[vega, canvas], timeout=UI_TIMEOUT)
        try:   # a chart as wide as its column may settle a frame after it drew
            page.wait_for_function(f"() => ({PAST_THE_EDGE})(390).length === 0", timeout=5_000)
        except PlaywrightError:
            pass
        problems = page.evaluate(PAST_THE_EDGE, 390)
        assert problems == [], problems
        widths = page.evaluate("""() => [document.documentElement.scrollWidth,
            document.querySelector('[data-testid="stMain"]').scrollWidth]""")
        assert max(widths) <= 390, widths      # a chart 900 px wide made it scroll sideways
        if path == "Model_heads":   # the grid does overflow a phone: its box scrolls
            scrolled = page.evaluate("""() => { const f = document.querySelector('.ae-grid');
                f.scrollLeft = 1000; return [f.scrollLeft, f.scrollWidth - f.clientWidth]; }""")
            assert scrolled[0] > 0 and scrolled[0] == pytest.approx(scrolled[1], abs=1), scrolled
    finally:
        context.close()
