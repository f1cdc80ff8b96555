"""The Heatmap page in Chromium: deep links on a fresh server draw the heatmap with the
tokens from the URL as axis labels and the analysis' colours on its canvases; long inputs
draw an overview image and a zoom window; a box dragged on the overview moves the window."""
import re
from urllib.parse import parse_qs, urlencode, urlsplit

import numpy as np
import pytest
from playwright.sync_api import expect

from attention.analysis import analyze
from attention.charts.colors import colorize
from attention.i18n import translate
from attention.spec import AttentionSpec
from tests.conftest import UI_TIMEOUT, eventually, wait_for_app

pytestmark = pytest.mark.browser

SPEC = AttentionSpec(tokens=("zebra", "quokka", "zebra", "narwhal", "okapi"), heads=2, seed=3)
FIGURES = '[data-testid="stMain"] .ae-heatmap'    # the canvas heatmaps (attention/ui/canvas.js)

# True once figure i has painted its latest data (the component clears data-pending then).
DRAWN = f"""(i) => {{
  const root = document.querySelectorAll('{FIGURES}')[i];
  return !!root && !!root.dataset.drawn && !root.dataset.pending;
}}"""
# RGBA of panel `panel` of figure i at cells (row, col) of a rows x cols grid, read off-centre
# (the centre may carry a printed number).
PIXELS = f"""([i, panel, rows, cols, cells]) => {{
  const c = document.querySelectorAll('{FIGURES}')[i].querySelectorAll('canvas')[panel];
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  return cells.map(([r, k]) => {{
    const x = Math.floor((k + 0.2) / cols * c.width), y = Math.floor((r + 0.2) / rows * c.height);
    return Array.from(d.slice(4 * (y * c.width + x), 4 * (y * c.width + x) + 4));
  }});
}}"""


def wait_drawn(page, i: int = 0) -> None:
    page.wait_for_function(f"(i) => ({DRAWN})(i)", arg=i, timeout=UI_TIMEOUT)


def settled_box(page, locator, frames: int = 10) -> dict:
    """The element's box once the page around it has stopped moving: the same box over
    `frames` animation frames, no widget skeleton left (a control above it that draws late
    pushes it down after a first read)."""
    handle = page.wait_for_function("""([el, frames]) => {
      if (document.querySelector('[data-testid="stSkeleton"]')) { el.__boxes = []; return false; }
      const r = el.getBoundingClientRect(), key = [r.x, r.y, r.width, r.height].join();
      el.__boxes = [...(el.__boxes || []), key].slice(-frames);
      return el.__boxes.length === frames && el.__boxes.every((b) => b === key) && r.toJSON();
    }""", arg=[locator.element_handle(), frames], timeout=UI_TIMEOUT, polling="raf")
    return handle.json_value()


def downloaded_csv(page, button) -> tuple[str, list[dict]]:
    """(file name, rows) of the CSV a click on `button` downloads."""
    import csv
    import io

    with page.expect_download(timeout=UI_TIMEOUT) as got:
        button.click()
    text = got.value.path().read_text(encoding="utf-8-sig")
    return got.value.suggested_filename, list(csv.DictReader(io.StringIO(text)))


def scaled_colours(weights, unscaled) -> np.ndarray:
    """(n, n, 4) colours of the scaled panel: one scale for both weight panels."""
    top = max(float(weights.max()), float(unscaled.max()))
    return colorize(weights.numpy(), (0.0, top), "blues")


def assert_scaled_panel_shows(page, weights, unscaled) -> None:
    """The first figure's scaled panel has, cell by cell, the colour of these weights."""
    n = weights.shape[0]
    cells = [(r, k) for r in range(n) for k in range(n)]
    expected = scaled_colours(weights, unscaled)
    eventually(page, lambda: np.testing.assert_allclose(
        np.array(page.evaluate(PIXELS, [0, 0, n, n, cells])).reshape(n, n, 4), expected, atol=2))


