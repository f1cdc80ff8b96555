"""The hosted demo's image, built and measured: its size and largest layers, the build, a cold
container's start, its memory, and 8 visitors at once on it (bench/visitors.py).

    python -m bench.image              build attention-explorer:bench (scripts/image.sh) and
                                       measure it
    python -m bench.image --no-build   measure the image already built under that tag
    python -m bench image --quick      builds nothing (CI stays short): one skipped row

Where no engine runs (no Docker daemon, no podman), a full run sets one up first
(`scripts/image.sh --setup`: podman, runc and mmdebstrap from Debian where apt may be used) and
looks again; a quick run installs nothing. Where there is still none, one skipped row says so.

The container runs as in the wild: the image's own user, a read-only root filesystem with a
small tmpfs at /tmp, `--memory 2g`, nothing set that opens folders. Its baseline is the same
image serving BARE_VISITOR (a bare Streamlit page with the same widgets, mounted read-only),
started, visited and clicked the same way: run to healthy, run to the first painted page, and
the 8 visitors' clicks (p50, p95) are ratios against it. Memory is the resident set of the
container's processes (their host pids; bench/servers.tree_rss), against the 2.0 GB target;
the image's size against 2.4 GB. Path probes: the same link with three model paths must get
the same sentence, each quoting only the visitor's own string.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Callable
from urllib.parse import urlencode

from bench.pages import Tab, launch, page_state, wait_ready
from bench.servers import Sampler, tree_rss
from bench.timing import print_table, row
from bench.visitors import BARE_VISITOR, summary, visit_all

ROOT = Path(__file__).resolve().parent.parent
IMAGE = "attention-explorer:bench"
SIZE_TARGET_GB = 2.4
RSS_TARGET_GB = 2.0
P95_TARGET = 3.0
RUN = ("--read-only", "--tmpfs", "/tmp:rw,size=256m,mode=1777", "--memory", "2g",
       "--memory-swap", "2g")
PROBES = ("/etc", "/no/such/folder", "/proc/self/root")
UNITS = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def engine(install: bool = False) -> tuple[str | None, str]:
    """The engine to use and, when there is none, why. With `install` (a full run), where none
    answers, `scripts/image.sh --setup` installs and configures podman (apt, as root or with
    sudo) and the engines are looked for once more; without it nothing is installed."""
    found = _answering()
    if found is None and install:
        print("image: no container engine answers; setting one up with scripts/image.sh --setup",
              file=sys.stderr)
        setup = subprocess.run(["bash", str(ROOT / "scripts" / "image.sh"), "--setup"], cwd=ROOT)
        found = _answering()
        if found is None:
            return None, f"no container engine: scripts/image.sh --setup could not set up " \
                         f"podman (exit {setup.returncode}; its messages are above)"
    if found is None:
        return None, "no container engine: no Docker daemon answers and podman is not " \
                     "installed (make image installs podman on Debian)"
    return found, ""


def _answering() -> str | None:
    """The first of docker and podman that is installed and whose `info` succeeds."""
    for name in ("docker", "podman"):
        if shutil.which(name) and subprocess.run([name, "info"], capture_output=True,
                                                 timeout=120).returncode == 0:
            return name
    return None


def skipped(reason: str) -> list[dict]:
    out = row(f"skipped: {reason}", "-", float("nan"), float("inf"))
    return [{**out, "ok": True}]


def build(eng: str, image: str) -> float:
    """Seconds scripts/image.sh takes to build `image` with `eng`."""
    start = time.monotonic()
    subprocess.run(["bash", str(ROOT / "scripts" / "image.sh")], check=True, cwd=ROOT,
                   env={**os.environ, "ENGINE": eng, "IMAGE": image})
    return time.monotonic() - start


def size_and_layers(eng: str, image: str) -> tuple[int, list[tuple[int, str]]]:
    """The image's size in bytes, and its layers (bytes, the instruction) largest first."""
    size = int(subprocess.run([eng, "image", "inspect", "--format", "{{.Size}}", image],
                              capture_output=True, text=True, check=True).stdout.strip())
    out = subprocess.run([eng, "history", "--no-trunc", "--format",
                          "{{.Size}}\t{{.CreatedBy}}", image],
                         capture_output=True, text=True, check=True).stdout
    layers = []
    for line in out.splitlines():
        shown, _, made = line.partition("\t")
        bytes_ = _bytes(shown)
        if bytes_ > 0:
            made = re.sub(r"^/bin/sh -c (#\(nop\) )?", "", made).strip()
            layers.append((bytes_, made[:70]))
    return size, sorted(layers, reverse=True)


def _bytes(shown: str) -> int:
    """"1.59 GB", "542MB", "8.7 kB", "0 B" (both engines print layer sizes so) in bytes."""
    match = re.fullmatch(r"\s*([\d.]+)\s*([kKMGT]?)B\s*", shown)
    if not match:
        return 0
    return int(float(match[1]) * UNITS[match[2]])


