"""Errors raised by the index; each message says what to do about it."""


class IndexStoreError(Exception):
    """Base class of every error the index raises on purpose."""