def test_deep_link_on_a_fresh_server_draws_the_heatmap_with_url_tokens(fresh_server, page):
    page.goto(f"{fresh_server.url}/Heatmap?{urlencode({**SPEC.to_query(), 'hm_head': '1'})}")
    wait_for_app(page)
    wait_drawn(page)
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)
    figure = page.locator(FIGURES).first
    expect(figure.locator("canvas")).to_have_count(3)                  # scaled, unscaled, diff
    # The query axis and each panel's key axis read the URL's tokens in order: both "zebra"s
    # keep their own row and column.
    expect(figure.locator(".ae-ylabels .ae-label")).to_have_text(list(SPEC.tokens))
    keys = figure.locator(".ae-xlabels .ae-label")
    expect(keys).to_have_text(list(SPEC.tokens) * 3)
    expect(page.get_by_role("combobox", name="Head")).to_have_value("Head 1", timeout=UI_TIMEOUT)
    a = analyze(SPEC)
    assert_scaled_panel_shows(page, a.scaled.weights[1], a.unscaled.weights[1])  # hm_head=1
    # A cell's tooltip: its tokens, positions and both weights (query 0 x key 2).
    canvas = figure.locator("canvas").first
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 2.3 / 5, box["y"] + box["height"] * 0.3 / 5)
    tip = figure.locator(".ae-tooltip")
    expect(tip).to_be_visible(timeout=UI_TIMEOUT)
    text = tip.inner_text()
    assert text.count("zebra") == 2 and "Key position\n2" in text.replace("\t", "\n"), text
    assert f"{float(a.scaled.weights[1, 0, 2]):.4f}" in text
    assert f"{float(a.unscaled.weights[1, 0, 2]):.4f}" in text


def test_long_input_draws_an_overview_image_on_a_canvas(server, page):
    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(300)), heads=1)
    page.goto(f"{server.url}/Heatmap?{urlencode(spec.to_query())}")
    wait_for_app(page)
    notice = page.locator('[data-testid="stAlertContentInfo"]').first
    expect(notice).to_contain_text("300 tokens", timeout=UI_TIMEOUT)
    expect(notice).to_contain_text("150 × 150 blocks", timeout=UI_TIMEOUT)
    wait_drawn(page, 0)
    # The overview is three images of 150 x 150 blocks: hundreds of distinct colours on its
    # canvases, so the images really were drawn.
    # Read until painted: a fresh CI clone once read them blank just after data-drawn.
    colours = f"""() => {{
      const seen = new Set();
      for (const c of document.querySelectorAll('{FIGURES}')[0].querySelectorAll('canvas')) {{
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        for (let i = 0; i < d.length; i += 4) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      }}
      return seen.size;
    }}"""
    try:
        page.wait_for_function(f"() => ({colours})() > 300", timeout=UI_TIMEOUT, polling=200)
    except Exception:
        raise AssertionError(f"{page.evaluate(colours)} distinct colours on the overview")
    overview = page.locator(FIGURES).nth(0)
    expect(overview.locator(".ae-xlabels .ae-tick").first).to_have_text("0")
    # The zoom window below: every cell of queries 0-15 x keys 0-15, labelled with its tokens.
    wait_drawn(page, 1)
    zoom = page.locator(FIGURES).nth(1)
    expect(zoom.locator("canvas")).to_have_count(3)
    expect(zoom.locator(".ae-ylabels .ae-label")).to_have_text([f"w{i}" for i in range(16)])
    a = analyze(spec)
    cells = [(r, k) for r in range(16) for k in range(16)]
    top = max(float(a.scaled.weights[0, :16, :16].max()), float(a.unscaled.weights[0, :16, :16].max()))
    expected = colorize(a.scaled.weights[0, :16, :16].numpy(), (0.0, top), "blues")
    eventually(page, lambda: np.testing.assert_allclose(
        np.array(page.evaluate(PIXELS, [1, 0, 16, 16, cells])).reshape(16, 16, 4), expected,
        atol=2))
    # Another window of the same size: the same canvases (kept), new labels and colours.
    page.evaluate(f"() => {{ document.querySelectorAll('{FIGURES}')[1].querySelector('canvas')"
                  ".__kept = true; }")
    page.locator('[data-testid="stMain"]').get_by_role("button", name="Options").click()
    start = page.get_by_role("spinbutton", name="First query position")
    start.fill("32")
    start.press("Enter")
    expect(zoom.locator(".ae-ylabels .ae-label")).to_have_text([f"w{i}" for i in range(32, 48)],
                                                               timeout=UI_TIMEOUT)
    w, u = a.scaled.weights[0, 32:48, :16], a.unscaled.weights[0, 32:48, :16]
    expected = colorize(w.numpy(), (0.0, max(float(w.max()), float(u.max()))), "blues")
    eventually(page, lambda: np.testing.assert_allclose(
        np.array(page.evaluate(PIXELS, [1, 0, 16, 16, cells])).reshape(16, 16, 4), expected,
        atol=2))
    assert page.evaluate(f"() => document.querySelectorAll('{FIGURES}')[1]"
                         ".querySelector('canvas').__kept") is True
    # The zoom's own size buttons: 24 draws queries and keys 32-55, kept in the URL.
    sizes = zoom.get_by_role("radiogroup", name="Zoom window")
    expect(sizes.get_by_role("radio", name="16")).to_have_attribute("aria-checked", "true")
    sizes.get_by_role("radio", name="24").click()
    expect(zoom.locator(".ae-ylabels .ae-label")).to_have_text([f"w{i}" for i in range(32, 56)],
                                                               timeout=UI_TIMEOUT)
    page.wait_for_url(lambda url: "hm_win=24" in url, timeout=UI_TIMEOUT)
    expect(sizes.get_by_role("radio", name="24")).to_have_attribute("aria-checked", "true")
    expect(sizes.get_by_role("radio", name="16")).to_have_attribute("aria-checked", "false")


