"""Band keys and shingles on real RocksDB: band matches against a brute-force scan over random
programs (puts, updates, restores, expiry, commit and abort, reopening with and without the
tables' snapshot), shingles read back through their whole life, and the band tables' memory."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path
from unittest import mock

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings
from index_reference import ReferenceIndex

from indexstore import (
    ArticleRecord,
    IndexOptions,
    IndexStore,
    RecordColumns,
    snapshot,
)

NOW_MS = 20_000
SEGMENT_MS = 1_000
RETENTION_MS = 5_000
SKEW_MS = 2_000

# Keys 0 and 1 (and the two large ones) differ only in their low 4 bits, which the band
# tables do not keep: a row counted as sharing them must not become a band match.
KEYS = (0, 1, 16, 0xFFFF_FFF0, 0xFFFF_FFFF)


@st.composite
def band_sets(draw: st.DrawFn) -> bytes:
    count = draw(st.sampled_from([0, 4, 16, 16, 16]))
    return struct.pack(
        f"<{count}I", *draw(st.lists(st.sampled_from(KEYS), min_size=count, max_size=count))
    )


fingerprints = st.integers(0, 2**64 - 1) | st.sampled_from([0, 1, 3, 2**64 - 1])
content_hashes = st.sampled_from([bytes([i]) * 16 for i in range(2)])
times = st.integers(0, NOW_MS + 2 * SKEW_MS)
ids = st.sampled_from([f"a{i}" for i in range(10)])
shingle_values = st.sampled_from([b"", b"S", b"SC\x03\x01\xff"]) | st.binary(max_size=40)

put_op = st.tuples(
    st.just("put"), ids, fingerprints, content_hashes, times, band_sets(), shingle_values
)
search_op = st.tuples(
    st.just("search"),
    fingerprints,
    content_hashes,
    times,
    st.one_of(st.none(), ids),
    st.sampled_from([0, 1, 3]),
    band_sets(),
    st.sampled_from([1, 2, 5, 16]),
    st.sampled_from([1, 4, 100]),
)
batch_step = st.tuples(
    st.just("batch"), st.lists(st.one_of(put_op, search_op), max_size=10), st.booleans()
)
bulk_step = st.tuples(st.just("bulk"), st.lists(put_op, max_size=8))
expire_step = st.tuples(st.just("expire"), st.one_of(st.none(), st.integers(0, NOW_MS)))
reopen_step = st.tuples(st.just("reopen"), st.booleans())  # with the snapshot or rebuilt
steps = st.lists(
    st.one_of(batch_step, batch_step, batch_step, bulk_step, expire_step, reopen_step),
    max_size=10,
)


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
    options = IndexOptions(
        max_distance=k,
        segment_ms=SEGMENT_MS,
        retention_ms=RETENTION_MS,
        future_skew_ms=SKEW_MS,
        expected_articles=expected,
        memory_bytes=8 << 20,
    )
    ref = ReferenceIndex(options, NOW_MS)
    with (
        tempfile.TemporaryDirectory() as tmp,
        mock.patch("indexstore.tables.scan_break_even", return_value=0),
    ):
        store = IndexStore.open(tmp, options, clock=lambda: NOW_MS)
        try:
            for step in program:
                if step[0] == "batch":
                    _, ops, commit = step
                    before = ref.snapshot()
                    batch = store.begin()
                    for op in ops:
                        if op[0] == "put":
                            put = record(op)
                            batch.put(put)
                            ref.put(put)
                            # Its own uncommitted put: the record as put, shingles included.
                            assert batch.lookup(put.article_id) == ref.lookup(put.article_id)
                            assert batch.shingles(put.article_id) == ref.shingles(put.article_id)
                        else:
                            _, fp, ch, t, exclude, limit, bands, least, most = op
                            got = batch.search(
                                fp,
                                ch,
                                t,
                                exclude_id=exclude,
                                limit=limit,
                                bands=bands,
                                min_shared_bands=least,
                                band_limit=most,
                            )
                            assert got == ref.search(fp, ch, t, exclude, limit, bands, least, most)
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
                    store.close()
                    if not step[1]:
                        snapshot.discard(Path(tmp))
                    store = IndexStore.open(tmp, options, clock=lambda: NOW_MS)
                check_shingles(store, ref)
            # A final sweep: every band set of two keys against the reference.
            batch = store.begin()
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
            batch.abort()
        finally:
            store.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.sampled_from([0, 3, 8]), expected=st.sampled_from([10, 10**7]), program=steps)
def test_band_matches_and_shingles_equal_brute_force(k: int, expected: int, program: list) -> None:
    run_program(k, expected, program)
