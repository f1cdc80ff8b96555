"""The corpus job (attention.corpus run) on tiny models: batched equals one text at a time,
the local engine equals Ray, a SIGKILLed run resumes to the same result, memory stays flat,
and every refusal is one sentence with exit code 2."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from attention.corpus import job, store
from attention.corpus import shards
from attention.corpus.compute import Settings, compute_shard
from attention.models import load_model
from tests.tiny_models import tiny  # noqa: F401

pytestmark = pytest.mark.slow     # corpus runs in subprocesses, Ray: left out of make test-fast

ROOT = Path(__file__).resolve().parent.parent
WORDS = ("the cat sat on a mat while dogs ran past , and she said that it was late . "
         "every student who came read his book because they liked it").split()


def corpus_file(folder: Path, n: int, name: str = "corpus.txt") -> Path:
    """n deterministic texts of 3-17 words, one per line."""
    rng = np.random.default_rng(1)
    lines = [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 18)))) for _ in range(n)]
    path = folder / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def cli(*args, env=None, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attention.corpus", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def tables(out: Path) -> dict[str, pd.DataFrame]:
    """Every table of a run, sorted so that two runs compare row by row."""
    keys = {"texts": ["text_id"], "pieces": ["text_id", "position"],
            "stats": ["text_id", "layer", "head"], "qk": ["text_id", "layer", "head", "position"]}
    return {name: store.read_table(out, name).sort_values(key).reset_index(drop=True)
            for name, key in keys.items()}


def assert_same(a: dict, b: dict, tol: float = 1e-5) -> None:
    for name in a:
        x, y = a[name], b[name]
        assert list(x.columns) == list(y.columns), name
        assert len(x) == len(y), name
        for c in x.columns:
            if c in ("q", "k"):
                diff = np.abs(np.stack(x[c].to_numpy()) - np.stack(y[c].to_numpy())).max()
                assert diff <= tol, (name, c, diff)
            elif pd.api.types.is_float_dtype(x[c]):
                np.testing.assert_allclose(x[c].to_numpy(), y[c].to_numpy(), atol=tol, rtol=0,
                                           err_msg=f"{name}.{c}")
            else:
                assert x[c].tolist() == y[c].tolist(), (name, c)


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_batched_equals_one_text_at_a_time(tiny, name, tmp_path):
    torch.set_num_threads(1)
    model = load_model(str(tiny[name]), trusted=True)
    texts = corpus_file(tmp_path, 12).read_text().splitlines()
    settings = Settings(what=("stats", "qk"), batch_size=12, sample=5)
    a = compute_shard(model, 100, texts, settings, batched=True)
    b = compute_shard(model, 100, texts, settings, batched=False)
    for table in ("texts", "pieces", "stats", "qk"):
        assert len(a[table]) == len(b[table]) > 0
    assert_same({t: a[t] for t in ("texts", "pieces", "stats", "qk")},
                {t: b[t] for t in ("texts", "pieces", "stats", "qk")})
    # the sample is fixed by the text id: at most 5 pieces per text, the same for every head
    per = a["qk"].groupby(["text_id", "layer", "head"])["position"].apply(tuple)
    assert per.groupby("text_id").nunique().eq(1).all() and per.map(len).max() == 5


def test_local_and_ray_write_equal_results(tiny, tmp_path):
    pytest.importorskip("ray")
    corpus = corpus_file(tmp_path, 40)
    local, ray_out = tmp_path / "local", tmp_path / "ray"
    r1 = cli("run", "--model", tiny["bert"], "--corpus", corpus, "--out", local,
             "--batch-size", 8, "--quiet")
    assert r1.returncode == 0, r1.stderr
    r2 = cli("run", "--model", tiny["bert"], "--corpus", corpus, "--out", ray_out,
             "--batch-size", 8, "--engine", "ray", "--quiet")
    assert r2.returncode == 0, r2.stderr[-3000:]
    assert_same(tables(local), tables(ray_out))
    m1, m2 = shards.read_manifest(local), shards.read_manifest(ray_out)
    assert m1["shards_done"] == m2["shards_done"] == list(range(5))
    assert m1["complete"] and m2["complete"] and m1["code_version"] == m2["code_version"]


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_killed_run_resumes_to_the_uninterrupted_result(tiny, tmp_path, engine):
    """SIGKILL once the first shard is on disk (the whole process group: with Ray, the driver
    and the cluster it started), then the same command again: the tables equal an
    uninterrupted local run's, and no temporary file is left."""
    if engine == "ray":
        pytest.importorskip("ray")
    corpus = corpus_file(tmp_path, 60)
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    args = ["--model", tiny["gpt2"], "--corpus", corpus, "--batch-size", 4, "--quiet"]
    assert cli("run", *args, "--out", whole).returncode == 0
    args += ["--engine", engine]
    proc = subprocess.Popen([sys.executable, "-m", "attention.corpus", "run", *map(str, args),
                             "--out", str(killed)], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    first = killed / "stats" / shards.shard_name(0)
    deadline = time.monotonic() + 300
    while not first.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = shards.read_manifest(killed)
    assert before is not None and not before["complete"]
    again = cli("run", *args, "--out", killed)
    assert again.returncode == 0, again.stderr[-3000:]
    assert_same(tables(whole), tables(killed), tol=1e-6 if engine == "ray" else 0.0)
    assert shards.read_manifest(killed)["shards_done"] == list(range(15))
    leftovers = [p for p in killed.rglob(".*") if p.name != "view"]
    assert not leftovers, leftovers


def test_finished_shards_are_not_recomputed(tiny, tmp_path):
    corpus = corpus_file(tmp_path, 10)
    out = tmp_path / "out"
    args = ["run", "--model", tiny["bert"], "--corpus", corpus, "--out", out,
            "--batch-size", 4, "--quiet"]
    assert cli(*args).returncode == 0
    stamp = {p: p.stat().st_mtime_ns for p in out.glob("*/part-*.parquet")}
    assert cli(*args).returncode == 0
    assert {p: p.stat().st_mtime_ns for p in out.glob("*/part-*.parquet")} == stamp


@pytest.mark.slow
def test_two_thousand_texts_run_in_flat_memory(tiny, tmp_path):
    """What the job's own process holds after each shard: the Python objects alive (a frame, a
    tensor or a list kept per shard is one or more each) and the bytes in Arrow's memory pool
    (the tables written). The last three quarters of the run add none of either beyond a small
    slack. Counted, not read from the RSS: how much of freed memory the C allocator hands back
    to the system differs between allocators and machines."""
    corpus = corpus_file(tmp_path, 2000)
    script = textwrap.dedent(f"""
        import gc, json, torch
        import pyarrow as pa
        torch.set_num_threads(1)
        from attention.corpus import job
        from attention.corpus.compute import Settings
        held = []
        def mark(done, total):
            gc.collect()
            held.append((done, len(gc.get_objects()), pa.total_allocated_bytes()))
        job.do_job({str(tiny['bert'])!r}, {str(corpus)!r}, {str(tmp_path / 'out')!r},
                   settings=Settings(batch_size=25), on_progress=mark)
        print(json.dumps(held))
    """)
    got = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=900)
    assert got.returncode == 0, got.stderr[-2000:]
    held = json.loads(got.stdout.strip().splitlines()[-1])
    assert held[-1][0] == 2000
    first = [(objects, arrow) for done, objects, arrow in held if done <= 500][-1]
    later = [(objects, arrow) for done, objects, arrow in held if done > 500]
    grown = (max(o for o, _ in later) - first[0], max(a for _, a in later) - first[1])
    assert grown[0] < SLACK_OBJECTS and grown[1] < 2**20, (first, grown)


