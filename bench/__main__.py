"""Every benchmark in one command: `python -m bench` (or `make bench`) prints one table.

Each row is a ratio against a baseline measured in the same run, never bare seconds: these
machines are small and noisy. Pass module names to run a subset: `python -m bench core`.
"""
from __future__ import annotations

import importlib
import sys
import time

import torch

from bench.timing import print_table, row

MODULES = ["core", "analysis", "threads", "apptest_rerun", "browser_heatmap", "renders", "cold_link", "pretrained",
           "models", "experiment", "importance", "memory"]


def main(names: list[str]) -> int:
    torch.set_num_threads(1)
    rows = []
    for name in names or MODULES:
        start = time.perf_counter()
        try:
            rows += [{**r, "name": f"{name}: {r['name']}"}
                     for r in importlib.import_module(f"bench.{name}").run()]
        except Exception as err:  # a broken benchmark is reported; the others still run
            rows.append(row(f"{name}: FAILED {type(err).__name__}: {err}"[:120], "-",
                            float("nan"), 0))
        print(f"# {name} took {time.perf_counter() - start:.0f} s", file=sys.stderr)
    print_table(rows)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
