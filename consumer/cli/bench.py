"""`newsdedup bench …`: the benchmarks a user runs on their own data, without a broker; one
module per subject in `consumer.bench`. Those against Kafka need a checkout: benchmarks/."""

from __future__ import annotations

import argparse
import importlib
import signal
from collections.abc import Callable

# Order is the order shown in --help.
BENCH_MODULES = ("fingerprint", "index")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bench", help="measure throughput and latency")
    bench_sub = parser.add_subparsers(dest="bench", metavar="SUBJECT", required=True)
    for name in BENCH_MODULES:
        importlib.import_module(f"consumer.bench.{name}").register(bench_sub)
    for choice in bench_sub.choices.values():
        handler = choice.get_default("handler")
        choice.set_defaults(handler=_cleaning_up_on_sigterm(handler))


def _cleaning_up_on_sigterm(handler: Callable[[argparse.Namespace], int]) -> Callable:
    """Benchmarks start brokers and services of their own and stop them in `finally` blocks,
    which Python's default SIGTERM (an immediate exit) skips: a `kill` or a CI timeout left
    a broker and a service running. SIGTERM ends the benchmark like Ctrl-C instead."""

    def run(args: argparse.Namespace) -> int:
        signal.signal(signal.SIGTERM, _interrupt)
        return handler(args)

    return run


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