SLACK_OBJECTS = 200   # objects a run may still add after its first quarter (caches filling)


def _one_sentence(stderr: str) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].endswith((".", ":", ")")), lines[0]
    return lines[0]


def test_refusals_are_one_sentence_and_exit_2(tiny, tmp_path):
    corpus = corpus_file(tmp_path, 6)
    out = tmp_path / "out"
    bad = cli("run", "--model", tiny["bert"], "--corpus", tmp_path / "missing.txt", "--out", out)
    assert bad.returncode == 2 and _one_sentence(bad.stderr)
    nomodel = cli("run", "--model", tmp_path / "no_such_model", "--corpus", corpus, "--out", out)
    assert nomodel.returncode == 2 and _one_sentence(nomodel.stderr)
    assert cli("run", "--model", tiny["bert"], "--corpus", corpus, "--out", out,
               "--quiet").returncode == 0
    other = cli("run", "--model", tiny["gpt2"], "--corpus", corpus, "--out", out)
    assert other.returncode == 2 and "another run" in _one_sentence(other.stderr)
    size = cli("run", "--model", tiny["bert"], "--corpus", corpus, "--out", tmp_path / "o2",
               "--batch-size", 0)
    assert size.returncode == 2 and _one_sentence(size.stderr)
    engine = cli("run", "--model", tiny["bert"], "--corpus", corpus, "--out", out,
                 "--engine", "spark")
    assert engine.returncode == 2 and _one_sentence(engine.stderr)


