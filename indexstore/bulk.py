"""The bulk load: many records turned into one `Commit` in one pass over numpy arrays.

`IndexStore.bulk_put` reads the committed records of the ids and writes what `plan` returns;
this module only computes, it never touches RocksDB itself: the one further read the key
frequencies need (the shingles of the rows a load replaces) it is handed a reader for. It may
import indexstore.encoding, .commit, .frequencies, .model, .errors, .rocksdb_errors and .window,
nothing of the store or of `Batch`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from indexstore import encoding as enc
from indexstore.commit import (
    Commit,
    DeadRecord,
    DeadRow,
    RecordWrites,
    SegmentRows,
    StoredBytes,
    TableRows,
)
from indexstore.errors import IndexStoreError
from indexstore.frequencies import FrequencyPolicy
from indexstore.model import RecordColumns
from indexstore.rocksdb_errors import RocksDBErrors
from indexstore.window import are_late, window_start

# Reads the stored shingles of committed rows (segment, seq): None where a row has none.
ShingleReader = Callable[[Sequence[int], Sequence[int]], list[bytes | None]]

# The columns of a `RecordColumns` in `ArticleRecord` field order, as `enc.encode_records`
# takes them; their element types differ by column.
Columns = tuple[Sequence[Any], ...]


@dataclass(frozen=True, slots=True)
class IndexState:
    """What the bulk load needs of the committed index: its geometry and its state."""

    segment_ms: int
    generation_ms: int
    retention_ms: int
    watermark: int | None
    next_seq: int
    time_limit: int  # event times beyond this (now + skew) are clamped to it


@dataclass(frozen=True, slots=True)
class BulkWrite:
    """The commit of a bulk load, and how many of its records it writes (repeats included)."""

    commit: Commit
    written: int


def validate_columns(columns: RecordColumns) -> None:
    """`Batch.put`'s checks, over whole columns at C speed."""
    n = len(columns.article_id)
    for field in dataclasses.fields(columns):
        size = len(getattr(columns, field.name))
        if size != n:
            raise IndexStoreError(f"column {field.name} has {size} entries, article_id has {n}")
    if not n:
        return
    bad = set(map(len, columns.content_hash)) - {16}
    if bad:
        raise IndexStoreError(f"content_hash must be 16 bytes, got {min(bad)}")
    low, high = min(columns.simhash), max(columns.simhash)
    if low < 0 or high >= 2**64:
        raise IndexStoreError(
            f"simhash must be an unsigned 64-bit int, got {low if low < 0 else high}"
        )
    longest = max(map(len, columns.sketch))
    if longest > enc.MAX_SKETCH_BYTES:
        raise IndexStoreError(f"sketch must be at most {enc.MAX_SKETCH_BYTES} bytes, got {longest}")
    for size in set(map(len, columns.bands)):
        enc.check_bands(size)


def plan(
    columns: RecordColumns,
    committed: Mapping[str, StoredBytes],
    state: IndexState,
    positions: Mapping[str, int],
    *,
    skip_unchanged: bool,
    errors: RocksDBErrors,
) -> BulkWrite:
    """The commit that writes `columns` as `IndexStore.bulk_put` documents; `committed` holds
    the current records of the ids, `errors` translates a committed record that does not
    decode."""
    cols: Columns = tuple(getattr(columns, f.name) for f in dataclasses.fields(columns))
    ids = list(columns.article_id)
    # Ids in order of first appearance; each with the index of its last record.
    last = dict(zip(ids, range(len(ids)), strict=True))
    times = np.minimum(np.array(columns.event_time_ms, dtype=np.int64), state.time_limit)
    if skip_unchanged:
        keep = _changed(cols, times, committed)
        if len(keep) < len(ids):
            cols = tuple([column[i] for i in keep] for column in cols)
            ids = [ids[i] for i in keep]
            times = times[keep]
            last = dict(zip(ids, range(len(ids)), strict=True))
    n = len(ids)
    keys = [a.encode() for a in ids]
    if not n:
        nothing = Commit(
            {}, None, [], [], RecordWrites([], [], []), positions, state.watermark, state.next_seq
        )
        return BulkWrite(nothing, 0)
    late, gens = _placed(times, state)
    searchable = ~late
    seqs = state.next_seq + np.cumsum(searchable, dtype=np.int64) - 1
    final = np.fromiter(last.values(), dtype=np.int64, count=len(last))
    written = np.zeros(n, dtype=bool)
    written[final] = True
    new_rows = np.flatnonzero(written & searchable)
    rows, added = _rows(cols, keys, new_rows, times, seqs, state.segment_ms)
    dead_rows, dead_records = _replaced(committed, last, state.segment_ms, errors)
    picked = final.tolist()
    final_seqs = [
        None if came_late else seq
        for came_late, seq in zip(late[final].tolist(), seqs[final].tolist(), strict=True)
    ]
    # Usually no id repeats within a chunk: every record is written, nothing to pick.
    repeats = len(picked) < n
    values = enc.encode_records(
        tuple([column[i] for i in picked] for column in cols) if repeats else cols,
        times[final].tolist(),
        final_seqs,
    )
    records = RecordWrites([keys[i] for i in picked], values, gens[final].tolist())
    watermark = int(times.max())
    if state.watermark is not None:
        watermark = max(watermark, state.watermark)
    commit = Commit(
        rows,
        added,
        dead_rows,
        dead_records,
        records,
        positions,
        watermark,
        state.next_seq + int(searchable.sum()),
    )
    return BulkWrite(commit, n)


