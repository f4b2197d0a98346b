"""`newsdedup sample-feed`: the synthetic demo feed as JSONL, for `newsdedup produce` or a file."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta

from consumer.samplefeed import generate_feed

# The generator spreads originals over 36 h and copies up to 10 h after them: starting this far
# back keeps every event time in the past, so event-time lag and the window look like live news.
_DEFAULT_LOOKBACK = timedelta(hours=48)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sample-feed",
        help="write a synthetic news feed (stories, reposts, edited copies) as JSONL",
        description="Write generated articles in publish order, one JSON object per line: "
        "originals, verbatim reposts, re-edited copies and two invalid messages. "
        "Pipe it into `newsdedup produce - --topic news.raw`.",
    )
    p.add_argument("--stories", type=int, default=300, help="original stories (default 300)")
    p.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    p.add_argument(
        "--start",
        type=_timestamp,
        help="ISO-8601 time of the first story (default: 48 hours ago)",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(handler=run)


def _timestamp(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO-8601 time: {text!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def run(args: argparse.Namespace) -> int:
    start = args.start or datetime.now(UTC) - _DEFAULT_LOOKBACK
    with ExitStack() as stack:
        out = (
            stack.enter_context(open(args.output, "w", encoding="utf-8"))
            if args.output
            else sys.stdout
        )
        for message in generate_feed(args.stories, args.seed, start):
            out.write(json.dumps(message, ensure_ascii=False) + "\n")
    return 0
