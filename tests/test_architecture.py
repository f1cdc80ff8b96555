"""The house rules, checked on the source itself: data flows one way (no import cycle anywhere,
counting imports inside functions and under TYPE_CHECKING), no module in attention/ grows past
400 lines, Streamlit stays in attention/ui/, and the documented entry points import."""
from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("attention", "bench", "tests", "scripts")
MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    found = {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    for top in ("app.py",):
        found[top[:-3]] = ROOT / top
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every project module `path` imports, wherever the import statement stands. `from pkg
    import sub` names the submodule pkg.sub when it is one (as grimp and import-linter count
    it), else the package pkg."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            subs = {f"{module}.{a.name}" for a in node.names} & known
            out.update(subs if len(subs) == len(node.names) else subs | {module})
    return {m for m in out if m in known and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), or a self-loop."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_the_project():
    modules = project_modules()
    graph = {name: imports_of(name, path, set(modules)) for name, path in modules.items()}
    assert cycles(graph) == []


def test_function_level_imports_count():
    known = {"attention.x", "attention.y"}
    src = "def f():\n    from attention import y\n"
    path = ROOT / "tests" / "_probe_imports.py"
    try:
        path.write_text(src)
        assert imports_of("attention.x", path, known) == {"attention.y"}
    finally:
        path.unlink()


def test_no_module_in_the_package_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "attention").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_streamlit_is_imported_only_by_the_ui_and_the_page_scripts():
    leaks = []
    for path in (ROOT / "attention").rglob("*.py"):
        if "ui" in path.relative_to(ROOT / "attention").parts[:1]:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "streamlit" or n.startswith("streamlit.") for n in names):
                leaks.append(str(path.relative_to(ROOT)))
    assert leaks == []


def test_no_page_imports_scipy_before_it_computes():
    """scipy costs 0.5-0.8 s to import, more than a bare page's whole script: a cold link to a
    page that reads stored results must not pay it (docs/architecture.md, "Imports")."""
    pages = sorted(p.stem for p in (ROOT / "attention" / "ui" / "views").glob("*.py")
                   if p.stem != "__init__")
    code = ("import sys\n" + "".join(f"import attention.ui.views.{p}\n" for p in pages)
            + "print(sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'transformers',"
            " 'captum', 'sklearn', 'ray'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert len(pages) >= 9


def test_a_page_that_reads_stored_results_imports_no_torch():
    """The default views of "Does the model use it?" and "Is sharper better?" are read from
    shipped results: their modules, the sidebar's and the URL state's import neither torch
    nor the model (about 1 s of a cold link; docs/architecture.md, "Imports"). Computing and
    training import them when they start."""
    code = ("import sys\n"
            "import attention.ui.entry, attention.ui.views.importance, attention.ui.state\n"
            "import attention.ui.views.experiment\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'scipy',"
            " 'transformers', 'captum'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("module, names", [
    ("attention.core", ("attention", "causal_mask")),
    ("attention.spec", ("AttentionSpec",)),
    ("attention.analysis", ("analyze", "analyze_qkv")),
    ("attention.models", ("load_model", "Intervention")),
    ("attention.importance", ("token_importance", "head_importance")),
    ("attention.snapshot", ("load", "compare")),
    ("attention.tokens", ("parse_tokens",)),
    ("attention.experiment", ("sharpening_sweep", "sharpening_study", "scaling_sweep")),
    ("attention.pretrained", ("attention_weights",)),
    ("attention.corpus", ("load",)),
    ("attention.config", ("LIMITS", "MAX_TOKENS")),
])
def test_documented_entry_points_import(module, names):
    mod = importlib.import_module(module)
    for name in names:
        assert callable(getattr(mod, name)) or isinstance(getattr(mod, name), (dict, int)), name
