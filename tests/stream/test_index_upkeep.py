"""The indexes' housekeeping between polls (`IndexUpkeep`), shared by `--role all` and the
decide role: expiry at once, gauges summed over the stores and refreshed every `UPKEEP_S`."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from consumer.ops.metrics import Metrics
from consumer.stream import state
from consumer.stream.state import IndexUpkeep
from indexstore import ArticleRecord, IndexOptions, IndexStore

HOUR = 3_600_000
NOW = 1_000 * HOUR
OPTIONS = IndexOptions(segment_ms=HOUR, retention_ms=3 * HOUR, memory_bytes=8 << 20)
log = logging.getLogger("newsdedup.test_upkeep")


def _store(path: Path, hours: int) -> IndexStore:
    """An index with one article in each of the last `hours` hourly segments."""
    store = IndexStore.open(path, OPTIONS, clock=lambda: NOW)
    with store.begin() as batch:
        for h in range(hours):
            t = NOW - (hours - 1 - h) * HOUR
            batch.put(ArticleRecord(f"a{h}", h, b"x" * 16, t, b"p"))
    return store


def _gauge(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_gauges_sum_every_store_and_read_zero_once_the_stores_are_gone(tmp_path: Path) -> None:
    metrics = Metrics()
    stores = [_store(tmp_path / "a", 2), _store(tmp_path / "b", 3)]
    try:
        upkeep = IndexUpkeep(lambda: stores, metrics, log)
        upkeep.refresh_gauges()
        assert _gauge(metrics, "newsdedup_index_articles") == 5
        assert _gauge(metrics, "newsdedup_index_segments") == 5
        search_tables = sum(s.memory_usage()["search_tables"] for s in stores)
        assert search_tables > 0
        assert _gauge(metrics, "newsdedup_index_memory_bytes", part="search_tables") == (
            search_tables
        )
        parts = set(stores[0].memory_usage())
    finally:
        for s in stores:
            s.close()
    stores = []  # every partition given up (the decide role)
    upkeep.refresh_gauges()
    assert _gauge(metrics, "newsdedup_index_articles") == 0
    for part in parts:
        assert _gauge(metrics, "newsdedup_index_memory_bytes", part=part) == 0


def test_expiry_is_at_once_and_the_gauges_wait_for_their_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = Metrics()
    with _store(tmp_path, 6) as store:
        upkeep = IndexUpkeep(lambda: [store], metrics, log)
        with caplog.at_level(logging.INFO):
            upkeep.between_polls()
        # The watermark is NOW and the window 3 h: the two oldest segments have left it.
        assert _gauge(metrics, "newsdedup_segments_expired_total") == 2
        assert [r.getMessage() for r in caplog.records if r.name == log.name] == [
            "segments expired"
        ]
        assert _gauge(metrics, "newsdedup_index_articles") == 0  # not refreshed yet
        monkeypatch.setattr(state, "UPKEEP_S", 0.0)
        upkeep.between_polls()
        assert _gauge(metrics, "newsdedup_index_articles") == 4
        assert _gauge(metrics, "newsdedup_segments_expired_total") == 2
