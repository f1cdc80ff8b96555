"""What the README and the pages tell a newcomer (issue 44, item 10): the quick start's two
commands are the Makefile's and CI's; it says what `make run` installs (PyPI's CUDA torch on
Linux) and how to take the CPU path; it says that plain `streamlit run app.py` refuses model
folders and how to allow them; and the terms AOPC, rollout, flow and null band point to
docs/science.md where a page first shows them, in both languages."""
from __future__ import annotations

import re
import shlex

import pytest

from attention import config
from attention.i18n import catalog
from attention.spec import AttentionSpec
from tests.apptest import ROOT, open_page

README = (ROOT / "README.md").read_text(encoding="utf-8")
MAKEFILE = (ROOT / "Makefile").read_text(encoding="utf-8")
SCIENCE = (ROOT / "docs" / "science.md").read_text(encoding="utf-8")


def _section(text: str, heading: str) -> str:
    """From `heading` (a whole line) to the next heading of the same or a higher level."""
    level = heading.split(" ")[0]
    start = text.index(f"\n{heading}\n")
    rest = text[start + len(heading) + 2:]
    ends = [m.start() for m in re.finditer(rf"^#{{1,{len(level)}}} ", rest, re.M)]
    return rest[:ends[0]] if ends else rest


QUICK = _section(README, "## Quick start").split("\n### ")[0]   # before "The first five minutes"


def _target(name: str) -> list[str]:
    """The recipe lines of a Makefile target."""
    m = re.search(rf"^{name}:[^\n]*\n((?:\t[^\n]*\n)+)", MAKEFILE, re.M)
    assert m, f"no target {name} in the Makefile"
    return [line.strip() for line in m.group(1).splitlines()]


def test_quick_start_commands_are_the_makefiles_and_cis():
    block = re.search(r"```bash\n(.*?)```", QUICK, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["make run", "make test"]
    assert any("streamlit run app.py" in line for line in _target("run"))
    assert any(line.endswith("-m pytest -m browser") for line in _target("test"))
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert [line for line in ci if line and not line.startswith("#")][-1] == "make test"


def test_quick_start_says_what_make_run_installs_and_the_cpu_path():
    text = " ".join(QUICK.split())
    assert re.search(r"On Linux, PyPI's `torch==[\d.]+` is the \*\*CUDA build", text)
    pinned = re.search(r"^torch==([\d.]+)", (ROOT / "requirements.txt").read_text(), re.M)
    assert f"`torch=={pinned.group(1)}`" in text                      # the pin it names
    cpu = re.search(r"```bash\n(.*?)```", QUICK.split("CPU build", 1)[1], re.S).group(1)
    assert "-r requirements-cpu.txt" in cpu and (ROOT / "requirements-cpu.txt").is_file()
    for line in cpu.splitlines():                    # every file the CPU path names exists
        for word in shlex.split(line):
            if word.endswith(".txt"):
                assert (ROOT / word).is_file(), word


def test_quick_start_says_plain_streamlit_refuses_folders_and_how_to_allow_them():
    text = " ".join(QUICK.split())
    assert "Plain `streamlit run app.py` refuses them" in text
    allow = f"`{config.ENV_LOCAL}=1 streamlit run app.py`"
    assert allow in text
    assert any(line.startswith(f"{config.ENV_LOCAL}=1 ") for line in _target("run"))  # make run
    assert "Never set that on a shared server" in text


def _texts(at) -> list[str]:
    """Every markdown, caption and notice of the main area, in page order, with the headings
    and notes the canvas figures draw above themselves (canvas.figure_view)."""
    from attention.charts.canvas import MAGIC, unpack

    out = []

    def walk(node):
        proto = getattr(node, "proto", None)
        body = getattr(proto, "body", None)
        if isinstance(body, str) and body:
            out.append(body)
        data = getattr(proto, "bytes", b"")
        if isinstance(data, bytes) and data[:4] == MAGIC:
            figure = unpack(data)
            out.extend(text for text in (figure.get("heading"), *figure.get("notes", ())) if text)
        for child in getattr(node, "children", {}).values():
            walk(child)
    walk(at.main)
    return out


# term -> (page, the interface-text key of where it first appears, docs/science.md section)
TERMS = {
    "null band": ("pages/5_Does_the_model_use_it.py", "importance.intro",
                  "Agreement, faithfulness and uncertainty"),
    "rollout": ("pages/5_Does_the_model_use_it.py", "importance.agreement_help",
                "Agreement, faithfulness and uncertainty"),
    "flow": ("pages/5_Does_the_model_use_it.py", "importance.agreement_help",
             "Agreement, faithfulness and uncertainty"),
    "AOPC": ("pages/5_Does_the_model_use_it.py", "importance.faith_help",
             "Agreement, faithfulness and uncertainty"),
    "rollout ": ("pages/3_Model_heads.py", "model.rollout_help", "Real heads"),
}


@pytest.fixture(scope="module")
def shown():
    pages = {page for page, _, _ in TERMS.values()}
    return {page: _texts(open_page(page, AttentionSpec(), timeout=300)) for page in pages}


@pytest.mark.parametrize("term", list(TERMS))
def test_each_term_points_to_the_science_where_a_page_first_shows_it(term, shown):
    page, key, section = TERMS[term]
    word = term.strip()
    texts = shown[page]
    at = next(i for i, t in enumerate(texts) if re.search(rf"\b{re.escape(word)}\b", t, re.I))
    first = texts[at]
    if "docs/science.md" not in first and len(first) < 80:   # a section's title: the
        first = texts[at + 1]                                 # caption below it explains
    assert "docs/science.md" in first, first
    assert first.startswith(catalog("en")[key][:40].split("{")[0])     # that key's text
    defined = re.search(rf"^## {re.escape(section)}.*?(?=^## |\Z)", SCIENCE, re.M | re.S)
    assert defined and word.lower() in defined.group(0).lower()  # the section defines it
    for lang in ("en", "zh"):                          # the same key points there in Chinese
        assert "docs/science.md" in catalog(lang)[key]
