"""`newsdedup build-idf CORPUS -o idf.txt`: an IDF table from your own corpus."""

from __future__ import annotations

import argparse
import sys

from consumer.corpus import iter_jsonl
from consumer.fingerprint.fingerprinter import FingerprintOptions
from consumer.fingerprint.idf import DocumentFrequencies
from consumer.fingerprint.normalize import Normalizer
from consumer.fingerprint.terms import ENGINES, TermExtractor
from consumer.ops.progress import Progress


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "build-idf",
        help="build an IDF table (jieba's idf.txt format) from a JSONL corpus",
        description="Stream a JSONL corpus ({title, content}) and write 'word idf' lines, "
        "idf = ln(N / df) over title+content, with the same normalization and terms as "
        "fingerprinting. Load it with [fingerprint] idf_path or --idf.",
    )
    p.add_argument("corpus", help="JSONL file, .jsonl.gz, or - (stdin)")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="table to write")
    p.add_argument(
        "--engine", choices=ENGINES, default="rjieba", help="segmenter (default: rjieba)"
    )
    p.add_argument(
        "--limit", type=int, metavar="N", help="read only the first N articles (default: all)"
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    normalize = Normalizer(convert_traditional=True)
    terms = TermExtractor(args.engine)
    max_chars = FingerprintOptions().max_chars
    frequencies = DocumentFrequencies()
    with Progress("build-idf", unit="articles") as progress:
        for record in iter_jsonl(args.corpus, args.limit):
            title, content = record.get("title"), record.get("content")
            text = "\n".join(
                normalize(field[:max_chars]) for field in (title, content) if isinstance(field, str)
            )
            words = terms.count(text)
            if words:  # an article with no terms would only shift every IDF by the same amount
                frequencies.add(words)
            progress.advance()
    if not frequencies.documents:
        print(
            f"newsdedup: {args.corpus}: no article with any term; nothing written", file=sys.stderr
        )
        return 1
    frequencies.write(args.output)
    print(
        f"{args.output}: {len(frequencies.df):,} words from {frequencies.documents:,} articles",
        file=sys.stderr,
    )
    return 0
