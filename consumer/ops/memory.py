"""Giving memory that the process has freed back to the operating system, and collecting
reference cycles at a pace that suits a process holding a large working set.

RocksDB allocates a memtable in blocks of a few MiB and frees them all when the memtable is
flushed. glibc keeps such freed blocks in its heaps for reuse, where they still count as
resident: in a soak the service's RSS rose after every flush instead of falling back, which
looks like a leak from outside. `malloc_trim(0)` returns the free pages of every heap.
"""

from __future__ import annotations

import ctypes
import gc
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


# Allocations of container objects between two young-generation collections (CPython's
# default is 700). Deciding an article allocates a few hundred (parsed JSON, matches,
# records), so at the default a collection ran every few articles, and one in a hundred was
# a full one, walking every cached record of the batch: 5 % of `check`'s CPU time on the
# eval feeds (0.37 of ~7 CPU-s, measured with gc.callbacks), 0.03–0.07 s at this threshold.
# Cyclic garbage is rare here; what it can hold back is bounded by this many objects.
YOUNG_COLLECTION_THRESHOLD = 100_000


def collect_cycles_less_often() -> None:
    """Raise the young-generation threshold of the cycle collector (the older generations
    keep their ratios): for every process that fingerprints or decides."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, old)
