"""The Model heads page in Chromium: a deep link on a fresh server draws the grid, a click on
a head in the grid picks it (URL and pickers follow), and the other parts open on a click."""
from __future__ import annotations

import re
from urllib.parse import parse_qs, urlencode, urlparse

import pytest
from playwright.sync_api import expect

from attention.i18n import translate
from attention.spec import AttentionSpec
from bench.pages import choose
from tests.conftest import wait_for_app

pytestmark = pytest.mark.browser

SPEC = AttentionSpec(tokens=("the", "cat", "sat", "on", "the", "mat", "."), source="pretrained")
LOAD = 180_000   # ms: a fresh server loads torch and the model on first use


def settle(page) -> None:
    page.wait_for_function(
        """() => !document.querySelector('[data-testid="stStatusWidget"]')""", timeout=LOAD)
    wait_for_app(page, timeout=LOAD)


def test_deep_link_grid_table_and_click_to_pick(fresh_server, page):
    page.goto(f"{fresh_server.url}/Model_heads?{urlencode(SPEC.to_query())}&mlayer=1&mhead=3")
    page.wait_for_selector('[data-testid="stMain"] .ae-heatmap', timeout=LOAD)
    settle(page)
    expect(page.locator("h1").first).to_have_text("Model heads", timeout=LOAD)
    expect(page.locator("h3", has_text="Layer 1, head 3:")).to_be_visible(timeout=LOAD)
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)
    # a link made before the mh_ names (mlayer, mhead): same view, the address bar renamed
    page.wait_for_url(lambda url: (lambda q: (q.get("mh_layer"), q.get("mh_head"), "mlayer" in q)
                                   )(parse_qs(urlparse(url).query)) == (["1"], ["3"], False),
                      timeout=LOAD)
    # the grid: the first canvas figure, a head 5 px a block (9 pieces: 9 blocks and a gap)
    figure = page.locator('[data-testid="stMain"] .ae-heatmap').first
    page.wait_for_function("""() => {
        const root = document.querySelector('[data-testid="stMain"] .ae-heatmap');
        return root && root.dataset.drawn && !root.dataset.pending;
    }""", timeout=LOAD)
    grid = figure.locator("canvas").first
    box = grid.bounding_box()
    assert box["width"] == pytest.approx(12 * 10 * 5, abs=1)
    assert box["height"] == pytest.approx(6 * 10 * 5, abs=1)
    expect(page.locator('[data-testid="stDataFrame"]')).to_have_count(0)   # another tab's
    # hover a head, read its tooltip, click it: the pickers and the URL follow
    x, y = box["x"] + box["width"] * 0.7, box["y"] + box["height"] * 0.6
    page.mouse.move(x, y)
    tip = figure.locator(".ae-tooltip")
    expect(tip).to_be_visible(timeout=LOAD)
    expect(tip).to_contain_text(re.compile(r"Layer\s*\d+[\s\S]*Head\s*\d+"), timeout=LOAD)
    text = tip.inner_text()
    layer = int(re.search(r"Layer\s+(\d+)", text).group(1))
    head = int(re.search(r"Head\s+(\d+)", text).group(1))
    assert (layer, head) != (1, 3)
    page.mouse.click(x, y)
    expect(page.locator("h3", has_text=f"Layer {layer}, head {head}:")).to_be_visible(timeout=LOAD)
    settle(page)
    page.wait_for_url(lambda url: (parse_qs(urlparse(url).query).get("mh_layer"),
                                   parse_qs(urlparse(url).query).get("mh_head"))
                      == ([str(layer)], [str(head)]), timeout=LOAD)
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)
    # the per-head table, on its own tab: 72 rows (the grid reports its row count to
    # assistive tech); the address bar names the tab and keeps the head
    page.get_by_role("radio", name="Every head's statistics", exact=True).click()
    table = page.locator('[data-testid="stDataFrame"]').first
    expect(table).to_be_visible(timeout=LOAD)
    expect(table.locator('[role="grid"]')).to_have_attribute("aria-rowcount", "73",  # + header
                                                             timeout=LOAD)
    page.wait_for_url(lambda url: (lambda q: (q.get("mh_tab"), q.get("mh_head")))(
        parse_qs(urlparse(url).query)) == (["table"], [str(head)]), timeout=LOAD)
    expect(page.locator('[data-testid="stMain"] .ae-heatmap')).to_have_count(0)
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)


