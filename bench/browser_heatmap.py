"""Time to first paint of the Heatmap page in Chromium at n = 16, 512 and 2048, against a
one-rect-per-cell altair heatmap at n = 256, all in one run (headless, Playwright).

Two servers run side by side from the repository's directory (same Streamlit config): the
app, and a baseline script with one plain altair heatmap (256 x 256 rects, docs/architecture.md,
"Long inputs") or one small bar chart (a bare Streamlit page). Every page is opened once
first (warm caches: this measures drawing, not the `analyze` that the cache skips on later
visits), then the pages are loaded in turn, order reversed every other round, each in a new
browser context.

Two times per load, from an in-page probe (a MutationObserver and a requestAnimationFrame loop):
  first paint   navigation start -> the first chart in the main area has drawn its marks: what
                a user waits for, including Streamlit's start-up and, on the app's pages, the
                sidebar's widgets (their code is loaded on first use, which takes seconds: the
                same for every page of the app and absent from the baseline's bare page);
  chart render  that chart's element inserted into the page -> its marks drawn: the cost of
                the chart itself in the browser (Vega parse, dataflow, rendering);
  every chart   that chart's insertion -> the script done and every chart in the main area
                drawn (on the app's page: the overview and the zoom window below it).
Targets (issue 6): the page at n = 2048 within 1.5x of n = 16, and at least 5x faster than
the one-rect chart at n = 256 (ratio <= 0.2), checked on each time. Wall-clock times on a
shared machine swing with its load, which the last row reports.

Click to chart (issue 15; `--clicks` runs only these): on a warm page, the time from the
pointer going down on another option of a picker (the page's own event, so Playwright's checks
before it dispatches a click, about 40 ms on every page, do not count) until the rerun it
starts (the page's, or only its fragment's) is done, no skeleton is left and every chart in the
main area has drawn (bench/cold_link.py's probe). `--clicks --app=DIR` measures the app of
another checkout with this bench. A head change on the Heatmap at n = 16 and 2,048, a change of
the zoom window's size at 2,048 (a new layout: the canvas figure builds its elements again),
of the followed query in the one-row view (a step of its position input), and of the view
(comparison <-> one row: one section replaced by another), and a layer or head change on
Model heads, each against the same kind of click on a bare page with that one picker and one
small chart (bench/cold_link.py's BARE: a selectbox for head and layer, a segmented control
for a view change and the zoom window's size, a number input's step for the row; a segmented
control's pick is about a quarter cheaper than a selectbox's, which closes its list), all in
one run, the pages
taken in turn. Target <= 2. What React renders on those clicks: bench/renders.py.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlencode

from attention.text.examples import EXAMPLES
from attention.spec import AttentionSpec
from attention.tokens import parse_tokens
from bench.browser import PROBE, chromium  # __inserted, __painted, __all: see bench/browser.py
from bench.timing import print_table, row

BASELINE = '''
import altair as alt, numpy as np, pandas as pd, streamlit as st
n = int(st.query_params.get("n", 256))
st.title("baseline")
if st.query_params.get("v") == "bare":
    st.altair_chart(alt.Chart(pd.DataFrame({"x": list("abcdefghij"), "y": range(10)}))
                    .mark_bar().encode(x="x:N", y="y:Q"))
else:
    q, k = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    w = np.random.default_rng(0).random((n, n))
    frame = pd.DataFrame({"query": q.ravel(), "key": k.ravel(), "weight": w.ravel()})
    st.altair_chart(alt.Chart(frame).mark_rect().encode(
        x="key:O", y="query:O", color="weight:Q", tooltip=["query", "key", "weight"]))
'''

def heatmap_url(base: str, n: int) -> str:
    words = parse_tokens(EXAMPLES["passage"])
    spec = AttentionSpec(tokens=tuple((words * (n // len(words) + 1))[:n]))
    return f"{base}/Heatmap?{urlencode(spec.to_query())}"


def _load(browser, url: str, timeout: float = 180_000) -> tuple[float, float, float]:
    """(first paint, chart render, every chart) in ms for one load of url in a fresh context;
    every chart: from the first chart's insertion until the script has finished and every
    chart in the main area has drawn (the overview and the zoom window, on the app's page)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.add_init_script(PROBE)
        page.goto(url)
        page.wait_for_function("() => window.__all !== undefined", timeout=timeout, polling=100)
        painted, inserted, every = page.evaluate(
            "() => [window.__painted, window.__inserted, window.__all]")
        return painted, painted - inserted, every - inserted
    finally:
        context.close()


def measure(urls: dict[str, str], rounds: int) -> dict[str, tuple[float, float, float]]:
    """Median (first paint, chart render, every chart) per name, in interleaved rounds."""
    from playwright.sync_api import sync_playwright

    from tests.conftest import CHROMIUM_FLAGS

    exe = chromium()
    times: dict[str, list[tuple[float, float, float]]] = {name: [] for name in urls}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)
        for url in urls.values():                                # warm-up: fill the caches
            _load(browser, url, timeout=600_000)
        names = list(urls)
        for r in range(rounds):
            for name in names if r % 2 == 0 else reversed(names):
                times[name].append(_load(browser, urls[name]))
        browser.close()
    return {name: tuple(statistics.median(t[i] for t in ts) for i in range(3))
            for name, ts in times.items()}


