"""Lifecycle of the index on real RocksDB: reopen, positions, locking, metadata, expiry."""

from __future__ import annotations

import dataclasses
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import rocksdict

from indexstore import (
    ArticleRecord,
    IndexFormatError,
    IndexLockedError,
    IndexOptions,
    IndexStateError,
    IndexStore,
    IndexStoreError,
)

HOUR = 3_600_000
NOW = 1_000 * HOUR
OPTIONS = IndexOptions(segment_ms=HOUR, retention_ms=3 * HOUR, memory_bytes=8 << 20)


def rec(article_id: str, simhash: int, t: int, content: bytes = b"x" * 16) -> ArticleRecord:
    return ArticleRecord(
        article_id, simhash, content, t, article_id, "unique", None, None, False, b"p"
    )


def open_store(path: Path, options: IndexOptions = OPTIONS) -> IndexStore:
    return IndexStore.open(path, options, clock=lambda: NOW)


def test_reopen_keeps_records_positions_and_watermark(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        batch = store.begin()
        batch.put(rec("a", 0b1111, NOW - HOUR))
        batch.set_position("news.raw/3", 1043)
        batch.commit()
    with open_store(tmp_path) as store:
        assert store.get("a") == rec("a", 0b1111, NOW - HOUR)
        assert store.positions() == {"news.raw/3": 1043}
        assert store.watermark_ms() == NOW - HOUR
        batch = store.begin()
        found = batch.search(0b0111, b"y" * 16, NOW)
        assert [(m.article_id, m.distance, m.exact) for m in found.matches] == [("a", 1, False)]
        batch.abort()


def test_read_your_writes_and_replacement(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        with store.begin() as batch:
            batch.put(rec("a", 0, NOW))
        batch = store.begin()
        assert batch.search(1, b"x" * 16, NOW).matches[0].article_id == "a"
        # Same id, changed content: the old row must disappear, the new one be found.
        batch.put(rec("a", 0xF << 60, NOW))
        assert batch.search(1, b"x" * 16, NOW).matches == ()
        assert batch.search(0xF << 60, b"x" * 16, NOW).matches[0].exact
        batch.put(rec("b", 3, NOW))
        assert [m.article_id for m in batch.search(1, b"x" * 16, NOW, limit=5).matches] == ["b"]
        batch.commit()
    with open_store(tmp_path) as store:
        batch = store.begin()
        assert [m.article_id for m in batch.search(1, b"x" * 16, NOW, limit=5).matches] == ["b"]
        assert batch.search(1, b"x" * 16, NOW, exclude_id="b").matches == ()


def test_abort_leaves_nothing(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        batch = store.begin()
        batch.put(rec("a", 0, NOW))
        batch.set_position("t/0", 5)
        batch.abort()
        assert store.get("a") is None
        assert store.positions() == {}
        assert store.watermark_ms() is None
        with pytest.raises(IndexStateError):
            batch.put(rec("b", 0, NOW))


def test_late_and_clamped(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        batch = store.begin()
        far_future = batch.search(0, b"x" * 16, NOW + 10 * HOUR)
        assert far_future.clamped and far_future.event_time_ms == NOW + OPTIONS.future_skew_ms
        batch.put(rec("new", 0, NOW))
        old = batch.search(0, b"x" * 16, NOW - 4 * HOUR)
        assert old.late and old.matches[0].article_id == "new"
        batch.put(rec("old", 0, NOW - 4 * HOUR))
        # Kept in the article table, but never a match.
        assert batch.lookup("old") is not None
        assert [m.article_id for m in batch.search(0, b"x" * 16, NOW, limit=9).matches] == ["new"]
        batch.commit()
        assert store.get("old") == rec("old", 0, NOW - 4 * HOUR)


def test_expire_drops_whole_segments(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        with store.begin() as batch:
            for h in range(6):
                batch.put(rec(f"a{h}", h, NOW - 5 * HOUR + h * HOUR))
        assert [s.segment_id for s in store.stats().segments] == [
            NOW // HOUR - 5 + h for h in range(6)
        ]
        # Watermark NOW, window 3 h: segments ending at or before NOW - 3 h go.
        assert store.expire() == [NOW // HOUR - 5, NOW // HOUR - 4]
        assert store.stats().articles == 4
        batch = store.begin()
        found = batch.search(0, b"x" * 16, NOW, limit=10).matches
        assert sorted(m.article_id for m in found) == ["a2", "a3", "a4", "a5"]  # a2 at the edge
        batch.abort()
        assert store.expire(NOW + HOUR) == [NOW // HOUR - 3 + h for h in range(4)]
        assert store.stats().segments == ()
    with open_store(tmp_path) as store:
        assert store.stats().articles == 0


def test_second_process_is_refused(tmp_path: Path) -> None:
    with open_store(tmp_path):
        code = (
            "import sys\nfrom indexstore import IndexStore, IndexLockedError\n"
            "try:\n    IndexStore.open(sys.argv[1])\nexcept IndexLockedError as e:\n"
            "    print(e); sys.exit(3)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True
        )
        assert done.returncode == 3, done.stderr
        assert "in use by another process" in done.stdout
        with pytest.raises(IndexLockedError):
            open_store(tmp_path)


def test_metadata_mismatch_is_refused(tmp_path: Path) -> None:
    open_store(tmp_path).close()
    with pytest.raises(IndexFormatError, match="max_distance=3"):
        open_store(tmp_path, IndexOptions(max_distance=6, segment_ms=HOUR))
    with pytest.raises(IndexFormatError, match="segments"):
        open_store(tmp_path, IndexOptions(segment_ms=2 * HOUR))
    assert IndexStore.stored_options(tmp_path).max_distance == 3
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("hello")
    with pytest.raises(IndexFormatError, match="not empty"):
        open_store(other)


def test_read_only_sees_a_running_writer(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        with store.begin() as batch:
            batch.put(rec("a", 7, NOW))
        with IndexStore.open(tmp_path, read_only=True) as reader:
            assert reader.get("a") is not None
            assert reader.stats().articles == 1
            with pytest.raises(IndexStateError):
                reader.begin()


def test_bad_input_is_refused(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        batch = store.begin()
        with pytest.raises(IndexStoreError, match="16 bytes"):
            batch.put(rec("a", 0, NOW, content=b"short"))
        with pytest.raises(IndexStateError):
            store.begin()
        batch.abort()


def test_blobs_are_merged_and_reopen_is_exact(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        for i in range(80):
            with store.begin() as batch:
                batch.put(rec(f"a{i}", i << 8, NOW))
        assert store.stats().articles == 80
    with open_store(tmp_path) as store:
        assert store.stats().articles == 80
        batch = store.begin()
        for i in range(80):
            assert batch.search(i << 8, b"x" * 16, NOW).matches[0].article_id == f"a{i}"
        batch.abort()


def test_sketch_is_stored_and_handed_back_with_matches(tmp_path: Path) -> None:
    sketch = bytes(range(96))
    with open_store(tmp_path) as store:
        batch = store.begin()
        batch.put(dataclasses.replace(rec("a", 0b1010, NOW), sketch=sketch))
        batch.put(rec("b", 0b1011, NOW))
        assert batch.lookup("a").sketch == sketch
        found = batch.search(0b1010, b"y" * 16, NOW, limit=5).matches
        assert [(m.article_id, m.sketch) for m in found] == [("a", sketch), ("b", b"")]
        batch.commit()
        assert store.get("a").sketch == sketch
        with pytest.raises(IndexStoreError, match="sketch must be at most"):
            store.begin().put(dataclasses.replace(rec("c", 0, NOW), sketch=b"s" * 65_536))
    with open_store(tmp_path) as store:
        assert store.get("a") == dataclasses.replace(rec("a", 0b1010, NOW), sketch=sketch)
        batch = store.begin()
        batch.prefetch([(0b1010, b"y" * 16, NOW)])
        found = batch.search(0b1010, b"y" * 16, NOW, limit=5).matches
        assert [(m.article_id, m.sketch) for m in found] == [("a", sketch), ("b", b"")]
        batch.abort()


def _format_1_record(record: ArticleRecord, seq: int) -> bytes:
    """An article record as format 1 wrote it: no sketch."""
    strings = (record.decision.encode(), record.cluster_id.encode(), b"")
    return b"".join(
        (
            struct.pack(
                ">BQ16sqQbB",
                1,
                record.simhash,
                record.content_hash,
                record.event_time_ms,
                seq,
                -1,
                0,
            ),
            struct.pack(">HHH", *map(len, strings)),
            *strings,
            record.payload,
        )
    )


def test_format_1_directory_opens_and_is_upgraded(tmp_path: Path) -> None:
    with open_store(tmp_path) as store, store.begin() as batch:
        batch.put(rec("a", 0b1111, NOW))
    # Rewrite the directory as format 1 left it: its metadata and a record without a sketch.
    names = rocksdict.Rdict.list_cf(str(tmp_path))
    opts = rocksdict.Options(raw_mode=True)
    db = rocksdict.Rdict(
        str(tmp_path), opts, column_families={n: opts for n in names if n != "default"}
    )
    meta = json.loads(db[b"meta"])
    db[b"meta"] = json.dumps({**meta, "format": 1}).encode()
    (articles,) = [n for n in names if n.startswith("articles.")]
    db.get_column_family(articles)[b"a"] = _format_1_record(rec("a", 0b1111, NOW), 0)
    db.close()
    with IndexStore.open(tmp_path, read_only=True) as reader:
        assert reader.get("a") == rec("a", 0b1111, NOW)
    with open_store(tmp_path) as store:
        assert store.get("a") == rec("a", 0b1111, NOW)
        batch = store.begin()
        assert batch.search(0b0111, b"x" * 16, NOW).matches[0].sketch == b""
        batch.abort()
    db = rocksdict.Rdict(
        str(tmp_path), opts, column_families={n: opts for n in names if n != "default"}
    )
    assert json.loads(db[b"meta"])["format"] == 2
    db[b"meta"] = json.dumps({**meta, "format": 99}).encode()
    db.close()
    with pytest.raises(IndexFormatError, match="index format 99 is not supported"):
        open_store(tmp_path)
