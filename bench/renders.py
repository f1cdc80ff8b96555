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
    python -m bench.renders --quick  # the head clicks only, 256 tokens for 2,048, 1 + 2 clicks

Each row: component renders per click (median of 4 clicks after 2 warm-ups), against the
same kind of click's on a bare page (bench/browser_heatmap.same_click). No target: the time
that follows from it is bench/browser_heatmap.py's.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

from bench.browser_heatmap import BARES, CLICKS, QUICK_CLICKS, click_urls, same_click
from bench.pages import BARE, RUNS, context, launch, pick, server
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


def count_clicks(browser, url: str, label: str, options: tuple[str, str],
                 clicks: int = CLICKS_PER_PAGE, warmups: int = 2) -> list[dict]:
    """{commits, renders, by} of `clicks` alternating choices, after `warmups` others."""
    ctx = context(browser)
    ctx.add_init_script(HOOK)
    ctx.add_init_script(RUNS)
    try:
        page = ctx.new_page()
        page.goto(url)
        page.wait_for_function(
            "() => window.__done !== undefined"
            " || (window.__msgs > 0 && window.__clicked !== undefined)",
            timeout=600_000, polling=50)
        for r in range(warmups):
            pick(page, label, options[r % 2])
        counts = []
        for r in range(warmups, warmups + clicks):
            page.evaluate("() => { window.__fib = {commits: 0, renders: 0, by: {}}; }")
            pick(page, label, options[r % 2])
            counts.append(page.evaluate("() => window.__fib"))
        return counts
    finally:
        ctx.close()


def measure(quick: bool = False) -> dict[str, list[dict]]:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        (Path(tmp) / "bare_page.py").write_text(BARE)
        app, base = server(), server(str(Path(tmp) / "bare_page.py"))
        try:
            browser = launch(p)
            urls = click_urls(app.url, base.url, 256 if quick else 2048)
            if quick:
                urls = {name: urls[name] for name in QUICK_CLICKS}
            out = {name: count_clicks(browser, url, *CLICKS[name],
                                      clicks=2 if quick else CLICKS_PER_PAGE,
                                      warmups=1 if quick else 2)
                   for name, url in urls.items()}
            browser.close()
            return out
        finally:
            app.stop()
            base.stop()


def run(detail: bool = False, quick: bool = False) -> list[dict]:
    counts = measure(quick)
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
        shown = name.replace("n=2048", "n=256") if quick else name
        rows.append(row(f"component renders a click: {shown}", same_click(name),
                        renders[name] / bare, float("inf"),
                        f"{renders[name]:.0f} vs {bare:.0f} renders, {commits[name]:.0f} commits,"
                        f" sidebar {side:.0f}" + (f"; most: {top}" if detail else "")))
    return rows


if __name__ == "__main__":
    print_table(run(detail="--detail" in sys.argv, quick="--quick" in sys.argv))
