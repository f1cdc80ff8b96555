"""Re-key the results shipped in attention/data/ to the current code's keys, numbers unchanged.

After a change that moves or rewords the code of shipped results without changing what it
computes (a module moved to another package, a rename, a cache decorator), their keys change
and the stores would recompute. This reads each store's one shipped record under the key it
was written with and writes the same bytes under the current key: never recomputes, and
proves every frame unchanged (max |diff| printed, 0 required). After a change that can move
a number, remake those results with their own ship command instead.

    .venv/bin/python scripts/rekey_shipped.py           # re-key what is stale, print the proof
    .venv/bin/python scripts/rekey_shipped.py --check   # exit 1 when a record needs it

The stores: the experiment's (attention/data/experiments/: sharpening, scaling), the
importance page's (attention/data/importance/: importance, importance-fixed) and the sweeps'
(attention/data/sweeps/: every `<model>-<corpus>-<sweep>-<key>[.<table>].parquet` whose model
and corpus are bundled ones). The shipped corpus views (attention/data/corpus/) are not looked
up by key: their manifests record the code version that made them, which stays true.
"""
from __future__ import annotations

import json
import math
import os
import re
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd  # noqa: E402

from attention import config  # noqa: E402
from attention import diskcache  # noqa: E402
from attention.text.corpora import digest  # noqa: E402

MODELS = (config.BUNDLED, config.BUNDLED_LM)      # the sweeps' shipped models and corpora
CORPORA = ("bundled:en", "bundled:zh")


def max_diff(old: dict[str, pd.DataFrame], new: dict[str, pd.DataFrame]) -> float:
    """The largest |difference| between two sets of frames: inf when names, columns, shapes
    or a non-numeric column differ; NaN equals NaN."""
    if old.keys() != new.keys():
        return math.inf
    worst = 0.0
    for name, a in old.items():
        b = new[name]
        if list(a.columns) != list(b.columns) or a.shape != b.shape:
            return math.inf
        for col in a.columns:
            x, y = a[col], b[col]
            if pd.api.types.is_numeric_dtype(x) and pd.api.types.is_numeric_dtype(y) \
                    and not pd.api.types.is_bool_dtype(x):
                x, y = x.to_numpy(dtype=float), y.to_numpy(dtype=float)
                both = pd.isna(x) & pd.isna(y)
                if (pd.isna(x) != pd.isna(y)).any():
                    return math.inf
                d = abs(x[~both] - y[~both])
                worst = max(worst, float(d.max()) if d.size else 0.0)
            elif not x.astype(str).equals(y.astype(str)):
                return math.inf
    return worst


