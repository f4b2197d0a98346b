"""What one batch makes durable, as data: the index write (step 1 of the commit protocol), the
records and dead letters to publish (step 2), and, back from the checkpoint, where the records
that asked were delivered.

Why as data: every role's stage builds its batch's `Outputs` (stage.py), and the checkpoint
(checkpoint.py) makes any of them durable in the same order, so it knows nothing of roles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from consumer.records import Rejection


@dataclass(frozen=True, slots=True)
class Record:
    """One record to publish, as data: every role's outputs are these and dead letters."""

    topic: str
    key: bytes | None
    value: bytes | None
    partition: int | None = None  # None: the producer's partitioner (by key)
    timestamp_ms: int | None = None  # None: the time it is produced
    # Whether `Checkpoint.complete` says where it was delivered: only the decide role asks (of
    # its changelog records), and the others' deliveries then cost no bookkeeping.
    report_offset: bool = False


class IndexWrite(Protocol):
    def commit(self) -> None: ...


class NoIndexWrite:
    """A batch that writes no index (the fingerprint role): step 1 is empty."""

    def commit(self) -> None:
        pass


@dataclass(slots=True)
class Outputs:
    """Everything one batch makes durable, in the order of the protocol."""

    index: IndexWrite  # step 1
    records: list[Record]  # step 2
    dead_letters: list[Rejection]  # step 2, each cut to what the DLQ takes
    stage_seconds: dict[str, float] = field(default_factory=dict)  # the steps' times go here


# (topic, partition) -> the greatest offset a batch's records were delivered at, of the
# records that asked (`Record.report_offset`).
Delivered = dict[tuple[str, int], int]
