"""What the browser benchmarks share (bench/browser_heatmap.py, cold_link.py, renders.py,
model_page.py, memory.py): the app's servers, the bare baseline page, the links they open and
the click they time. Kept apart from the modules that use them so none imports another.

    server(script=None, warmup=True)  `streamlit run app.py` (or `script`) on a free port
                                      (tests.conftest.Server), ATTENTION_EXPLORER_WARMUP as asked
    BARE                              the bare page: a title, one picker, one small chart
    spec_url(base, path, n)           a page of the app with an n-token spec
    context(browser)                  a new browser context with bench/browser.py's probe
    pick(page, label, option)         ms from pointerdown until the rerun has drawn
    click_times(browser, url, ...)    several picks on one warm page
    draw_times(browser, url, ...)     the same clicks, timed until the last canvas draw call
"""
from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

from attention.spec import AttentionSpec
from attention.text.examples import EXAMPLES
from attention.tokens import parse_tokens
from bench.browser import PROBE

ROOT = Path(__file__).resolve().parent.parent
WARMUP_ENV = "ATTENTION_EXPLORER_WARMUP"

# A bare page: a title, one picker and one small chart the picker changes. The picker is a
# selectbox (a cold link's page, a head or layer click); ?w=buttons makes it a segmented
# control (a view change), ?w=steps a number input (a row step): each click of the app is
# held to the same kind of click here (bench/browser_heatmap.same_click). ?r=canvas draws the
# chart on a canvas (Vega's canvas renderer, as Streamlit itself picks for big charts), so a
# click can be timed to the canvas's last draw call, as the app's canvas heatmap is.
BARE = '''
import altair as alt, pandas as pd, streamlit as st
st.title("bare")
kind = st.query_params.get("w", "select")
if kind == "buttons":
    views = ["Scaled vs unscaled", "All heads", "Follow one query"]
    head = views.index(st.segmented_control("View", views, default=views[0], required=True))
elif kind == "steps":
    head = st.number_input("Query position", min_value=0, max_value=2047, value=0, step=1)
else:
    head = st.selectbox("Head", list(range(4)), format_func=lambda h: f"Head {h}")
chart = (alt.Chart(pd.DataFrame({"x": list("abcdefghij"), "y": [head + i for i in range(10)]}))
         .mark_bar().encode(x="x:N", y="y:Q"))
if st.query_params.get("r") == "canvas":
    chart = chart.properties(usermeta={"embedOptions": {"renderer": "canvas"}})
st.altair_chart(chart)
'''


def server(script: str | None = None, cwd=ROOT, warmup: bool = True):
    """`streamlit run app.py` (or `script`) as a user starts it; warmup=False is the app with
    ATTENTION_EXPLORER_WARMUP=0 (no warm-up thread, no prefetching: what `streamlit run
    app.py` was before the pages started them)."""
    from tests.conftest import Server

    return Server(script, cwd=cwd, env={WARMUP_ENV: "1" if warmup else "0"})


def launch(p):
    """Debian's Chromium through Playwright `p` (sync API), with the tests' flags."""
    from bench.browser import chromium
    from tests.conftest import CHROMIUM_FLAGS

    return p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)


