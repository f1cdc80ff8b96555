"""Every module path and section a doc or a comment names exists: a file path (`ui/layout.py`,
`attention/corpus/job.py`), a dotted name (`attention.diskcache.fingerprint`) and a
section of a doc (`docs/architecture.md, "Imports"`). A stale reference sends a newcomer to a
file that is gone; this fails instead."""
from __future__ import annotations

import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("README.md", "docs/*.md", "app.py", "pages/*.py", "attention/**/*.py",
           "attention/**/*.toml", "attention/**/*.md", "bench/*.py", "scripts/*.py",
           "tests/*.py", "Makefile", "Dockerfile")
PATH = re.compile(r"(?<![\w./<>{}-])((?:[\w-]+/)*[\w-]+\.(?:py|md|toml|js|css|tsv))(?![\w/])")
DOTTED = re.compile(r"(?<![\w./])(attention(?:\.\w+)+)")
SECTION = re.compile(r"\b(README|[\w-]+\.md),?\s+\"([^\"]{2,60})\"")
# Names that are examples of what a user or a test writes, not files of the project.
NOT_FILES = {"app_test.py", "bare_page.py", "baseline.py", "bare.py", "_probe_imports.py",
             "serve.py", "foo.py", "ray.py", "N_Name.py", "x.md"}
MODEL_PARTS = {"self", "output", "__path__"}   # a transformers module's attention.self.value
# These name files that do not exist on purpose (the checkers' own tests and their probes).
OWN = {"tests/test_doc_references.py", "tests/test_architecture.py", "tests/test_one_guess.py",
       "tests/test_bench_table.py"}


def scanned_files() -> list[Path]:
    return sorted({p for pattern in SCANNED for p in ROOT.glob(pattern)
                   if p.is_file() and ".venv" not in p.parts
                   and str(p.relative_to(ROOT)) not in OWN})


@cache
def basenames() -> set[str]:
    return {p.name for p in ROOT.rglob("*") if ".venv" not in p.parts and ".git" not in p.parts}


def path_exists(ref: str, where: Path) -> bool:
    if ref.rsplit("/", 1)[-1] in NOT_FILES:
        return True
    if "/" not in ref:
        return ref in basenames()
    bases = (ROOT, ROOT / "attention", ROOT / "docs", where.parent)
    return any((base / ref).exists() for base in bases)


def dotted_exists(ref: str) -> bool:
    """The longest prefix of `ref` that is a module or package, and the next name (if any)
    defined or imported in it (a function, a class, a constant)."""
    parts = ref.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        source = (base / "__init__.py") if base.is_dir() else base.with_suffix(".py")
        if source.is_file():
            if cut == len(parts):
                return True
            text = source.read_text(encoding="utf-8")
            return re.search(rf"\b{re.escape(parts[cut])}\b", text) is not None
    return False


@cache
def headings(doc: str) -> list[str]:
    """The titles of a doc's sections, and its terms set in bold (a list's named items)."""
    path = ROOT / ("README.md" if doc == "README" else f"docs/{doc}")
    if not path.is_file():
        path = ROOT / doc
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    titles = [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]
    return titles + re.findall(r"\*\*([^*]+)\*\*", text)   # and the terms set in bold


def stale_references() -> list[str]:
    stale = []
    for path in scanned_files():
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(ROOT))
        for ref in PATH.findall(text):
            if where.startswith("tests/") and "/" not in ref:
                continue            # a test's bare file names are its own temporary files
            if not path_exists(ref, path):
                stale.append(f"{where}: {ref}")
        for ref in DOTTED.findall(text):
            if ref.split(".")[1] not in MODEL_PARTS and not dotted_exists(ref.rstrip(".")):
                stale.append(f"{where}: {ref}")
        for doc, section in SECTION.findall(text):
            section = " ".join(section.replace("#", " ").split())
            if not any(h.startswith(section) for h in headings(doc)):
                stale.append(f'{where}: {doc}, "{section}"')
    return stale


def test_every_named_path_module_and_section_exists():
    assert stale_references() == []


def test_the_checker_sees_a_stale_reference(tmp_path):
    assert not path_exists("attention/metrics.py", tmp_path / "x.md")
    assert not path_exists("metrics.py", tmp_path / "x.md")
    assert path_exists("ui/layout.py", tmp_path / "x.md")
    assert not dotted_exists("attention.models_gone")
    assert not dotted_exists("attention.core.no_such_function")
    assert dotted_exists("attention.core.causal_mask")
    assert not any(h.startswith("Long inputs") for h in headings("architecture.md"))
