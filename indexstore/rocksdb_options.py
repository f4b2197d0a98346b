"""The RocksDB options of an index: one memory budget, bounded logs, strict WAL recovery.

Owns only how RocksDB is tuned; imports rocksdict and nothing of the index.
"""

from __future__ import annotations

import rocksdict


def rocksdb_options(memory_bytes: int) -> rocksdict.Options:
    """One memory budget: memtables are charged to the block cache, so both stay within it."""
    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    cache = rocksdict.Cache(memory_bytes)
    table = rocksdict.BlockBasedOptions()
    table.set_block_cache(cache)
    table.set_bloom_filter(10, False)
    table.set_cache_index_and_filter_blocks(True)
    opts.set_block_based_table_factory(table)
    opts.set_write_buffer_manager(
        rocksdict.WriteBufferManager.new_write_buffer_manager_with_cache(
            memory_bytes // 2, False, cache
        )
    )
    # Small memtables: a memtable's memory is held until it is flushed, so large ones made
    # the resident size climb for many minutes under a slow feed (32 MiB each before; 8 MiB
    # flushes every ~2 s at 30,000 articles/s, and every couple of minutes at 150/s).
    opts.set_write_buffer_size(min(max(memory_bytes // 32, 1 << 20), 8 << 20))
    opts.set_compression_type(rocksdict.DBCompressionType.lz4())
    opts.set_max_background_jobs(2)
    # Each column family's memtable keeps every write-ahead log since its last flush. The
    # small state family (positions, watermark) never fills its memtable, so without a cap
    # the logs were never deleted: 2.5 MiB a minute at 150 articles/s in a 20-minute soak,
    # with a 5-minute window. Past the cap, RocksDB flushes the families that hold the
    # oldest log and deletes it. A sixteenth of the budget (16 MiB by default) flushes every
    # few minutes at that rate and every few seconds at thousands of articles a second.
    opts.set_max_total_wal_size(max(memory_bytes // 16, 4 << 20))
    # RocksDB's own info log (LOG) is rolled and bounded too: column families come and go
    # with segments, and each adds pages to it.
    opts.set_max_log_file_size(4 << 20)
    opts.set_keep_log_file_num(3)
    # RocksDB's default (point in time) recovers a write-ahead log only up to its first damaged
    # record and drops the batches after it without a word, though their decisions may be
    # published and their offsets committed: later duplicates of those articles would be
    # missed. This mode still accepts a torn last record (a power loss mid-write) but refuses a
    # damaged one before it, which then asks for a rebuild.
    opts.set_wal_recovery_mode(rocksdict.DBRecoveryMode.tolerate_corrupted_tail_records())
    return opts
