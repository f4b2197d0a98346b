"""Key frequencies: how many live rows of the window carry each 32-bit key.

A caller that opens the index with a `FrequencyPolicy` says which of a record's keys count
(for the service: a sample of the shingle hashes of articles that start a cluster), and asks
`Batch.frequencies` how many rows of the window carry them. Like the band tables, the table is
a cache of what is on disk: it is derived from the rows' records and stored shingles, built at
open and kept in step with every commit and expiry, so it survives whatever the rows survive
(a crash, a restore, a rebuild) without being written anywhere itself.

Counts follow the window, not expiry: a segment stops counting as soon as the window's start
has passed its end, whenever RocksDB drops it. That keeps every answer a function of the
watermark and of the rows put before it, the same in `check` and through Kafka, whatever the
batch boundaries. Rows are kept per segment (4 bytes a key) to take a segment out of the
counts; the counts themselves are the compiled kernel's hash table (indexstore/tally.py, 11-20
bytes a distinct key, as full as the table is), or without it a sorted array of distinct keys
with their counts (12 bytes a key), recent changes kept as arrays and merged into it when they
grow.

It may import numpy, indexstore.tally and indexstore.window only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np

from indexstore.tally import NATIVE_TALLY, NativeTally, Tally, new_tally
from indexstore.window import window_start

_EMPTY_KEYS = np.empty(0, dtype=np.uint32)
# The changes are merged into the sorted arrays once they number this many, or an eighth of
# the keys counted, whichever is more: merging costs a pass over all keys.
_MIN_MERGE = 4096


class FrequencyPolicy(Protocol):
    """Which keys of a record count: `counts(payload)` whether the record's do at all (read
    first, so that shingles are read only for those), then `keys(shingles)` which ones. And
    the keys every row is posted under, which `Batch.posted_matches` finds it by:
    `posted(shingles)`, little-endian u32 keys (b"": none)."""

    def counts(self, payload: bytes) -> bool: ...

    def keys(self, shingles: bytes) -> np.ndarray: ...

    def posted(self, shingles: bytes) -> bytes: ...


def first_segment(watermark: int | None, retention_ms: int, segment_ms: int) -> int | None:
    """The first segment whose rows count: the one holding the window's start (None: all)."""
    if watermark is None:
        return None
    return window_start(watermark, retention_ms) // segment_ms


class SegmentKeys:
    """The keys of one segment's counted rows, with repeats, sorted on demand."""

    __slots__ = ("_chunks", "_sorted")

    def __init__(self) -> None:
        self._chunks: list[np.ndarray] = []
        self._sorted: np.ndarray | None = _EMPTY_KEYS

    def add(self, keys: np.ndarray) -> None:
        self._chunks.append(keys)
        self._sorted = None

    def remove(self, keys: np.ndarray) -> None:
        """Take these keys out once each (they were added with a row now replaced)."""
        everything = self.sorted()
        keys = np.sort(keys)
        drop = np.searchsorted(everything, keys)
        # Equal keys removed: consecutive positions from the first of each run.
        run_start = np.r_[True, np.diff(drop) != 0] if len(drop) else drop.astype(bool)
        offsets = np.arange(len(drop)) - np.maximum.accumulate(
            np.where(run_start, np.arange(len(drop)), 0)
        )
        at = drop + offsets
        if len(at) and (at[-1] >= len(everything) or (everything[at] != keys).any()):
            raise ValueError("keys removed from a segment that does not hold them")
        self._chunks = [np.delete(everything, at)]
        self._sorted = self._chunks[0]

    def sorted(self) -> np.ndarray:
        if self._sorted is None:
            self._sorted = np.sort(np.concatenate(self._chunks)) if self._chunks else _EMPTY_KEYS
            self._chunks = [self._sorted]
        return self._sorted

    def __len__(self) -> int:
        return sum(map(len, self._chunks))