def run_paint(rounds: int = 7) -> list[dict]:
    from tests.conftest import Server

    load = os.getloadavg()

    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "baseline_heatmap.py"
        script.write_text(BASELINE)
        app, base = Server(), Server(str(script))
        try:
            urls = {f"heatmap n={n}": heatmap_url(app.url, n) for n in (16, 512, 2048)}
            urls["one-rect 256"] = f"{base.url}/?n=256"
            urls["bare page"] = f"{base.url}/?v=bare"
            t = measure(urls, rounds)
        finally:
            app.stop()
            base.stop()

    def detail(*names: str) -> str:
        return ", ".join(f"{name} {t[name][0]:.0f}/{t[name][1]:.0f} ms" for name in names)

    small, rect = t["heatmap n=16"], t["one-rect 256"]
    rows = [row(f"heatmap page first paint, n={n}", "heatmap page n=16",
                t[f"heatmap n={n}"][0] / small[0], 1.5, detail(f"heatmap n={n}", "heatmap n=16"))
            for n in (512, 2048)]
    rows.append(row("heatmap page first paint, n=2048", "one-rect-per-cell altair page, n=256",
                    t["heatmap n=2048"][0] / rect[0], 0.2, detail("heatmap n=2048", "one-rect 256")))
    rows.append(row("heatmap chart render, n=2048", "one-rect-per-cell altair chart, n=256",
                    t["heatmap n=2048"][1] / rect[1], 0.2, detail("heatmap n=2048", "one-rect 256")))
    rows.append(row("heatmap charts, overview + zoom, n=2048", "one-rect-per-cell altair chart, n=256",
                    t["heatmap n=2048"][2] / rect[1], 0.2,
                    f"heatmap n=2048 every chart {t['heatmap n=2048'][2]:.0f} ms, one-rect 256 "
                    f"{rect[1]:.0f} ms (from the first chart's arrival)"))
    rows.append(row("bare page first paint (context)", "one-rect-per-cell altair page, n=256",
                    t["bare page"][0] / rect[0], 1.0,
                    detail("bare page") + f" (first paint/chart render); load average "
                    f"{load[0]:.1f} -> {os.getloadavg()[0]:.1f}"))
    return rows


def run() -> list[dict]:
    return run_paint() + run_clicks()


# (label of the picker, the two options clicked in turn) per page measured.
HEAD_PICKER = ("Head", ("Head 1", "Head 2"))
VIEW_BUTTONS = "buttons"   # a CLICKS label: the options are a segmented control's buttons (radios)
STEPS = "steps:"           # a CLICKS label prefix: a number input's step buttons, "+" and "-"
CLICKS = {"bare page": HEAD_PICKER, "heatmap n=16": HEAD_PICKER, "heatmap n=2048": HEAD_PICKER,
          "heatmap n=2048, zoom window size": (VIEW_BUTTONS, ("24", "16")),   # buttons too
          # past 256 tokens the query row is a number input: its step buttons
          "heatmap n=2048, query row": (STEPS + "Query position", ("+", "-")),
          # a view change: the view picker's buttons (a segmented control, not a combobox)
          "heatmap n=2048, view": (VIEW_BUTTONS, ("Follow one query", "Scaled vs unscaled")),
          "heatmap n=2048, all heads": (VIEW_BUTTONS, ("All heads", "Scaled vs unscaled")),
          "model heads, layer": ("Layer", ("1", "2")), "model heads, head": ("Head", ("1", "2")),
          "bare page, buttons": (VIEW_BUTTONS, ("Follow one query", "Scaled vs unscaled")),
          "bare page, steps": (STEPS + "Query position", ("+", "-"))}
BARES = {"bare page": "", "bare page, buttons": "?w=buttons", "bare page, steps": "?w=steps"}


def same_click(name: str) -> str:
    """The bare page whose click is the same kind as the click `name`: a selectbox pick, a
    segmented control's button (a pick there costs the browser less: no list to close) or a
    number input's step."""
    label = CLICKS[name][0]
    return ("bare page, buttons" if label == VIEW_BUTTONS else
            "bare page, steps" if label.startswith(STEPS) else "bare page")


