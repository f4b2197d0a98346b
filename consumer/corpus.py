"""Reading article corpora: JSON Lines files, gzip'd or not, or standard input."""

from __future__ import annotations

import gzip
import io
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from consumer.errors import InputError


def open_text(path: str | Path) -> IO[str]:
    """Open `path` for reading UTF-8 text; `-` is stdin and `.gz` is decompressed."""
    if str(path) == "-":
        return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape")
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.suffix == ".gz":
        return gzip.open(p, "rt", encoding="utf-8")
    return p.open("r", encoding="utf-8")


def open_bytes(path: str | Path) -> IO[bytes]:
    """Like `open_text`, but raw bytes: for callers that must see invalid UTF-8 as it is."""
    if str(path) == "-":
        return sys.stdin.buffer
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    return gzip.open(p, "rb") if p.suffix == ".gz" else p.open("rb")


def iter_jsonl(path: str | Path, limit: int | None = None) -> Iterator[dict]:
    """Yield one dict per non-empty line; a malformed line stops with its line number."""
    with open_text(path) as f:
        for n, record in enumerate(parse_jsonl_lines(f, str(path)), 1):
            yield record
            if limit is not None and n >= limit:
                return


def parse_jsonl_lines(lines: Iterable[str], name: str, first_lineno: int = 1) -> Iterator[dict]:
    """JSON objects from text lines, skipping blank ones; errors name `name:line`."""
    for lineno, line in enumerate(lines, first_lineno):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{name}:{lineno}: not a JSON line ({e.msg})") from None
        if not isinstance(record, dict):
            raise InputError(f"{name}:{lineno}: expected a JSON object")
        yield record


def shared_data_dir() -> Path:
    """`../shared/data` beside the repository: the real corpora used by tests and benchmarks."""
    return Path(__file__).resolve().parent.parent.parent / "shared" / "data"
