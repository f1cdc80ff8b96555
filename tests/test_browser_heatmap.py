"""The Heatmap page in Chromium: deep links on a fresh server draw the heatmap with the
tokens from the URL as axis labels; long inputs draw an overview image on a canvas."""
from urllib.parse import urlencode

import pytest

from attention.analysis import analyze
from attention.spec import AttentionSpec
from tests.conftest import wait_for_app

pytestmark = pytest.mark.browser

SPEC = AttentionSpec(tokens=("zebra", "quokka", "zebra", "narwhal", "okapi"), heads=2, seed=3)
CHARTS = '[data-testid="stMain"] [data-testid="stVegaLiteChart"]'

# True once the canvas has at least one painted pixel (Vega draws the whole scene in one pass).
PAINTED = """(canvas) => {
  const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  for (let i = 3; i < d.length; i += 4) if (d[i]) return true;
  return false;
}"""


def test_deep_link_on_a_fresh_server_draws_the_heatmap_with_url_tokens(fresh_server, page):
    page.goto(f"{fresh_server.url}/Heatmap?{urlencode({**SPEC.to_query(), 'hm_head': '1'})}")
    wait_for_app(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    chart = page.locator(CHARTS).first
    cells = chart.locator("svg .mark-rect.role-mark path")
    cells.first.wait_for(timeout=30_000)
    assert cells.count() == 3 * 25                                        # 3 panels x 5 x 5
    labels = chart.locator("svg .role-axis-label text").all_text_contents()
    # Each panel's key axis, and the first panel's query axis, read the URL's tokens in order:
    # both "zebra"s keep their own column and row.
    assert labels.count("zebra") == 2 * 4 and labels.count("okapi") == 4
    assert labels[:5] == list(SPEC.tokens)
    assert page.get_by_role("combobox", name="Head").input_value() == "Head 1"
    # The numbers printed in the scaled panel, row by row, are head 1's weights (hm_head=1).
    weights = analyze(SPEC).scaled.weights[1].flatten()                  # (25,) query-major
    printed = chart.locator("svg .mark-text.role-mark text").all_text_contents()
    assert len(printed) == 3 * 25
    assert [float(x) for x in printed[:25]] == pytest.approx(weights.tolist(), abs=0.005)


def test_long_input_draws_an_overview_image_on_a_canvas(server, page):
    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(300)), heads=1)
    page.goto(f"{server.url}/Heatmap?{urlencode(spec.to_query())}")
    wait_for_app(page)
    notice = page.locator('[data-testid="stAlertContentInfo"]').first
    assert "300 tokens" in notice.inner_text() and "150 × 150 blocks" in notice.inner_text()
    overview, zoom = page.locator(CHARTS).nth(0), page.locator(CHARTS).nth(1)
    canvas = overview.locator("canvas").first
    canvas.wait_for(timeout=30_000)
    page.wait_for_function(f"() => ({PAINTED})(document.querySelectorAll('{CHARTS}')[0]"
                           ".querySelector('canvas'))", timeout=30_000)
    # The overview is three images of 150 x 150 blocks: hundreds of distinct colours (axes,
    # titles and legends alone draw a few dozen), so the images really were drawn.
    colours = page.evaluate(f"""() => {{
      const c = document.querySelectorAll('{CHARTS}')[0].querySelector('canvas');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      const seen = new Set();
      for (let i = 0; i < d.length; i += 4) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      return seen.size;
    }}""")
    assert colours > 300
    # The zoom window below is drawn cell by cell, also on a canvas (its labels are checked
    # in tests/test_page_heatmap.py from the chart's spec).
    page.wait_for_function(f"() => ({PAINTED})(document.querySelectorAll('{CHARTS}')[1]"
                           ".querySelector('canvas'))", timeout=30_000)
    assert zoom.locator("canvas").count() == 1
