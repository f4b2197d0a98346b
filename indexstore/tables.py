"""In-memory search tables: a cache of the committed rows, rebuilt from RocksDB at open.

Rows (segment, seq) live in growing numpy arrays. Each table is a list of runs of permuted
fingerprints in ascending order, merged LSM-style, so an insert costs an amortized O(log n)
sort work. Each run is bucketed by a prefix of the key (offsets of every bucket), so a probe
is two array reads per run, vectorized over a whole batch and every key within the layout's
probe radius; candidates are read from contiguous ranges, never gathered at random.

A run holds each distinct fingerprint once per table, and table 0 points it at its rows. A
story reposted verbatim c times is one candidate, not c: a query's work grows with the
distinct fingerprints near it, and a caller that wants only the first few rows of each
(`per_fingerprint`) gets them without the others being gathered for every query.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from indexstore.layout import BUCKET_US, FINGERPRINT_BITS, PROBE_US, SCAN_US, Layout, bucket_bits

# The compiled kernel's signature (indexstore/_probe.pyi): queries, offsets, keys, masks, bits, k.
ProbeKernel = Callable[
    [np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int], tuple[bytes, bytes, bytes]
]

try:
    from indexstore._probe import probe as _compiled_probe

    _native_probe: ProbeKernel | None = _compiled_probe
except ImportError:
    # Installed from source without cargo: `probe_reference` finds the same hits, slower.
    _native_probe = None

NATIVE_PROBE = _native_probe is not None

# A new run merges into the previous one while that one is at most this many times larger:
# keeps run sizes geometric, so there are O(log n) runs and each row is re-sorted O(log n) times.
MERGE_RATIO = 2
# Appended rows wait for a search at most up to this many: sorting a run needs ~30 bytes of
# temporary arrays per row, so a restore of hundreds of millions of rows sorts runs of this
# size and merges them, rather than needing gigabytes for one sort at its end.
MAX_UNSORTED_ROWS = 1 << 22
# Queries x rows compared at once by a plain scan: bounds the hits of a chunk (24 B each)
# when many rows hold one fingerprint.
SCAN_CHUNK = 1 << 20
# Rows of dropped segments are marked with this segment id and skipped; the tables are
# rebuilt without them once they are this share of all rows.
DEAD = np.iinfo(np.int64).min
COMPACT_SHARE = 0.25

_EMPTY = np.empty(0, dtype=np.int64)
_EMPTY_U64 = np.empty(0, dtype=np.uint64)
_NO_MASK = np.zeros(1, dtype=np.uint64)


@dataclass(slots=True)
class Run:
    """One run: per table, its distinct permuted fingerprints in ascending order and the
    start of every bucket (the top `bits` bits of the key) among them; the row ids of table
    0's entry i are rows[starts[i]:starts[i + 1]], or rows[i] alone when `starts` is None
    (no fingerprint in the run has two rows: the usual case, which then costs nothing)."""

    perm: list[np.ndarray]
    offsets: list[np.ndarray]
    bits: list[int]
    rows: np.ndarray
    starts: np.ndarray | None

    @property
    def size(self) -> int:
        return len(self.rows)

    def first_rows(self, entries: np.ndarray) -> np.ndarray:
        """Where the rows of these table 0 entries begin in `rows` (int64)."""
        if self.starts is None:
            return entries.astype(np.int64)
        starts: np.ndarray = self.starts[entries]
        return starts.astype(np.int64)

    def row_counts(self) -> np.ndarray | None:
        """The number of rows of each table 0 entry; None if each has one."""
        return None if self.starts is None else np.diff(self.starts.astype(np.int64))


@dataclass(frozen=True, slots=True)
class Hits:
    """Rows within distance k of queries: parallel arrays, one entry per (query, row) pair."""

    query: np.ndarray  # int64 index into the queries
    row: np.ndarray  # int64 row id
    distance: np.ndarray  # int64


class _Found(NamedTuple):
    """Hits of one source (a run, the unsorted rows) with each hit's fingerprint."""

    query: np.ndarray
    row: np.ndarray
    distance: np.ndarray
    fingerprint: np.ndarray

    def capped(self, seq: np.ndarray, per_fingerprint: int | None) -> _Found:
        """Of each query's rows of one fingerprint, the `per_fingerprint` earliest."""
        if per_fingerprint is None:
            return self
        keep = _earliest(seq[self.row], per_fingerprint, self.query, self.fingerprint)
        return _Found(*(column[keep] for column in self))


