"""The CPU-only deploy path agrees with the default install: requirements-cpu.txt pins what
requirements.txt pins (torch as its +cpu build from the PyTorch CPU index), the Hugging Face
Space's front matter serves the port the Dockerfile's Streamlit listens on, and the project's
own installs (Makefile, CI, dev requirements) use the standard index only."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
SPACE = ROOT / "deploy" / "huggingface" / "README.md"
COLOURS = {"red", "yellow", "green", "blue", "indigo", "purple", "pink", "gray"}


def requirements(name: str) -> tuple[list[str], dict[str, str]]:
    """(option lines, {package: pinned version}) of a requirements file."""
    options, pins = [], {}
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-"):
            options.append(line)
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", line)
        assert match, f"{name}: {line!r} is not an exact pin"
        pins[match[1].lower()] = match[2]
    return options, pins


def front_matter(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n"), "the Space's README.md must open with YAML front matter"
    return yaml.safe_load(text.split("---\n", 2)[1])


def test_default_install_uses_the_standard_index_only():
    options, pins = requirements("requirements.txt")
    assert options == []                                    # no index options: PyPI
    assert pins["torch"] == "2.13.0"
    assert all("+" not in version for version in pins.values())
    text = (ROOT / "requirements.txt").read_text()
    assert not re.search(r"this (machine|box)", text) and "CUDA" in text and "requirements-cpu.txt" in text


def test_cpu_variant_has_the_same_pins_and_torch_from_the_cpu_index():
    _, default = requirements("requirements.txt")
    options, cpu = requirements("requirements-cpu.txt")
    assert options == [f"--extra-index-url {CPU_INDEX}"]
    assert cpu["torch"] == default["torch"] + "+cpu"
    assert {k: v for k, v in cpu.items() if k != "torch"} == \
        {k: v for k, v in default.items() if k != "torch"}


def test_space_front_matter_builds_the_dockerfile_on_its_port():
    meta = front_matter(SPACE)
    assert meta["sdk"] == "docker"
    assert isinstance(meta["app_port"], int) and meta["app_port"] == 8501
    assert isinstance(meta["title"], str) and meta["title"]
    assert meta["colorFrom"] in COLOURS and meta["colorTo"] in COLOURS
    docker = (ROOT / "Dockerfile").read_text()
    assert f"EXPOSE {meta['app_port']}" in docker
    assert f"--server.port={meta['app_port']}" in docker
    assert "pip install -r requirements-cpu.txt" in docker


def test_project_installs_and_ci_never_use_the_cpu_index():
    for name in ("Makefile", ".ci/run", "requirements-dev.txt", "scripts/install_chromium.sh"):
        path = ROOT / name
        if path.exists():
            text = path.read_text()
            assert "requirements-cpu" not in text and "download.pytorch.org" not in text, name
    assert "-r requirements.txt" in (ROOT / "requirements-dev.txt").read_text()


def test_readme_deploy_section_names_the_three_paths():
    readme = (ROOT / "README.md").read_text()
    deploy = readme.split("## Deploy", 1)[1].split("\n## ", 1)[0]
    for needle in ("requirements-cpu.txt", "docker build", "deploy/huggingface/README.md",
                   "Community Cloud", "app_port: 8501"):
        assert needle in deploy, needle


def test_space_and_make_run_set_the_policy_as_documented():
    """The Space runs in safe mode (its front matter sets nothing; the text says how to add
    models by the allow-list); `make run` turns folders on for one's own machine; the README's
    Deploy section says which variable, why a shared server refuses, and the Cloud allow-list."""
    meta = front_matter(SPACE)
    assert not any("ATTENTION_EXPLORER" in str(v) for v in meta.values())
    text = SPACE.read_text(encoding="utf-8")
    assert "safe mode" in text and "ATTENTION_EXPLORER_MODELS" in text
    run = (ROOT / "Makefile").read_text().split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "ATTENTION_EXPLORER_LOCAL_MODELS=1" in run and "streamlit run app.py" in run
    readme = (ROOT / "README.md").read_text()
    deploy = readme.split("## Deploy", 1)[1].split("\n## ", 1)[0]
    for needle in ("ATTENTION_EXPLORER_LOCAL_MODELS", "ATTENTION_EXPLORER_MODELS",
                   "ATTENTION_EXPLORER_MODEL_MEMORY", "ATTENTION_EXPLORER_RESULTS",
                   "make run", "shared server refuses", "Community Cloud", "Secrets"):
        assert needle in deploy, needle