class Container:
    """`eng run` of `image` as in the wild (RUN) on a free loopback port; `cmd` replaces the
    start command, `mounts` are read-only (host path, container path)."""

    def __init__(self, eng: str, image: str, cmd: tuple[str, ...] = (),
                 mounts: tuple[tuple[str, str], ...] = ()) -> None:
        from tests.conftest import free_port

        self.eng, self.port = eng, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [eng, "run", "-d", "--rm", "-p", f"127.0.0.1:{self.port}:8501", *RUN]
        if eng == "podman":
            args.append("--no-healthcheck")     # podman's timers need systemd; polled instead
        for host, inside in mounts:
            args += ["-v", f"{host}:{inside}:ro"]
        self.started = time.monotonic()
        self.id = subprocess.run([*args, image, *cmd], capture_output=True, text=True,
                                 check=True).stdout.strip()
        self.healthy = self._wait_healthy()
        self.pid = int(self._inspect("{{.State.Pid}}"))

    def _inspect(self, fmt: str) -> str:
        return subprocess.run([self.eng, "inspect", "--format", fmt, self.id],
                              capture_output=True, text=True, check=True).stdout.strip()

    def _wait_healthy(self, timeout: float = 300) -> float:
        while time.monotonic() - self.started < timeout:
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        return time.monotonic() - self.started
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"the container was not healthy within {timeout:.0f} s: "
                           f"{self.logs()[-400:]}")

    def rss(self) -> int:
        return tree_rss(self.pid)

    def oom_killed(self) -> bool:
        return self._inspect("{{.State.OOMKilled}}") == "true"

    def logs(self) -> str:
        got = subprocess.run([self.eng, "logs", self.id], capture_output=True, text=True)
        return got.stdout + got.stderr

    def stop(self) -> None:
        subprocess.run([self.eng, "stop", "-t", "5", self.id], capture_output=True)


BOOT_MS = 60_000   # a first load whose page has not started Streamlit's app by then is lost


def first_page(browser, container: Container, restart: Callable[[], Container],
               path: str = "/", tries: int = 3) -> tuple[Container, float, list[str]]:
    """(the container, seconds from its `run` until `path`, its first request, has drawn, the
    states of the loads lost before). A load whose page never starts Streamlit's app (no
    stApp after BOOT_MS, no message) is not a slow page but a lost one: Chromium on the same
    host sees podman add or remove a container's network interface and aborts the page's
    requests in flight (net::ERR_NETWORK_CHANGED on its script chunks: seen on 6 of 8 bare
    containers opened a second after they started), and the page waits for ever. That
    container is stopped, `restart()` starts another, and the new one's first request is
    measured, up to `tries` containers."""
    from playwright.sync_api import TimeoutError as Timeout

    lost = []
    for attempt in range(tries):
        tab = Tab(browser)
        try:
            page = tab.visit(container.url + path)
            try:
                page.wait_for_selector('[data-testid="stApp"]', timeout=BOOT_MS)
            except Timeout:
                if attempt == tries - 1:
                    raise
                lost.append(page_state(page))
                container.stop()
                container = restart()
                continue
            wait_ready(page)
            return container, time.monotonic() - container.started, lost
        finally:
            tab.close()
    raise AssertionError("unreachable")


def settled_rss(container: Container, quiet: float = 5.0, limit: float = 180.0) -> int:
    """The container's RSS once it has changed by under 2% for `quiet` s (its warm-up done)."""
    began, last, since = time.monotonic(), container.rss(), time.monotonic()
    while time.monotonic() - began < limit:
        time.sleep(0.5)
        now = container.rss()
        if abs(now - last) > 0.02 * last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return last


def probes(browser, container: Container) -> tuple[int, list[str]]:
    """The sentence each PROBES path gets as a link's model, with the path replaced by "{}":
    how many distinct answers, and the answers."""
    from attention.spec import AttentionSpec

    answers = []
    tab = Tab(browser)
    try:
        for path in PROBES:
            query = {**AttentionSpec(source="pretrained").to_query(), "model": path}
            page = tab.open(f"{container.url}/Model_heads?{urlencode(query)}")
            text = page.locator('[data-testid="stMain"] [data-testid="stAlert"]').first.inner_text()
            answers.append(text.replace(path, "{}"))
    finally:
        tab.close()
    return len(set(answers)), answers


