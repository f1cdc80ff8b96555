"""Every benchmark in one command: `python -m bench` (or `make bench`) prints one table.

Each row is a ratio against a baseline measured in the same run, never bare seconds: these
machines are small and noisy.

    python -m bench                  every module in MODULES, full sizes (10-20 minutes)
    python -m bench --quick          every module on small sizes (under 2 minutes on 2 cores):
                                     the ratios are printed, not held to their targets; the
                                     browser modules share one set of servers
                                     (bench/servers.shared_servers)
    python -m bench core models      a subset (any module of bench/, e.g. model_page)

Exit status: 1 when a module raised (its row says FAILED and why; the others still run), else
0, in both modes: a ratio over its target is a result to read (the `ok` column), not a crash.

Adding a module: write bench/<name>.py with

    def run(quick: bool = False) -> list[dict]:     # rows made with bench.timing.row(...)

(the baseline measured in the same run; with quick=True, small sizes and few repeats, so the
whole quick run stays near 2 minutes) and append "<name>" to MODULES below. A module whose
run() takes no `quick` is run as is in both modes; one that only has `main(quick)` returning
row dicts is called that way in quick mode.
"""
from __future__ import annotations

import importlib
import inspect
import os
import sys
import time
import traceback
from contextlib import nullcontext
from datetime import datetime, timezone

import torch

from bench.servers import shared_servers
from bench.timing import print_table, row, run_line

MODULES = ["core", "analysis", "threads", "apptest_rerun", "browser_heatmap", "renders",
           "cold_link", "pretrained", "models", "smollm2", "experiment", "importance",
           "memory", "qkmap", "corpus", "sweeps", "image"]


def _takes_quick(fn) -> bool:
    return fn is not None and "quick" in inspect.signature(fn).parameters


def _as_rows(results: list[dict], name: str) -> list[dict]:
    """Row dicts as they are; a module's own result dicts (e.g. bench/qkmap.main's: method,
    ratio) as context rows, no target."""
    out = []
    for r in results:
        if {"name", "baseline", "ratio", "target", "ok"} <= set(r):
            out.append(r)
        else:
            label = r.get("method") or r.get("name") or "?"
            out.append(row(str(label), "first row", float(r.get("ratio", float("nan"))),
                           float("inf"), ", ".join(f"{k} {v:.3g}" if isinstance(v, float)
                                                   else f"{k} {v}" for k, v in r.items()
                                                   if k not in ("method", "ratio"))))
    return out


def run_module(name: str, quick: bool) -> list[dict]:
    module = importlib.import_module(f"bench.{name}")
    run = getattr(module, "run", None)
    if quick and not _takes_quick(run) and _takes_quick(getattr(module, "main", None)):
        return _as_rows(module.main(quick=True), name)
    if run is None:
        raise AttributeError(f"bench.{name} has no run()")
    return run(quick=quick) if _takes_quick(run) else run()


def run_modules(names: list[str], quick: bool) -> tuple[list[dict], int]:
    """Every module's rows, each named after its module, and how many modules raised."""
    rows, failed = [], 0
    for name in names:
        start = time.perf_counter()
        try:
            got = run_module(name, quick)
        except Exception as err:  # a broken benchmark is reported; the others still run
            failed += 1
            traceback.print_exc()
            first = (str(err).splitlines() or [""])[0]      # one line: the table's row
            got = [row(f"FAILED {type(err).__name__}: {first}"[:160], "-", float("nan"), 0)]
        took = time.perf_counter() - start
        rows += [{**r, "name": f"{name}: {r['name']}"} for r in got]
        print(f"# {name} took {took:.0f} s", file=sys.stderr, flush=True)
    return rows, failed


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    names = [a for a in argv if not a.startswith("-")] or MODULES
    torch.set_num_threads(1)
    load = os.getloadavg()
    began = time.perf_counter()
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")
    with shared_servers() if quick else nullcontext():
        rows, failed = run_modules(names, quick)
    if quick:       # printed, not held: a small size says little about a target
        rows = [{**r, "held": "FAILED" in r["name"]} for r in rows]
    print_table(rows)
    print(run_line("quick" if quick else "full", started, time.perf_counter() - began,
                   load[0], os.getloadavg()[0]), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
