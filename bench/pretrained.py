"""The MiniLM path against plain transformers, measured in the same run.

Baseline: one plain `AutoModel` forward pass (eager attention, output_attentions) of a
64-word text. Against it:
  - cold load: `attention.models.load_model()` (the bundled model) in a fresh Python process
    (imports torch, not transformers: attention/models/bert.py; reads the weights and the
    tokenizer), timed inside that process;
  - warm load: the same again in this process after clearing its cache
    (`attention.models.loading._bundled`; imports and file cache warm) - also shown against a
    plain `AutoModel.from_pretrained`;
  - one analysis: `attention.models.runs.heads_report(source, text)` (forward pass, Q/K/V of
    every layer, all 72 heads through core.attention, the per-head table and the rollout) and
    `analyze(spec)` of one layer, each with the runs' cache (`runs.RUNS`) cleared.
Memory: a real `streamlit run app.py` opened on /Model_heads in Chromium; the server's
resident set (VmRSS) once the page is drawn, against the 700 MB goal.

    python -m bench.pretrained
    python -m bench.pretrained --quick   # 3 repeats, no cold process, no server
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import torch  # noqa: E402

from attention.analysis import analyze  # noqa: E402
from attention.config import BUNDLED  # noqa: E402
from attention.models import loading, runs  # noqa: E402
from attention.spec import AttentionSpec  # noqa: E402

from .timing import interleaved_medians, print_table, row  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORDS = ("the quick brown fox jumps over the lazy dog while a curious cat watches from the old "
         "stone wall , and somewhere down the river a boat drifts slowly past the mill . when "
         "evening comes the village lights glow softly , children run home across the fields , "
         "and the baker closes his shop after a long and busy day of work").split()[:64]
TEXT = " ".join(WORDS)
RSS_GOAL_MB = 700
TARGETS = {"cold": 1000.0, "warm": 300.0, "warm_vs_plain": 1.5, "report": 4.0, "layer": 4.0,
           "rss": 1.0}

COLD = """
import os, time, json
os.environ["HF_HUB_OFFLINE"] = "1"
start = time.perf_counter()
from attention.models import load_model
load_model()
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


def _plain():
    """A plain transformers model and tokenizer, loaded the ordinary way."""
    from transformers import AutoModel, AutoTokenizer

    path = loading.bundled_path()
    return (AutoModel.from_pretrained(path, attn_implementation="eager").eval(),
            AutoTokenizer.from_pretrained(path))


def _forward(model, tokenizer):
    enc = tokenizer(TEXT, return_tensors="pt")
    with torch.no_grad():
        return model(**enc, output_attentions=True)


def _cold_load_seconds() -> float:
    out = subprocess.run([sys.executable, "-c", COLD], cwd=ROOT, capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def _fresh_report():
    runs.RUNS.clear()
    return runs.heads_report(BUNDLED, TEXT)


def _fresh_layer(spec: AttentionSpec):
    runs.RUNS.clear()
    return analyze(spec)


def _reload():
    loading._bundled.cache_clear()
    return loading.load_model()


def server_rss_mb(timeout: float = 240.0) -> float | None:
    """VmRSS of a real streamlit server after /Model_heads has been drawn in Chromium; None
    where no Chromium is installed."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        return None
    from playwright.sync_api import sync_playwright

    from bench.pages import launch
    from bench.servers import server

    srv = server()
    try:
        spec = AttentionSpec(tokens=tuple(WORDS), source="pretrained")
        url = f"{srv.url}/Model_heads?{urlencode(spec.to_query())}"
        with sync_playwright() as p:
            browser = launch(p)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            # the heads tab: its grid drawn (the per-head table is another tab's)
            page.wait_for_selector('[data-testid="stMain"] .ae-heatmap[data-drawn]',
                                   timeout=timeout * 1000)
            page.wait_for_function(
                """() => !document.querySelector('[data-testid="stStatusWidget"]')""",
                timeout=timeout * 1000)
            page.wait_for_timeout(1000)
            rss = _vm_rss_mb(srv.proc.pid)
            browser.close()
        return rss
    finally:
        srv.stop()


def _vm_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def run(quick: bool = False) -> list[dict]:
    torch.set_num_threads(1)
    cold = None if quick else _cold_load_seconds()
    model, tokenizer = _plain()
    loading.load_model()
    spec = AttentionSpec(tokens=tuple(WORDS), source="pretrained", layer=3)
    n = len(runs.run(BUNDLED, TEXT).tokens)
    # parity first: the benchmark compares equal work
    own = torch.stack(_forward(model, tokenizer).attentions)[:, 0]
    assert torch.allclose(runs.heads_report(BUNDLED, TEXT).weights, own, atol=1e-5)
    med = interleaved_medians({
        "forward": lambda: _forward(model, tokenizer),
        "report": _fresh_report,
        "layer": lambda: _fresh_layer(spec),
    }, repeats=3 if quick else 9)
    loads = interleaved_medians({"plain_load": _plain, "warm_load": _reload},
                                repeats=1 if quick else 3, warmup=0 if quick else 1)
    forward = med["forward"]
    base = f"AutoModel forward, {n} pieces"
    rows = [] if cold is None else [
        row("cold load (fresh process)", base, cold / forward, TARGETS["cold"],
            f"{cold:.2f} s incl. imports; forward {forward * 1000:.1f} ms")]
    rows += [
        row("warm load (reload in process)", base, loads["warm_load"] / forward, TARGETS["warm"],
            f"{loads['warm_load']:.2f} s"),
        row("warm load vs plain from_pretrained", "AutoModel+AutoTokenizer.from_pretrained",
            loads["warm_load"] / loads["plain_load"], TARGETS["warm_vs_plain"],
            f"plain {loads['plain_load']:.2f} s"),
        row("report: 72 heads + table + rollout", base, med["report"] / forward,
            TARGETS["report"], f"{med['report'] * 1000:.1f} ms, 64 words"),
        row("analyze(spec) one layer", base, med["layer"] / forward, TARGETS["layer"],
            f"{med['layer'] * 1000:.1f} ms, scaled + unscaled + metrics"),
    ]
    rss = None if quick else server_rss_mb()
    if rss is not None:
        rows.append(row("server RSS, model page drawn", f"{RSS_GOAL_MB} MB goal",
                        rss / RSS_GOAL_MB, TARGETS["rss"], f"{rss:.0f} MB"))
    return rows


if __name__ == "__main__":
    print_table(run(quick="--quick" in sys.argv))
