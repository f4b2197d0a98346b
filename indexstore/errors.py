"""Errors raised by the index; each message says what to do about it."""

from __future__ import annotations

from pathlib import Path


class IndexStoreError(Exception):
    """Base class of every error the index raises on purpose."""


class IndexLockedError(IndexStoreError):
    """Another process (or another open IndexStore in this one) holds the directory."""


class IndexFormatError(IndexStoreError):
    """The directory was written with another format, k or segment width, or is no index."""


class IndexVersionError(IndexFormatError):
    """The directory holds an index of another format than this version's. Nothing converts
    one: it is rebuilt in a new directory, or opened with the version that wrote it."""

    def __init__(self, found: object, expected: int, path: Path) -> None:
        self.found = found
        self.path = path
        super().__init__(
            f"the index in {path} is of format {found}, which this version does not read (it "
            f"reads format {expected}); rebuild the index in a new directory by replaying the "
            "feed, or open it with the version that wrote it"
        )


class IndexCorruptError(IndexFormatError):
    """The directory is damaged: RocksDB reports corruption, a file it needs is missing, or
    stored bytes do not decode. Using it anyway could answer wrongly, so it is refused."""

    def __init__(self, detail: str, path: Path | None = None) -> None:
        self.detail = detail
        self.path = path
        where = "the index" if path is None else f"the index in {path}"
        super().__init__(
            f"{where} is damaged ({detail}); it cannot be used as it is: move the directory "
            'aside and rebuild the index (README: "A damaged index")'
        )


class IndexWriteError(IndexStoreError):
    """RocksDB refused a write (disk full, I/O error). Nothing of the refused write is in the
    index; the directory holds every batch committed before it. Close the store and reopen it
    once the cause is gone; to reopen in the same process, drop the error first: its traceback
    holds the failed call's RocksDB handles, which keep the directory locked."""


class IndexStateError(IndexStoreError):
    """The call does not fit the store's state: closed, read-only, or a batch already open."""
