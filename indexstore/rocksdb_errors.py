"""Translation of what RocksDB raises into the index's own errors (indexstore.errors).

RocksDB raises plain Exceptions carrying its status text; stored bytes that do not decode raise
struct or Unicode errors. Both become errors that name the directory and what to do. Imports
only indexstore.errors.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from types import TracebackType

from indexstore.errors import IndexCorruptError, IndexStoreError, IndexWriteError


class RocksDBErrors:
    """`with errors:` (one per open store) turns what RocksDB raises (plain Exceptions
    carrying its status text) and stored bytes that do not decode into the index's own errors,
    which name the directory and what to do. Other exceptions pass unchanged."""

    __slots__ = ("failed", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        # Whether an error was translated. Not the error itself: its traceback holds frames
        # whose column family handles would keep the database, and its lock, alive.
        self.failed = False

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            return
        if isinstance(exc, IndexCorruptError) and exc.path is None:
            error: IndexStoreError | None = IndexCorruptError(exc.detail, self.path)
        else:
            error = index_error(self.path, exc)
        if error is None:
            return
        self.failed = True
        try:
            raise error from exc
        finally:
            # This frame would hold the error that holds this frame: a cycle that keeps the
            # failed call's column family handles, and so the database's lock, until the
            # garbage collector runs; a reopen in this process would find the lock held.
            del error, exc, tb


def index_error(path: Path, e: BaseException) -> IndexStoreError | None:
    """The index's error for what RocksDB (or decoding its bytes) raised, or None when `e`
    came from elsewhere."""
    # Only decoding errors: a bad argument (an id that cannot be encoded) is the caller's.
    if isinstance(e, struct.error | UnicodeDecodeError):
        return IndexCorruptError(f"a stored value does not decode: {e}", path)
    if type(e) is not Exception:  # rocksdict raises exactly Exception; anything else is ours
        return None
    detail = " ".join(str(e).split())  # RocksDB's messages span lines; errors are one line
    if "Corruption" in detail:
        return IndexCorruptError(f"RocksDB: {detail}", path)
    if "No space left on device" in detail or "NoSpace" in detail:
        try:
            free = f"{shutil.disk_usage(path).free:,} bytes free"
        except OSError:
            free = "free space unknown"
        return IndexWriteError(
            f"the index in {path} cannot be written: its filesystem is full ({free}; RocksDB: "
            f"{detail}). Nothing of the refused write is in the index: free space there, then "
            "reopen the index (restart the service); it continues from its last committed batch"
        )
    if "IO error" in detail:
        return IndexWriteError(
            f"RocksDB failed to read or write the index in {path} (RocksDB: {detail}); check "
            "the disk and the directory's permissions, then reopen the index (restart the "
            "service): it continues from its last committed batch"
        )
    return IndexStoreError(f"RocksDB failed on the index in {path}: {detail}")
