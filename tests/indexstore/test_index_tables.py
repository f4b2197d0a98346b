"""The in-memory search tables against brute force: many runs, merges, drops, compaction."""

from __future__ import annotations

import math
import tracemalloc

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from indexstore import IndexOptions, IndexStore
from indexstore.layout import Layout, choose_layout, pigeonhole_layout, probe_radius
from indexstore.runs import bucket_offsets
from indexstore.tables import SearchTables, scan_break_even


def brute(fps: np.ndarray, segs: np.ndarray, dropped: set[int], q: int, k: int) -> set[int]:
    d = np.bitwise_count(fps ^ np.uint64(q))
    live = ~np.isin(segs, list(dropped)) if dropped else np.ones(len(fps), dtype=bool)
    return set(np.flatnonzero((d <= k) & live).tolist())


@settings(max_examples=40, deadline=None)
@given(
    k=st.integers(0, 10),
    blocks_extra=st.integers(0, 2),
    seed=st.integers(0, 2**32 - 1),
    batches=st.lists(st.integers(1, 300), min_size=1, max_size=12),
    drops=st.lists(st.integers(0, 7), max_size=4),
)
def test_tables_equal_brute_force(
    k: int, blocks_extra: int, seed: int, batches: list[int], drops: list[int]
) -> None:
    layout = pigeonhole_layout(k, k + 1 + blocks_extra, 10**6) if k < 8 else choose_layout(k, 10)
    check_against_brute_force(layout, seed, batches, drops)


# (k, blocks, kept) of the layouts probed within a radius, listed rather than filtered: three in
# four of the combinations are not such a layout, and filtering that many out made Hypothesis
# give up now and then (its filter_too_much health check).
PROBED_LAYOUTS = [
    (k, blocks, kept)
    for k in range(17)  # the service's default k is 12; the far rule is for up to 16
    for blocks in range(1, 9)
    for kept in range(1, blocks + 1)
    if probe_radius(k, blocks, kept) <= 3 and math.comb(blocks, kept) <= 30
]


@settings(max_examples=60, deadline=None)
@given(
    layout_shape=st.sampled_from(PROBED_LAYOUTS),
    seed=st.integers(0, 2**32 - 1),
    batches=st.lists(st.integers(1, 300), min_size=1, max_size=12),
    drops=st.lists(st.integers(0, 7), max_size=4),
)
def test_tables_probed_within_a_radius_equal_brute_force(
    layout_shape: tuple[int, int, int], seed: int, batches: list[int], drops: list[int]
) -> None:
    # Fewer kept blocks than b - k: keys are probed within probe_radius (multi-index hashing
    # when kept = 1); the radius comes from the pigeonhole argument, so misses would show here.
    k, blocks, kept = layout_shape
    layout = pigeonhole_layout(k, blocks, 10**6, kept)
    check_against_brute_force(layout, seed, batches, drops)


def test_large_k_at_a_million_uses_tables_not_a_scan() -> None:
    for k in (8, 10, 12, 14, 16):
        layout = choose_layout(k, 10**6)
        assert layout.blocks and layout.radius > 0, layout.describe()


def test_the_layout_keeps_to_its_memory_cap() -> None:
    # k = 12 at 100 M: 21 tables by the cost alone (~193 B an article), more than this
    # machine holds with the rows' own arrays; a cap of 128 B gives 4, exact all the same.
    free = choose_layout(12, 100_000_000)
    capped = choose_layout(12, 100_000_000, max_table_bytes=128)
    assert free.table_bytes_per_article > 128 >= capped.table_bytes_per_article
    assert capped.blocks and capped.expected_candidates > free.expected_candidates
    assert choose_layout(12, 10**6, max_table_bytes=128) == choose_layout(12, 10**6)


def test_an_index_opens_with_the_layout_its_cap_allows(tmp_path) -> None:
    options = IndexOptions(max_distance=12, expected_articles=100_000_000, max_table_bytes=128)
    with IndexStore.open(tmp_path, options) as store:
        assert store.layout == choose_layout(12, 100_000_000, max_table_bytes=128)


