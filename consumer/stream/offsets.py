"""What a partition's commit says when its records are decided out of offset order.

Records leave the event-time order (eventtime.py) earliest first, so a record can be decided
before records read ahead of it in its partition: a retried batch that landed behind later
ones, or, in the decide role, sources interleaved in one internal partition. What has been
decided is then no longer a prefix of the partition. The committed offset is the first record
still queued, and the records above it that were decided already travel with that commit, in
its metadata (`encode_done`/`decode_done`): the commit is part of the same transaction as
their decisions (exactly_once) or follows their delivery (at_least_once), so after a restart
or a move exactly those are skipped and every other record above the offset is decided (or,
if its batch's index write outlived an aborted transaction, answered again from the article
table). The metadata has a size limit (`offset.metadata.max.bytes`, 4 KiB by default); past
`MAX_DONE_CHARS` the caller decides the record holding the commit back out of order instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

# Metadata characters a commit may carry: well under the broker's 4,096-byte default.
MAX_DONE_CHARS = 3_000
_PREFIX = "done:"


def encode_done(base: int, offsets: Iterable[int]) -> str:
    """Offsets above `base` as runs relative to it: "done:3-5,9" (empty when none)."""
    runs: list[list[int]] = []
    for offset in sorted(offsets):
        delta = offset - base
        if runs and delta == runs[-1][1] + 1:
            runs[-1][1] = delta
        else:
            runs.append([delta, delta])
    if not runs:
        return ""
    return _PREFIX + ",".join(f"{a}-{b}" if a != b else f"{a}" for a, b in runs)


def decode_done(base: int, metadata: str | None) -> set[int]:
    """What `encode_done` wrote; anything else (another writer's metadata) means none."""
    if not metadata or not metadata.startswith(_PREFIX):
        return set()
    done: set[int] = set()
    try:
        for run in metadata[len(_PREFIX) :].split(","):
            first, _, last = run.partition("-")
            done.update(range(base + int(first), base + int(last or first) + 1))
    except ValueError:
        return set()
    return done


@dataclass(slots=True)
class PartitionReads:
    """One partition's records read, queued, decided and committed (see the module's
    docstring). Offsets are None until the group has a commit or a record has been read."""

    committed: int | None  # the offset of the last commit: where a re-read starts
    committed_done: set[int]  # what that commit named as decided above it
    done: set[int]  # offsets >= committed already decided (in the commit or since)
    next_offset: int | None  # after the last record read
    queued: dict[int, int] = field(default_factory=dict)  # offset -> the queue it waits in

    @classmethod
    def from_commit(cls, offset: int | None, metadata: str | None) -> PartitionReads:
        """As the group's last commit left the partition (offset None: it has none)."""
        done = decode_done(offset, metadata) if offset is not None else set()
        return cls(offset, done, set(done), offset)

    def read(self, offset: int) -> bool:
        """A record read at `offset`: False when it is not to be decided (read twice, or
        decided before a restart or a move)."""
        if self.next_offset is not None and offset < self.next_offset:
            return False
        self.next_offset = offset + 1
        return offset not in self.done

    def decided(self, offset: int) -> None:
        self.queued.pop(offset, None)
        self.done.add(offset)

    def commit(self) -> tuple[int, str] | None:
        """(offset, metadata) to commit once what was decided so far is durable."""
        offset = min(self.queued, default=self.next_offset)
        if offset is None:
            return None
        return offset, encode_done(offset, (o for o in self.done if o >= offset))

    def committed_at(self, offset: int) -> None:
        """A commit at `offset`, as `commit` gave it, is durable."""
        self.committed = offset
        self.done = {o for o in self.done if o >= offset}
        self.committed_done = set(self.done)

    def restart(self) -> int | None:
        """Forget what was read past the last commit (it is read again from there); returns
        the offset to seek to."""
        self.queued.clear()
        self.done = set(self.committed_done)
        self.next_offset = self.committed
        return self.committed

    def commit_held_back(self) -> bool:
        """Whether a record still queued holds back a commit that could no longer name what
        was decided above it (`MAX_DONE_CHARS`): the caller then decides that record now."""
        commit = self.commit() if self.queued else None
        return commit is not None and len(commit[1]) > MAX_DONE_CHARS
