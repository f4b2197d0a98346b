"""Opening the index with the service's configuration, and keeping it between polls."""

from __future__ import annotations

import logging
import os
import stat
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from consumer.config import IndexConfig
from consumer.deciding import stored
from consumer.deciding.boilerplate import STORY_STARTERS
from consumer.ops.logs import log_event
from consumer.ops.memory import release_free_memory
from indexstore import IndexCorruptError, IndexOptions, IndexStore

if TYPE_CHECKING:
    # Only the service has metrics: `check` and the benchmarks open the index without
    # importing prometheus_client.
    from consumer.ops.metrics import Metrics

log = logging.getLogger(__name__)

# The index holds the feed's articles and decisions: only the service's own user reads it.
STATE_DIR_MODE = 0o700

# How often the index gauges are refreshed and freed memory is handed back to the OS, in every
# role. What the gauges show changes over minutes (the window filling, the block cache growing
# to its budget), while a trim walks the whole heap (some 50 ms measured for a heap of 100,000
# live blocks): a pause of the loop not worth taking more often. 30 s is also the period the
# memory soak was measured with (consumer/ops/memory.py).
UPKEEP_S = 30.0


def index_options(config: IndexConfig) -> IndexOptions:
    return IndexOptions(
        max_distance=config.max_distance,
        segment_ms=config.segment.ms,
        retention_ms=config.retention.ms,
        future_skew_ms=config.future_skew.ms,
        expected_articles=config.expected_articles,
        memory_bytes=config.memory.bytes,
    )


def open_index(config: IndexConfig, path: str | None = None) -> IndexStore:
    directory = Path(path or config.path)
    ensure_private_dir(directory)
    store = IndexStore.open(
        directory, index_options(config), upgrade=stored.from_legacy, frequencies=STORY_STARTERS
    )
    log_migration(store, directory)
    return store


def log_migration(store: IndexStore, directory: Path) -> None:
    """One line when opening the index brought it to the current format: an operator
    upgrading sees what happened to the state, and that an older version cannot read it."""
    migrated = store.migrated
    if migrated is not None:
        log_event(
            log,
            logging.WARNING,
            f"migrated the index from format {migrated.from_format} to {migrated.to_format}; "
            "older versions of newsdedup cannot open it any more",
            path=str(directory),
            records=migrated.records,
            seconds=round(migrated.seconds, 1),
        )


def ensure_private_dir(directory: Path) -> None:
    """Create `directory` owner-only (RocksDB would create it as the umask allows, usually
    world-readable). An existing directory is the operator's: it is left as it is, with a
    warning when others may read it."""
    try:
        directory.mkdir(parents=True, mode=STATE_DIR_MODE)
    except FileExistsError:
        mode = stat.S_IMODE(directory.stat().st_mode)
        if mode & 0o077:
            log_event(
                log,
                logging.WARNING,
                "the index directory is readable by other users; chmod 700 it",
                path=str(directory),
                mode=oct(mode),
            )
        return
    # mkdir's mode is filtered by the umask, which may be stricter or odd; set it exactly.
    os.chmod(directory, STATE_DIR_MODE)


def damaged_index_message(error: IndexCorruptError) -> str:
    """The line the CLI prints for a damaged index: the directory, and how this project
    rebuilds it, which depends on the role that owns it (the library cannot know)."""
    path = error.path
    if path is None:
        return str(error)
    damaged = f"the index in {path} is damaged ({error.detail})"
    partition = path.parent
    if partition.name.startswith("partition-") and path.name.startswith("domain="):
        # A restore starts at the lowest position of the partition's remaining domains, so
        # moving one domain aside would skip that domain's older records.
        return (
            f"{damaged}. Stop the decide instance, move the whole partition directory aside "
            f"(mv {partition} {partition}.damaged) and start it again: it restores "
            f"{partition.name} from the changelog before deciding it "
            '(README: "A damaged index")'
        )
    return (
        f"{damaged}. Stop the service, move the directory aside (mv {path} {path}.damaged), "
        f"rebuild it with `newsdedup index rebuild --from-feed --state {path}` and start the "
        'service again (README: "A damaged index")'
    )


class IndexUpkeep:
    """The indexes' housekeeping between polls, for one index (`--role all`) or many (the
    decide role's, one per partition and domain): segments that left the window are dropped
    at once; every `UPKEEP_S` the gauges are refreshed, summed over the stores, and freed
    memory is handed back to the OS."""

    def __init__(
        self, stores: Callable[[], Iterable[IndexStore]], metrics: Metrics, logger: logging.Logger
    ) -> None:
        self._stores = stores
        self._metrics = metrics
        self._log = logger
        self._last_refresh = time.monotonic()
        self._memory_parts: set[str] = set()

    def between_polls(self) -> None:
        for store in self._stores():
            if store.expiry_due():
                dropped = store.expire()
                if dropped:
                    self._metrics.segments_expired.inc(len(dropped))
                    log_event(self._log, logging.INFO, "segments expired", segments=dropped)
        if time.monotonic() - self._last_refresh >= UPKEEP_S:
            self.refresh_gauges()
            release_free_memory()

    def refresh_gauges(self) -> None:
        self._last_refresh = time.monotonic()
        articles = segments = disk = 0
        # A part no store reports any more (the decide role gave its partitions up) reads 0.
        memory = Counter(dict.fromkeys(self._memory_parts, 0))
        for store in self._stores():
            stats = store.stats()
            articles += stats.articles
            segments += len(stats.segments)
            disk += stats.disk_bytes
            memory.update(store.memory_usage())
        metrics = self._metrics
        metrics.index_articles.set(articles)
        metrics.index_segments.set(segments)
        metrics.index_disk_bytes.set(disk)
        for part, size in memory.items():
            metrics.index_memory_bytes.labels(part).set(size)
        self._memory_parts = set(memory)