def rekey_zip(old: Path, new: Path, key: str) -> float:
    """Write the record at `old` to `new` under `key`, every member's bytes as they were but
    meta.json's key; remove `old`. Returns max |diff| between the frames read back."""
    before = diskcache.read(old, diskcache.stored_key(old) or "")
    if before is None:
        raise SystemExit(f"{old}: unreadable, not re-keyed")
    with zipfile.ZipFile(old) as zf:
        members = {info.filename: zf.read(info) for info in zf.infolist()}
    meta = json.loads(members[diskcache.META])
    meta["key"] = key
    members[diskcache.META] = json.dumps(meta).encode()
    fd, tmp = tempfile.mkstemp(dir=new.parent, prefix=f".{new.stem}-", suffix=".tmp")
    with os.fdopen(fd, "wb") as fh, zipfile.ZipFile(fh, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    os.replace(tmp, new)
    if old != new:
        old.unlink()
    after = diskcache.read(new, key)
    if after is None or dict(after.values) != dict(before.values):
        return math.inf
    return max_diff(dict(before.frames), dict(after.frames))


def zip_targets() -> list[tuple[Path, str, Path, str, str | None]]:
    """(folder, store name, current path, current key, the corpus digest its values name, or
    None where the store ships one record) of every shipped zip record."""
    from attention.experiment import store as xc
    from attention.importance import store as ic

    out = [(xc.SHIPPED, name, path, k, None) for (path, k, _), name in
           zip(xc._shipped(xc.SHIPPED_SEED), ("sharpening", "scaling"))]
    for corpus in ic.SHIPPED_CORPORA:
        texts = ic.shipped_texts(corpus)
        out.append((ic.SHIPPED, "importance", ic.shipped_path(corpus),
                    ic.key(config.BUNDLED, texts), digest(texts)))
    out.append((ic.SHIPPED, "importance-fixed", ic.fixed_path(config.BUNDLED, ic.SHIPPED),
                ic.fixed_key(config.BUNDLED), None))
    return out


def _values(path: Path) -> dict:
    """The values a shipped record holds (its corpus digest among them), read under its own key."""
    record = diskcache.read(path, diskcache.stored_key(path) or "")
    return dict(record.values) if record is not None else {}


def rekey_zips(check: bool) -> list[tuple[str, str, float]]:
    done = []
    for folder, name, path, key, corpus in zip_targets():
        found = [p for p in folder.glob(f"{name}-*.zip")
                 if re.fullmatch(rf"{re.escape(name)}-[0-9a-f]{{32}}\.zip", p.name)
                 and (corpus is None or _values(p).get("digest") == corpus)]
        if diskcache.read(path, key) is not None and found == [path]:
            continue                                      # already current
        if len(found) != 1:
            raise SystemExit(f"{folder}: {len(found)} records of {name}, expected one")
        if check:
            done.append((found[0].name, path.name, math.nan))
            continue
        done.append((found[0].name, path.name, rekey_zip(found[0], path, key)))
    return done


SWEEP_FILE = re.compile(r"([A-Za-z0-9._]+?)-([A-Za-z0-9._]+?)-(\w+?)-([0-9a-f]{16})"
                        r"((?:\.[a-z_]+)?)\.parquet")


def sweep_targets() -> list[tuple[Path, Path]]:
    """(shipped sweep file, its current path) for every file whose name is not current."""
    from attention.sweeps import pairs, store
    from attention.text.corpora import load, pairs as load_pairs

    models = {store.slug(m): m for m in MODELS}
    corpora = {store.slug(c): c for c in CORPORA}
    out = []
    for old in sorted(store.FOLDER.glob("*.parquet")):
        m = SWEEP_FILE.fullmatch(old.name)
        known = m is not None and m[1] in models and m[2] in corpora
        if known and m[3] in store.PLAN:
            new = store.path(models[m[1]], corpora[m[2]], load(corpora[m[2]]), m[3])
        elif known and m[3].removeprefix("pairs_") in pairs.SWEEPS:     # a sentence model's
            new = pairs.path(models[m[1]], corpora[m[2]], load_pairs(corpora[m[2]]),
                             m[3].removeprefix("pairs_"))
        else:
            print(f"left as it is (not a bundled model's sweep): {old.name}")
            continue
        if m[5]:
            new = store.derived(new, m[5][1:])
        if new != old:
            out.append((old, new))
    return out


def rekey_sweeps(check: bool) -> list[tuple[str, str, float]]:
    done = []
    for old, new in sweep_targets():
        if check:
            done.append((old.name, new.name, math.nan))
            continue
        before = pd.read_parquet(old)
        tmp = new.with_name(f".{new.name}.tmp")
        tmp.write_bytes(old.read_bytes())
        tmp.replace(new)
        old.unlink()
        done.append((old.name, new.name, max_diff({"f": before}, {"f": pd.read_parquet(new)})))
    return done


def main(argv: list[str]) -> int:
    check = argv == ["--check"]
    done = rekey_zips(check) + rekey_sweeps(check)
    for old, new, diff in done:
        print(f"{'stale' if check else 're-keyed'} {old} -> {new}"
              + ("" if check else f"  max |diff| {diff:g}"))
    if not done:
        print("every shipped record is under the current key")
    if check:
        return 1 if done else 0
    return 1 if any(diff != 0 for _, _, diff in done) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