def spec_url(base: str, path: str, n: int) -> str:
    """The page `path` (which may carry its own view parameters: "page?name=value") with an
    n-token spec (the example passage repeated)."""
    path, _, view = path.partition("?")
    words = parse_tokens(EXAMPLES["passage"])
    spec = AttentionSpec(tokens=tuple((words * (n // len(words) + 1))[:n]))
    return f"{base}/{path}?{urlencode(spec.to_query())}" + (f"&{view}" if view else "")


def context(browser):
    """A new context, 1400 x 1000, with the readiness probe of bench/browser.py."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.add_init_script(PROBE)
    return ctx


# ---- clicks ----------------------------------------------------------------------------------

# (label of the picker, the two options clicked in turn) per page measured.
HEAD_PICKER = ("Head", ("Head 1", "Head 2"))
VIEW_BUTTONS = "buttons"   # a label: the options are a segmented control's buttons (radios)
STEPS = "steps:"           # a label prefix: a number input's step buttons, "+" and "-"

# Sees each rerun through the server's messages: a wrapped WebSocket counts every message the
# app receives (`__msgs`) and notes when the last one came. A quick rerun can start and end
# within one task, and React then renders its run state once, so the page's run-state
# attribute may never change; the messages always arrive. `__clicked` is the first frame
# after the latest message at which the probe finds the page ready (idle, no skeleton, every
# chart drawn); a later message clears it. `__down` is when the pointer last went down (the
# option's click: the picker's own click comes before it). `__msgAt` is the latest message's
# time. `__draw` is the time of the latest 2D draw call (drawImage, and the fills, strokes
# and text a Vega canvas is drawn with) on a canvas in the main area: when a canvas was
# drawn again, whatever flag the page sets or not.
RUNS = """
(() => {
  window.__msgs = 0;
  document.addEventListener('pointerdown', () => { window.__down = performance.now(); }, true);
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', () => {
        window.__msgs += 1;
        window.__msgAt = performance.now();
        window.__clicked = undefined;
      });
    }
  };
  const proto = CanvasRenderingContext2D.prototype;
  for (const name of ['drawImage', 'putImageData', 'fill', 'fillRect', 'stroke', 'fillText']) {
    const native = proto[name];
    proto[name] = function (...args) {
      const cv = this.canvas;
      if (cv && cv.isConnected && cv.closest('[data-testid="stMain"]')) {
        window.__draw = performance.now();
        if (name === 'drawImage') window.__image = window.__draw;
      }
      return native.apply(this, args);
    };
  }
  const tick = () => {
    if (window.__clicked === undefined && window.__msgs > 0 && window.__ready && window.__ready())
      window.__clicked = performance.now();
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})();
"""

SETTLE = 150   # ms without a message before a click counts as done
DRAW_SETTLE = 400   # ms without a message or a draw call before a drawn click counts as done


def _choose(page, label: str, option: str):
    """Open the picker `label` of the main area if it is one, and return `option`'s element."""
    main = page.locator('[data-testid="stMain"]')
    if label == VIEW_BUTTONS:
        return main.get_by_role("radio", name=option, exact=True)
    if label.startswith(STEPS):
        box = main.get_by_test_id("stNumberInput").filter(has_text=label[len(STEPS):])
        return box.get_by_test_id("stNumberInputStep" + ("Up" if option == "+" else "Down"))
    picker = main.get_by_role("combobox", name=label, exact=True)
    choice = page.get_by_role("option", name=option, exact=True)
    for _ in range(10):   # a click that scrolls the picker into view may only focus it
        picker.click()
        try:
            choice.wait_for(timeout=2_000)
            break
        except Exception:
            page.keyboard.press("Escape")
    return choice


def pick(page, label: str, option: str, timeout: float = 300_000) -> float:
    """ms from the pointer going down on `option` of the main area's picker `label` until the
    rerun has drawn (the probe's readiness: idle, no skeleton, every chart drawn)."""
    seen = page.evaluate("() => window.__msgs")
    _choose(page, label, option).click()
    # ready after the click's messages, and no message since for SETTLE ms (a run's messages
    # can come in bursts); the time is that of the first ready frame
    clicked = page.wait_for_function(
        f"() => window.__msgs > {seen} && window.__clicked !== undefined"
        f" && performance.now() - window.__clicked > {SETTLE} && window.__clicked - window.__down",
        timeout=timeout, polling=20)
    return clicked.json_value()


def pick_drawn(page, label: str, option: str, timeout: float = 300_000) -> float:
    """ms from the pointer going down on `option` until the last draw call on a canvas of the
    main area that the click caused: waits until the rerun's messages have come, a canvas was
    drawn after the pointer went down, the script is idle, and neither a message nor a draw
    call came for DRAW_SETTLE ms."""
    seen = page.evaluate("() => window.__msgs")
    _choose(page, label, option).click()
    idle = '[data-testid="stApp"][data-test-script-state="notRunning"]'
    drawn = page.wait_for_function(
        f"""() => {{
          const now = performance.now();
          if (!(window.__msgs > {seen} && window.__draw > window.__down)) return false;
          if (!document.querySelector('{idle}')) return false;
          if (now - window.__draw < {DRAW_SETTLE} || now - window.__msgAt < {DRAW_SETTLE}) return false;
          return window.__draw - window.__down;
        }}""", timeout=timeout, polling=20)
    return drawn.json_value()


def _open(browser, url: str, *scripts: str):
    ctx = context(browser)
    for script in (RUNS, *scripts):
        ctx.add_init_script(script)
    page = ctx.new_page()
    page.goto(url)
    # ready after a run: the probe's __done, or, when the first run started and ended between
    # two frames (the probe then never saw it running), a message came and the page is ready
    page.wait_for_function(
        "() => window.__done !== undefined || (window.__msgs > 0 && window.__clicked !== undefined)",
        timeout=600_000, polling=50)
    return ctx, page


def click_times(browser, url: str, label: str, options: tuple[str, str],
                clicks: int) -> list[float]:
    """Click-to-chart ms of `clicks` alternating choices on one warm page (after one warm-up)."""
    ctx, page = _open(browser, url)
    try:
        return [pick(page, label, options[r % 2], timeout=120_000)
                for r in range(clicks + 1)][1:]                  # the first click warms up
    finally:
        ctx.close()


def draw_times(browser, url: str, label: str, options: tuple[str, str],
               clicks: int) -> list[float]:
    """Click-to-draw ms (pick_drawn) of `clicks` alternating choices on one warm page, after
    one warm-up click."""
    ctx, page = _open(browser, url)
    try:
        return [pick_drawn(page, label, options[r % 2], timeout=120_000)
                for r in range(clicks + 1)][1:]
    finally:
        ctx.close()