def scan_break_even(layout: Layout) -> int:
    """Live rows below which comparing a query with every row costs less than the fixed part
    of probing the layout's tables (its probes and bucket lookups, from `layout_cost`'s
    constants). The layout is chosen for the expected window; a young index, a quiet feed or
    a replay of sparse history holds far fewer rows, and at k = 12 the fixed part alone is
    worth a scan of ~20,000 rows."""
    fixed = len(layout.tables) * PROBE_US + layout.expected_buckets * BUCKET_US
    return int(fixed / SCAN_US)


class SearchTables:
    def __init__(self, layout: Layout, scan_below: int | None = None) -> None:
        self.layout = layout
        self.k = layout.max_distance
        # Below this many rows a search scans table 0's runs instead of probing (both exact).
        self.scan_below = scan_break_even(layout) if scan_below is None else scan_below
        self.n = 0
        self.dead = 0
        self.seg = np.empty(1024, dtype=np.int64)
        self.seq = np.empty(1024, dtype=np.uint64)
        # Fingerprints by row, only for the plain scan: the tables hold them otherwise.
        self.fp = np.empty(1024 if not layout.tables else 0, dtype=np.uint64)
        self.runs: list[Run] = []
        # Rows appended since the last search, not in a run yet: (row ids, fingerprints).
        self._unsorted: list[tuple[np.ndarray, np.ndarray]] = []
        self._unsorted_rows = 0

    @property
    def live(self) -> int:
        return self.n - self.dead

    # -- building -------------------------------------------------------------------------

    def append(self, fps: np.ndarray, segs: np.ndarray, seqs: np.ndarray) -> None:
        """Add committed rows; they are searchable at once, sorted into a run by the first
        search after them, so many appends without a search between them (a restore) sort
        their rows once instead of merging run after run."""
        m = len(fps)
        if not m:
            return
        self._reserve(self.n + m)
        start = self.n
        self.seg[start : start + m] = segs
        self.seq[start : start + m] = seqs
        self.n += m
        if not self.layout.tables:
            self.fp[start : start + m] = fps
            return
        rows = np.arange(start, start + m, dtype=np.uint32)
        self._unsorted.append((rows, np.asarray(fps, dtype=np.uint64)))
        self._unsorted_rows += m
        if self._unsorted_rows >= MAX_UNSORTED_ROWS:
            self.sort_appended()

    def sort_appended(self) -> None:
        """Sort the rows appended since the last search into a run now, not at that search."""
        if not self._unsorted:
            return
        rows = np.concatenate([r for r, _ in self._unsorted])
        fps = np.concatenate([f for _, f in self._unsorted])
        self._unsorted = []
        self._unsorted_rows = 0
        self.runs.append(self._make_run(rows, fps))
        while len(self.runs) >= 2 and self.runs[-2].size <= MERGE_RATIO * self.runs[-1].size:
            newer = self.runs.pop()
            self.runs[-1] = self._merge(self.runs[-1], newer)

    def _reserve(self, needed: int) -> None:
        if needed <= len(self.seg):
            return
        capacity = max(needed, int(len(self.seg) * 1.5))
        names = ("seg", "seq", "fp") if not self.layout.tables else ("seg", "seq")
        for name in names:
            old = getattr(self, name)
            new = np.empty(capacity, dtype=old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    def _make_run(self, rows: np.ndarray, fps: np.ndarray) -> Run:
        first = self.layout.tables[0]
        p0 = first.permute(fps)
        order = np.argsort(p0)
        p0, rows = p0[order], rows[order]
        del order
        new = np.ones(len(p0), dtype=bool)
        new[1:] = p0[1:] != p0[:-1]
        if new.all():
            starts, distinct = None, p0
        else:
            starts = np.append(np.flatnonzero(new), len(p0)).astype(np.uint32)
            distinct = p0[new]
        del new
        fps = first.unpermute(distinct)
        perm = [distinct] + [np.sort(table.permute(fps)) for table in self.layout.tables[1:]]
        return self._bucketed(perm, rows, starts)

    def _bucketed(self, perm: list[np.ndarray], rows: np.ndarray, starts: np.ndarray | None) -> Run:
        offsets, bits = [], []
        for table, p in zip(self.layout.tables, perm, strict=True):
            b = bucket_bits(table.key_bits, len(p))
            counts = np.bincount(_bucket(p, b).astype(np.intp), minlength=1 << b)
            offsets.append(np.concatenate(([0], np.cumsum(counts))).astype(np.int64))
            bits.append(b)
        return Run(perm, offsets, bits, rows, starts)

    def _merge(self, older: Run, newer: Run) -> Run:
        """Merge two runs table by table, releasing each old table once its successor exists,
        so a merge of the largest runs needs one table's worth of extra memory, not all.

        Both runs are in ascending order, so each newer entry's place is found by a binary
        search in the older run: O(n) moves and no O(n) index array, unlike sorting the
        concatenation. A fingerprint in both runs keeps the older entry, which takes the
        newer one's rows after its own.
        """
        perm: list[np.ndarray] = []
        rows, starts = older.rows, older.starts
        for t in range(len(self.layout.tables)):
            old, new = older.perm[t], newer.perm[t]
            place = np.searchsorted(old, new)
            shared = place < len(old)
            shared[shared] = old[place[shared]] == new[shared]
            if t == 0:
                rows, starts = _merge_rows(older, newer, place, shared)
            if shared.any():
                new, place = new[~shared], place[~shared]
            # Where the fresh newer entries land among the merged ones.
            place += np.arange(len(place))
            perm.append(_interleave(old, new, place))
            older.perm[t] = newer.perm[t] = _EMPTY_U64
            older.offsets[t] = newer.offsets[t] = _EMPTY
            del old, new, place, shared
        return self._bucketed(perm, rows, starts)

    def drop_segments(self, segments: Iterable[int]) -> None:
        """Forget every row of these segments: marked now, removed by a later compaction."""
        dropped = np.fromiter(segments, dtype=np.int64)
        if not len(dropped) or not self.n:
            return
        gone = np.isin(self.seg[: self.n], dropped)
        self.dead += int(gone.sum())
        self.seg[: self.n][gone] = DEAD
        if self.dead > COMPACT_SHARE * self.n:
            self._compact()

    def _compact(self) -> None:
        """Rebuild without dead rows and renumber the rest densely: one O(n) pass."""
        self.sort_appended()
        keep = self.seg[: self.n] != DEAD
        new_id = (np.cumsum(keep, dtype=np.int64) - 1).astype(np.uint32)
        live = int(keep.sum())
        if self.layout.tables:
            fps, rows = [], []
            first = self.layout.tables[0]
            for run in self.runs:
                mask = keep[run.rows]
                counts = run.row_counts()
                entries = run.perm[0] if counts is None else np.repeat(run.perm[0], counts)
                fps.append(first.unpermute(entries[mask]))
                rows.append(new_id[run.rows[mask]])
            self.runs = []
            if live:
                self.runs.append(self._make_run(np.concatenate(rows), np.concatenate(fps)))
        else:
            self.fp[:live] = self.fp[: self.n][keep]
        self.seg[:live] = self.seg[: self.n][keep]
        self.seq[:live] = self.seq[: self.n][keep]
        self.n = live
        self.dead = 0

    # -- saving -------------------------------------------------------------------------

    def export(self) -> dict[str, np.ndarray]:
        """Every array of the tables, named, for `restore` (the snapshot at a clean close)."""
        self.sort_appended()
        arrays = {
            "n": np.array([self.n, self.dead]),
            "seg": self.seg[: self.n],
            "seq": self.seq[: self.n],
            "fp": self.fp[: self.n],
        }
        for i, run in enumerate(self.runs):
            arrays[f"rows.{i}"] = run.rows
            if run.starts is not None:
                arrays[f"starts.{i}"] = run.starts
            for t in range(len(run.perm)):
                arrays[f"perm.{i}.{t}"] = run.perm[t]
                arrays[f"offsets.{i}.{t}"] = run.offsets[t]
        return arrays

    @classmethod
    def restore(cls, layout: Layout, arrays: dict[str, np.ndarray]) -> SearchTables:
        self = cls(layout)
        self.n, self.dead = (int(v) for v in arrays["n"])
        self.seg, self.seq = arrays["seg"], arrays["seq"]
        self.fp = arrays["fp"]
        i = 0
        while f"rows.{i}" in arrays:
            tables = range(len(layout.tables))
            offsets = [arrays[f"offsets.{i}.{t}"] for t in tables]
            self.runs.append(
                Run(
                    [arrays[f"perm.{i}.{t}"] for t in tables],
                    offsets,
                    [(len(o) - 1).bit_length() - 1 for o in offsets],
                    arrays[f"rows.{i}"],
                    arrays.get(f"starts.{i}"),
                )
            )
            i += 1
        return self

    def memory_bytes(self) -> int:
        self.sort_appended()
        arrays = [self.fp, self.seg, self.seq]
        for run in self.runs:
            arrays.extend(run.perm)
            arrays.extend(run.offsets)
            arrays.append(run.rows)
            if run.starts is not None:
                arrays.append(run.starts)
        return sum(a.nbytes for a in arrays)

    # -- searching ------------------------------------------------------------------------

    def search(self, queries: np.ndarray, per_fingerprint: int | None = None) -> Hits:
        """Every (query, live row) with Hamming distance <= k, each pair once, ordered by
        query then row. With `per_fingerprint`, of the rows holding one fingerprint only the
        that many with the smallest sequence numbers (the earliest inserted) are returned."""
        queries = np.asarray(queries, dtype=np.uint64)
        if not self.live or not len(queries):
            return Hits(_EMPTY, _EMPTY, _EMPTY)
        if not self.layout.tables:
            return self._scan(queries, per_fingerprint)
        if self.n < self.scan_below:
            # Rows appended since the last sort are scanned as they are: sorting them into
            # runs would cost more than the scan saves while the window is this small.
            return self._scan_runs(queries, per_fingerprint)
        self.sort_appended()
        first = self.layout.tables[0]
        radius = self.layout.radius
        permuted = [table.permute(queries) for table in self.layout.tables]
        found = []
        for run in self.runs:
            entry_q, entry, entry_d = [], [], []
            for t, (table, qp) in enumerate(zip(self.layout.tables, permuted, strict=True)):
                # Every bucket within the probe radius of the query's bucket: a key within
                # the radius of the query's key has its bucket within it too.
                query, position, d = probe(
                    qp,
                    run.offsets[t],
                    run.perm[t],
                    _masks(run.bits[t], radius),
                    run.bits[t],
                    self.k,
                )
                if not len(query):
                    continue
                if t:
                    # Table 0 holds the same distinct fingerprints, in ascending order.
                    fp0 = first.permute(table.unpermute(run.perm[t][position]))
                    position = np.searchsorted(run.perm[0], fp0).astype(np.int64)
                entry_q.append(query)
                entry.append(position)
                entry_d.append(d)
            if entry_q:
                found.append(
                    self._entry_rows(
                        run,
                        np.concatenate(entry_q),
                        np.concatenate(entry),
                        np.concatenate(entry_d),
                        per_fingerprint,
                    )
                )
        return self._combined(found, per_fingerprint)

    def _entry_rows(
        self,
        run: Run,
        query: np.ndarray,
        entry: np.ndarray,
        distance: np.ndarray,
        per_fingerprint: int | None,
    ) -> _Found:
        """(query, table 0 entry) pairs of one run to (query, live row) pairs. A neighbour
        agreeing with a query on several key sets is found by several tables: counted once.
        Each entry's rows are gathered once for all the queries that found it."""
        pair, first_index = np.unique((query << 32) | entry, return_index=True)
        query, entry, distance = pair >> 32, pair & 0xFFFFFFFF, distance[first_index]
        wanted, which = np.unique(entry, return_inverse=True)
        begin = run.first_rows(wanted)
        sizes = run.first_rows(wanted + 1) - begin
        total = int(sizes.sum())
        owner = np.repeat(np.arange(len(wanted)), sizes)
        # Each wanted entry's range of `rows`, entry after entry.
        at = np.repeat(begin - (np.cumsum(sizes) - sizes), sizes) + np.arange(total)
        rows = run.rows[at].astype(np.int64)
        alive = self.seg[rows] != DEAD
        owner, rows = owner[alive], rows[alive]
        if per_fingerprint is not None:
            keep = _earliest(self.seq[rows], per_fingerprint, owner)
            owner, rows = owner[keep], rows[keep]
        # `rows` is grouped by entry, in entry order: every pair times its entry's rows.
        kept = np.bincount(owner, minlength=len(wanted))
        per_pair = kept[which]
        pair_start = np.cumsum(per_pair) - per_pair
        within = np.arange(int(per_pair.sum())) - np.repeat(pair_start, per_pair)
        fingerprint = self.layout.tables[0].unpermute(run.perm[0][entry])
        return _Found(
            np.repeat(query, per_pair),
            rows[np.repeat((np.cumsum(kept) - kept)[which], per_pair) + within],
            np.repeat(distance, per_pair),
            np.repeat(fingerprint, per_pair),
        )

    def _scan_runs(self, queries: np.ndarray, per_fingerprint: int | None) -> Hits:
        """Every row compared with every query: table 0's entries (its permutation keeps
        Hamming distances, so no fingerprint is stored twice for this) and the unsorted rows."""
        if len(self._unsorted) > 1:
            # One array per commit would make every search a loop over all of them (a fuzzer
            # committing one message at a time ran out of memory): keep them as one.
            rows = np.concatenate([r for r, _ in self._unsorted])
            fps = np.concatenate([f for _, f in self._unsorted])
            self._unsorted = [(rows, fps)]
        qp = self.layout.tables[0].permute(queries)
        found = []
        for run in self.runs:
            chunks = zip(*_compare(qp, run.perm[0], self.k), strict=True)
            q, entry, d = (np.concatenate(c) for c in chunks)
            if len(q):
                found.append(self._entry_rows(run, q, entry, d, per_fingerprint))
        for rows, fps in self._unsorted:
            found.extend(self._compare_rows(queries, fps, rows.astype(np.int64), per_fingerprint))
        return self._combined(found, per_fingerprint)

    def _scan(self, queries: np.ndarray, per_fingerprint: int | None) -> Hits:
        rows = np.arange(self.n, dtype=np.int64)
        found = self._compare_rows(queries, self.fp[: self.n], rows, per_fingerprint)
        return self._combined(found, per_fingerprint)

    def _compare_rows(
        self, queries: np.ndarray, fps: np.ndarray, rows: np.ndarray, per_fingerprint: int | None
    ) -> list[_Found]:
        """Queries against rows one by one (no distinct entries: unsorted or untabled rows)."""
        found = []
        # All of a query's pairs come in one chunk: the cap is applied chunk by chunk, so a
        # chunk's hits never pile up.
        for q, i, d in _compare(queries, fps, self.k):
            r = rows[i]
            alive = self.seg[r] != DEAD
            q, r, d, i = q[alive], r[alive], d[alive], i[alive]
            found.append(_Found(q, r, d, fps[i]).capped(self.seq, per_fingerprint))
        return found

    def _combined(self, found: list[_Found], per_fingerprint: int | None) -> Hits:
        """The hits of every run and of the unsorted rows as one, by query, then row; a
        fingerprint in several runs is capped once more over all of them."""
        if not found:
            return Hits(_EMPTY, _EMPTY, _EMPTY)
        every = _Found(*(np.concatenate(column) for column in zip(*found, strict=True)))
        q, r, d, _ = every.capped(self.seq, per_fingerprint)
        order = np.lexsort((r, q))
        return Hits(q[order], r[order], d[order])


def _compare(probes: np.ndarray, keys: np.ndarray, k: int) -> Iterator[tuple[np.ndarray, ...]]:
    """(probe index, key index, distance) of every probe and key within distance k, a chunk
    of probes at a time: all of a probe's pairs come in one chunk. The probe kernel with one
    bucket holding every key."""
    whole = np.array([0, len(keys)], dtype=np.int64)
    step = max(1, SCAN_CHUNK // max(len(keys), 1))
    for lo in range(0, len(probes), step):
        q, i, d = probe(probes[lo : lo + step], whole, keys, _NO_MASK, 0, k)
        yield q + lo, i, d


def _merge_rows(
    older: Run, newer: Run, place: np.ndarray, shared: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None]:
    """Table 0's rows and entry starts after a merge, each merged entry's rows the older
    run's first. Newer entry e sorts after `place[e]` older entries, one more if it is
    `shared` with one. When no fingerprint has two rows this costs what a merge of rows
    alone does; otherwise a few more arrays the size of the runs."""
    if older.starts is None and newer.starts is None and not shared.any():
        at = place + np.arange(len(place))
        return _interleave(older.rows, newer.rows, at), None
    # Older entries at or before each newer one, then the older rows they hold: where each
    # newer row goes, after as many older rows as that and the newer rows before it.
    right = place + shared
    at = older.first_rows(right)
    counts = newer.row_counts()
    if counts is not None:
        at = np.repeat(at, counts)
    at += np.arange(len(newer.rows))
    rows = _interleave(older.rows, newer.rows, at)
    del at
    # Where each older entry's rows now begin: its own start, plus the rows of the newer
    # entries sorting before it (those with right <= its index).
    n_old = len(older.perm[0])
    newer_before = np.cumsum(np.bincount(right, minlength=n_old + 1)[:n_old])
    old_starts = newer.first_rows(newer_before)
    del newer_before
    old_starts += older.first_rows(np.arange(n_old))
    # A fresh newer entry's rows begin after the rows of the entries before it in both runs.
    fresh = np.flatnonzero(~shared)
    fresh_starts = newer.first_rows(fresh) + older.first_rows(place[fresh])
    fresh_at = place[fresh] + np.arange(len(fresh))
    starts = _interleave(old_starts, fresh_starts, fresh_at)
    return rows, np.append(starts, len(rows)).astype(np.uint32)


def _earliest(seq: np.ndarray, limit: int, *keys: np.ndarray) -> np.ndarray:
    """Indices of the `limit` smallest `seq` in each group of equal `keys`, grouped in key
    order (the first key sorts first), each group by `seq`."""
    order = np.lexsort((seq, *reversed(keys)))
    if len(order) <= limit:
        return order
    starts_group = np.zeros(len(order), dtype=bool)
    starts_group[0] = True
    for key in keys:
        ordered = key[order]
        starts_group[1:] |= ordered[1:] != ordered[:-1]
    group_start = np.flatnonzero(starts_group)
    sizes = np.diff(np.append(group_start, len(order)))
    rank = np.arange(len(order)) - np.repeat(group_start, sizes)
    return order[rank < limit]


def _interleave(older: np.ndarray, newer: np.ndarray, place: np.ndarray) -> np.ndarray:
    """`older` and `newer` in one array, newer[i] at place[i] (ascending), older in the gaps."""
    out = np.empty(len(older) + len(newer), dtype=older.dtype)
    gaps = np.ones(len(out), dtype=bool)
    gaps[place] = False
    out[place] = newer
    out[gaps] = older
    return out


def _bucket(permuted: np.ndarray, bits: int) -> np.ndarray:
    """The top `bits` bits of permuted fingerprints (a shift by 64 is undefined in numpy)."""
    if not bits:
        return np.zeros(len(permuted), dtype=np.uint64)
    return permuted >> np.uint64(FINGERPRINT_BITS - bits)


@functools.lru_cache(maxsize=256)
def _masks(bits: int, radius: int) -> np.ndarray:
    """Every value of `bits` bits with at most `radius` bits set (XOR masks of the probes)."""
    masks = [0]
    for weight in range(1, min(radius, bits) + 1):
        for chosen in itertools.combinations(range(bits), weight):
            masks.append(sum(1 << b for b in chosen))
    return np.array(masks, dtype=np.uint64)


def probe(
    queries: np.ndarray,
    offsets: np.ndarray,
    keys: np.ndarray,
    masks: np.ndarray,
    bits: int,
    k: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query index, key position, distance) of every key of one run of one table within
    distance k of a query, among the buckets within the probe radius of the query's (its
    bucket XOR each of `masks`). The native kernel (`indexstore/native/`); `probe_reference`
    is the same in NumPy, which the tests hold it to, and runs where the kernel is not built."""
    arrays = (
        np.ascontiguousarray(queries, dtype=np.uint64),
        np.ascontiguousarray(offsets, dtype=np.int64),
        np.ascontiguousarray(keys, dtype=np.uint64),
        np.ascontiguousarray(masks, dtype=np.uint64),
    )
    if _native_probe is None:
        return probe_reference(*arrays, bits, k)
    query, position, distance = _native_probe(*arrays, bits, k)
    return (
        np.frombuffer(query, dtype=np.int64),
        np.frombuffer(position, dtype=np.int64),
        np.frombuffer(distance, dtype=np.int64),
    )


def probe_reference(
    queries: np.ndarray,
    offsets: np.ndarray,
    keys: np.ndarray,
    masks: np.ndarray,
    bits: int,
    k: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`probe` in NumPy, hits in the same order: query after query, mask after mask."""
    buckets = (_bucket(queries, bits)[:, None] ^ masks[None, :]).ravel()
    counts, pos = _ranges(offsets, buckets)
    if not len(pos):
        return _EMPTY, _EMPTY, _EMPTY
    # Candidates outnumber hits by far: find which probe a hit came from only for the hits.
    d = np.bitwise_count(keys[pos] ^ np.repeat(np.repeat(queries, len(masks)), counts))
    close = np.flatnonzero(d <= k)
    which = np.searchsorted(np.cumsum(counts), close, side="right")
    return (which // len(masks)).astype(np.int64), pos[close], d[close].astype(np.int64)


def _ranges(offsets: np.ndarray, buckets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows in each probe's bucket, every position in them, probe after probe)."""
    index = buckets.astype(np.intp)
    lo = offsets[index]
    counts = offsets[index + 1] - lo
    total = int(counts.sum())
    if not total:
        return counts, _EMPTY
    # Position of each candidate: its range start plus its offset inside the range.
    before = np.cumsum(counts) - counts
    pos = np.repeat(lo - before, counts) + np.arange(total)
    return counts, pos