def test_dragging_a_box_on_the_overview_moves_the_zoom_window_there(server, page):
    n = 1000
    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(n)), heads=1)
    page.goto(f"{server.url}/Heatmap?{urlencode(spec.to_query())}")
    wait_for_app(page)
    wait_drawn(page, 0)
    box = settled_box(page, page.locator(FIGURES).first.locator("canvas").first)
    assert box["width"] == pytest.approx(250, abs=1) and box["height"] == pytest.approx(250, abs=1)

    def at(query: float, key: float) -> tuple[float, float]:
        return box["x"] + key / n * box["width"], box["y"] + query / n * box["height"]

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
    page.locator('[data-testid="stMain"]').get_by_role("button", name="Options").click()
    expect(page.get_by_role("spinbutton", name="First query position")) \
        .to_have_value(str(q0), timeout=UI_TIMEOUT)
    for param in (f"hm_q={q0}", f"hm_k={k0}", "hm_win=48"):
        page.wait_for_url(lambda url, p=param: p in url, timeout=UI_TIMEOUT)
    # The zoom window below now labels those positions' tokens (every other one at 48).
    zoom = page.locator(FIGURES).nth(1)
    expect(zoom.locator(".ae-ylabels .ae-label").first).to_have_text(f"w{q0}", timeout=UI_TIMEOUT)
    expect(zoom.get_by_role("radio", name="48")).to_have_attribute("aria-checked", "true")