def measure(eng: str, image: str) -> dict:
    from playwright.sync_api import sync_playwright

    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        bare_script = Path(tmp) / "bare.py"
        bare_script.write_text(BARE_VISITOR)
        bare_script.chmod(0o644)
        Path(tmp).chmod(0o755)
        app = Container(eng, image)
        bare = None
        try:
            out["idle"] = app.rss()
            with sync_playwright() as p:
                browser = launch(p)
                app, out["first"], lost = first_page(browser, app, lambda: Container(eng, image))
                out["one_view"] = settled_rss(app)
                start_bare = lambda: Container(  # noqa: E731
                    eng, image, ("python", "-m", "streamlit", "run", "/bench/bare.py",
                                 "--server.port=8501", "--server.address=0.0.0.0"),
                    ((str(tmp), "/bench"),))
                bare = start_bare()
                bare, out["bare_first"], bare_lost = first_page(browser, bare, start_bare)
                out["lost"] = [("app", s) for s in lost] + [("bare page", s) for s in bare_lost]
                out["distinct"], out["answers"] = probes(browser, app)
                browser.close()
            out["healthy"], out["bare_healthy"] = app.healthy, bare.healthy
            out["bare"] = summary(visit_all(bare.url, bare=True))
            sampler = Sampler(app.pid)
            sampler.start()
            try:
                out["app"] = summary(visit_all(app.url))
            finally:
                sampler.stop_event.set()
                sampler.join()
            out["peak"] = sampler.peak
            out["oom"] = app.oom_killed()
            out["exceptions"] = app.logs().count("Traceback")
        finally:
            app.stop()
            if bare is not None:
                bare.stop()
    return out


def rows(m: dict, size: int, layers: list, built: float | None) -> list[dict]:
    gb = 1e9
    top = "; ".join(f"{b / 1e6:.0f} MB {what}" for b, what in layers[:4])
    app, bare = m["app"], m["bare"]
    errors = app["errors"] + [("bare", e) for _, e in bare["errors"]]
    if m["oom"]:
        errors.append(("container", "killed by the memory limit"))
    if m["exceptions"]:
        errors.append(("container", f"{m['exceptions']} tracebacks in its log"))
    built_s = f"built in {built:.0f} s; " if built is not None else ""
    out = [
        row("image size", f"{SIZE_TARGET_GB} GB", size / (SIZE_TARGET_GB * gb), 1.0,
            f"{size / gb:.2f} GB; {built_s}largest layers: {top}"),
        row("run to healthy", "bare page, same image", m["healthy"] / m["bare_healthy"],
            float("inf"), f"{m['healthy']:.1f} s against {m['bare_healthy']:.1f} s"),
        row("run to first painted page", "bare page, same image", m["first"] / m["bare_first"],
            float("inf"), f"{m['first']:.1f} s against {m['bare_first']:.1f} s" + "".join(
                f"; the {who}'s first load was lost (after {BOOT_MS // 1000} s: {state[:90]}), a new "
                f"container measured" for who, state in m.get("lost", []))),
        row("RSS idle", f"{RSS_TARGET_GB} GB", m["idle"] / (RSS_TARGET_GB * gb), 1.0,
            f"{m['idle'] / gb:.2f} GB after healthy, before any view"),
        row("RSS after one view", f"{RSS_TARGET_GB} GB", m["one_view"] / (RSS_TARGET_GB * gb), 1.0,
            f"{m['one_view'] / gb:.2f} GB, the first page drawn and the warm-up settled"),
        row("8 visitors: click p50", "bare page p50, same load", app["p50"] / bare["p50"],
            float("inf"), f"{app['p50']:.0f} ms against {bare['p50']:.0f} ms"),
        row("8 visitors: click p95", "bare page p95, same load", app["p95"] / bare["p95"],
            P95_TARGET, f"{app['p95']:.0f} ms against {bare['p95']:.0f} ms; "
                        f"{app['clicks']} and {bare['clicks']} clicks"),
        row("8 visitors: peak RSS", f"{RSS_TARGET_GB} GB", m["peak"] / (RSS_TARGET_GB * gb), 1.0,
            f"{m['peak'] / gb:.2f} GB under --memory 2g; {len(errors)} errors {errors[:3]}"),
        row("path probes: distinct answers", "one sentence", float(m["distinct"]), 1.0,
            json.dumps(m["answers"][0])[:120]),
    ]
    if errors:          # an error or a leaked marker fails the load rows whatever the ratios
        for r in out[5:8]:
            r["ok"] = False
    return out


def run(quick: bool = False, build_image: bool = True) -> list[dict]:
    eng, reason = engine(install=not quick)     # a quick run (CI) installs nothing
    if eng is None:
        return skipped(reason)
    if quick:
        return skipped("a quick run builds no image (python -m bench.image builds and measures it)")
    built = build(eng, IMAGE) if build_image else None
    size, layers = size_and_layers(eng, IMAGE)
    return rows(measure(eng, IMAGE), size, layers, built)


if __name__ == "__main__":
    print_table(run(quick="--quick" in sys.argv, build_image="--no-build" not in sys.argv))
