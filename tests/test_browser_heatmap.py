"""The Heatmap page in Chromium: deep links on a fresh server draw the heatmap with the
tokens from the URL as axis labels; long inputs draw an overview image on a canvas."""
import re
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from playwright.sync_api import expect

from attention.analysis import analyze
from attention.spec import AttentionSpec
from tests.conftest import UI_TIMEOUT, eventually, wait_for_app

pytestmark = pytest.mark.browser

SPEC = AttentionSpec(tokens=("zebra", "quokka", "zebra", "narwhal", "okapi"), heads=2, seed=3)
CHARTS = '[data-testid="stMain"] [data-testid="stVegaLiteChart"]'

# True once the canvas exists and has at least one painted pixel (Vega draws the whole scene
# in one pass); false, not an error, while the page is still drawing.
PAINTED = """(canvas) => {
  if (!canvas) return false;
  const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  for (let i = 3; i < d.length; i += 4) if (d[i]) return true;
  return false;
}"""


def test_deep_link_on_a_fresh_server_draws_the_heatmap_with_url_tokens(fresh_server, page):
    page.goto(f"{fresh_server.url}/Heatmap?{urlencode({**SPEC.to_query(), 'hm_head': '1'})}")
    wait_for_app(page)
    chart = page.locator(CHARTS).first
    cells = chart.locator("svg .mark-rect.role-mark path")
    expect(cells).to_have_count(3 * 25, timeout=UI_TIMEOUT)              # 3 panels x 5 x 5
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)
    labels = chart.locator("svg .role-axis-label text")

    def labels_are_the_url_tokens():
        # Each panel's key axis, and the first panel's query axis, read the URL's tokens in
        # order: both "zebra"s keep their own column and row.
        texts = labels.all_text_contents()
        assert texts.count("zebra") == 2 * 4 and texts.count("okapi") == 4, texts
        assert texts[:5] == list(SPEC.tokens), texts

    eventually(page, labels_are_the_url_tokens)
    expect(page.get_by_role("combobox", name="Head")).to_have_value("Head 1", timeout=UI_TIMEOUT)
    # The numbers printed in the scaled panel, row by row, are head 1's weights (hm_head=1).
    weights = analyze(SPEC).scaled.weights[1].flatten()                  # (25,) query-major
    printed = chart.locator("svg .mark-text.role-mark text")
    expect(printed).to_have_count(3 * 25, timeout=UI_TIMEOUT)
    eventually(page, lambda: [float(x) for x in printed.all_text_contents()[:25]]
               == pytest.approx(weights.tolist(), abs=0.005))


def test_long_input_draws_an_overview_image_on_a_canvas(server, page):
    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(300)), heads=1)
    page.goto(f"{server.url}/Heatmap?{urlencode(spec.to_query())}")
    wait_for_app(page)
    notice = page.locator('[data-testid="stAlertContentInfo"]').first
    expect(notice).to_contain_text("300 tokens", timeout=UI_TIMEOUT)
    expect(notice).to_contain_text("150 × 150 blocks", timeout=UI_TIMEOUT)
    overview, zoom = page.locator(CHARTS).nth(0), page.locator(CHARTS).nth(1)
    canvas = overview.locator("canvas").first
    canvas.wait_for(timeout=UI_TIMEOUT)
    page.wait_for_function(f"() => ({PAINTED})(document.querySelectorAll('{CHARTS}')[0]"
                           "?.querySelector('canvas'))", timeout=UI_TIMEOUT)
    # The overview is three images of 150 x 150 blocks: hundreds of distinct colours (axes,
    # titles and legends alone draw a few dozen), so the images really were drawn.
    page.wait_for_function(f"""() => {{
      const c = document.querySelectorAll('{CHARTS}')[0]?.querySelector('canvas');
      if (!c) return false;
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      const seen = new Set();
      for (let i = 0; i < d.length; i += 4) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      return seen.size > 300;
    }}""", timeout=UI_TIMEOUT)
    # The zoom window below is drawn cell by cell, also on a canvas (its labels are checked
    # in tests/test_page_heatmap.py from the chart's spec).
    page.wait_for_function(f"() => ({PAINTED})(document.querySelectorAll('{CHARTS}')[1]"
                           "?.querySelector('canvas'))", timeout=UI_TIMEOUT)
    expect(zoom.locator("canvas")).to_have_count(1, timeout=UI_TIMEOUT)


# The bounding box (CSS pixels) of the first run of columns holding blue pixels, and of its
# rows: the scaled panel's image (the blues scheme has blue - red >= 35; the theme's blue-grey
# text has 21; the zoom outline is red; panels are 12 px apart).
PANEL_BOX = """(canvas) => {
  const w = canvas.width, h = canvas.height;
  const d = canvas.getContext('2d').getImageData(0, 0, w, h).data;
  const blue = (x, y) => { const i = 4 * (y * w + x); return d[i + 3] && d[i + 2] > d[i] + 30; };
  const column = (x) => { for (let y = 0; y < h; y++) if (blue(x, y)) return true; return false; };
  let x0 = 0;
  while (x0 < w && !column(x0)) x0++;
  let x1 = x0;
  while (x1 + 1 < w && column(x1 + 1)) x1++;
  let y0 = h, y1 = -1;
  for (let y = 0; y < h; y++) for (let x = x0; x <= x1; x++)
    if (blue(x, y)) { y0 = Math.min(y0, y); y1 = Math.max(y1, y); break; }
  const r = canvas.getBoundingClientRect();
  const s = r.width / w;
  return {left: r.left + x0 * s, top: r.top + y0 * s, width: (x1 - x0 + 1) * s,
          height: (y1 - y0 + 1) * s};
}"""


