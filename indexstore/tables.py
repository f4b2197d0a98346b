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

The runs' arrays and their merging are runs.py's; the probe of one run, probe.py's. The band
keys and the posted keys of the same rows are bands.py's, kept here so that all share row ids,
expiry and compaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from indexstore.bands import BandTables, posting_tables
from indexstore.layout import BUCKET_US, PROBE_US, SCAN_US, Layout
from indexstore.probe import pairs_within, probe, probe_masks
from indexstore.runs import MERGE_RATIO, Run, make_run, merge

# Appended rows wait for a search at most up to this many: sorting a run needs ~30 bytes of
# temporary arrays per row, so a restore of hundreds of millions of rows sorts runs of this
# size and merges them, rather than needing gigabytes for one sort at its end.
MAX_UNSORTED_ROWS = 1 << 22
# Rows of dropped segments are marked with this segment id and skipped; the tables are
# rebuilt without them once they are this share of all rows.
DEAD = np.iinfo(np.int64).min
COMPACT_SHARE = 0.25

_EMPTY = np.empty(0, dtype=np.int64)


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
        keep = first_per_group(per_fingerprint, (self.query, self.fingerprint), (seq[self.row],))
        return _Found(*(column[keep] for column in self))


def scan_break_even(layout: Layout) -> int:
    """Live rows below which comparing a query with every row costs less than the fixed part
    of probing the layout's tables (its probes and bucket lookups, from `layout_cost`'s
    constants). The layout is chosen for the expected window; a young index, a quiet feed or
    a replay of sparse history holds far fewer rows, and at k = 12 the fixed part alone is
    worth a scan of ~20,000 rows."""
    fixed = len(layout.tables) * PROBE_US + layout.expected_buckets * BUCKET_US
    return int(fixed / SCAN_US)


def room_for(expected_rows: int) -> int:
    """The rows the row arrays take room for at once: the expected rows, and the dead ones
    kept until a compaction (up to a third more). Room not written to is not in memory (the
    OS maps a page when first written), and an index that keeps to its expected size never
    copies the arrays, where growing by half at a time briefly held the old arrays beside
    the new (800 MiB at 100 M rows)."""
    return int(expected_rows / (1 - COMPACT_SHARE)) + 1


