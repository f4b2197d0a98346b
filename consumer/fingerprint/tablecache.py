"""Tables derived from slow sources (the IDF file, the running Python's Unicode database),
kept on disk so that a new worker process loads them in milliseconds instead of rebuilding
them: rebuilding is ~0.25 s of every worker's start, most of `newsdedup check`'s start-up
(benchmarks/history/2026-11-24.md, "`check` at five times MinHash's speed").

An entry is named by a digest of everything its content depends on, so a changed source is
never answered from a stale entry. A missing, unreadable or corrupt entry is rebuilt, and a
directory that cannot be written costs only the rebuild: the cache can be deleted at any time.
Directory: $XDG_CACHE_HOME/newsdedup/tables, else ~/.cache/newsdedup/tables (not set by a
NEWSDEDUP_* variable: those are configuration, and each names an option).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import tempfile
import unicodedata
from collections.abc import Callable
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

# Part of every digest: a change to how any table is derived bumps it.
FORMAT = b"newsdedup-tables-1"

Arrays = dict[str, np.ndarray]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "newsdedup" / "tables"


def unicode_version() -> bytes:
    """What tables derived from `unicodedata` and `re` depend on."""
    return f"{unicodedata.unidata_version}/{sys.maxunicode}/{sys.version_info[:2]}".encode()


def cached(
    name: str, depends_on: bytes, names: tuple[str, ...], build: Callable[[], Arrays]
) -> Arrays:
    """`build()`'s arrays (exactly `names`), from the cache when an entry for `depends_on` is
    there; `build` is called, and its result stored, only when it is not."""
    directory = cache_dir()
    digest = hashlib.sha256(b"\0".join([FORMAT, name.encode(), depends_on])).hexdigest()[:32]
    path = directory / f"{name}-{digest}.npz"
    try:
        with np.load(path, allow_pickle=False) as stored:
            if sorted(stored.files) == sorted(names):
                return {n: stored[n] for n in names}
        log.warning("table cache %s holds other arrays than expected; rebuilding it", path)
    except FileNotFoundError:
        pass
    except Exception as e:  # a damaged entry of any kind must only cost a rebuild
        log.warning("table cache %s is unreadable (%s); rebuilding it", path, e)
    arrays = build()
    _store(path, arrays)
    return arrays


def _store(path: Path, arrays: Arrays) -> None:
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        # Whole or not at all: workers starting together may write the same entry at once.
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        log.debug("table cache %s not written (%s): tables are rebuilt at each start", path, e)
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
