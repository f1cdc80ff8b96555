"""The "Does the model use it?" page in Chromium, opened by a deep link as a fresh server's
first request: the default view (bundled:en's first texts on the bundled MiniLM) is read from
the results shipped with the code; every chart is drawn inside the main column, the first
conclusion is the one written from the shipped frames, and the layer picker's value in the
link (imp_layer) reopens that layer."""
from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlparse

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from attention import models
from attention.conclusions.importance import conclusions
from attention import diskcache
from attention.i18n import translate
from attention.importance import store
from tests.conftest import eventually, wait_for_app

pytestmark = pytest.mark.browser

LOAD = 300_000       # ms: a fresh server imports torch and loads MiniLM
CHARTS = 6           # agreement, faithfulness, heads, sharpness, pruning, temperature sweep


def settle(page) -> None:
    page.wait_for_function(
        """() => !document.querySelector('[data-testid="stStatusWidget"]')""", timeout=LOAD)
    wait_for_app(page, timeout=LOAD)


def first_conclusion(lang: str) -> str:
    """The first sentence the page writes, from the shipped frames read here."""
    texts = store.shipped_texts()
    record = diskcache.read(store.shipped_path(), store.key(models.BUNDLED, texts))
    return conclusions(record.frames["agreement_words"], texts=len(texts))[0].text(lang)


def charts_drawn(page) -> None:
    """CHARTS charts, each painted (canvas or svg of some size) and inside the main column."""
    boxes = page.evaluate("""() => {
        const main = document.querySelector('[data-testid="stMainBlockContainer"]')
            .getBoundingClientRect();
        return [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].map(el => {
            const mark = el.querySelector('canvas, svg.marks');
            const r = mark ? mark.getBoundingClientRect() : null;
            return r && {w: r.width, h: r.height, left: r.left - main.left,
                         right: main.right - r.right};
        });
    }""")
    assert len(boxes) == CHARTS, boxes
    for box in boxes:
        assert box and box["w"] > 200 and box["h"] > 150, boxes
        assert box["left"] >= -1 and box["right"] >= -1, f"chart overflows the column: {boxes}"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_deep_link_draws_the_page_with_the_numbers_of_the_text(fresh_server, page, lang):
    query = {"lang": lang}
    page.goto(f"{fresh_server.url}/Does_the_model_use_it?{urlencode(query)}&imp_layer=2")
    expect(page.locator("h1").first).to_have_text(translate(lang, "nav.importance"),
                                                  timeout=LOAD)
    conclusions_title = page.locator("h3", has_text=translate(lang, "importance.conclusions_title"))
    expect(conclusions_title).to_be_visible(timeout=LOAD)
    settle(page)
    eventually(page, lambda: charts_drawn(page), timeout=LOAD)
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)
    expect(page.locator('[data-testid="stAlertContentError"]')).to_have_count(0)

    # the first conclusion is the one written from the shipped frames
    want = first_conclusion(lang)
    items = page.locator('[data-testid="stMarkdownContainer"] li')

    def shown():
        assert want in [text.strip() for text in items.all_inner_texts()], want
    eventually(page, shown, timeout=LOAD)

    # the link's layer is the picker's
    picker = page.get_by_role("combobox", name=translate(lang, "importance.sweep_layer"),
                              exact=True)
    expect(picker).to_have_value("2", timeout=LOAD)

    # pick another layer: the address bar follows, and that link reopens layer 4
    for attempt in range(4):         # a click that lands during a rerun leaves the list shut
        picker.click()
        try:
            page.get_by_role("option", name="4", exact=True).click(timeout=10_000)
            break
        except PlaywrightTimeout:
            if attempt == 3:
                raise
            page.keyboard.press("Escape")
    page.wait_for_url(lambda url: parse_qs(urlparse(url).query).get("imp_layer") == ["4"],
                      timeout=LOAD)
    settle(page)
    link = page.url
    page.goto("about:blank")
    page.goto(link)
    expect(conclusions_title).to_be_visible(timeout=LOAD)
    settle(page)
    expect(picker).to_have_value("4", timeout=LOAD)
    assert parse_qs(urlparse(page.url).query).get("imp_layer") == ["4"]
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)
