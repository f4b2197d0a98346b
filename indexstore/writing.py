"""What a commit and an expiry write to RocksDB, and the catalog brought in line after.

`IndexStore` decides when to write and to expire and owns the state around them (the search
tables, the key frequencies, the watermark); the two jobs that change the database are here.
Both follow one rule: RocksDB first, in ONE WriteBatch, the catalog's caches only once that
is durable, so a failed write leaves them equal to what is on disk. Rows, article records,
deletions of replaced entries, positions and the watermark of one commit are all in the same
WriteBatch, so a crash never splits them. It may import numpy, rocksdict and
indexstore.encoding, .catalog, .commit, .errors and .rocksdb_errors.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

import numpy as np
import rocksdict

from indexstore import encoding as enc
from indexstore.catalog import Catalog, Segment, multi_get
from indexstore.commit import Commit, SegmentRows
from indexstore.errors import IndexCorruptError
from indexstore.rocksdb_errors import RocksDBErrors

# A segment's blobs (one per commit that touched it) are merged into one when there are more
# than this many, so reopen reads a few blobs per segment, not one per commit.
MAX_BLOBS_PER_SEGMENT = 32


def write_commit(
    db: rocksdict.Rdict,
    catalog: Catalog,
    errors: RocksDBErrors,
    commit: Commit,
    commit_no: int,
) -> None:
    """Write `commit` as commit number `commit_no` in one WriteBatch, then bring the catalog's
    segments in line (the store does the rest of its caches after)."""
    wb = rocksdict.WriteBatch(raw_mode=True)
    merged = _write_rows(wb, catalog, errors, commit.rows, commit_no)
    replaced: dict[int, int] = defaultdict(int)
    for dead in commit.dead_rows:
        live = catalog.segments.get(dead.segment)
        if live is not None:
            wb.delete(enc.row_key(dead.segment, dead.seq), live.group.handle)
            wb.delete(enc.shingles_key(dead.segment, dead.seq), live.group.handle)
            replaced[dead.segment] += 1
    # Blobs keep replaced rows (the tables skip them), so a reopened store counts its live
    # rows as its blobs' entries less this persisted count.
    for sid, n in replaced.items():
        seg = catalog.segments[sid]
        total = seg.stored - seg.rows + n
        wb.put(enc.replaced_key(sid), enc.encode_u64(total), seg.group.handle)
    for dead_record in commit.dead_records:
        generation = catalog.generations.get(dead_record.generation)
        if generation is not None:
            wb.delete(dead_record.key, generation.handle)
    families: dict[int, rocksdict.ColumnFamily] = {}
    records = commit.records
    for key, value, gen in zip(records.keys, records.values, records.generations, strict=True):
        family = families.get(gen)
        if family is None:
            family = families[gen] = catalog.generation_for_write(gen).handle
        wb.put(key, value, family)
    for name, offset in commit.positions.items():
        wb.put(enc.position_key(name), enc.encode_u64(offset))
    wb.put(enc.STATE_KEY, enc.encode_state(commit.watermark, commit.next_seq, commit_no))
    with errors:
        db.write(wb)
    # Durable: now bring the catalog in line.
    for dead in commit.dead_rows:
        live = catalog.segments.get(dead.segment)
        if live is not None:
            live.rows -= 1
    for sid, new in commit.rows.items():
        seg = catalog.segments[sid]
        if sid in merged:
            seg.blobs = []
        seg.blobs.append(enc.blob_key(sid, commit_no))
        seg.rows += len(new.fingerprints)
        seg.stored += len(new.fingerprints)


def _write_rows(
    wb: rocksdict.WriteBatch,
    catalog: Catalog,
    errors: RocksDBErrors,
    rows: Mapping[int, SegmentRows],
    commit_no: int,
) -> set[int]:
    """Put a commit's new rows (row keys, shingles, a blob per segment) in `wb`; the
    segments whose older blobs were folded into the new one."""
    merged: set[int] = set()
    for sid, new in rows.items():
        fps, seqs = new.fingerprints, new.seqs
        seg = catalog.segment_for_write(sid)
        handle = seg.group.handle
        for key, article_id in zip(enc.row_keys(sid, seqs), new.article_ids, strict=True):
            wb.put(key, article_id, handle)
        # Beside the row, not in the record: read only on request, gone with the row.
        for seq, shingles in zip(seqs.tolist(), new.shingles, strict=True):
            if shingles:
                wb.put(enc.shingles_key(sid, seq), shingles, handle)
        if len(seg.blobs) >= MAX_BLOBS_PER_SEGMENT:
            # Fold the segment's older blobs into this one: O(segment), read back from disk.
            with errors:
                old = [enc.decode_blob(raw) for raw in _blobs(seg)]
            fps = np.concatenate([f for f, _ in old] + [fps])
            seqs = np.concatenate([q for _, q in old] + [seqs])
            for key in seg.blobs:
                wb.delete(key, handle)
            merged.add(sid)
        wb.put(enc.blob_key(sid, commit_no), enc.encode_blob(fps, seqs), handle)
    return merged


def _blobs(seg: Segment) -> list[bytes]:
    raws = multi_get(seg.group.cf, seg.blobs)
    present = [raw for raw in raws if raw is not None]
    if len(present) < len(raws):
        # Listed at open or written since: only a damaged database loses one.
        raise IndexCorruptError(f"a fingerprint blob of segment {seg.id} is missing")
    return present


def drop_segments(
    db: rocksdict.Rdict,
    catalog: Catalog,
    errors: RocksDBErrors,
    meta: enc.Meta,
    before_ms: int,
) -> list[int]:
    """Drop from RocksDB and the catalog every segment that ends at or before `before_ms`,
    and the groups and generations that have all ended; the segments dropped, oldest first.

    A segment is two range deletions in its group's column family, and a group whose
    segments have all ended is dropped whole, so this takes the same time whatever a
    segment holds.
    """
    seg_ms, group_ms, gen_ms = meta.segment_ms, meta.group_ms, meta.generation_ms
    dropped = sorted(s for s in catalog.segments if (s + 1) * seg_ms <= before_ms)
    gone = [g for g in catalog.groups if (g + 1) * group_ms <= before_ms]
    wb = rocksdict.WriteBatch(raw_mode=True)
    for sid in dropped:
        seg = catalog.segments[sid]
        if seg.group.id not in gone:
            for begin, end in enc.segment_ranges(sid):
                wb.delete_range(begin, end, seg.group.handle)
    with errors:
        if not wb.is_empty():
            db.write(wb)
        # Segments leave the caches only once their range deletions are durable.
        for sid in dropped:
            del catalog.segments[sid]
        for gid in gone:
            catalog.drop_group(gid)
        for gen in [g for g in catalog.generations if (g + 1) * gen_ms <= before_ms]:
            catalog.drop_generation(gen)
    return dropped
