"""Hostile tokens in a real browser: an <img onerror> tag, a <script> tag, a javascript:
Markdown link, Markdown emphasis, LaTeX and a U+2028 line separator stay literal text in the
sidebar, axis labels (Vega's and the canvas heatmap's), tooltips and page text on every page, and nothing executes (no
window.__xss, no dialog, no <img src=x>, no javascript: link, no <strong>bold</strong>).

Each page is opened by a deep link carrying the hostile spec on a freshly started server that
has not yet served the root page (the root page is opened last), and must reproduce the view:
its heading, the sidebar's tokens and numbers, the URL's spec. tests/test_browser_app.py covers
plain deep links; these add the hostile tokens and what each page draws from them.
"""
from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from playwright.sync_api import expect

from attention.charts.heatmap import LABEL_CHARS
from attention.i18n import translate
from attention.spec import AttentionSpec
from attention.text.tokens import tokens_to_text
from attention.ui.pages import url_path
from tests.conftest import UI_TIMEOUT, eventually, serving, show_toy_settings, wait_for_app

pytestmark = pytest.mark.browser

IMG = "<img src=x onerror=window.__xss=1>"
LINK = "[a](javascript:alert(1))"
HOSTILE = (IMG, LINK, "**bold**", "<script>window.__xss=2</script>", "$x$", "u\u2028v",
           "the", "the")
SPEC = AttentionSpec(tokens=HOSTILE, heads=2, d_k=8, seed=0, temperature=0.9)
# path -> heading; the root (Input) page last, so every other deep link hits a server that has
# never run app.py (docs/architecture.md, "A view is a spec").
TITLES = ("nav.heatmap", "nav.scores", "nav.model", "nav.sharper", "nav.input")
PAGES = {url_path(key): translate("en", key) for key in TITLES}   # from the page registry
TRAINING_TIMEOUT = 300_000   # ms: a cold server trains the Is-sharper-better heads first
CHARTS = '[data-testid="stMain"] [data-testid="stVegaLiteChart"]'
FIGURES = '[data-testid="stMain"] .ae-heatmap'   # canvas heatmaps (attention/ui/canvas.js)
SIDEBAR_NUMBERS = '[data-testid="stSidebar"] input[type="number"]'

# Elements that would exist only if user text had become markup.
INJECTED = """() => {
  const all = [...document.querySelectorAll('*')];
  const exact = (sel, text) => [...document.querySelectorAll(sel)]
      .filter(e => e.textContent.trim() === text).length;
  return {
    img: document.querySelectorAll('img[src="x"], img[onerror]').length,
    jsLinks: [...document.querySelectorAll('a[href]')]
        .filter(a => a.getAttribute('href').trim().toLowerCase().startsWith('javascript')).length,
    scripts: [...document.querySelectorAll('script')]
        .filter(s => s.textContent.includes('__xss')).length,
    handlers: all.filter(e => [...e.attributes].some(a => a.name.startsWith('on')
        && a.value.includes('__xss'))).length,
    bold: exact('strong, b, em', 'bold'),
    math: exact('annotation', 'x'),
    xss: typeof window.__xss,
  };
}"""
INERT = {"img": 0, "jsLinks": 0, "scripts": 0, "handlers": 0, "bold": 0, "math": 0,
         "xss": "undefined"}


def clip(token: str) -> str:
    """The heatmap's axis label for a token (cut to LABEL_CHARS)."""
    return token if len(token) <= LABEL_CHARS else token[: LABEL_CHARS - 1] + "…"


@pytest.fixture(scope="module")
def cold_server():
    """One server for this module, started fresh: the deep links below are its first visits."""
    yield from serving()


