"""The batch step shared by `newsdedup run` and `newsdedup check`: analyze, then decide in order.

It returns the decisions together with the index batch still uncommitted: when that batch
becomes durable relative to the outputs is the caller's commit protocol (see checkpoint.py).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from consumer.deciding.article import Analyzed
from consumer.deciding.decision import Decision, Source
from consumer.deciding.rules import DEFAULT_RULES, MatchRules, decide, prefetch
from consumer.stream.eventtime import Released
from consumer.stream.parsing import Invalid
from consumer.stream.workers import Analyzer
from indexstore import Batch, IndexStore
from indexstore.value import value_type


@value_type
class Message:
    """One input message, from Kafka or from a line of a file."""

    key: bytes | None
    value: bytes | None
    source: Source
    timestamp_ms: int  # stands in for a missing published_at
    headers: tuple[tuple[str, bytes], ...] = ()


@value_type
class Rejection:
    message: Message
    invalid: Invalid


Outcome = Decision | Rejection


@dataclass(slots=True)
class DecidedBatch:
    outcomes: list[Outcome]  # one per message, in decision order
    index_batch: Batch  # uncommitted: the caller makes it durable in its protocol's order
    stage_seconds: dict[str, float] = field(default_factory=dict)
    corrections: list[Decision] = field(default_factory=list)
    """Decisions made again for earlier articles: an article published before one already
    decided as an original arrived after it (consumer/deciding/rules.py)."""

    @property
    def decisions(self) -> list[Decision]:
        return [o for o in self.outcomes if isinstance(o, Decision)]

    @property
    def rejections(self) -> list[Rejection]:
        return [o for o in self.outcomes if isinstance(o, Rejection)]


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


@value_type
class Ordered:
    """A message and what the workers made of it, in decision order
    (consumer/stream/eventtime.py)."""

    message: Message
    result: Analyzed | Invalid
    stream_time_ms: int | None
    """Where the stream stands with this message: the index's watermark follows it, and an
    undated article takes it as its event time. None: no dated article seen yet."""


def released_in_order(
    released: Iterable[Released[tuple[Message, Analyzed | Invalid]]],
) -> list[Ordered]:
    """What an `EventTimeOrder` of (message, result) pairs releases, as the entries
    `Pipeline.decide_ordered` takes: each at the time its partition stands at."""
    return [Ordered(*r.item, r.time_ms) for r in released]


class Pipeline:
    def __init__(
        self,
        store: IndexStore,
        analyzer: Analyzer,
        clock_ms: Callable[[], int] = wall_clock_ms,
        rules: MatchRules = DEFAULT_RULES,
    ) -> None:
        self.store = store
        self.analyzer = analyzer
        self.clock_ms = clock_ms
        self.rules = rules

    def analyze(self, messages: Sequence[Message]) -> Iterator[list[Analyzed | Invalid]]:
        """Start fingerprinting `messages` (it needs no index, so it can run ahead of
        deciding); the results come chunk by chunk, in input order."""
        return self.analyzer.analyze_chunks([(m.value, m.timestamp_ms) for m in messages])

    def decide(self, messages: Sequence[Message]) -> DecidedBatch:
        """Fingerprint `messages` and decide them as they come (`in_input_order`)."""
        t0 = time.perf_counter()
        results = [r for chunk in self.analyze(messages) for r in chunk]
        fingerprint_seconds = time.perf_counter() - t0
        decided = self.decide_ordered(in_input_order(messages, results))
        decided.stage_seconds["fingerprint"] = fingerprint_seconds
        return decided

    def decide_ordered(self, entries: Sequence[Ordered]) -> DecidedBatch:
        """Decide `entries` in their order into one index batch, left uncommitted."""
        t0 = time.perf_counter()
        batch = self.store.begin(watermark_follows_puts=False)
        try:
            now_ms = self.clock_ms()
            outcomes: list[Outcome] = []
            corrections: list[Decision] = []
            # How far the index has each partition: past the furthest record decided. The
            # reorder window can decide a record after later ones, so never back.
            positions = self.store.positions()
            next_offsets: dict[str, int] = {}
            items = [_dated(e) for e in entries]
            prefetch(batch, [a for a in items if isinstance(a, Analyzed)], self.rules)
            for entry, item in zip(entries, items, strict=True):
                message = entry.message
                if entry.stream_time_ms is not None:
                    batch.advance_watermark(entry.stream_time_ms)
                if isinstance(item, Analyzed):
                    decision, corrected = decide(batch, item, message.source, now_ms, self.rules)
                    outcomes.append(decision)
                    corrections += corrected
                else:
                    outcomes.append(Rejection(message, item))
                key = message.source.position_key
                next_offsets[key] = max(
                    next_offsets.get(key, positions.get(key, 0)), message.source.offset + 1
                )
            for key, offset in next_offsets.items():
                batch.set_position(key, offset)
        except BaseException:
            batch.abort()
            raise
        return DecidedBatch(
            outcomes, batch, {"index": time.perf_counter() - t0}, corrections=corrections
        )


def _dated(entry: Ordered) -> Analyzed | Invalid:
    """The entry's result, an undated article given the stream's time as its event time."""
    result = entry.result
    if isinstance(result, Analyzed) and not result.dated and entry.stream_time_ms is not None:
        return dataclasses.replace(result, event_time_ms=entry.stream_time_ms)
    return result


def in_input_order(
    messages: Sequence[Message], results: Sequence[Analyzed | Invalid]
) -> list[Ordered]:
    """`messages` decided as they come, each dated article standing at its own time (tools and
    tests that feed the index directly, in an order they chose)."""
    return [
        Ordered(m, r, r.event_time_ms if isinstance(r, Analyzed) and r.dated else None)
        for m, r in zip(messages, results, strict=True)
    ]
