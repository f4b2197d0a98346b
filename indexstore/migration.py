"""Bringing an index of format 3 or 4 to format 5 in place, when it is opened for writing.

Format 3's article records (version 2) held the decision message's fields in fixed places;
format 4's (version 3) hold one opaque payload of the caller's instead; format 5's (version 4)
add band keys, empty in a migrated record (format 5's shingles, kept apart, are simply absent:
a migrated article has none). Only the article records differ: groups, segments, blobs, rows,
positions and state are the same in all three, so the migration rewrites the records of each
generation and nothing else. For format 3 the caller supplies the conversion
(`PayloadUpgrade`): the index does not know what its payload means.

Why migrate once rather than read both record versions forever: the reader, the bulk load's
comparison of encoded records and every writer would each have to know two layouts and the
caller's conversion; a migration keeps format 3 in this module and one pass at open.

A crash at any point loses nothing. Records are rewritten in chunks, each one atomic
WriteBatch, and the metadata keeps the old format until every record is of version 4: it is
written last. A migration stopped anywhere (killed, or a conversion that failed) leaves an
index of the old format whose records are each whole, of the old version or the new; the
next open continues it, skipping what is rewritten already. Nothing else writes meanwhile:
`IndexStore.open` has not returned.

It may import rocksdict and indexstore.encoding, .catalog, .model and .rocksdb_errors.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable

import rocksdict

from indexstore import encoding as enc
from indexstore.catalog import Generation
from indexstore.model import Migrated, PayloadUpgrade
from indexstore.rocksdb_errors import RocksDBErrors

# Records per WriteBatch: large enough that the writes cost little beside the conversion,
# small enough that a batch held in memory stays a few megabytes.
CHUNK_RECORDS = 10_000


def migrate(
    db: rocksdict.Rdict,
    meta: enc.Meta,
    generations: Iterable[Generation],
    upgrade: PayloadUpgrade | None,
    errors: RocksDBErrors,
) -> tuple[enc.Meta, Migrated]:
    """Rewrite every record of `generations` of an earlier version as version 4 (a version-2
    one with the payload `upgrade` returns for it), then mark the index format 5; the new
    metadata and a report."""
    t0 = time.perf_counter()
    rewritten = 0
    with errors:
        for generation in generations:
            rewritten += _migrate_generation(db, generation, upgrade)
        migrated = dataclasses.replace(meta, format=enc.FORMAT_VERSION)
        db.put(enc.META_KEY, enc.encode_meta(migrated))
        # What was migrated is durable before anyone writes on top of it.
        db.flush_wal(True)
    report = Migrated(meta.format, enc.FORMAT_VERSION, rewritten, time.perf_counter() - t0)
    return migrated, report


def _migrate_generation(
    db: rocksdict.Rdict, generation: Generation, upgrade: PayloadUpgrade | None
) -> int:
    rewritten = 0
    wb = rocksdict.WriteBatch(raw_mode=True)
    # The iterator reads the generation as it was when it was made: the chunks written while
    # it runs do not come back to it.
    it = generation.cf.iter()
    it.seek_to_first()
    while it.valid():
        raw = it.value()
        if enc.record_version(raw) != enc.RECORD_VERSION:
            key = it.key()
            record, seq = enc.decode_any_record(key.decode(), raw, upgrade)
            wb.put(key, enc.encode_record(record, seq), generation.handle)
            rewritten += 1
            if wb.len() >= CHUNK_RECORDS:
                db.write(wb)
                wb = rocksdict.WriteBatch(raw_mode=True)
        it.next()
    del it
    if not wb.is_empty():
        db.write(wb)
    return rewritten
