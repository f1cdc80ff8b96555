"""Where a corpus comes from: a bundled corpus, a file on the server, pasted lines or an upload.

Each becomes a list of texts: stripped, empty ones dropped, in order, repeats kept (they are the
user's data). A refusal is a UserError quoting the user's own string, never a resolved path (it
would show the server's layout), and saying what to do.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import UserError

CORPORA = Path(__file__).resolve().parent.parent / "data" / "corpora"
PAIRS = CORPORA.parent / "paraphrase_pairs.tsv"   # group, first, second (see its header)
BUNDLED = ("bundled:en", "bundled:zh")
PAIR_FORMATS = (".tsv", ".csv")
MAX_PAIRS = 5_000              # every sentence is compared with every other: (2N)^2 cosines
FORMATS = (".txt", ".csv", ".jsonl", ".parquet")
MAX_TEXTS = 100_000            # texts in one file: more is a batch job, not a dashboard run
MAX_TEXT_CHARS = 2_000         # characters in a text: past a model's context; likely a bad split
MAX_UPLOAD_BYTES = 5 * 2**20   # an upload is held in the server's memory for the session
MAX_UPLOAD_TEXTS = 300         # uploaded or pasted texts are run while the user waits
Rows = list[tuple[int, str]]   # (1-based line or row number, stripped non-empty text)
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")   # a CSV cell holding a number


def load(source: str, *, column: str | None = None, limit: int = MAX_TEXTS) -> list[str]:
    """The texts of "bundled:en", "bundled:zh" or a .txt/.csv/.jsonl/.parquet file on the server.
    More than `limit` texts is refused, not cut, so a run never reads less than was named."""
    shown, key = _q(source), source.strip()
    if key.lower().startswith("bundled:") and key.lower() not in BUNDLED:
        raise UserError("corpus.unknown_bundled", source=shown, bundled=", ".join(BUNDLED))
    path = Path(key) if key.lower() not in BUNDLED else CORPORA / f"{key.lower()[8:]}.txt"  # en, zh
    if path.suffix.lower() not in FORMATS:
        raise UserError("corpus.unknown_source", source=shown, bundled=", ".join(BUNDLED),
                        formats=", ".join(FORMATS))
    return _texts(shown, path.suffix.lower(), _read(path, shown), column, limit)


def from_upload(name: str, data: bytes, column: str | None = None) -> list[str]:
    """The texts of an uploaded file's bytes (same formats as load), under the upload caps."""
    shown, ext = _upload(name, data, FORMATS, "corpus.upload_format")
    return _texts(shown, ext, data, column, MAX_UPLOAD_TEXTS)


def _read(path: Path, shown: str) -> bytes:
    """A file's bytes; a sentence naming the user's string when it is missing or unreadable."""
    try:
        if not path.is_file():                           # a folder, a device, a pipe: no
            raise FileNotFoundError
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, ValueError):   # ValueError: a NUL byte
        raise UserError("corpus.not_found", source=shown) from None
    except OSError:
        raise UserError("corpus.unreadable", source=shown) from None


