"""Opening the index with the service's configuration."""

from __future__ import annotations

from consumer.config import IndexConfig, parse_duration_ms, parse_size_bytes
from indexstore import IndexOptions, IndexStore


def index_options(config: IndexConfig) -> IndexOptions:
    return IndexOptions(
        max_distance=config.max_distance,
        segment_ms=parse_duration_ms(config.segment),
        retention_ms=parse_duration_ms(config.retention),
        future_skew_ms=parse_duration_ms(config.future_skew),
        expected_articles=config.expected_articles,
        memory_bytes=parse_size_bytes(config.memory),
    )


def open_index(config: IndexConfig, path: str | None = None) -> IndexStore:
    return IndexStore.open(path or config.path, index_options(config))
