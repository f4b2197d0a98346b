"""The batch step shared by `newsdedup run` and `newsdedup check`: analyze, then decide in order.

It returns the decisions together with the index batch still uncommitted: when that batch
becomes durable relative to the outputs is the caller's commit protocol (see checkpoint.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from consumer.analysis import Analyzed, Analyzer
from consumer.deciding import DEFAULT_RULES, MatchRules, decide
from consumer.decisions import Decision, Source
from consumer.parsing import Invalid
from indexstore import Batch, IndexStore


@dataclass(frozen=True, slots=True)
class Message:
    """One input message, from Kafka or from a line of a file."""

    key: bytes | None
    value: bytes | None
    source: Source
    timestamp_ms: int  # stands in for a missing published_at
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class Rejection:
    message: Message
    invalid: Invalid


Outcome = Decision | Rejection


@dataclass(slots=True)
class DecidedBatch:
    outcomes: list[Outcome]  # one per message, in input order
    index_batch: Batch  # uncommitted: the caller makes it durable in its protocol's order
    stage_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def decisions(self) -> list[Decision]:
        return [o for o in self.outcomes if isinstance(o, Decision)]

    @property
    def rejections(self) -> list[Rejection]:
        return [o for o in self.outcomes if isinstance(o, Rejection)]


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


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
        deciding); hand the result to `decide`."""
        return self.analyzer.analyze_chunks([(m.value, m.timestamp_ms) for m in messages])

    def decide(
        self,
        messages: Sequence[Message],
        analyzed: Iterator[list[Analyzed | Invalid]] | None = None,
    ) -> DecidedBatch:
        """Decide in input order, chunk by chunk as the workers finish them: the index work of
        the first chunks overlaps the fingerprinting of the last. `analyzed` is what
        `analyze(messages)` returned, when the caller started it earlier."""
        waited = 0.0
        t0 = time.perf_counter()
        chunks = self.analyze(messages) if analyzed is None else analyzed
        batch = self.store.begin()
        try:
            now_ms = self.clock_ms()
            outcomes: list[Outcome] = []
            next_offsets: dict[str, int] = {}
            while True:
                t = time.perf_counter()
                analyzed = next(chunks, None)
                waited += time.perf_counter() - t
                if analyzed is None:
                    break
                # Both reads vectorized over the chunk: candidates for every fingerprint, and
                # the records of every id (re-deliveries and updates).
                valid = [a for a in analyzed if isinstance(a, Analyzed)]
                batch.prefetch([(a.simhash, a.content_hash, a.event_time_ms) for a in valid])
                batch.prefetch_records([a.id for a in valid])
                for message, result in zip(
                    messages[len(outcomes) : len(outcomes) + len(analyzed)], analyzed, strict=True
                ):
                    if isinstance(result, Analyzed):
                        outcomes.append(decide(batch, result, message.source, now_ms, self.rules))
                    else:
                        outcomes.append(Rejection(message, result))
                    next_offsets[message.source.position_key] = message.source.offset + 1
            if len(outcomes) != len(messages):
                raise RuntimeError(f"{len(outcomes)} results for {len(messages)} messages")
            for key, offset in next_offsets.items():
                batch.set_position(key, offset)
        except BaseException:
            batch.abort()
            raise
        total = time.perf_counter() - t0
        return DecidedBatch(outcomes, batch, {"fingerprint": waited, "index": total - waited})
