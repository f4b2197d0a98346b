"""The index: RocksDB as the durable truth, numpy search tables as a cache rebuilt at open.

`IndexStore` owns the open database and its state: it opens and loads (indexstore.opening),
writes commits and expires (what each writes to RocksDB: indexstore.writing), and reports
(what RocksDB and the directory tell of it: indexstore.reporting). Its two writers build the
commits: `Batch` (indexstore.batch, handed the narrow `CommittedIndex` of `_BatchAccess`, whose
committed search is indexstore.nearest) and the bulk load (indexstore.bulk). It may import
every other module of indexstore; none of them imports this one.

What is left here is the store's public surface (open, search, put, commit, expire, stats,
close) and the state they share; the jobs behind it live in the modules named above, which
are handed what they need rather than the store's private state.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

import numpy as np
import rocksdict

from indexstore import bulk, opening, reporting, snapshot, writing
from indexstore import encoding as enc
from indexstore.batch import Batch, BatchStart
from indexstore.catalog import Catalog
from indexstore.commit import BandCandidate, Candidate, Commit, Stored
from indexstore.errors import IndexFormatError, IndexStateError, IndexStoreError
from indexstore.frequencies import FrequencyPolicy, FrequencyTable, first_segment
from indexstore.layout import Layout, choose_layout
from indexstore.model import ArticleRecord, IndexOptions, IndexStats, RecordColumns
from indexstore.nearest import band_nearest, nearest, posted_rows
from indexstore.rocksdb_errors import RocksDBErrors
from indexstore.rocksdb_options import rocksdb_options
from indexstore.tables import SearchTables
from indexstore.window import window_start


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class IndexStore:
    """A time-windowed index of 64-bit fingerprints with exact Hamming search within k."""

    # Set by `open` (there is no __init__) and `_load`.
    _path: Path
    _options: IndexOptions
    _clock: Callable[[], int]
    _read_only: bool
    _batch: Batch | None
    _closed: bool
    _errors: RocksDBErrors
    _rocksdb_opts: rocksdict.Options
    _db: rocksdict.Rdict
    _meta: enc.Meta
    _layout: Layout
    _watermark: int | None
    _next_seq: int
    _commits: int
    _positions: dict[str, int]
    _catalog: Catalog
    _tables: SearchTables
    _policy: FrequencyPolicy | None
    _frequencies: FrequencyTable

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
        frequencies: FrequencyPolicy | None = None,
    ) -> IndexStore:
        """Create or reopen the index in `path`.

        `read_only` opens without taking the directory's lock (to inspect a running service's
        index); `clock` returns wall-clock milliseconds and is replaced in tests. An index of
        another format is refused (`IndexVersionError`). `frequencies` says which keys of which
        records `Batch.frequencies` counts (indexstore/frequencies.py); without it, none.
        """
        opening.validate(options)
        self = object.__new__(cls)
        self._path = Path(path)
        self._options = options
        self._clock = clock
        self._read_only = read_only
        self._batch = None
        self._closed = True
        self._policy = None if read_only else frequencies
        self._frequencies = FrequencyTable()
        self._errors = RocksDBErrors(self._path)
        # Shared by every column family: one cache, one memory budget.
        self._rocksdb_opts = rocksdb_options(options.memory_bytes)
        self._db = opening.open_database(self._path, self._rocksdb_opts, read_only)
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

    def _load(self) -> None:
        raw_meta = self._db.get(enc.META_KEY)
        wanted = opening.wanted_meta(self._options)
        if raw_meta is None:
            if self._read_only:
                raise IndexFormatError(f"no index in {self._path}: metadata missing")
            self._db.put(enc.META_KEY, enc.encode_meta(wanted))
            self._meta = wanted
        else:
            self._meta = opening.stored_meta(self._path, raw_meta)
            # A read-only reader just shows what is there, with the k it was built with.
            if not self._read_only:
                opening.check_compatible(self._path, self._meta, wanted)
        self._layout = choose_layout(
            self._meta.max_distance,
            self._options.expected_articles,
            self._options.max_table_bytes,
        )
        self._watermark, self._next_seq, self._commits = enc.decode_state(
            self._db.get(enc.STATE_KEY)
        )
        self._positions = opening.read_positions(self._db)
        # Rows only when no snapshot is valid: beside one they held 24 B a row (2.2 GiB at 100 M).
        found = opening.scan(self._db, self._path, keep_rows=False)
        self._catalog = Catalog(
            self._db,
            self._rocksdb_opts,
            self._errors,
            self._meta,
            found.groups,
            found.segments,
            found.generations,
        )
        self._tables = SearchTables(self._layout, expected_rows=self._options.expected_articles)
        saved = (
            None
            if self._read_only
            else snapshot.load(
                self._path, self._layout, self._tag(), self._options.expected_articles
            )
        )
        counts: FrequencyTable | None = None
        if saved is not None:
            self._tables = saved
        elif not self._read_only:
            rows = opening.scan(self._db, self._path, keep_rows=True).rows
            if rows is not None:
                self._tables.append(rows.fingerprints, rows.segments, rows.seqs)
                self._tables.add_bands(*opening.read_bands(found.generations.values()))
                if self._policy is not None:
                    # One read of the rows' shingles for their posted keys and the counts.
                    seqs, shingles, counts = opening.read_rows_and_frequencies(
                        self._catalog, self._policy, self._meta.segment_ms
                    )
                    self._tables.add_posted(seqs, self._posted(shingles) or [])
        if self._policy is not None:
            # The key frequencies of the committed rows, read from disk at open (~16 µs a
            # row: every record is read, and the shingles of those counted).
            if counts is None:
                counts = opening.read_frequencies(
                    self._catalog, self._policy, self._meta.segment_ms
                )
            self._frequencies = counts
            self._frequencies.advance(self._first_counted_segment(self._watermark))

    def _first_counted_segment(self, watermark: int | None) -> int | None:
        return first_segment(watermark, self._options.retention_ms, self._meta.segment_ms)

    def _tag(self) -> str:
        """What the search tables are a function of: the snapshot is valid while it is equal."""
        stored = self._catalog.segments
        segments = ",".join(f"{sid}:{stored[sid].stored}" for sid in sorted(stored))
        # Saved without a policy, the tables hold no posted keys: not valid for one with it.
        posted = "posted" if self._policy is not None else "unposted"
        return f"{self._layout.describe()}|{self._commits}|{self._next_seq}|{posted}|{segments}"

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
        self._tables = SearchTables(self._layout, expected_rows=self._options.expected_articles)
        self._catalog.clear()
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
        found = self._catalog.read_record(article_id)
        return None if found is None else found[0]

    def positions(self) -> dict[str, int]:
        return dict(self._positions)

    def watermark_ms(self) -> int | None:
        return self._watermark

    def memory_usage(self) -> dict[str, int]:
        """Bytes held in memory now, by part. RocksDB charges its memtables to the block cache,
        so `block_cache` includes `memtables`; both stay within `memory_bytes`."""
        self._check_open()
        families = [self._db, *self._catalog.column_families()]
        with self._errors:
            return {
                **reporting.rocksdb_memory(self._db, families),
                "search_tables": self._tables.memory_bytes(),
                "key_frequencies": self._frequencies.memory_bytes(),
            }

    def disk_usage(self) -> dict[str, int]:
        """SST bytes by part (`reporting.sst_bytes`); memtables and logs not counted."""
        self._check_open()
        with self._errors:
            return reporting.sst_bytes(self._catalog)

    def expiry_due(self) -> bool:
        """Whether a segment has left the window, so `expire()` would drop something. Cheap
        enough to ask after every batch: a replay of history moves the watermark by days per
        batch, and column families left behind make each new one slower to create (RocksDB
        rewrites the options of every family it holds)."""
        segments = self._catalog.segments
        if self._watermark is None or not segments:
            return False
        oldest = min(segments)
        start = window_start(self._watermark, self._options.retention_ms)
        return (oldest + 1) * self._meta.segment_ms <= start

    def stats(self) -> IndexStats:
        self._check_open()
        segments = reporting.segment_stats(self._catalog, self._meta.segment_ms)
        return IndexStats(
            max_distance=self._meta.max_distance,
            layout=self._layout.describe(),
            segment_ms=self._meta.segment_ms,
            retention_ms=self._options.retention_ms,
            watermark_ms=self._watermark,
            articles=sum(s.articles for s in segments),
            segments=tuple(segments),
            disk_bytes=reporting.directory_bytes(self._path),
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
            before_ms = window_start(self._watermark, self._options.retention_ms)
        dropped = writing.drop_segments(
            self._db, self._catalog, self._errors, self._meta, before_ms
        )
        self._tables.drop_segments(dropped)
        self._frequencies.drop_segments(dropped)
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
        start = BatchStart(
            layout=self._layout,
            max_distance=self._meta.max_distance,
            segment_ms=self._meta.segment_ms,
            generation_ms=self._meta.generation_ms,
            retention_ms=self._options.retention_ms,
            watermark=self._watermark,
            next_seq=self._next_seq,
            time_limit=self._clock() + self._options.future_skew_ms,
        )
        self._batch = Batch(_BatchAccess(self), start, watermark_follows_puts)
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
        committed = self._catalog.read_raw(list(dict.fromkeys(columns.article_id)))
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
        commit = planned.commit
        if self._policy is not None and planned.written:
            read = self._catalog.read_shingles
            changes = bulk.frequency_changes(self._policy, columns, committed, commit, read)
            commit = dataclasses.replace(commit, frequency_changes=changes)
        if planned.written or commit.positions:
            self._write(commit)
        return planned.written

    def _write(self, commit: Commit) -> None:
        """One commit: everything in ONE atomic WriteBatch (indexstore.writing), then the caches.

        Order matters: RocksDB first, memory after, so a failed write leaves the caches equal
        to what is on disk. Rows, article records, deletions of replaced entries, positions and
        the watermark are all in the same WriteBatch, so a crash never splits them.
        """
        commit_no = self._commits + 1
        # A position never goes back (Batch.set_position): each key keeps its furthest.
        positions = {k: max(v, self._positions.get(k, v)) for k, v in commit.positions.items()}
        commit = dataclasses.replace(commit, positions=positions)
        writing.write_commit(self._db, self._catalog, self._errors, commit, commit_no)
        # Durable, and the catalog in line: now the rest of the caches.
        if commit.added is not None:
            fps, segs, seqs, bands, shingles, posted = commit.added
            if posted is None:
                posted = self._posted(shingles)
            self._tables.append(fps, segs, seqs, bands, posted)
        self._frequencies.apply(commit.frequency_changes)
        self._frequencies.advance(self._first_counted_segment(commit.watermark))
        self._positions.update(commit.positions)
        self._watermark = commit.watermark
        self._next_seq = commit.next_seq
        self._commits = commit_no

    # -- internals ------------------------------------------------------------------------

    def _posted(self, shingles: Sequence[bytes] | None) -> list[bytes] | None:
        """The posted keys of rows with these shingles (None: none are kept)."""
        if self._policy is None or shingles is None:
            return None
        return [self._policy.posted(s) if s else b"" for s in shingles]

    def _check_open(self) -> None:
        if self._closed:
            raise IndexStateError("the index is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self._read_only:
            raise IndexStateError("the index was opened read-only")


class _BatchAccess:
    """The `CommittedIndex` a store hands its batch: reads, the one write, and the release
    of the store's batch slot; nothing else of the store."""

    __slots__ = ("_store",)

    def __init__(self, store: IndexStore) -> None:
        self._store = store

    def read(self, article_id: str) -> Stored | None:
        return self._store._catalog.read_record(article_id)

    def read_many(self, article_ids: Sequence[str]) -> dict[str, Stored]:
        return self._store._catalog.read_records(article_ids)

    def nearest(self, simhashes: Sequence[int]) -> list[list[Candidate]]:
        return nearest(self._store._tables, self._store._catalog, simhashes)

    def band_nearest(self, queries: Sequence[bytes], min_shared: int) -> list[list[BandCandidate]]:
        return band_nearest(self._store._tables, self._store._catalog, queries, min_shared)

    def posted_rows(self, keys: Sequence[int]) -> dict[int, tuple[list[int], list[int]]]:
        return posted_rows(self._store._tables, keys)

    def row_ids(self, segments: Sequence[int], seqs: Sequence[int]) -> list[str | None]:
        return self._store._catalog.row_ids(segments, seqs)

    def read_shingles(self, segments: Sequence[int], seqs: Sequence[int]) -> list[bytes | None]:
        return self._store._catalog.read_shingles(segments, seqs)

    def frequency_policy(self) -> FrequencyPolicy | None:
        return self._store._policy

    def frequencies(self, keys: np.ndarray, first: int | None) -> np.ndarray:
        return self._store._frequencies.counts(keys, first)

    def counted_between(self, low: int | None, high: int) -> bool:
        return self._store._frequencies.holds_rows(low, high)

    def write(self, commit: Commit) -> None:
        self._store._write(commit)

    def expire(self) -> list[int]:
        return self._store.expire()

    def finished(self, batch: Batch) -> None:
        if self._store._batch is batch:
            self._store._batch = None