def _query(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def test_a_head_change_redraws_the_chart_the_url_and_the_share_link(server, page):
    """The head picker lives in a fragment (only the heatmap section reruns); the chart is
    redrawn in place; the URL and the sidebar's share link, drawn outside it, still follow
    every change."""
    page.goto(f"{server.url}/Heatmap?{urlencode(SPEC.to_query())}")
    wait_for_app(page)
    share = page.get_by_role("button", name="Share this view")
    code = page.locator('[data-testid="stPopoverBody"] [data-testid="stCode"]')
    a = analyze(SPEC)
    # Another head is other data in the same layout: the figure keeps its elements (the same
    # <canvas>, painted again) instead of building new ones.
    wait_drawn(page)
    page.evaluate(f"() => {{ document.querySelector('{FIGURES} canvas').__kept = true; }}")
    for head in (1, 0, 1):
        picker = page.locator('[data-testid="stMain"]').get_by_role("combobox", name="Head")
        picker.click()
        page.get_by_role("option", name=f"Head {head}", exact=True).click()
        expect(picker).to_have_value(f"Head {head}", timeout=UI_TIMEOUT)
        assert_scaled_panel_shows(page, a.scaled.weights[head], a.unscaled.weights[head])
        page.wait_for_url(lambda url: _query(url).get("hm_head") == [str(head)],
                          timeout=UI_TIMEOUT)
        wait_for_app(page)
        assert page.evaluate(f"() => document.querySelector('{FIGURES} canvas').__kept") is True
        share.click()
        # The link is the address bar's view: the same parameters, the head just chosen.
        eventually(page, lambda: _query(code.inner_text().strip()) == _query(page.url))
        assert _query(code.inner_text().strip())["hm_head"] == [str(head)]
        assert AttentionSpec.from_query({k: v[0] for k, v in _query(page.url).items()}) == SPEC
        page.keyboard.press("Escape")                                     # close the popover
        expect(code).to_have_count(0, timeout=UI_TIMEOUT)


def test_following_one_query_of_a_long_input_draws_both_lines_and_answers_the_pointer(server,
                                                                                      page):
    tokens = [f"w{i}" for i in range(300)]
    tokens[9] = "<b>w9</b>"                     # the query, named in the figure's title
    spec = AttentionSpec(tokens=tuple(tokens), heads=1, seed=6)
    view = {**spec.to_query(), "hm_view": "row", "hm_row": "9"}
    page.goto(f"{server.url}/Heatmap?{urlencode(view)}")
    wait_for_app(page)
    wait_drawn(page)
    title = page.locator(f"{FIGURES} .ae-row-title")
    lines = translate("en", "heatmap.row_lines", n="300")
    expect(title).to_have_text(f"Query 9 · <b>w9</b> · {lines}", timeout=UI_TIMEOUT)  # not HTML
    assert page.locator(f"{FIGURES} b").count() == 0
    # Both series are on the canvas in their own colours (scaled #2b6cb0, unscaled #d1495b).
    seen = page.evaluate(f"""() => {{
      const c = document.querySelector('{FIGURES} canvas');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let blue = 0, red = 0;
      for (let i = 0; i < d.length; i += 4) {{
        if (d[i + 3] < 200) continue;
        if (d[i + 2] > 150 && d[i] < 80) blue++;
        if (d[i] > 180 && d[i + 2] < 120) red++;
      }}
      return [blue, red];
    }}""")
    assert seen[0] > 100 and seen[1] > 100, seen
    # As wide as its column less the axis (80 px), measured after layout, not while built;
    # a narrower window rebuilds it narrower, backed at the screen's pixel ratio.
    width = f"""() => {{
      const root = document.querySelector('{FIGURES}'), c = root.querySelector('canvas');
      return [root.parentElement.clientWidth - 80, c.getBoundingClientRect().width,
              c.width / window.devicePixelRatio];
    }}"""
    eventually(page, lambda: (lambda w: abs(w[0] - w[1]) <= 1 and abs(w[1] - w[2]) <= 1)(
        page.evaluate(width)))
    wide = page.evaluate(width)[1]
    page.set_viewport_size({"width": 1000, "height": 1000})
    eventually(page, lambda: (lambda w: abs(w[0] - w[1]) <= 1 and w[1] < wide - 100)(
        page.evaluate(width)))
    page.set_viewport_size({"width": 1400, "height": 1000})
    eventually(page, lambda: abs(page.evaluate(width)[1] - wide) <= 1)
    # The key under the pointer: its token and both weights, as the analysis has them.
    a = analyze(spec)
    key = int(a.unscaled.weights[0, 9].argmax())
    box = page.locator(FIGURES).first.locator("canvas").bounding_box()
    page.mouse.move(box["x"] + box["width"] * (key + 0.5) / spec.n, box["y"] + box["height"] / 2)
    tip = page.locator(f"{FIGURES} .ae-tooltip")
    expect(tip).to_be_visible(timeout=UI_TIMEOUT)
    expect(tip).to_contain_text(f"w{key}")
    text = tip.inner_text()
    assert f"{float(a.scaled.weights[0, 9, key]):.4f}" in text
    assert f"{float(a.unscaled.weights[0, 9, key]):.4f}" in text


def test_the_download_menu_opens_with_its_buttons_and_gives_the_heads_csv_and_png(server,
                                                                                  page):
    """A chart's Download menu is drawn without its buttons until it opens (its opening
    reruns the heatmap section); then its CSV holds the chosen head's weights, as analyze
    computes them, and its PNG is an image of the chart."""
    page.goto(f"{server.url}/Heatmap?{urlencode({**SPEC.to_query(), 'hm_head': '1'})}")
    wait_for_app(page)
    wait_drawn(page)
    menu = page.locator('[data-testid="stMain"]').get_by_role("button", name="Download")
    expect(menu).to_have_count(1, timeout=UI_TIMEOUT)
    menu.click()
    body = page.locator('[data-testid="stPopoverBody"]')
    expect(body.get_by_role("button", name="PNG")).to_be_visible(timeout=UI_TIMEOUT)
    _, rows = downloaded_csv(page, body.get_by_role("button", name="CSV"))
    weights = analyze(SPEC).scaled.weights[1]                                   # (5, 5)
    assert len(rows) == 25 and {r["head"] for r in rows} == {"1"}
    for r in rows:
        assert float(r["weight"]) == pytest.approx(
            weights[int(r["query_pos"]), int(r["key_pos"])].item(), abs=1e-5)
    with page.expect_download(timeout=UI_TIMEOUT) as got:
        body.get_by_role("button", name="PNG").click()
    assert got.value.suggested_filename == "hm_attention_head1_q0-4_k0-4.png"
    png = got.value.path().read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5_000
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)


