"""The runs of the search tables (tables.py): each a set of sorted arrays, bucketed for the
probe, built from rows (`make_run`) or from two runs (`merge`, which empties both as it goes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from indexstore.layout import FINGERPRINT_BITS, Layout, bucket_bits

# A new run merges into the previous one while that one is at most this many times larger:
# keeps run sizes geometric, so there are O(log n) runs and each row is re-sorted O(log n) times.
# The SimHash tables (tables.py) and the band tables (bands.py) both merge by it.
MERGE_RATIO = 2

_EMPTY = np.empty(0, dtype=np.int64)
_EMPTY_U64 = np.empty(0, dtype=np.uint64)


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


def make_run(layout: Layout, rows: np.ndarray, fps: np.ndarray) -> Run:
    """A run of these rows (row ids and their fingerprints, in any order)."""
    first = layout.tables[0]
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
    perm = [distinct] + [np.sort(table.permute(fps)) for table in layout.tables[1:]]
    return _bucketed(layout, perm, rows, starts)


def _bucketed(
    layout: Layout, perm: list[np.ndarray], rows: np.ndarray, starts: np.ndarray | None
) -> Run:
    offsets, bits = [], []
    for table, p in zip(layout.tables, perm, strict=True):
        b = bucket_bits(table.key_bits, len(p))
        offsets.append(bucket_offsets(p, b))
        bits.append(b)
    return Run(perm, offsets, bits, rows, starts)


def bucket_offsets(permuted: np.ndarray, bits: int) -> np.ndarray:
    """Where each bucket of `bits` top bits starts in the sorted `permuted`, and its end.

    Found by binary search for each bucket's first value, not by counting every entry's
    bucket: that took two arrays of 8 bytes an entry while the run was built, a table's
    worth at a time (1.6 GB at 100 M fingerprints, the highest the memory went)."""
    firsts = (
        np.arange(1 << bits, dtype=np.uint64) << np.uint64(FINGERPRINT_BITS - bits)
        if bits
        else np.zeros(1, dtype=np.uint64)
    )
    return np.append(np.searchsorted(permuted, firsts), len(permuted)).astype(np.int64)


def merge(layout: Layout, older: Run, newer: Run) -> Run:
    """Merge two runs table by table, releasing each old table once its successor exists,
    so a merge of the largest runs needs one table's worth of extra memory, not all.

    Both runs are in ascending order, so each newer entry's place is found by a binary
    search in the older run: O(n) moves and no O(n) index array, unlike sorting the
    concatenation. A fingerprint in both runs keeps the older entry, which takes the
    newer one's rows after its own.
    """
    perm: list[np.ndarray] = []
    rows, starts = older.rows, older.starts
    for t in range(len(layout.tables)):
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
        perm.append(interleave(old, new, place))
        older.perm[t] = newer.perm[t] = _EMPTY_U64
        older.offsets[t] = newer.offsets[t] = _EMPTY
        del old, new, place, shared
    return _bucketed(layout, perm, rows, starts)


def _merge_rows(
    older: Run, newer: Run, place: np.ndarray, shared: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None]:
    """Table 0's rows and entry starts after a merge, each merged entry's rows the older
    run's first. Newer entry e sorts after `place[e]` older entries, one more if it is
    `shared` with one. When no fingerprint has two rows this costs what a merge of rows
    alone does; otherwise a few more arrays the size of the runs."""
    if older.starts is None and newer.starts is None and not shared.any():
        at = place + np.arange(len(place))
        return interleave(older.rows, newer.rows, at), None
    # Older entries at or before each newer one, then the older rows they hold: where each
    # newer row goes, after as many older rows as that and the newer rows before it.
    right = place + shared
    at = older.first_rows(right)
    counts = newer.row_counts()
    if counts is not None:
        at = np.repeat(at, counts)
    at += np.arange(len(newer.rows))
    rows = interleave(older.rows, newer.rows, at)
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
    starts = interleave(old_starts, fresh_starts, fresh_at)
    return rows, np.append(starts, len(rows)).astype(np.uint32)


def interleave(older: np.ndarray, newer: np.ndarray, place: np.ndarray) -> np.ndarray:
    """`older` and `newer` in one array, newer[i] at place[i] (ascending), older in the gaps."""
    out = np.empty(len(older) + len(newer), dtype=older.dtype)
    gaps = np.ones(len(out), dtype=bool)
    gaps[place] = False
    out[place] = newer
    out[gaps] = older
    return out
