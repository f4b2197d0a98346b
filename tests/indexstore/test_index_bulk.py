"""Two shortcuts of the store against the paths they replace, on pairs of real stores fed the
same chunks: `bulk_put` (restores) against `Batch.put` record by record, and
`commit(expire=True)` (replays of history) against `commit()` then `expire()`."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from index_reference import NOW_MS, SEGMENT_MS, SKEW_MS
from index_reference import program_options as options

from indexstore import ArticleRecord, IndexOptions, IndexStore, IndexStoreError, RecordColumns

POSITION = "changelog"
CENTRES = (0x0123_4567_89AB_CDEF, 0xFFFF_FFFF_0000_0000)
IDS = [f"a{i}" for i in range(16)]


@st.composite
def fingerprints(draw: st.DrawFn) -> int:
    if draw(st.booleans()):
        return draw(st.integers(0, 2**64 - 1))
    centre = draw(st.sampled_from(CENTRES))
    for bit in draw(st.sets(st.integers(0, 63), max_size=6)):
        centre ^= 1 << bit
    return centre


# Times up to past now + skew (clamped), over more than a window (late records, expiry).
records = st.builds(
    lambda article_id, fp, chash, t, matched, late, sketch: ArticleRecord(
        article_id,
        fp,
        chash,
        t,
        # A payload that differs as a decision would: records equal but for it differ.
        f"{article_id}|{matched}|{None if matched is None else fp % 4}|{late}".encode(),
        sketch,
    ),
    st.sampled_from(IDS),
    fingerprints(),
    st.sampled_from([bytes([i]) * 16 for i in range(3)]),
    # Coarse times, so records fall exactly on window and segment boundaries too.
    st.integers(0, (NOW_MS + 2 * SKEW_MS) // 500).map(lambda t: t * 500),
    st.one_of(st.none(), st.sampled_from(IDS)),
    st.booleans(),
    st.sampled_from([b"", b"\x01\x02", b"s" * 40]),
)
# A chunk, sometimes repeated verbatim (a replay the store already holds).
chunk = st.tuples(st.just("chunk"), st.lists(records, max_size=25))
steps = st.lists(
    st.one_of(
        chunk,
        chunk,
        chunk,
        st.tuples(st.just("again")),
        st.tuples(st.just("expire"), st.one_of(st.none(), st.integers(0, NOW_MS))),
        st.tuples(st.just("reopen")),
    ),
    max_size=10,
)


def put_each(store: IndexStore, chunk: list[ArticleRecord], position: int, skip: bool) -> int:
    """The reference: what a restore did before `bulk_put`."""
    applied = 0
    with store.begin() as batch:
        batch.prefetch_records([r.article_id for r in chunk])
        for record in chunk:
            if not skip or batch.lookup(record.article_id) != record:
                batch.put(record)
                applied += 1
        batch.set_position(POSITION, position)
    return applied


def stats_without_bytes(store: IndexStore) -> object:
    # Bytes depend on how RocksDB laid the same keys out in memtables and files.
    stats = store.stats()
    segments = tuple(dataclasses.replace(s, bytes=0) for s in stats.segments)
    return dataclasses.replace(stats, segments=segments, disk_bytes=0)


def searches(store: IndexStore, probes: list[int]) -> list[tuple]:
    out = []
    batch = store.begin()
    for fp in probes:
        result = batch.search(fp, b"\x01" * 16, NOW_MS, limit=100)
        out.append((result.late, result.matches))
    batch.abort()
    return out


def assert_equal(
    one: IndexStore, bulk: IndexStore, probes: list[int], table_memory: bool = True
) -> None:
    assert bulk.watermark_ms() == one.watermark_ms()
    assert bulk.positions() == one.positions()
    stats = [stats_without_bytes(store) for store in (one, bulk)]
    if not table_memory:
        stats = [dataclasses.replace(s, table_memory_bytes=0) for s in stats]
    assert stats[1] == stats[0]
    assert {i: bulk.get(i) for i in IDS} == {i: one.get(i) for i in IDS}
    assert searches(bulk, probes) == searches(one, probes)


def run_pair(paths, opts: IndexOptions, program, probes, feed, table_memory: bool = True) -> None:
    """Two stores driven by one program: `feed(reference, other, chunk, position)` applies a
    chunk to both, expire and reopen steps go to both, and after every step they are equal."""

    def open_both() -> tuple[IndexStore, IndexStore]:
        return tuple(IndexStore.open(p, opts, clock=lambda: NOW_MS) for p in paths)

    reference, other = open_both()
    try:
        last: list[ArticleRecord] = []
        position = 0
        for step in program:
            if step[0] in ("chunk", "again"):
                if step[0] == "chunk":
                    last = step[1]
                position += len(last)
                feed(reference, other, last, position)
            elif step[0] == "expire":
                assert other.expire(step[1]) == reference.expire(step[1])
            else:
                reference.close()
                other.close()
                reference, other = open_both()
            assert_equal(reference, other, probes, table_memory)
    finally:
        reference.close()
        other.close()


def run(root: Path, k: int, expected: int, segment_ms: int, skip: bool, program, probes) -> None:
    def feed(one: IndexStore, bulk: IndexStore, chunk: list[ArticleRecord], position: int):
        applied = put_each(one, chunk, position, skip)
        written = bulk.bulk_put(RecordColumns.of(chunk), {POSITION: position}, skip_unchanged=skip)
        assert written == applied

    opts = options(k, expected, segment_ms)
    run_pair((root / "one", root / "bulk"), opts, program, probes, feed)


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    k=st.sampled_from([0, 3, 6]),
    expected=st.sampled_from([10, 10**7]),
    segment_ms=st.sampled_from([SEGMENT_MS, SEGMENT_MS // 4]),
    skip=st.booleans(),
    program=steps,
    probes=st.lists(fingerprints(), min_size=1, max_size=8),
)
def test_bulk_put_equals_put_record_by_record(
    tmp_path: Path, k, expected, segment_ms, skip, program, probes
) -> None:
    run(tmp_path / uuid.uuid4().hex, k, expected, segment_ms, skip, program, probes)


def test_bulk_put_refuses_what_put_refuses(tmp_path: Path) -> None:
    good = ArticleRecord("a", 1, b"\0" * 16, 1_000)
    bad = [
        dataclasses.replace(good, content_hash=b"short"),
        dataclasses.replace(good, simhash=2**64),
        dataclasses.replace(good, sketch=b"s" * 2**16),
    ]
    with IndexStore.open(tmp_path, options(3, 10, SEGMENT_MS), clock=lambda: NOW_MS) as store:
        for record in bad:
            with store.begin() as batch, pytest.raises(IndexStoreError) as one:
                batch.put(record)
            with pytest.raises(IndexStoreError) as bulk:
                store.bulk_put(RecordColumns.of([good, record]))
            assert str(bulk.value) == str(one.value)
        assert store.get("a") is None
        assert store.stats().articles == 0


def commit_each(store: IndexStore, chunk: list[ArticleRecord], position: int, expire: bool) -> None:
    with store.begin() as batch:
        batch.prefetch_records([r.article_id for r in chunk])
        for record in chunk:
            batch.put(record)
        batch.set_position(POSITION, position)
        if expire:
            batch.commit(expire=True)
        else:
            batch.commit()
            store.expire()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    k=st.sampled_from([0, 3]),
    # 700 ms: window starts (multiples of 500 ms) fall inside segments, not only on their edges.
    segment_ms=st.sampled_from([SEGMENT_MS, SEGMENT_MS // 4, 700]),
    program=steps,
    probes=st.lists(fingerprints(), min_size=1, max_size=8),
)
def test_commit_with_expire_equals_commit_then_expire(
    tmp_path: Path, k, segment_ms, program, probes
) -> None:
    # The combined form skips what the expiry drops at once; nothing else may differ.
    def feed(then: IndexStore, combined: IndexStore, chunk: list[ArticleRecord], position: int):
        commit_each(then, chunk, position, expire=False)
        commit_each(combined, chunk, position, expire=True)

    root = tmp_path / uuid.uuid4().hex
    # Rows never written leave no dead rows in the search tables: less memory.
    run_pair(
        (root / "then", root / "with"), options(k, 10, segment_ms), program, probes, feed, False
    )