def test_dragging_a_box_on_the_overview_moves_the_zoom_window_there(server, page):
    n = 1000
    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(n)), heads=1)
    page.goto(f"{server.url}/Heatmap?{urlencode(spec.to_query())}")
    wait_for_app(page)
    canvas = f"document.querySelectorAll('{CHARTS}')[0]?.querySelector('canvas')"
    page.wait_for_function(f"() => ({PAINTED})({canvas})", timeout=UI_TIMEOUT)
    # The panel's image is data: Vega loads it after the first draw (axes and legends), so
    # wait until the scaled panel itself is on the canvas.
    page.wait_for_function(f"""() => {{
      const b = ({PANEL_BOX})({canvas});
      return Math.abs(b.width - 250) <= 3 && Math.abs(b.height - 250) <= 3;
    }}""", timeout=UI_TIMEOUT)
    box = page.evaluate(f"() => ({PANEL_BOX})({canvas})")
    assert box["width"] == pytest.approx(250, abs=3) and box["height"] == pytest.approx(250, abs=3), box

    def at(query: float, key: float) -> tuple[float, float]:
        return box["left"] + key / n * box["width"], box["top"] + query / n * box["height"]

    # Queries 600-640 x keys 400-440: 40 positions, so a 48 window centred on (620, 420).
    page.mouse.move(*at(600, 400))
    page.mouse.down()
    page.mouse.move(*at(640, 440), steps=8)
    page.mouse.up()
    title = page.get_by_role("heading", name="Zoom")
    page.wait_for_function("() => /queries 5\\d\\d/.test(document.body.innerText)",
                           timeout=UI_TIMEOUT)
    expect(title).to_have_text(re.compile(r"queries 5\d\d"), timeout=UI_TIMEOUT)
    q0, q1, k0, k1 = map(int, re.findall(r"\d+", title.inner_text()))
    assert q1 - q0 + 1 == k1 - k0 + 1 == 48                       # the window that holds the box
    assert abs(q0 - 596) <= 8 and abs(k0 - 396) <= 8              # centred on it (4 tokens a px)
    expect(page.get_by_role("spinbutton", name="First query position")) \
        .to_have_value(str(q0), timeout=UI_TIMEOUT)
    for param in (f"hm_q={q0}", f"hm_k={k0}", "hm_win=48"):
        page.wait_for_url(lambda url, p=param: p in url, timeout=UI_TIMEOUT)


def _query(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def test_a_head_change_redraws_the_chart_the_url_and_the_share_link(server, page):
    """The head picker lives in a fragment (only the heatmap section reruns); the chart is
    redrawn in place; the URL and the sidebar's share link, drawn outside it, still follow
    every change."""
    page.goto(f"{server.url}/Heatmap?{urlencode(SPEC.to_query())}")
    wait_for_app(page)
    printed = page.locator(CHARTS).first.locator("svg .mark-text.role-mark text")
    share = page.get_by_role("button", name="Share this view")
    code = page.locator('[data-testid="stPopoverBody"] [data-testid="stCode"]')
    weights = analyze(SPEC).scaled.weights                               # (heads, n, n)
    # Another head is other data under the same spec: the chart keeps its Vega view (the
    # same <svg> element, drawn again in place) instead of building a new one.
    expect(printed).to_have_count(3 * 25, timeout=UI_TIMEOUT)
    page.evaluate(f"() => {{ document.querySelector('{CHARTS} svg.marks').__kept = true; }}")
    for head in (1, 0, 1):
        picker = page.locator('[data-testid="stMain"]').get_by_role("combobox", name="Head")
        picker.click()
        page.get_by_role("option", name=f"Head {head}", exact=True).click()
        expect(picker).to_have_value(f"Head {head}", timeout=UI_TIMEOUT)
        eventually(page, lambda: [float(x) for x in printed.all_text_contents()[:25]]
                   == pytest.approx(weights[head].flatten().tolist(), abs=0.005))
        page.wait_for_url(lambda url: _query(url).get("hm_head") == [str(head)],
                          timeout=UI_TIMEOUT)
        wait_for_app(page)
        assert page.evaluate(f"() => document.querySelector('{CHARTS} svg.marks').__kept") is True
        share.click()
        # The link is the address bar's view: the same parameters, the head just chosen.
        eventually(page, lambda: _query(code.inner_text().strip()) == _query(page.url))
        assert _query(code.inner_text().strip())["hm_head"] == [str(head)]
        assert AttentionSpec.from_query({k: v[0] for k, v in _query(page.url).items()}) == SPEC
        page.keyboard.press("Escape")                                     # close the popover
        expect(code).to_have_count(0, timeout=UI_TIMEOUT)
