"""Many users on one server: 8 browser sessions open at the same moment, each with its own spec
(tokens, seed, heads, d_k), and each sees its own tokens and numbers: the Input page's metrics
and token box, the URL's spec, and on the Heatmap page its own axis labels and its own
attention weights' colours on the canvas. Specs are chosen so a leak would show: pairs share
tokens but differ in seed or d_k, so a cache keyed on too little would hand one session the
other's weights. Meanwhile a thread polls /_stcore/health; every poll must answer 200.

Loopback only; 8 contexts in one Chromium, driven by async Playwright in its own thread.
"""
from __future__ import annotations

import asyncio
import math
import shutil
import threading
import time
import urllib.request
from urllib.parse import parse_qsl, urlencode, urlsplit

import numpy as np
import pytest
import torch

from attention.analysis import analyze
from attention.charts.colors import colorize
from attention.spec import AttentionSpec
from attention.text.tokens import tokens_to_text
from tests.conftest import CHROMIUM_FLAGS

pytestmark = pytest.mark.browser

SESSIONS = 8
TIMEOUT = 180_000   # ms for one page to settle while all 8 sessions compute at once
APP = '[data-testid="stApp"]'
FIGURE = '[data-testid="stMain"] .ae-heatmap'   # the canvas heatmap (attention/ui/canvas.js)
# RGBA of every cell of the scaled panel (n x n, query-major), read off-centre (the centre
# carries the printed weight), once the figure has painted its latest data.
PIXELS = f"""(n) => {{
  const root = document.querySelector('{FIGURE}');
  if (!root || !root.dataset.drawn || root.dataset.pending) return null;
  const c = root.querySelector('canvas');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const out = [];
  for (let r = 0; r < n; r++) for (let k = 0; k < n; k++) {{
    const x = Math.floor((k + 0.2) / n * c.width), y = Math.floor((r + 0.2) / n * c.height);
    out.push(Array.from(d.slice(4 * (y * c.width + x), 4 * (y * c.width + x) + 4)));
  }}
  return out;
}}"""


def session_spec(i: int) -> AttentionSpec:
    """Sessions 2j and 2j+1 share their tokens; odd ones change the seed or d_k."""
    pair = i // 2
    tokens = tuple(f"u{pair}t{j}" for j in range(3 + pair)) + (f"u{pair}t0",)  # one repeat
    return AttentionSpec(tokens=tokens, heads=1 + pair % 3, d_k=4 << (i % 2) * (pair % 2),
                         seed=100 + i if pair % 2 == 0 else 100 + pair, causal=pair == 3)


SPECS = [session_spec(i) for i in range(SESSIONS)]


def test_specs_differ_where_a_leak_would_show():
    assert len(set(SPECS)) == SESSIONS
    for a, b in zip(SPECS[::2], SPECS[1::2]):
        assert a.tokens == b.tokens and (a.seed, a.d_k) != (b.seed, b.d_k)
        assert not analyze(a).scaled.weights[0].allclose(analyze(b).scaled.weights[0], atol=0.01)


def expected_metrics(spec: AttentionSpec) -> list[str]:
    return [f"{spec.n:,}", f"{len(set(spec.tokens)):,}", f"{spec.heads} × {spec.d_k}",
            f"{1 / math.sqrt(spec.d_k):.4f}"]


async def settle(page) -> None:
    await page.wait_for_selector(f'{APP}[data-test-connection-state="CONNECTED"]', timeout=TIMEOUT)
    await page.wait_for_selector(f'{APP}[data-test-script-state="notRunning"]', timeout=TIMEOUT)


async def one_session(browser, base: str, i: int, start: asyncio.Event) -> dict:
    """Open the session's deep link, read what it shows, go to the Heatmap, read that."""
    from playwright.async_api import expect

    spec = SPECS[i]
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(TIMEOUT)                 # 8 sessions share the same cores
    context.set_default_navigation_timeout(TIMEOUT)
    try:
        page = await context.new_page()
        await start.wait()                               # every session opens at once
        await page.goto(f"{base}/?{urlencode(spec.to_query())}")
        await settle(page)
        # Wait for this session's own values (a leak times out here, and the values read
        # below are then checked again); never read a page that is still drawing.
        metrics = page.locator('[data-testid="stMetricValue"]')
        await expect(metrics).to_have_text(expected_metrics(spec), timeout=TIMEOUT)
        box = page.locator('[data-testid="stSidebar"] textarea').first
        await expect(box).to_have_value(tokens_to_text(spec.tokens), timeout=TIMEOUT)
        seen = {"metrics": await metrics.all_inner_texts(), "box": await box.input_value(),
                "url": dict(parse_qsl(urlsplit(page.url).query))}
        await page.locator('[data-testid="stSidebar"] a', has_text="Heatmap").click()
        await page.wait_for_url("**/Heatmap?**", timeout=TIMEOUT)
        await settle(page)
        labels = page.locator(f"{FIGURE} .ae-ylabels .ae-label")          # the query axis
        await expect(labels).to_have_text(list(spec.tokens), timeout=TIMEOUT)
        await page.wait_for_function(f"(n) => ({PIXELS})(n) !== null", arg=spec.n,
                                     timeout=TIMEOUT)
        heatmap_box = page.locator('[data-testid="stSidebar"] textarea').first
        await expect(heatmap_box).to_have_value(tokens_to_text(spec.tokens), timeout=TIMEOUT)
        seen["labels"] = await labels.all_text_contents()
        seen["pixels"] = await page.evaluate(PIXELS, spec.n)
        seen["heatmap_box"] = await heatmap_box.input_value()
        return seen
    finally:
        await context.close()