def test_a_long_inputs_one_download_menu_gives_the_overview_and_the_window(server, page):
    """Past DETAIL_MAX tokens the overview and the zoom window share one Download menu, each
    chart's buttons under its heading: the window's CSV holds that head's weights in that
    window, as analyze computes them; the overview's holds every block of the head."""
    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(100)), heads=2, seed=3)
    view = {**spec.to_query(), "hm_head": "1", "hm_q": "32", "hm_k": "48"}
    page.goto(f"{server.url}/Heatmap?{urlencode(view)}")
    wait_for_app(page)
    wait_drawn(page, 1)
    menu = page.locator('[data-testid="stMain"]').get_by_role("button", name="Download")
    expect(menu).to_have_count(1, timeout=UI_TIMEOUT)
    menu.click()
    body = page.locator('[data-testid="stPopoverBody"]')
    for heading in ("heatmap.download_overview", "heatmap.download_window"):
        expect(body.get_by_text(translate("en", heading), exact=True)).to_be_visible(
            timeout=UI_TIMEOUT)
    csvs = body.get_by_role("button", name="CSV")
    expect(csvs).to_have_count(2, timeout=UI_TIMEOUT)
    name, window = downloaded_csv(page, csvs.nth(1))
    weights = analyze(spec).scaled.weights[1]                                  # (100, 100)
    assert name == "hm_attention_head1_q32-47_k48-63.csv" and len(window) == 16 * 16
    assert {int(r["query_pos"]) for r in window} == set(range(32, 48))
    for r in window:
        assert float(r["weight"]) == pytest.approx(
            weights[int(r["query_pos"]), int(r["key_pos"])].item(), abs=1e-5)
    name, overview = downloaded_csv(page, csvs.nth(0))
    assert name == "hm_overview_head1_max.csv" and len(overview) == 100 * 100   # a block a cell
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)


