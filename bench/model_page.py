"""The Model heads page on MiniLM, this tree against a baseline tree (issue 13: "MiniLM stays the
default view and costs no more than today"), in headless Chromium, measured in the same run.

Cold first paint as bench/cold_link.py measures it (the deep link is a fresh server's first
request; until the script is idle, no skeleton is left and every chart has drawn), for the
same MiniLM link served from this repository and from `BASELINE_ROOT` (e.g. an export of
main: `git archive main | tar -x -C /tmp/main_copy`), rounds interleaved. Also the server's
script time: one AppTest run of the page, warm caches, each tree in its own interpreter.

    BASELINE_ROOT=/tmp/main_copy python -m bench.model_page
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

from attention.spec import AttentionSpec
from bench.browser import done_ms
from bench.pages import context
from bench.timing import row

ROOT = Path(__file__).resolve().parent.parent
SPEC = AttentionSpec(tokens=tuple("the animal didn't cross the street because it was too tired"
                                  .split()), source="pretrained")
SCRIPT_TIME = """
import json, sys, time, torch
torch.set_num_threads(1)
sys.path.insert(0, ".")
from tests.apptest import open_page
from attention.spec import AttentionSpec
spec = AttentionSpec.from_query(json.loads(sys.argv[1]))
open_page("pages/3_Model_heads.py", spec)            # warm: model loaded, report cached
times = []
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    at = open_page("pages/3_Model_heads.py", spec)
    times.append(time.perf_counter() - start)
    assert not at.exception
times.sort()
print(json.dumps({"seconds": times[len(times) // 2]}))
"""


def tree_server(root: Path):
    """tests.conftest.Server (`streamlit run app.py` on a free port), run from `root`."""
    from tests.conftest import Server, free_port

    server = Server.__new__(Server)
    server.port = free_port()
    server.url = f"http://127.0.0.1:{server.port}"
    env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
           "PYTHONPATH": str(root)}
    server.proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
         "--server.port", str(server.port), "--server.address", "127.0.0.1"],
        cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while not server.healthy():
        if time.time() > deadline:
            server.stop()
            raise RuntimeError(f"streamlit from {root} did not start")
        time.sleep(0.2)
    return server


def cold_paint(browser, root: Path, timeout: float = 600_000) -> float:
    server = tree_server(root)
    ctx = context(browser)
    try:
        page = ctx.new_page()
        page.goto(f"{server.url}/Model_heads?{urlencode(SPEC.to_query())}")
        return done_ms(page, timeout)
    finally:
        ctx.close()
        server.stop()


def script_seconds(root: Path, repeats: int) -> float:
    out = subprocess.run([sys.executable, "-c", SCRIPT_TIME, json.dumps(SPEC.to_query()),
                          str(repeats)], cwd=root, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1"})
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def run(rounds: int = 3, repeats: int = 5, quick: bool = False) -> list[dict]:
    """Not in bench.__main__.MODULES: it needs BASELINE_ROOT (`python -m bench model_page`)."""
    baseline = os.environ.get("BASELINE_ROOT")
    if not baseline:
        return [row("model heads page vs baseline: set BASELINE_ROOT", "-", 0.0, float("inf"))]
    if quick:
        rounds, repeats = 1, 2
    trees = {"this tree": ROOT, "baseline": Path(baseline)}
    from playwright.sync_api import sync_playwright

    from tests.conftest import CHROMIUM_FLAGS

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    paint: dict[str, list[float]] = {name: [] for name in trees}
    script: dict[str, list[float]] = {name: [] for name in trees}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)
        try:
            for r in range(rounds):
                for name in trees if r % 2 == 0 else reversed(list(trees)):
                    paint[name].append(cold_paint(browser, trees[name]))
                    script[name].append(script_seconds(trees[name], repeats))
        finally:
            browser.close()
    cold = {name: statistics.median(v) for name, v in paint.items()}
    warm = {name: statistics.median(v) for name, v in script.items()}
    return [row("Model heads (MiniLM) cold first paint", "baseline tree, same link",
                cold["this tree"] / cold["baseline"], 1.1,
                f"{cold['this tree']:.0f} ms vs {cold['baseline']:.0f} ms "
                f"(each: {[round(v) for v in paint['this tree']]} vs "
                f"{[round(v) for v in paint['baseline']]})"),
            row("Model heads (MiniLM) warm script run (AppTest)", "baseline tree",
                warm["this tree"] / warm["baseline"], 1.1,
                f"{warm['this tree'] * 1000:.0f} ms vs {warm['baseline'] * 1000:.0f} ms")]


if __name__ == "__main__":
    from bench.timing import print_table

    print_table(run(quick="--quick" in sys.argv))
