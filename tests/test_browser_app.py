"""The app in a real browser: typing, page switches, deep links and share links."""
from urllib.parse import urlencode

import pytest
from playwright.sync_api import expect

from attention.i18n import catalog
from attention.spec import AttentionSpec
from attention.text.tokens import tokens_to_text
from attention.ui.pages import PAGES as LISTED
from tests.conftest import UI_TIMEOUT, show_toy_settings, wait_for_app

pytestmark = pytest.mark.browser

PAGES = {entry.url_path: catalog("en")[entry.title] for entry in LISTED}   # path -> heading
SPEC = AttentionSpec(tokens=("we", "shared", "<b>this</b>", "link", "we"), d_k=32, heads=3,
                     seed=7, causal=True, temperature=0.8)


def expect_tokens(page, tokens) -> None:
    """The sidebar's token box shows exactly these tokens (retried while the page settles)."""
    box = page.locator('[data-testid="stSidebar"] textarea').first
    expect(box).to_have_value(tokens_to_text(tokens), timeout=UI_TIMEOUT)


def expect_heading(page, text: str) -> None:
    expect(page.locator("h1").first).to_have_text(text, timeout=UI_TIMEOUT)


def expect_spec_in_url(page, spec: AttentionSpec) -> None:
    page.wait_for_url(lambda url: AttentionSpec.from_query(dict(_query(url))) == spec,
                      timeout=UI_TIMEOUT)


def test_typing_then_switching_pages_keeps_the_input(server, page):
    page.goto(server.url)
    wait_for_app(page)
    box = page.locator('[data-testid="stSidebar"] textarea').first
    box.fill("alpha beta gamma alpha")
    box.press("Control+Enter")
    page.wait_for_url("**tokens=alpha+beta+gamma+alpha**")
    wait_for_app(page)
    values = page.locator('[data-testid="stMetricValue"]')
    expect(values.nth(0)).to_have_text("4", timeout=UI_TIMEOUT)      # tokens
    expect(values.nth(1)).to_have_text("3", timeout=UI_TIMEOUT)      # distinct tokens
    page.locator('[data-testid="stSidebar"] a', has_text="Heatmap").click()
    page.wait_for_url("**/Heatmap?**")
    wait_for_app(page)
    expect_heading(page, "Heatmap")
    expect_tokens(page, ("alpha", "beta", "gamma", "alpha"))
    page.wait_for_url("**tokens=alpha+beta+gamma+alpha**", timeout=UI_TIMEOUT)
    page.locator('[data-testid="stSidebar"] a', has_text="Input").click()
    wait_for_app(page)
    expect_tokens(page, ("alpha", "beta", "gamma", "alpha"))


@pytest.mark.parametrize("path", list(PAGES))
def test_deep_link_on_a_fresh_server_reproduces_the_view(fresh_server, page, path):
    page.goto(f"{fresh_server.url}/{path}?{urlencode(SPEC.to_query())}")
    wait_for_app(page)
    expect_heading(page, PAGES[path])
    expect_tokens(page, SPEC.tokens)
    show_toy_settings(page, path)
    heads = page.locator('[data-testid="stSidebar"]').get_by_label("Heads", exact=True)
    expect(heads).to_have_value("3", timeout=UI_TIMEOUT)
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)
    # The tag stays text: nothing in the page became a <b> element from user input.
    expect(page.locator('[data-testid="stSidebar"] b', has_text="this")).to_have_count(0)


# Links as the pages have written them, view settings included (a name from before the
# prefixes, ?head=, is renamed): path, its query after the spec, what the settled URL then
# holds. A page that ignored the setting would write its default back into the URL.
OLD_LINKS = {
    "heatmap view": ("Heatmap", "hm_view=grid&hm_head=2", {"hm_view": "grid", "hm_head": "2"}),
    "score head, old name": ("Score_analysis", "head=1", {"sc_head": "1"}),
    "model heads part": ("Model_heads", "mh_tab=table", {"mh_tab": "table"}),
    "importance view": ("Does_the_model_use_it",
                        "imp_corpus=bundled%3Aen&imp_words=True&imp_layer=2",
                        {"imp_corpus": "bundled:en", "imp_words": "True", "imp_layer": "2"}),
}