def _upload(name: str, data: bytes, formats: tuple[str, ...], refusal: str) -> tuple[str, str]:
    """(the name quoted, its extension) of an upload within the size cap and the formats."""
    shown = _q(name)
    if len(data) > MAX_UPLOAD_BYTES:
        raise UserError("corpus.upload_too_big", source=shown, mb=len(data) / 2**20,
                        limit=MAX_UPLOAD_BYTES // 2**20)
    ext = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if ext not in formats:
        raise UserError(refusal, source=shown, formats=", ".join(formats))
    return shown, ext


def parse_lines(raw: str) -> list[str]:
    """Texts pasted (or typed) one per line, under the upload caps."""
    return _checked(UserError("corpus.pasted"), _numbered(raw), "line", MAX_UPLOAD_TEXTS)


def pairs(source: str) -> list[tuple[str, str]]:
    """Paraphrase pairs (sentence, its paraphrase): "bundled:en" (written for the project,
    with hard negatives: pair_groups), or a two-column .tsv/.csv file on the server (an
    optional header naming the columns first and second; lines starting with # are notes).
    "bundled:zh" is refused with the reason: the bundled sentence model cannot read Chinese."""
    shown, key = _q(source), source.strip().lower()
    if key == "bundled:zh":
        raise UserError("corpus.pairs_no_chinese")
    if key.startswith("bundled:") and key != "bundled:en":
        raise UserError("corpus.pairs_unknown_bundled", source=shown)
    path = PAIRS if key == "bundled:en" else Path(source.strip())
    if path.suffix.lower() not in PAIR_FORMATS:
        raise UserError("corpus.pairs_format", source=shown, formats=", ".join(PAIR_FORMATS))
    return [(a, b) for _, a, b in _pair_rows(shown, path.suffix.lower(), _read(path, shown))]


def pairs_from_upload(name: str, data: bytes) -> list[tuple[str, str]]:
    """The pairs of an uploaded .tsv/.csv file's bytes, under the upload's size cap."""
    shown, ext = _upload(name, data, PAIR_FORMATS, "corpus.pairs_format")
    return [(a, b) for _, a, b in _pair_rows(shown, ext, data)]


def pair_groups() -> list[str]:
    """The group of each bundled pair, in pairs("bundled:en") order: pairs sharing a group are
    hard negatives of each other (most words shared, another meaning); "-" = none."""
    return [g for g, _, _ in _pair_rows(_q("bundled:en"), ".tsv", PAIRS.read_bytes())]


def _pair_rows(shown: str, ext: str, data: bytes) -> list[tuple[str, str, str]]:
    """(group, first, second) per pair; group "-" where the file has no group column."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise UserError("corpus.encoding", source=shown,
                        line=data[:err.start].count(b"\n") + 1) from None
    lines = [(n, line) for n, line in _numbered(text) if not line.startswith("#")]
    try:
        cells = [(n, [c.strip() for c in row]) for n, line in lines
                 for row in csv.reader([line], strict=True, **(
                     {"delimiter": "\t", "quoting": csv.QUOTE_NONE} if ext == ".tsv" else {}))]
    except csv.Error:
        raise UserError("corpus.csv_unreadable", source=shown) from None
    columns = ["first", "second"]
    if cells and {"first", "second"} <= {c.lower() for c in cells[0][1]}:
        columns = [c.lower() for c in cells[0][1]]
        cells = cells[1:]
    at = [columns.index("first"), columns.index("second")]
    group = columns.index("group") if "group" in columns else None
    rows = []
    for number, row in cells:
        if len(row) != len(columns):
            raise UserError("corpus.pairs_cells", source=shown, line=number, cells=len(row),
                            width=len(columns))
        first, second = row[at[0]], row[at[1]]
        if not first or not second:
            raise UserError("corpus.pairs_empty_cell", source=shown, line=number)
        if max(len(first), len(second)) > MAX_TEXT_CHARS:
            raise UserError("corpus.text_too_long", source=shown, number=number,
                            chars=max(len(first), len(second)), limit=MAX_TEXT_CHARS)
        rows.append((row[group] if group is not None else "-", first, second))
    if len(rows) < 2:
        raise UserError("corpus.pairs_too_few", source=shown, count=len(rows))
    if len(rows) > MAX_PAIRS:
        raise UserError("corpus.pairs_too_many", source=shown, count=len(rows), limit=MAX_PAIRS)
    return rows


def digest(texts: list[str]) -> str:
    """sha256 hex naming the exact list of texts (a run manifest's, a results key's): each
    text framed by its length in bytes (8, little-endian) before its UTF-8 bytes, so no two
    lists give the same stream (joined by newlines, ["a\\nb", "c"] and ["a", "b\\nc"] would)."""
    h = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def _q(value: str) -> str:
    """The user's own string, quoted, cut at 120 characters, control characters made visible."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(value)[:121])
    return f"“{text[:120]}…”" if len(text) > 120 else f"“{text}”"


def _names(names: list) -> str:
    shown = ", ".join(_q(str(n)[:40]) for n in names[:10])        # column or JSON key names
    return (shown + (", …" if len(names) > 10 else "")) or "—"


def _texts(shown: str, ext: str, data: bytes, column: str | None, limit: int) -> list[str]:
    if ext == ".parquet":
        try:
            return _checked(shown, _parquet(shown, data, column, limit), "row", limit)
        except (pa.ArrowException, OSError, KeyError):   # KeyError: a column name twice
            raise UserError("corpus.parquet_unreadable", source=shown) from None
    try:
        text = data.decode("utf-8-sig")                  # a byte-order mark is not text
    except UnicodeDecodeError as err:
        raise UserError("corpus.encoding", source=shown,
                        line=data[:err.start].count(b"\n") + 1) from None
    parse = {".csv": _csv, ".jsonl": _jsonl}.get(ext)
    return _checked(shown, parse(shown, text, column) if parse else _numbered(text), "line", limit)


def _checked(shown: str | UserError, rows: Rows, unit: str, limit: int) -> list[str]:
    """The texts, once there is at least one, at most `limit` and none too long."""
    if not rows:
        raise UserError("corpus.empty", source=shown)
    if len(rows) > limit:
        raise UserError("corpus.too_many", source=shown, count=len(rows), limit=limit)
    number, text = next(((n, t) for n, t in rows if len(t) > MAX_TEXT_CHARS), (0, ""))
    if text:                                             # a row of a table, else a line
        raise UserError("corpus.text_too_long_row" if unit == "row" else "corpus.text_too_long",
                        source=shown, number=number, chars=len(text), limit=MAX_TEXT_CHARS)
    return [text for _, text in rows]


def _numbered(text: str) -> Rows:
    """Every non-empty line, numbered as an editor does (\\r\\n and \\r end lines too)."""
    return [(n, s) for n, line in enumerate(re.split(r"\r\n?|\n", text), 1) if (s := line.strip())]


def _jsonl(shown: str, text: str, column: str | None) -> Rows:
    """One JSON object (its `column` or "text" key) or one JSON string per line."""
    key, rows = column or "text", []
    for number, line in _numbered(text):
        try:
            item = json.loads(line)
        except (ValueError, RecursionError):
            raise UserError("corpus.jsonl_parse", source=shown, line=number) from None
        if isinstance(item, dict):
            if key not in item:
                raise UserError("corpus.jsonl_missing_key", source=shown, line=number,
                                field=_q(key), keys=_names(list(item)))
            item = item[key]
            if item is not None and not isinstance(item, str):
                raise UserError("corpus.jsonl_not_text", source=shown, line=number, field=_q(key))
        elif not isinstance(item, str):
            raise UserError("corpus.jsonl_shape", source=shown, line=number)
        if item and item.strip():                        # a null or blank value: no text
            rows.append((number, item.strip()))
    return rows


def _pick(shown: str, names: list[str], column: str | None, texty: list[str]) -> str:
    """The column to read: the one asked for, else "text", else the only column of text."""
    if column is not None and column not in names:
        raise UserError("corpus.missing_column", source=shown, column=_q(column),
                        columns=_names(names))
    if column is not None or "text" in names:
        return column if column is not None else "text"
    if len(texty) == 1:
        return texty[0]
    if texty:
        raise UserError("corpus.ambiguous_column", source=shown, columns=_names(texty))
    raise UserError("corpus.no_text_column", source=shown, columns=_names(names))


def _csv(shown: str, text: str, column: str | None) -> Rows:
    """A header, then rows of as many cells; numbers are the line each row starts on (the
    csv module, not pandas, so a ragged row is refused instead of shifted or cut)."""
    reader, table, last = csv.reader(io.StringIO(text, newline=""), strict=True), [], 0
    try:
        for row in reader:
            if any(cell.strip() for cell in row):
                table.append((last + 1, [cell.strip() for cell in row]))
            last = reader.line_num
    except csv.Error:                                    # an unclosed quote, a huge cell
        raise UserError("corpus.csv_unreadable", source=shown) from None
    (_, header), body = table[0] if table else (0, []), table[1:]
    for line, row in body:
        if len(row) != len(header):
            raise UserError("corpus.csv_ragged", source=shown, line=line, cells=len(row),
                            width=len(header))
    texty = [h for j, h in enumerate(header)
             if any(row[j] and not _NUMBER.fullmatch(row[j]) for _, row in body)]
    j = header.index(_pick(shown, header, column, texty)) if body else 0
    return [(line, row[j]) for line, row in body if row[j]]


def _parquet(shown: str, data: bytes, column: str | None, limit: int) -> Rows:
    """The text column. A small file can inflate to gigabytes, so the row count and the column's
    declared size (footer), then its decoded size (dictionary) are checked before decoding."""
    parquet = pq.ParquetFile(pa.BufferReader(data))
    schema, meta = parquet.schema_arrow, parquet.metadata
    if meta.num_rows > limit:
        raise UserError("corpus.too_many", source=shown, count=meta.num_rows, limit=limit)
    is_text = lambda kind: pa.types.is_string(kind) or pa.types.is_large_string(kind) or (
        pa.types.is_dictionary(kind) and is_text(kind.value_type))
    name = _pick(shown, list(schema.names), column, [f.name for f in schema if is_text(f.type)])
    if not is_text(schema.field(name).type):
        raise UserError("corpus.column_not_text", source=shown, column=_q(name))
    leaves = [meta.schema.column(j).path for j in range(meta.num_columns)]
    declared = sum(meta.row_group(g).column(leaves.index(name)).total_uncompressed_size
                   for g in range(meta.num_row_groups)) if name in leaves else 0
    budget = limit * (MAX_TEXT_CHARS * 4 + 16)          # UTF-8: 4 bytes a character at most
    if declared > budget:
        raise UserError("corpus.too_much_text", source=shown, limit=limit, chars=MAX_TEXT_CHARS)
    cells = pq.ParquetFile(pa.BufferReader(data), read_dictionary=[name]).read(columns=[name])
    cells = cells.column(0).combine_chunks()            # dictionary-encoded: rows not expanded
    if (pc.sum(pc.take(pc.binary_length(cells.dictionary), cells.indices)).as_py() or 0) > budget:
        raise UserError("corpus.too_much_text", source=shown, limit=limit, chars=MAX_TEXT_CHARS)
    return [(i + 1, v.strip()) for i, v in enumerate(cells.to_pylist()) if v and v.strip()]