def test_all_heads_frames_the_picked_head_and_a_view_change_keeps_the_bars_widgets(server,
                                                                                 page):
    """The section's bar (view, head, Options, Download) is the same in every view: a view
    change keeps its elements (the same DOM nodes, not mounted again; Options too in the
    one-row view, which has nothing to set), and All heads frames the head picked there,
    following the picker."""
    spec = AttentionSpec(tokens=tuple(f"w{i}" for i in range(300)), heads=3, seed=2)
    page.goto(f"{server.url}/Heatmap?{urlencode({**spec.to_query(), 'hm_head': '1'})}")
    wait_for_app(page)
    wait_drawn(page)
    main = page.locator('[data-testid="stMain"]')
    picker = main.get_by_role("combobox", name="Head")
    menu = main.get_by_role("button", name="Download")
    options = main.get_by_role("button", name="Options")
    kept = (picker, menu, options)
    for node in kept:
        node.evaluate("(el) => { el.__kept = true; }")
    main.get_by_role("radio", name="All heads", exact=True).click()
    framed = page.locator(f"{FIGURES} .ae-current .ae-title")
    expect(framed).to_have_text("Head 1 (picked)", timeout=UI_TIMEOUT)
    expect(page.locator(f"{FIGURES} .ae-panel")).to_have_count(3)
    wait_for_app(page)
    assert all(node.evaluate("(el) => el.__kept") is True for node in kept)
    first = page.locator(f"{FIGURES} .ae-panel canvas").first
    first.evaluate("(el) => { el.__kept = true; }")
    picker.click()
    page.get_by_role("option", name="Head 2", exact=True).click()
    expect(framed).to_have_text("Head 2 (picked)", timeout=UI_TIMEOUT)
    expect(page.locator(f"{FIGURES} .ae-current")).to_have_count(1)
    frame = page.locator(f"{FIGURES} .ae-current .ae-plot").evaluate(
        "(el) => getComputedStyle(el).outlineStyle")
    assert frame == "solid"
    assert first.evaluate("(el) => el.__kept") is True       # another head: the same elements
    # The value every head shows: the figure's own buttons, kept in the URL.
    shown = page.locator(FIGURES).get_by_role("radiogroup", name="Show")
    expect(shown.get_by_role("radio", name=re.compile("^Scaled"))) \
        .to_have_attribute("aria-checked", "true")
    shown.get_by_role("radio", name=re.compile("^Difference")).click()
    page.wait_for_url(lambda url: "hm_grid=difference" in url, timeout=UI_TIMEOUT)
    expect(page.locator(f"{FIGURES} .ae-legend-title")).to_have_text(
        re.compile("scaled . unscaled", re.I), timeout=UI_TIMEOUT)
    expect(framed).to_have_text("Head 2 (picked)")
    main.get_by_role("radio", name="Scaled vs unscaled", exact=True).click()
    expect(page.locator(f"{FIGURES} .ae-current")).to_have_count(0, timeout=UI_TIMEOUT)
    wait_for_app(page)
    expect(picker).to_have_value("Head 2")
    main.get_by_role("radio", name="Follow one query", exact=True).click()
    expect(main.get_by_test_id("stNumberInput")).to_have_count(1, timeout=UI_TIMEOUT)
    wait_for_app(page)
    expect(options).to_be_enabled()
    assert [node.evaluate("(el) => el.__kept") for node in kept] == [True] * 3
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)
