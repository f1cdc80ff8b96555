"""What a newcomer sees in a real browser (issue 44, item 8): legend titles clear of their
first tick, and the Input page's token table tall enough for every row."""
from urllib.parse import urlencode

import pytest
from playwright.sync_api import expect

from attention.spec import AttentionSpec
from attention.ui.views.input import ROW_PX
from tests.conftest import UI_TIMEOUT, wait_for_app

pytestmark = pytest.mark.browser

GAP_PX = 4       # the least room between a legend's title and its first tick label


def _overlaps(page) -> list[dict]:
    """Each canvas legend whose title's right edge comes within GAP_PX of its first tick."""
    return page.evaluate("""(gap) => [...document.querySelectorAll('.ae-legend')].map((box) => {
        const title = box.querySelector('.ae-legend-title').getBoundingClientRect();
        const tick = box.querySelector('.ae-legend-ticks .ae-label').getBoundingClientRect();
        return {title: box.querySelector('.ae-legend-title').textContent,
                room: tick.left - title.right};
    }).filter((l) => l.room < gap)""", GAP_PX)


@pytest.mark.parametrize("path, query", [
    ("Heatmap", {"lang": "en"}), ("Heatmap", {"lang": "zh"}),
    ("Heatmap", {"lang": "en", "hm_shared": "False"}),
    ("Model_heads", {"lang": "en", "source": "pretrained"})])
def test_legend_titles_stand_clear_of_their_first_tick(server, page, path, query):
    page.goto(f"{server.url}/{path}?{urlencode({**AttentionSpec().to_query(), **query})}")
    wait_for_app(page)
    expect(page.locator(".ae-legend").first).to_be_visible(timeout=UI_TIMEOUT)
    assert page.locator(".ae-legend").count() >= 1
    assert _overlaps(page) == []


def test_the_input_table_shows_every_token_without_scrolling(server, page):
    tokens = tuple(f"w{i}" for i in range(30))
    page.goto(f"{server.url}/?{urlencode(AttentionSpec(tokens=tokens).to_query())}")
    wait_for_app(page)
    table = page.locator('[data-testid="stDataFrame"]').first
    expect(table).to_be_visible(timeout=UI_TIMEOUT)
    page.wait_for_function(
        "(px) => document.querySelector('[data-testid=stDataFrame]')"
        ".getBoundingClientRect().height >= px", arg=ROW_PX * (len(tokens) + 1))
