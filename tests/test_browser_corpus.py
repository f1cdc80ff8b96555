"""The Corpus page in Chromium, in English and Chinese: a cold server opens the shipped results,
hovering a point of the global view shows its token, and clicking it opens that text on Model
heads at the same layer and head."""
from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pandas as pd
import pytest
from playwright.sync_api import expect

from attention.ui.views.corpus import SHIPPED
from tests.conftest import eventually, wait_for_app

pytestmark = pytest.mark.browser
LOAD = 180_000
CASES = [("en", "en", "Token", "Layer 2, head 3:"),
         ("zh", "zh" if (SHIPPED / "zh" / "manifest.json").is_file() else "en", "词元",
          "第 2 层第 3 个头：")]      # Model heads' own heading (model.compare_title)


# A Vega chart has painted: a canvas with an inked pixel, or an SVG with marks.
PAINTED = """el => {
  const cv = el.querySelector('canvas');
  if (cv && cv.width) {
    const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
    for (let i = 3; i < d.length; i += 4 * 29) if (d[i]) return true;
    return false;
  }
  return !!el.querySelector('svg .role-mark path');
}"""
# Resolves once the browser has handled the events so far and drawn two frames after them.
FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"


def _tooltip_at_a_point(page, chart, label: str):
    """Move the mouse over the map until Vega's tooltip shows a point (a scan: the points'
    pixels are not in the DOM), each move's tooltip read once the browser has handled it; the
    tooltip's text and the position."""
    chart.scroll_into_view_if_needed()
    page.wait_for_function(PAINTED, arg=chart.element_handle(), timeout=LOAD)
    box = chart.bounding_box()
    tip = page.locator("#vg-tooltip-element")
    for fy in [i / 24 for i in range(4, 21)]:
        for fx in [i / 40 for i in range(6, 34)]:
            x, y = box["x"] + box["width"] * fx, box["y"] + box["height"] * fy
            page.mouse.move(x, y)
            page.evaluate(FRAMES)
            if tip.count() and tip.is_visible():
                expect(tip).to_contain_text(label, timeout=LOAD)
                return tip.inner_text(), (x, y)
    raise AssertionError("no point of the map showed a tooltip")


@pytest.mark.parametrize("lang,folder,token_label,title", CASES)
def test_shipped_results_hover_and_click_to_model_heads(fresh_server, page, lang, folder,
                                                         token_label, title):
    page.goto(f"{fresh_server.url}/Corpus?lang={lang}&cp_folder=shipped:{folder}"
              f"&cp_layer=2&cp_head=3")
    charts = page.locator('[data-testid="stVegaLiteChart"]')
    expect(charts).to_have_count(2, timeout=LOAD)
    wait_for_app(page, timeout=LOAD)
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)
    expect(page.get_by_text("Layer 2, head 3" if lang == "en" else "第 2 层，第 3 头").first
           ).to_be_visible(timeout=LOAD)
    chart = charts.nth(1)
    text, (x, y) = _tooltip_at_a_point(page, chart, token_label)
    assert token_label in text
    token = re.search(rf"{token_label}\s*\n?\s*(\S+)", text).group(1)
    pieces = pd.read_parquet(SHIPPED / folder / "view" / "pieces.parquet")
    assert token in set(pieces["token"])
    # the click: Vega opens the point's href (here or in a new tab)
    context = page.context
    before = len(context.pages)
    page.mouse.click(x, y)
    eventually(page, lambda: len(context.pages) > before or "Model_heads" in page.url,
               timeout=LOAD)
    target = context.pages[-1] if len(context.pages) > before else page
    target.wait_for_url(re.compile(r".*/Model_heads\?.*"), timeout=LOAD)
    q = parse_qs(urlparse(target.url).query)
    assert q["mh_layer"] == ["2"] and q["mh_head"] == ["3"] and q["source"] == ["pretrained"]
    texts = pd.read_parquet(SHIPPED / folder / "view" / "texts.parquet")
    shown = text.split("\n")[-1].strip().rstrip("…")
    assert q["text"][0] in set(texts["text"]) and q["text"][0].startswith(shown[:20])
    expect(target.locator("h3", has_text=title).first).to_be_visible(timeout=LOAD)
