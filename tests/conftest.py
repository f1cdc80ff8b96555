"""Shared fixtures: one torch thread, clean Streamlit caches, and a real server + Chromium."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
torch.set_num_threads(1)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# AppTests run the pages in this process: no warm-up or prefetching behind their backs
# (attention.ui.entry; the browser tests' servers get their own environment).
os.environ["ATTENTION_EXPLORER_WARMUP"] = "0"

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--disable-dev-shm-usage"]
# ms a browser test waits for a condition on the page: generous, a loaded 2-core box draws slowly.
UI_TIMEOUT = 120_000


@pytest.fixture(autouse=True)
def _clear_streamlit_caches():
    """st.cache_data / st.cache_resource outlive an AppTest; clear them around each test."""
    yield
    if "streamlit" in sys.modules:
        import streamlit as st

        st.cache_data.clear()
        st.cache_resource.clear()


@pytest.fixture(autouse=True)
def _no_prefetch_outlives_a_test():
    """A test that turned prefetching on (as a server's first page run does) leaves it off, its queue empty:
    a prefetch left on made later tests' heatmaps compute in the background, and a daemon
    thread inside torch when the interpreter exits aborts it."""
    yield
    if "attention.ui.prefetch" in sys.modules:
        from attention.ui import prefetch

        enabled = prefetch._enabled
        prefetch.enable(False)
        prefetch.drain()
        assert not enabled, "a test left prefetching on"


PORTS_ENV = "ATTENTION_EXPLORER_PORTS"   # "8600-8609": servers only on these ports


def free_port() -> int:
    """A free loopback port: any, or one of the range PORTS_ENV names (a machine where each
    user is given a few ports)."""
    low, _, high = os.environ.get(PORTS_ENV, "0").partition("-")
    for port in range(int(low), int(high or low) + 1):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError(f"no free port in {PORTS_ENV}={os.environ[PORTS_ENV]}")


@pytest.fixture(autouse=True, scope="session")
def _hermetic_disk_cache(tmp_path_factory):
    """Results the app keeps on disk go to this session's temporary directory, never the
    user's home: the first visit computes as on a fresh machine. Servers inherit it."""
    from attention.diskcache import ENV

    os.environ[ENV] = str(tmp_path_factory.mktemp("attention-explorer-cache"))


class Server:
    """The dashboard as a user starts it (`streamlit run app.py`: its first page run starts the
    warm-up and prefetching) on a free loopback port, stopped when the test ends.

    `script` (a path relative to the repository, or absolute) runs another script with plain
    `streamlit run`, the repository's working directory and .streamlit/config.toml (benchmarks
    use it for baselines); `cwd` runs another checkout of the app (bench/memory.py can measure
    an older commit that way)."""

    def __init__(self, script: str | None = None, cwd: Path | str = ROOT,
                 env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
               "ATTENTION_EXPLORER_WARMUP": "1", **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(script or "app.py"),
             "--server.headless", "true",
             "--server.port", str(self.port), "--server.address", "127.0.0.1"],
            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.healthy():
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited: {self.proc.stdout.read()}")
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("streamlit did not become healthy within 60 s")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def serving():
    """For a fixture: a Server started now, yielded, and stopped when the fixture ends."""
    srv = Server()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def server():
    """One server shared by the browser tests that do not need a fresh one."""
    yield from serving()


@pytest.fixture
def fresh_server():
    """A server started for this test alone (deep links must work on a fresh server)."""
    yield from serving()


@pytest.fixture
def local_server():
    """A fresh server as a person starts it on their own machine (`make run`): model folders
    load."""
    srv = Server(env={"ATTENTION_EXPLORER_LOCAL_MODELS": "1"})
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def chromium():
    """Debian's Chromium driven by Playwright; skip where none exists, except in CI."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but no chromium on PATH: `make browser` should install it")
        pytest.skip("no chromium on PATH (apt-get install chromium); browser tests skipped")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium):
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    yield pg
    context.close()


def wait_for_app(page, timeout: float = 180_000) -> None:
    """Wait until Streamlit has connected and finished running the current page's script
    (the same attributes Streamlit's own end-to-end tests wait on)."""
    page.wait_for_selector('[data-testid="stApp"][data-test-connection-state="CONNECTED"]',
                           timeout=timeout)
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]',
                           timeout=timeout)
    page.wait_for_timeout(200)


def show_toy_settings(page, path: str) -> None:
    """On a page that does not use the random projections' settings (not in
    layout.TOY_PAGES; `path` as in its URL) they are put away in a closed box: open it (a
    rerun) so the sidebar's numbers are drawn, after checking they were not."""
    from playwright.sync_api import expect

    from attention.ui.layout import TOY_PAGES
    from attention.ui.pages import PAGES

    away = {entry.url_path for entry in PAGES if entry.title not in TOY_PAGES}
    if path in away:
        sidebar = page.locator('[data-testid="stSidebar"]')
        expect(sidebar.locator('input[type="number"]')).to_have_count(1, timeout=UI_TIMEOUT)
        sidebar.get_by_text("Model settings", exact=True).click()   # the temperature's is left


def eventually(page, check, timeout: float = UI_TIMEOUT):
    """Call `check()` (which asserts on, or returns True/False for, what the page shows now)
    until it passes, re-reading the page every 250 ms; after `timeout` ms its last
    AssertionError is raised. For conditions Playwright's `expect` cannot state exactly
    (lists of labels, numbers within a tolerance)."""
    deadline = time.monotonic() + timeout / 1000
    while True:
        try:
            if check() is False:
                raise AssertionError(f"still false after waiting: {check.__doc__ or check}")
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            page.wait_for_timeout(250)
