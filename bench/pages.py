"""What the browser benchmarks share (bench/browser_heatmap.py, cold_link.py, renders.py,
model_page.py, memory.py): the links they open and the click they time (their servers and
baseline pages: bench/servers.py). Kept apart from the modules that use them so none imports
another.

    spec_url(base, path, n)           a page of the app with an n-token spec
    context(browser)                  a new browser context with bench/browser.py's probe
    Tab(browser)                      one page that opens link after link (quick runs)
    HOOK                              a script counting the React renders of a click
    pick(page, label, option)         ms from pointerdown until the rerun has drawn
    act(page, action)                 the same for any action (a toggle's click, typing)
    pick_counted(page, label, option) pick's ms and the click's React renders (HOOK)
    click_times(browser, url, ...)    several picks on one warm page
    draw_times(browser, url, ...)     the same clicks, timed until the last canvas draw call
"""
from __future__ import annotations

from contextlib import contextmanager
from urllib.parse import urlencode

from attention.spec import AttentionSpec
from attention.text.examples import EXAMPLES
from attention.text.tokens import parse_tokens
from bench.browser import PROBE

QUICK_BIG = 512     # --quick: the size of the rows named 2,048 (past 256: a row's step buttons)


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

# Counts into window.__fib while it is set: {commits, renders, by: {"main:stSelectbox": n}}.
HOOK = r"""(() => {
  let previous = new WeakSet();
  const COMPONENTS = new Set([0, 1, 11, 14, 15]);   // function, class, forwardRef, memo
  const where = (fiber) => {                        // the element container a fiber draws in
    let f = fiber;
    while (f && !(f.tag === 5 && f.stateNode && f.stateNode.closest)) f = f.return;
    const node = f && f.stateNode;
    if (!node || !node.closest) return 'detached';
    const side = node.closest('[data-testid="stSidebar"]') ? 'side' : 'main';
    const box = node.closest('[data-testid="stElementContainer"]');
    const inner = box && box.firstElementChild;
    if (inner) return side + ':' + (inner.getAttribute('data-testid') || 'element');
    const block = node.closest('[data-testid]');
    return side + ':' + (block ? block.getAttribute('data-testid') : 'root');
  };
  window.__REACT_DEVTOOLS_GLOBAL_HOOK__ = {
    supportsFiber: true, isDisabled: false, renderers: new Map(),
    inject() { return 1; }, checkDCE() {}, onCommitFiberUnmount() {},
    onPostCommitFiberRoot() {}, setStrictMode() {},
    onCommitFiberRoot(id, root) {
      const seen = new WeakSet(), stack = [root.current], count = window.__fib;
      while (stack.length) {
        const f = stack.pop();
        seen.add(f);
        if (count && COMPONENTS.has(f.tag) && !previous.has(f) && (f.flags & 1)) {
          const at = where(f);
          count.by[at] = (count.by[at] || 0) + 1;
          count.renders += 1;
        }
        if (f.sibling) stack.push(f.sibling);
        if (f.child) stack.push(f.child);
      }
      previous = seen;
      if (count) count.commits += 1;
    },
  };
})();
"""


SETTLE = 150   # ms without a message before a click counts as done
DRAW_SETTLE = 400   # ms without a message or a draw call before a drawn click counts as done


def choose(page, label: str, option: str):
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
    return act(page, lambda: choose(page, label, option).click(), timeout)


def act(page, action, timeout: float = 300_000) -> float:
    """Run `action()` (a click, typing) and wait until the rerun it causes has drawn; ms from
    the pointer last going down (RUNS' __down) to the first ready frame."""
    seen = page.evaluate("() => window.__msgs")
    action()
    # ready after the click's messages, and no message since for SETTLE ms (a run's messages
    # can come in bursts); the time is that of the first ready frame, after the pointer went
    # down (a loaded machine can deliver the previous run's last message after the click)
    clicked = page.wait_for_function(
        f"() => window.__msgs > {seen} && window.__clicked > window.__down"
        f" && performance.now() - window.__clicked > {SETTLE} && window.__clicked - window.__down",
        timeout=timeout, polling=20)
    return clicked.json_value()


def pick_drawn(page, label: str, option: str, timeout: float = 300_000) -> float:
    """ms from the pointer going down on `option` until the last draw call on a canvas of the
    main area that the click caused: waits until the rerun's messages have come, a canvas was
    drawn after the pointer went down, the script is idle, and neither a message nor a draw
    call came for DRAW_SETTLE ms."""
    seen = page.evaluate("() => window.__msgs")
    choose(page, label, option).click()
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


READY_TIMEOUT = 300_000   # ms a page may take to be ready before the run stops, naming its state


def wait_ready(page, timeout: float = READY_TIMEOUT) -> None:
    """Wait until the page is ready after a run: the probe's __done, or, when the first run
    started and ended between two frames (the probe then never saw it running), a message
    came and the page is ready (RUNS). A page still not ready after `timeout` ms is a
    TimeoutError that says what the probe saw (page_state)."""
    from playwright.sync_api import TimeoutError as Timeout

    try:
        page.wait_for_function(
            "() => window.__done !== undefined"
            " || (window.__msgs > 0 && window.__clicked !== undefined)",
            timeout=timeout, polling=50)
    except Timeout as err:
        raise TimeoutError(f"not ready after {timeout / 1000:.0f} s: {page_state(page)}") from err


