"""Opening the index with the service's configuration."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from consumer.config import IndexConfig
from consumer.deciding import stored
from consumer.ops.logs import log_event
from indexstore import IndexCorruptError, IndexOptions, IndexStore

log = logging.getLogger(__name__)

# The index holds the feed's articles and decisions: only the service's own user reads it.
STATE_DIR_MODE = 0o700


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
    store = IndexStore.open(directory, index_options(config), upgrade=stored.from_legacy)
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
