"""The "Does the model use it?" page in Chromium, opened by a deep link as a fresh server's
first request with the bundled MiniLM: every chart is drawn inside the main column, the
conclusion sentences carry the numbers attention.importance computes for the same text in this
process, and the layer picker's value in the link (imp_layer) reopens that layer."""
from __future__ import annotations

import re
from urllib.parse import parse_qs, urlencode, urlparse

import pytest
from playwright.sync_api import expect

from attention import importance as imp
from attention import models
from attention.i18n import translate
from attention.conclusions.importance import agreement_conclusions
from attention.spec import AttentionSpec
from tests.conftest import eventually, wait_for_app

pytestmark = pytest.mark.browser

LOAD = 300_000       # ms: a fresh server imports torch, loads MiniLM, then measures the text
TEXTS = {"en": "the cat sat on the mat", "zh": "猫坐在垫子上"}
CHARTS = 4           # agreement, heads, pruning, temperature sweep
NUMBER = re.compile(r"-?\d+\.\d\d")


def settle(page) -> None:
    page.wait_for_function(
        """() => !document.querySelector('[data-testid="stStatusWidget"]')""", timeout=LOAD)
    wait_for_app(page, timeout=LOAD)


def expected_agreement(query: dict) -> list[float]:
    """The numbers of the first conclusion ("Averaged over the layers ...") computed here,
    on the texts the page reads from the same link."""
    from attention.ui.views.importance import texts_of

    spec, _ = AttentionSpec.parse_query(query)
    tokens = imp.token_importance(models.load_model(), texts_of(spec))
    first = agreement_conclusions(imp.layer_agreement(tokens))[0]
    return [float(v) for name, v in first.params if name != "layers"]


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
    query = {**AttentionSpec(tokens=tuple(TEXTS[lang].split())).to_query(), "lang": lang}
    if lang == "zh":     # as typed, segmented by the sidebar
        query["tokens"] = TEXTS[lang]
    page.goto(f"{fresh_server.url}/Does_the_model_use_it?{urlencode(query)}&imp_layer=2")
    expect(page.locator("h1").first).to_have_text(translate(lang, "nav.importance"),
                                                  timeout=LOAD)
    conclusions_title = page.locator("h3", has_text=translate(lang, "importance.conclusions_title"))
    expect(conclusions_title).to_be_visible(timeout=LOAD)
    settle(page)
    eventually(page, lambda: charts_drawn(page), timeout=LOAD)
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)
    expect(page.locator('[data-testid="stAlertContentError"]')).to_have_count(0)

    # the first conclusion's six numbers are those of the same text computed here
    prefix = translate(lang, "importance.c_agreement", layers=6, raw_occ="", roll_occ="",
                       flow_occ="", raw_grad="", roll_grad="", flow_grad="")[:8]
    sentence = page.locator('[data-testid="stMarkdownContainer"] li', has_text=prefix).first
    want = expected_agreement(query)

    def same_numbers():
        shown = [float(x) for x in NUMBER.findall(sentence.inner_text())]
        assert shown == pytest.approx(want, abs=0.011), (shown, want)
    eventually(page, same_numbers, timeout=LOAD)

    # the link's layer is the picker's
    picker = page.get_by_role("combobox", name=translate(lang, "importance.sweep_layer"),
                              exact=True)
    expect(picker).to_have_value("2", timeout=LOAD)

    # pick another layer: the address bar follows, and that link reopens layer 4
    picker.click()
    page.get_by_role("option", name="4", exact=True).click()
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
