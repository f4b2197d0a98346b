"""In-memory band tables: the rows holding each band key, a cache rebuilt at open like the
SimHash tables (tables.py), whose row ids, expiry and compaction they share.

Every band key of every row is one uint64 entry, band (4 bits) | key's top 28 bits | row
(32 bits), in runs of ascending entries merged LSM-style as the SimHash runs are: 16 bands
cost 16 entries, 128 B an article, and one binary search per run answers all of a query's
bands, since one array holds them all. Cutting the key to 28 bits is what makes the band fit:
keys differing only in their low 4 bits look equal here, so a row's count of shared bands is
an upper bound, exact but for about one band in 2**28; the caller recounts from the record,
which it reads anyway to check that the row is live. Rows without bands have no entries.

The same runs hold the posted keys of the rows (`PostingTables`): any number of 32-bit keys a
row, each kept whole, key (32 bits) | row (32 bits), so a count of shared keys is exact.

It may import numpy and indexstore.encoding and .runs.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Callable, Sequence

import numpy as np

from indexstore import encoding as enc
from indexstore.runs import MERGE_RATIO, interleave

BAND_SHIFT = 60
KEY_DROP = 4  # low bits of a key not kept
ROW_BITS = 32
ROW_MASK = np.uint64((1 << ROW_BITS) - 1)

_EMPTY = np.empty(0, dtype=np.int64)


def keys_of(bands: bytes) -> np.ndarray:
    """The keys of `bands` as uint64, key i at i."""
    return np.frombuffer(bands, dtype="<u4").astype(np.uint64)


def _prefixes(keys: np.ndarray) -> np.ndarray:
    """The entry of each key (key i in band i) with row 0: all its entries sort after it."""
    band = np.arange(keys.shape[-1], dtype=np.uint64)
    return (band << np.uint64(BAND_SHIFT)) | ((keys >> np.uint64(KEY_DROP)) << np.uint64(ROW_BITS))


def entries(rows: np.ndarray, bands: Sequence[bytes]) -> np.ndarray:
    """The unsorted entries of rows (uint32 ids) holding these band keys (b"": none)."""
    by_size: dict[int, list[int]] = {}
    for i, size in enumerate(map(len, bands)):
        if size:
            by_size.setdefault(size, []).append(i)
    parts = []
    for size, at in by_size.items():
        keys = keys_of(b"".join([bands[i] for i in at])).reshape(len(at), size // 4)
        owner = np.asarray(rows, dtype=np.uint64)[at]
        parts.append((_prefixes(keys) | owner[:, None]).ravel())
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)


def posting_entries(rows: np.ndarray, keys: Sequence[bytes]) -> np.ndarray:
    """The unsorted entries of rows (uint32 ids) posted under these little-endian u32 keys,
    any number a row (b"": none)."""
    sizes = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys)) // 4
    if not sizes.sum():
        return np.empty(0, dtype=np.uint64)
    flat = np.frombuffer(b"".join(keys), dtype="<u4").astype(np.uint64)
    owner = np.repeat(np.asarray(rows, dtype=np.uint64), sizes)
    return (flat << np.uint64(ROW_BITS)) | owner


class BandTables:
    """The band entries of a `SearchTables`' rows; rows are that object's ids. `entries_of`
    makes a batch of rows' entries from their keys; `name` prefixes the exported arrays."""

    def __init__(
        self,
        entries_of: Callable[[np.ndarray, Sequence[bytes]], np.ndarray] = entries,
        name: str = "bands",
    ) -> None:
        self.runs: list[np.ndarray] = []
        self._unsorted: list[np.ndarray] = []
        self._entries_of = entries_of
        self._name = name

    def append(self, rows: np.ndarray, bands: Sequence[bytes]) -> None:
        found = self._entries_of(rows, bands)
        if len(found):
            self._unsorted.append(found)

    def sort_appended(self) -> None:
        if not self._unsorted:
            return
        run = np.sort(np.concatenate(self._unsorted))
        self._unsorted = []
        self.runs.append(run)
        while len(self.runs) >= 2 and len(self.runs[-2]) <= MERGE_RATIO * len(self.runs[-1]):
            newer = self.runs.pop()
            older = self.runs[-1]
            place = np.searchsorted(older, newer) + np.arange(len(newer))
            self.runs[-1] = interleave(older, newer, place)

    def search(self, queries: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query, row, shared) of every row with an entry equal to one of a query's band keys,
        and how many of them (an upper bound, see above), dead rows included, by query then
        row. One binary search per run answers every key of every query: a batch's band
        probe costs a few array operations, not a few per article."""
        self.sort_appended()
        asked = [i for i, bands in enumerate(queries) if bands]
        if not self.runs or not asked:
            return _EMPTY, _EMPTY, _EMPTY
        low = self._entries_of(np.asarray(asked, dtype=np.uint32), [queries[i] for i in asked])
        return self._search_entries(low)

    def search_posted(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`search` of queries of one key each, query i the u32 `keys[i]`, in tables of
        `posting_entries`: their entries are made from the array at once, not from a bytes
        object a key (a batch asks some 100,000 keys at a time)."""
        self.sort_appended()
        if not self.runs or not len(keys):
            return _EMPTY, _EMPTY, _EMPTY
        at = np.arange(len(keys), dtype=np.uint64)
        low = (np.asarray(keys, dtype=np.uint64) << np.uint64(ROW_BITS)) | at
        return self._search_entries(low)

    def _search_entries(self, low: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`search` of the entries `low`, a query's index where a row id stands."""
        # In ascending order, each binary search starts from where the one before ended
        # (NumPy keeps its bounds for sorted needles): twice as fast as in query order.
        low.sort()
        owner = low & ROW_MASK  # the query index stands where a row id does in an entry
        low ^= owner
        high = low | ROW_MASK
        found = []
        for run in self.runs:
            begin = np.searchsorted(run, low, side="left")
            sizes = np.searchsorted(run, high, side="right") - begin
            total = int(sizes.sum())
            if not total:
                continue
            at = np.repeat(begin - (np.cumsum(sizes) - sizes), sizes) + np.arange(total)
            found.append((np.repeat(owner, sizes) << np.uint64(ROW_BITS)) | (run[at] & ROW_MASK))
        if not found:
            return _EMPTY, _EMPTY, _EMPTY
        pairs, shared = np.unique(np.concatenate(found), return_counts=True)
        query = (pairs >> np.uint64(ROW_BITS)).astype(np.int64)
        return query, (pairs & ROW_MASK).astype(np.int64), shared.astype(np.int64)

    def compact(self, keep: np.ndarray, new_id: np.ndarray) -> None:
        """Drop the entries of rows not kept and renumber the rest by `new_id`: the new ids
        keep the rows' order, so each run stays sorted."""
        self.sort_appended()
        runs = []
        for run in self.runs:
            rows = (run & ROW_MASK).astype(np.int64)
            kept = keep[rows]
            fresh = (run[kept] & ~ROW_MASK) | new_id[rows[kept]].astype(np.uint64)
            if len(fresh):
                runs.append(fresh)
        self.runs = runs

    def export(self) -> dict[str, np.ndarray]:
        self.sort_appended()
        return {f"{self._name}.{i}": run for i, run in enumerate(self.runs)}

    def restore(self, arrays: dict[str, np.ndarray]) -> None:
        """Take the runs `export` named, in place of any held."""
        self.runs = []
        i = 0
        while f"{self._name}.{i}" in arrays:
            self.runs.append(arrays[f"{self._name}.{i}"])
            i += 1

    def memory_bytes(self) -> int:
        self.sort_appended()
        return sum(run.nbytes for run in self.runs)


def posting_tables() -> BandTables:
    """Tables of the rows' posted keys: `BandTables` over `posting_entries`."""
    return BandTables(posting_entries, "postings")


def shared_bands(a: bytes, b: bytes) -> int:
    """How many bands two records share: key i equal in both. Plain words, not NumPy: it runs
    for each candidate, where making arrays would cost more than comparing 16 keys."""
    count = min(len(a), len(b)) // enc.BAND_KEY_BYTES
    if not count:
        return 0
    words = _WORDS.get(count) or struct.Struct(f"<{count}I")
    # map with operator.eq compares in C: a third of the cost of a generator expression.
    return sum(map(operator.eq, words.unpack_from(a), words.unpack_from(b)))


_WORDS = {16: struct.Struct("<16I")}