def test_without_ray_the_ray_engine_says_how_to_install_it(tiny, tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "ray.py").write_text("raise ImportError('no ray here')\n")
    corpus = corpus_file(tmp_path, 4)
    got = cli("run", "--model", tiny["bert"], "--corpus", corpus, "--out", tmp_path / "o",
              "--engine", "ray", env={"PYTHONPATH": f"{shim}{os.pathsep}{ROOT}"})
    assert got.returncode == 2
    assert "pip install" in _one_sentence(got.stderr)


def test_summary_and_map_of_a_finished_run(tiny, tmp_path):
    corpus = corpus_file(tmp_path, 30)
    out = tmp_path / "out"
    assert cli("run", "--model", tiny["bert"], "--corpus", corpus, "--out", out,
               "--batch-size", 10, "--quiet").returncode == 0
    summary = store.view_table(out, "summary")
    assert len(summary) == 2 * 4 and summary["texts"].eq(30).all()
    assert (summary["entropy_lo"] <= summary["entropy_mean"]).all()
    assert set(summary["pattern"]) <= set(store.SHARES)
    m = store.embedding(out, 1, 2, method="pca")
    assert set(m["kind"]) == {"q", "k"} and len(m) == 2 * len(
        store.read_table(out, "qk").query("layer == 1 and head == 2"))
    assert (out / "view" / "map-L1-H2.parquet").is_file()


def test_the_code_version_follows_the_code_that_makes_the_rows(tmp_path, monkeypatch):
    """A resumed job's key changes with the code of the captured rows (a measure) and not with
    an edit elsewhere (a page's view) or a comment: an unrelated edit does not stop a resume."""
    import shutil

    from attention import diskcache
    from attention.corpus.compute import SOURCES

    package = tmp_path / "attention"
    for name in (*SOURCES, "ui/views/corpus.py"):
        source, copy = diskcache.PACKAGE / name, package / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, copy)
    monkeypatch.setattr(diskcache, "PACKAGE", package)
    first = shards.code_version()
    with open(package / "ui/views/corpus.py", "a") as f:
        f.write("\ndef elsewhere():\n    return 1\n")
    with open(package / "measures/rows.py", "a") as f:
        f.write("\n# a comment only\n")
    assert shards.code_version() == first
    with open(package / "measures/rows.py", "a") as f:
        f.write("\ndef changed():\n    return 2\n")
    assert shards.code_version() != first
