"""Run a snippet of Python in a fresh interpreter from the repository root: for what a test
process cannot show once modules are imported (what an import pulls in, thread settings)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_fresh(code: str) -> str:
    """Run `code` with this interpreter in a new process; its stdout. Fails the test with the
    snippet's stderr when it exits with an error."""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout
