"""Remake the results the "Does the model use it?" page ships with (attention/data/importance/):
each bundled corpus's first texts (attention.importance.store.PAGE_TEXTS) on the bundled
MiniLM, computed afresh, written under the current code's key. Run after any change to the
code that computes them (tests/test_page_importance.py fails until then):

    .venv/bin/python scripts/ship_importance.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attention.importance.shipped import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