def test_a_link_with_your_own_model_and_interventions_reopens_the_view(local_server, page,
                                                                         tmp_path):
    """A link naming a tiny GPT-2 folder, a head and an ablation, opened as a fresh server's
    first request: the sidebar shows the folder, the page the intervention's numbers (a link
    with interventions and no tab opens on them) and, on the heads tab, the head; the
    address bar keeps model and iv."""
    from tests.tiny_models import build

    folder = build(tmp_path, ["gpt2"])["gpt2"]
    spec = AttentionSpec(tokens=("the", "cat", "sat", "on", "the", "mat"), source="pretrained",
                         model=str(folder), layer=1)
    page.goto(f"{local_server.url}/Model_heads?{urlencode(spec.to_query())}"
              f"&mh_layer=1&mh_head=2&mh_iv=ablate%3A1%3A2")
    page.wait_for_selector('[data-testid="stMetric"]', timeout=LOAD)
    settle(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0
    box = page.locator('[data-testid="stSidebar"]').get_by_label(
        "Folder path or Hugging Face id", exact=True).and_(page.get_by_test_id("stTextInputField"))
    expect(box).to_have_value(str(folder))
    kl = translate("en", "model.iv_kl")                 # the intervention's output metric
    expect(page.locator('[data-testid="stMetricLabel"]', has_text=kl)).to_be_visible(timeout=LOAD)
    page.wait_for_function(
        "() => new URLSearchParams(location.search).get('mh_iv') === 'ablate:1:2'", timeout=LOAD)
    page.get_by_role("radio", name="Model heads", exact=True).click()
    expect(page.locator("h3", has_text="All 8 heads")).to_be_visible(timeout=LOAD)
    expect(page.locator("h3", has_text="Layer 1, head 2:")).to_be_visible(timeout=LOAD)
    settle(page)
    page.wait_for_function(
        "() => new URLSearchParams(location.search).get('mh_tab') === 'heads'", timeout=LOAD)
    query = parse_qs(urlparse(page.url).query)
    assert query["model"] == [str(folder)] and query["layer"] == ["1"]
    assert query["mh_layer"] == ["1"] and query["mh_head"] == ["2"]
    assert query["mh_iv"] == ["ablate:1:2"]                  # kept for the interventions tab


def test_uploaded_q_and_k_stay_when_another_part_is_opened(server, page, tmp_path):
    """Only the open part is drawn, and a file uploader that is not drawn forgets its file:
    after a visit to another part, the upload part draws the same head from the files it
    kept, names them as text, and "Forget it" drops one."""
    from attention.files import upload
    from attention.analysis import analyze

    toy = AttentionSpec(tokens=("a", "b", "a", "c", "d"), d_model=16, d_k=8, heads=2, seed=3)
    ref = analyze(toy)
    for name, tensor in (("q", ref.q), ("k", ref.k)):
        (tmp_path / f"{name}.npy").write_bytes(upload.to_npy(tensor))
    page.goto(f"{server.url}/Model_heads?{urlencode(toy.to_query())}&mh_tab=upload")
    wait_for_app(page)
    main = page.locator('[data-testid="stMain"]')
    # one file at a time: the Q upload's rerun lands before K is set (set at once, on a slow
    # machine the K upload's rerun once came first and the Q uploader was drawn empty). Each
    # file goes to the input inside its own uploader's region: the n-th input of the page
    # once was K's, while Q's uploader was being drawn again (a fresh clone's CI)
    for name, region in (("q", "Q (queries)"), ("k", "K (keys)")):
        box = main.get_by_role("region", name=region)
        box.locator('input[type="file"]').set_input_files(str(tmp_path / f"{name}.npy"))
        expect(box.get_by_text(f"{name}.npy")).to_be_visible(timeout=LOAD)
        wait_for_app(page)
    expect(main.get_by_text("2 head(s), 5 tokens, d_k = 8")).to_be_visible(timeout=LOAD)
    expect(main.locator(".ae-heatmap canvas").first).to_be_visible(timeout=LOAD)
    main.get_by_role("radio", name="Interventions", exact=True).click()
    expect(main.locator('input[type="file"]')).to_have_count(0, timeout=LOAD)
    main.get_by_role("radio", name="Bring your own", exact=True).click()
    expect(main.get_by_text("Kept: q.npy")).to_be_visible(timeout=LOAD)
    expect(main.get_by_text("Kept: k.npy")).to_be_visible()
    expect(main.get_by_text("2 head(s), 5 tokens, d_k = 8")).to_be_visible(timeout=LOAD)
    expect(main.locator(".ae-heatmap canvas").first).to_be_visible(timeout=LOAD)
    main.get_by_role("button", name="Forget it").first.click()
    expect(main.get_by_text("Kept: q.npy")).to_have_count(0, timeout=LOAD)
    expect(main.get_by_text("Upload Q and K to see their attention.", exact=False)).to_be_visible(
        timeout=LOAD)
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)


DRAWN = """() => [...document.querySelectorAll('[data-testid="stMain"] .ae-heatmap')].map(
    root => ({label: [...root.querySelectorAll('canvas')].map(c => c.getAttribute('aria-label'))
                      .join('|'),
              drawn: root.dataset.drawn || null, pending: !!root.dataset.pending}))"""


def test_a_head_click_repaints_the_heads_figures_and_keeps_the_layers_rollout(server, page):
    """A head click redraws the head's figures (their draw count, attention/ui/canvas.js's
    data-drawn, grows) and not the layer's rollout: Streamlit does not run the component
    again for a figure sent again unchanged, so the click costs the browser no rollout."""
    page.goto(f"{server.url}/Model_heads?{urlencode(SPEC.to_query())}&mh_layer=1&mh_head=3")
    expect(page.locator("h3", has_text="Layer 1, head 3:")).to_be_visible(timeout=LOAD)
    settle(page)
    page.wait_for_function(f"() => ({DRAWN})().every(f => f.drawn && !f.pending)", timeout=LOAD)
    before = page.evaluate(DRAWN)
    rollout = [i for i, f in enumerate(before) if f["label"] == "Rollout"]
    assert len(rollout) == 1 and len(before) >= 4
    choose(page, "Head", "4").click()          # as bench.pages clicks a picker
    # the head's heading is drawn by its figure (canvas.figure_view), not sent as a subheader
    expect(page.locator(".ae-heatmap h3.ae-heading", has_text="Layer 1, head 4:")) \
        .to_be_visible(timeout=LOAD)
    expect(page.locator('[data-testid="stHeading"]', has_text="Layer 1, head")).to_have_count(0)
    settle(page)
    # wait for what is checked, read in the same poll (a read after the wait can meet a figure
    # between two draws): every figure but the rollout drawn again, none pending
    others = [i for i in range(len(before)) if i not in rollout]
    after = page.wait_for_function(
        f"""([before, others]) => {{
            const now = ({DRAWN})();
            return now.length === before.length && now.every(f => f.drawn && !f.pending)
                && others.every(i => +now[i].drawn > +before[i].drawn) && now;
        }}""", arg=[before, others], timeout=LOAD).json_value()
    assert [f["label"] for f in after] == [f["label"] for f in before]
    for i in rollout:
        assert after[i]["drawn"] == before[i]["drawn"]   # the same rollout: not drawn again
