"""Opening the index with the service's configuration."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from consumer.config import IndexConfig, parse_duration_ms, parse_size_bytes
from consumer.logs import log_event
from indexstore import IndexOptions, IndexStore

log = logging.getLogger(__name__)

# The index holds the feed's articles and decisions: only the service's own user reads it.
STATE_DIR_MODE = 0o700


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
    directory = Path(path or config.path)
    ensure_private_dir(directory)
    return IndexStore.open(directory, index_options(config))


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
