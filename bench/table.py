"""The benchmark table of the docs, made from one `python -m bench` run's printed output.

    python -m bench > run.txt                 # (or --quick, or chosen modules)
    python -m bench.table run.txt             # the Markdown table, printed
    python -m bench.table run.txt --write     # ... and written into README.md and
                                              # docs/performance.md between their markers

The output is the table bench/__main__.py prints (fixed-width columns under a header) and
its last line, "# full run on <date> UTC: <s> s wall, load average <a> at the start, <b> at
the end". The Markdown table has the same rows in the same order, and one line under it with
the run's kind, date and load average, so the docs hold one run's figures and nothing else.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- bench table: made by python -m bench.table -->", "<!-- /bench table -->"
DOCS = (ROOT / "README.md", ROOT / "docs" / "performance.md")
# A row of bench/timing.print_table, read from the right: ratio, target, ok, then the detail.
ROW = re.compile(r"^(?P<left>.*?\S)\s{2,}(?P<ratio>nan|inf|-?[\d.]+)\s{2,}(?P<target><= \S+)"
                 r"\s{2}(?P<ok>yes|NO|-)(?:\s+(?P<detail>.*))?$")
TRAILER = re.compile(r"# (full|quick) run on (\S+ \S+) UTC: (\d+) s wall, load average "
                     r"([\d.]+) at the start, ([\d.]+) at the end")


def parse(output: str) -> tuple[list[dict], dict]:
    """(rows, run) of a `python -m bench` output: each row's name, baseline, ratio, target,
    ok and detail; the run's kind, date, seconds and load averages."""
    lines = output.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("benchmark  "))
    except StopIteration:
        raise ValueError("no benchmark table in this output") from None
    rows, pending = [], []      # a name printed over several lines: its columns on the last
    for line in lines[start + 1:]:
        if not line.strip() or line.startswith("#"):
            break
        m = ROW.match(line)
        if m is None:
            pending.append(line.strip())
            continue
        parts = re.split(r"\s{2,}", m["left"].strip())
        name, baseline = (" ".join(parts[:-1]), parts[-1]) if len(parts) > 1 else (parts[0], "")
        rows.append({"name": " ".join([*pending, name.strip()]), "baseline": baseline.strip(),
                     "ratio": m["ratio"], "target": m["target"], "ok": m["ok"],
                     "detail": (m["detail"] or "").strip()})
        pending = []
    found = [m for line in lines if (m := TRAILER.search(line))]
    if not found:
        raise ValueError("no '# full run on ...' line: the output of an older bench?")
    kind, date, wall, load_start, load_end = found[-1].groups()
    return rows, {"kind": kind, "date": date, "wall": int(wall), "load": (load_start, load_end)}


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or "-"


def markdown(rows: list[dict], run: dict) -> str:
    out = ["| benchmark | baseline | ratio | target | ok | measured |", "|---|---|---|---|---|---|"]
    out += [f"| {_cell(r['name'])} | {_cell(r['baseline'])} | {_cell(r['ratio'])} | "
            f"{_cell(r['target'])} | {_cell(r['ok'])} | {_cell(r['detail'])} |" for r in rows]
    missed = [r for r in rows if r["ok"] != "yes"]
    held = ("ratios not held to their targets (small sizes)" if run["kind"] == "quick" else
            "every row held to its target" if not missed else
            f"{len(missed)} of {len(rows)} rows missed their targets (ok: NO)")
    out += ["", f"One `python -m bench{' --quick' if run['kind'] == 'quick' else ''}` run, "
            f"{run['date']} UTC, {run['wall']} s; load average {run['load'][0]} at the start, "
            f"{run['load'][1]} at the end; {held}."]
    return "\n".join(out)


def write(table: str, doc: Path) -> None:
    """Replace what stands between the markers of `doc` with `table`."""
    text = doc.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise ValueError(f"{doc.name} has no bench table markers")
    head, rest = text.split(BEGIN, 1)
    doc.write_text(f"{head}{BEGIN}\n{table}\n{END}{rest.split(END, 1)[1]}", encoding="utf-8")


def main(argv: list[str]) -> int:
    paths = [a for a in argv if not a.startswith("-")]
    if len(paths) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    table = markdown(*parse(Path(paths[0]).read_text(encoding="utf-8")))
    print(table)
    if "--write" in argv:
        for doc in DOCS:
            write(table, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
