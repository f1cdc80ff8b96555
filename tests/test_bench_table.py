"""bench/table.py reads back exactly what `python -m bench` prints (bench/timing.print_table
and run_line) and writes the table between the markers of a doc, leaving the rest alone."""
from __future__ import annotations

import re

import pytest

from bench.table import BEGIN, END, markdown, parse, write
from bench.timing import print_table, row, run_line

ROWS = [row("core: core.attention n=128", "scaled_dot_product_attention", 0.6412, 1.5,
            "1.2 ms vs 1.9 ms"),
        row("cold_link: cold first paint: Corpus", "bare page on a cold server", 2.31, 2.0,
            "4800 ms vs 2078 ms"),
        row("corpus: ray | local", "the local engine", 0.42, float("inf"), "")]


def printed(capsys) -> str:
    print_table(ROWS)
    print(run_line("full", "2026-12-04 04:10", 1203.4, 3.21, 1.6))
    return capsys.readouterr().out


def test_every_row_and_the_run_come_back(capsys):
    rows, run = parse(printed(capsys))
    assert [r["name"] for r in rows] == [r["name"] for r in ROWS]
    assert [r["baseline"] for r in rows] == [r["baseline"] for r in ROWS]
    assert [float(r["ratio"]) for r in rows] == pytest.approx([0.64, 2.31, 0.42], abs=0.005)
    assert [r["target"] for r in rows] == ["<= 1.5", "<= 2", "<= inf"]
    assert [r["ok"] for r in rows] == ["yes", "NO", "yes"]
    assert rows[1]["detail"] == "4800 ms vs 2078 ms"
    assert run == {"kind": "full", "date": "2026-12-04 04:10", "wall": 1203,
                   "load": ("3.21", "1.60")}


def test_the_table_is_written_between_the_markers_only(capsys, tmp_path):
    table = markdown(*parse(printed(capsys)))
    assert "| corpus: ray \\| local |" in table            # a bar in a cell stays in its cell
    assert table.splitlines()[-1].startswith("One `python -m bench` run, 2026-12-04 04:10 UTC")
    assert table.endswith("1 of 3 rows missed their targets (ok: NO).")   # never "every row held"
    doc = tmp_path / "doc.md"
    doc.write_text(f"# Doc\n\nbefore\n{BEGIN}\nold table\n{END}\nafter\n")
    write(table, doc)
    text = doc.read_text()
    assert text.startswith("# Doc\n\nbefore\n") and text.endswith(f"{END}\nafter\n")
    assert "old table" not in text and table in text


def test_a_run_where_every_row_held_says_so(capsys):
    print_table([ROWS[0], ROWS[2]])
    print(run_line("full", "2026-12-04 04:10", 1203.4, 3.21, 1.6))
    assert markdown(*parse(capsys.readouterr().out)).endswith("every row held to its target.")


def test_a_name_over_several_lines_is_one_row(capsys):
    print_table([row("x: FAILED TimeoutError: slow.\nCall log:\n  - waiting", "-", float("nan"),
                     0), ROWS[0]])
    print(run_line("quick", "2026-12-04 05:02", 582, 18.33, 22.3))
    rows, run = parse(capsys.readouterr().out)
    assert [r["name"] for r in rows] == ["x: FAILED TimeoutError: slow. Call log: - waiting",
                                         ROWS[0]["name"]]
    assert rows[0]["ratio"] == "nan" and run["kind"] == "quick"


def test_an_output_without_a_table_is_refused():
    with pytest.raises(ValueError):
        parse("nothing here\n")


def test_the_performance_doc_is_how_each_benchmark_measures_and_one_table():
    """docs/performance.md stays a reference (at most 250 lines, one table between the
    markers, no dated diary entries); history lives in git."""
    from tests.conftest import ROOT

    text = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert text.count(BEGIN) == text.count(END) == 1
    outside = text.replace(text[text.index(BEGIN):text.index(END)], "")
    assert not re.search(r"\(20\d\d-\d\d-\d\d\)", outside)     # "Score analysis (2026-12-06):"
