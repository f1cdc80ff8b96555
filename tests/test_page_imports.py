"""A cold link to a page that shows no real model pays for no real model's libraries: the
Input, Heatmap and Score analysis pages, run one after the other in a fresh process, import
neither transformers nor scipy nor jieba (a Chinese input would bring jieba; this one is
English)."""
from __future__ import annotations

import json
import subprocess
import sys

from attention.ui.layout import TOY_PAGES
from attention.ui.pages import by_title
from tests.apptest import ROOT

HEAVY = ("transformers", "scipy", "jieba")
PAGES = tuple(by_title(key).script for key in TOY_PAGES)   # the pages of the toy model

SCRIPT = f"""
import json, sys
from tests.apptest import open_page
seen = {{}}
for path in {PAGES!r}:
    at = open_page(path)
    assert not at.exception, (path, at.exception)
    seen[path] = [m for m in {HEAVY!r} if m in sys.modules]
print(json.dumps(seen))
"""


def test_pages_without_a_model_import_no_model_library():
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {path: [] for path in PAGES}
