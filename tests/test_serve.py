"""serve.py, the launcher: `streamlit run app.py` with the same options, plus the warm-up
thread (attention/ui/warmup.py), whose results the pages then use instead of recomputing."""
from __future__ import annotations

import threading

import pytest

import serve
from attention import diskcache
from attention import experiment as ex
from attention.ui import warmup
from tests.apptest import ROOT, run_page


@pytest.fixture
def streamlit_cli(monkeypatch):
    calls = []
    from streamlit.web import cli

    monkeypatch.setattr(cli, "main", lambda args, prog_name: calls.append((args, prog_name)))
    return calls


def test_runs_app_py_with_the_given_streamlit_options(streamlit_cli, monkeypatch):
    monkeypatch.setenv(serve.WARMUP_ENV, "0")
    serve.main(["--server.port", "8599", "--server.headless", "true"])
    assert streamlit_cli == [(["run", str(ROOT / "app.py"), "--server.port", "8599",
                               "--server.headless", "true"], "streamlit")]


def test_warm_up_thread_starts_before_the_server_unless_switched_off(streamlit_cli, monkeypatch):
    started = threading.Event()
    monkeypatch.setattr(warmup, "warm_up", lambda: started.set())
    monkeypatch.setenv(serve.WARMUP_ENV, "0")
    serve.main([])
    assert not started.wait(0.5)
    monkeypatch.delenv(serve.WARMUP_ENV)
    serve.main([])
    assert started.wait(10)
    assert len(streamlit_cli) == 2


def test_a_failing_step_is_skipped_and_the_rest_still_run():
    ran = []

    def broken():
        raise RuntimeError("no model here")

    times = warmup.warm_up((("a", lambda: ran.append("a")), ("bad", broken),
                            ("b", lambda: ran.append("b"))))
    assert ran == ["a", "b"] and set(times) == {"a", "b"}


def test_every_page_module_the_warm_up_imports_exists():
    warmup._pages()          # raises if a module it names was renamed


def test_sharper_page_uses_what_the_warm_up_stored(tmp_path, monkeypatch):
    monkeypatch.setenv(diskcache.ENV, str(tmp_path))
    monkeypatch.setattr(ex, "SHARPEN_STEPS", 20)
    monkeypatch.setattr(ex, "SCALING_STEPS", 10)
    monkeypatch.setattr(ex, "EVAL_SIZE", 512)
    warmup._sharper()
    assert len(list(tmp_path.glob("*.zip"))) == 2

    def no_training(*args, **kwargs):
        raise AssertionError("the page trained again")

    monkeypatch.setattr(ex, "sharpening_study", no_training)
    monkeypatch.setattr(ex, "scaling_sweep", no_training)
    at = run_page("pages/4_Is_sharper_better.py", train_seed="0")
    assert not at.exception
    assert len(at.get("vega_lite_chart")) == 5
