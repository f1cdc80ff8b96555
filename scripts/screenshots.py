"""Take the README's screenshots from a real run: `.venv/bin/python scripts/screenshots.py
[FILE.png ...]` (all of them, or the files named).

Starts `streamlit run app.py` on a free port, opens pages in Debian's Chromium and writes
PNGs to docs/.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from attention.text.examples import EXAMPLES  # noqa: E402
from attention.spec import AttentionSpec  # noqa: E402
from attention.text.tokens import parse_tokens  # noqa: E402
from tests.conftest import CHROMIUM_FLAGS, Server, wait_for_app  # noqa: E402

WORDS = parse_tokens(EXAMPLES["passage"])
LONG = tuple((WORDS * (2048 // len(WORDS) + 1))[:2048])   # the token limit

# file -> (page, spec, which chart the picture starts above: index among the page's charts,
# the page's own view settings)
SHOTS = {
    "heatmap.png": ("Heatmap", AttentionSpec(tokens=("the", "cat", "sat", "on", "the", "mat")), None, {}),
    "long_input.png": ("Heatmap", AttentionSpec(tokens=LONG, causal=True), 0, {}),
    "score_analysis.png": ("Score_analysis", AttentionSpec(d_k=64), 0, {}),
    "model_heads.png": ("Model_heads", AttentionSpec(source="pretrained", layer=2), 0,
                        {"mh_layer": "2", "mh_head": "3"}),
    "importance.png": ("Does_the_model_use_it", AttentionSpec(), None, {}),
}


def main() -> None:
    server = Server()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_FLAGS)
            for name, (path, spec, chart, view) in SHOTS.items():
                if sys.argv[1:] and name not in sys.argv[1:]:   # only the files named, if any
                    continue
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(f"{server.url}/{path}?{urlencode({**spec.to_query(), **view})}")
                wait_for_app(page, timeout=180_000)
                page.wait_for_timeout(2000)
                if chart is not None:  # scroll the main area so that chart's section is on top
                    charts = '[data-testid="stVegaLiteChart"], [data-testid="stMain"] .ae-heatmap'
                    page.locator(charts).nth(chart).evaluate(   # and its section's heading
                        """el => { el.scrollIntoView({block: 'start'}); let box = el.parentElement;
                        while (box && box.scrollHeight <= box.clientHeight) box = box.parentElement;
                        if (box) box.scrollTop -= 140; }""")
                    page.wait_for_timeout(1000)
                page.screenshot(path=str(ROOT / "docs" / name))
                page.close()
                print("wrote", ROOT / "docs" / name)
            browser.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
