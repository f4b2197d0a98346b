"""The index against a brute-force scan: random programs of batches, expiry and reopening."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings
from index_reference import NOW_MS, SEGMENT_MS, SKEW_MS, program_index

from indexstore import ArticleRecord

# Near-duplicates cluster around a few centres, so distances near k are common (adversarial);
# the rest are uniform.
CENTRES = (0x0123_4567_89AB_CDEF, 0xFFFF_FFFF_0000_0000, 0, 0xFFFF_FFFF_FFFF_FFFF)


@st.composite
def fingerprints(draw: st.DrawFn) -> int:
    if draw(st.integers(0, 4)) == 0:
        return draw(st.integers(0, 2**64 - 1))
    centre = draw(st.sampled_from(CENTRES))
    bits = draw(st.sets(st.integers(0, 63), max_size=12))
    for b in bits:
        centre ^= 1 << b
    return centre


content_hashes = st.sampled_from([bytes([i]) * 16 for i in range(3)])
times = st.integers(0, NOW_MS + 2 * SKEW_MS)
ids = st.sampled_from([f"a{i}" for i in range(12)])

put_op = st.tuples(st.just("put"), ids, fingerprints(), content_hashes, times)
search_op = st.tuples(
    st.just("search"),
    fingerprints(),
    content_hashes,
    times,
    st.one_of(st.none(), ids),
    st.sampled_from([1, 3, 100]),
)
batch_step = st.tuples(
    st.just("batch"),
    st.lists(st.one_of(put_op, search_op), max_size=12),
    st.booleans(),  # commit (else abort)
    # Prefetch nothing, the batch's searches all at first, or in steps between the puts as
    # the pipeline does chunk by chunk: the fingerprints of the next searches and puts (the
    # pipeline probes each article before putting it), each step's meeting earlier steps'.
    st.sampled_from(["none", "first", "steps"]),
)
expire_step = st.tuples(st.just("expire"), st.one_of(st.none(), st.integers(0, NOW_MS)))
reopen_step = st.tuples(st.just("reopen"))
steps = st.lists(
    st.one_of(batch_step, batch_step, batch_step, expire_step, reopen_step), max_size=12
)


def record(article_id: str, simhash: int, content_hash: bytes, t: int) -> ArticleRecord:
    return ArticleRecord(
        article_id=article_id,
        simhash=simhash,
        content_hash=content_hash,
        event_time_ms=t,
        payload=article_id.encode(),
        # Some sketches empty, some not: both must come back with records and matches.
        sketch=(article_id * (simhash % 3)).encode(),
    )


def run_program(k: int, expected: int, program: list, segment_ms: int = SEGMENT_MS) -> None:
    with program_index(k, expected, segment_ms) as index:
        store, ref = index.store, index.ref
        for step in program:
            if step[0] == "batch":
                _, ops, commit, prefetch = step
                before = ref.snapshot()
                batch = store.begin()
                if prefetch == "first":
                    batch.prefetch([(op[1], op[2], op[3]) for op in ops if op[0] == "search"])
                    batch.prefetch_records([op[1] for op in ops if op[0] == "put"])
                for at, op in enumerate(ops):
                    if prefetch == "steps" and at % 3 == 0:
                        batch.prefetch(
                            [o[1:4] if o[0] == "search" else o[2:5] for o in ops[at : at + 4]]
                        )
                    if op[0] == "put":
                        _, article_id, fp, ch, t = op
                        assert batch.lookup(article_id) == ref.lookup(article_id)
                        batch.put(record(article_id, fp, ch, t))
                        ref.put(record(article_id, fp, ch, t))
                    else:
                        _, fp, ch, t, exclude, limit = op
                        got = batch.search(fp, ch, t, exclude_id=exclude, limit=limit)
                        assert got == ref.search(fp, ch, t, exclude, limit)
                if commit:
                    batch.commit()
                else:
                    batch.abort()
                    ref = before
            elif step[0] == "expire":
                store.expire(step[1])
                ref.expire(step[1])
            else:
                store = index.reopen()
            assert store.watermark_ms() == ref.watermark
            for article_id in ref.records:
                assert store.get(article_id) == ref.lookup(article_id)
        # A final sweep: every centre and its neighbourhood against the reference.
        batch = store.begin()
        for centre in CENTRES:
            for flip in range(0, 64, 5):
                fp = centre ^ ((1 << flip) - 1)
                got = batch.search(fp, b"\0" * 16, NOW_MS, limit=100)
                assert got == ref.search(fp, b"\0" * 16, NOW_MS, None, 100)
        batch.abort()


# expected_articles picks the layout: small n -> plain scan, large n -> pigeonhole tables.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.integers(0, 16), expected=st.sampled_from([10, 10**5, 10**7]), program=steps)
def test_index_equals_brute_force(k: int, expected: int, program: list) -> None:
    run_program(k, expected, program)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.sampled_from([3, 6, 12, 16]), program=steps)
def test_index_equals_brute_force_with_tables(k: int, program: list) -> None:
    run_program(k, 10**7, program)


# Short segments put several in a column family group (20 per window, groups of 5), so expiry
# range-deletes single segments inside groups as well as dropping whole groups.
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.integers(0, 10), expected=st.sampled_from([10, 10**7]), program=steps)
def test_index_equals_brute_force_in_grouped_segments(k: int, expected: int, program: list) -> None:
    run_program(k, expected, program, segment_ms=SEGMENT_MS // 4)
