"""docs/architecture.md's "One guess" table and glossary: each path exists and defines each
name it is said to (a function, a class or a constant at the module's top level), so a
newcomer's one guess lands on the right file."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
QUESTIONS = ("where is a model loaded", "where is a measure defined",
             "where is a page section drawn", "where are a feature's results stored",
             "where is a limit set")
GLOSSARY = ("run", "job", "batch", "shard", "store", "target", "metric", "importance")


def rows(section: str) -> dict[str, list[str]]:
    """The table under `## section`: first cell -> the other cells."""
    text = DOC.read_text(encoding="utf-8").split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in text.splitlines() if line.startswith("|")][2:]   # no header
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    return {row[0]: row[1:] for row in cells}


def top_level(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def undefined(path: str, names: list[str]) -> list[str]:
    """The names not defined where the path says ("module.name" or "package.module.name"
    inside a folder)."""
    where = ROOT / path
    missing = []
    for name in names:
        module, _, attr = name.rpartition(".")
        source = where / f"{module.replace('.', '/')}.py" if where.is_dir() else where
        if not source.is_file() or attr not in top_level(source):
            missing.append(name)
    return missing


def ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_each_question_has_one_path_that_defines_what_it_names():
    table = rows("One guess")
    assert list(table) == list(QUESTIONS)
    for question, (path, names) in table.items():
        (path,) = ticked(path)
        assert (ROOT / path).exists(), question
        assert ticked(names) and undefined(path, ticked(names)) == [], question


def test_each_glossary_word_has_its_public_definition():
    table = rows("Glossary")
    assert list(table) == list(GLOSSARY)
    for word, (_, defined) in table.items():
        path, name = ticked(defined)
        assert undefined(path, [name]) == [], word


def test_a_wrong_answer_is_seen():
    assert undefined("attention/models/loading.py", ["load_nothing"]) == ["load_nothing"]
    assert undefined("attention/measures/", ["rows.no_measure"]) == ["rows.no_measure"]
    assert undefined("attention/", ["experiment.store.nothing"]) == ["experiment.store.nothing"]
    assert undefined("attention/gone.py", ["x"]) == ["x"]