def expected_colours(spec: AttentionSpec) -> np.ndarray:
    """(n, n, 4) colours of head 0's scaled panel for this spec: its weights on the scale the
    scaled and unscaled panels share; masked cells transparent."""
    a = analyze(spec)
    w, u = a.scaled.weights[0].double(), a.unscaled.weights[0].double()   # (n, n)
    allowed = a.mask if spec.causal else torch.ones_like(w, dtype=torch.bool)
    top = max(float(w[allowed].max()), float(u[allowed].max()))
    colours = colorize(w.masked_fill(~allowed, float("nan")).numpy(), (0.0, top), "blues")
    colours[colours[..., 3] == 0] = 0          # a canvas reads a transparent pixel as 0, 0, 0, 0
    return colours


async def all_sessions(base: str) -> list:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=shutil.which("chromium"),
                                          args=CHROMIUM_FLAGS)
        try:
            start = asyncio.Event()
            tasks = [asyncio.create_task(one_session(browser, base, i, start))
                     for i in range(SESSIONS)]
            await asyncio.sleep(0.5)
            start.set()
            return await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True),
                                          timeout=4 * TIMEOUT / 1000)
        finally:
            await browser.close()


def poll_health(url: str, stop: threading.Event, answers: list, waits: list) -> None:
    """GET /_stcore/health every 0.25 s. The timeout is generous: the server shares the
    machine's cores with 8 Chromium renderers, and a slow answer is not a refusal."""
    while not stop.is_set():
        began = time.monotonic()
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=60) as r:
                answers.append(r.status)
        except OSError as err:      # HTTPError, refused, timed out: all count as failures
            answers.append(repr(err))
        waits.append(time.monotonic() - began)
        stop.wait(0.25)


def test_eight_concurrent_sessions_each_see_their_own_view(server, chromium):
    # `chromium` only to skip (or fail under CI) like every browser test when none exists.
    assert shutil.which("chromium") or shutil.which("chromium-browser")
    answers, waits, stop = [], [], threading.Event()
    poller = threading.Thread(target=poll_health, args=(server.url, stop, answers, waits),
                              daemon=True)
    results = []
    runner = threading.Thread(
        target=lambda: results.append(asyncio.run(all_sessions(server.url))), daemon=True)
    poller.start()
    began = time.monotonic()
    runner.start()
    runner.join(timeout=5 * TIMEOUT / 1000)
    stop.set()
    poller.join(timeout=15)
    assert results, f"sessions did not finish within {time.monotonic() - began:.0f} s"

    failures = [f"session {i}: {r!r}" for i, r in enumerate(results[0])
                if isinstance(r, BaseException)]
    assert not failures, "\n".join(failures)
    for i, (spec, seen) in enumerate(zip(SPECS, results[0])):
        own = f"session {i}"
        assert seen["metrics"] == expected_metrics(spec), own
        assert seen["box"] == tokens_to_text(spec.tokens), (own, "Input page", seen)
        assert seen["heatmap_box"] == tokens_to_text(spec.tokens), (own, "Heatmap page", seen)
        assert AttentionSpec.from_query(seen["url"]) == spec, own
        assert seen["labels"][:spec.n] == list(spec.tokens), own          # query axis
        np.testing.assert_allclose(np.array(seen["pixels"]).reshape(spec.n, spec.n, 4),
                                   expected_colours(spec), atol=2, err_msg=own)

    # The server answered its health check throughout, and was polled throughout.
    assert len(answers) >= 4, answers
    assert all(a == 200 for a in answers), [a for a in answers if a != 200][:5]
    print(f"\nhealth: {len(answers)} polls, all 200; slowest answer {max(waits):.2f} s, "
          f"median {sorted(waits)[len(waits) // 2]:.3f} s")
