"""The house rules, checked on the source itself: data flows one way (no import cycle between
modules, counting imports inside functions and under TYPE_CHECKING, and none between the
packages of attention/), no module in attention/ grows past 400 lines, Streamlit stays in
attention/ui/, no importlib of the app's own modules, every package face names a small API in
__all__ and shadows no submodule, and the documented entry points import. Doc references:
tests/test_doc_references.py; the one-guess table: tests/test_one_guess.py."""
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


def test_function_level_imports_count(tmp_path):
    """(The probe is written outside tests/: another worker may be walking that folder.)"""
    known = {"attention.x", "attention.y"}
    path = tmp_path / "x.py"
    path.write_text("def f():\n    from attention import y\n")
    assert imports_of("attention.x", path, known) == {"attention.y"}


def package_of(module: str) -> str:
    """The package a module of attention/ belongs to: attention.corpus for
    attention.corpus.job, the module itself for attention.core."""
    return ".".join(module.split(".")[:2])


def package_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        if name.split(".")[0] != "attention":
            continue
        graph.setdefault(package_of(name), set())
        for dep in imports_of(name, path, set(modules)):
            if dep.split(".")[0] == "attention" and package_of(dep) != package_of(name):
                graph[package_of(name)].add(package_of(dep))
    return graph


def test_no_import_cycle_between_packages():
    """attention.corpus may import attention.importance, or the other way round, not both
    (the corpus job sits above the measures it runs: importance, sweeps)."""
    assert cycles(package_graph(project_modules())) == []


def test_the_package_graph_sees_a_loop_between_packages(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from attention.q import b\n")
    b.write_text("def f():\n    from attention.p import a\n")
    graph = package_graph({"attention.p.a": a, "attention.q.b": b})
    assert cycles(graph) == [["attention.p", "attention.q"]]


def test_no_importlib_of_the_projects_own_modules():
    """The app's modules import their siblings by name: a face that shadowed a submodule once
    made one reach for importlib.import_module. (The benchmarks' runner imports the module a
    command line names, and the tests import the entry points they list, by name.)"""
    found = []
    for name, path in project_modules().items():
        if name.split(".")[0] in ("bench", "tests"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
                    and getattr(node.func, "attr", getattr(node.func, "id", "")) in
                    ("import_module", "__import__")):
                found.append(name)
    assert found == []


FACE_NAMES = 12   # "about a dozen": a package's face names its API, not its plumbing


def test_every_package_face_names_a_small_api_and_shadows_no_submodule():
    """Each attention/ package's __init__.py has __all__ (at most FACE_NAMES names, each bound
    in it), and binds no name a submodule of the package has: `from .agreement import
    agreement` in a face replaces the submodule attribute with the function."""
    assert face_problems() == []


def face_problems() -> list[str]:
    problems = []
    for face in sorted((ROOT / "attention").rglob("__init__.py")):
        package = face.parent
        where = str(face.relative_to(ROOT))
        subs = {p.stem for p in package.glob("*.py") if p.stem != "__init__"} | {
            p.name for p in package.iterdir() if (p / "__init__.py").is_file()}
        tree = ast.parse(face.read_text(encoding="utf-8"))
        assigned = {t.id: node.value for node in tree.body
                    if isinstance(node, (ast.Assign, ast.AnnAssign))
                    for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                    if isinstance(t, ast.Name)}
        names = list(assigned)
        exported = ast.literal_eval(assigned["__all__"]) if "__all__" in assigned else None
        bound = set(names)
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    local = alias.asname or alias.name
                    if local in subs and node.module != module_name(face) and node.level == 0:
                        problems.append(f"{where}: {local} shadows its submodule")
                    bound.add(local)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                bound.add(node.name)
                if node.name in subs:
                    problems.append(f"{where}: {node.name} shadows its submodule")
        if exported is None:
            problems.append(f"{where}: no __all__")
            continue
        if len(exported) > FACE_NAMES:
            problems.append(f"{where}: {len(exported)} names in __all__")
        problems += [f"{where}: {n} in __all__ is not bound" for n in exported if n not in bound]
    return problems


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
    """The default views of "Does the model use it?", "Is sharper better?" and Corpus are read
    from shipped results: their modules, the sidebar's and the URL state's import neither
    torch nor the model (about 1 s of a cold link; docs/architecture.md, "Imports").
    Computing and training import them when they start."""
    code = ("import sys\n"
            "import attention.ui.entry, attention.ui.views.importance, attention.ui.state\n"
            "import attention.ui.views.experiment, attention.ui.views.corpus\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'scipy',"
            " 'transformers', 'captum'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_page_that_computes_draws_its_sidebar_before_it_imports_torch():
    """A page whose view computes with torch (1.6 s to import on a cold server) calls
    page_setup first, so the browser draws the sidebar while torch loads: its cold link went
    5.43 -> 5.11 s for Score analysis (bench/cold_link.py --compare, one run). Its view
    modules are imported after the page_setup call, in the page script itself."""
    code = ("import sys, attention.ui.views.{}\n"
            "print('torch' in sys.modules)")
    scripts = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]
    computing = 0
    for script in scripts:
        tree = ast.parse(script.read_text(encoding="utf-8"))
        setup = next(node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
                     and getattr(node.func, "id", "") == "page_setup")
        views = [(node.lineno, node.module.rsplit(".", 1)[-1]) for node in tree.body
                 if isinstance(node, ast.ImportFrom)
                 and (node.module or "").startswith("attention.ui.views.")]
        for line, view in views:
            out = subprocess.run([sys.executable, "-c", code.format(view)], cwd=ROOT,
                                 capture_output=True, text=True, timeout=300)
            assert out.returncode == 0, out.stderr[-2000:]
            if out.stdout.strip().splitlines()[-1] == "True":
                computing += 1
                assert line > setup, f"{script.name} imports views.{view} (torch) before page_setup"
    assert computing >= 4           # Input, Heatmap, Score analysis, Model heads


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
    ("attention.corpus", ("load", "pairs")),
    ("attention.config", ("LIMITS", "MAX_TOKENS")),
])
def test_documented_entry_points_import(module, names):
    mod = importlib.import_module(module)
    for name in names:
        assert callable(getattr(mod, name)) or isinstance(getattr(mod, name), (dict, int)), name


