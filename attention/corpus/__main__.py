"""python -m attention.corpus run --model MODEL --corpus SOURCE --out DIR
       [--engine local|ray] [--address RAY_ADDRESS] [--batch-size N]
       [--what stats,importance,qk,nll] [--sample N] [--workers K]
       [--sweeps global,layers,heads] [--limit N]        (nll: a causal LM's sweeps)
python -m attention.corpus ship --model MODEL --work DIR [--sweeps global,layers,heads] [--now]
python -m attention.corpus ship --model SENTENCE_MODEL --pairs bundled:en [--sweeps global,layers]
python -m attention.corpus ship --importance [--corpus C] [--work DIR] [--engine ray --workers 2]
                                   (the importance page's records of the bundled corpora)
python -m attention.corpus embed --out DIR [--heads all|L.H,...]   (the global view's maps)

Every refusal is one sentence on stderr and exit code 2 (docs/corpus.md)."""
from __future__ import annotations

import argparse
import sys


class _Parser(argparse.ArgumentParser):
    def error(self, message):              # argparse's own refusals: one sentence, exit 2
        sys.stderr.write(f"{message[0].upper()}{message[1:]}.\n")
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m attention.corpus", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    r = sub.add_parser("run", help="run a model over a corpus into Parquet shards")
    r.add_argument("--model", required=True)
    r.add_argument("--corpus", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--engine", default="local", choices=("local", "ray"))
    r.add_argument("--address", default=None)
    r.add_argument("--batch-size", type=int, default=32)
    r.add_argument("--what", default="stats,qk",
                   help="stats, qk, importance (the importance page's rows), nll")
    r.add_argument("--sample", type=int, default=8, help="pieces per text whose q and k are kept")
    r.add_argument("--workers", type=int, default=2, help="Ray actors (each loads the model)")
    r.add_argument("--sweeps", default="global", help="nll: global,layers,heads")
    r.add_argument("--limit", type=int, default=0, help="the corpus's first N texts (0: all)")
    r.add_argument("--quiet", action="store_true")
    s = sub.add_parser("ship", help="run (or resume) the causal-LM sweeps, or with --importance "
                       "the importance page's rows, and ship them")
    s.add_argument("--model", default=None, help="required but with --importance")
    s.add_argument("--corpus", default=None, help="default bundled:en (with --importance: "
                   "every bundled corpus whose records ship)")
    s.add_argument("--importance", action="store_true",
                   help="the importance page's records (the bundled model)")
    s.add_argument("--work", default=None, help="the jobs' folders (kept: a rerun resumes)")
    s.add_argument("--pairs", default=None,
                   help="a sentence model's retrieval sweeps over this pair set instead")
    s.add_argument("--sweeps", default=None, help="default global,layers,heads "
                   "(with --pairs: global,layers)")
    s.add_argument("--engine", default="local", choices=("local", "ray"))
    s.add_argument("--address", default=None)
    s.add_argument("--workers", type=int, default=2)
    s.add_argument("--now", action="store_true", help="ship the finished shards, compute nothing")
    s.add_argument("--quiet", action="store_true")
    e = sub.add_parser("embed", help="compute the global view's joint q/k maps of a finished run")
    e.add_argument("--out", required=True)
    e.add_argument("--heads", default="all")
    e.add_argument("--method", default="auto")
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    from attention.corpus.job import Refused

    try:
        if args.command == "run":
            return _job(args)
        if args.command == "ship":
            return _ship(args)
        return _embed(args)
    except Refused as err:
        sys.stderr.write(f"{err}\n")
        return 2


def _job(args) -> int:
    from attention.corpus.compute import Settings
    from attention.corpus.job import do_job

    what = tuple(w.strip() for w in args.what.split(",") if w.strip())
    if args.address and args.engine != "ray":
        sys.stderr.write("--address joins a Ray cluster: add --engine ray.\n")
        return 2
    out = do_job(args.model, args.corpus, args.out, engine=args.engine, address=args.address,
                 settings=Settings(what=what, batch_size=args.batch_size, sample=args.sample,
                                   sweeps=tuple(w.strip() for w in args.sweeps.split(",") if w.strip()),
                                   limit=args.limit),
                 progress=not args.quiet, workers=args.workers)
    if not args.quiet:
        print(f"Wrote {out}")
    return 0


def _ship(args) -> int:
    from attention.sweeps.settings import SWEEPS
    from attention.corpus.ship import ship

    if args.importance:
        return _ship_importance(args)
    if not args.model:
        sys.stderr.write("ship needs --model MODEL (or --importance).\n")
        return 2
    args.corpus = args.corpus or "bundled:en"
    if args.pairs:
        return _ship_pairs(args)
    if not args.work:
        sys.stderr.write("ship needs --work DIR (the jobs' folders), or --pairs SOURCE.\n")
        return 2
    sweeps = [w.strip() for w in (args.sweeps or "global,layers,heads").split(",") if w.strip()]
    if not sweeps or any(w not in SWEEPS for w in sweeps):
        sys.stderr.write(f"--sweeps takes a comma-separated list of {', '.join(SWEEPS)}.\n")
        return 2
    for path in ship(args.model, args.corpus, args.work, sweeps, engine=args.engine,
                     address=args.address, workers=args.workers, now=args.now,
                     progress=not args.quiet):
        print(f"Wrote {path.name}")
    return 0


def _ship_importance(args) -> int:
    from pathlib import Path

    from attention import diskcache
    from attention.corpus.ship import ship_importance
    from attention.importance import store

    corpora = [args.corpus] if args.corpus else list(store.SHIPPED_CORPORA)
    if any(c not in store.SHIPPED_CORPORA for c in corpora):
        sys.stderr.write(f"--importance ships the records of {', '.join(store.SHIPPED_CORPORA)}, "
                         f"not {args.corpus!r}.\n")
        return 2
    if args.model or args.pairs or args.sweeps or args.now:
        sys.stderr.write("--importance takes --corpus, --work, --engine, --address and "
                         "--workers only (the bundled model).\n")
        return 2
    work = Path(args.work) if args.work else diskcache.cache_dir() / "importance-work"
    for corpus in corpora:
        path = ship_importance(corpus, work, engine=args.engine, address=args.address,
                               workers=args.workers, progress=not args.quiet)
        print(f"Wrote {path.name} ({corpus}, {path.stat().st_size / 1024:.0f} kB)")
    return 0


def _ship_pairs(args) -> int:
    from attention.errors import UserError
    from attention.sweeps.pairs import SWEEPS
    from attention.sweeps.ship import ship_pairs

    sweeps = [w.strip() for w in (args.sweeps or "global,layers").split(",") if w.strip()]
    if not sweeps or any(w not in SWEEPS for w in sweeps):
        sys.stderr.write(f"--sweeps with --pairs takes a comma-separated list of "
                         f"{', '.join(SWEEPS)}.\n")
        return 2
    try:
        paths = ship_pairs(args.model, args.pairs, sweeps, progress=not args.quiet)
    except UserError as err:
        sys.stderr.write(f"{err}\n")
        return 2
    for path in paths:
        print(f"Wrote {path.name}")
    return 0


def _embed(args) -> int:
    from pathlib import Path

    from attention.corpus.job import Refused, read_manifest
    from attention.corpus.store import embedding

    out = Path(args.out)
    m = read_manifest(out)
    if m is None or not m.get("complete"):
        raise Refused(f"{str(out)!r} holds no finished run: run the job first.")
    if args.heads == "all":
        import pandas as pd

        from attention.corpus.store import read_table
        first = read_table(out, "stats", columns=["layer", "head"])
        heads = sorted({(int(a), int(b)) for a, b in zip(first["layer"], first["head"])})
    else:
        try:
            heads = [tuple(int(x) for x in h.split(".")) for h in args.heads.split(",")]
        except ValueError:
            raise Refused("--heads takes all or layer.head pairs such as 0.3,5.11.") from None
    for layer, head in heads:
        embedding(out, layer, head, method=args.method)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
