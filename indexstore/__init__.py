"""A time-windowed RocksDB index of 64-bit SimHash fingerprints with exact Hamming search.

It knows fingerprints, event time and RocksDB; nothing of Kafka or of the service, whose
decision each record carries as an opaque payload.

May import: numpy, rocksdict and its own compiled probe kernel; nothing of `consumer`
(scripts/import-layers checks it).
"""

from indexstore.batch import Batch
from indexstore.errors import (
    IndexCorruptError,
    IndexFormatError,
    IndexLockedError,
    IndexStateError,
    IndexStoreError,
    IndexVersionError,
    IndexWriteError,
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
from indexstore.store import IndexStore

__all__ = [
    "ArticleRecord",
    "Batch",
    "IndexCorruptError",
    "IndexFormatError",
    "IndexLockedError",
    "IndexOptions",
    "IndexStateError",
    "IndexStats",
    "IndexStore",
    "IndexStoreError",
    "IndexVersionError",
    "IndexWriteError",
    "Layout",
    "Match",
    "RecordColumns",
    "SearchResult",
    "SegmentStats",
    "choose_layout",
]
