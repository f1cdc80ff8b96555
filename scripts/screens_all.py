"""Screenshots of every page, in every interface language, on a desktop and a phone:

    .venv/bin/python scripts/screens_all.py BASE_URL OUT_DIR [--lang en,zh] [--size desk,phone]
                                            [--page PATH ...]

BASE_URL is a running app (`streamlit run app.py --server.port 8631 --server.headless true`);
the pages come from the one registry, attention/ui/pages.py, so a new page is shot without
touching this script. Each page is opened on its own deep link with `?lang=`, the script waits
until the page has finished drawing (connected, its script not running, no skeleton
placeholder, no running indicator), then writes a full-page PNG:
OUT_DIR/<page or "Input">-<lang>-<size>.png. The app's main area scrolls inside its own box,
so "full page" means the viewport is made as tall as that box's content before the shot.

It prints one line per shot with the seconds the page took to draw. Look at every picture.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from attention.ui.pages import PAGES  # noqa: E402

SIZES = {"desk": (1400, 1000), "phone": (390, 844)}
LANGS = ("en", "zh")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--disable-dev-shm-usage"]

# true once the page has drawn: connected, its script finished, nothing still loading
DRAWN = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.dataset.testConnectionState !== 'CONNECTED') return false;
  if (app.dataset.testScriptState !== 'notRunning') return false;
  if (document.querySelector('[data-testid="stSkeleton"]')) return false;
  if (document.querySelector('[data-testid="stStatusWidgetRunningIcon"]')) return false;
  if (document.querySelector('[data-testid="stSpinner"]')) return false;
  return true;
}"""
# the height of everything the page drew (the main area scrolls inside its own box)
CONTENT_HEIGHT = """() => {
  let h = document.documentElement.scrollHeight;
  for (const sel of ['[data-testid="stMain"]', '[data-testid="stAppViewContainer"]']) {
    const el = document.querySelector(sel);
    if (el) h = Math.max(h, el.scrollHeight);
  }
  const bar = document.querySelector('[data-testid="stSidebar"]');   // only when it is open
  const inner = document.querySelector('[data-testid="stSidebarContent"]');
  if (bar && inner && bar.getAttribute('aria-expanded') === 'true') h = Math.max(h, inner.scrollHeight);
  return h;
}"""


def wait_drawn(page, timeout_s: float) -> float:
    """Seconds until the page has drawn and stayed drawn for a second (a page may rerun once
    after its first draw, e.g. to write its settings into the URL)."""
    start = time.monotonic()
    steady_since = None
    while time.monotonic() - start < timeout_s:
        if page.evaluate(DRAWN):
            steady_since = steady_since or time.monotonic()
            if time.monotonic() - steady_since >= 1.0:
                return steady_since - start
        else:
            steady_since = None
        page.wait_for_timeout(250)
    raise TimeoutError(f"{page.url} still drawing after {timeout_s:.0f} s")


def shoot(browser, url: str, size: tuple[int, int], out: Path, timeout_s: float) -> float:
    width, height = size
    context = browser.new_context(viewport={"width": width, "height": height},
                                  device_scale_factor=1, is_mobile=width < 600,
                                  has_touch=width < 600)
    page = context.new_page()
    try:
        page.goto(url)
        seconds = wait_drawn(page, timeout_s)
        full = int(page.evaluate(CONTENT_HEIGHT))
        if full > height:   # as tall as the content, so the shot holds all of it
            page.set_viewport_size({"width": width, "height": min(full, 16_000)})
            wait_drawn(page, timeout_s)   # charts redraw at the new size
        page.screenshot(path=str(out), full_page=True)
        return seconds
    finally:
        context.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base_url")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--lang", default=",".join(LANGS))
    parser.add_argument("--size", default=",".join(SIZES))
    parser.add_argument("--page", action="append", default=[],
                        help="a page's URL path (Heatmap, Corpus, ...; Input for app.py)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per page")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    args.out_dir.mkdir(parents=True, exist_ok=True)
    base = args.base_url.rstrip("/")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_FLAGS)
        for entry in PAGES:
            name = entry.url_path or "Input"
            if args.page and name not in args.page:
                continue
            for lang in args.lang.split(","):
                for size in args.size.split(","):
                    out = args.out_dir / f"{name}-{lang}-{size}.png"
                    seconds = shoot(browser, f"{base}/{entry.url_path}?lang={lang}",
                                    SIZES[size], out, args.timeout)
                    print(f"{out}  drawn in {seconds:.1f} s", flush=True)
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