# What a page shows as the readiness probes see it (argument: a selector the caller waits
# for, or null): connection, script state, skeletons, the title, the main area's charts,
# RUNS' verdict and messages, the document, the main area's first words.
STATE = r"""(ready) => {
  const app = document.querySelector('[data-testid="stApp"]');
  const charts = document.querySelectorAll('[data-testid="stMain"] [data-testid="stVegaLiteChart"], [data-testid="stMain"] .ae-heatmap');
  const main = document.querySelector('[data-testid="stMain"]');
  return `connection ${app && app.dataset.testConnectionState}, script `
    + `${app && app.dataset.testScriptState}, skeleton `
    + `${!!document.querySelector('[data-testid="stSkeleton"]')}, title `
    + `${!!document.querySelector('[data-testid="stMain"] h1')}, charts ${charts.length}, `
    + (ready ? `${ready} ${!!document.querySelector(ready)}, ` : '')
    + `ready ${!!(window.__ready && window.__ready())}, messages ${window.__msgs}, `
    + `${location.href.split('?')[0]} "${document.title}" ${document.documentElement.outerHTML.length} bytes: `
    + `${(main ? main.innerText : '').slice(0, 80).replace(/\s+/g, ' ')}`; }"""


def page_state(page, ready: str | None = None) -> str:
    """STATE of a page (a sync Playwright page)."""
    try:
        return page.evaluate(STATE, ready)
    except Exception as err:      # the page itself is gone
        return f"unreadable ({type(err).__name__})"


def paint_times(page, timeout: float = 180_000, polling=100) -> tuple[float, float, float]:
    """(first paint, chart render, every chart) in ms of the page's load, from the probe
    (bench/browser.py): navigation start -> the first chart drawn; that chart's insertion ->
    drawn; its insertion -> the script done and every chart in the main area drawn."""
    page.wait_for_function("() => window.__all !== undefined", timeout=timeout, polling=polling)
    painted, inserted, every = page.evaluate(
        "() => [window.__painted, window.__inserted, window.__all]")
    return painted, painted - inserted, every - inserted


class Tab:
    """A page in a context of its own (the probe, RUNS and `scripts` in it) that opens link
    after link. A link opened in the same context finds Streamlit's scripts in the browser's
    cache: about 0.7-1.3 s against 2.5 s in a new context, which is why the quick runs reuse
    one tab. Opening the link the tab is on already (the last one it opened), or one that
    warm() left open, keeps that page as it is, clicks and all. `paints`: each link's
    paint_times as open() loaded it (a page with a chart), for a quick run's first paints to
    take instead of loading the link again."""

    def __init__(self, browser, *scripts: str) -> None:
        self.ctx = context(browser)
        for script in (RUNS, *scripts):
            self.ctx.add_init_script(script)
        self.page, self.url = self.ctx.new_page(), None
        self.paints: dict[str, tuple[float, float, float]] = {}
        self.kept: dict = {}      # link -> a page warm() left on it

    def open(self, url: str):
        if url in self.kept:
            self.page.close()
            self.page, self.url = self.kept.pop(url), url
            self.page.bring_to_front()
        if url != self.url:
            self.page.goto(url)
            wait_ready(self.page)
            self.url = url
            if self.page.evaluate("() => window.__inserted !== undefined"):   # a chart came
                self.paints[url] = paint_times(self.page, polling="raf")
        return self.page

    def warm(self, *urls: str) -> None:
        """Open every link at once, each in a page of its own in this tab's context, and wait
        until all are ready: the servers' first script runs (their imports: seconds each)
        overlap instead of following each other, and the browser's cache holds each server's
        scripts. Before anything is timed: they share the cores. The pages stay open for
        open() to take."""
        pages = [self.ctx.new_page() for _ in urls]
        for page, url in zip(pages, urls):
            page.goto(url, wait_until="commit")
        for page in pages:
            wait_ready(page)
        self.kept.update(zip(urls, pages))

    def visit(self, url: str):
        """The page, sent to `url` without waiting (the caller waits for what it times)."""
        self.url = None           # no link known to be open and settled
        self.page.goto(url)
        return self.page

    def close(self) -> None:
        self.ctx.close()


@contextmanager
def opened(browser, url: str, tab: Tab | None = None, scripts: tuple[str, ...] = ()):
    """The page at `url`, ready: in `tab`, else in a new Tab (with `scripts`) closed afterwards."""
    own = Tab(browser, *scripts) if tab is None else None
    try:
        yield (tab or own).open(url)
    finally:
        if own is not None:
            own.close()


def pick_counted(page, label: str, option: str, timeout: float = 300_000) -> tuple[float, dict]:
    """pick's ms, and the React renders of the click as HOOK (in the page) counts them:
    {commits, renders, by}."""
    page.evaluate("() => { window.__fib = {commits: 0, renders: 0, by: {}}; }")
    return pick(page, label, option, timeout), page.evaluate("() => window.__fib")


def click_times(browser, url: str, label: str, options: tuple[str, str], clicks: int,
                tab: Tab | None = None, warmups: int = 1, timer=pick,
                scripts: tuple[str, ...] = ()) -> list:
    """What `timer` returns (pick: click-to-chart ms; pick_drawn: click-to-draw ms;
    pick_counted: ms and renders) for `clicks` alternating choices on one warm page, after
    `warmups` others; on a new page (with `scripts`), or in `tab`."""
    with opened(browser, url, tab, scripts) as page:
        return [timer(page, label, options[r % 2], timeout=120_000)
                for r in range(warmups + clicks)][warmups:]


def draw_times(browser, url: str, label: str, options: tuple[str, str], clicks: int,
               tab: Tab | None = None, warmups: int = 1) -> list[float]:
    """Click-to-draw ms (pick_drawn) of `clicks` alternating choices on one warm page."""
    return click_times(browser, url, label, options, clicks, tab, warmups, timer=pick_drawn)
