"""`newsdedup bench …`: benchmarks, one module per subject in `consumer.bench`."""

from __future__ import annotations

import argparse
import importlib

# Order is the order shown in --help.
BENCH_MODULES = (
    "fingerprint",
    "index",
    "pipeline",
    "scaleout",
    "soak",
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bench", help="measure throughput and latency")
    bench_sub = parser.add_subparsers(dest="bench", metavar="SUBJECT", required=True)
    for name in BENCH_MODULES:
        importlib.import_module(f"consumer.bench.{name}").register(bench_sub)
