"""`newsdedup check`: the service's pipeline on a JSONL file, without Kafka.

One decision line per valid input line, in input order, with the same schema as the output
topic; `source` names the file, partition 0 and, as `offset`, the line's 0-based index: the
offset `produce` gives it on an empty one-partition topic, so `check` and `run` decisions
compare. Rejections name the 1-based line, as editors count, and the offset. A line published
before one already decided as its original adds a correction line for that one (README,
"Event time"). Invalid lines are reported (or written to --dlq) and counted, never silently
dropped.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from consumer.config import load_config
from consumer.corpus import open_bytes
from consumer.deciding.rules import match_rules
from consumer.ops.progress import Progress
from consumer.records import Decision, Message, Rejection, Source
from consumer.stream.eventtime import wall_clock_ms
from consumer.stream.pipeline import Pipeline
from consumer.stream.sequence import SequenceDecider
from consumer.stream.state import open_index
from consumer.stream.workers import Analyzer

# Lines per batch, the unit of fingerprinting ahead, deciding and committing: each commit
# of a replay spanning months creates the column families of the window it ends in, so fewer,
# larger batches create fewer (benchmarks/history/2026-11-24.md, "`check` at five times
# MinHash's speed"). Two batches are in memory at once; the byte bound keeps that small for
# long articles.
BATCH_LINES = 4000
BATCH_BYTES = 32 << 20
# CPU seconds of fingerprinting in this process before the worker processes start: a file
# that takes less (~12,000 news articles) costs least without them, and one that takes more
# loses at most this long of the workers' parallelism.
INLINE_FINGERPRINT_S = 4.0
# The summary's counts, in this order; those in KEPT are shown even when 0.
SUMMARY_COUNTS = (
    "unique",
    "duplicate",
    "near_duplicate",
    "invalid",
    "late",
    "undated",
    "corrected",
)
KEPT = {"unique", "duplicate", "near_duplicate", "late", "undated"}
# Above this share of late articles, check says what probably went wrong.
LATE_WARNING_SHARE = 0.05


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "check",
        help="decide a JSONL file of articles offline (no Kafka)",
        description="Run the dedup pipeline over IN.jsonl[.gz] and write one decision per line.",
    )
    p.add_argument(
        "input", metavar="IN.jsonl", help="articles, one JSON object per line ('-' = stdin)"
    )
    p.add_argument("-o", "--output", metavar="OUT.jsonl", help="decisions (default: stdout)")
    p.add_argument(
        "--state", metavar="DIR", help="index directory to use and keep (default: a temporary one)"
    )
    p.add_argument("--config", metavar="FILE", help="configuration file (TOML)")
    p.add_argument(
        "--dlq", metavar="FILE", help="write rejected lines here as JSON with the reason"
    )
    p.add_argument(
        "--workers",
        type=int,
        help="fingerprinting processes, started once the file has taken 4 CPU-seconds to "
        "fingerprint here (default: [service] workers)",
    )
    p.set_defaults(handler=run_check)


def run_check(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    workers = config.service.workers if args.workers is None else args.workers
    counts: collections.Counter[str] = collections.Counter()
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        out = (
            stack.enter_context(open(args.output, "w", encoding="utf-8"))
            if args.output
            else sys.stdout
        )
        dlq = stack.enter_context(open(args.dlq, "w", encoding="utf-8")) if args.dlq else None
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="newsdedup-check-"))
        # A small file is fingerprinted here: starting the workers would cost more than all
        # of its fingerprinting. They start once it has taken INLINE_FINGERPRINT_S, unless
        # what is left of the file would take less than that.
        analyzer = stack.enter_context(
            Analyzer(
                config.input,
                config.fingerprint,
                workers,
                pool_after_s=INLINE_FINGERPRINT_S,
                input_bytes=_plain_file_size(args.input),
            )
        )
        store = stack.enter_context(open_index(config.index, args.state or f"{scratch}/state"))
        progress = stack.enter_context(Progress("check", unit="articles"))
        pipeline = Pipeline(store, analyzer, rules=match_rules(config.match))
        # The file is one sequence, read in its order (stream/sequence.py).
        sequence = SequenceDecider(pipeline, config.service.reorder_window)

        def settle(messages: list[Message], analyzed: Iterator, last: bool) -> None:
            results = (r for chunk in analyzed for r in chunk)
            decided = sequence.decide(messages, results, pause=last)
            for outcome in decided.outcomes:
                if isinstance(outcome, Decision):
                    out.write(outcome.to_json() + "\n")
                    counts[outcome.decision.value] += 1
                    counts["late"] += outcome.late
                else:
                    _report_rejection(outcome, dlq)
                    counts["invalid"] += 1
            for correction in decided.corrections:
                out.write(correction.to_json() + "\n")
                counts["corrected"] += 1
            progress.advance(len(decided.outcomes))

        # One batch ahead: the workers fingerprint the next batch while this process decides,
        # commits and writes the current one, instead of waiting for it.
        ahead: tuple[list[Message], Iterator] | None = None
        for messages in _batches(args.input):
            started_batch = (messages, pipeline.analyze(messages))
            if ahead is not None:
                settle(*ahead, last=False)
            ahead = started_batch
        if ahead is not None:
            settle(*ahead, last=True)
        counts["undated"] = sequence.undated
    elapsed = time.monotonic() - started
    total = sum(counts[k] for k in ("unique", "duplicate", "near_duplicate", "invalid"))
    summary = ", ".join(f"{k} {counts[k]}" for k in SUMMARY_COUNTS if counts[k] or k in KEPT)
    print(
        f"check: {total} lines in {elapsed:.1f}s ({total / max(elapsed, 1e-9):,.0f}/s): {summary}",
        file=sys.stderr,
    )
    decided = total - counts["invalid"]
    if decided and counts["late"] / decided > LATE_WARNING_SHARE:
        print(
            f"check: warning: {counts['late'] / decided:.0%} of the articles were late (older "
            "than the window behind the newest article before them): they were checked but "
            "not indexed, so their copies go unflagged. Sort the input by publish time, or "
            "widen [index] retention.",
            file=sys.stderr,
        )
    return 0


def _plain_file_size(path: str) -> int | None:
    """The size of an uncompressed input file; None for standard input and a gzip file,
    whose size says too little of its text."""
    if path == "-" or path.endswith(".gz"):
        return None
    try:
        return Path(path).stat().st_size
    except OSError:
        return None  # reading it says what is wrong


def _batches(path: str) -> Iterator[list[Message]]:
    topic = "-" if path == "-" else Path(path).name
    now = wall_clock_ms()
    batch: list[Message] = []
    size = 0
    with open_bytes(path) as f:
        for lineno, line in enumerate(f):
            raw = line.rstrip(b"\r\n")
            if not raw.strip():
                continue
            batch.append(Message(None, raw, Source(topic, 0, lineno), now))
            size += len(raw)
            if len(batch) >= BATCH_LINES or size >= BATCH_BYTES:
                yield batch
                batch = []
                size = 0
    if batch:
        yield batch


def _report_rejection(rejection: Rejection, dlq) -> None:
    offset = rejection.message.source.offset
    where = f"{rejection.message.source.topic}:{offset + 1} (offset {offset})"
    if dlq is None:
        print(
            f"check: {where}: rejected ({rejection.invalid.reason}): {rejection.invalid.detail}",
            file=sys.stderr,
        )
        return
    record = {
        "line": offset + 1,
        "offset": offset,
        "reason": str(rejection.invalid.reason),
        "detail": rejection.invalid.detail,
        "value": (rejection.message.value or b"").decode("utf-8", errors="replace"),
    }
    dlq.write(json.dumps(record, ensure_ascii=False) + "\n")
