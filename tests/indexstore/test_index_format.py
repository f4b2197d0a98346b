"""An index of another format than this version's is refused, whether its metadata alone says
so or it is what format 4 left on disk, and nothing of it is changed: nothing converts one."""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path

import pytest
import rocksdict
from database_contents import database_contents
from legacy_formats import downgrade_to_format_4

from indexstore import ArticleRecord, IndexOptions, IndexStore, IndexVersionError

HOUR = 3_600_000
NOW = 1_000 * HOUR
OPTIONS = IndexOptions(segment_ms=HOUR, retention_ms=3 * HOUR, memory_bytes=8 << 20)


def open_store(path: Path) -> IndexStore:
    return IndexStore.open(path, OPTIONS, clock=lambda: NOW)


def test_an_index_of_another_format_is_refused(tmp_path: Path) -> None:
    """Nothing converts an index of another format (no release wrote one before format 5):
    opened for writing or read-only, it is refused in one line that says to rebuild it."""
    open_store(tmp_path).close()
    opts = rocksdict.Options(raw_mode=True)
    names = [n for n in rocksdict.Rdict.list_cf(str(tmp_path)) if n != "default"]
    for fmt in (1, 2, 3, 4, 99):
        db = rocksdict.Rdict(str(tmp_path), opts, column_families={n: opts for n in names})
        db[b"meta"] = json.dumps({**json.loads(db[b"meta"]), "format": fmt}).encode()
        db.close()
        for read_only in (False, True):
            with pytest.raises(IndexVersionError) as refused:
                IndexStore.open(tmp_path, OPTIONS, read_only=read_only)
            message = str(refused.value)
            assert message.startswith(f"the index in {tmp_path} is of format {fmt}, which this")
            assert "rebuild the index in a new directory" in message and "\n" not in message
            assert (refused.value.found, refused.value.path) == (fmt, tmp_path)


def test_an_index_left_by_format_4_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    bands = struct.pack("<16I", *range(16))
    with open_store(tmp_path) as store, store.begin() as batch:
        for i in range(20):
            record = ArticleRecord(f"a{i}", i << 40, b"x" * 16, NOW - HOUR, b"p", b"k", bands)
            batch.put(dataclasses.replace(record, shingles=b"s%d" % i))
    assert downgrade_to_format_4(tmp_path) == 20
    left = database_contents(tmp_path)
    for read_only in (False, True):
        with pytest.raises(IndexVersionError, match="is of format 4, which this version"):
            IndexStore.open(tmp_path, OPTIONS, read_only=read_only)
    assert database_contents(tmp_path) == left
