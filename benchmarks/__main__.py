"""`python -m benchmarks SUBJECT …`: the Kafka benchmarks, one module per subject."""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

from consumer.errors import NewsdedupError

# Order is the order shown in --help; scaleout.py registers `restore` and `scaleout`.
BENCH_MODULES = ("pipeline", "scaleout", "soak")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.splitlines()[0]
    )
    subjects = parser.add_subparsers(dest="bench", metavar="SUBJECT", required=True)
    for name in BENCH_MODULES:
        importlib.import_module(f"benchmarks.{name}").register(subjects)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return int(args.handler(args) or 0)
    except NewsdedupError as e:
        print(f"python -m benchmarks {args.bench}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _interrupt(signum: int, frame: object) -> None:
    """Benchmarks start brokers and services of their own and stop them in `finally` blocks,
    which Python's default SIGTERM (an immediate exit) skips: a `kill` or a CI timeout would
    leave a broker and a service running. SIGTERM ends the benchmark like Ctrl-C instead."""
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    sys.exit(main())