class KeyCounts:
    """Counts of distinct keys: a sorted array and its counts, plus the recent changes, kept as
    arrays and folded into those two once they number `_MIN_MERGE`, or an eighth of the keys,
    whichever is more (each key is touched by NumPy only: a commit changes thousands)."""

    __slots__ = ("_counts", "_keys", "_pending", "_pending_index", "_pending_size")

    def __init__(self) -> None:
        self._keys = _EMPTY_KEYS
        self._counts = np.empty(0, dtype=np.int64)
        self._pending: list[tuple[np.ndarray, int]] = []
        self._pending_size = 0
        # The pending changes summed per distinct key, built when first asked for.
        self._pending_index: tuple[np.ndarray, np.ndarray] | None = None

    def add(self, keys: np.ndarray, sign: int) -> None:
        if not len(keys):
            return
        self._pending.append((keys, sign))
        self._pending_size += len(keys)
        self._pending_index = None
        if self._pending_size >= max(_MIN_MERGE, len(self._keys) // 8):
            self._merge()

    def get(self, keys: np.ndarray) -> np.ndarray:
        out = _look_up(keys, self._keys, self._counts)
        if self._pending:
            if self._pending_index is None:
                self._pending_index = _summed(*self._pending_arrays())
            out += _look_up(keys, *self._pending_index)
        return out

    def _pending_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        keys = np.concatenate([k for k, _ in self._pending])
        signs = np.concatenate([np.full(len(k), s, dtype=np.int64) for k, s in self._pending])
        return keys, signs

    def _merge(self) -> None:
        # The changes summed and sorted, then merged into the sorted arrays in one pass: the
        # arrays are never sorted again.
        changed, deltas = _summed(*self._pending_arrays())
        at = np.searchsorted(self._keys, changed)
        known = at < len(self._keys)
        known[known] = self._keys[at[known]] == changed[known]
        counts = self._counts.copy()
        counts[at[known]] += deltas[known]
        new = ~known
        keys = np.insert(self._keys, at[new], changed[new])
        counts = np.insert(counts, at[new], deltas[new])
        kept = counts > 0
        self._keys, self._counts = keys[kept], counts[kept]
        self._pending, self._pending_size, self._pending_index = [], 0, None

    def memory_bytes(self) -> int:
        return self._keys.nbytes + self._counts.nbytes + 12 * self._pending_size

    def __len__(self) -> int:
        """Distinct keys counted (the pending changes merged first)."""
        if self._pending:
            self._merge()
        return len(self._keys)


def _summed(keys: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys, sorted, and the sum of the weights of each."""
    unique, inverse = np.unique(keys, return_inverse=True)
    sums = np.bincount(inverse, weights=weights, minlength=len(unique)).astype(np.int64)
    return unique, sums


def _look_up(keys: np.ndarray, sorted_keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The value of each key in a sorted table (0 for a key it lacks)."""
    out = np.zeros(len(keys), dtype=np.int64)
    if len(sorted_keys):
        at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
        found = sorted_keys[at] == keys
        out[found] = values[at[found]]
    return out


class FrequencyTable:
    """The committed rows' key counts over the window (`first`: the first segment counted)."""

    def __init__(self) -> None:
        self._segments: dict[int, SegmentKeys] = {}
        # The compiled table where the kernel is built: a key changes in one step, where the
        # arrays pay a merge pass now and then (a seventh of `check`'s time on Reuters).
        self._counts: Tally = NativeTally() if NATIVE_TALLY else KeyCounts()
        self._first: int | None = None
        # What the segments the window has left since the last commit count (`_left_before`),
        # those before `_leaving_upto`: kept while the table is unchanged.
        self._leaving: Tally | None = None
        self._leaving_upto: int | None = None

    def apply(self, changes: Sequence[tuple[int, np.ndarray, int]]) -> None:
        """A commit's (segment, keys, +1 or -1): the additions of each segment as one, then
        the removals (a row the commit both added and replaced is in both)."""
        added: dict[int, list[np.ndarray]] = defaultdict(list)
        for segment, keys, sign in changes:
            if sign > 0:
                added[segment].append(keys)
        for segment, parts in added.items():
            self.add(segment, np.concatenate(parts) if len(parts) > 1 else parts[0])
        for segment, keys, sign in changes:
            if sign < 0:
                self.remove(segment, keys)

    def add(self, segment: int, keys: np.ndarray) -> None:
        if not len(keys):
            return
        self._leaving = None
        self._segments.setdefault(segment, SegmentKeys()).add(keys)
        if self._counted(segment):
            self._counts.add(keys, 1)

    def remove(self, segment: int, keys: np.ndarray) -> None:
        stored = self._segments.get(segment)
        if stored is None or not len(keys):
            return
        self._leaving = None
        stored.remove(keys)
        if self._counted(segment):
            self._counts.add(keys, -1)

    def advance(self, first: int | None) -> None:
        """The window now starts in segment `first`: segments before it stop counting."""
        if first is None or (self._first is not None and first <= self._first):
            return
        self._leaving = None
        for segment in sorted(self._segments):
            if segment < first and self._counted(segment):
                self._counts.add(self._segments[segment].sorted(), -1)
        self._first = first

    def drop_segments(self, segments: Iterable[int]) -> None:
        self._leaving = None
        for segment in segments:
            stored = self._segments.pop(segment, None)
            if stored is not None and self._counted(segment):
                self._counts.add(stored.sorted(), -1)

    def counts(self, keys: np.ndarray, first: int | None) -> np.ndarray:
        """How many committed rows of segments from `first` on (None: all) carry each key."""
        out = self._counts.get(keys)
        if first is not None and (self._first is None or first > self._first):
            # Segments the window has left since the last commit still count in the arrays.
            out -= self._left_before(first).get(keys)
        return out

    def holds_rows(self, low: int | None, high: int) -> bool:
        """Whether a segment from `low` (None: any) up to `high` holds counted rows."""
        return any(
            (low is None or low <= segment) and segment < high and len(keys)
            for segment, keys in self._segments.items()
        )

    def _left_before(self, first: int) -> Tally:
        """The counts of the counted segments before `first`. A batch's watermark moves on
        while the table stays as committed, so a batch spanning days asks with ever later
        starts: the counts are kept, and extended by the segments left since the last ask,
        rather than taken per segment at every ask (three fifths of `check`'s time on the
        templated Reuters feed in a 72 h window, with ~36 such segments an ask)."""
        low = self._leaving_upto
        if self._leaving is None or low is None or first < low:
            self._leaving, low = new_tally(), None
        elif first == low:
            return self._leaving
        for segment, stored in self._segments.items():
            if (low is None or low <= segment) and segment < first and self._counted(segment):
                self._leaving.add(stored.sorted(), 1)
        self._leaving_upto = first
        return self._leaving

    def memory_bytes(self) -> int:
        leaving = 0 if self._leaving is None else self._leaving.memory_bytes()
        return self._counts.memory_bytes() + 4 * sum(map(len, self._segments.values())) + leaving

    def _counted(self, segment: int) -> bool:
        return self._first is None or segment >= self._first
