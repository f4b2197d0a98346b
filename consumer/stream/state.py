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
from consumer.deciding.boilerplate import STORY_STARTERS
from consumer.ops.logs import log_event
from consumer.ops.memory import release_free_memory
from indexstore import IndexCorruptError, IndexOptions, IndexStore, IndexVersionError

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
        max_table_bytes=config.max_table_bytes,
        memory_bytes=config.memory.bytes,
    )


def open_index(config: IndexConfig, path: str | None = None) -> IndexStore:
    directory = Path(path or config.path)
    ensure_private_dir(directory)
    return IndexStore.open(directory, index_options(config), frequencies=STORY_STARTERS)


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


def unusable_index_message(error: IndexCorruptError | IndexVersionError) -> str:
    """The line the CLI prints for an index that must be rebuilt (damaged, or of another
    format): the directory, and how this project rebuilds it, which depends on the role that
    owns it (the library cannot know)."""
    path = error.path
    if path is None:
        return str(error)
    if isinstance(error, IndexCorruptError):
        what = f"the index in {path} is damaged ({error.detail})"
        aside, see = "damaged", ' (README: "A damaged index")'
    else:
        what = f"the index in {path} is of format {error.found}, which this version does not read"
        aside, see = "old", ""
    partition = path.parent
    if partition.name.startswith("partition-") and path.name.startswith("domain="):
        # A restore starts at the lowest position of the partition's remaining domains, so
        # moving one domain aside would skip that domain's older records.
        return (
            f"{what}. Stop the decide instance, move the whole partition directory aside "
            f"(mv {partition} {partition}.{aside}) and start it again: it restores "
            f"{partition.name} from the changelog before deciding it{see}"
        )
    return (
        f"{what}. Stop the service, move the directory aside (mv {path} {path}.{aside}), "
        f"rebuild it with `newsdedup index rebuild --from-feed --state {path}` and start the "
        f"service again{see}"
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
