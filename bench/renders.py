"""React renders a click costs in the browser: a count, not a time, so it holds on a noisy
machine and tells which elements a click draws again.

A click reruns only a fragment on the server, but in the browser Streamlit re-renders the
whole app on each of the three or four big commits of a rerun (the run starting, the deltas,
the run finishing): every function component on the page, sidebar included, is called again
unless React skips it. This counts, per click, the function components that did work in
each commit (a fake React DevTools hook, bench/pages.HOOK, installed before React loads: a
fiber rendered in a commit is one that is new since the previous commit and carries React's
PerformedWork flag), grouped by the Streamlit element they sit in. On a 2,048-token view
change, the query row's picker of 2,048 options was about 6,000 renders a click before it
became a number input past 256 tokens (heatmap_view.ROW_OPTIONS_MAX).

    python -m bench renders          # ratios against the same click on a bare page
    python -m bench.renders --detail # also the elements that render the most
    python -m bench.renders --quick  # every row at 512 tokens for 2,048, one click, one tab

Each row: component renders per click (median of 4 clicks after 2 warm-ups), against the
same kind of click's on a bare page (bench/browser_heatmap.same_click). No target: the time
that follows from it is bench/browser_heatmap.py's. --quick: the renders of the one click per
row that bench/browser_heatmap.quick_clicks times (made once per quick run, on its shared
servers).
"""
from __future__ import annotations

import statistics
import sys

from bench.browser_heatmap import (BARES, CLICKS, click_urls, named, quick_clicks, same_click,
                                   session)
from bench.pages import HOOK, QUICK_BIG, click_times, pick_counted
from bench.timing import print_table, row

CLICKS_PER_PAGE = 4


def count_clicks(browser, url: str, label: str, options: tuple[str, str],
                 clicks: int = CLICKS_PER_PAGE, warmups: int = 2) -> list[dict]:
    """{commits, renders, by} of `clicks` alternating choices, after `warmups` others."""
    return [counts for _, counts in click_times(browser, url, label, options, clicks,
                                                warmups=warmups, timer=pick_counted,
                                                scripts=(HOOK,))]


def measure(quick: bool = False) -> dict[str, list[dict]]:
    with session() as s:
        if quick:       # the quick run's one pass of clicks, shared with browser_heatmap
            return {name: [counts] for name, (_, counts) in quick_clicks(s).items()}
        urls = click_urls(s.servers["app"].url, s.servers["bare"].url)
        return {name: count_clicks(s.browser, url, *CLICKS[name]) for name, url in urls.items()}


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
        shown = named(name, QUICK_BIG if quick else 2048)
        rows.append(row(f"component renders a click: {shown}", same_click(name),
                        renders[name] / bare, float("inf"),
                        f"{renders[name]:.0f} vs {bare:.0f} renders, {commits[name]:.0f} commits,"
                        f" sidebar {side:.0f}" + (f"; most: {top}" if detail else "")))
    return rows


if __name__ == "__main__":
    print_table(run(detail="--detail" in sys.argv, quick="--quick" in sys.argv))
