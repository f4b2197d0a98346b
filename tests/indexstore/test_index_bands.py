"""Band keys, posted keys and shingles on real RocksDB: band and posted matches against a
brute-force scan over random programs (puts, updates, restores, expiry, commit and abort,
reopening with and without the tables' snapshot), shingles read back through their whole
life, and the band tables' memory."""

from __future__ import annotations

import struct
from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import pytest
from database_contents import database_contents
from hypothesis import HealthCheck, given, settings
from index_reference import NOW_MS, POSTED_BYTES, SKEW_MS, ReferenceIndex, program_index

from indexstore import (
    ArticleRecord,
    Batch,
    IndexOptions,
    IndexStore,
    IndexStoreError,
    RecordColumns,
)

# Keys 0 and 1 (and the two large ones) differ only in their low 4 bits, which the band
# tables do not keep: a row counted as sharing them must not become a band match.
KEYS = (0, 1, 16, 0xFFFF_FFF0, 0xFFFF_FFFF)


@st.composite
def band_sets(draw: st.DrawFn) -> bytes:
    count = draw(st.sampled_from([0, 4, 16, 16, 16]))
    return struct.pack(
        f"<{count}I", *draw(st.lists(st.sampled_from(KEYS), min_size=count, max_size=count))
    )


# Band sets that articles of a batch share whole, as copies do: a put's keys are then a
# search's, and the batch finds its own rows through its band probes.
SHARED_SETS = [
    struct.pack("<16I", *([a] * 8 + [b] * 8))
    for a, b in ((0, 1), (0, 16), (1, 0xFFFF_FFF0), (16, 0xFFFF_FFFF))
]
some_bands = st.sampled_from(SHARED_SETS) | band_sets()

fingerprints = st.integers(0, 2**64 - 1) | st.sampled_from([0, 1, 3, 2**64 - 1])
content_hashes = st.sampled_from([bytes([i]) * 16 for i in range(2)])
times = st.integers(0, NOW_MS + 2 * SKEW_MS)
ids = st.sampled_from([f"a{i}" for i in range(10)])
# Mostly bytes of a small alphabet, under which rows are posted (index_reference.PostedBytes):
# random programs then share posted keys often.
ALPHABET = b"\x01\x02\x03\x04\x05"
shingle_values = st.one_of(
    st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=5).map(bytes),
    st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=5).map(bytes),
    st.sampled_from([b"", b"S", b"SC\x03\x01\xff"]),
    st.binary(max_size=40),
)
# Sorted like a row's own keys, so that a search may ask exactly what a put posts.
posted_keys = (
    st.lists(st.sampled_from(list(ALPHABET)), max_size=5, unique=True)
    | st.lists(st.integers(0, 255), max_size=6, unique=True)
).map(sorted)

put_op = st.tuples(
    st.just("put"), ids, fingerprints, content_hashes, times, some_bands, shingle_values
)
search_op = st.tuples(
    st.just("search"),
    fingerprints,
    content_hashes,
    times,
    st.one_of(st.none(), ids),
    st.sampled_from([0, 1, 3]),
    some_bands,
    st.sampled_from([1, 2, 5, 8, 16]),
    st.sampled_from([1, 4, 100]),
    posted_keys,
    st.sampled_from([1, 2, 3]),
    st.sampled_from([0, 1]),  # asked of keys fewer than 1 row counts: all (PostedBytes)
)
# The last flag: the batch first prefetches the band candidates of all its searches at once.
batch_step = st.tuples(
    st.just("batch"),
    st.lists(st.one_of(put_op, search_op), max_size=10),
    st.booleans(),
    st.booleans(),
)
bulk_step = st.tuples(st.just("bulk"), st.lists(put_op, max_size=8))
expire_step = st.tuples(st.just("expire"), st.one_of(st.none(), st.integers(0, NOW_MS)))
reopen_step = st.tuples(st.just("reopen"), st.booleans())  # with the snapshot or rebuilt
steps = st.lists(
    st.one_of(batch_step, batch_step, batch_step, bulk_step, expire_step, reopen_step),
    max_size=10,
)


def as_posted(keys: list[int]) -> bytes:
    return np.array(keys, dtype="<u4").tobytes()


def record(op: tuple) -> ArticleRecord:
    _, article_id, fp, ch, t, bands, shingles = op
    return ArticleRecord(article_id, fp, ch, t, article_id.encode(), b"k", bands, shingles)


