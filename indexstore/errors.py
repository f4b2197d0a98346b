"""Errors raised by the index; each message says what to do about it."""


class IndexStoreError(Exception):
    """Base class of every error the index raises on purpose."""


class IndexLockedError(IndexStoreError):
    """Another process (or another open IndexStore in this one) holds the directory."""


class IndexFormatError(IndexStoreError):
    """The directory was written with another format, k or segment width, or is no index."""


class IndexStateError(IndexStoreError):
    """The call does not fit the store's state: closed, read-only, or a batch already open."""
