"""Every page runs in both interface languages, and Chinese renders with a CJK font."""
import shutil
import subprocess

import pytest
from playwright.sync_api import expect

from attention.i18n import LANGUAGES, translate
from attention.ui.pages import PAGES
from tests.apptest import PAGE_FILES, run_page
from tests.conftest import UI_TIMEOUT, wait_for_app

TITLES = {entry.script: entry.title for entry in PAGES}


@pytest.fixture
def short_training(monkeypatch):
    """The sharper page trains for real; fewer steps keep this language check quick."""
    from attention.experiment import training as experiment

    for name, value in (("SHARPEN_STEPS", 40), ("SCALING_STEPS", 30), ("EVAL_SIZE", 2048)):
        monkeypatch.setattr(experiment, name, value)


@pytest.mark.parametrize("lang", list(LANGUAGES))
@pytest.mark.parametrize("path", PAGE_FILES)
def test_every_page_in_every_language(path, lang, short_training):
    """A missing key raises KeyError, so no exception means every string was found."""
    at = run_page(path, lang=lang, tokens="the cat sat on the mat")
    assert not at.exception
    assert at.title[0].value == translate(lang, TITLES[path])
    labels = [w.label for w in at.sidebar.selectbox]
    assert translate(lang, "sidebar.language") in labels


@pytest.mark.browser
def test_chinese_interface_renders_with_a_cjk_font(server, page):
    if shutil.which("fc-list"):
        fonts = subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True).stdout
        assert fonts.strip(), "no CJK font installed: Chinese would render as empty boxes"
    page.goto(f"{server.url}/?lang=zh")
    wait_for_app(page)
    heading = page.locator("h1").first
    expect(heading).to_have_text("输入", timeout=UI_TIMEOUT)
    # Draw two CJK characters and a noncharacter (U+10FFFD, never in any font: the box or
    # blank a missing glyph gets) and compare the pixels. Without a CJK font both characters
    # come out as the same missing-glyph box; with one, each has its own ink.
    ink = page.evaluate("""() => ['输', '入', '\\u{10FFFD}'].map(ch => {
        const c = document.createElement('canvas');
        c.width = c.height = 48;
        const g = c.getContext('2d');
        g.font = '32px sans-serif';
        g.textBaseline = 'top';
        g.fillText(ch, 4, 4);
        return Array.from(g.getImageData(0, 0, 48, 48).data.filter((_, i) => i % 4 === 3));
    })""")
    shu, ru, missing = ink
    assert sum(shu) > 0 and sum(ru) > 0, "the CJK characters drew no ink"
    assert shu != ru, "输 and 入 drew the same image: a missing-glyph box, not CJK glyphs"
    assert shu != missing and ru != missing, "a CJK character drew the missing-glyph image"
