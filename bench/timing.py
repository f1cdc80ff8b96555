"""Shared helpers for the benchmarks: interleaved timing and the result table.

Every benchmark module exposes `run() -> list[dict]`; each row has `name`, `baseline` (what
the ratio is measured against, in the same run), `ratio` and `target` (the largest ratio
that meets the goal), plus a short `detail`.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable


def interleaved_medians(fns: dict[str, Callable[[], object]], repeats: int,
                        warmup: int = 1) -> dict[str, float]:
    """Median CPU seconds per function, running them in turn (order reversed every other
    round) so that a machine slowing down or speeding up hits all of them alike.

    CPU time of this process, not wall time: the benchmarks run torch on one thread, and on a
    shared machine wall time mostly measures the neighbours."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for r in range(repeats):
        for name in names if r % 2 == 0 else reversed(names):
            start = time.process_time()
            fns[name]()
            times[name].append(time.process_time() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def row(name: str, baseline: str, ratio: float, target: float, detail: str = "") -> dict:
    return {"name": name, "baseline": baseline, "ratio": ratio, "target": target,
            "ok": ratio <= target, "detail": detail}


def _ok(r: dict) -> str:
    """yes / NO, or "-" for a row not held to its target (`held` False: a quick run)."""
    if not r.get("held", True):
        return "-"
    return "yes" if r["ok"] else "NO"


def print_table(rows: list[dict]) -> None:
    width = max(len(r["name"]) for r in rows)
    base = max(len(r["baseline"]) for r in rows)
    print(f"{'benchmark':<{width}}  {'baseline':<{base}}  {'ratio':>7}  {'target':>7}  ok   detail")
    for r in rows:
        print(f"{r['name']:<{width}}  {r['baseline']:<{base}}  {r['ratio']:>7.2f}  "
              f"{'<= ' + format(r['target'], 'g'):>7}  {_ok(r):<4} "
              f"{r.get('detail', '')}")


def run_line(kind: str, started: str, wall: float, load_start: float, load_end: float) -> str:
    """The last line of a `python -m bench` run, which bench/table.py reads (its TRAILER)."""
    return (f"# {kind} run on {started} UTC: {wall:.0f} s wall, load average {load_start:.2f} "
            f"at the start, {load_end:.2f} at the end")