def check_shingles(store: IndexStore, ref: ReferenceIndex) -> None:
    batch = store.begin()
    try:
        every = list(ref.records)
        expected = {a: ref.shingles(a) for a in every}
        assert batch.shingles_many(every) == {a: s for a, s in expected.items() if s}
        for article_id in every:
            assert batch.shingles(article_id) == expected[article_id]
            assert store.get(article_id) == ref.stored(article_id)
    finally:
        batch.abort()


def run_program(k: int, expected: int, program: list) -> None:
    with program_index(k, expected) as index:
        store, ref = index.store, index.ref
        for step in program:
            if step[0] == "batch":
                _, ops, commit, prefetched = step
                before = ref.snapshot()
                batch = store.begin()
                if prefetched:
                    searches = [op for op in ops if op[0] == "search"]
                    for least in {op[7] for op in searches}:
                        batch.prefetch_bands([op[6] for op in searches], least)
                    # As the decider does: what the searches ask and what the puts post.
                    queries = [as_posted(op[9]) for op in searches]
                    queries += [POSTED_BYTES.posted(op[6]) for op in ops if op[0] == "put"]
                    for least in {op[10] for op in searches} | {1}:
                        batch.prefetch_posted(queries, 1, least)
                    batch.prefetch_posted(queries)
                for op in ops:
                    if op[0] == "put":
                        put = record(op)
                        batch.put(put)
                        ref.put(put)
                        # Its own uncommitted put: the record as put, shingles included.
                        assert batch.lookup(put.article_id) == ref.lookup(put.article_id)
                        assert batch.shingles(put.article_id) == ref.shingles(put.article_id)
                    else:
                        _, fp, ch, t, exclude, limit, bands, least, most, keys, p_least, rarer = op
                        got = batch.search(
                            fp,
                            ch,
                            t,
                            exclude_id=exclude,
                            limit=limit,
                            bands=bands,
                            min_shared_bands=least,
                            band_limit=most,
                            posted=as_posted(keys),
                            min_shared_posted=p_least,
                            posted_limit=most,
                            posted_rarer_than=rarer,
                        )
                        asked = (fp, ch, t, exclude, limit, bands, least, most)
                        expected = ref.search(*asked, tuple(keys), p_least, most)
                        assert got == expected
                if commit:
                    batch.commit()
                else:
                    batch.abort()
                    ref = before
            elif step[0] == "bulk":
                records = [record(op) for op in step[1]]
                store.bulk_put(RecordColumns.of(records))
                for put in records:
                    ref.put(put)
            elif step[0] == "expire":
                store.expire(step[1])
                ref.expire(step[1])
            else:
                store = index.reopen(discard_snapshot=not step[1])
            check_shingles(store, ref)
        # A final sweep: every band set of two keys against the reference.
        batch = store.begin()
        every = [struct.pack("<16I", *([a] * 8 + [b] * 8)) for a in KEYS for b in KEYS]
        batch.prefetch_bands(every, 2)  # 2 searched from the prefetch, 1 and 9 one by one
        for a in KEYS:
            for b in KEYS:
                bands = struct.pack("<16I", *([a] * 8 + [b] * 8))
                for least in (1, 2, 9):
                    got = batch.search(
                        0,
                        b"\0" * 16,
                        NOW_MS,
                        bands=bands,
                        min_shared_bands=least,
                        band_limit=100,
                    )
                    assert got == ref.search(0, b"\0" * 16, NOW_MS, None, 1, bands, least, 100)
        # And every set of posted keys of the alphabet.
        every_keys = [[k for k in ALPHABET if mask >> (k - 1) & 1] for mask in range(32)]
        batch.prefetch_posted([as_posted(k) for k in every_keys[:8]])  # the others one by one
        for keys in every_keys:
            for least in (1, 2, 3):
                got = batch.search(
                    0,
                    b"\0" * 16,
                    NOW_MS,
                    posted=as_posted(keys),
                    min_shared_posted=least,
                    posted_limit=100,
                )
                expected = ref.search(
                    0, b"\0" * 16, NOW_MS, None, 1, b"", 2, 4, tuple(keys), least, 100
                )
                assert got == expected
        batch.abort()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.sampled_from([0, 3, 8]), expected=st.sampled_from([10, 10**7]), program=steps)
def test_band_matches_and_shingles_equal_brute_force(k: int, expected: int, program: list) -> None:
    run_program(k, expected, program)


HOUR = 3_600_000
NOW = 1_000 * HOUR
OPTIONS = IndexOptions(segment_ms=HOUR, retention_ms=3 * HOUR, memory_bytes=8 << 20)
BANDS = struct.pack("<16I", *range(16))


def rec(article_id: str, t: int, shingles: bytes, bands: bytes = BANDS) -> ArticleRecord:
    return ArticleRecord(article_id, 7, b"x" * 16, t, b"p", b"k", bands, shingles)


