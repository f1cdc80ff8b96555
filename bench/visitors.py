"""8 visitors at once on one server (bench/image.py runs them on the container): a shared link
goes round and 8 people open it at the same moment.

Each visitor is a Playwright browser context of its own (in a thread of its own, so the
clicks of bench/pages.py time it). It opens its link (VISITS: three pages, eight distinct
views), types its own unique marker at the end of the sidebar's text (Ctrl+Enter applies it:
the page reruns on a text nobody else has), then clicks CLICKS times between two options:

    Heatmap, 512 tokens         the head picker      Head 1 / Head 2
    Model heads                 the layer picker     1 / 2 (SmolLM2-135M and MiniLM)
    Does the model use it?      its two toggles      on / off (tables; words only)

Each click is timed from the pointer going down until the rerun has drawn (bench/pages.act).
The same clicks on BARE_VISITOR, a bare Streamlit page with the same widgets, under the same
8-visitor load, are the baseline. At the end each visitor's page and URL must hold its own
marker and no other visitor's, and no page may show an exception.
"""
from __future__ import annotations

import secrets
import statistics
import sys
import threading
from dataclasses import dataclass, field

from urllib.parse import urlencode

from attention.config import BUNDLED_LM
from attention.spec import AttentionSpec
from attention.text.examples import EXAMPLES
from attention.text.tokens import parse_tokens
from attention.ui.pages import url_path
from bench.pages import Tab, act, launch, pick

VISITORS = 8
CLICKS = 4
TIMEOUT = 600_000            # ms for one page or click: 8 visitors and their renderers share 2 cores
HEAD = ("Head", ("Head 1", "Head 2"))
LAYER = ("Layer", ("1", "2"))
TOGGLE = "toggle:"           # a label prefix: a toggle of the main area, clicked on and off
TABLES = TOGGLE + "Tables of the numbers"
WORDS = TOGGLE + "Words only"
# (page, tokens, the spec's other fields, the page's own view parameters, the click): eight
# distinct links; the model pages run the two bundled models (SmolLM2 and MiniLM), the
# importance page its stored MiniLM view (the bundled English corpus), each toggle clicked
LM = {"source": "pretrained", "model": BUNDLED_LM}
MINILM = {"source": "pretrained"}
HEATMAP, MODEL, IMPORTANCE = (url_path(k) for k in ("nav.heatmap", "nav.model", "nav.importance"))
VISITS = (
    (HEATMAP, 512, {}, {}, HEAD),
    (MODEL, 24, LM, {}, LAYER),
    (IMPORTANCE, 12, MINILM, {}, TABLES),
    (HEATMAP, 512, {"seed": 7}, {}, HEAD),
    (MODEL, 40, MINILM, {}, LAYER),
    (IMPORTANCE, 12, MINILM, {"imp_tables": "1"}, WORDS),
    (HEATMAP, 512, {"d_k": 32}, {}, HEAD),
    (MODEL, 60, LM, {}, LAYER),
)

# The baseline: the same kinds of widget and a small chart, nothing computed.
BARE_VISITOR = '''
import altair as alt, pandas as pd, streamlit as st
st.title("bare")
st.sidebar.text_area("Tokens", key="text")
head = st.selectbox("Head", [0, 1, 2, 3], format_func=lambda h: f"Head {h}")
layer = st.selectbox("Layer", [0, 1, 2, 3], format_func=str)
on = st.toggle("Tables of the numbers") + st.toggle("Words only")
frame = pd.DataFrame({"x": list("abcdefghij"), "y": [head + layer + on + i for i in range(10)]})
st.altair_chart(alt.Chart(frame).mark_bar().encode(x="x:N", y="y:Q"))
'''


@dataclass
class Visitor:
    index: int
    url: str
    click: tuple
    marker: str = field(default_factory=lambda: "mk" + secrets.token_hex(5))
    times: list = field(default_factory=list)       # ms per click
    errors: list = field(default_factory=list)
    seen: str = ""                                  # the page's text and URL at the end


def link(base: str, page: str, n: int, fields: dict, view: dict) -> str:
    """The page with a spec of n words of the example passage and `fields`, then `view`."""
    words = parse_tokens(EXAMPLES["passage"])
    spec = AttentionSpec(tokens=tuple((words * (n // len(words) + 1))[:n]), **fields)
    return f"{base}/{page}?{urlencode({**spec.to_query(), **view})}"


def links(base: str, bare: bool) -> list[tuple[str, tuple]]:
    """(link, click) per visitor: the app's VISITS, or the bare page with the same clicks."""
    if bare:
        return [(f"{base}/", visit[-1]) for visit in VISITS[:VISITORS]]
    return [(link(base, *visit[:4]), visit[-1]) for visit in VISITS[:VISITORS]]


def _click(page, click: tuple, r: int) -> float:
    label, options = click if isinstance(click, tuple) else (click, None)
    if isinstance(label, str) and label.startswith(TOGGLE):
        box = page.locator('[data-testid="stMain"] [data-testid="stCheckbox"]').filter(
            has_text=label[len(TOGGLE):])
        return act(page, lambda: box.locator("label").first.click(), TIMEOUT)
    return pick(page, label, options[r % 2], TIMEOUT)


def _mark(page, marker: str) -> None:
    """The marker typed at the end of the sidebar's text, applied with Ctrl+Enter."""
    area = page.locator('[data-testid="stSidebar"] textarea').first

    def type_it():
        area.click()
        area.press("Control+End")
        area.type(" " + marker)
        area.press("Control+Enter")
    act(page, type_it, TIMEOUT)


def _visit(v: Visitor, start: threading.Barrier, clicks: int) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        tab = Tab(browser)
        try:
            tab.ctx.set_default_timeout(TIMEOUT)
            start.wait()
            page = tab.open(v.url)
            _mark(page, v.marker)
            for r in range(clicks + 1):              # the first click warms the picker
                ms = _click(page, v.click, r)
                if r:
                    v.times.append(ms)
                print(f"# visitor {v.index}: click {r} {ms:.0f} ms", file=sys.stderr, flush=True)
            if page.locator('[data-testid="stException"]').count():
                v.errors.append("an exception on the page")
            v.seen = page.url + "\n" + page.locator("body").inner_text() + "\n" + \
                page.locator('[data-testid="stSidebar"] textarea').first.input_value()
        except Exception as err:                    # counted: the other visitors go on
            v.errors.append(f"{type(err).__name__}: {str(err)[:120]}")
        finally:
            tab.close()
            browser.close()


def visit_all(base: str, bare: bool = False, visitors: int = VISITORS,
              clicks: int = CLICKS) -> list[Visitor]:
    """`visitors` visitors at once on the server at `base` (the bare page's with bare=True)."""
    todo = [Visitor(i, url, click) for i, (url, click) in enumerate(links(base, bare)[:visitors])]
    start = threading.Barrier(len(todo))
    threads = [threading.Thread(target=_visit, args=(v, start, clicks)) for v in todo]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for v in todo:
        if v.seen and v.marker not in v.seen:
            v.errors.append("its own marker is missing from its page")
        leaked = [o.index for o in todo if o is not v and o.marker in v.seen]
        if leaked:
            v.errors.append(f"markers of visitors {leaked} on its page or URL")
    return todo


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation, as numpy's default."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summary(done: list[Visitor]) -> dict:
    times = [ms for v in done for ms in v.times]
    return {"p50": statistics.median(times) if times else float("nan"),
            "p95": percentile(times, 0.95), "clicks": len(times),
            "errors": [(v.index, e) for v in done for e in v.errors]}
