"""Coverage-guided fuzzing (atheris, libFuzzer) of the per-message path the service runs:
raw bytes as a feed message → parse → normalize → fingerprint → decide → index write.

    python tests/fuzz_messages.py STATE_DIR -runs=20000 -max_total_time=60

A message that raises, comes out neither as a schema-valid decision nor as a dead letter with a
known reason, or is dead-lettered as an internal error is a crash: libFuzzer stops with a
non-zero exit and writes the input to crash-* in the working directory. tests/test_hostile_input.py
runs this for a bounded time in `make test`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import atheris

# The index and numpy run uninstrumented: atheris keeps the operands of the comparisons it
# traces, and the index compares whole arrays (candidates <= k) in every search, so an
# instrumented index held every search's arrays (1.55 GB after 100,000 inputs). The tables are
# checked against brute force by their own property tests; here they only have to hold up.
# Both are imported before instrumentation starts.
import numpy  # noqa: F401

import indexstore  # noqa: F401

with atheris.instrument_imports():
    from consumer.config import FingerprintConfig, InputConfig
    from consumer.records import Decision, InvalidReason, Message, Source
    from consumer.stream.dead_letters import dlq_headers
    from consumer.stream.pipeline import Pipeline
    from consumer.stream.workers import Analyzer
    from indexstore import IndexOptions, IndexStore

SCHEMA_REQUIRED = set(
    json.loads(
        (Path(__file__).resolve().parents[2] / "config/schemas/decision.schema.json").read_text()
    )["required"]
)
KAFKA_TS = 1_700_000_000_000


FIELDS = ("id", "title", "content", "published_at", "url", "source")


def feed_message(data: bytes) -> bytes:
    """Half the inputs go in as they are; the other half become a JSON object whose fields the
    fuzzer fills (text with or without lone surrogates, numbers, other types), so the paths
    past parsing are reached too."""
    if not data or data[0] < 128:
        return data[1:]
    fdp = atheris.FuzzedDataProvider(data[1:])
    obj: dict[str, object] = {}
    for field in FIELDS:
        kind = fdp.ConsumeIntInRange(0, 5)
        if kind == 1:
            obj[field] = fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 400))
        elif kind == 2:
            obj[field] = fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 400))
        elif kind == 3:
            obj[field] = fdp.ConsumeInt(fdp.ConsumeIntInRange(1, 16))
        elif kind == 4:
            obj[field] = fdp.ConsumeRegularFloat()
        elif kind == 5:
            obj[field] = [fdp.ConsumeBool()]
    return json.dumps(obj, ensure_ascii=fdp.ConsumeBool()).encode("utf-8", "surrogatepass")


def take_budget(argv: list[str]) -> tuple[float, int]:
    """-max_total_time and -runs, removed from argv: the harness ends the run itself.

    libFuzzer ends a run with C exit(), which destroys RocksDB's static objects while the
    index is still open and its background threads may be flushing: now and then that died
    with SIGSEGV after "Done", and a run that found nothing failed. The harness closes the
    index first and leaves with os._exit."""
    seconds, runs = float("inf"), -1
    for arg in list(argv):
        if arg.startswith("-max_total_time="):
            seconds = float(arg.split("=", 1)[1])
            argv.remove(arg)
        elif arg.startswith("-runs="):
            runs = int(arg.split("=", 1)[1])
            argv.remove(arg)
    return seconds, runs


def main() -> None:
    state = Path(sys.argv.pop(1))
    seconds, runs = take_budget(sys.argv)
    deadline = time.monotonic() + seconds
    options = IndexOptions(max_distance=12, retention_ms=10**13, memory_bytes=16 << 20)
    store = IndexStore.open(state, options)
    analyzer = Analyzer(InputConfig(), FingerprintConfig(), workers=None)
    pipeline = Pipeline(store, analyzer, clock_ms=lambda: KAFKA_TS)
    offset = 0

    def finish() -> None:
        store.close()
        analyzer.close()
        # The line tests/test_hostile_input.py reads, in libFuzzer's own words.
        print(f"stat::number_of_executed_units: {offset}", file=sys.stderr, flush=True)
        os._exit(0)

    def one_message(data: bytes) -> None:
        nonlocal offset
        if offset == runs or time.monotonic() >= deadline:
            finish()
        offset += 1
        value = feed_message(data)
        decided = pipeline.decide([Message(None, value, Source("fuzz", 0, offset), KAFKA_TS)])
        decided.index_batch.commit()
        (outcome,) = decided.outcomes
        if isinstance(outcome, Decision):
            decision = json.loads(outcome.to_bytes())
            missing = SCHEMA_REQUIRED - set(decision)
            if missing:
                raise AssertionError(f"decision without {sorted(missing)}: {decision}")
        else:
            if outcome.invalid.reason is InvalidReason.INTERNAL_ERROR:
                raise AssertionError(f"internal error: {outcome.invalid.detail}")
            dlq_headers(outcome)

    atheris.Setup(sys.argv, one_message)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
