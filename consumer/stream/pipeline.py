"""The batch step shared by every role, `newsdedup check` and the library: analyze, then decide
in order.

`decide_in_order` is the one driver that decides entries in their order against index
batches: `Pipeline` (`--role all`, replay, `check`, the library) gives it one batch, the decide
role's `Decider` (consumer/roles/decider.py) one per dedup domain. The batches stay
uncommitted: when they become durable relative to the outputs is the caller's commit protocol
(see checkpoint.py).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from consumer.deciding.rules import DEFAULT_RULES, MatchRules, decide, prefetch
from consumer.records import Analyzed, Decision, Invalid, Message, Rejection, Source
from consumer.stream.eventtime import Timed, time_of, wall_clock_ms
from consumer.stream.workers import Analyzer
from indexstore import Batch, IndexStore

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


# A message and what the workers made of it: what `--role all`, `check` and the library decide.
Analysis = tuple[Message, Analyzed | Invalid]


@dataclass(frozen=True, slots=True)
class Step:
    """One entry as `decide_in_order` takes it: the index batch it is decided into, its
    message (a rejection carries it), what it is decided as, the source its decision names
    and where the stream stands with it (stream/eventtime.py)."""

    batch: Batch
    message: Message
    result: Analyzed | Invalid
    source: Source
    stream_time_ms: int | None


def decide_in_order(
    steps: Sequence[Step], now_ms: int, rules: MatchRules
) -> Iterator[tuple[Step, Outcome, list[Decision]]]:
    """Decide `steps` in their order, each with its outcome and the corrections it made: the
    one driver of `--role all`, `check`, the library and the decide role. What each batch
    will read is prefetched first. Lazy, so that a caller can read a step's records before
    the next step changes them (the decide role's changelog)."""
    results = [_dated(s.result, s.stream_time_ms) for s in steps]
    articles: dict[int, tuple[Batch, list[Analyzed]]] = {}
    for step, result in zip(steps, results, strict=True):
        if isinstance(result, Analyzed):
            articles.setdefault(id(step.batch), (step.batch, []))[1].append(result)
    for batch, mine in articles.values():
        prefetch(batch, mine, rules)
    for step, result in zip(steps, results, strict=True):
        # The only place a watermark moves while deciding: with the stream's time, never
        # with an article's own date, so one odd date cannot make its neighbours late.
        if step.stream_time_ms is not None:
            step.batch.advance_watermark(step.stream_time_ms)
        if isinstance(result, Analyzed):
            decision, corrected = decide(step.batch, result, step.source, now_ms, rules)
            yield step, decision, corrected
        else:
            yield step, Rejection(step.message, result), []


def _dated(result: Analyzed | Invalid, stream_time_ms: int | None) -> Analyzed | Invalid:
    """An undated article stands at the stream's time; anything else is left as it is."""
    if isinstance(result, Analyzed) and not result.dated and stream_time_ms is not None:
        return dataclasses.replace(result, event_time_ms=stream_time_ms)
    return result


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

    def decide_ordered(self, entries: Sequence[Timed[Analysis]]) -> DecidedBatch:
        """Decide `entries` in their order into one index batch, left uncommitted."""
        t0 = time.perf_counter()
        batch = self.store.begin(watermark_follows_puts=False)
        try:
            steps = [Step(batch, m, r, m.source, e.time_ms) for e in entries for m, r in [e.item]]
            outcomes: list[Outcome] = []
            corrections: list[Decision] = []
            for step, outcome, corrected in decide_in_order(steps, self.clock_ms(), self.rules):
                outcomes.append(outcome)
                corrections += corrected
                # How far the index has read the partition; the index keeps the furthest
                # (IndexStore), since the reorder window can decide a record after later ones.
                source = step.message.source
                batch.set_position(source.position_key, source.offset + 1)
        except BaseException:
            batch.abort()
            raise
        return DecidedBatch(
            outcomes, batch, {"index": time.perf_counter() - t0}, corrections=corrections
        )


def in_input_order(
    messages: Sequence[Message], results: Sequence[Analyzed | Invalid]
) -> list[Timed[Analysis]]:
    """`messages` decided as they come, each dated article standing at its own time (tools and
    tests that feed the index directly, in an order they chose)."""
    return [Timed((m, r), time_of(r)) for m, r in zip(messages, results, strict=True)]
