"""React renders a click costs in the browser: a count, not a time, so it holds on a noisy
machine and tells which elements a click draws again.

A click reruns only a fragment on the server, but in the browser Streamlit re-renders the
whole app on each of the three or four big commits of a rerun (the run starting, the deltas,
the run finishing): every function component on the page, sidebar included, is called again
unless React skips it. This counts, per click, the function components that did work in
each commit (a fake React DevTools hook, installed before React loads: a fiber rendered in
a commit is one that is new since the previous commit and carries React's PerformedWork
flag), grouped by the Streamlit element they sit in. On a 2,048-token view change, the
query row's picker of 2,048 options was about 6,000 renders a click before it became a
number input past 256 tokens (heatmap_view.ROW_OPTIONS_MAX).

    python -m bench renders          # ratios against the same click on a bare page
    python -m bench.renders --detail # also the elements that render the most

Each row: component renders per click (median of 4 clicks after 2 warm-ups), against the
same kind of click's on a bare page (bench/browser_heatmap.same_click). No target: the time
that follows from it is bench/browser_heatmap.py's.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

from bench.browser import chromium
from bench.browser_heatmap import BARES, same_click
from bench.timing import print_table, row

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
CLICKS_PER_PAGE = 4


def count_clicks(browser, url: str, label: str, options: tuple[str, str]) -> list[dict]:
    """{commits, renders, by} of CLICKS_PER_PAGE alternating choices, after two warm-ups."""
    from bench.browser_heatmap import RUNS, pick
    from bench.cold_link import _context

    context = _context(browser)
    context.add_init_script(HOOK)
    context.add_init_script(RUNS)
    try:
        page = context.new_page()
        page.goto(url)
        page.wait_for_function("() => window.__done !== undefined", timeout=600_000, polling=50)
        for r in range(2):
            pick(page, label, options[r % 2])
        counts = []
        for r in range(CLICKS_PER_PAGE):
            page.evaluate("() => { window.__fib = {commits: 0, renders: 0, by: {}}; }")
            pick(page, label, options[r % 2])
            counts.append(page.evaluate("() => window.__fib"))
        return counts
    finally:
        context.close()


def measure() -> dict[str, list[dict]]:
    from playwright.sync_api import sync_playwright

    from bench.browser_heatmap import CLICKS, click_urls
    from bench.cold_link import BARE
    from tests.conftest import CHROMIUM_FLAGS, Server

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        (Path(tmp) / "bare_page.py").write_text(BARE)
        app, base = Server(), Server(str(Path(tmp) / "bare_page.py"))
        try:
            browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
            urls = click_urls(app.url, base.url)
            out = {name: count_clicks(browser, url, *CLICKS[name]) for name, url in urls.items()}
            browser.close()
            return out
        finally:
            app.stop()
            base.stop()


def run(detail: bool = False) -> list[dict]:
    counts = measure()
    renders = {name: statistics.median(c["renders"] for c in cs) for name, cs in counts.items()}
    commits = {name: statistics.median(c["commits"] for c in cs) for name, cs in counts.items()}
    rows = []
    for name in renders:
        if name in BARES:
            continue
        bare = renders[same_click(name)]
        by: dict[str, float] = {}
        for c in counts[name]:
            for where, n in c["by"].items():
                by[where] = by.get(where, 0) + n / len(counts[name])
        side = sum(n for where, n in by.items() if where.startswith("side:"))
        top = ", ".join(f"{w} {n:.0f}" for w, n in sorted(by.items(), key=lambda kv: -kv[1])[:4])
        rows.append(row(f"component renders a click: {name}", same_click(name),
                        renders[name] / bare, float("inf"),
                        f"{renders[name]:.0f} vs {bare:.0f} renders, {commits[name]:.0f} commits,"
                        f" sidebar {side:.0f}" + (f"; most: {top}" if detail else "")))
    return rows


if __name__ == "__main__":
    print_table(run(detail="--detail" in sys.argv))