def open_store(path: Path) -> IndexStore:
    return IndexStore.open(path, OPTIONS, clock=lambda: NOW)


def stored_shingles(path: Path) -> list[bytes]:
    """Every shingles value on disk, whatever reads it."""
    return [
        value
        for name, family in database_contents(path).items()
        if name.startswith("group.")
        for key, value in family.items()
        if key.startswith(b"s")
    ]


def shingles_of(store: IndexStore, article_id: str) -> bytes | None:
    with store.begin() as batch:
        return batch.shingles(article_id)


def test_a_batch_finds_its_own_rows_by_band_keys_whichever_was_probed_first(
    tmp_path: Path,
) -> None:
    # Three band sets: `both` shares its first 8 keys with `first` and its last 8 with `last`.
    first = struct.pack("<16I", *([1] * 8 + [2] * 8))
    both = struct.pack("<16I", *([1] * 8 + [3] * 8))
    last = struct.pack("<16I", *([4] * 8 + [3] * 8))
    never = struct.pack("<16I", *([1] * 8 + [5] * 8))  # never a probe's
    store = open_store(tmp_path / "index")
    with store.begin() as batch:

        def found(bands: bytes, least: int, limit: int = 4) -> list[tuple[str, int]]:
            far = 7 ^ (2**64 - 1)  # the records are at 7: no SimHash match hides one
            result = batch.search(
                far, b"q" * 16, NOW, bands=bands, min_shared_bands=least, band_limit=limit
            )
            return [(m.article_id, m.shared_bands) for m in result.band_matches]

        batch.prefetch_bands([first], 2)
        batch.put(rec("a", NOW - 4, b"", first))  # keys of a probe
        batch.put(rec("b", NOW - 3, b"", both))  # keys of no probe yet
        batch.put(rec("d", NOW - 2, b"", never))
        assert found(first, 8) == [("a", 16), ("b", 8), ("d", 8)]
        assert found(first, 16) == [("a", 16)]
        batch.prefetch_bands([both, last], 2)  # "b" now has a probe's keys, probed after
        batch.put(rec("c", NOW - 1, b"", last))
        assert found(first, 8) == [("a", 16), ("b", 8), ("d", 8)]
        assert found(last, 8) == [("c", 16), ("b", 8)]
        assert found(both, 9) == [("b", 16)]
        assert found(both, 8, limit=5) == [("b", 16), ("a", 8), ("d", 8), ("c", 8)]
    store.close()


def test_a_batch_finds_its_own_rows_by_rare_posted_keys_after_a_prefetch(tmp_path: Path) -> None:
    # Rows are posted under the bytes of their shingles (PostedBytes), which count nothing:
    # every key is rare. The prefetch learns that no committed row shares two keys with any
    # query; the rows the batch puts afterwards must still be found.
    store = IndexStore.open(
        tmp_path / "index", OPTIONS, clock=lambda: NOW, frequencies=POSTED_BYTES
    )
    with store.begin() as batch:
        batch.put(rec("old", NOW - 9, b"\x07\x08\x09"))
    a, q, far = b"\x01\x02\x03", b"\x02\x03\x04", b"\x05\x06\x07"
    queries = [POSTED_BYTES.posted(s) for s in (a, q, far)]

    def found(batch: Batch, shingles: bytes) -> list[tuple[str, int]]:
        result = batch.search(
            7 ^ (2**64 - 1),
            b"q" * 16,
            NOW,
            posted=POSTED_BYTES.posted(shingles),
            min_shared_posted=2,
            posted_rarer_than=1,
        )
        return [(m.article_id, m.shared_bands) for m in result.posted_matches]

    with store.begin() as batch:
        batch.prefetch_posted(queries, 1, 2)
        assert found(batch, q) == []
        batch.put(rec("a", NOW - 3, a))  # a query the prefetch knew, sharing two keys with q
        assert found(batch, q) == [("a", 2)]
        assert found(batch, far) == []
        batch.abort()
    with store.begin() as batch:
        batch.prefetch_posted(queries, 1, 2)
        batch.put(rec("b", NOW - 2, b"\x06\x07\x09"))  # a query it did not know
        assert found(batch, far) == [("b", 2)]
        assert found(batch, b"\x07\x08\x09") == [("old", 3), ("b", 2)]
        batch.abort()
    store.close()


