"""The index: RocksDB as the durable truth, numpy search tables as a cache rebuilt at open.

`IndexStore` opens, inspects and expires; `Batch` is the single write path: every change of
a processed batch goes into one RocksDB WriteBatch in `Batch.commit`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

import numpy as np
import rocksdict

from indexstore import bulk, snapshot
from indexstore import encoding as enc
from indexstore.commit import (
    Commit,
    DeadRecord,
    DeadRow,
    RecordWrite,
    SegmentRows,
    Stored,
    StoredBytes,
    TableRows,
)
from indexstore.errors import (
    IndexCorruptError,
    IndexFormatError,
    IndexLockedError,
    IndexStateError,
    IndexStoreError,
)
from indexstore.layout import Layout, choose_layout
from indexstore.model import (
    ArticleRecord,
    IndexOptions,
    IndexStats,
    Match,
    RecordColumns,
    SearchResult,
    SegmentStats,
)
from indexstore.rocksdb_errors import RocksDBErrors, index_error
from indexstore.rocksdb_options import rocksdb_options
from indexstore.tables import Hits, SearchTables

# A segment's blobs (one per commit that touched it) are merged into one when there are more
# than this many, so reopen reads a few blobs per segment, not one per commit.
MAX_BLOBS_PER_SEGMENT = 32
# Segments share a column family per group: creating one costs ~80 ms (RocksDB rewrites its
# OPTIONS file and syncs the MANIFEST), which made replays of history with 1 h segments spend
# most of their time creating column families. A window holds about this many groups, so
# range-deleted segments wait at most a quarter of the window for their group to be dropped.
GROUPS_PER_WINDOW = 4
# A search considers at most this many committed entries per query: the closest, earliest
# first. Without a bound, a window holding tens of thousands of near-identical short texts
# (stock quotes, one-line questions) made every query fetch all of them: a `check` of the
# 77,300 AFQMC questions at k = 12 grew to 22 GB before the kernel killed it. Callers that
# want a decision use a handful of matches.
MAX_HITS_PER_QUERY = 256


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class _Group:
    """The column family of a group of consecutive segments."""

    __slots__ = ("cf", "handle", "id")

    def __init__(self, group_id: int, cf: rocksdict.Rdict, handle: object) -> None:
        self.id = group_id
        self.cf = cf
        self.handle = handle


class _Generation(NamedTuple):
    """The column family of an article generation."""

    id: int
    cf: rocksdict.Rdict
    handle: object


class _Segment:
    """A segment's keys in its group and what we know of it without reading it."""

    __slots__ = ("blobs", "group", "id", "rows", "stored")

    def __init__(self, segment_id: int, group: _Group) -> None:
        self.id = segment_id
        self.group = group
        self.blobs: list[bytes] = []  # blob keys, oldest first
        self.rows = 0  # live rows (replaced rows are subtracted)
        self.stored = 0  # rows in its blobs (replaced rows included), which the tables hold