def test_probe_radius_is_tight() -> None:
    # b = 4, k = 10, one kept block: the closest block of a neighbour differs in <= 2 bits,
    # and 3 bits in every block (12 > 10) cannot happen; 2 each is possible (8 <= 10).
    assert probe_radius(10, 4, 1) == 2
    assert probe_radius(3, 4, 1) == 0 and probe_radius(3, 5, 2) == 0
    assert probe_radius(6, 4, 2) == 2  # 2, 2, 1, 1 bits: the two closest blocks differ in 2
    # Manku's layouts probe the key alone.
    assert all(probe_radius(k, b, b - k) == 0 for k in range(11) for b in range(k + 1, k + 6))


def check_against_brute_force(
    layout: Layout, seed: int, batches: list[int], drops: list[int]
) -> None:
    k = layout.max_distance
    rng = np.random.default_rng(seed)
    # The tables probed, and the same rows scanned through table 0 (what a small window uses).
    tables = SearchTables(layout, scan_below=0)
    scanned = SearchTables(layout, scan_below=2**62)
    centres = rng.integers(0, 2**64, size=4, dtype=np.uint64)
    all_fp, all_seg = [], []
    for size in batches:
        flips = rng.random((size, 64)) < rng.choice([0.02, 0.06, 0.5])
        masks = (flips * (np.uint64(1) << np.arange(64, dtype=np.uint64))).sum(
            axis=1, dtype=np.uint64
        )
        fps = rng.choice(centres, size=size) ^ masks
        segs = rng.integers(0, 8, size=size)
        seqs = np.arange(len(all_fp), len(all_fp) + size, dtype=np.uint64)
        tables.append(fps, segs, seqs)
        scanned.append(fps, segs, seqs)
        # A run per batch (and merges), as when searches come between appends; batches of odd
        # size wait and are sorted together with the next.
        if size % 2 == 0:
            tables.sort_appended()
            scanned.sort_appended()
        all_fp.extend(fps.tolist())
        all_seg.extend(segs.tolist())
    fps = np.array(all_fp, dtype=np.uint64)
    segs = np.array(all_seg)
    dropped: set[int] = set()
    for drop in [None, *drops]:
        if drop is not None:
            tables.drop_segments([drop])
            scanned.drop_segments([drop])
            dropped.add(drop)
        queries = np.concatenate((centres, fps[:: max(1, len(fps) // 20)]))
        hits = tables.search(queries)
        by_scan = scanned.search(queries)
        for field in ("query", "row", "distance"):
            assert getattr(by_scan, field).tolist() == getattr(hits, field).tolist()
        for i, q in enumerate(queries.tolist()):
            mine = hits.row[hits.query == i]
            got = {int(tables.seq[r]) for r in mine.tolist()}
            assert got == brute(fps, segs, dropped, q, k)
            assert len(got) == len(mine)
            d = hits.distance[hits.query == i]
            assert (d == np.bitwise_count(fps[tables.seq[mine].astype(np.int64)] ^ q)).all()
        # Of each fingerprint's rows, the earliest `cap` (how the store bounds a query).
        cap = 2
        capped = tables.search(queries, per_fingerprint=cap)
        capped_by_scan = scanned.search(queries, per_fingerprint=cap)
        for field in ("query", "row", "distance"):
            assert getattr(capped_by_scan, field).tolist() == getattr(capped, field).tolist()
        for i, q in enumerate(queries.tolist()):
            got = sorted(int(tables.seq[r]) for r in capped.row[capped.query == i].tolist())
            by_fp: dict[int, list[int]] = {}
            for seq in sorted(brute(fps, segs, dropped, q, k)):
                by_fp.setdefault(int(fps[seq]), []).append(seq)
            assert got == sorted(s for seqs in by_fp.values() for s in seqs[:cap])


def test_runs_merge_whether_or_not_they_repeat_a_fingerprint() -> None:
    """Runs whose fingerprints each have one row keep no row starts; merges of such runs with
    runs that repeat a fingerprint, inside one run or across two, keep every row findable,
    and the earliest rows of each fingerprint first. Checked after every run and after a
    snapshot round trip."""
    k = 3
    rng = np.random.default_rng(3)
    base = rng.integers(0, 2**64, 64, dtype=np.uint64)
    batches = [
        base[:32],  # distinct
        base[16:48],  # distinct, half of it in the run before
        np.repeat(base[40:44], 5),  # repeats inside the run
        base[48:],  # distinct, new
        base[:8] ^ np.uint64(1),  # near the first run, distinct
        np.repeat(base[:2], 3),
        base[60:],
    ]
    tables = SearchTables(choose_layout(k, 1_000_000), scan_below=0)
    stored: list[int] = []
    queries = np.concatenate((base, base[:8] ^ np.uint64(3)))
    for fps in batches:
        seqs = np.arange(len(stored), len(stored) + len(fps), dtype=np.uint64)
        tables.append(fps, np.zeros(len(fps), dtype=np.int64), seqs)
        tables.sort_appended()
        stored.extend(fps.tolist())
        all_fps = np.array(stored, dtype=np.uint64)
        segs = np.zeros(len(stored), dtype=np.int64)
        for searched in (tables, SearchTables.restore(tables.layout, tables.export())):
            hits = searched.search(queries)
            capped = searched.search(queries, per_fingerprint=2)
            for i, q in enumerate(queries.tolist()):
                want = sorted(brute(all_fps, segs, set(), q, k))
                got = sorted(searched.seq[hits.row[hits.query == i]].tolist())
                assert got == want
                first_two: dict[int, list[int]] = {}
                for seq in want:
                    first_two.setdefault(stored[seq], []).append(seq)
                got = sorted(searched.seq[capped.row[capped.query == i]].tolist())
                assert got == sorted(s for seqs in first_two.values() for s in seqs[:2])
    # Both kinds of run were made and merged.
    assert tables.layout.tables and any(run.starts is not None for run in tables.runs)


@pytest.mark.parametrize("k", [3, 12])
def test_many_identical_fingerprints_cost_linear_memory(k: int) -> None:
    """A story reposted verbatim thousands of times in the window: each copy is found once,
    and a query's memory grows with the copies, not with their square (it took 5 GiB for
    4,000 copies before the hits were paired per distinct fingerprint)."""
    rng = np.random.default_rng(k)
    fps = rng.integers(0, 2**63, 50_000, dtype=np.uint64)
    copies = 3_000
    fps[:copies] = fps[0]
    tables = SearchTables(choose_layout(k, 1_000_000), scan_below=0)
    tables.append(fps, np.zeros(len(fps), dtype=np.int64), np.arange(len(fps), dtype=np.uint64))
    tracemalloc.start()
    try:
        hits = tables.search(np.array([fps[0]], dtype=np.uint64))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    expected = {i for i in range(len(fps)) if bin(int(fps[i]) ^ int(fps[0])).count("1") <= k}
    assert sorted(hits.row.tolist()) == sorted(expected)
    assert peak < 32 * 2**20, f"{peak / 2**20:.0f} MiB for one query"


@pytest.mark.parametrize("scan_below", [0, 2**62])
def test_queries_near_a_fingerprint_stored_many_times_cost_its_cap(scan_below: int) -> None:
    """Many queries near one fingerprint stored 30,000 times (a fuzzer's run of near-identical
    messages; a feed's spam): with `per_fingerprint`, each query gathers at most that many of
    its rows, earliest first, so a batch costs queries x cap x runs, not queries x copies
    (before the runs held each fingerprint once, 1,000 queries gathered 30 million pairs)."""
    k, copies, cap = 12, 30_000, 256
    rng = np.random.default_rng(7)
    fps = rng.integers(0, 2**63, 20_000, dtype=np.uint64)
    popular = fps[0]
    fps = np.concatenate((fps, np.full(copies, popular, dtype=np.uint64)))
    flips = np.uint64(1) << rng.integers(0, 64, (1_000, 3)).astype(np.uint64)
    queries = popular ^ flips[:, 0] ^ flips[:, 1] ^ flips[:, 2]
    tables = SearchTables(choose_layout(k, 1_000_000), scan_below=scan_below)
    # The copies arrive in commits of 1,000, as a service would commit them.
    for lo in range(0, len(fps), 1_000):
        part = slice(lo, lo + 1_000)
        seqs = np.arange(len(fps), dtype=np.uint64)[part]
        tables.append(fps[part], np.zeros(len(seqs), dtype=np.int64), seqs)
        if lo % 3_000 == 0:
            tables.search(queries[:1])
    tracemalloc.start()
    try:
        hits = tables.search(queries, per_fingerprint=cap)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    earliest = sorted(np.flatnonzero(fps == popular)[:cap].tolist())
    for i in range(len(queries)):
        rows = hits.row[hits.query == i]
        assert (
            sorted(int(tables.seq[r]) for r in rows.tolist() if fps[tables.seq[r]] == popular)
            == earliest
        )
    # Each run holding the fingerprint gives each query its cap (~100 MiB here, six runs);
    # without the cap the 30 million pairs alone take over 700 MiB.
    assert peak < 192 * 2**20, f"{peak / 2**20:.0f} MiB for {len(queries)} queries"


def test_a_window_far_smaller_than_expected_is_scanned() -> None:
    # The layout for a million articles at k = 12 costs ~70 us per query before it finds
    # anything; a window of a few thousand rows is compared row by row faster.
    layout = choose_layout(12, 1_000_000)
    assert 5_000 < scan_break_even(layout) < 100_000
    assert scan_break_even(choose_layout(3, 1_000_000)) < 5_000


def test_rows_up_to_the_expected_count_are_never_copied_and_count_as_memory_once_written() -> None:
    # Growing by half at a time, the last growth to 100 M rows held the old row arrays beside
    # the new: 800 MiB more at the peak. Room for the expected rows is taken at once instead,
    # and the OS maps it only as rows are written, so only the rows in use count.
    layout = choose_layout(3, 50_000)
    tables = SearchTables(layout, expected_rows=50_000)
    seg, seq = tables.seg, tables.seq
    empty = tables.memory_bytes()
    rng = np.random.default_rng(7)
    for start in range(0, 50_000, 5_000):
        fps = rng.integers(0, 2**64, 5_000, dtype=np.uint64)
        tables.append(fps, np.full(5_000, start // 5_000), np.arange(start, start + 5_000))
    assert tables.seg is seg and tables.seq is seq
    assert tables.memory_bytes() - empty >= 50_000 * (seg.itemsize + seq.itemsize)
    assert empty < 1_000 * (seg.itemsize + seq.itemsize)
    tables.append(np.zeros(1, dtype=np.uint64), np.zeros(1), np.array([50_000]))
    assert len(tables.seg) >= 50_001
    assert 50_000 in tables.search(np.zeros(1, dtype=np.uint64)).row.tolist()


def test_a_window_at_its_expected_size_never_copies_its_rows_as_segments_expire() -> None:
    # Dead rows stay until they are a quarter of all: the room covers them too.
    layout = choose_layout(3, 20_000)
    tables = SearchTables(layout, expected_rows=20_000)
    seg = tables.seg
    rng = np.random.default_rng(3)
    for hour in range(40):  # 2,000 rows an hour, a 10-hour window: never over 20,000 live
        fps = rng.integers(0, 2**64, 2_000, dtype=np.uint64)
        seqs = np.arange(hour * 2_000, (hour + 1) * 2_000)
        tables.append(fps, np.full(2_000, hour), seqs)
        tables.drop_segments([hour - 9])
        assert tables.live <= 20_000
    assert tables.seg is seg


def test_room_the_os_will_not_lend_is_grown_into_instead() -> None:
    layout = choose_layout(3, 10**6)
    tables = SearchTables(layout, expected_rows=10**17)
    tables.append(np.arange(5, dtype=np.uint64), np.zeros(5), np.arange(5))
    assert tables.n == 5 and len(tables.seg) < 10**6
    restored = SearchTables.restore(layout, tables.export(), expected_rows=10**17)
    restored.append(np.arange(5, 3000, dtype=np.uint64), np.zeros(2995), np.arange(5, 3000))
    assert restored.n == 3000
    assert 2999 in restored.search(np.array([2999], dtype=np.uint64)).row.tolist()


# Keys that differ only in the low 4 bits the band tables drop, and ones that differ above.
BAND_KEYS = (0, 1, 16, 17, 0xFFFF_FFF0)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    batches=st.lists(st.integers(1, 60), min_size=1, max_size=8),
    drops=st.lists(st.integers(0, 3), max_size=2),
    queries=st.integers(0, 12),
    min_shared=st.integers(1, 6),
    limit=st.integers(0, 8),
)
def test_a_batch_of_band_queries_equals_brute_force(
    seed: int, batches: list[int], drops: list[int], queries: int, min_shared: int, limit: int
) -> None:
    """Every query answered in one call: for each, the live rows sharing at least
    `min_shared` keys (compared without their low 4 bits), most shared first, then earliest
    inserted, at most `limit`; rows of a query with no keys, or of none, never answer."""
    rng = np.random.default_rng(seed)
    keys = np.array(BAND_KEYS, dtype="<u4")

    def band_set() -> bytes:
        return keys[rng.integers(0, len(keys), 16)].tobytes() if rng.random() < 0.9 else b""

    tables = SearchTables(choose_layout(3, 1_000_000), scan_below=0)
    rows: list[bytes] = []  # by seq
    row_segs: list[int] = []
    for i, size in enumerate(batches):
        bands = [band_set() for _ in range(size)]
        seqs = np.arange(len(rows), len(rows) + size, dtype=np.uint64)
        segs = np.full(size, i % 4, dtype=np.int64)
        tables.append(rng.integers(0, 2**64, size, dtype=np.uint64), segs, seqs, bands)
        rows += bands
        row_segs += segs.tolist()
        if rng.random() < 0.5:
            tables.sort_appended()  # several runs, some merged
    tables.drop_segments(drops)
    dead = set(drops)
    asked = [band_set() for _ in range(queries)]

    query, found, shared = tables.band_search(asked, min_shared, limit)

    for q, bands in enumerate(asked):
        want = []
        for seq, row_bands in enumerate(rows):
            if not bands or not row_bands or row_segs[seq] in dead:
                continue
            pairs = zip(
                np.frombuffer(bands, "<u4").tolist(),
                np.frombuffer(row_bands, "<u4").tolist(),
                strict=True,
            )
            n = sum(a >> 4 == b >> 4 for a, b in pairs)
            if n >= min_shared:
                want.append((-n, seq, n))
        want.sort()
        mine = query == q
        got = list(zip(tables.seq[found[mine]].tolist(), shared[mine].tolist(), strict=True))
        assert got == [(seq, n) for _, seq, n in want[:limit]]


@settings(max_examples=100, deadline=None)
@given(
    values=st.lists(st.integers(0, 2**64 - 1), max_size=300),
    bits=st.integers(0, 10),
    near_edges=st.booleans(),
)
def test_bucket_offsets_equal_counting_each_entrys_bucket(
    values: list[int], bits: int, near_edges: bool
) -> None:
    if near_edges:  # values at and around bucket boundaries, and the largest of all
        edges = [v & ~((1 << 60) - 1) for v in values]
        values = edges + [max(e - 1, 0) for e in edges] + [2**64 - 1, 0]
    permuted = np.sort(np.array(values, dtype=np.uint64))
    counts = np.bincount(
        (permuted >> np.uint64(64 - bits)).astype(np.intp)
        if bits
        else np.zeros(len(values), np.intp),
        minlength=1 << bits,
    )
    expected = np.concatenate(([0], np.cumsum(counts)))
    assert bucket_offsets(permuted, bits).tolist() == expected.tolist()
