"""Opening an index directory: what it must be, and what it holds, found without searching.

It refuses a directory that is not an index (or is in use or damaged), derives the metadata
an index of given options has, and scans the column families into the store's catalog:
groups of segments, segments with their blob keys and row counts, article generations, and
the committed rows for the search tables; indexstore.catalog keeps them from then on. It may
import rocksdict, numpy and indexstore.encoding, .errors, .model, .commit, .catalog,
.frequencies and .rocksdb_errors; nothing of the store or its writers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import rocksdict

from indexstore import encoding as enc
from indexstore.catalog import Catalog, Generation, Group, Segment
from indexstore.commit import TableRows
from indexstore.errors import (
    IndexCorruptError,
    IndexFormatError,
    IndexLockedError,
    IndexStoreError,
    IndexVersionError,
)
from indexstore.frequencies import FrequencyPolicy, FrequencyTable
from indexstore.model import IndexOptions
from indexstore.rocksdb_errors import index_error

# Segments share a column family per group: creating one costs ~80 ms (RocksDB rewrites its
# OPTIONS file and syncs the MANIFEST), which made replays of history with 1 h segments spend
# most of their time creating column families. A window holds about this many groups, so
# range-deleted segments wait at most a quarter of the window for their group to be dropped.
GROUPS_PER_WINDOW = 4
# Shingles read at once when counting key frequencies at open: bounds the memory it takes.
_SHINGLES_PER_READ = 10_000


@dataclass(slots=True)
class Found:
    """The column families found at open, and the committed rows (None: not kept)."""

    groups: dict[int, Group]
    segments: dict[int, Segment]
    generations: dict[int, Generation]
    rows: TableRows | None


def validate(options: IndexOptions) -> None:
    if not 0 <= options.max_distance < 64:
        raise IndexStoreError(f"max_distance must be in 0..63, got {options.max_distance}")
    for name in ("segment_ms", "retention_ms", "expected_articles", "memory_bytes"):
        if getattr(options, name) <= 0:
            raise IndexStoreError(f"{name} must be positive, got {getattr(options, name)}")
    if options.future_skew_ms < 0:
        raise IndexStoreError(f"future_skew_ms must be >= 0, got {options.future_skew_ms}")


def open_database(path: Path, opts: rocksdict.Options, read_only: bool) -> rocksdict.Rdict:
    """RocksDB in `path`, every column family opened with `opts`; created when `path` is
    missing or empty (unless `read_only`)."""
    exists = (path / "CURRENT").exists()
    if not exists and any(path.glob("MANIFEST-*")):
        raise IndexCorruptError("its CURRENT file is missing", path)
    if read_only and not exists:
        raise IndexFormatError(f"no index in {path}: the directory has no RocksDB database")
    if not exists and path.exists() and any(path.iterdir()):
        raise IndexFormatError(
            f"{path} is not empty and holds no index; point the index at an empty directory"
        )
    try:
        names = rocksdict.Rdict.list_cf(str(path)) if exists else ["default"]
        families = {name: opts for name in names if name != "default"}
        if not read_only:
            return rocksdict.Rdict(str(path), opts, column_families=families)
        access = rocksdict.AccessType.read_only()
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


def wanted_meta(options: IndexOptions) -> enc.Meta:
    """The metadata of an index created with `options`."""
    # Article generations are whole numbers of segments, so a generation is dropped
    # only after every segment that can point at its records is dropped.
    generation_ms = -(-options.retention_ms // options.segment_ms) * options.segment_ms
    group_segments = max(1, generation_ms // options.segment_ms // GROUPS_PER_WINDOW)
    return enc.Meta(
        options.max_distance,
        options.segment_ms,
        group_segments * options.segment_ms,
        generation_ms,
    )


def stored_meta(path: Path, raw: bytes) -> enc.Meta:
    """The metadata of the index in `path`, refused unless of this version's format."""
    found = enc.meta_format(raw)
    if found != enc.FORMAT_VERSION:
        raise IndexVersionError(found, enc.FORMAT_VERSION, path)
    return enc.decode_meta(raw)


def check_compatible(path: Path, stored: enc.Meta, wanted: enc.Meta) -> None:
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


def read_positions(db: rocksdict.Rdict) -> dict[str, int]:
    """The committed input positions: key -> next offset to read."""
    positions: dict[str, int] = {}
    it = db.iter()
    it.seek(enc.POSITION_PREFIX)
    while it.valid() and it.key().startswith(enc.POSITION_PREFIX):
        positions[enc.position_name(it.key())] = enc.decode_u64(it.value())
        it.next()
    del it
    return positions


