"""What the browser benchmarks (bench/cold_link.py, bench/browser_heatmap.py) share: the probe
they inject into every page (Playwright's add_init_script) and how they start Chromium.

The probe runs every animation frame and records, on `window`:
  __inserted  when the first chart in the main area was inserted (a MutationObserver, which
              runs before the chart's asynchronous embedding);
  __painted   when that first chart had drawn;
  __all       the first moment after __painted when the script was idle and every chart in
              the main area had drawn;
  __runs      how many script runs were seen (the app's state attribute flipping to
              "running");
  __ready()   is the app connected, its script idle, no widget skeleton left, a title shown
              and every chart in the main area drawn?
  __done      when __ready() last became true after a run (undefined while it is false).
A chart has drawn when it shows a loaded image, a canvas with a painted pixel, or an SVG
with marks in it.
"""
from __future__ import annotations

import shutil

PROBE = """
(() => {
  // Vega charts, and the canvas heatmaps (attention/ui/canvas.js: drawn once data-drawn is
  // set and no figure is pending).
  const sel = '[data-testid="stMain"] [data-testid="stVegaLiteChart"], [data-testid="stMain"] .ae-heatmap';
  // A canvas once seen painted stays painted (Vega clears and redraws it within one frame),
  // so its pixels are read until then only: reading a big canvas every frame would load the
  // main thread the probe is timing.
  const painted = new WeakSet();
  const drawn = (el) => {
    if (el.classList.contains('ae-heatmap')) return !!el.dataset.drawn && !el.dataset.pending;
    const img = el.querySelector('img');
    if (img) return img.complete && img.naturalWidth > 0;
    const cv = el.querySelector('canvas');
    if (cv && painted.has(cv)) return true;
    if (cv && cv.width) {
      const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
      for (let i = 3; i < d.length; i += 4 * 29) if (d[i]) { painted.add(cv); return true; }
      return false;
    }
    return !!el.querySelector(
      'svg .role-mark path, svg .role-mark text, svg .mark-rect path, svg .mark-text text');
  };
  const charts = () => [...document.querySelectorAll(sel)];
  new MutationObserver((_, observer) => {
    if (document.querySelector(sel)) { window.__inserted = performance.now(); observer.disconnect(); }
  }).observe(document, {subtree: true, childList: true});
  window.__runs = 0;
  let state = null;
  window.__ready = () => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-connection-state') !== 'CONNECTED') return false;
    if (app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (document.querySelector('[data-testid="stSkeleton"]')) return false;
    if (!document.querySelector('[data-testid="stMain"] h1')) return false;
    return charts().every(drawn);
  };
  const idle = '[data-testid="stApp"][data-test-script-state="notRunning"]';
  const tick = () => {
    const first = document.querySelector(sel);
    if (window.__painted === undefined && first && drawn(first)) window.__painted = performance.now();
    if (window.__all === undefined && window.__painted !== undefined
        && document.querySelector(idle) && charts().every(drawn)) window.__all = performance.now();
    const app = document.querySelector('[data-testid="stApp"]');
    const now = app && app.getAttribute('data-test-script-state');
    if (now === 'running' && state !== 'running') window.__runs += 1;
    state = now;
    if (window.__runs > 0 && window.__ready()) {
      if (window.__done === undefined) window.__done = performance.now();
    } else {
      window.__done = undefined;
    }
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})();
"""


def done_ms(page, timeout: float) -> float:
    """The probe's ready time (`__done`), read in the same poll that sees it: a later frame
    may clear it again."""
    return page.wait_for_function("() => window.__done", timeout=timeout,
                                  polling=50).json_value()


def chromium() -> str:
    """The Chromium executable Playwright drives (Debian's; Playwright's own download does
    not work on these machines)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise RuntimeError("no chromium on PATH (apt-get install chromium)")
    return exe
