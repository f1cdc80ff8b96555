"""The "Is sharper better?" page in Chromium: a deep link on a freshly started server trains
the heads, then draws every chart (real SVG/canvas marks, not empty frames); its button for
the real models opens their part. Seed 3: the default seed ships with the code
(attention/data/experiments) and would not train."""
import pytest
from playwright.sync_api import expect

from tests.conftest import UI_TIMEOUT, eventually, wait_for_app

pytestmark = pytest.mark.browser

TRAINING_TIMEOUT = 240_000   # ms: a cold server trains 19 heads before the charts appear


def test_deep_link_on_a_fresh_server_draws_the_experiment(fresh_server, page):
    page.goto(f"{fresh_server.url}/Is_sharper_better?sh_seed=3")
    wait_for_app(page, timeout=TRAINING_TIMEOUT)
    page.wait_for_function(
        """() => document.querySelectorAll('[data-testid="stVegaLiteChart"]').length >= 5""",
        timeout=TRAINING_TIMEOUT)
    expect(page.locator("h1").first).to_have_text("Is sharper better?", timeout=UI_TIMEOUT)
    # the toy part only: the real models' part waits behind its button
    expect(page.locator("h2", has_text="On a real language model")).to_have_count(0)
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)
    seed = page.locator('[data-testid="stMain"] [data-testid="stNumberInput"] input').first
    expect(seed).to_have_value("3", timeout=UI_TIMEOUT)
    page.wait_for_url("**sh_seed=3**", timeout=UI_TIMEOUT)
    # every chart has drawn marks: points/bars as SVG paths or a non-empty canvas
    page.wait_for_function(
        """() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].every(c => {
               const marks = c.querySelectorAll('g.mark-symbol path, g.mark-rect path,'
                                                + ' g.mark-line path, g.role-mark path');
               const canvas = c.querySelector('canvas');
               return marks.length > 0 || (canvas && canvas.width > 0 && canvas.height > 0);
           })""", timeout=UI_TIMEOUT)
    # the conclusions are written from numbers, and the progress bars are gone
    conclusions = page.locator('[data-testid="stAlertContentInfo"]')
    expect(conclusions.nth(4)).to_be_visible(timeout=UI_TIMEOUT)      # the toy section's five
    eventually(page, lambda: "Accuracy peaks at m = " in conclusions.first.inner_text()
               or "no clear peak" in conclusions.first.inner_text())
    expect(page.locator('[data-testid="stProgress"]')).to_have_count(0, timeout=UI_TIMEOUT)
    expect(page.locator('[data-testid="stVegaLiteChart"]')).to_have_count(8)

    page.get_by_role("radio", name="Real models", exact=True).click()
    expect(page.locator("h2", has_text="On a real language model")).to_be_visible(
        timeout=UI_TIMEOUT)
    page.wait_for_url("**sh_part=real**", timeout=UI_TIMEOUT)
    expect(page.locator('[data-testid="stMain"] h3', has_text="Sharpen a trained head")
           ).to_have_count(0, timeout=UI_TIMEOUT)
    expect(page.locator('[data-testid="stVegaLiteChart"]')).to_have_count(4, timeout=UI_TIMEOUT)
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)
