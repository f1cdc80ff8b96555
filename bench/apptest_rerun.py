"""A Heatmap page rerun in AppTest at n = 64 and n = 2048, against a bare page with one small
altair chart rerun the same way in the same process."""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from unittest import mock

from streamlit.testing.v1 import AppTest

from attention.spec import AttentionSpec
from bench.servers import WARMUP_ENV
from bench.timing import print_table, row

ROOT = Path(__file__).resolve().parent.parent
BARE = '''
import altair as alt, pandas as pd, streamlit as st
st.title("bare")
st.altair_chart(alt.Chart(pd.DataFrame({"x": range(16), "y": range(16)})).mark_rect()
                .encode(x="x:O", y="y:O"))
'''


def _reruns(at: AppTest, repeats: int) -> float:
    """Median time of a rerun with nothing changed (the cache is warm after the first run)."""
    at.run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - start)
    assert not at.exception, at.exception
    return statistics.median(times)


def run(repeats: int = 5, quick: bool = False) -> list[dict]:
    """quick: n = 64 and 256, 2 reruns each (the n=2048 row's target then applies to 256),
    without the app's background warm-up (ATTENTION_EXPLORER_WARMUP=0): in AppTest it runs in
    this process, where it would go on loading the model and the experiment's seed while the
    next modules are timed."""
    if quick:
        with mock.patch.dict(os.environ, {WARMUP_ENV: "0"}):
            return _run(2, (64, 256))
    return _run(repeats, (64, 2048))


def _run(repeats: int, sizes: tuple[int, int]) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        bare_path = Path(tmp) / "bare.py"
        bare_path.write_text(BARE)
        bare = _reruns(AppTest.from_file(str(bare_path), default_timeout=120), repeats)
    rows = []
    for n in sizes:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
        at.switch_page("pages/1_Heatmap.py")
        spec = AttentionSpec(tokens=tuple(f"w{i % 97}" for i in range(n)), heads=12, d_k=64)
        for key, value in spec.to_query().items():
            at.query_params[key] = value
        took = _reruns(at, repeats)
        rows.append(row(f"heatmap page rerun, n={n}, 12 heads", "bare page rerun (1 chart)",
                        took / bare, 15.0 if n <= 64 else 40.0,  # noqa: PLR2004
                        f"{took * 1000:.0f} ms vs {bare * 1000:.0f} ms"))
    return rows


if __name__ == "__main__":
    import sys

    print_table(run(quick="--quick" in sys.argv))
