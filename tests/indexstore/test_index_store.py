"""Lifecycle of the index on real RocksDB: reopen, positions, locking, metadata, expiry."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import rocksdict

from indexstore import (
    ArticleRecord,
    IndexCorruptError,
    IndexFormatError,
    IndexLockedError,
    IndexOptions,
    IndexStateError,
    IndexStore,
    IndexStoreError,
    IndexWriteError,
    opening,
    snapshot,
)
from indexstore.tables import SearchTables

HOUR = 3_600_000
NOW = 1_000 * HOUR
OPTIONS = IndexOptions(segment_ms=HOUR, retention_ms=3 * HOUR, memory_bytes=8 << 20)


def rec(article_id: str, simhash: int, t: int, content: bytes = b"x" * 16) -> ArticleRecord:
    return ArticleRecord(article_id, simhash, content, t, b"p")


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


def test_prefetches_in_steps_find_every_row_of_the_batch(tmp_path: Path) -> None:
    """The pipeline prefetches chunk by chunk and puts between: a fingerprint probed in an
    early step must still meet rows whose fingerprints were first probed later, and a row put
    before its fingerprint was probed must be found once, not twice."""
    near, early, late = 0b0000, 0b0111, 0b0011
    with open_store(tmp_path) as store:
        batch = store.begin()
        batch.put(rec("unprobed", late, NOW))
        batch.prefetch([(near, b"y" * 16, NOW)])
        batch.put(rec("first", near, NOW))
        batch.prefetch([(early, b"y" * 16, NOW), (late, b"y" * 16, NOW)])
        batch.put(rec("second", early, NOW))
        found = batch.search(near, b"y" * 16, NOW, limit=10).matches
        assert [(m.article_id, m.distance) for m in found] == [
            ("first", 0),
            ("unprobed", 2),
            ("second", 3),
        ]
        found = batch.search(late, b"y" * 16, NOW, limit=10).matches
        assert [m.article_id for m in found] == ["unprobed", "second", "first"]
        batch.abort()


def spread(i: int) -> int:
    """Fingerprints far apart from each other (Fibonacci hashing)."""
    return i * 0x9E3779B97F4A7C15 % 2**64


def test_segments_share_a_column_family_per_group(tmp_path: Path) -> None:
    # 12 h window of 1 h segments: groups of 3 segments, 4 per window.
    options = IndexOptions(segment_ms=HOUR, retention_ms=12 * HOUR, memory_bytes=8 << 20)
    first = NOW // HOUR - 20
    with open_store(tmp_path, options) as store:
        for h in range(21):
            with store.begin() as batch:
                batch.put(rec(f"a{h}", spread(h), (first + h) * HOUR))
        expected = sorted({(first + h) // 3 for h in range(21)})
        groups = [n for n in rocksdict.Rdict.list_cf(str(tmp_path)) if n.startswith("group.")]
        assert sorted(int(n.split(".")[1]) for n in groups) == expected
        # Watermark NOW, window 12 h: segments first..first+7 go (8 of them); whole groups
        # are dropped, the segments of a group still partly live are range-deleted.
        assert store.expire() == [first + h for h in range(8)]
        assert store.stats().articles == 13
        live = {n for n in rocksdict.Rdict.list_cf(str(tmp_path)) if n.startswith("group.")}
        assert live == {f"group.{g}" for g in expected if (g + 1) * 3 > first + 8}
    with open_store(tmp_path, options) as store:
        assert [s.segment_id for s in store.stats().segments] == [first + h for h in range(8, 21)]
        batch = store.begin()
        for h in range(21):
            found = batch.search(spread(h), b"x" * 16, NOW).matches
            assert [m.article_id for m in found] == ([f"a{h}"] if h >= 8 else [])
        batch.abort()


def test_reopen_after_a_clean_close_loads_the_saved_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_store(tmp_path) as store, store.begin() as batch:
        for i in range(50):
            batch.put(rec(f"a{i}", spread(i), NOW))
    assert (tmp_path / snapshot.FILE_NAME).exists()

    def no_rebuild(*args: object) -> None:
        raise AssertionError("the tables were rebuilt instead of loaded")

    scan = opening.scan

    def scan_without_rows(*args: Any, keep_rows: bool) -> opening.Found:
        # Rows read beside a loaded snapshot held 24 B a row for nothing (2.2 GiB at 100 M).
        assert not keep_rows, "the rows were read though the saved tables were loaded"
        return scan(*args, keep_rows=keep_rows)

    with monkeypatch.context() as m:
        m.setattr(SearchTables, "append", no_rebuild)
        m.setattr(opening, "scan", scan_without_rows)
        store = open_store(tmp_path)
    with store:
        batch = store.begin()
        for i in range(50):
            assert [m.article_id for m in batch.search(spread(i), b"x" * 16, NOW).matches] == [
                f"a{i}"
            ]
        batch.put(rec("b", spread(99), NOW))
        batch.commit()
        batch = store.begin()
        assert batch.search(spread(99), b"x" * 16, NOW).matches[0].article_id == "b"
        batch.abort()


def test_stale_or_damaged_saved_tables_are_rebuilt(tmp_path: Path) -> None:
    saved = tmp_path / snapshot.FILE_NAME
    with open_store(tmp_path) as store, store.begin() as batch:
        batch.put(rec("a", spread(1), NOW))
    old = saved.read_bytes()
    with open_store(tmp_path) as store, store.begin() as batch:
        batch.put(rec("b", spread(2), NOW))
    # The snapshot of an older state (as after a crash that followed more commits): ignored.
    saved.write_bytes(old)
    with open_store(tmp_path) as store:
        batch = store.begin()
        assert batch.search(spread(2), b"x" * 16, NOW).matches[0].article_id == "b"
        batch.abort()
        # An expiry changes the segments: the snapshot of before it no longer matches.
        store.expire(NOW + HOUR)
    saved.write_bytes(b"not a snapshot")
    with open_store(tmp_path) as store:
        batch = store.begin()
        assert batch.search(spread(2), b"x" * 16, NOW).matches == ()
        batch.abort()


def test_a_query_considers_a_bounded_number_of_the_closest_entries(tmp_path: Path) -> None:
    # Thousands of near-identical short texts in one window must not make every query fetch
    # all of them; the closest, then the earliest, are kept.
    from indexstore.nearest import MAX_HITS_PER_QUERY

    n = MAX_HITS_PER_QUERY + 200
    with open_store(tmp_path / "idx") as store:
        with store.begin() as batch:
            for i in range(n):
                # The last few entries are closer to the query than all others.
                simhash = 0b1 if i < n - 5 else 0
                batch.put(rec(f"a{i}", simhash, NOW - HOUR + i, i.to_bytes(16, "big")))
            batch.commit()
        with store.begin() as batch:
            result = batch.search(0, b"q" * 16, NOW, limit=10 * n)
    ids = [m.article_id for m in result.matches]
    assert len(ids) == MAX_HITS_PER_QUERY
    assert ids[:5] == [f"a{i}" for i in range(n - 5, n)]  # distance 0 first
    assert ids[5:] == [f"a{i}" for i in range(MAX_HITS_PER_QUERY - 5)]  # then the earliest


def test_queries_sharing_neighbours_read_each_rows_id_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A batch's queries are searched together; where they share neighbours (a feed's copies
    # of one story), each neighbour's article id is read from RocksDB once, not once a query.
    from indexstore.catalog import Catalog

    with open_store(tmp_path / "idx") as store:
        with store.begin() as batch:
            for i in range(20):
                batch.put(rec(f"a{i}", 1 << (i % 4), NOW - HOUR + i, i.to_bytes(16, "big")))
            batch.commit()
        queries = [0, 0b11, 0b1000, 0b1010]
        with store.begin() as batch:
            one_by_one = [batch.search(q, b"q" * 16, NOW, limit=50) for q in queries]
            batch.abort()
        read: list[tuple[int, int]] = []
        row_ids = Catalog.row_ids

        def counted(self: Catalog, segments: list[int], seqs: list[int]) -> list[str | None]:
            read.extend(zip(segments, seqs, strict=True))
            return row_ids(self, segments, seqs)

        monkeypatch.setattr(Catalog, "row_ids", counted)
        with store.begin() as batch:
            batch.prefetch([(q, b"q" * 16, NOW) for q in queries])
            together = [batch.search(q, b"q" * 16, NOW, limit=50) for q in queries]
            batch.abort()
    assert together == one_by_one
    # Every query has neighbours among the 20 rows, and all of them share some.
    assert sum(len(r.matches) for r in together) > 20
    assert len(read) == len(set(read)) == 20


def _flip_middle(path: Path, length: int = 32) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    for i in range(middle, min(middle + length, len(data))):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


def _damage_state_key(path: Path) -> None:
    from indexstore import encoding as enc

    opts = rocksdict.Options(raw_mode=True)
    families = {n: opts for n in rocksdict.Rdict.list_cf(str(path)) if n != "default"}
    db = rocksdict.Rdict(str(path), opts, column_families=families)
    db.put(enc.STATE_KEY, b"not a state")
    db.close()


DAMAGES = {
    "CURRENT garbled": lambda d: (d / "CURRENT").write_text("garbage\n"),
    "CURRENT missing": lambda d: (d / "CURRENT").unlink(),
    "MANIFEST bytes flipped": lambda d: _flip_middle(next(d.glob("MANIFEST-*"))),
    "every SST's bytes flipped": lambda d: [_flip_middle(p) for p in d.glob("*.sst")],
    "an SST missing": lambda d: max(d.glob("*.sst"), key=lambda p: p.stat().st_size).unlink(),
    "our state record garbled": _damage_state_key,
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_directory_is_refused_with_one_line_naming_it(
    tmp_path: Path, damage: str
) -> None:
    with open_store(tmp_path) as store, store.begin() as batch:
        for i in range(2000):
            batch.put(rec(f"a{i}", spread(i), NOW - i))
    assert list(tmp_path.glob("*.sst")), "closing flushes the memtables: SSTs to damage"
    DAMAGES[damage](tmp_path)

    def use() -> None:
        with open_store(tmp_path) as store:
            for i in range(2000):
                store.get(f"a{i}")

    with pytest.raises(IndexCorruptError) as raised:
        use()
    message = str(raised.value)
    assert str(tmp_path) in message and "\n" not in message
    assert "move the directory aside and rebuild" in message


# Commits batches of 300 articles and exits without closing, as a killed process leaves the
# index: every batch is in the write-ahead log only.
UNCLOSED_WRITER = """
import os, sys
sys.path.insert(0, sys.argv[2])
from test_index_store import open_store, rec, spread, NOW
store = open_store(__import__("pathlib").Path(sys.argv[1]))
for b in range(10):
    with store.begin() as batch:
        for i in range(b * 300, (b + 1) * 300):
            batch.put(rec(f"a{i}", spread(i), NOW, bytes(16)))
