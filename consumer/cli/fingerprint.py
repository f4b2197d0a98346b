"""`newsdedup fingerprint` (articles in, fingerprints out) and `newsdedup hamming A B`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import IO, Any

from consumer.corpus import iter_jsonl, open_text, parse_jsonl_lines
from consumer.errors import InputError, NewsdedupError
from consumer.fingerprint.fingerprinter import (
    Fingerprint,
    Fingerprinter,
    FingerprintOptions,
    hamming,
)
from consumer.fingerprint.terms import ENGINES


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "fingerprint",
        help="print the SimHash and content hash of articles",
        description="Read JSON Lines articles ({id, title, content}) and write one line "
        '{"id", "simhash", "content_hash"} per article ("terms" too with --explain). '
        "Plain text (not JSON) on standard input is fingerprinted as one article.",
    )
    p.add_argument("file", nargs="?", default="-", help="JSONL file, .jsonl.gz, or - (stdin)")
    p.add_argument(
        "--explain", action="store_true", help="add the terms and weights, heaviest first"
    )
    p.add_argument(
        "--engine", choices=ENGINES, default="rjieba", help="segmenter (default: rjieba)"
    )
    p.add_argument("--idf", metavar="FILE", help="IDF table (default: jieba's bundled idf.txt)")
    p.set_defaults(handler=run_fingerprint)

    h = subparsers.add_parser(
        "hamming",
        help="print the Hamming distance of two hex fingerprints",
        description="The number of bits in which two 64-bit SimHash fingerprints differ, as "
        "`fingerprint` prints them (simhash) or a decision carries them: articles within "
        "[index] max_distance of each other are near-duplicate candidates.",
    )
    h.add_argument("a", help="fingerprint: up to 16 hex digits, 0x optional")
    h.add_argument("b", help="fingerprint: up to 16 hex digits, 0x optional")
    h.set_defaults(handler=run_hamming)


def _articles(path: str) -> tuple[Iterator[dict[str, Any]], bool]:
    """(articles, plain): JSONL from a file; from stdin JSONL if its first non-blank line is a
    JSON object, otherwise the whole input as one plain-text article (plain = True)."""
    if path != "-":
        return iter_jsonl(path), False
    f = open_text("-")
    first = f.readline()
    while first and not first.strip():
        first = f.readline()
    try:
        record = json.loads(first)
    except json.JSONDecodeError:
        record = None
    if not isinstance(record, dict):
        return iter([{"id": None, "content": first + f.read()}]), True
    return _jsonl_after(record, f), False


def _jsonl_after(first: dict[str, Any], f: IO[str]) -> Iterator[dict[str, Any]]:
    yield first
    yield from parse_jsonl_lines(f, "-", first_lineno=2)


def _text_field(record: dict[str, Any], name: str) -> str:
    value = record.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(f"field {name!r} must be a string, not {type(value).__name__}")
    return value


def _line(article_id: Any, fp: Fingerprint, explain: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": article_id,
        "simhash": fp.simhash_hex,
        "content_hash": fp.content_hash_hex,
    }
    if explain:
        out["terms"] = [[term, round(weight, 6)] for term, weight in fp.terms]
    return out


def run_fingerprint(args: argparse.Namespace) -> int:
    fingerprinter = Fingerprinter(FingerprintOptions(engine=args.engine, idf_path=args.idf))
    articles, plain = _articles(args.file)
    failed = 0
    for record in articles:
        article_id = record.get("id")
        try:
            fp = fingerprinter.fingerprint(
                _text_field(record, "title"), _text_field(record, "content"), explain=args.explain
            )
            out = _line(article_id, fp, args.explain)
        except NewsdedupError as e:
            if plain:
                raise
            # One output line per input line, so outputs can be pasted beside their inputs.
            failed += 1
            out = {"id": article_id, "error": str(e)}
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    if failed:
        print(f"newsdedup: {failed} article(s) could not be fingerprinted", file=sys.stderr)
        return 1
    return 0


def _parse_fingerprint(text: str) -> int:
    digits = text.lower().removeprefix("0x")
    if not 1 <= len(digits) <= 16 or any(c not in "0123456789abcdef" for c in digits):
        raise InputError(f"{text!r} is not a fingerprint: expected up to 16 hex digits")
    return int(digits, 16)


def run_hamming(args: argparse.Namespace) -> int:
    print(hamming(_parse_fingerprint(args.a), _parse_fingerprint(args.b)))
    return 0
