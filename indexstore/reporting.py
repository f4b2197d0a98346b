"""What an open index reports of its RocksDB side: segments with their sizes, memory, disk.

`IndexStore.stats` and `IndexStore.memory_usage` put these together with what the store holds
itself (options, watermark, the search tables, the key frequencies). Everything here is read
from RocksDB's properties, the catalog or the directory, and nothing is changed. It may import
rocksdict and indexstore.catalog and .model.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import rocksdict

from indexstore.catalog import Catalog
from indexstore.model import SegmentStats


def segment_stats(catalog: Catalog, segment_ms: int) -> list[SegmentStats]:
    """Each stored segment, oldest first, with its live rows and its share of its group's bytes."""
    segments = []
    group_bytes: dict[int, int] = {}
    group_rows: dict[int, int] = defaultdict(int)
    for gid, group in catalog.groups.items():
        size = group.cf.property_int_value("rocksdb.total-sst-files-size") or 0
        size += group.cf.property_int_value("rocksdb.cur-size-all-mem-tables") or 0
        group_bytes[gid] = size
    for seg in catalog.segments.values():
        group_rows[seg.group.id] += seg.rows
    for sid in sorted(catalog.segments):
        seg = catalog.segments[sid]
        # Segments share their group's files: each is shown its share by rows.
        size = group_bytes[seg.group.id] * seg.rows // max(group_rows[seg.group.id], 1)
        start = sid * segment_ms
        segments.append(SegmentStats(sid, start, start + segment_ms, seg.rows, size))
    return segments


def rocksdb_memory(db: rocksdict.Rdict, families: Sequence[rocksdict.Rdict]) -> dict[str, int]:
    """Bytes RocksDB holds in memory, by part: the block cache of `db`, and the memtables and
    table readers of `families` (the default one included)."""

    def total(name: str) -> int:
        return sum(f.property_int_value(name) or 0 for f in families)

    return {
        "block_cache": db.property_int_value("rocksdb.block-cache-usage") or 0,
        "memtables": total("rocksdb.cur-size-all-mem-tables"),
        "table_readers": total("rocksdb.estimate-table-readers-mem"),
    }


def sst_bytes(catalog: Catalog) -> dict[str, int]:
    """Bytes of SST files on disk, by part: `rows` the groups' (fingerprint blobs, row ids,
    shingles: what the search tables are built from), `records` the article generations'.
    Memtables, write-ahead logs and the default family are not counted."""

    def total(families: Sequence[rocksdict.Rdict]) -> int:
        return sum(f.property_int_value("rocksdb.total-sst-files-size") or 0 for f in families)

    return {
        "rows": total([g.cf for g in catalog.groups.values()]),
        "records": total([g.cf for g in catalog.generations.values()]),
    }


def directory_bytes(path: Path) -> int:
    """The bytes of the files in `path` (RocksDB's, and the saved search tables)."""
    total = 0
    for entry in os.scandir(path):
        try:
            if entry.is_file():
                total += entry.stat().st_size
        except FileNotFoundError:
            pass  # RocksDB deleted it (an obsolete SST or log) since the listing
    return total