class IndexStore:
    """A time-windowed index of 64-bit fingerprints with exact Hamming search within k."""

    def __init__(self) -> None:
        raise TypeError("use IndexStore.open(path, options)")

    # -- lifecycle ------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        options: IndexOptions = IndexOptions(),  # noqa: B008 - frozen, never mutated
        *,
        read_only: bool = False,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> IndexStore:
        """Create or reopen the index in `path`.

        `read_only` opens without taking the directory's lock (to inspect a running service's
        index); `clock` returns wall-clock milliseconds and is replaced in tests.
        """
        _validate(options)
        self = object.__new__(cls)
        self._path = Path(path)
        self._options = options
        self._clock = clock
        self._read_only = read_only
        self._batch: Batch | None = None
        self._closed = True
        self._errors = RocksDBErrors(self._path)
        self._db = self._open_db(self._path, options, read_only)
        try:
            with self._errors:
                self._load()
        except BaseException:
            self._db.close()
            raise
        self._closed = False
        return self

    @classmethod
    def stored_options(cls, path: str | os.PathLike[str], **overrides: int) -> IndexOptions:
        """The options an existing index was created with (k, segment width), for tools."""
        with cls.open(path, IndexOptions(), read_only=True) as store:
            meta = store._meta
        return IndexOptions(max_distance=meta.max_distance, segment_ms=meta.segment_ms, **overrides)

    def _open_db(self, path: Path, options: IndexOptions, read_only: bool) -> rocksdict.Rdict:
        exists = (path / "CURRENT").exists()
        if not exists and any(path.glob("MANIFEST-*")):
            raise IndexCorruptError("its CURRENT file is missing", path)
        if read_only and not exists:
            raise IndexFormatError(f"no index in {path}: the directory has no RocksDB database")
        if not exists and path.exists() and any(path.iterdir()):
            raise IndexFormatError(
                f"{path} is not empty and holds no index; point the index at an empty directory"
            )
        opts = rocksdb_options(options.memory_bytes)
        self._rocksdb_opts = opts  # shared by every column family: one cache, one budget
        try:
            names = rocksdict.Rdict.list_cf(str(path)) if exists else ["default"]
            families = {name: opts for name in names if name != "default"}
            access = rocksdict.AccessType.read_only() if read_only else None
            if access is None:
                return rocksdict.Rdict(str(path), opts, column_families=families)
            return rocksdict.Rdict(str(path), opts, column_families=families, access_type=access)
        except Exception as e:
            # "Corruption: block checksum mismatch" mentions a lock too.
            if "lock" in str(e).lower() and "Corruption" not in str(e):
                raise IndexLockedError(
                    f"the index in {path} is in use by another process (RocksDB LOCK is held); "
                    "stop that process or use another state directory"
                ) from e
            error = index_error(path, e)
            if error is None:
                raise IndexStoreError(f"cannot open the index in {path}: {e}") from e
            raise error from e

    def _load(self) -> None:
        options = self._options
        raw_meta = self._db.get(enc.META_KEY)
        # Article generations are whole numbers of segments, so a generation is dropped
        # only after every segment that can point at its records is dropped.
        generation_ms = -(-options.retention_ms // options.segment_ms) * options.segment_ms
        group_segments = max(1, generation_ms // options.segment_ms // GROUPS_PER_WINDOW)
        wanted = enc.Meta(
            options.max_distance,
            options.segment_ms,
            group_segments * options.segment_ms,
            generation_ms,
        )
        if raw_meta is None:
            if self._read_only:
                raise IndexFormatError(f"no index in {self._path}: metadata missing")
            self._db.put(enc.META_KEY, enc.encode_meta(wanted))
            self._meta = wanted
        else:
            self._meta = enc.decode_meta(raw_meta)
            # A read-only reader just shows what is there, with the k it was built with.
            if not self._read_only:
                _check_compatible(self._path, self._meta, wanted)
        self._layout = choose_layout(self._meta.max_distance, options.expected_articles)
        self._watermark, self._next_seq, self._commits = enc.decode_state(
            self._db.get(enc.STATE_KEY)
        )
        self._positions: dict[str, int] = {}
        it = self._db.iter()
        it.seek(enc.POSITION_PREFIX)
        while it.valid() and it.key().startswith(enc.POSITION_PREFIX):
            self._positions[enc.position_name(it.key())] = enc.decode_u64(it.value())
            it.next()
        del it
        self._segments: dict[int, _Segment] = {}
        self._groups: dict[int, _Group] = {}
        self._generations: dict[int, _Generation] = {}
        self._tables = SearchTables(self._layout)
        fps, segs, seqs = [], [], []
        for name in rocksdict.Rdict.list_cf(str(self._path)):
            parsed = enc.parse_cf(name)
            if parsed is None:
                continue
            kind, number = parsed
            cf = self._db.get_column_family(name)
            handle = self._db.get_column_family_handle(name)
            if kind == "articles":
                self._generations[number] = _Generation(number, cf, handle)
                continue
            group = self._groups[number] = _Group(number, cf, handle)
            it = cf.iter()
            it.seek(enc.BLOB_PREFIX)
            while it.valid() and it.key().startswith(enc.BLOB_PREFIX):
                sid = enc.blob_segment(it.key())
                segment = self._segments.get(sid)
                if segment is None:
                    segment = self._segments[sid] = _Segment(sid, group)
                if it.key() == enc.replaced_key(sid):
                    segment.rows -= enc.decode_u64(it.value())
                    it.next()
                    continue
                f, s = enc.decode_blob(it.value())
                segment.blobs.append(it.key())
                segment.rows += len(f)
                segment.stored += len(f)
                # A read-only store cannot search (no batches): it only counts rows.
                if not self._read_only:
                    fps.append(f)
                    seqs.append(s)
                    segs.append(np.full(len(f), sid, dtype=np.int64))
                it.next()
            del it
        self._gen_order = self._generation_order()
        saved = None if self._read_only else snapshot.load(self._path, self._layout, self._tag())
        if saved is not None:
            self._tables = saved
        elif fps:
            self._tables.append(np.concatenate(fps), np.concatenate(segs), np.concatenate(seqs))

    def _tag(self) -> str:
        """What the search tables are a function of: the snapshot is valid while it is equal."""
        segments = ",".join(f"{sid}:{self._segments[sid].stored}" for sid in sorted(self._segments))
        return f"{self._layout.describe()}|{self._commits}|{self._next_seq}|{segments}"

    def close(self) -> None:
        if self._closed:
            return
        if self._batch is not None:
            self._batch.abort()
        if not self._read_only:
            try:
                if self._errors.failed:
                    # After a failed write only RocksDB is trusted: the next open rebuilds.
                    raise OSError("a write failed")
                snapshot.save(self._tables, self._path, self._tag())
            except OSError:
                # Only a faster reopen is lost: without a snapshot the tables are rebuilt.
                snapshot.discard(self._path)
        self._closed = True
        self._tables = SearchTables(self._layout)
        self._segments.clear()
        self._groups.clear()
        self._generations.clear()
        self._gen_order = []
        try:
            with self._errors:
                self._db.close()
        except IndexStoreError:
            # RocksDB repeats at close the error that stopped an earlier call, which was
            # raised then; only a new one is news.
            if not self._errors.failed:
                raise

    def __enter__(self) -> IndexStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- reading --------------------------------------------------------------------------

    @property
    def options(self) -> IndexOptions:
        return self._options

    @property
    def layout(self) -> Layout:
        return self._layout

    def get(self, article_id: str) -> ArticleRecord | None:
        self._check_open()
        found = self._read_record(article_id)
        return None if found is None else found[0]

    def positions(self) -> dict[str, int]:
        return dict(self._positions)

    def watermark_ms(self) -> int | None:
        return self._watermark

    def memory_usage(self) -> dict[str, int]:
        """Bytes held in memory now, by part. RocksDB charges its memtables to the block cache,
        so `block_cache` includes `memtables`; both stay within `memory_bytes`."""
        self._check_open()
        families = [self._db, *(g.cf for g in self._groups.values())]
        families += [generation.cf for generation in self._generations.values()]

        def total(name: str) -> int:
            return sum(f.property_int_value(name) or 0 for f in families)

        with self._errors:
            return {
                "block_cache": self._db.property_int_value("rocksdb.block-cache-usage") or 0,
                "memtables": total("rocksdb.cur-size-all-mem-tables"),
                "table_readers": total("rocksdb.estimate-table-readers-mem"),
                "search_tables": self._tables.memory_bytes(),
            }

    def expiry_due(self) -> bool:
        """Whether a segment has left the window, so `expire()` would drop something. Cheap
        enough to ask after every batch: a replay of history moves the watermark by days per
        batch, and column families left behind make each new one slower to create (RocksDB
        rewrites the options of every family it holds)."""
        if self._watermark is None or not self._segments:
            return False
        oldest = min(self._segments)
        return (oldest + 1) * self._meta.segment_ms <= self._watermark - self._options.retention_ms

    def stats(self) -> IndexStats:
        self._check_open()
        segments = []
        group_bytes, group_rows = {}, defaultdict(int)
        for gid, group in self._groups.items():
            size = group.cf.property_int_value("rocksdb.total-sst-files-size") or 0
            size += group.cf.property_int_value("rocksdb.cur-size-all-mem-tables") or 0
            group_bytes[gid] = size
        for seg in self._segments.values():
            group_rows[seg.group.id] += seg.rows
        for sid in sorted(self._segments):
            seg = self._segments[sid]
            # Segments share their group's files: each is shown its share by rows.
            size = group_bytes[seg.group.id] * seg.rows // max(group_rows[seg.group.id], 1)
            start = sid * self._meta.segment_ms
            segments.append(SegmentStats(sid, start, start + self._meta.segment_ms, seg.rows, size))
        return IndexStats(
            max_distance=self._meta.max_distance,
            layout=self._layout.describe(),
            segment_ms=self._meta.segment_ms,
            retention_ms=self._options.retention_ms,
            watermark_ms=self._watermark,
            articles=sum(s.articles for s in segments),
            segments=tuple(segments),
            disk_bytes=_directory_bytes(self._path),
            table_memory_bytes=self._tables.memory_bytes(),
        )

    # -- expiry ---------------------------------------------------------------------------

    def expire(self, before_ms: int | None = None) -> list[int]:
        """Drop every segment that ends at or before `before_ms` (default: the window start).

        A segment is two range deletions in its group's column family, and a group whose
        segments have all ended is dropped whole, so the RocksDB part takes the same time
        whatever a segment holds; the search tables are then filtered in one pass.
        """
        self._check_writable()
        if self._batch is not None:
            raise IndexStateError("expire() while a batch is open: commit or abort it first")
        if before_ms is None:
            if self._watermark is None:
                return []
            before_ms = self._watermark - self._options.retention_ms
        seg_ms, group_ms, gen_ms = (
            self._meta.segment_ms,
            self._meta.group_ms,
            self._meta.generation_ms,
        )
        dropped = sorted(s for s in self._segments if (s + 1) * seg_ms <= before_ms)
        gone = [g for g in self._groups if (g + 1) * group_ms <= before_ms]
        wb = rocksdict.WriteBatch(raw_mode=True)
        for sid in dropped:
            seg = self._segments[sid]
            if seg.group.id not in gone:
                for begin, end in enc.segment_ranges(sid):
                    wb.delete_range(begin, end, seg.group.handle)
        with self._errors:
            if not wb.is_empty():
                self._db.write(wb)
            # Segments leave the caches only once their range deletions are durable.
            for sid in dropped:
                del self._segments[sid]
            for gid in gone:
                group = self._groups.pop(gid)
                # Our references keep the column family alive; release them before dropping.
                del group.cf, group.handle
                self._db.drop_column_family(enc.group_cf(gid))
            for gen in [g for g in self._generations if (g + 1) * gen_ms <= before_ms]:
                del self._generations[gen]
                self._gen_order = self._generation_order()
                self._db.drop_column_family(enc.articles_cf(gen))
        self._tables.drop_segments(dropped)
        return dropped

    def prepare_search(self) -> None:
        """Sort the rows written since the last search into the search tables now, so the
        next search does not pay for them: bulk writes leave that to the first search."""
        self._check_open()
        self._tables.sort_appended()

    # -- writing --------------------------------------------------------------------------

    def begin(self, *, watermark_follows_puts: bool = True) -> Batch:
        """Open the one write batch. By default each put moves the watermark to its event time
        when later; a caller that orders its input by event time itself passes False and moves
        the watermark with `Batch.advance_watermark`, so that no single record can."""
        self._check_writable()
        if self._batch is not None:
            raise IndexStateError("a batch is already open: commit or abort it first")
        self._batch = Batch(self, watermark_follows_puts)
        return self._batch

    def bulk_put(
        self,
        columns: RecordColumns,
        positions: Mapping[str, int] | None = None,
        *,
        skip_unchanged: bool = False,
    ) -> int:
        """Write many records as if each were `put` in order in one batch, then committed
        with `positions`, in one pass over numpy arrays and ONE WriteBatch; returns how many
        records were written.

        The same rules as `put`: a later record of an id replaces the earlier (and the
        committed one), times beyond now + skew are clamped, a record older than the window
        (whose watermark moves with the records before it) is kept but not searchable.
        `skip_unchanged` leaves out every record equal to its id's current record, as a
        caller comparing `Batch.lookup(id) != record` before each `put` would. The caller
        chooses the chunk size: one call is one WriteBatch, held in memory until written.
        """
        self._check_writable()
        if self._batch is not None:
            raise IndexStateError("bulk_put() while a batch is open: commit or abort it first")
        bulk.validate_columns(columns)
        committed = self._read_raw(list(dict.fromkeys(columns.article_id)))
        state = bulk.IndexState(
            segment_ms=self._meta.segment_ms,
            generation_ms=self._meta.generation_ms,
            retention_ms=self._options.retention_ms,
            watermark=self._watermark,
            next_seq=self._next_seq,
            time_limit=self._clock() + self._options.future_skew_ms,
        )
        planned = bulk.plan(
            columns,
            committed,
            state,
            positions or {},
            skip_unchanged=skip_unchanged,
            errors=self._errors,
        )
        if planned.written or planned.commit.positions:
            self._write(planned.commit)
        return planned.written

    def _write(self, commit: Commit) -> None:
        """One commit: everything in ONE atomic WriteBatch, then the caches.

        Order matters: RocksDB first, memory after, so a failed write leaves the caches equal
        to what is on disk. Rows, article records, deletions of replaced entries, positions and
        the watermark are all in the same WriteBatch, so a crash never splits them.
        """
        wb = rocksdict.WriteBatch(raw_mode=True)
        commit_no = self._commits + 1
        merged: set[int] = set()
        for sid, new in commit.rows.items():
            fps, seqs = new.fingerprints, new.seqs
            seg = self._segment_for_write(sid)
            handle = seg.group.handle
            for key, article_id in zip(enc.row_keys(sid, seqs), new.article_ids, strict=True):
                wb.put(key, article_id, handle)
            if len(seg.blobs) >= MAX_BLOBS_PER_SEGMENT:
                # Fold the segment's older blobs into this one: O(segment), read back from disk.
                with self._errors:
                    old = [enc.decode_blob(raw) for raw in seg.group.cf.get(seg.blobs)]
                fps = np.concatenate([f for f, _ in old] + [fps])
                seqs = np.concatenate([q for _, q in old] + [seqs])
                for key in seg.blobs:
                    wb.delete(key, handle)
                merged.add(sid)
            wb.put(enc.blob_key(sid, commit_no), enc.encode_blob(fps, seqs), handle)
        replaced: dict[int, int] = defaultdict(int)
        for dead in commit.dead_rows:
            seg = self._segments.get(dead.segment)
            if seg is not None:
                wb.delete(enc.row_key(dead.segment, dead.seq), seg.group.handle)
                replaced[dead.segment] += 1
        # Blobs keep replaced rows (the tables skip them), so a reopened store counts its live
        # rows as its blobs' entries less this persisted count.
        for sid, n in replaced.items():
            seg = self._segments[sid]
            total = seg.stored - seg.rows + n
            wb.put(enc.replaced_key(sid), enc.encode_u64(total), seg.group.handle)
        for dead_record in commit.dead_records:
            generation = self._generations.get(dead_record.generation)
            if generation is not None:
                wb.delete(dead_record.key, generation.handle)
        handles: dict[int, object] = {}
        for record in commit.records:
            handle = handles.get(record.generation)
            if handle is None:
                handle = handles[record.generation] = self._generation_for_write(record.generation)
            wb.put(record.key, record.value, handle)
        for name, offset in commit.positions.items():
            wb.put(enc.position_key(name), enc.encode_u64(offset))
        wb.put(enc.STATE_KEY, enc.encode_state(commit.watermark, commit.next_seq, commit_no))
        with self._errors:
            self._db.write(wb)
        # Durable: now bring the caches in line.
        for dead in commit.dead_rows:
            seg = self._segments.get(dead.segment)
            if seg is not None:
                seg.rows -= 1
        for sid, new in commit.rows.items():
            seg = self._segments[sid]
            if sid in merged:
                seg.blobs = []
            seg.blobs.append(enc.blob_key(sid, commit_no))
            seg.rows += len(new.fingerprints)
            seg.stored += len(new.fingerprints)
        if commit.added is not None:
            self._tables.append(*commit.added)
        self._positions.update(commit.positions)
        self._watermark = commit.watermark
        self._next_seq = commit.next_seq
        self._commits = commit_no

    # -- internals shared with Batch --------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise IndexStateError("the index is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self._read_only:
            raise IndexStateError("the index was opened read-only")

    def _segment_of(self, event_time_ms: int) -> int:
        return event_time_ms // self._meta.segment_ms

    def _generation_of(self, storage_time_ms: int) -> int:
        return storage_time_ms // self._meta.generation_ms

    def _generation_order(self) -> list[_Generation]:
        """Live generations, newest first (an article's latest record is usually there)."""
        return [self._generations[g] for g in sorted(self._generations, reverse=True)]

    def _read_record(self, article_id: str) -> Stored | None:
        """The current record of `article_id` in the committed article table."""
        key = article_id.encode()
        with self._errors:
            for generation in self._gen_order:
                raw = generation.cf.get(key)
                if raw is not None:
                    record, seq = enc.decode_record(article_id, raw)
                    return Stored(record, seq, generation.id)
        return None

    def _read_records(self, article_ids: Sequence[str]) -> dict[str, Stored]:
        """Batched `_read_record`: one multi-get per live generation."""
        found: dict[str, Stored] = {}
        raws = self._read_raw(article_ids)
        with self._errors:
            for article_id, stored in raws.items():
                record, seq = enc.decode_record(article_id, stored.value)
                found[article_id] = Stored(record, seq, stored.generation)
        return found

    def _read_raw(self, article_ids: Sequence[str]) -> dict[str, StoredBytes]:
        """The encoded current records of these ids: one multi-get per live generation."""
        found: dict[str, StoredBytes] = {}
        pending = list(dict.fromkeys(article_ids))
        with self._errors:
            for generation in self._gen_order:
                if not pending:
                    break
                raws = generation.cf.get([a.encode() for a in pending])
                missing = []
                for article_id, raw in zip(pending, raws, strict=True):
                    if raw is None:
                        missing.append(article_id)
                    else:
                        found[article_id] = StoredBytes(raw, generation.id)
                pending = missing
        return found

    def _resolve_rows(self, rows: np.ndarray) -> list[str | None]:
        """Article ids of committed rows, by batched gets of their row keys."""
        ids: list[str | None] = [None] * len(rows)
        by_group: dict[int, list[int]] = defaultdict(list)
        keys: list[bytes] = []
        segs = self._tables.seg[rows].tolist()
        seqs = self._tables.seq[rows].tolist()
        for i, (sid, seq) in enumerate(zip(segs, seqs, strict=True)):
            seg = self._segments.get(sid)
            keys.append(enc.row_key(sid, seq))
            if seg is not None:
                by_group[seg.group.id].append(i)
        with self._errors:
            for gid, positions in by_group.items():
                raws = self._groups[gid].cf.get([keys[i] for i in positions])
                for i, raw in zip(positions, raws, strict=True):
                    if raw is not None:
                        ids[i] = raw.decode()
        return ids

    def _segment_for_write(self, sid: int) -> _Segment:
        seg = self._segments.get(sid)
        if seg is None:
            gid = sid * self._meta.segment_ms // self._meta.group_ms
            group = self._groups.get(gid)
            if group is None:
                name = enc.group_cf(gid)
                # Creating a column family is durable on its own; after a crash an empty
                # group may remain, which holds nothing and is expired like any other.
                with self._errors:
                    cf = self._db.create_column_family(name, self._rocksdb_opts)
                    handle = self._db.get_column_family_handle(name)
                group = self._groups[gid] = _Group(gid, cf, handle)
            seg = self._segments[sid] = _Segment(sid, group)
        return seg

    def _generation_for_write(self, gen: int) -> object:
        if gen not in self._generations:
            name = enc.articles_cf(gen)
            with self._errors:
                cf = self._db.create_column_family(name, self._rocksdb_opts)
                handle = self._db.get_column_family_handle(name)
            self._generations[gen] = _Generation(gen, cf, handle)
            self._gen_order = self._generation_order()
        return self._generations[gen].handle


def _directory_bytes(path: Path) -> int:
    total = 0
    for entry in os.scandir(path):
        try:
            if entry.is_file():
                total += entry.stat().st_size
        except FileNotFoundError:
            pass  # RocksDB deleted it (an obsolete SST or log) since the listing
    return total


def _validate(options: IndexOptions) -> None:
    if not 0 <= options.max_distance < 64:
        raise IndexStoreError(f"max_distance must be in 0..63, got {options.max_distance}")
    for name in ("segment_ms", "retention_ms", "expected_articles", "memory_bytes"):
        if getattr(options, name) <= 0:
            raise IndexStoreError(f"{name} must be positive, got {getattr(options, name)}")
    if options.future_skew_ms < 0:
        raise IndexStoreError(f"future_skew_ms must be >= 0, got {options.future_skew_ms}")


def _check_compatible(path: Path, stored: enc.Meta, wanted: enc.Meta) -> None:
    if stored.max_distance != wanted.max_distance:
        raise IndexFormatError(
            f"the index in {path} was built with max_distance={stored.max_distance}, not "
            f"{wanted.max_distance}; set max_distance back or rebuild the index in a new directory"
        )
    if stored.segment_ms != wanted.segment_ms:
        raise IndexFormatError(
            f"the index in {path} was built with segments of {stored.segment_ms} ms, not "
            f"{wanted.segment_ms} ms; set the segment width back or use a new directory"
        )


class Batch:
    """The changes of one processed batch, visible to its own later searches at once.

    Nothing reaches RocksDB before `commit`, which writes them all in one WriteBatch.
    """

    def __init__(self, store: IndexStore, watermark_follows_puts: bool = True) -> None:
        self._store = store
        self._watermark_follows_puts = watermark_follows_puts
        self._k = store._meta.max_distance
        self._open = True
        self._watermark = store._watermark
        self._next_seq = store._next_seq
        # Current records of ids touched or read in this batch: (record, seq, generation).
        self._pending: dict[str, tuple[ArticleRecord, int | None, int]] = {}
        self._committed: dict[str, tuple[ArticleRecord, int | None, int] | None] = {}
        # Old entries replaced in this batch, deleted at commit: (segment, seq) and (gen, id).
        self._dead_rows: list[tuple[int, int]] = []
        self._dead_records: list[tuple[int, str]] = []
        # Clamping uses one "now" per batch, so a batch's answers do not drift with its length.
        self._time_limit = store._clock() + store._options.future_skew_ms
        # Rows added in this batch, in insertion order, and their fingerprints.
        self._rows: list[tuple[int, str, int]] = []  # (seq, article_id, segment)
        self._row_fp: list[int] = []
        self._rows_by_fp: dict[int, list[int]] = defaultdict(list)
        self._positions: dict[str, int] = {}
        # Prefetched committed neighbours: simhash -> [(seq, article_id, distance)].
        self._hits: dict[int, list[tuple[int, str, int]]] = {}
        # Prefetched probes -> the probes within k of them, so a search finds this batch's
        # own rows by dict lookups instead of a scan; rows of other fingerprints are scanned.
        self._neighbours: dict[int, list[int]] = {}
        self._unprobed: list[int] = []
        # The probes, searchable among themselves (row i is _probes[i]): a prefetch searches
        # only its new probes, so a batch costs time linear in its length, not quadratic.
        self._probes: list[int] = []
        self._among = SearchTables(store._layout)

    # -- reads ----------------------------------------------------------------------------

    def lookup(self, article_id: str) -> ArticleRecord | None:
        found = self._current(article_id)
        return None if found is None else found[0]

    def prefetch_records(self, article_ids: Sequence[str]) -> None:
        """Read the committed records of these ids with one multi-get per generation, so the
        batch's later `lookup()` and `put()` calls do not each go to RocksDB. Optional."""
        self._check()
        wanted = [a for a in dict.fromkeys(article_ids) if a not in self._committed]
        if wanted:
            found = self._store._read_records(wanted)
            for article_id in wanted:
                self._committed[article_id] = found.get(article_id)

    def prefetch(self, probes: Sequence[tuple[int, bytes, int]]) -> None:
        """Search the committed tables for all probes at once and fetch what the hits point at."""
        self._check()
        wanted = list(dict.fromkeys(p[0] for p in probes if p[0] not in self._hits))
        if not wanted:
            return
        self._collect(wanted)
        fresh = [fp for fp in wanted if fp not in self._neighbours]
        if not fresh:
            return
        first = len(self._probes)
        self._probes += fresh
        fps = np.array(fresh, dtype=np.uint64)
        self._among.append(
            fps, np.zeros(len(fresh), dtype=np.int64), np.arange(first, len(self._probes))
        )
        for fp in fresh:
            self._neighbours[fp] = []
        hits = self._among.search(fps)
        for q, r in zip(hits.query.tolist(), hits.row.tolist(), strict=True):
            probe, near = fresh[q], self._probes[r]
            self._neighbours[probe].append(near)
            if r < first:
                # An earlier probe, whose list was made before this one existed.
                self._neighbours[near].append(probe)
        self._unprobed = [i for i in self._unprobed if self._row_fp[i] not in self._neighbours]

    def search(
        self,
        simhash: int,
        content_hash: bytes,
        event_time_ms: int,
        *,
        exclude_id: str | None = None,
        limit: int = 1,
    ) -> SearchResult:
        self._check()
        clamped = event_time_ms > self._time_limit
        if clamped:
            event_time_ms = self._time_limit
        start = self._window_start()
        late = start is not None and event_time_ms < start
        if simhash not in self._hits:
            self._collect([simhash])
        candidates = list(self._hits[simhash])
        if self._rows:
            rows, row_fp = self._rows, self._row_fp
            neighbours = self._neighbours.get(simhash)
            if neighbours is None:
                close = np.flatnonzero(
                    np.bitwise_count(np.array(row_fp, dtype=np.uint64) ^ np.uint64(simhash))
                    <= self._k
                ).tolist()
            else:
                close = [i for fp in neighbours for i in self._rows_by_fp.get(fp, ())]
                close.extend(
                    i for i in self._unprobed if (row_fp[i] ^ simhash).bit_count() <= self._k
                )
            for i in close:
                seq, article_id, _ = rows[i]
                candidates.append((seq, article_id, (row_fp[i] ^ simhash).bit_count()))
        ranked = []
        for seq, article_id, distance in candidates:
            if article_id == exclude_id:
                continue
            current = self._current(article_id)
            # A row is live only while its article's current record still points at it.
            if current is None or current[1] != seq:
                continue
            record = current[0]
            if start is not None and record.event_time_ms < start:
                continue
            exact = record.content_hash == content_hash
            ranked.append(
                (
                    (distance, not exact, record.event_time_ms, seq),
                    Match(
                        article_id,
                        distance,
                        exact,
                        record.event_time_ms,
                        record.cluster_id,
                        record.sketch,
                    ),
                )
            )
        ranked.sort(key=lambda item: item[0])
        return SearchResult(
            matches=tuple(m for _, m in ranked[: max(limit, 0)]),
            event_time_ms=event_time_ms,
            late=late,
            clamped=clamped,
        )

    # -- writes ---------------------------------------------------------------------------

    def put(self, record: ArticleRecord) -> None:
        """Insert or replace; a record older than the window is kept but not searchable."""
        self._check()
        if len(record.content_hash) != 16:
            raise IndexStoreError(f"content_hash must be 16 bytes, got {len(record.content_hash)}")
        if not 0 <= record.simhash < 2**64:
            raise IndexStoreError(f"simhash must be an unsigned 64-bit int, got {record.simhash}")
        if len(record.sketch) > enc.MAX_SKETCH_BYTES:
            raise IndexStoreError(
                f"sketch must be at most {enc.MAX_SKETCH_BYTES} bytes, got {len(record.sketch)}"
            )
        store = self._store
        event_time_ms = record.event_time_ms
        if event_time_ms > self._time_limit:
            event_time_ms = self._time_limit
            record = dataclasses.replace(record, event_time_ms=event_time_ms)
        if record.article_id not in self._pending:
            self._forget_committed(record.article_id)
        start = self._window_start()
        late = start is not None and event_time_ms < start
        storage_time = event_time_ms if start is None else max(event_time_ms, start)
        gen = store._generation_of(storage_time)
        seq = None
        if not late:
            seq = self._next_seq
            self._next_seq += 1
            n = len(self._rows)
            self._row_fp.append(record.simhash)
            self._rows_by_fp[record.simhash].append(n)
            if record.simhash not in self._neighbours:
                self._unprobed.append(n)
            self._rows.append((seq, record.article_id, store._segment_of(event_time_ms)))
            if self._watermark_follows_puts:
                self.advance_watermark(event_time_ms)
        self._pending[record.article_id] = (record, seq, gen)

    def advance_watermark(self, time_ms: int) -> None:
        """Move the watermark to `time_ms` when that is later (never past the clamp limit)."""
        self._check()
        time_ms = min(time_ms, self._time_limit)
        if self._watermark is None or time_ms > self._watermark:
            self._watermark = time_ms

    def set_position(self, key: str, next_offset: int) -> None:
        self._check()
        self._positions[key] = next_offset

    def commit(self, expire: bool = False) -> None:
        """Write everything of this batch in ONE atomic WriteBatch, then update the caches
        (`IndexStore._write` says in what order and why).

        With `expire`, the same as `commit()` then `expire()`, except that what that expiry
        would drop at once is never written. A replay of history moves the watermark by
        months per batch: written, every group of segments it passed would cost a column
        family created and dropped again.
        """
        self._check()
        store = self._store
        seg_ms, gen_ms = store._meta.segment_ms, store._meta.generation_ms
        cut = None
        if expire and self._watermark is not None:
            cut = self._watermark - store._options.retention_ms
        by_segment: dict[int, list[int]] = defaultdict(list)
        for i, (seq, article_id, sid) in enumerate(self._rows):
            # A row replaced later in this same batch is never written.
            if self._pending[article_id][1] == seq and (cut is None or (sid + 1) * seg_ms > cut):
                by_segment[sid].append(i)
        all_fp = np.array(self._row_fp, dtype=np.uint64)
        rows = {
            sid: SegmentRows(
                all_fp[idx],
                np.array([self._rows[i][0] for i in idx], dtype=np.uint64),
                [self._rows[i][1].encode() for i in idx],
            )
            for sid, idx in by_segment.items()
        }
        idx = sorted(i for ids in by_segment.values() for i in ids)
        added = TableRows(
            all_fp[idx],
            np.array([self._rows[i][2] for i in idx], dtype=np.int64),
            np.array([self._rows[i][0] for i in idx], dtype=np.uint64),
        )
        records = [
            RecordWrite(article_id.encode(), enc.encode_record(record, seq), gen)
            for article_id, (record, seq, gen) in self._pending.items()
            if cut is None or (gen + 1) * gen_ms > cut
        ]
        dead_rows = [DeadRow(sid, seq) for sid, seq in self._dead_rows]
        dead_records = [DeadRecord(gen, a.encode()) for gen, a in self._dead_records]
        try:
            store._write(
                Commit(
                    rows,
                    added,
                    dead_rows,
                    dead_records,
                    records,
                    self._positions,
                    self._watermark,
                    self._next_seq,
                )
            )
        finally:
            self._close()
        if expire:
            store.expire()

    def abort(self) -> None:
        if self._open:
            self._close()

    def __enter__(self) -> Batch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None and self._open:
            self.commit()
        else:
            self.abort()

    # -- internals ------------------------------------------------------------------------

    def _check(self) -> None:
        # Closing the store aborts its open batch, so this one flag covers both.
        if not self._open:
            raise IndexStateError("this batch is finished (committed or aborted), or closed")

    def _close(self) -> None:
        self._open = False
        if self._store._batch is self:
            self._store._batch = None

    def _window_start(self) -> int | None:
        if self._watermark is None:
            return None
        return self._watermark - self._store._options.retention_ms

    def _current(self, article_id: str) -> tuple[ArticleRecord, int | None, int] | None:
        if article_id in self._pending:
            return self._pending[article_id]
        if article_id not in self._committed:
            self._committed[article_id] = self._store._read_record(article_id)
        return self._committed[article_id]

    def _forget_committed(self, article_id: str) -> None:
        """Schedule the deletion of the committed row and record this put replaces."""
        committed = self._current(article_id)
        if committed is None:
            return
        record, seq, gen = committed
        if seq is not None:
            self._dead_rows.append((self._store._segment_of(record.event_time_ms), seq))
        self._dead_records.append((gen, article_id))

    def _collect(self, simhashes: list[int]) -> None:
        """Committed neighbours of `simhashes`, with their article ids and records fetched."""
        store = self._store
        queries = np.array(simhashes, dtype=np.uint64)
        tables = store._tables
        near = tables.search(queries, per_fingerprint=MAX_HITS_PER_QUERY)
        hits = _closest(near, tables.seq, MAX_HITS_PER_QUERY)
        ids = store._resolve_rows(hits.row) if len(hits.row) else []
        unknown = [a for a in ids if a is not None and a not in self._committed]
        if unknown:
            found = store._read_records(unknown)
            for article_id in unknown:
                self._committed[article_id] = found.get(article_id)
        for simhash in simhashes:
            self._hits[simhash] = []
        seqs = store._tables.seq[hits.row].tolist()
        for q, article_id, seq, d in zip(
            hits.query.tolist(), ids, seqs, hits.distance.tolist(), strict=True
        ):
            if article_id is not None:
                self._hits[simhashes[q]].append((seq, article_id, d))


def _closest(hits: Hits, seq: np.ndarray, limit: int) -> Hits:
    """Of each query's hits, the `limit` closest (ties: smallest sequence number, the earliest
    inserted), so one query's cost is bounded whatever the window holds."""
    if len(hits.query) <= limit:
        return hits
    order = np.lexsort((seq[hits.row], hits.distance, hits.query))
    by_query = hits.query[order]
    rank = np.arange(len(order)) - np.searchsorted(by_query, by_query)
    keep = np.sort(order[rank < limit])
    return Hits(hits.query[keep], hits.row[keep], hits.distance[keep])
