"""The `newsdedup` command line: a thin dispatcher over the modules in `consumer.cli`.

Each command module owns its arguments and its work, so adding a command touches one file
and one line here.

May import: every other package (the top layer; scripts/import-layers checks the order).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from consumer import __version__
from consumer.errors import NewsdedupError
from consumer.ops.memory import collect_cycles_less_often

# NumPy loads OpenBLAS, which starts a thread for each core but the first that spins for ~0.1
# CPU-second before it sleeps: in every process of the command, each fingerprinting worker
# too. newsdedup does no linear algebra, so the calling thread is all OpenBLAS needs. It must
# be set before NumPy is first imported (by indexstore, below); the workers inherit it, and an
# operator's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from indexstore.errors import IndexCorruptError, IndexStoreError, IndexVersionError

# Order is the order shown in --help.
COMMAND_MODULES = (
    "run",
    "check",
    "produce",
    "fingerprint",
    "build_idf",
    "index",
    "bench",
    "eval",
    "sample_feed",
)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of `command` alone when it names one: importing every
    command's module costs ~0.07 s that a short `check` would otherwise pay at each start."""
    modules = [m for m in COMMAND_MODULES if m.replace("_", "-") == command] or COMMAND_MODULES
    parser = argparse.ArgumentParser(
        prog="newsdedup",
        description="Streaming near-duplicate detection for news feeds on Kafka.",
    )
    parser.add_argument(
        "--version", action=_Version, help="show the version and which native kernels are built"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in modules:
        importlib.import_module(f"consumer.cli.{name}").register(subparsers)
    return parser


class _Version(argparse.Action):
    """`--version`: the version and whether each native kernel is built, since an install from
    source without cargo runs the slower Python reference code instead."""

    def __init__(self, option_strings: list[str], dest: str, help: str) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from consumer.fingerprint.kernel import native_kernels

        kernels = native_kernels().items()
        built = ", ".join(f"{name} {'yes' if ok else 'no'}" for name, ok in kernels)
        print(f"newsdedup {__version__} (native kernels: {built})")
        parser.exit()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    collect_cycles_less_often()
    # Imported here, not for --help: it loads the fingerprint kernel.
    from consumer.fingerprint.kernel import missing_kernels_warning

    if warning := missing_kernels_warning():
        print(f"newsdedup: warning: {warning}", file=sys.stderr)
    try:
        return int(args.handler(args) or 0)
    except (IndexCorruptError, IndexVersionError) as e:
        from consumer.stream.state import unusable_index_message

        print(f"newsdedup: error: {unusable_index_message(e)}", file=sys.stderr)
        return 2
    except (NewsdedupError, IndexStoreError) as e:
        print(f"newsdedup: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # A reader such as `head` closed the pipe: not an error for a CLI.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
