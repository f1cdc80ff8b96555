"""Helpers for AppTest-based page tests."""
from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pyarrow as pa
from streamlit.testing.v1 import AppTest

from attention.spec import AttentionSpec

ROOT = Path(__file__).resolve().parent.parent
PAGE_FILES = ["app.py", "pages/1_Heatmap.py", "pages/2_Score_analysis.py",
              "pages/3_Model_heads.py", "pages/4_Is_sharper_better.py",
              "pages/5_Does_the_model_use_it.py"]


def open_page(path: str, spec: AttentionSpec | None = None, *, timeout: float = 60,
              **params: str) -> AppTest:
    """A fresh session opened on `path` with the spec and params in its URL.

    Entered through app.py and switched to `path`, as a browser does: a page under pages/
    run as the entry script cannot resolve the sidebar's page links."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    if path != "app.py":
        at.switch_page(path)
    for key, value in {**(spec.to_query() if spec is not None else {}), **params}.items():
        at.query_params[key] = value
    return at.run()


run_page = open_page


def chart_frames(at: AppTest) -> list[pd.DataFrame]:
    """Every dataset of every vega-lite chart on the page, as DataFrames."""
    frames = []
    for chart in at.get("vega_lite_chart"):
        for dataset in chart.proto.datasets:
            frames.append(pa.ipc.open_stream(io.BytesIO(dataset.data.data)).read_all().to_pandas())
    return frames
