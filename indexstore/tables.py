"""In-memory search tables: a cache of the committed rows, rebuilt from RocksDB at open.

Rows (fingerprint, segment, seq) live in growing numpy arrays. Each table is a list of
sorted runs (key, row id) merged LSM-style, so an insert costs an amortized O(log n)
sort work and a query a few `searchsorted` calls per run, vectorized over a whole batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from indexstore.layout import Layout

# A new run merges into the previous one while that one is at most this many times larger:
# keeps run sizes geometric, so there are O(log n) runs and each row is re-sorted O(log n) times.
MERGE_RATIO = 2
# Queries x rows compared at once by a plain scan; bounds the temporary matrix (8 B each).
SCAN_CHUNK = 1 << 22


@dataclass(slots=True)
class Run:
    """One sorted run: for each table, keys sorted ascending and the row ids in that order."""

    keys: list[np.ndarray]
    rows: list[np.ndarray]

    @property
    def size(self) -> int:
        return len(self.rows[0])


@dataclass(frozen=True, slots=True)
class Hits:
    """Rows within distance k of queries: parallel arrays, one entry per (query, row) pair."""

    query: np.ndarray  # int64 index into the queries
    row: np.ndarray  # int64 row id
    distance: np.ndarray  # int64


class SearchTables:
    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.k = layout.max_distance
        self.n = 0
        self.fp = np.empty(1024, dtype=np.uint64)
        self.seg = np.empty(1024, dtype=np.int64)
        self.seq = np.empty(1024, dtype=np.uint64)
        self.runs: list[Run] = []

    # -- building -------------------------------------------------------------------------

    def append(self, fps: np.ndarray, segs: np.ndarray, seqs: np.ndarray) -> None:
        """Add committed rows; they become searchable at once."""
        m = len(fps)
        if not m:
            return
        self._reserve(self.n + m)
        start = self.n
        self.fp[start : start + m] = fps
        self.seg[start : start + m] = segs
        self.seq[start : start + m] = seqs
        self.n += m
        if self.layout.tables:
            self.runs.append(self._make_run(np.arange(start, start + m, dtype=np.uint32)))
            while len(self.runs) >= 2 and self.runs[-2].size <= MERGE_RATIO * self.runs[-1].size:
                newer = self.runs.pop()
                self.runs[-1] = self._merge(self.runs[-1], newer)

    def _reserve(self, needed: int) -> None:
        if needed <= len(self.fp):
            return
        capacity = max(needed, int(len(self.fp) * 1.5))
        for name in ("fp", "seg", "seq"):
            old = getattr(self, name)
            new = np.empty(capacity, dtype=old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    def _make_run(self, rows: np.ndarray) -> Run:
        fps = self.fp[rows]
        keys, ordered = [], []
        for table in self.layout.tables:
            k = table.keys(fps)
            order = np.argsort(k, kind="stable")
            keys.append(k[order])
            ordered.append(rows[order])
        return Run(keys, ordered)

    def _merge(self, older: Run, newer: Run) -> Run:
        keys, rows = [], []
        for t in range(len(self.layout.tables)):
            k = np.concatenate((older.keys[t], newer.keys[t]))
            # Two sorted runs: the stable sort (radix or timsort) finds them and merges.
            order = np.argsort(k, kind="stable")
            keys.append(k[order])
            rows.append(np.concatenate((older.rows[t], newer.rows[t]))[order])
        return Run(keys, rows)

    def drop_segments(self, segments: Iterable[int]) -> None:
        """Forget every row of these segments and renumber the remaining rows densely."""
        dropped = np.fromiter(segments, dtype=np.int64)
        if not len(dropped) or not self.n:
            return
        keep = ~np.isin(self.seg[: self.n], dropped)
        if keep.all():
            return
        new_id = np.cumsum(keep, dtype=np.int64) - 1
        n = int(keep.sum())
        for name in ("fp", "seg", "seq"):
            arr = getattr(self, name)
            arr[:n] = arr[: self.n][keep]
        self.n = n
        runs = []
        for run in self.runs:
            keys, rows = [], []
            for t in range(len(run.rows)):
                mask = keep[run.rows[t]]
                keys.append(run.keys[t][mask])
                rows.append(new_id[run.rows[t][mask]].astype(np.uint32))
            if len(rows[0]):
                runs.append(Run(keys, rows))
        self.runs = runs

    def rows_of_segment(self, segment_id: int) -> np.ndarray:
        return np.flatnonzero(self.seg[: self.n] == segment_id)

    def memory_bytes(self) -> int:
        arrays = [self.fp, self.seg, self.seq]
        for run in self.runs:
            arrays.extend(run.keys)
            arrays.extend(run.rows)
        return sum(a.nbytes for a in arrays)

    # -- searching ------------------------------------------------------------------------

    def search(self, queries: np.ndarray) -> Hits:
        """Every (query, row) with Hamming distance <= k, each pair once."""
        queries = np.asarray(queries, dtype=np.uint64)
        if not self.n or not len(queries):
            empty = np.empty(0, dtype=np.int64)
            return Hits(empty, empty, empty)
        if not self.layout.tables:
            return self._scan(queries)
        found_q, found_r = [], []
        for t, table in enumerate(self.layout.tables):
            qkeys = table.keys(queries)
            for run in self.runs:
                q, r = _expand(run.keys[t], run.rows[t], qkeys)
                if len(q):
                    d = np.bitwise_count(self.fp[r] ^ queries[q])
                    close = d <= self.k
                    found_q.append(q[close])
                    found_r.append(r[close].astype(np.int64))
        if not found_q:
            empty = np.empty(0, dtype=np.int64)
            return Hits(empty, empty, empty)
        q = np.concatenate(found_q)
        r = np.concatenate(found_r)
        # A neighbour agreeing on several key sets is found by several tables: count it once.
        pair = np.unique((q << 32) | r)
        q = pair >> 32
        r = pair & 0xFFFFFFFF
        d = np.bitwise_count(self.fp[r] ^ queries[q]).astype(np.int64)
        return Hits(q, r, d)

    def _scan(self, queries: np.ndarray) -> Hits:
        fp = self.fp[: self.n]
        step = max(1, SCAN_CHUNK // self.n)
        found_q, found_r, found_d = [], [], []
        for lo in range(0, len(queries), step):
            d = np.bitwise_count(queries[lo : lo + step, None] ^ fp[None, :])
            q, r = np.nonzero(d <= self.k)
            found_q.append(q + lo)
            found_r.append(r)
            found_d.append(d[q, r])
        return Hits(
            np.concatenate(found_q).astype(np.int64),
            np.concatenate(found_r).astype(np.int64),
            np.concatenate(found_d).astype(np.int64),
        )


def _expand(keys: np.ndarray, rows: np.ndarray, qkeys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(query index, row id) for every row whose key equals its query's key."""
    lo = np.searchsorted(keys, qkeys, side="left")
    hi = np.searchsorted(keys, qkeys, side="right")
    counts = hi - lo
    total = int(counts.sum())
    if not total:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint32)
    q = np.repeat(np.arange(len(qkeys), dtype=np.int64), counts)
    # Position of each candidate: its range start plus its offset inside the range.
    offsets = np.cumsum(counts) - counts
    pos = np.repeat(lo - offsets, counts) + np.arange(total)
    return q, rows[pos]
