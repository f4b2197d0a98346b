"""Giving memory that the process has freed back to the operating system.

RocksDB allocates a memtable in blocks of a few MiB and frees them all when the memtable is
flushed. glibc keeps such freed blocks in its heaps for reuse, where they still count as
resident: in a soak the service's RSS rose after every flush instead of falling back, which
looks like a leak from outside. `malloc_trim(0)` returns the free pages of every heap.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable


def _find_malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None).malloc_trim  # glibc only; musl and others have none
    except (OSError, AttributeError):
        return None


_MALLOC_TRIM = _find_malloc_trim()


def release_free_memory() -> bool:
    """Return freed heap memory to the OS; False where the C library cannot."""
    if _MALLOC_TRIM is None:
        return False
    _MALLOC_TRIM(0)
    return True