@pytest.fixture
def guarded(chromium):
    """A page in a new context that records (and dismisses) every dialog."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.dialogs = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    yield page
    context.close()


def assert_inert(page) -> None:
    """Called once the page has drawn what it checks: nothing became markup or ran."""
    assert page.evaluate(INJECTED) == INERT
    assert page.dialogs == []
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)


def assert_view(page, path: str, spec: AttentionSpec) -> None:
    """The page reproduces the spec: heading, sidebar tokens and numbers, the URL."""
    expect(page.locator("h1").first).to_have_text(PAGES[path], timeout=UI_TIMEOUT)
    box = page.locator('[data-testid="stSidebar"] textarea').first
    expect(box).to_have_value(tokens_to_text(spec.tokens), timeout=UI_TIMEOUT)
    show_toy_settings(page, path)
    # The number inputs are drawn after the token box (skeletons first): wait for each value.
    numbers = page.locator(SIDEBAR_NUMBERS)
    for i, value in enumerate((spec.d_model, spec.d_k, spec.heads, spec.seed)):
        expect(numbers.nth(i)).to_have_value(str(value), timeout=UI_TIMEOUT)
    page.wait_for_url(lambda url: AttentionSpec.from_query(dict(parse_qsl(urlsplit(url).query)))
                      == spec, timeout=UI_TIMEOUT)


def tooltip_of(page, mark, shows: str) -> tuple[str, str]:
    """(text, html) of the Vega tooltip over a mark (hovered off-centre: cells print numbers),
    once it shows `shows` (a previous mark's tooltip may still be up)."""
    mark.scroll_into_view_if_needed()
    mark.hover(position={"x": 2, "y": 2}, force=True)
    tip = page.locator("#vg-tooltip-element")
    expect(tip).to_be_visible(timeout=UI_TIMEOUT)
    expect(tip).to_contain_text(shows, timeout=UI_TIMEOUT)
    return tip.inner_text(), tip.inner_html()


def check_heatmap(page) -> None:
    figure = page.locator(FIGURES).first
    expect(figure.locator("canvas")).to_have_count(3, timeout=UI_TIMEOUT)
    labels = figure.locator(".ae-ylabels .ae-label")                 # query axis, in order
    eventually(page, lambda: labels.all_text_contents() == [clip(tok) for tok in HOSTILE])
    canvas = figure.locator("canvas").first
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    tip = figure.locator(".ae-tooltip")
    for pos, token in ((1, LINK), (0, IMG)):                           # diagonal cells
        page.mouse.move(box["x"] + box["width"] * (pos + 0.3) / SPEC.n,
                        box["y"] + box["height"] * (pos + 0.3) / SPEC.n)
        expect(tip).to_be_visible(timeout=UI_TIMEOUT)
        expect(tip).to_contain_text(token, timeout=UI_TIMEOUT)
        assert tip.inner_text().count(token) == 2                      # query and key token
    html = tip.inner_html()
    assert "<img" not in html and "&lt;img" in html                   # escaped, not a tag


def check_scores(page) -> None:
    # one figure at a time: the row metrics per query are a click on their Figure button
    page.locator('[data-testid="stMain"] [data-testid="stButtonGroup"] button',
                 has_text=translate("en", "scores.figure_rows")).click()
    page.wait_for_url(lambda url: "sc_figure=rows" in url, timeout=UI_TIMEOUT)
    expect(page.locator(CHARTS)).to_have_count(4, timeout=UI_TIMEOUT)   # one panel a metric
    rows = page.locator(CHARTS).nth(0)
    rows.scroll_into_view_if_needed()
    labels = rows.locator("svg .role-axis-label text")
    expect(labels.first).to_be_attached(timeout=UI_TIMEOUT)

    def every_token_labelled():
        texts = labels.all_text_contents()
        for pos, token in enumerate(HOSTILE):
            shown = f"{token} ·{pos}"
            # Vega truncates long labels with an ellipsis; the start is the literal token.
            assert any(t == shown or (t.endswith("…") and shown.startswith(t[:-1]))
                       for t in texts), (shown, texts[:12])

    eventually(page, every_token_labelled)
    point = rows.locator("svg .mark-symbol.role-mark path").first
    text, html = tooltip_of(page, point, IMG)
    assert IMG in text and "<img" not in html


def check_model(page) -> None:
    """The pieces as plain text, and a piece as the value norms' label under its bar."""
    from attention.config import BUNDLED
    from attention.models.loading import load_model
    from attention.charts.heatmap import clip_label

    ids = load_model(BUNDLED).tokenizer(" ".join(HOSTILE))["input_ids"]
    pieces = load_model(BUNDLED).tokenizer.convert_ids_to_tokens(ids)
    code = page.locator('[data-testid="stMain"] [data-testid="stText"]').first
    eventually(page, lambda: code.inner_text().strip() == " ".join(pieces))  # pieces, as text
    labels = page.locator(f"{FIGURES} .ae-xlabels .ae-label")        # the canvas figures'
    eventually(page, lambda: f"{clip_label(pieces[1])} ·1" in labels.all_text_contents())


def check_sharper(page) -> None:
    page.wait_for_function(
        # the toy section's five charts (the real models' section below adds its own)
        """() => document.querySelectorAll('[data-testid="stVegaLiteChart"]').length >= 5""",
        timeout=TRAINING_TIMEOUT)


def check_input(page) -> None:
    values = page.locator('[data-testid="stMetricValue"]')
    expect(values.nth(0)).to_have_text(str(SPEC.n), timeout=UI_TIMEOUT)
    expect(values.nth(1)).to_have_text(str(len(set(HOSTILE))), timeout=UI_TIMEOUT)


CHECKS = {url_path(key): check for key, check in zip(TITLES, (
    check_heatmap, check_scores, check_model, check_sharper, check_input))}


@pytest.mark.parametrize("path", list(PAGES))
def test_deep_link_with_hostile_tokens_is_inert_and_reproduces_the_view(cold_server, guarded,
                                                                         path):
    guarded.goto(f"{cold_server.url}/{path}?{urlencode(SPEC.to_query())}")
    wait_for_app(guarded, timeout=TRAINING_TIMEOUT)
    assert_view(guarded, path, SPEC)
    CHECKS[path](guarded)
    assert_inert(guarded)


def test_typed_hostile_tokens_stay_text(server, guarded):
    """The same tokens typed into the sidebar (the browser's own text, not a URL)."""
    guarded.goto(f"{server.url}/{url_path('nav.heatmap')}")
    wait_for_app(guarded)
    box = guarded.locator('[data-testid="stSidebar"] textarea').first
    box.fill(tokens_to_text(HOSTILE))
    box.press("Control+Enter")
    wait_for_app(guarded)
    expect(guarded.locator(f"{FIGURES} .ae-ylabels .ae-label").first) \
        .to_have_text(clip(IMG), timeout=UI_TIMEOUT)
    check_heatmap(guarded)
    guarded.wait_for_url(
        lambda url: AttentionSpec.from_query(dict(parse_qsl(urlsplit(url).query))).tokens
        == HOSTILE, timeout=UI_TIMEOUT)
    assert_inert(guarded)


@pytest.fixture
def deployer_server(monkeypatch):
    """A fresh server started as a deployer starts one: none of the policy's variables set."""
    from attention import config

    for name in (config.ENV_DOWNLOADS, config.ENV_MAX_PARAMS, config.ENV_ALLOWED,
                 config.ENV_LOCAL, config.ENV_MODEL_MEMORY, config.ENV_RESULTS):
        monkeypatch.delenv(name, raising=False)
    yield from serving()


def test_deep_link_to_proc_self_tells_nothing_of_the_disk(deployer_server, guarded):
    """`?source=pretrained&model=/proc/self` as a fresh server's first visit: the one sentence
    of a refused source, quoting '/proc/self' (never /proc/<pid>, the home directory or the
    server's folders), and the page keeps working."""
    import os
    import re
    from pathlib import Path

    from attention import config
    from attention.errors import UserError

    guarded.goto(f"{deployer_server.url}/{url_path('nav.model')}?source=pretrained&tokens=the+cat"
                 "&model=%2Fproc%2Fself")
    wait_for_app(guarded)
    sentence = str(UserError("model.not_allowed", source="/proc/self",
                             allowed=", ".join(config.BUNDLED_SOURCES), env=config.ENV_LOCAL))
    alert = guarded.locator('[data-testid="stMain"] [data-testid="stAlertContentError"]')
    expect(alert).to_have_count(1, timeout=UI_TIMEOUT)
    # the sentence as rendered (its `make run` is code): compare the visible text
    expect(alert.locator("p").first).to_have_text(sentence.replace("`", ""),
                                                  timeout=UI_TIMEOUT)
    body = guarded.locator("body").inner_text()
    assert not re.search(r"/proc/\d", body)
    assert str(Path.home()) not in body and str(Path.cwd()) not in body
    assert str(Path("/proc/self").resolve()) not in body and f"/proc/{os.getpid()}" not in body
    box = guarded.locator('[data-testid="stSidebar"] [data-testid="stTextInput"] input').first
    expect(box).to_have_value("/proc/self", timeout=UI_TIMEOUT)
    assert_inert(guarded)
