"""In-memory search tables: a cache of the committed rows, rebuilt from RocksDB at open.

Rows (segment, seq) live in growing numpy arrays. Each table is a list of runs of permuted
fingerprints ordered by key, merged LSM-style, so an insert costs an amortized O(log n)
sort work. Each run is bucketed by a prefix of the key (offsets of every bucket), so a probe
is two array reads per run, vectorized over a whole batch and every key within the layout's
probe radius; candidates are read from contiguous ranges, never gathered at random.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from indexstore.layout import BUCKET_US, FINGERPRINT_BITS, PROBE_US, SCAN_US, Layout, bucket_bits

# A new run merges into the previous one while that one is at most this many times larger:
# keeps run sizes geometric, so there are O(log n) runs and each row is re-sorted O(log n) times.
MERGE_RATIO = 2
# Appended rows wait for a search at most up to this many: sorting a run needs ~30 bytes of
# temporary arrays per row, so a restore of hundreds of millions of rows sorts runs of this
# size and merges them, rather than needing gigabytes for one sort at its end.
MAX_UNSORTED_ROWS = 1 << 22
# Queries x rows compared at once by a plain scan; bounds the temporary matrix (8 B each).
SCAN_CHUNK = 1 << 16
# Rows of dropped segments are marked with this segment id and skipped; the tables are
# rebuilt without them once they are this share of all rows.
DEAD = np.iinfo(np.int64).min
COMPACT_SHARE = 0.25

_EMPTY = np.empty(0, dtype=np.int64)
_EMPTY_U64 = np.empty(0, dtype=np.uint64)


@dataclass(slots=True)
class Run:
    """One run: per table, permuted fingerprints ordered by key and the start of every bucket
    (the top `bits` bits of the key) among them; row ids in table 0's order."""

    perm: list[np.ndarray]
    offsets: list[np.ndarray]
    bits: list[int]
    rows: np.ndarray

    @property
    def size(self) -> int:
        return len(self.rows)


@dataclass(frozen=True, slots=True)
class Hits:
    """Rows within distance k of queries: parallel arrays, one entry per (query, row) pair."""

    query: np.ndarray  # int64 index into the queries
    row: np.ndarray  # int64 row id
    distance: np.ndarray  # int64