def test_shingles_live_and_die_with_their_row(tmp_path: Path) -> None:
    t = NOW - HOUR // 2
    with open_store(tmp_path) as store:
        with store.begin() as batch:
            batch.put(rec("a", t, b"first"))
            batch.put(rec("b", t, b""))
            assert batch.shingles("a") == b"first"
            assert batch.shingles("b") is None
        # Never read by a search or a lookup: those records carry none.
        with store.begin() as batch:
            assert batch.lookup("a") == rec("a", t, b"")
            result = batch.search(7, b"x" * 16, t, limit=5, bands=BANDS)
            assert [m.article_id for m in result.matches] == ["a", "b"]
        assert shingles_of(store, "a") == b"first"
        assert store.get("a") == rec("a", t, b"")
    assert stored_shingles(tmp_path) == [b"first"]
    with open_store(tmp_path) as store:
        assert shingles_of(store, "a") == b"first"
        # Aborted: neither the new shingles nor the loss of the old.
        batch = store.begin()
        batch.put(rec("a", t, b"aborted"))
        batch.put(rec("c", t, b"aborted too"))
        assert batch.shingles("a") == b"aborted"
        batch.abort()
        assert shingles_of(store, "a") == b"first"
        assert shingles_of(store, "c") is None
        # Updated in its segment, then moved to an older one: the old value is deleted.
        with store.begin() as batch:
            batch.put(rec("a", t, b"second"))
        assert shingles_of(store, "a") == b"second"
        with store.begin() as batch:
            batch.put(rec("a", t - HOUR, b"third"))
        assert shingles_of(store, "a") == b"third"
        assert stored_shingles(tmp_path) == [b"third"]
        # An update without shingles leaves none.
        with store.begin() as batch:
            batch.put(rec("b", t, b"b's"))
            batch.put(rec("a", t - HOUR, b""))
        assert shingles_of(store, "a") is None
        # A restore writes them, replacing and moving as a batch does.
        columns = RecordColumns.of([rec("a", t, b"restored"), rec("d", t - HOUR, b"new")])
        assert store.bulk_put(columns) == 2
        with store.begin() as batch:
            assert batch.shingles_many(["a", "b", "c", "d"]) == {
                "a": b"restored",
                "b": b"b's",
                "d": b"new",
            }
        # A record older than the window has no row, so no shingles.
        with store.begin() as batch:
            batch.put(rec("late", NOW - 10 * HOUR, b"late"))
            assert batch.shingles("late") is None
        assert shingles_of(store, "late") is None
        # Expiry: the segment goes, its shingles with it (the records outlive it).
        assert store.expire(t - HOUR // 2) == [(t - HOUR) // HOUR]
        with store.begin() as batch:
            assert batch.shingles_many(["a", "b", "d"]) == {"a": b"restored", "b": b"b's"}
    assert sorted(stored_shingles(tmp_path)) == [b"b's", b"restored"]


def test_band_tables_cost_at_most_128_bytes_an_article(tmp_path: Path) -> None:
    n = 20_000
    usage = {}
    for bands in (b"", BANDS):
        path = tmp_path / str(len(bands))
        with open_store(path) as store:
            for first in range(0, n, 5_000):
                columns = RecordColumns.of(
                    ArticleRecord(
                        f"a{i}",
                        i * 0x9E37_79B9_7F4A_7C15 % 2**64,
                        b"x" * 16,
                        NOW - HOUR + i,
                        bands=bands and struct.pack("<16I", *(i * 16 + b for b in range(16))),
                    )
                    for i in range(first, first + 5_000)
                )
                store.bulk_put(columns)
            store.prepare_search()
            usage[len(bands)] = store.memory_usage()["search_tables"]
            with store.begin() as batch:
                hits = batch.search(2**64 - 1, b"x" * 16, NOW, bands=BANDS)
                assert [m.article_id for m in hits.band_matches] == ([] if not bands else ["a0"])
    per_article = (usage[64] - usage[0]) / n
    print(f"band tables: {per_article:.1f} B per article for 16 bands")
    assert 0 < per_article <= 128, per_article


def test_bad_bands_are_refused(tmp_path: Path) -> None:
    refused = "bands must be at most 16 keys of 4 bytes"
    with open_store(tmp_path) as store:
        for bands in (b"abc", b"\0" * 68):
            with pytest.raises(IndexStoreError, match=refused):
                store.bulk_put(RecordColumns.of([rec("a", NOW, b"", bands)]))
            with store.begin() as batch:
                with pytest.raises(IndexStoreError, match=refused):
                    batch.put(rec("a", NOW, b"", bands))
                with pytest.raises(IndexStoreError, match=refused):
                    batch.search(7, b"x" * 16, NOW, bands=bands)
                with pytest.raises(IndexStoreError, match="min_shared_bands"):
                    batch.search(7, b"x" * 16, NOW, bands=BANDS, min_shared_bands=0)
        assert store.get("a") is None