def scan(db: rocksdict.Rdict, path: Path, *, keep_rows: bool) -> Found:
    """Every group, segment and generation in `db`; with `keep_rows`, the committed rows too
    (a read-only store cannot search: it only counts them)."""
    found = Found({}, {}, {}, None)
    fps: list[np.ndarray] = []
    segs: list[np.ndarray] = []
    seqs: list[np.ndarray] = []
    for name in rocksdict.Rdict.list_cf(str(path)):
        parsed = enc.parse_cf(name)
        if parsed is None:
            continue
        kind, number = parsed
        cf = db.get_column_family(name)
        handle = db.get_column_family_handle(name)
        if kind == "articles":
            found.generations[number] = Generation(number, cf, handle)
            continue
        group = found.groups[number] = Group(number, cf, handle)
        it = cf.iter()
        it.seek(enc.BLOB_PREFIX)
        while it.valid() and it.key().startswith(enc.BLOB_PREFIX):
            sid = enc.blob_segment(it.key())
            segment = found.segments.get(sid)
            if segment is None:
                segment = found.segments[sid] = Segment(sid, group)
            if it.key() == enc.replaced_key(sid):
                segment.rows -= enc.decode_u64(it.value())
                it.next()
                continue
            f, s = enc.decode_blob(it.value())
            segment.blobs.append(it.key())
            segment.rows += len(f)
            segment.stored += len(f)
            if keep_rows:
                fps.append(f)
                seqs.append(s)
                segs.append(np.full(len(f), sid, dtype=np.int64))
            it.next()
        del it
    if fps:
        found.rows = TableRows(
            np.concatenate(fps), np.concatenate(segs), np.concatenate(seqs), None
        )
    return found


def read_bands(generations: Iterable[Generation]) -> tuple[np.ndarray, list[bytes]]:
    """(seqs, band keys) of every searchable article record that has bands, for the band
    tables: bands stay in the record, which is read here whole, so this costs a pass over
    every record (done only when no snapshot of the tables is valid)."""
    seqs: list[int] = []
    bands: list[bytes] = []
    for generation in generations:
        it = generation.cf.iter()
        it.seek_to_first()
        while it.valid():
            raw = it.value()
            keys = enc.record_bands(raw)
            _, seq = enc.record_row(raw)
            if keys and seq is not None:
                seqs.append(seq)
                bands.append(keys)
            it.next()
        del it
    return np.array(seqs, dtype=np.uint64), bands


def read_rows_and_frequencies(
    catalog: Catalog, policy: FrequencyPolicy, segment_ms: int
) -> tuple[np.ndarray, list[bytes], FrequencyTable]:
    """(seqs, shingles) of every searchable record whose row is still stored, for the posted
    keys of the search tables, and the key frequencies of those `policy` counts: one pass over
    every record and one read of every row's shingles (done only when no snapshot of the
    tables is valid)."""
    segments, seqs, counted = _live_rows(catalog, segment_ms, policy.counts)
    shingles = [s or b"" for s in _read_shingles(catalog, segments, seqs)]
    table = _counted(
        policy,
        [s for s, counts in zip(segments, counted, strict=True) if counts],
        [s for s, counts in zip(shingles, counted, strict=True) if counts],
    )
    return np.array(seqs, dtype=np.uint64), shingles, table


def read_frequencies(catalog: Catalog, policy: FrequencyPolicy, segment_ms: int) -> FrequencyTable:
    """The key frequencies of every searchable record that `policy` counts, read from disk:
    a pass over every record, and the shingles of those counted."""
    segments, seqs, counted = _live_rows(catalog, segment_ms, policy.counts)
    segments = [s for s, counts in zip(segments, counted, strict=True) if counts]
    seqs = [s for s, counts in zip(seqs, counted, strict=True) if counts]
    return _counted(policy, segments, _read_shingles(catalog, segments, seqs))


def _counted(
    policy: FrequencyPolicy, segments: list[int], shingles: Sequence[bytes | None]
) -> FrequencyTable:
    """The key frequencies of these counted rows (their segments and shingles)."""
    table = FrequencyTable()
    for segment, text in zip(segments, shingles, strict=True):
        if text:
            table.add(segment, policy.keys(text))
    return table


def _live_rows(
    catalog: Catalog, segment_ms: int, counts: Callable[[bytes], bool]
) -> tuple[list[int], list[int], list[bool]]:
    """(segments, seqs) of the searchable records whose row is still stored (its segment has
    not expired), and whether `counts` counts each one's payload."""
    segments: list[int] = []
    seqs: list[int] = []
    counted: list[bool] = []
    for generation in catalog.generations.values():
        it = generation.cf.iter()
        it.seek_to_first()
        while it.valid():
            record, seq = enc.decode_record("", it.value())
            segment = record.event_time_ms // segment_ms
            if seq is not None and segment in catalog.segments:
                segments.append(segment)
                seqs.append(seq)
                counted.append(counts(record.payload))
            it.next()
        del it
    return segments, seqs, counted


def _read_shingles(catalog: Catalog, segments: list[int], seqs: list[int]) -> list[bytes | None]:
    """The shingles of these rows, read in parts of `_SHINGLES_PER_READ`."""
    found: list[bytes | None] = []
    for start in range(0, len(seqs), _SHINGLES_PER_READ):
        part = slice(start, start + _SHINGLES_PER_READ)
        found += catalog.read_shingles(segments[part], seqs[part])
    return found
