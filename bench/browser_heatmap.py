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
main area has drawn (bench/browser.py's probe). `--clicks --app=DIR` measures the app of
another checkout with this bench. A head change on the Heatmap at n = 16 and 2,048, a change of
the zoom window's size at 2,048 (a new layout: the canvas figure builds its elements again),
of the followed query in the one-row view (a step of its position input), and of the view
(comparison <-> one row: one section replaced by another), and a layer or head change on
Model heads, each against the same kind of click on a bare page with that one picker and one
small chart (bench/pages.py's BARE: a selectbox for head and layer, a segmented control
for a view change and the zoom window's size, a number input's step for the row; a segmented
control's pick is about a quarter cheaper than a selectbox's, which closes its list), all in
one run, the pages
taken in turn. Target <= 2. What React renders on those clicks: bench/renders.py.

Click to drawn canvas (issue 36; `--draws` runs only these): the Heatmap's head click at
2,048 tokens timed from pointerdown until the last draw call on a canvas of the main area
(CanvasRenderingContext2D.prototype.drawImage and the other draw calls hooked in the page:
what the user sees change, not a readiness flag), on `streamlit run app.py` with its warm-up
(the default) and with ATTENTION_EXPLORER_WARMUP=0 (what `streamlit run app.py` was before
the pages started the warm-up), each against the same head click on the bare page with its
chart on a canvas (Vega's canvas renderer), timed the same way. Target <= 2.

--quick: one round of every part at small sizes (256 tokens for 2,048), ratios not held to
their targets.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

from bench.browser import PROBE  # __inserted, __painted, __all: see bench/browser.py
from bench.pages import (HEAD_PICKER, STEPS, VIEW_BUTTONS, BARE, click_times, draw_times, launch,
                         server, spec_url)
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


def measure(urls: dict[str, str], rounds: int,
            warm: bool = True) -> dict[str, tuple[float, float, float]]:
    """Median (first paint, chart render, every chart) per name, in interleaved rounds, after
    one load of each page (warm: caches filled, so this measures drawing)."""
    from playwright.sync_api import sync_playwright

    times: dict[str, list[tuple[float, float, float]]] = {name: [] for name in urls}
    with sync_playwright() as p:
        browser = launch(p)
        for url in urls.values() if warm else ():               # warm-up: fill the caches
            _load(browser, url, timeout=600_000)
        names = list(urls)
        for r in range(rounds):
            for name in names if r % 2 == 0 else reversed(names):
                times[name].append(_load(browser, urls[name]))
        browser.close()
    return {name: tuple(statistics.median(t[i] for t in ts) for i in range(3))
            for name, ts in times.items()}


class Servers:
    """The servers the parts of this benchmark open, started when first asked for and
    stopped together: "app" (warm-up on), "app_off" (ATTENTION_EXPLORER_WARMUP=0), "bare"
    (bench/pages.BARE) and "baseline" (BASELINE). run(quick=True) shares one set between
    the parts; alone, each part starts its own."""

    def __init__(self, app_dir: str | None = None) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.app_dir, self.started = app_dir, {}

    def __getitem__(self, name: str):
        if name not in self.started:
            scripts = {"bare": BARE, "baseline": BASELINE}
            if name in scripts:
                path = Path(self.tmp.name) / f"{name}.py"
                path.write_text(scripts[name])
                self.started[name] = server(str(path))
            else:
                kw = {"cwd": self.app_dir} if self.app_dir else {}
                self.started[name] = server(warmup=name != "app_off", **kw)
        return self.started[name]

    def __enter__(self) -> "Servers":
        return self

    def __exit__(self, *exc) -> None:
        for srv in self.started.values():
            srv.stop()
        self.tmp.cleanup()


def _servers(shared: Servers | None, app_dir: str | None = None):
    """`shared` left running (its owner stops it), else a set of this part's own."""
    if shared is None:
        return Servers(app_dir)
    from contextlib import nullcontext

    return nullcontext(shared)


def run_paint(rounds: int = 7, quick: bool = False, shared: Servers | None = None) -> list[dict]:
    load = os.getloadavg()
    sizes, rect_n = ((16, 256), 64) if quick else ((16, 512, 2048), 256)
    big = sizes[-1]
    with _servers(shared) as srv:
        app, base = srv["app"], srv["baseline"]
        urls = {f"heatmap n={n}": spec_url(app.url, "Heatmap", n) for n in sizes}
        urls["one-rect"] = f"{base.url}/?n={rect_n}"
        urls["bare page"] = f"{base.url}/?v=bare"
        t = measure(urls, 1 if quick else rounds, warm=not quick)

    def detail(*names: str) -> str:
        return ", ".join(f"{name} {t[name][0]:.0f}/{t[name][1]:.0f} ms" for name in names)

    small, rect, top = t["heatmap n=16"], t["one-rect"], f"heatmap n={big}"
    rect_name = f"one-rect-per-cell altair page, n={rect_n}"
    rows = [row(f"heatmap page first paint, n={n}", "heatmap page n=16",
                t[f"heatmap n={n}"][0] / small[0], 1.5, detail(f"heatmap n={n}", "heatmap n=16"))
            for n in sizes[1:]]
    rows.append(row(f"heatmap page first paint, n={big}", rect_name,
                    t[top][0] / rect[0], 0.2, detail(top, "one-rect")))
    rows.append(row(f"heatmap chart render, n={big}", rect_name.replace("page", "chart"),
                    t[top][1] / rect[1], 0.2, detail(top, "one-rect")))
    rows.append(row(f"heatmap charts, overview + zoom, n={big}", rect_name.replace("page", "chart"),
                    t[top][2] / rect[1], 0.2,
                    f"{top} every chart {t[top][2]:.0f} ms, one-rect {rect[1]:.0f} ms "
                    f"(from the first chart's arrival)"))
    rows.append(row("bare page first paint (context)", rect_name,
                    t["bare page"][0] / rect[0], float("inf"),
                    detail("bare page") + f" (first paint/chart render); load average "
                    f"{load[0]:.1f} -> {os.getloadavg()[0]:.1f}"))
    return rows


def run(quick: bool = False) -> list[dict]:
    if not quick:      # each part on servers of its own, as it always ran
        return run_paint() + run_clicks() + run_draws()
    with Servers() as shared:
        return (run_paint(quick=True, shared=shared) + run_clicks(quick=True, shared=shared)
                + run_draws(quick=True, shared=shared))


# (label of the picker, the two options clicked in turn) per page measured.
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
QUICK_CLICKS = ("bare page", "heatmap n=16", "heatmap n=2048")   # --quick: head clicks only


def same_click(name: str) -> str:
    """The bare page whose click is the same kind as the click `name`: a selectbox pick, a
    segmented control's button (a pick there costs the browser less: no list to close) or a
    number input's step."""
    label = CLICKS[name][0]
    return ("bare page, buttons" if label == VIEW_BUTTONS else
            "bare page, steps" if label.startswith(STEPS) else "bare page")


def click_urls(app: str, bare: str, big: int = 2048) -> dict[str, str]:
    """The page each CLICKS row clicks on: the app's (at `app`) and the bare page (`bare`);
    `big`: the size the rows named n=2048 open (smaller in quick mode)."""
    heatmap = spec_url(app, "Heatmap", big)
    return {**{name: f"{bare}/{query}" for name, query in BARES.items()},
            "heatmap n=16": spec_url(app, "Heatmap", 16),
            "heatmap n=2048": heatmap, "heatmap n=2048, zoom window size": heatmap,
            "heatmap n=2048, query row": spec_url(app, "Heatmap?hm_view=row", big),
            "heatmap n=2048, view": heatmap, "heatmap n=2048, all heads": heatmap,
            "model heads, layer": spec_url(app, "Model_heads", 16),
            "model heads, head": spec_url(app, "Model_heads", 16)}


def click_rounds(browser, urls: dict[str, str], rounds: int,
                 passes: int = 2) -> dict[str, list[float]]:
    """Click-to-chart ms per page in two passes over the pages, the second in reverse order,
    `rounds // 2` clicks per page and pass (a machine speeding up or slowing down hits all)."""
    times: dict[str, list[float]] = {name: [] for name in urls}
    names = list(urls)
    for order in (names, names[::-1])[:passes]:
        for name in order:
            label, options = CLICKS[name]
            times[name] += click_times(browser, urls[name], label, options, max(1, rounds // 2))
    return times


def _named(name: str, big: int) -> str:
    return name.replace("n=2048", f"n={big}")


def run_clicks(rounds: int = 8, app_dir: str | None = None, quick: bool = False,
               shared: Servers | None = None) -> list[dict]:
    """Click-to-chart ratios against the same click on a bare page, measured in one run;
    app_dir: the app of another checkout (e.g. `git archive` of an earlier commit)."""
    from playwright.sync_api import sync_playwright

    big = 256 if quick else 2048
    load = os.getloadavg()
    with _servers(shared, app_dir) as srv, sync_playwright() as p:
        urls = click_urls(srv["app"].url, srv["bare"].url, big)
        if quick:
            urls = {name: urls[name] for name in QUICK_CLICKS}
            rounds = 2
        browser = launch(p)
        times = click_rounds(browser, urls, rounds, passes=1 if quick else 2)
        browser.close()
    median = {name: statistics.median(ts) for name, ts in times.items()}
    rows = [row(f"click to chart: {_named(name, big)}", same_click(name),
                median[name] / median[same_click(name)], 2.0,
                f"{median[name]:.0f} ms vs {median[same_click(name)]:.0f} ms (median of {rounds})")
            for name in median if name not in BARES]
    rows += [row(f"click on the {name} (context)", "bare page", median[name] / median["bare page"],
                 float("inf"), f"{median[name]:.0f} ms vs {median['bare page']:.0f} ms")
             for name in BARES if name != "bare page" and name in median]
    rows.append(row("load average (context)", "-", 0.0, float("inf"),
                    f"{load[0]:.1f} -> {os.getloadavg()[0]:.1f}"))
    return rows


WARMUPS = {"warm-up on": True, "ATTENTION_EXPLORER_WARMUP=0": False}


def run_draws(rounds: int = 8, quick: bool = False, shared: Servers | None = None) -> list[dict]:
    """The Heatmap's head click at 2,048 tokens until its canvas has been drawn again, on the
    app with and without its warm-up, against the same click on the bare page (its chart on
    a canvas), timed the same way (bench/pages.pick_drawn); pages taken in two passes, the
    second in reverse order."""
    from playwright.sync_api import sync_playwright

    n = 256 if quick else 2048
    rounds = 2 if quick else rounds
    load = os.getloadavg()
    label, options = HEAD_PICKER
    with _servers(shared) as srv, sync_playwright() as p:
        servers = {"bare page": srv["bare"], **{name: srv["app" if warmup else "app_off"]
                                                for name, warmup in WARMUPS.items()}}
        urls = {name: f"{s.url}/?r=canvas" if name == "bare page"
                else spec_url(s.url, "Heatmap", n) for name, s in servers.items()}
        browser = launch(p)
        times: dict[str, list[float]] = {name: [] for name in urls}
        for order in (list(urls), list(urls)[::-1])[:1 if quick else 2]:
            for name in order:
                times[name] += draw_times(browser, urls[name], label, options,
                                          rounds if quick else max(1, rounds // 2))
        browser.close()
    median = {name: statistics.median(ts) for name, ts in times.items()}
    bare = median["bare page"]
    return [row(f"head click to drawn canvas, n={n}: {name}",
                "same click on a bare page, to its drawn canvas", median[name] / bare, 2.0,
                f"{median[name]:.0f} ms vs {bare:.0f} ms (median of {len(times[name])}; each "
                f"{[round(t) for t in times[name]]}); load {load[0]:.1f} -> "
                f"{os.getloadavg()[0]:.1f}")
            for name in WARMUPS]


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    app_dir = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--app=")), None)
    print_table(run_clicks(app_dir=app_dir, quick=quick) if "--clicks" in sys.argv else
                run_draws(quick=quick) if "--draws" in sys.argv else run(quick=quick))
