"""Take the README's screenshots from a real run: `.venv/bin/python scripts/screenshots.py
[FILE.png ...]` (all of them, or the files named).

Starts `streamlit run app.py` on a free port (one of $ATTENTION_EXPLORER_PORTS when set),
opens pages in Debian's Chromium and writes PNGs to docs/.

`--lm --out DIR` takes instead the shots of the bundled causal LM (SmolLM2-135M-Instruct,
issue 41) on Model heads with the prompt "The capital of France is", in English and Chinese,
as trained and with the unscaled intervention in every layer, at 1400x1000, into DIR (not in
the README: keep them out of docs/). The model's first conversion (about a minute) happens
in the server's warm-up, or while the first shot waits for it.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from attention.config import BUNDLED_LM  # noqa: E402
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
    "score_analysis.png": ("Score_analysis", AttentionSpec(d_k=64),    # from its Figure picker
                           '[data-testid="stMain"] [data-testid="stButtonGroup"]', {}),
    "model_heads.png": ("Model_heads", AttentionSpec(source="pretrained", layer=2), 0,
                        {"mh_layer": "2", "mh_head": "3"}),
    "importance.png": ("Does_the_model_use_it", AttentionSpec(), None, {}),
}

# The bundled causal LM (issue 41): (page, spec, what to scroll to the top: None, a chart's
# index or a CSS selector, view settings). "mh_iv=unscaled:*:*" drops 1/sqrt(d_head) in every
# layer (the module's own scale, 0.125); the heads part is the model as trained, its chosen
# head drawn scaled beside unscaled.
PROMPT = "The capital of France is"
LM_SPEC = AttentionSpec(source="pretrained", model=BUNDLED_LM, text=PROMPT)
UNSCALED = "unscaled:*:*"
LM_SHOTS = {
    **{f"smollm2_heads_{lang}.png": ("Model_heads", LM_SPEC, 0,          # the 30 x 9 grid
                                    {"mh_tab": "heads", "lang": lang}) for lang in ("en", "zh")},
    **{f"smollm2_scaled_vs_unscaled_{lang}.png": ("Model_heads", LM_SPEC, 1,   # head 0.0
                                                 {"mh_tab": "heads", "lang": lang})
       for lang in ("en", "zh")},
    **{f"smollm2_iv_trained_{lang}.png": ("Model_heads", LM_SPEC, None,
                                         {"mh_tab": "iv", "lang": lang}) for lang in ("en", "zh")},
    **{f"smollm2_iv_unscaled_{lang}.png": ("Model_heads", LM_SPEC, None,   # top 5, KL, loss
                                          {"mh_tab": "iv", "mh_iv": UNSCALED, "lang": lang})
       for lang in ("en", "zh")},
    **{f"smollm2_iv_unscaled_attention_{lang}.png": ("Model_heads", LM_SPEC, 1,
                                                    {"mh_tab": "iv", "mh_iv": UNSCALED,
                                                     "lang": lang}) for lang in ("en", "zh")},
}
# what each LM shot waits for besides the script's end: the model is converted in the
# background while the page shows its progress, then the page draws
LM_READY = {"heads": '[data-testid="stMain"] .ae-heatmap, [data-testid="stVegaLiteChart"]',
            "iv": '[data-testid="stMain"] [data-testid="stMetric"], [data-testid="stAlert"]'}


def _scroll_to(page, chart) -> None:
    """Scroll the main area so that `chart` (a chart's index, or a CSS selector) is on top,
    with its section's heading."""
    charts = '[data-testid="stVegaLiteChart"], [data-testid="stMain"] .ae-heatmap'
    target = page.locator(charts).nth(chart) if isinstance(chart, int) \
        else page.locator(chart).first
    target.evaluate("""el => { el.scrollIntoView({block: 'start'}); let box = el.parentElement;
        while (box && box.scrollHeight <= box.clientHeight) box = box.parentElement;
        if (box) box.scrollTop -= 140; }""")
    page.wait_for_timeout(1000)


def _wait_for_model(page, part: str, timeout: float = 600_000) -> None:
    """Until the page has drawn the model's part (not its conversion's progress bar)."""
    deadline = timeout
    while page.locator('[data-testid="stProgress"]').count() and deadline > 0:
        page.wait_for_timeout(2000)                   # converting: the page reruns by itself
        deadline -= 2000
    wait_for_app(page, timeout=timeout)
    page.wait_for_selector(LM_READY[part], timeout=timeout)
    wait_for_app(page, timeout=timeout)


def main() -> None:
    args = sys.argv[1:]
    lm = "--lm" in args
    out = ROOT / "docs"
    if "--out" in args:
        out = Path(args[args.index("--out") + 1]).resolve()
        args = [a for a in args if a != str(args[args.index("--out") + 1])]
    named = [a for a in args if not a.startswith("--")]
    shots, size = (LM_SHOTS, (1400, 1000)) if lm else (SHOTS, (1400, 900))
    out.mkdir(parents=True, exist_ok=True)
    server = Server()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_FLAGS)
            for name, (path, spec, chart, view) in shots.items():
                if named and name not in named:        # only the files named, if any
                    continue
                page = browser.new_page(viewport={"width": size[0], "height": size[1]})
                page.goto(f"{server.url}/{path}?{urlencode({**spec.to_query(), **view})}")
                wait_for_app(page, timeout=180_000)
                if lm:
                    _wait_for_model(page, view["mh_tab"])
                page.wait_for_timeout(2000)
                if chart is not None:
                    _scroll_to(page, chart)
                page.screenshot(path=str(out / name))
                page.close()
                print("wrote", out / name)
            browser.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