# One model store, attention.models.loading's (the cap, eviction, the memory reservation):
# a cache anywhere else that holds models keeps them alive outside that cap, as the pages'
# st.cache_resource and the importance batches' lru_cache(model) once did.
CACHES = ("cache_resource", "cache_data", "lru_cache", "cache")
MODEL_CALLS = ("load_model", "ensure_model")


def model_holders(files: dict[str, Path]) -> list[str]:
    """Functions outside attention/models/ that a cache decorator memoises while they load a
    model or take one (a parameter `model`, `loaded` or annotated LoadedModel)."""
    found = []
    for where, path in files.items():
        if where.startswith("attention/models/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            decorators = [d.func if isinstance(d, ast.Call) else d for d in node.decorator_list]
            if not any(getattr(d, "attr", getattr(d, "id", "")) in CACHES for d in decorators):
                continue
            args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            hints = {a.arg: ast.unparse(a.annotation) if a.annotation else "" for a in args}
            takes = any("LoadedModel" in hint or (arg in ("model", "loaded") and hint != "str")
                        for arg, hint in hints.items())   # a model's name (str) is no model
            loads = any(isinstance(c, ast.Call) and
                        getattr(c.func, "attr", getattr(c.func, "id", "")) in MODEL_CALLS
                        for c in ast.walk(node))
            if takes:
                found.append(f"{where}: {node.name} caches by model")
            elif loads:
                found.append(f"{where}: {node.name} caches a loaded model")
    return found


def app_files() -> dict[str, Path]:
    paths = [*(ROOT / "attention").rglob("*.py"), *(ROOT / "pages").glob("*.py"), ROOT / "app.py"]
    return {str(p.relative_to(ROOT)): p for p in paths}


def test_models_are_kept_only_by_the_models_store():
    """No st.cache_resource (nor any other cache) outside attention/models/ holds a model: the
    pages read attention.models.load_model's store."""
    assert model_holders(app_files()) == []


def test_the_model_holder_check_finds_a_page_cache_and_a_cache_by_model(tmp_path):
    page, batch = tmp_path / "page.py", tmp_path / "batch.py"
    page.write_text("import streamlit as st\nfrom attention import models\n"
                    "@st.cache_resource(max_entries=4)\ndef _model(source):\n"
                    "    return models.load_model(source, wait=False)\n")
    batch.write_text("from functools import lru_cache\n@lru_cache(maxsize=8)\n"
                     "def projections(model: 'M.LoadedModel'):\n    return ()\n"
                     "@lru_cache\ndef fine(model: str):\n    return ()\n")
    assert model_holders({"attention/ui/page.py": page, "attention/x/batch.py": batch}) == [
        "attention/ui/page.py: _model caches a loaded model",
        "attention/x/batch.py: projections caches by model"]
    assert model_holders({"attention/models/page.py": page}) == []
