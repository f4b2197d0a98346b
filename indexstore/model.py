"""The values the index takes and returns: options, article records, matches and statistics.

Plain frozen dataclasses with no behaviour, so callers can build and compare them freely.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields

from indexstore.value import value_type

# Search-table memory per live article the layout may take by default: beyond it, millions of
# articles are out of reach (`layout.choose_layout`).
DEFAULT_MAX_TABLE_BYTES = 256


@dataclass(frozen=True, slots=True)
class IndexOptions:
    """How an index is opened. `max_distance` and `segment_ms` are fixed when it is created."""

    max_distance: int = 3
    """k: a search returns every live article within Hamming distance <= k (0..64)."""
    segment_ms: int = 3_600_000
    """Width of a segment in event time; a segment is the unit of expiry."""
    retention_ms: int = 72 * 3_600_000
    """The window: articles older than watermark - retention are never returned."""
    future_skew_ms: int = 300_000
    """Event times beyond wall-clock now + skew are clamped to now + skew."""
    expected_articles: int = 1_000_000
    """Live articles expected in the window; drives the choice of the search layout."""
    max_table_bytes: int = DEFAULT_MAX_TABLE_BYTES
    """The most search-table memory per live article the layout may take (`choose_layout`)."""
    memory_bytes: int = 256 * 2**20
    """RocksDB block cache and write buffers together (the search tables come on top)."""


@value_type
class ArticleRecord:
    """One row of the article table (article id -> record): what the index searches, verifies
    and expires by, and one opaque payload of the caller's (the service keeps its decision
    there, in its own format, so the index's layout does not follow the decision message)."""

    article_id: str
    simhash: int
    content_hash: bytes
    event_time_ms: int
    payload: bytes = b""
    """Opaque to the index, handed back with every read and match."""
    sketch: bytes = b""
    """Opaque verification data of the caller (e.g. a MinHash), at most 65,535 bytes; handed
    back with every match so a candidate can be verified without another read."""
    bands: bytes = b""
    """Band keys, at most 16 (64 bytes): key i is the little-endian u32 at 4 * i, and two records
    share band i when their key i is equal. A search given bands finds records sharing some."""
    shingles: bytes = b""
    """Opaque bytes of the caller's, stored apart from the record and read only on request
    (`Batch.shingles`): records read by `lookup`, `get` or a search carry b"" here."""


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """Many article records as parallel columns, in the order they are to be written: record
    j is `ArticleRecord(*(column[j] for column in the fields))`. Bulk writers (a restore) build
    these without one object per record; `IndexStore.bulk_put` writes them."""

    article_id: Sequence[str]
    simhash: Sequence[int]
    content_hash: Sequence[bytes]
    event_time_ms: Sequence[int]
    payload: Sequence[bytes]
    sketch: Sequence[bytes]
    bands: Sequence[bytes]
    shingles: Sequence[bytes]

    @classmethod
    def of(cls, records: Iterable[ArticleRecord]) -> RecordColumns:
        rows = [tuple(getattr(r, f.name) for f in fields(ArticleRecord)) for r in records]
        if not rows:
            return cls(*([] for _ in fields(cls)))
        return cls(*(list(column) for column in zip(*rows, strict=True)))

    def __len__(self) -> int:
        return len(self.article_id)


@value_type
class Match:
    """An indexed article within distance k of a query, or sharing band keys with it (a band
    match, whose distance may exceed k)."""

    article_id: str
    distance: int
    exact: bool
    event_time_ms: int
    payload: bytes = b""
    """The matched article's `ArticleRecord.payload`, from the record the search already read."""
    sketch: bytes = b""
    """The matched article's `ArticleRecord.sketch`, likewise."""
    shared_bands: int = 0
    """How many band keys (posted keys, for a posted match) the matched article shares with
    the query (band and posted matches only)."""


@value_type
class SearchResult:
    """The answer to one search: matches best first, and what happened to the query's time."""

    matches: tuple[Match, ...]
    event_time_ms: int
    late: bool
    clamped: bool
    band_matches: tuple[Match, ...] = ()
    """Live articles sharing band keys with the query that are not among `matches`, most
    shared first (see `Batch.search`); empty unless the search was given bands."""
    posted_matches: tuple[Match, ...] = ()
    """Live articles posted under keys of the query's that are in neither of the above, most
    shared first (see `Batch.search`); empty unless the search was given posted keys."""


@dataclass(frozen=True, slots=True)
class SegmentStats:
    """One segment: its id (event_time // segment_ms), time range, live articles and bytes."""

    segment_id: int
    start_ms: int
    end_ms: int
    articles: int
    bytes: int


@dataclass(frozen=True, slots=True)
class IndexStats:
    """What `newsdedup index stats` shows and the service exports as metrics."""

    max_distance: int
    layout: str
    segment_ms: int
    retention_ms: int
    watermark_ms: int | None
    articles: int
    segments: tuple[SegmentStats, ...]
    disk_bytes: int
    table_memory_bytes: int  # the in-memory search tables (0 when opened read-only)
