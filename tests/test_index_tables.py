"""The in-memory search tables against brute force: many runs, merges, drops, compaction."""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
from hypothesis import given, settings

from indexstore.layout import choose_layout, pigeonhole_layout
from indexstore.tables import SearchTables


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
    rng = np.random.default_rng(seed)
    layout = pigeonhole_layout(k, k + 1 + blocks_extra, 10**6) if k < 8 else choose_layout(k, 10)
    tables = SearchTables(layout)
    centres = rng.integers(0, 2**64, size=4, dtype=np.uint64)
    all_fp, all_seg = [], []
    for size in batches:
        flips = rng.random((size, 64)) < rng.choice([0.02, 0.06, 0.5])
        masks = (flips * (np.uint64(1) << np.arange(64, dtype=np.uint64))).sum(
            axis=1, dtype=np.uint64
        )
        fps = rng.choice(centres, size=size) ^ masks
        segs = rng.integers(0, 8, size=size)
        tables.append(fps, segs, np.arange(len(all_fp), len(all_fp) + size, dtype=np.uint64))
        all_fp.extend(fps.tolist())
        all_seg.extend(segs.tolist())
    fps = np.array(all_fp, dtype=np.uint64)
    segs = np.array(all_seg)
    dropped: set[int] = set()
    for drop in [None, *drops]:
        if drop is not None:
            tables.drop_segments([drop])
            dropped.add(drop)
        queries = np.concatenate((centres, fps[:: max(1, len(fps) // 20)]))
        hits = tables.search(queries)
        for i, q in enumerate(queries.tolist()):
            mine = hits.row[hits.query == i]
            got = {int(tables.seq[r]) for r in mine.tolist()}
            assert got == brute(fps, segs, dropped, q, k)
            assert len(got) == len(mine)
            d = hits.distance[hits.query == i]
            assert (d == np.bitwise_count(fps[tables.seq[mine].astype(np.int64)] ^ q)).all()