def _placed(times: np.ndarray, state: IndexState) -> tuple[np.ndarray, np.ndarray]:
    """Where each record of these (clamped) event times goes: whether it is late (older than
    the window when its turn comes: kept, not searchable), and its article generation."""
    n = len(times)
    # The watermark each record meets is the greatest time before it: a late record is
    # older than that minus the window, so it never moves the watermark either.
    before = np.empty(n, dtype=np.int64)
    before[1:] = np.maximum.accumulate(times[:-1])
    known = np.ones(n, dtype=bool)
    if state.watermark is None:
        known[0] = False
        before[0] = times[0]
    else:
        before[0] = state.watermark
        np.maximum(before, state.watermark, out=before)
    start = window_start(before, state.retention_ms)
    late = known & are_late(times, start)
    gens = np.where(known, np.maximum(times, start), times) // state.generation_ms
    return late, gens


def _rows(
    cols: Columns,
    keys: Sequence[bytes],
    new_rows: np.ndarray,
    times: np.ndarray,
    seqs: np.ndarray,
    segment_ms: int,
) -> tuple[dict[int, SegmentRows], TableRows]:
    """The rows of the records at `new_rows` (written and searchable), by segment and for the
    search tables."""
    fps = np.array(cols[1], dtype=np.uint64)
    row_segs = times[new_rows] // segment_ms
    row_seqs = seqs[new_rows].astype(np.uint64)
    order = np.argsort(row_segs, kind="stable")
    bounds = np.flatnonzero(np.diff(row_segs[order])) + 1
    rows = {}
    bands, shingles = cols[6], cols[7]
    for part in np.split(order, bounds) if len(order) else []:
        at = new_rows[part].tolist()
        rows[int(row_segs[part[0]])] = SegmentRows(
            fps[at], row_seqs[part], [keys[i] for i in at], [shingles[i] for i in at]
        )
    new = new_rows.tolist()
    added = TableRows(
        fps[new_rows], row_segs, row_seqs, [bands[i] for i in new], [shingles[i] for i in new]
    )
    return rows, added


def _replaced(
    committed: Mapping[str, StoredBytes],
    written: Container[str],
    segment_ms: int,
    errors: RocksDBErrors,
) -> tuple[list[DeadRow], list[DeadRecord]]:
    """The committed rows and records that the records of the `written` ids replace."""
    dead_rows = []
    dead_records = []
    for article_id, stored in committed.items():
        if article_id not in written:
            continue
        with errors:
            event_time, seq = enc.record_row(stored.value)
        if seq is not None:
            dead_rows.append(DeadRow(event_time // segment_ms, seq))
        dead_records.append(DeadRecord(stored.generation, article_id.encode()))
    return dead_rows, dead_records


def frequency_changes(
    policy: FrequencyPolicy,
    columns: RecordColumns,
    committed: Mapping[str, StoredBytes],
    commit: Commit,
    read_shingles: ShingleReader,
) -> list[tuple[int, np.ndarray, int]]:
    """The key counts a bulk commit of `columns` changes: its new counted rows come, the
    counted rows it replaces go (their shingles read now, before the commit deletes them)."""
    payload = dict(zip(columns.article_id, columns.payload, strict=True))  # the last wins
    changes = []
    for segment, rows in commit.rows.items():
        for row_id, shingles in zip(rows.article_ids, rows.shingles, strict=True):
            if shingles and policy.counts(payload[row_id.decode()]):
                changes.append((segment, policy.keys(shingles), 1))
    replaced = {dead.seq: dead.segment for dead in commit.dead_rows}
    gone: list[tuple[int, int]] = []
    for article_id, stored in committed.items():
        record, seq = enc.decode_record(article_id, stored.value)
        if seq in replaced and policy.counts(record.payload):
            gone.append((replaced[seq], seq))
    if gone:
        segments, seqs = [s for s, _ in gone], [q for _, q in gone]
        stored_shingles = read_shingles(segments, seqs)
        for segment, old in zip(segments, stored_shingles, strict=True):
            if old:
                changes.append((segment, policy.keys(old), -1))
    return changes


def _changed(cols: Columns, times: np.ndarray, committed: Mapping[str, StoredBytes]) -> list[int]:
    """Indices of the records that differ from their id's current record when their turn
    comes: the committed one, or the last record before them that was kept. Shingles are
    not compared (reading them would cost a read per record): they follow from the text,
    as its content hash, which is compared, does."""
    n = len(cols[0])
    # Compared as given, but a kept record becomes current as written (time clamped).
    given = enc.encode_records(cols, cols[3], [None] * n)
    current = {a: enc.record_identity(stored.value) for a, stored in committed.items()}
    keep = []
    for i, (article_id, value, event_time, written_time) in enumerate(
        zip(cols[0], given, cols[3], times.tolist(), strict=True)
    ):
        identity = enc.record_identity(value)
        if current.get(article_id) != identity:
            keep.append(i)
            if written_time != event_time:
                row = tuple([column[i]] for column in cols)
                identity = enc.record_identity(enc.encode_records(row, [written_time], [None])[0])
            current[article_id] = identity
    return keep