# Sees each rerun through the server's messages: a wrapped WebSocket counts every message the
# app receives (`__msgs`) and notes when the last one came. A quick rerun can start and end
# within one task, and React then renders its run state once, so the page's run-state
# attribute may never change; the messages always arrive. `__clicked` is the first frame
# after the latest message at which cold_link's probe finds the page ready (idle, no
# skeleton, every chart drawn); a later message clears it. `__down` is when the pointer last
# went down (the option's click: the picker's own click comes before it).
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
        window.__clicked = undefined;
      });
    }
  };
  const tick = () => {
    if (window.__clicked === undefined && window.__msgs > 0 && window.__ready && window.__ready())
      window.__clicked = performance.now();
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})();
"""


SETTLE = 150   # ms without a message before a click counts as done


def pick(page, label: str, option: str, timeout: float = 300_000) -> float:
    """ms from the pointer going down on `option` of the main area's picker `label` until the
    rerun has drawn."""
    seen = page.evaluate("() => window.__msgs")
    main = page.locator('[data-testid="stMain"]')
    if label == VIEW_BUTTONS:
        choice = main.get_by_role("radio", name=option, exact=True)
    elif label.startswith(STEPS):
        box = main.get_by_test_id("stNumberInput").filter(has_text=label[len(STEPS):])
        choice = box.get_by_test_id("stNumberInputStep" + ("Up" if option == "+" else "Down"))
    else:
        picker = main.get_by_role("combobox", name=label, exact=True)
        choice = page.get_by_role("option", name=option, exact=True)
        for _ in range(10):   # a click that scrolls the picker into view may only focus it
            picker.click()
            try:
                choice.wait_for(timeout=2_000)
                break
            except Exception:
                page.keyboard.press("Escape")
    choice.click()
    # ready after the click's messages, and no message since for SETTLE ms (a run's messages
    # can come in bursts); the time is that of the first ready frame
    clicked = page.wait_for_function(
        f"() => window.__msgs > {seen} && window.__clicked !== undefined"
        f" && performance.now() - window.__clicked > {SETTLE} && window.__clicked - window.__down",
        timeout=timeout, polling=20)
    return clicked.json_value()


def click_times(browser, url: str, label: str, options: tuple[str, str],
                clicks: int) -> list[float]:
    """Click-to-chart ms of `clicks` alternating choices on one warm page (after one warm-up)."""
    from bench.cold_link import _context

    context = _context(browser)
    context.add_init_script(RUNS)
    try:
        page = context.new_page()
        page.goto(url)
        page.wait_for_function("() => window.__done !== undefined", timeout=600_000, polling=50)
        return [pick(page, label, options[r % 2], timeout=120_000)
                for r in range(clicks + 1)][1:]                  # the first click warms up
    finally:
        context.close()


def click_urls(app: str, bare: str) -> dict[str, str]:
    """The page each CLICKS row clicks on: the app's (at `app`) and the bare page (`bare`)."""
    from bench.cold_link import spec_url

    heatmap = spec_url(app, "Heatmap", 2048)
    return {**{name: f"{bare}/{query}" for name, query in BARES.items()},
            "heatmap n=16": spec_url(app, "Heatmap", 16),
            "heatmap n=2048": heatmap, "heatmap n=2048, zoom window size": heatmap,
            "heatmap n=2048, query row": spec_url(app, "Heatmap?hm_view=row", 2048),
            "heatmap n=2048, view": heatmap, "heatmap n=2048, all heads": heatmap,
            "model heads, layer": spec_url(app, "Model_heads", 16),
            "model heads, head": spec_url(app, "Model_heads", 16)}


def click_rounds(browser, urls: dict[str, str], rounds: int) -> dict[str, list[float]]:
    """Click-to-chart ms per page in two passes over the pages, the second in reverse order,
    `rounds // 2` clicks per page and pass (a machine speeding up or slowing down hits all)."""
    times: dict[str, list[float]] = {name: [] for name in urls}
    names = list(urls)
    for order in (names, names[::-1]):
        for name in order:
            label, options = CLICKS[name]
            times[name] += click_times(browser, urls[name], label, options, max(1, rounds // 2))
    return times


def run_clicks(rounds: int = 8, app_dir: str | None = None) -> list[dict]:
    """Click-to-chart ratios against the same click on a bare page, measured in one run;
    app_dir: the app of another checkout (e.g. `git archive` of an earlier commit)."""
    from bench.cold_link import BARE
    from playwright.sync_api import sync_playwright

    from tests.conftest import CHROMIUM_FLAGS, Server

    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        (Path(tmp) / "bare_page.py").write_text(BARE)
        app = Server(cwd=app_dir) if app_dir else Server()
        base = Server(str(Path(tmp) / "bare_page.py"))
        try:
            urls = click_urls(app.url, base.url)
            browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
            times = click_rounds(browser, urls, rounds)
            browser.close()
        finally:
            app.stop()
            base.stop()
    median = {name: statistics.median(ts) for name, ts in times.items()}
    rows = [row(f"click to chart: {name}", same_click(name), median[name] / median[same_click(name)],
                2.0, f"{median[name]:.0f} ms vs {median[same_click(name)]:.0f} ms (median of {rounds})")
            for name in median if name not in BARES]
    rows += [row(f"click on the {name} (context)", "bare page", median[name] / median["bare page"],
                 float("inf"), f"{median[name]:.0f} ms vs {median['bare page']:.0f} ms")
             for name in BARES if name != "bare page"]
    rows.append(row("load average (context)", "-", 0.0, 1.0,
                    f"{load[0]:.1f} -> {os.getloadavg()[0]:.1f}"))
    return rows


if __name__ == "__main__":
    app_dir = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--app=")), None)
    print_table(run_clicks(app_dir=app_dir) if "--clicks" in sys.argv else run())