os._exit(0)
"""


def _unclosed_index(path: Path) -> Path:
    """The write-ahead log of an index whose writer died after 10 batches of 300."""
    subprocess.run(
        [sys.executable, "-c", UNCLOSED_WRITER, str(path), str(Path(__file__).parent)],
        check=True,
    )
    (log,) = path.glob("*.log")
    return log


def test_a_torn_last_record_of_the_log_is_tolerated(tmp_path: Path) -> None:
    log = _unclosed_index(tmp_path)
    os.truncate(log, log.stat().st_size - 1000)
    with open_store(tmp_path) as store:
        assert store.stats().articles == 9 * 300


def test_a_damaged_record_before_the_end_of_the_log_is_refused(tmp_path: Path) -> None:
    # The default recovery would silently keep the first batches only.
    _flip_middle(_unclosed_index(tmp_path))
    with pytest.raises(IndexCorruptError, match="checksum mismatch"):
        open_store(tmp_path)


def test_a_full_disk_refuses_the_write_and_keeps_every_committed_batch(small_fs) -> None:
    path = small_fs.path / "state"
    store = open_store(path)
    committed = 0

    def commit_batch() -> None:
        nonlocal committed
        with store.begin() as batch:
            for i in range(committed, committed + 500):
                batch.put(rec(f"a{i}", spread(i), NOW, bytes(16)))
        committed += 500

    for _ in range(3):
        commit_batch()
    filler = small_fs.fill()
    with pytest.raises(IndexWriteError) as raised:
        # RocksDB may have room left in the log it preallocated: a few more batches fit.
        for _ in range(100):
            commit_batch()
    message = str(raised.value)
    # The error's traceback holds the failed commit's frames, whose column family handles
    # keep the database (and its lock) open while anything holds the error.
    del raised
    assert f"the index in {path} cannot be written: its filesystem is full" in message
    assert "\n" not in message
    store.close()  # repeats nothing of the refusal: it was raised once already
    with pytest.raises(IndexWriteError, match="its filesystem is full"):
        open_store(path)  # opening writes a new log and manifest
    filler.unlink()
    # Reopened in the same process: the failed store released its lock.
    with open_store(path) as store:
        assert store.stats().articles == committed
        commit_batch()
    with open_store(path) as store:
        assert store.stats().articles == committed


def test_an_id_that_cannot_be_encoded_is_not_taken_for_damage(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        with store.begin() as batch:
            batch.put(rec("a", 1, NOW))
        with store.begin() as batch, pytest.raises(UnicodeEncodeError):
            batch.prefetch_records(["a", "\ud800"])


def test_files_stay_bounded_while_segments_come_and_go(tmp_path: Path) -> None:
    """A live feed over many windows: write-ahead logs and RocksDB's info log must not grow
    with time. The state family (positions) rarely fills its memtable, and every log since
    its last flush was kept before the WAL cap ([index] memory / 16, at least 4 MiB)."""
    import random

    rng = random.Random(7)
    options = IndexOptions(segment_ms=HOUR, retention_ms=3 * HOUR, memory_bytes=16 << 20)
    start = NOW - 60 * HOUR
    with IndexStore.open(tmp_path, options, clock=lambda: NOW) as store:
        for hour in range(60):  # twenty windows
            for part in range(4):
                with store.begin() as batch:
                    for i in range(500):
                        t = start + hour * HOUR + part * 900_000 + i
                        record = rec(f"h{hour}-{part}-{i}", rng.getrandbits(64), t)
                        batch.put(dataclasses.replace(record, payload=b"p" * 200))
                    batch.set_position("news.raw/0", hour * 2000 + part * 500 + 500)
            store.expire()
        logs = sum(p.stat().st_size for p in tmp_path.glob("*.log"))
        info = sum(p.stat().st_size for p in tmp_path.glob("LOG*"))
    # ~40 MiB of records went through the logs; a window holds ~6,000 of them.
    assert logs < 12 << 20, f"{logs / 2**20:.1f} MiB of write-ahead logs"
    assert info < 16 << 20


def test_replaced_rows_are_not_counted_after_a_reopen(tmp_path: Path) -> None:
    """An update (or a correction) replaces an article's row; its blob keeps the old entry,
    so the count a reopened store shows must leave it out, as the open one does."""
    with open_store(tmp_path) as store:
        with store.begin() as batch:
            batch.put(rec("a", 0b1111, NOW - HOUR))
            batch.put(rec("b", 0b0111, NOW - HOUR))
        for content in (b"y" * 16, b"z" * 16):
            with store.begin() as batch:
                batch.put(rec("a", 0b1110, NOW - HOUR, content))
        assert store.stats().articles == 2
    with open_store(tmp_path) as store:
        assert store.stats().articles == 2
        with store.begin() as batch:
            batch.put(rec("b", 0b0110, NOW - HOUR, b"y" * 16))
        assert store.stats().articles == 2
    with open_store(tmp_path) as store:
        assert store.stats().articles == 2
        assert [m.article_id for m in store.begin().search(0b1110, b"z" * 16, NOW).matches] == ["a"]