@pytest.mark.parametrize("name", list(OLD_LINKS))
def test_an_old_link_with_view_settings_opens_the_same_view_on_a_fresh_server(fresh_server,
                                                                               page, name):
    path, query, held = OLD_LINKS[name]
    page.goto(f"{fresh_server.url}/{path}?{urlencode(SPEC.to_query())}&{query}")
    wait_for_app(page)
    expect_heading(page, PAGES[path])
    page.wait_for_url(lambda url: held.items() <= dict(_query(url)).items()
                      and "head" not in dict(_query(url)), timeout=UI_TIMEOUT)
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)


def test_share_link_reopens_the_same_view_in_a_new_browser(server, chromium, page):
    page.goto(f"{server.url}/Heatmap?{urlencode(SPEC.to_query())}")
    wait_for_app(page)
    page.get_by_role("button", name="Share this view").click()
    code = page.locator('[data-testid="stCode"]').last
    expect(code).to_contain_text(f"{server.url}/Heatmap?", timeout=UI_TIMEOUT)
    link = code.inner_text().strip()
    assert link.startswith(f"{server.url}/Heatmap?")
    other = chromium.new_context()
    try:
        viewer = other.new_page()
        viewer.goto(link)
        wait_for_app(viewer)
        expect_heading(viewer, "Heatmap")
        expect_tokens(viewer, SPEC.tokens)
        expect_spec_in_url(viewer, SPEC)
    finally:
        other.close()


def _query(url: str):
    from urllib.parse import parse_qsl, urlsplit

    return parse_qsl(urlsplit(url).query)


def test_an_explanation_draws_its_formulas_when_opened(server, page):
    """The explanation at a page's foot is not on the page until opened (a rerun); opened,
    its formulas are typeset and the rest of the page stays drawn."""
    from attention.ui.views.heatmap import draw_explanation
    from tests.apptest import explanation_steps

    _, steps = explanation_steps(draw_explanation)
    formulas = [formula for _, formula in steps if formula]
    page.goto(f"{server.url}/Heatmap?{urlencode(SPEC.to_query())}")
    wait_for_app(page)
    expect(page.locator(".katex-display")).to_have_count(0)
    page.get_by_text("What am I looking at?").click()
    expect(page.locator(".katex-display")).to_have_count(len(formulas), timeout=UI_TIMEOUT)
    expect(page.locator('[data-testid="stMain"] .ae-heatmap').first).to_be_visible()
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)


def test_a_snapshot_saved_from_the_closed_box_loads_back_in_another_browser(server, chromium,
                                                                          page, tmp_path):
    """The sidebar's snapshot box draws its button and uploader only once opened (a click
    reruns the page); the file it saves, loaded in a fresh browser, sets that browser's
    sidebar to the snapshot's input and says the numbers match."""
    page.goto(f"{server.url}/Heatmap?{urlencode(SPEC.to_query())}")
    wait_for_app(page)
    side = page.locator('[data-testid="stSidebar"]')
    expect(side.locator('input[type="file"]')).to_have_count(0)          # closed: no uploader
    side.locator('[data-testid="stExpander"] summary', has_text="Snapshot").click()
    save = side.get_by_role("button", name="Save snapshot")
    expect(save).to_be_visible(timeout=UI_TIMEOUT)
    with page.expect_download(timeout=UI_TIMEOUT) as got:
        save.click()
    saved = tmp_path / "attention-snapshot.json"
    got.value.save_as(saved)
    other = chromium.new_context()
    try:
        viewer = other.new_page()
        viewer.goto(server.url)                                 # the default input, not SPEC's
        wait_for_app(viewer)
        box = viewer.locator('[data-testid="stSidebar"]')
        box.locator('[data-testid="stExpander"] summary', has_text="Snapshot").click()
        box.locator('input[type="file"]').set_input_files(str(saved))
        expect(box.locator('[data-testid="stAlertContentSuccess"]')).to_be_visible(
            timeout=UI_TIMEOUT)
        expect_tokens(viewer, SPEC.tokens)
        expect_spec_in_url(viewer, SPEC)
        expect(viewer.locator('[data-testid="stException"]')).to_have_count(0)
    finally:
        other.close()
