"""The core stays importable without streamlit, and the analysis path without transformers."""
from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import attention

ROOT = Path(__file__).resolve().parent.parent

CORE_MODULES = sorted(
    m.name for m in pkgutil.walk_packages(attention.__path__, "attention.")
    if not m.name.startswith("attention.ui")
)


def imported_after(modules: list[str]) -> set[str]:
    """Top-level packages a fresh interpreter has loaded after importing `modules`."""
    script = ("import importlib, json, sys\n"
              f"for name in {modules!r}: importlib.import_module(name)\n"
              "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return set(json.loads(out.stdout))


def test_the_core_does_not_import_streamlit():
    assert "attention.core" in CORE_MODULES and "attention.analysis" in CORE_MODULES
    loaded = imported_after(CORE_MODULES)
    assert "torch" in loaded  # the check itself works: the core did load
    assert "streamlit" not in loaded


def test_analysis_does_not_import_transformers():
    loaded = imported_after(["attention.analysis", "attention.analysis.frames", "attention.measures.rows"])
    assert "attention" in loaded
    assert "transformers" not in loaded and "streamlit" not in loaded