class SearchTables:
    def __init__(
        self, layout: Layout, scan_below: int | None = None, expected_rows: int = 1024
    ) -> None:
        self.layout = layout
        self.k = layout.max_distance
        # Below this many rows a search scans table 0's runs instead of probing (both exact).
        self.scan_below = scan_break_even(layout) if scan_below is None else scan_below
        self.n = 0
        self.dead = 0
        self.seg = np.empty(0, dtype=np.int64)
        self.seq = np.empty(0, dtype=np.uint64)
        # Fingerprints by row, only for the plain scan: the tables hold them otherwise.
        self.fp = np.empty(0, dtype=np.uint64)
        self.expected_rows = room_for(expected_rows)
        self._reserve(1)
        self.runs: list[Run] = []
        # Rows appended since the last search, not in a run yet: (row ids, fingerprints).
        self._unsorted: list[tuple[np.ndarray, np.ndarray]] = []
        self._unsorted_rows = 0
        self.bands = BandTables()
        self.postings = posting_tables()

    @property
    def live(self) -> int:
        return self.n - self.dead

    # -- building -------------------------------------------------------------------------

    def append(
        self,
        fps: np.ndarray,
        segs: np.ndarray,
        seqs: np.ndarray,
        bands: Sequence[bytes] | None = None,
        posted: Sequence[bytes] | None = None,
    ) -> None:
        """Add committed rows, with their band keys and posted keys if given (u32 keys,
        little-endian; b"": none); they are searchable at once,
        sorted into a run by the first search after them, so many appends without a search
        between them (a restore) sort their rows once instead of merging run after run."""
        m = len(fps)
        if not m:
            return
        self._reserve(self.n + m)
        start = self.n
        self.seg[start : start + m] = segs
        self.seq[start : start + m] = seqs
        self.n += m
        if bands is not None:
            self.bands.append(np.arange(start, start + m, dtype=np.uint32), bands)
        if posted is not None:
            self.postings.append(np.arange(start, start + m, dtype=np.uint32), posted)
        if not self.layout.tables:
            self.fp[start : start + m] = fps
            return
        rows = np.arange(start, start + m, dtype=np.uint32)
        self._unsorted.append((rows, np.asarray(fps, dtype=np.uint64)))
        self._unsorted_rows += m
        if self._unsorted_rows >= MAX_UNSORTED_ROWS:
            self.sort_appended()

    def add_bands(self, seqs: np.ndarray, bands: Sequence[bytes]) -> None:
        """Band keys of rows already appended, found by their seqs (an open reads them from
        the article records, after the rows); seqs of no row are skipped."""
        self._add_keys(self.bands, seqs, bands)

    def add_posted(self, seqs: np.ndarray, posted: Sequence[bytes]) -> None:
        """Posted keys of rows already appended, found by their seqs, as `add_bands`."""
        self._add_keys(self.postings, seqs, posted)

    def _add_keys(self, tables: BandTables, seqs: np.ndarray, keys: Sequence[bytes]) -> None:
        if not len(seqs) or not self.n:
            return
        order = np.argsort(self.seq[: self.n], kind="stable")
        ordered = self.seq[: self.n][order]
        seqs = np.asarray(seqs, dtype=np.uint64)
        at = np.minimum(np.searchsorted(ordered, seqs), self.n - 1)
        known = ordered[at] == seqs
        rows = order[at[known]].astype(np.uint32)
        tables.append(rows, [b for b, k in zip(keys, known.tolist(), strict=True) if k])
        tables.sort_appended()

    def posting_search(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(key, row) of every live row posted under one of these u32 keys (key: its index),
        by key then row."""
        key, rows, _ = self.postings.search_posted(keys)
        keep = self.seg[rows] != DEAD
        return key[keep], rows[keep]

    def band_search(
        self, queries: Sequence[bytes], min_shared: int, limit: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query, row, shared) of the live rows sharing at least `min_shared` of a query's
        band keys (by the tables' upper-bound count, bands.py): for each query, the `limit`
        sharing most, then earliest inserted, in that order."""
        query, rows, shared = self.bands.search(queries)
        keep = (shared >= min_shared) & (self.seg[rows] != DEAD)
        query, rows, shared = query[keep], rows[keep], shared[keep]
        order = first_per_group(limit, (query,), (-shared, self.seq[rows]))
        return query[order], rows[order], shared[order]

    def sort_appended(self) -> None:
        """Sort the rows appended since the last search into a run now, not at that search."""
        self.bands.sort_appended()
        self.postings.sort_appended()
        if not self._unsorted:
            return
        rows = np.concatenate([r for r, _ in self._unsorted])
        fps = np.concatenate([f for _, f in self._unsorted])
        self._unsorted = []
        self._unsorted_rows = 0
        self.runs.append(make_run(self.layout, rows, fps))
        while len(self.runs) >= 2 and self.runs[-2].size <= MERGE_RATIO * self.runs[-1].size:
            newer = self.runs.pop()
            self.runs[-1] = merge(self.layout, self.runs[-1], newer)

    def _reserve(self, needed: int) -> None:
        if needed <= len(self.seg):
            return
        capacity = max(needed, int(len(self.seg) * 1.5), 1024)
        if self.expected_rows > capacity:
            try:
                self._resize(self.expected_rows)
                return
            except MemoryError:  # more room than the OS lends at once: grow as rows come
                self.expected_rows = 0
        self._resize(capacity)

    def _resize(self, capacity: int) -> None:
        # One array at a time: only one array's old and new copies are held at once.
        for name in ("seg", "seq", "fp") if not self.layout.tables else ("seg", "seq"):
            old = getattr(self, name)
            new = np.empty(capacity, dtype=old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

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
        self.bands.compact(keep, new_id)
        self.postings.compact(keep, new_id)
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
                self.runs.append(make_run(self.layout, np.concatenate(rows), np.concatenate(fps)))
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
        arrays.update(self.bands.export())
        arrays.update(self.postings.export())
        return arrays

    @classmethod
    def restore(
        cls, layout: Layout, arrays: dict[str, np.ndarray], expected_rows: int = 1024
    ) -> SearchTables:
        self = cls(layout)
        self.expected_rows = room_for(expected_rows)
        self.n, self.dead = (int(v) for v in arrays["n"])
        self.seg, self.seq = arrays["seg"], arrays["seq"]
        self.fp = arrays["fp"]
        self.bands.restore(arrays)
        self.postings.restore(arrays)
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
        # The row arrays' rows in use. Room never written is not in memory; after a
        # compaction, pages written before stay mapped, up to a third more than this.
        arrays = [self.fp[: self.n], self.seg[: self.n], self.seq[: self.n]]
        for run in self.runs:
            arrays.extend(run.perm)
            arrays.extend(run.offsets)
            arrays.append(run.rows)
            if run.starts is not None:
                arrays.append(run.starts)
        return (
            sum(a.nbytes for a in arrays) + self.bands.memory_bytes() + self.postings.memory_bytes()
        )

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
                    probe_masks(run.bits[t], radius),
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
            keep = first_per_group(per_fingerprint, (owner,), (self.seq[rows],))
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
            chunks = zip(*pairs_within(qp, run.perm[0], self.k), strict=True)
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
        for q, i, d in pairs_within(queries, fps, self.k):
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


def first_per_group(
    limit: int, groups: Sequence[np.ndarray], order_by: Sequence[np.ndarray]
) -> np.ndarray:
    """Indices of the first `limit` entries of each group of equal `groups` keys, grouped in
    key order (the first key sorts first), each group ordered by `order_by` (likewise)."""
    if limit <= 0:
        return np.empty(0, dtype=np.intp)
    order = np.lexsort((*reversed(order_by), *reversed(groups)))
    if len(order) <= limit:
        return order
    starts_group = np.zeros(len(order), dtype=bool)
    starts_group[0] = True
    for key in groups:
        ordered = key[order]
        starts_group[1:] |= ordered[1:] != ordered[:-1]
    group_start = np.flatnonzero(starts_group)
    sizes = np.diff(np.append(group_start, len(order)))
    rank = np.arange(len(order)) - np.repeat(group_start, sizes)
    return order[rank < limit]
