"""The CPU-only deploy path agrees with the default install: requirements-cpu.txt pins what
requirements.txt pins (torch as its +cpu build from the PyTorch CPU index), the Hugging Face
Space's front matter serves the port the Dockerfile's Streamlit listens on, and the project's
own installs (Makefile, CI, dev requirements) use the standard index only."""
from __future__ import annotations

import json
import re
import subprocess
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
    assert "ARG REQUIREMENTS=requirements-cpu.txt" in docker


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


# ---- the Dockerfile, the image script, the benchmark and the docs agree ----------------------

def _cmd() -> list[str]:
    line = next(l for l in (ROOT / "Dockerfile").read_text().splitlines() if l.startswith("CMD "))
    return json.loads(line[4:])


def test_one_start_command_one_port_everywhere():
    """The image's CMD is `streamlit run app.py` on the Space's app_port; the benchmark's
    baseline container, the script's run line and docs/deploy.md use that port; Community
    Cloud's main file is the same app.py."""
    cmd = _cmd()
    port = front_matter(SPACE)["app_port"]
    assert cmd[:4] == ["python", "-m", "streamlit", "run"] and cmd[4] == "app.py"
    assert f"--server.port={port}" in cmd and "--server.address=0.0.0.0" in cmd
    from bench import image
    bare = _bare_command()
    assert bare[:4] == cmd[:4] and bare[5:] == cmd[5:]     # the same start, another script
    script = (ROOT / "scripts" / "image.sh").read_text()
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    run_line = f"-p {port}:{port} --read-only --tmpfs /tmp:size=256m --memory 2g"
    assert run_line in script and run_line in deploy
    assert "--memory" in image.RUN and image.RUN[image.RUN.index("--memory") + 1] == "2g"
    assert any(arg.startswith("/tmp:") for arg in image.RUN)
    assert "main file `app.py`" in (ROOT / "README.md").read_text()


def _bare_command() -> list[str]:
    """The start command bench/image.py gives the baseline container (read from its source,
    so the test needs no engine)."""
    text = (ROOT / "bench" / "image.py").read_text()
    call = re.search(r'\("python", "-m", "streamlit", "run", "[^"]+",\s*"[^"]+", "[^"]+"\)', text)
    assert call, "bench/image.py starts its bare page with another command"
    return json.loads("[" + call[0][1:-1] + "]")


