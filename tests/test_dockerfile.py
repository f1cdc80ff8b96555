"""The Dockerfile, checked by reading it: the image is built and measured by `python -m
bench.image` (make image), never in a test. Its agreement with the Space's front matter, the
image script and the docs is in tests/test_deploy.py."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions (op, argument), per stage (what comes before the first
    FROM, the global ARGs, is stage 0)."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    out: list[list[tuple[str, str]]] = [[]]
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        op, _, arg = line.partition(" ")
        if op.upper() == "FROM":
            out.append([])
        out[-1].append((op.upper(), arg.strip()))
    return out


def runtime() -> list[tuple[str, str]]:
    return stages()[-1]


def env(stage: list[tuple[str, str]]) -> dict[str, str]:
    pairs = " ".join(arg for op, arg in stage if op == "ENV").split()
    return dict(p.split("=", 1) for p in pairs if "=" in p)


def test_base_image_is_python_311_slim_as_a_build_argument():
    """A registry-backed build uses python:3.11-slim; scripts/image.sh passes a local base
    where no registry answers. Both stages start from it."""
    assert stages()[0] == [("ARG", "BASE=python:3.11-slim")]
    assert [stage[0] for stage in stages()[1:]] == [("FROM", "${BASE} AS build"), ("FROM", "${BASE}")]


def test_cpu_torch_by_default_and_never_a_cuda_build():
    build = stages()[1]
    assert ("ARG", "REQUIREMENTS=requirements-cpu.txt") in build
    runs = [arg for op, arg in build if op == "RUN"]
    assert any("pip install -r /tmp/req/${REQUIREMENTS}" in r and
               "pip install --no-deps -r /tmp/req/requirements-nodeps.txt" in r for r in runs)
    assert any("torch.version.cuda" in r and "sys.exit" in r for r in runs)
    copied = " ".join(arg for op, arg in build if op == "COPY")
    for name in ("requirements.txt", "requirements-cpu.txt", "requirements-nodeps.txt"):
        assert name in copied
    # a venv: Debian's own Python (the local base) refuses system-wide installs
    assert ("RUN", "python3 -m venv /opt/venv") in build
    assert env(build)["PATH"].startswith("/opt/venv/bin:")


def test_runtime_stage_copies_only_what_it_runs_and_runs_nothing():
    """No RUN in the runtime stage: a build's pip volumes (scripts/image.sh) would leave their
    mount points in its layers; the venv, the app and the converted model come from the build."""
    ops = runtime()
    assert not [arg for op, arg in ops if op == "RUN"]
    copied = [arg.split()[-2:] for op, arg in ops if op == "COPY"]
    assert ["/opt/venv", "/opt/venv"] in copied and ["/app", "/app"] in copied
    assert all(arg.startswith("--from=build") for op, arg in ops if op == "COPY")


def test_runs_as_the_non_root_user_1000():
    users = [arg for op, arg in runtime() if op == "USER"]
    assert users == ["explorer"]
    build_runs = " ".join(arg for op, arg in stages()[1] if op == "RUN")
    assert "useradd --create-home --uid 1000 explorer" in build_runs
    assert ("COPY", "--from=build /etc/passwd /etc/group /etc/") in runtime()


def test_healthcheck_hits_streamlit_health_endpoint_on_8501():
    ops = dict(runtime())
    assert "/_stcore/health" in ops["HEALTHCHECK"] and "8501" in ops["HEALTHCHECK"]
    assert ops["EXPOSE"] == "8501"
    assert "app.py" in ops["CMD"] and "--server.port=8501" in ops["CMD"]


def test_what_visitors_create_goes_to_tmp_and_nothing_downloads():
    """A read-only root filesystem with a tmpfs at /tmp: every cache the app writes is there,
    and the converted model comes prebuilt, read-only."""
    values = env(runtime())
    assert values["HF_HUB_OFFLINE"] == "1" and values["TRANSFORMERS_OFFLINE"] == "1"
    assert values["ATTENTION_EXPLORER_CACHE"].startswith("/tmp/")
    assert values["MPLCONFIGDIR"].startswith("/tmp/")
    assert values["PYTHONDONTWRITEBYTECODE"] == "1"
    build_runs = " ".join(arg for op, arg in stages()[1] if op == "RUN")
    assert "compileall" in build_runs and "unchecked-hash /app" in build_runs


def test_shipped_results_checked_at_build_time_into_the_shipped_folder():
    """Stale shipped results are remade where the image reads them (attention/data), so a
    cold container trains nothing."""
    build_runs = " ".join(arg for op, arg in stages()[1] if op == "RUN")
    assert ("ATTENTION_EXPLORER_CACHE=/app/attention/data/experiments python -m "
            "attention.experiment.store 0") in build_runs


def test_image_runs_in_safe_mode_with_no_folders_open():
    """A shared server: nothing in the image opens folders or widens what a visitor loads
    (README, Deploy); the comment says so."""
    text = (ROOT / "Dockerfile").read_text()
    settings = " ".join(arg for stage in stages() for op, arg in stage
                        if op in ("ENV", "ARG", "CMD", "RUN"))
    for name in ("ATTENTION_EXPLORER_LOCAL_MODELS", "ATTENTION_EXPLORER_MODELS",
                 "ATTENTION_EXPLORER_ALLOW_DOWNLOADS", "ATTENTION_EXPLORER_RESULTS"):
        assert name not in settings, name
    assert "Safe mode" in text and "ATTENTION_EXPLORER_LOCAL_MODELS" in text


def test_dockerignore_leaves_out_tests_benchmarks_and_the_checkout():
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {".git", ".venv", "tests", "bench", "docs", "scripts", "**/__pycache__"} <= ignored
    for needed in ("app.py", "pages", "attention", ".streamlit"):
        assert needed not in ignored
