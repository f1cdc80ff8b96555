"""The corpus job's paths the other job tests do not reach: a run SIGKILLed while it writes
the manifest, while a shard's temporary file is half written, or after its last shard but
before the derived tables, each resumed to the uninterrupted run's tables; `--what
importance`; a text that cannot be encoded (recorded in texts.error, the others unharmed);
and a batch split at the weight-cell cap on the bundled MiniLM, equal to one text at a time."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from attention import config
from attention.corpus import compute, shards, store
from attention.corpus.compute import Settings, compute_shard
from attention.models import load_model
from tests.test_corpus_job import ROOT, assert_same, cli, corpus_file, tables
from tests.tiny_models import tiny  # noqa: F401

pytestmark = pytest.mark.slow     # corpus runs in subprocesses: left out of make test-fast

# A job in a subprocess that SIGKILLs itself at one point: argv[1] names it.
KILLER = textwrap.dedent('''
    import os, signal, sys
    from attention.corpus import shards, store

    point, argv = sys.argv[1], sys.argv[2:]
    die = lambda: os.kill(os.getpid(), signal.SIGKILL)
    if point == "manifest":                  # the 4th manifest write: half of it, then killed
        real, seen = shards._atomic_write, []
        def write(path, data):
            if path.name == "manifest.json":
                seen.append(1)
                if len(seen) == 4:
                    path.with_name(f".{path.name}.{os.getpid()}.tmp").write_bytes(data[:len(data) // 2])
                    die()
            real(path, data)
        shards._atomic_write = write
    elif point == "temporary":               # shard 2's stats file half written, not renamed
        real_replace = os.replace
        def replace(src, dst):
            if "part-00002" in str(src) and "stats" in str(src):
                with open(src, "r+b") as f:
                    f.truncate(64)
                die()
            real_replace(src, dst)
        os.replace = replace
    elif point == "derive":                  # every shard listed, the view not yet made
        store.derive = lambda out: die()
    from attention.corpus.__main__ import main
    sys.exit(main(argv))
''')


@pytest.fixture(scope="module")
def whole(tiny, tmp_path_factory):
    folder = tmp_path_factory.mktemp("whole")
    corpus = corpus_file(folder, 20)
    args = ["--model", tiny["gpt2"], "--corpus", corpus, "--batch-size", 4, "--quiet"]
    assert cli("run", *args, "--out", folder / "out").returncode == 0
    return args, folder / "out"


@pytest.mark.parametrize("point", ["manifest", "temporary", "derive"])
def test_a_run_killed_at_each_point_resumes_to_the_uninterrupted_result(whole, tmp_path, point):
    args, reference = whole
    out = tmp_path / "killed"
    killed = subprocess.run([sys.executable, "-c", KILLER, point, "run", *map(str, args),
                             "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                            timeout=600)
    assert killed.returncode == -9, killed.stderr
    before = shards.read_manifest(out)
    assert before is not None
    if point == "derive":
        assert before["complete"] and not (out / store.VIEW / "done").exists()
    else:
        assert not before["complete"]
        assert list(out.rglob(".*.tmp")), "the kill left no temporary file to clean"
    again = cli("run", *args, "--out", out)
    assert again.returncode == 0, again.stderr
    assert_same(tables(reference), tables(out), tol=0.0)
    after = shards.read_manifest(out)
    assert after["complete"] and after["shards_done"] == list(range(5))
    assert not [p for p in out.rglob(".*") if p.name != "view"]          # nothing half left
    for name in ("texts.parquet", "pieces.parquet", "summary.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(out / store.VIEW / name),
                                      pd.read_parquet(reference / store.VIEW / name))


def test_what_importance_writes_each_texts_token_importance(tiny, tmp_path):
    from attention.importance import token_importance

    corpus = corpus_file(tmp_path, 5)
    out = tmp_path / "out"
    got = cli("run", "--model", tiny["bert_base"], "--corpus", corpus, "--out", out,
              "--batch-size", 2, "--what", "stats,importance", "--quiet")
    assert got.returncode == 0, got.stderr
    table = store.read_table(out, "importance")
    texts = corpus.read_text(encoding="utf-8").split("\n")[:-1]
    model = load_model(str(tiny["bert_base"]), trusted=True)
    assert sorted(table["text_id"].unique()) == list(range(5))
    for text_id, text in enumerate(texts):
        mine = table[table["text_id"] == text_id].drop(columns="text_id").reset_index(drop=True)
        alone = token_importance(model, [text]).drop(columns="text")
        pd.testing.assert_frame_equal(mine[list(alone.columns)], alone, check_exact=False,
                                      atol=1e-5, check_dtype=False)
    assert not (out / "qk").exists() and (out / "stats").is_dir()


def test_a_text_that_fails_to_encode_is_recorded_and_skipped(tiny):
    model = load_model(str(tiny["gpt2"]), trusted=True)          # 64 positions
    texts = ["a short text", " ".join(["cat"] * 80), "another short one"]
    got = compute_shard(model, 10, texts, Settings(what=("stats",), batch_size=8))
    table = got["texts"].set_index("text_id")
    assert table.loc[11, "error"] and "64" in table.loc[11, "error"]   # the model's limit
    assert table.loc[11, "pieces"] == 0
    assert table.loc[10, "error"] == table.loc[12, "error"] == ""
    assert sorted(got["stats"]["text_id"].unique()) == [10, 12]
    assert sorted(got["pieces"]["text_id"].unique()) == [10, 12]
    alone = compute_shard(model, 10, texts, Settings(what=("stats",), batch_size=8),
                          batched=False)
    for name in ("pieces", "stats"):
        assert_same({name: got[name]}, {name: alone[name]})


def test_a_batch_splits_at_the_weight_cell_cap_on_minilm():
    """Texts of about 480 pieces: 6 layers x 12 heads x 480^2 cells each, so at most
    2 ** 26 / (72 * 480 ** 2) = 4 share a forward; a shard of 7 is split, and every group
    gives what its texts give alone."""
    model = load_model(config.BUNDLED)
    rng = np.random.default_rng(0)
    letters = list("bcdefghjklmnopqrstuvwxyz")
    texts = [" ".join(rng.choice(letters, size=int(rng.integers(470, 490)))) for _ in range(7)]
    lengths = [len(model.encode(t)["input_ids"][0]) for t in texts]
    assert all(470 <= n <= 512 for n in lengths)
    order = sorted(range(7), key=lambda i: lengths[i])
    groups = compute._groups(order, lengths, model, limit=8)
    assert len(groups) >= 2 and sorted(i for g in groups for i in g) == list(range(7))
    for g in groups:
        n = max(lengths[i] for i in g)
        assert len(g) * model.layers * model.heads * n * n <= config.MAX_WEIGHT_CELLS
    settings = Settings(what=("stats", "qk"), batch_size=8)
    batched = compute_shard(model, 0, texts, settings)
    alone = compute_shard(model, 0, texts, settings, batched=False)
    for name in ("texts", "pieces", "stats", "qk"):
        assert_same({name: batched[name]}, {name: alone[name]}, tol=1e-4)