def test_image_script_uses_the_dockerfiles_base_and_its_requirements_files():
    """scripts/image.sh reads the default base from the Dockerfile's ARG BASE, passes only
    the project's own requirements files, and tags what `make image` names."""
    script = (ROOT / "scripts" / "image.sh").read_text()
    assert "sed -n 's/^ARG BASE=//p' Dockerfile" in script
    assert re.findall(r"echo (requirements[\w-]*\.txt)", script) == \
        ["requirements-cpu.txt", "requirements.txt"]
    assert "--build-arg \"REQUIREMENTS=$requirements\"" in script
    assert "--format docker" in script               # podman keeps the HEALTHCHECK
    make = (ROOT / "Makefile").read_text().split("\nimage:", 1)[1].split("\n\n", 1)[0]
    assert "scripts/image.sh" in make
    assert "IMAGE=${IMAGE:-attention-explorer:local}" in script
    checked = subprocess.run(["bash", "-n", str(ROOT / "scripts" / "image.sh")],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


class FakeHost:
    """shutil.which and subprocess.run for bench.image without building or installing: podman
    appears once `scripts/image.sh --setup` has run (when `setup_works`); every command run is
    recorded."""

    def __init__(self, setup_works: bool) -> None:
        self.setup_works, self.installed, self.calls = setup_works, False, []

    def which(self, name: str) -> str | None:
        return "/usr/bin/podman" if name == "podman" and self.installed else None

    def run(self, args, **kwargs):
        self.calls.append(list(args))
        code = 0
        if args[:1] == ["bash"] and args[-1] == "--setup":
            self.installed = self.setup_works
            code = 0 if self.setup_works else 1
        elif args[:2] == ["podman", "info"]:
            code = 0 if self.installed else 125
        return subprocess.CompletedProcess(args, code, "", "")


def _fake_host(monkeypatch, setup_works: bool) -> FakeHost:
    from bench import image

    host = FakeHost(setup_works)
    monkeypatch.setattr(image.shutil, "which", host.which)
    monkeypatch.setattr(image.subprocess, "run", host.run)
    monkeypatch.setattr(image, "build", lambda *a: (_ for _ in ()).throw(AssertionError("built")))
    return host


def _setups(host: FakeHost) -> list[list[str]]:
    return [c for c in host.calls if c[0] == "bash" and c[-1] == "--setup"]


def test_quick_benchmark_without_an_engine_installs_nothing_and_skips(monkeypatch):
    """A quick run (CI) where no engine answers: one skipped row that says why, and no
    command is run that could install anything (only `info` probes, and none without a binary)."""
    from bench import image

    host = _fake_host(monkeypatch, setup_works=True)
    rows = image.run(quick=True)
    assert len(rows) == 1 and rows[0]["name"].startswith("skipped: no container engine")
    assert "podman is not installed" in rows[0]["name"] and rows[0]["ok"] is True
    assert host.calls == [] and not host.installed


def test_full_benchmark_without_an_engine_sets_up_podman_then_uses_it(monkeypatch):
    """A full run where no engine answers runs `scripts/image.sh --setup` once and then finds
    podman; the engine found goes on to the build (stopped here by the fake build)."""
    from bench import image

    host = _fake_host(monkeypatch, setup_works=True)
    assert image.engine(install=True) == ("podman", "")
    setups = _setups(host)
    assert len(setups) == 1 and setups[0][1].endswith("scripts/image.sh")
    assert host.calls.index(setups[0]) < host.calls.index(["podman", "info"])

    host = _fake_host(monkeypatch, setup_works=True)
    try:
        image.run()
    except AssertionError as built:
        assert str(built) == "built"
    else:
        raise AssertionError("a full run with podman set up did not go on to build")
    assert len(_setups(host)) == 1


def test_full_benchmark_whose_setup_fails_is_one_skipped_row(monkeypatch):
    """Where the setup cannot install podman (no apt, no root), one skipped row says so."""
    from bench import image

    host = _fake_host(monkeypatch, setup_works=False)
    rows = image.run()
    assert len(rows) == 1 and "scripts/image.sh --setup could not set up podman" in rows[0]["name"]
    assert "exit 1" in rows[0]["name"] and len(_setups(host)) == 1


def test_benchmark_with_an_engine_installs_nothing(monkeypatch):
    """An engine that answers is used as it is; a quick run with one builds nothing."""
    from bench import image

    host = _fake_host(monkeypatch, setup_works=True)
    host.installed = True
    assert image.engine(install=True) == ("podman", "")
    assert _setups(host) == []
    rows = image.run(quick=True)
    assert len(rows) == 1 and "builds no image" in rows[0]["name"] and _setups(host) == []


def test_benchmark_reads_layer_sizes_and_sends_eight_distinct_links():
    """Layer sizes as both engines print them; the 8 visitors' links all differ, name the
    two bundled models, and the bare page gets the same clicks in the same order."""
    from bench import image, visitors

    assert [image._bytes(s) for s in ("1.59 GB", "542MB", "8.7 kB", "0 B", "n/a")] == \
        [1_590_000_000, 542_000_000, 8_700, 0, 0]
    app = visitors.links("http://h", bare=False)
    bare = visitors.links("http://h", bare=True)
    assert len(app) == visitors.VISITORS == 8 and len({url for url, _ in app}) == 8
    assert [click for _, click in app] == [click for _, click in bare]
    assert sum("model=SmolLM2-135M-Instruct" in url for url, _ in app) == 2
    assert abs(visitors.percentile([1, 2, 3, 4, 5], 0.95) - 4.8) < 1e-9