def scan_break_even(layout: Layout) -> int:
    """Live rows below which comparing a query with every row costs less than the fixed part
    of probing the layout's tables (its probes and bucket lookups, from `layout_cost`'s
    constants). The layout is chosen for the expected window; a young index, a quiet feed or
    a replay of sparse history holds far fewer rows, and at k = 12 the fixed part alone is
    worth a scan of ~18,000 rows."""
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
        perm = []
        for t, table in enumerate(self.layout.tables):
            p = table.permute(fps)
            # Ordering by the key alone is enough for bucket probes (and a radix sort).
            order = _argsort_keys(table.keys(p))
            perm.append(p[order])
            if t == 0:
                rows = rows[order]
        return self._bucketed(perm, rows)

    def _bucketed(self, perm: list[np.ndarray], rows: np.ndarray) -> Run:
        offsets, bits = [], []
        for table, p in zip(self.layout.tables, perm, strict=True):
            b = bucket_bits(table.key_bits, len(p))
            counts = np.bincount(_bucket(p, b).astype(np.intp), minlength=1 << b)
            offsets.append(np.concatenate(([0], np.cumsum(counts))).astype(np.int64))
            bits.append(b)
        return Run(perm, offsets, bits, rows)

    def _merge(self, older: Run, newer: Run) -> Run:
        """Merge two runs table by table, releasing each old table once its successor exists,
        so a merge of the largest runs needs one table's worth of extra memory, not all.

        Both runs are ordered by key, so each newer entry's place is found by a binary search
        in the older run (after its equal keys, as a stable sort would put it): O(n) moves and
        no O(n) index array, unlike sorting the concatenation.
        """
        perm: list[np.ndarray] = []
        rows = older.rows
        for t, table in enumerate(self.layout.tables):
            low_bits = np.uint64((1 << table.key_shift) - 1)
            # The largest value with each newer key: older entries up to it come first.
            place = np.searchsorted(older.perm[t], newer.perm[t] | low_bits, side="right")
            place += np.arange(len(place))
            perm.append(_interleave(older.perm[t], newer.perm[t], place))
            if t == 0:
                rows = _interleave(older.rows, newer.rows, place)
            older.perm[t] = newer.perm[t] = _EMPTY_U64
            older.offsets[t] = newer.offsets[t] = _EMPTY
            del place
        return self._bucketed(perm, rows)

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
                fps.append(first.unpermute(run.perm[0][mask]))
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
        return sum(a.nbytes for a in arrays)

    # -- searching ------------------------------------------------------------------------

    def search(self, queries: np.ndarray) -> Hits:
        """Every (query, live row) with Hamming distance <= k, each pair once."""
        queries = np.asarray(queries, dtype=np.uint64)
        if not self.live or not len(queries):
            return Hits(_EMPTY, _EMPTY, _EMPTY)
        if not self.layout.tables:
            return self._scan(queries)
        if self.n < self.scan_below:
            # Rows appended since the last sort are scanned as they are: sorting them into
            # runs would cost more than the scan saves while the window is this small.
            return self._scan_runs(queries)
        self.sort_appended()
        found_q, found_r, found_d = [], [], []
        first = self.layout.tables[0]
        radius = self.layout.radius
        for t, table in enumerate(self.layout.tables):
            qp = table.permute(queries)
            for run in self.runs:
                # Every bucket within the probe radius of the query's bucket: a key within
                # the radius of the query's key has its bucket within it too.
                masks = _masks(run.bits[t], radius)
                buckets = (_bucket(qp, run.bits[t])[:, None] ^ masks[None, :]).ravel()
                counts, pos = _ranges(run.offsets[t], buckets)
                if not len(pos):
                    continue
                # Candidates outnumber hits by far: spend as few passes over them as we can,
                # and find which probe a hit came from only for the hits.
                cand = run.perm[t][pos]
                d = np.bitwise_count(cand ^ np.repeat(np.repeat(qp, len(masks)), counts))
                close = np.flatnonzero(d <= self.k)
                if not len(close):
                    continue
                probe = np.searchsorted(np.cumsum(counts), close, side="right")
                q, d, fp = _distinct_pairs(probe // len(masks), d[close], cand[close])
                fp0 = first.permute(table.unpermute(fp)) if t else fp
                # Back to row ids through table 0: same bucket, equal fingerprint.
                counts0, pos0 = _ranges(run.offsets[0], _bucket(fp0, run.bits[0]))
                h = np.repeat(np.arange(len(fp0)), counts0)
                same = run.perm[0][pos0] == fp0[h]
                found_q.append(q[h[same]])
                found_r.append(run.rows[pos0[same]].astype(np.int64))
                found_d.append(d[h[same]])
        if not found_q:
            return Hits(_EMPTY, _EMPTY, _EMPTY)
        q = np.concatenate(found_q)
        r = np.concatenate(found_r)
        d = np.concatenate(found_d)
        # A neighbour agreeing on several key sets is found by several tables: count it once.
        pair, first_index = np.unique((q << 32) | r, return_index=True)
        q, r, d = pair >> 32, pair & 0xFFFFFFFF, d[first_index]
        alive = self.seg[r] != DEAD
        return Hits(q[alive], r[alive], d[alive])

    def _scan_runs(self, queries: np.ndarray) -> Hits:
        """Every row compared with every query: table 0's runs (its permutation keeps Hamming
        distances, so no fingerprint is stored twice for this) and the unsorted rows."""
        if len(self._unsorted) > 1:
            # One array per commit would make every search a loop over all of them (a fuzzer
            # committing one message at a time ran out of memory): keep them as one.
            rows = np.concatenate([r for r, _ in self._unsorted])
            fps = np.concatenate([f for _, f in self._unsorted])
            self._unsorted = [(rows, fps)]
        qp = self.layout.tables[0].permute(queries)
        sources = [(qp, run.perm[0], run.rows) for run in self.runs]
        sources += [(queries, fps, rows) for rows, fps in self._unsorted]
        found_q, found_r, found_d = [], [], []
        for probes, keys, rows in sources:
            step = max(1, SCAN_CHUNK // max(len(keys), 1))
            for lo in range(0, len(probes), step):
                d = np.bitwise_count(probes[lo : lo + step, None] ^ keys[None, :])
                q, i = np.nonzero(d <= self.k)
                found_q.append(q + lo)
                found_r.append(rows[i].astype(np.int64))
                found_d.append(d[q, i])
        if not found_q:
            return Hits(_EMPTY, _EMPTY, _EMPTY)
        q = np.concatenate(found_q).astype(np.int64)
        r = np.concatenate(found_r)
        d = np.concatenate(found_d).astype(np.int64)
        # The order of the tables' answer: by query, then row.
        order = np.lexsort((r, q))
        q, r, d = q[order], r[order], d[order]
        alive = self.seg[r] != DEAD
        return Hits(q[alive], r[alive], d[alive])

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
        q = np.concatenate(found_q).astype(np.int64)
        r = np.concatenate(found_r).astype(np.int64)
        d = np.concatenate(found_d).astype(np.int64)
        alive = self.seg[r] != DEAD
        return Hits(q[alive], r[alive], d[alive])


def _distinct_pairs(
    query: np.ndarray, distance: np.ndarray, fingerprint: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each (query, fingerprint) once. A fingerprint stored c times is c candidates, and table
    0 maps each of them back to all c rows: without this, c² pairs (a story reposted verbatim
    10,000 times would cost 10^8 per query); with it, c."""
    if len(query) < 2:
        return query.astype(np.int64), distance.astype(np.int64), fingerprint
    order = np.lexsort((fingerprint, query))
    q, fp = query[order], fingerprint[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (q[1:] != q[:-1]) | (fp[1:] != fp[:-1])
    return q[first].astype(np.int64), distance[order][first].astype(np.int64), fp[first]


def _argsort_keys(keys: np.ndarray) -> np.ndarray:
    """A stable argsort of table keys. numpy sorts 16-bit integers by counting but wider ones
    by merge sort; keys of 17..32 bits (wide layouts, e.g. k = 12) are sorted ~4x faster as
    two stable 16-bit passes, low half first (an LSD radix sort), with the same result."""
    if keys.dtype != np.uint32:
        return np.argsort(keys, kind="stable")
    order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    return order[np.argsort((keys[order] >> 16).astype(np.uint16), kind="stable")]


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
