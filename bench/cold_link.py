"""A shared link on a cold server, and the clicks after it (issue 15), in headless Chromium.

Cold first paint: for each page, a freshly started server gets the deep link as its very first
request; the time runs from navigation start until the script has finished, no widget skeleton
is left and every chart in the main area has drawn. The baseline is a bare Streamlit page
(title + one small chart) measured the same way, each on its own fresh server, in the same run,
at the start and the end of every round.

The app is started as a user starts it, `python serve.py` (the server plus its warm-up
thread), with a disk cache filled once by `python -m attention.files.experiment_cache` as the Docker
build does; the bare page with plain `streamlit run`: it stands for what Streamlit itself costs
a deployed app, and the warm-up is this app's work, so it is not given to the baseline.
"Empty disk cache" is the Sharper page on a machine that has never trained its default seed:
it reads the results shipped with the code (attention/data/experiments); "trained on the
visit" is seed 3, which is neither stored nor shipped, so the link waits for its training.
With --before, the same pages also on plain `streamlit run app.py` with an empty disk cache
(no warm-up, nothing stored): the state before the launcher and the disk cache. With
--compare=DIR, the same pages also from another checkout of the app (e.g. `git archive main`
unpacked there), each right after this one's, so both meet the same load on a shared machine.

Click to chart: on a warm page, the time from the pointer going down on another head in the
Heatmap's head picker until the page's script has run again, is idle and every chart has
drawn (bench/browser_heatmap.py's pick); at 16 and
2,048 tokens, against the same click on a bare page with a selectbox and one chart.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlencode

from attention.files.diskcache import ENV as CACHE_ENV
from attention.text.examples import EXAMPLES
from attention.spec import AttentionSpec
from attention.tokens import parse_tokens
from bench.browser import PROBE, chromium, done_ms
from bench.timing import print_table, row

# A bare page: a title, one picker and one small chart the picker changes. The picker is a
# selectbox (a cold link's page, a head or layer click); ?w=buttons makes it a segmented
# control (a view change), ?w=steps a number input (a row step): each click of the app is
# held to the same kind of click here (bench/browser_heatmap.same_click).
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
st.altair_chart(alt.Chart(pd.DataFrame({"x": list("abcdefghij"), "y": [head + i for i in range(10)]}))
                .mark_bar().encode(x="x:N", y="y:Q"))
'''

PAGES = {"Input": "", "Heatmap": "Heatmap", "Score analysis": "Score_analysis",
         "Model heads": "Model_heads", "Is sharper better?": "Is_sharper_better"}


def spec_url(base: str, path: str, n: int) -> str:
    """The page `path` (which may carry its own view parameters: "page?name=value") with an
    n-token spec."""
    path, _, view = path.partition("?")
    words = parse_tokens(EXAMPLES["passage"])
    spec = AttentionSpec(tokens=tuple((words * (n // len(words) + 1))[:n]))
    return f"{base}/{path}?{urlencode(spec.to_query())}" + (f"&{view}" if view else "")


def _context(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_init_script(PROBE)
    return context


def cold_paint(browser, script: str | None, path: str | None, cache: str, n: int = 11,
               timeout: float = 600_000, cwd: str | None = None) -> float:
    """ms from navigation start to a settled page, the link being a new server's first request.

    script None: the app via serve.py; else `streamlit run script`. path None: the root page
    (the bare script), else the app's page `path` with an n-token spec. cache: the disk cache.
    cwd: another checkout of the app to start (default: this one)."""
    from tests.conftest import ROOT, Server

    os.environ[CACHE_ENV] = cache
    server = Server(script, cwd=cwd or ROOT)
    context = _context(browser)
    try:
        page = context.new_page()
        url = f"{server.url}/" if path is None else spec_url(server.url, path, n)
        page.goto(url)
        return done_ms(page, timeout)
    finally:
        context.close()
        server.stop()


def clicks(browser, url: str, rounds: int) -> float:
    """Median click-to-chart ms for alternating head changes on one warm page (the run
    counting of bench/browser_heatmap.py, which sees a rerun however quick)."""
    from bench.browser_heatmap import HEAD_PICKER, click_times

    label, options = HEAD_PICKER
    return statistics.median(click_times(browser, url, label, options, rounds))


EMPTY = "Is sharper better? (empty disk cache: the shipped seed)"
TRAINED = "Is sharper better? (seed 3, trained on the visit)"
BEFORE = " (before: streamlit run app.py)"
COMPARED = " (--compare checkout)"


def _measurements(bare: str, before: bool, compare: str | None = None
                  ) -> dict[str, tuple[str | None, str | None, bool, str | None]]:
    """name -> (script, page path, empty disk cache, checkout or None) of each measurement;
    with `compare` (another checkout), its serve.py on the same pages, in the same rounds."""
    out = {"bare page": (bare, None, True, None)}
    out.update({name: (None, path, False, None) for name, path in PAGES.items()})
    out[EMPTY] = (None, PAGES["Is sharper better?"], True, None)
    out[TRAINED] = (None, PAGES["Is sharper better?"] + "?sh_seed=3", True, None)
    if before:
        out.update({name + BEFORE: ("app.py", path, True, None) for name, path in PAGES.items()})
    if compare:
        out.update({name + COMPARED: (None, path, empty, compare)
                    for name, (script, path, empty, _) in list(out.items()) if script is None})
    return out


def _clicks(browser, bare: str, rounds: int) -> dict[str, float]:
    from tests.conftest import Server

    app, base = Server(), Server(bare)
    try:
        click = {"bare page": clicks(browser, f"{base.url}/", rounds)}
        for n in (16, 2048):
            click[f"heatmap n={n}"] = clicks(browser, spec_url(app.url, "Heatmap", n), rounds)
        return click
    finally:
        app.stop()
        base.stop()


def run(rounds: int = 2, click_rounds: int = 6, before: bool = False,
        clicks_too: bool = True, compare: str | None = None) -> list[dict]:
    from playwright.sync_api import sync_playwright

    from tests.conftest import CHROMIUM_FLAGS, ROOT

    exe = chromium()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        bare = Path(tmp) / "bare_page.py"
        bare.write_text(BARE)
        filled = str(Path(tmp) / "cache")
        # each checkout fills its own: the stored results are keyed by the code that made them
        fills = {None: filled, compare: str(Path(tmp) / "cache-compared")} if compare else \
            {None: filled}
        for checkout, directory in fills.items():
            subprocess.run([sys.executable, "-m", "attention.files.experiment_cache"], check=True,
                           cwd=checkout or ROOT, env={**os.environ, CACHE_ENV: directory},
                           capture_output=True)
        plan = _measurements(str(bare), before, compare)
        cold: dict[str, list[float]] = {name: [] for name in plan}
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)
        # The baseline opens and closes every round: every ratio rests on it, and on a shared
        # machine one sample of a 2-3 s page swings by seconds.
        pages = [name for name in cold if name != "bare page" and not name.endswith(COMPARED)]
        pairs = [n for name in pages for n in (name, name + COMPARED) if n in cold]
        names = ["bare page", *pairs, "bare page"]
        for r in range(rounds):
            for name in names if r % 2 == 0 else reversed(names):
                script, path, empty, checkout = plan[name]
                cache = tempfile.mkdtemp(dir=tmp) if empty else fills[checkout]
                cold[name].append(cold_paint(browser, script, path, cache, cwd=checkout))
                print(f"round {r}: {name}: {cold[name][-1]:.0f} ms, load {os.getloadavg()[0]:.1f}",
                      file=sys.stderr, flush=True)
        os.environ[CACHE_ENV] = filled
        click = _clicks(browser, str(bare), click_rounds) if clicks_too else {}
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
    rows.append(row("load average (context)", "-", 0.0, 1.0,
                    f"{load[0]:.1f} -> {os.getloadavg()[0]:.1f}"))
    return rows


if __name__ == "__main__":
    rounds = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--rounds=")), 2)
    compare = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--compare=")), None)
    print_table(run(rounds=rounds, before="--before" in sys.argv,
                    clicks_too="--no-clicks" not in sys.argv, compare=compare))
