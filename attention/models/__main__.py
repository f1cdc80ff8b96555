"""python -m attention.models convert [--gguf FILE] [--out DIR]
python -m attention.models where [--gguf FILE]

convert: the GGUF file (default: the bundled SmolLM2-135M-Instruct) into float32 safetensors,
once, with tqdm bars. --out DIR writes it into DIR (an image's build step: set
ATTENTION_EXPLORER_PREBUILT=DIR when the app runs, and it converts nothing); without it, into
the cache. where: the folder a load would read, or that it needs converting.

A refusal is one sentence on stderr and exit code 2."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m attention.models",
                                description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name, text in (("convert", "convert a GGUF file to float32 safetensors, once"),
                       ("where", "print where the converted folder is")):
        s = sub.add_parser(name, help=text)
        s.add_argument("--gguf", default=None, help="a .gguf file (default: the bundled SmolLM2)")
        if name == "convert":
            s.add_argument("--out", default=None, help="write into this folder, not the cache")
    args = p.parse_args(argv)

    from attention.errors import UserError
    from attention.models import convert, gguf_source

    try:
        gguf = Path(args.gguf) if args.gguf else gguf_source.bundled_gguf()
        if not gguf.is_file():
            sys.stderr.write(f"There is no file {args.gguf}.\n")
            return 2
        if args.command == "where":
            folder = convert.converted(gguf)
            print(folder if folder is not None else "not converted yet")
            return 0
        folder = convert.convert(gguf, Path(args.out) if args.out else None, show=True)
    except UserError as err:
        sys.stderr.write(f"{err}\n")
        return 2
    print(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
