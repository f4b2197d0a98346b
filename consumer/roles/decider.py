"""The decide role's deciding: internal records against their domains' indexes, no Kafka.

`Decider` takes the fingerprinted articles the internal topic carries, in the order the decide
role's sequencer releases them (scaleout/sequencing.py), and decides each against the index of
its (internal partition, dedup domain), as `--role all` decides against its one index. What a
batch yields, `DecideBatch`, is the decisions, the index batches still uncommitted and every
record they changed, for the changelog; `DecideStage` (roles/decide.py) makes it durable
in the service's commit protocol. Tests and tools decide with it directly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from consumer.deciding.rules import DEFAULT_RULES, MatchRules
from consumer.ops.logs import log_event
from consumer.records import Decision, Message
from consumer.scaleout.domains import CHANGELOG_POSITION, DomainStores
from consumer.scaleout.sequencing import Entry
from consumer.scaleout.wire import (
    Fingerprinted,
    WireError,
    change_key,
    decode_fingerprinted,
    encode_change,
)
from consumer.stream.eventtime import Timed, wall_clock_ms
from consumer.stream.outputs import Outputs, Record
from consumer.stream.pipeline import Step, decide_in_order
from indexstore import Batch

log = logging.getLogger("newsdedup.roles.decide")


@dataclass(frozen=True, slots=True)
class Change:
    partition: int
    key: bytes
    value: bytes


class _Batches:
    """The index batches of one Kafka batch, one per (partition, domain) it touched."""

    def __init__(self, batches: list[Batch]) -> None:
        self.batches = batches

    def commit(self) -> None:
        # Separate stores cannot share a WriteBatch. A crash between two commits leaves some
        # domains written and no outputs: the re-delivery answers those from the article table.
        for batch in self.batches:
            batch.commit()


@dataclass(slots=True)
class DecideBatch:
    outcomes: list[Decision]
    changes: list[Change]
    index_batch: _Batches
    stage_seconds: dict[str, float] = field(default_factory=dict)
    corrections: list[Decision] = field(default_factory=list)

    def outputs(self, output_topic: str, changelog_topic: str) -> Outputs:
        """Decisions (corrections last) and every changed index record to the changelog
        partition of the internal partition it came from: the changelog is one more output
        of the same protocol (under exactly_once, of the same transaction)."""
        records = [
            Record(output_topic, d.id.encode("utf-8"), d.to_bytes())
            for d in (*self.outcomes, *self.corrections)
        ]
        # Where they land is written into the stores (Decider.delivered).
        records += [
            Record(changelog_topic, c.key, c.value, partition=c.partition, report_offset=True)
            for c in self.changes
        ]
        return Outputs(self.index_batch, records, [], self.stage_seconds)


class Decider:
    """Decides internal records against their domains' indexes, in the order given."""

    def __init__(self, stores: DomainStores, rules: MatchRules = DEFAULT_RULES) -> None:
        self.stores = stores
        self.rules = rules
        # Changelog partition -> the offset after our last record known to be in the log:
        # written into the partition's stores with their next batch, so a later restore of
        # those stores starts after their own records instead of replaying them.
        self.delivered: dict[int, int] = {}

    def decode(self, m: Message) -> Fingerprinted | None:
        try:
            return decode_fingerprinted(m.key, m.value or b"")
        except (WireError, UnicodeDecodeError) as e:
            # Only another version's records can be unreadable; skipping keeps the feed
            # moving and the log line names the record.
            log_event(
                log,
                logging.ERROR,
                "unreadable internal record skipped",
                error=str(e),
                partition=m.source.partition,
                offset=m.source.offset,
            )
            return None

    def decide(self, messages: Sequence[Message]) -> DecideBatch:
        """`messages` decided in the order given, each at its own time (tests and tools)."""
        entries = [
            Timed((m, f), f.item.event_time_ms)
            for m in messages
            if (f := self.decode(m)) is not None
        ]
        return self.decide_entries(entries)

    def decide_entries(self, entries: Sequence[Timed[Entry]]) -> DecideBatch:
        """Decide in the order given, each against its (internal partition, domain) index, by
        the driver `--role all` decides with (stream/pipeline.py)."""
        t0 = time.perf_counter()
        batches: dict[tuple[int, str], Batch] = {}
        steps = []
        for entry in entries:
            m, f = entry.item
            key = (m.source.partition, f.domain)
            if key not in batches:
                batches[key] = self._begin(*key)
            steps.append(Step(batches[key], m, f.item, f.source, entry.time_ms))
        outcomes: list[Decision] = []
        changes: list[Change] = []
        corrections: list[Decision] = []
        decided = decide_in_order(steps, wall_clock_ms(), self.rules)
        for entry, (step, decision, corrected) in zip(entries, decided, strict=True):
            assert isinstance(decision, Decision)  # the fingerprint role forwards articles only
            outcomes.append(decision)
            corrections += corrected
            # decide() answered from these records or just put them
            m, f = entry.item
            partition, domain = m.source.partition, f.domain
            for article_id in [f.item.id, *(c.id for c in corrected)]:
                record = step.batch.lookup(article_id)
                assert record is not None
                key = change_key(domain, article_id)
                changes.append(Change(partition, key, encode_change(record)))
        return DecideBatch(
            outcomes,
            changes,
            _Batches(list(batches.values())),
            {"index": time.perf_counter() - t0},
            corrections,
        )

    def _begin(self, partition: int, domain: str) -> Batch:
        """A batch of the domain's index; it records where our changelog records end."""
        batch = self.stores.store(partition, domain).begin(watermark_follows_puts=False)
        if partition in self.delivered:
            batch.set_position(CHANGELOG_POSITION, self.delivered[partition])
        return batch
