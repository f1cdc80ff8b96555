"""A shared link on a cold server, and the clicks after it (issue 15), in headless Chromium.

Cold first paint: for each page, a freshly started server gets the deep link as its very first
request; the time runs from navigation start until the script has finished, no widget skeleton
is left and every chart in the main area has drawn. The baseline is a bare Streamlit page
(title + one small chart) measured the same way, each on its own fresh server, in the same run,
at the start and the end of every round.

The app is started as a user starts it, `streamlit run app.py` (its first page run starts the
warm-up thread and prefetching, attention/ui/entry.py), with a disk cache filled once by
`python -m attention.experiment.store` as the Docker build does; the bare page with the
same `streamlit run`: it stands for what Streamlit itself costs a deployed app.
"Empty disk cache" is the Sharper page on a machine that has never trained its default seed:
it reads the results shipped with the code (attention/data/experiments); "trained on the
visit" is seed 3, which is neither stored nor shipped, so the link waits for its training.
With --before, the same pages also with ATTENTION_EXPLORER_WARMUP=0 and an empty disk cache
(no warm-up, nothing stored): the state before the warm-up and the disk cache. With
--compare=DIR, the same pages also from another checkout of the app (e.g. `git archive main`
unpacked there), each right after this one's, so both meet the same load on a shared machine;
--compare-store=MODULE names the module that fills that checkout's disk cache when it is not
this one's (a checkout from before the store moved).

Click to chart: on a warm page, the time from the pointer going down on another head in the
Heatmap's head picker until the page's script has run again, is idle and every chart has
drawn (bench/pages.py's pick); at 16 and 2,048 tokens, against the same click on a bare
page with a selectbox and one chart.

"Corpus" is the Corpus page's default view, read from the corpus results shipped with the
code (attention/data/corpus). "Does the model use it?" is the Importance page's link as the page writes it (its corpus,
words-only switch and layer after the sidebar's spec): its default view, read from the
results shipped with the code (attention/data/importance); no model is loaded for it.

--pages=Corpus,Score analysis: those pages only (their English titles, or "Is sharper better?
(sentence model)": that page with ?sh_model=sentence), beside the bare page.
--quick: one round, the bare page, the Heatmap and the Importance page only (no disk cache to
fill; their three servers started side by side before the round, each still cold when its link
comes), and one head click at 16 and at 512 tokens: the quick run's (bench/browser_heatmap.
quick_clicks, on its shared servers); ratios not held to their targets.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from attention.diskcache import ENV as CACHE_ENV
from attention.i18n import catalog
from attention.ui.pages import PAGES as LISTED
from bench.browser import done_ms
from bench.browser_heatmap import Session, named, quick_clicks
from bench.pages import HEAD_PICKER, QUICK_BIG, click_times, context, launch, spec_url
from bench.servers import BARE, server, servers
from bench.timing import print_table, row

IMPORTANCE = "Does the model use it?"
# Every page of the app (attention/ui/pages.py), by its English title: its link's path, the
# Importance page's with the view settings it writes itself.
LINKS = {"nav.importance": "?imp_corpus=bundled%3Aen&imp_words=True&imp_layer=5"}
PAGES = {catalog("en")[entry.title]: entry.url_path + LINKS.get(entry.title, "")
         for entry in LISTED}
QUICK_PAGES = ("Heatmap", IMPORTANCE)
# The Sharper page's other variant: its real-models section on the sentence model (MiniLM's
# retrieval sweeps) instead of the causal LM; the done-when of its issue holds both to 2x.
SENTENCE = "Is sharper better? (sentence model)"
PAGES[SENTENCE] = PAGES["Is sharper better?"] + "?sh_model=sentence"


def cold_server(script: str | None, cache: str, cwd: str | None = None, warmup: bool = True):
    """A server that has served nothing yet. script None: `streamlit run app.py`; else
    `streamlit run script`. cache: the disk cache. cwd: another checkout of the app to start
    (default: this one). warmup False: with ATTENTION_EXPLORER_WARMUP=0."""
    from tests.conftest import ROOT

    return server(script, cwd=cwd or ROOT, warmup=warmup, env={CACHE_ENV: cache})


def cold_paint(browser, script: str | None, path: str | None, cache: str, n: int = 11,
               timeout: float = 600_000, cwd: str | None = None, warmup: bool = True,
               srv=None) -> float:
    """ms from navigation start to a settled page, the link being a new server's first request.

    path None: the root page (the bare script), else the app's page `path` with an n-token
    spec. srv: the server (cold_server(script, cache, cwd, warmup)) if started already, else
    started here; stopped at the end."""
    srv = srv or cold_server(script, cache, cwd, warmup)
    ctx = context(browser)
    try:
        page = ctx.new_page()
        url = f"{srv.url}/" if path is None else spec_url(srv.url, path, n)
        page.goto(url)
        return done_ms(page, timeout)
    finally:
        ctx.close()
        srv.stop()


def clicks(browser, url: str, rounds: int) -> float:
    """Median click-to-chart ms for alternating head changes on one warm page (the run
    counting of bench/browser_heatmap.py, which sees a rerun however quick)."""
    label, options = HEAD_PICKER
    return statistics.median(click_times(browser, url, label, options, rounds))


EMPTY = "Is sharper better? (empty disk cache: the shipped seed)"
TRAINED = "Is sharper better? (seed 3, trained on the visit)"
BEFORE = " (before: ATTENTION_EXPLORER_WARMUP=0, empty disk cache)"
COMPARED = " (--compare checkout)"


def _measurements(bare: str, before: bool, compare: str | None = None, quick: bool = False,
                  only: tuple[str, ...] = ()
                  ) -> dict[str, tuple[str | None, str | None, bool, str | None, bool]]:
    """name -> (script, page path, empty disk cache, checkout or None, warm-up) of each
    measurement; with `compare` (another checkout), its app on the same pages, in the same
    rounds. quick: the bare page and QUICK_PAGES only (or the pages `only` names)."""
    out = {"bare page": (bare, None, True, None, True)}
    chosen = only or (QUICK_PAGES if quick else ())
    pages = {name: PAGES[name] for name in chosen} if chosen else PAGES
    out.update({name: (None, path, False, None, True) for name, path in pages.items()})
    if not quick and not only:
        out[EMPTY] = (None, PAGES["Is sharper better?"], True, None, True)
        out[TRAINED] = (None, PAGES["Is sharper better?"] + "?sh_seed=3", True, None, True)
    if before:
        out.update({name + BEFORE: (None, path, True, None, False) for name, path in pages.items()})
    if compare:
        out.update({name + COMPARED: (None, path, empty, compare, warmup)
                    for name, (script, path, empty, _, warmup) in list(out.items())
                    if script is None})
    return out


STORE = "attention.experiment.store"   # the module whose `python -m` fills a disk cache


def _started(plan: dict, caches: dict[str, str]) -> dict:
    """name -> a cold_server for each measurement in `caches` (its disk cache), all started at
    once: each start mostly waits on its own process."""
    def start(name: str):
        script, _, _, checkout, warmup = plan[name]
        return cold_server(script, caches[name], checkout, warmup)

    with ThreadPoolExecutor(len(caches)) as pool:
        return dict(zip(caches, pool.map(start, caches)))


def _clicks(browser, bare: str, rounds: int, sizes=(16, 2048)) -> dict[str, float]:
    app, base = server(), server(bare)
    try:
        click = {"bare page": clicks(browser, f"{base.url}/", rounds)}
        for n in sizes:
            click[f"heatmap n={n}"] = clicks(browser, spec_url(app.url, "Heatmap", n), rounds)
        return click
    finally:
        app.stop()
        base.stop()


def _quick_clicks(browser) -> dict[str, float]:
    """The same head clicks at 16 and QUICK_BIG tokens, one each: those of the quick run's
    one pass of clicks (bench/browser_heatmap.quick_clicks, on the shared servers), made
    here only if it has not run."""
    with servers() as srv:
        got = quick_clicks(Session(srv, browser), ("bare page", "heatmap n=16", "heatmap n=2048"))
    return {named(name, QUICK_BIG): ms for name, (ms, _) in got.items()}


def run(rounds: int = 2, click_rounds: int = 6, before: bool = False,
        clicks_too: bool = True, compare: str | None = None, quick: bool = False,
        only: tuple[str, ...] = (), compare_store: str = STORE) -> list[dict]:
    from playwright.sync_api import sync_playwright

    from tests.conftest import ROOT

    if quick:
        rounds = 1
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        bare = Path(tmp) / "bare_page.py"
        bare.write_text(BARE)
        filled = str(Path(tmp) / "cache")
        # each checkout fills its own: the stored results are keyed by the code that made them
        fills = {None: filled, compare: str(Path(tmp) / "cache-compared")} if compare else \
            {None: filled}
        stores = {None: STORE, compare: compare_store}
        for checkout, directory in fills.items():
            if quick:           # the Heatmap reads no stored experiment
                os.makedirs(directory, exist_ok=True)
                continue
            subprocess.run([sys.executable, "-m", stores[checkout]], check=True,
                           cwd=checkout or ROOT, env={**os.environ, CACHE_ENV: directory},
                           capture_output=True)
        plan = _measurements(str(bare), before, compare, quick, only)
        cold: dict[str, list[float]] = {name: [] for name in plan}
        browser = launch(p)
        # The baseline opens and closes every round: every ratio rests on it, and on a shared
        # machine one sample of a 2-3 s page swings by seconds.
        pages = [name for name in cold if name != "bare page" and not name.endswith(COMPARED)]
        pairs = [n for name in pages for n in (name, name + COMPARED) if n in cold]
        names = ["bare page", *pairs] + ([] if quick else ["bare page"])
        for r in range(rounds):
            order = names if r % 2 == 0 else names[::-1]
            caches = {name: tempfile.mkdtemp(dir=tmp) if plan[name][2] else fills[plan[name][3]]
                      for name in order}
            # quick: the round's servers started side by side beforehand (idle until visited)
            started = _started(plan, caches) if quick else {}
            for name in order:
                script, path, _, checkout, warmup = plan[name]
                cold[name].append(cold_paint(browser, script, path, caches[name], cwd=checkout,
                                             warmup=warmup, srv=started.get(name)))
                print(f"round {r}: {name}: {cold[name][-1]:.0f} ms, load {os.getloadavg()[0]:.1f}",
                      file=sys.stderr, flush=True)
        os.environ[CACHE_ENV] = filled
        click = {} if not clicks_too else _quick_clicks(browser) if quick else \
            _clicks(browser, str(bare), click_rounds)
        browser.close()
    paint = {name: statistics.median(ts) for name, ts in cold.items()}
    rows = [row(f"cold first paint: {name}", "bare page on a cold server",
                paint[name] / paint["bare page"], 2.0,
                f"{paint[name]:.0f} ms vs {paint['bare page']:.0f} ms")
            for name in paint if name != "bare page"]
    rows += [row(f"head change, click to chart: {name}", "same click on a bare page",
                 click[name] / click["bare page"], 2.0,
                 f"{click[name]:.0f} ms vs {click['bare page']:.0f} ms")
             for name in click if name != "bare page"]
    rows.append(row("load average (context)", "-", 0.0, float("inf"),
                    f"{load[0]:.1f} -> {os.getloadavg()[0]:.1f}"))
    return rows


if __name__ == "__main__":
    rounds = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--rounds=")), 2)
    compare = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--compare=")), None)
    only = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--pages=")), "")
    store = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--compare-store=")),
                 STORE)
    print_table(run(rounds=rounds, before="--before" in sys.argv,
                    clicks_too="--no-clicks" not in sys.argv, compare=compare,
                    quick="--quick" in sys.argv, only=tuple(filter(None, only.split(","))),
                    compare_store=store))
