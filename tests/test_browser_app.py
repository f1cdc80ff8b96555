"""The app in a real browser: typing, page switches, deep links and share links."""
from urllib.parse import urlencode

import pytest
from playwright.sync_api import expect

from attention.spec import AttentionSpec
from attention.tokens import tokens_to_text
from tests.conftest import wait_for_app

pytestmark = pytest.mark.browser

PAGES = {"": "Input", "Heatmap": "Heatmap", "Score_analysis": "Score analysis",
         "Model_heads": "Model heads", "Is_sharper_better": "Is sharper better?"}
SPEC = AttentionSpec(tokens=("we", "shared", "<b>this</b>", "link", "we"), d_k=32, heads=3,
                     seed=7, causal=True, temperature=0.8)


def expect_tokens(page, tokens) -> None:
    """The sidebar's token box shows exactly these tokens (retried while the page settles)."""
    box = page.locator('[data-testid="stSidebar"] textarea').first
    expect(box).to_have_value(tokens_to_text(tokens), timeout=30_000)


def heading(page) -> str:
    return page.locator("h1").first.inner_text().strip()


def test_typing_then_switching_pages_keeps_the_input(server, page):
    page.goto(server.url)
    wait_for_app(page)
    box = page.locator('[data-testid="stSidebar"] textarea').first
    box.fill("alpha beta gamma alpha")
    box.press("Control+Enter")
    page.wait_for_url("**tokens=alpha+beta+gamma+alpha**")
    wait_for_app(page)
    values = page.locator('[data-testid="stMetricValue"]').all_inner_texts()
    assert values[:2] == ["4", "3"]                                  # tokens, distinct tokens
    page.locator('[data-testid="stSidebar"] a', has_text="Heatmap").click()
    page.wait_for_url("**/Heatmap?**")
    wait_for_app(page)
    assert heading(page) == "Heatmap"
    expect_tokens(page, ("alpha", "beta", "gamma", "alpha"))
    assert "tokens=alpha+beta+gamma+alpha" in page.url
    page.locator('[data-testid="stSidebar"] a', has_text="Input").click()
    wait_for_app(page)
    expect_tokens(page, ("alpha", "beta", "gamma", "alpha"))


@pytest.mark.parametrize("path", list(PAGES))
def test_deep_link_on_a_fresh_server_reproduces_the_view(fresh_server, page, path):
    page.goto(f"{fresh_server.url}/{path}?{urlencode(SPEC.to_query())}")
    wait_for_app(page)
    assert heading(page) == PAGES[path]
    expect_tokens(page, SPEC.tokens)
    assert page.locator('[data-testid="stException"]').count() == 0
    heads = page.locator('[data-testid="stSidebar"] input[type="number"]').nth(2).input_value()
    assert heads == "3"
    # The tag stays text: nothing in the page became a <b> element from user input.
    assert page.locator('[data-testid="stSidebar"] b', has_text="this").count() == 0


def test_share_link_reopens_the_same_view_in_a_new_browser(server, chromium, page):
    page.goto(f"{server.url}/Heatmap?{urlencode(SPEC.to_query())}")
    wait_for_app(page)
    page.get_by_role("button", name="Share this view").click()
    link = page.locator('[data-testid="stCode"]').last.inner_text().strip()
    assert link.startswith(f"{server.url}/Heatmap?")
    other = chromium.new_context()
    try:
        viewer = other.new_page()
        viewer.goto(link)
        wait_for_app(viewer)
        assert heading(viewer) == "Heatmap"
        expect_tokens(viewer, SPEC.tokens)
        assert AttentionSpec.from_query(dict(_query(viewer.url))) == SPEC
    finally:
        other.close()


def _query(url: str):
    from urllib.parse import parse_qsl, urlsplit

    return parse_qsl(urlsplit(url).query)
