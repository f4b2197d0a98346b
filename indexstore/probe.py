"""The probe: every key of one run of one table within Hamming distance k of a batch of
queries, among the buckets near each query's. The compiled kernel (`indexstore/native/`) does
it where it is built, `probe_reference` in NumPy elsewhere (the tests hold the two to the same
hits). Pure array functions, apart from the search tables (tables.py) that call them.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator

import numpy as np

from indexstore.layout import FINGERPRINT_BITS

# The compiled kernel's signature (indexstore/_probe.pyi): queries, offsets, keys, masks, bits, k.
ProbeKernel = Callable[
    [np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int], tuple[bytes, bytes, bytes]
]

try:
    from indexstore._probe import probe as _compiled_probe

    _native_probe: ProbeKernel | None = _compiled_probe
except ImportError:
    # Installed from source without cargo: `probe_reference` finds the same hits, slower.
    _native_probe = None

NATIVE_PROBE = _native_probe is not None

# Queries x rows compared at once by a plain scan: bounds the hits of a chunk (24 B each)
# when many rows hold one fingerprint.
SCAN_CHUNK = 1 << 20

_EMPTY = np.empty(0, dtype=np.int64)
_NO_MASK = np.zeros(1, dtype=np.uint64)


def pairs_within(probes: np.ndarray, keys: np.ndarray, k: int) -> Iterator[tuple[np.ndarray, ...]]:
    """(probe index, key index, distance) of every probe and key within distance k, a chunk
    of probes at a time: all of a probe's pairs come in one chunk. The probe kernel with one
    bucket holding every key."""
    whole = np.array([0, len(keys)], dtype=np.int64)
    step = max(1, SCAN_CHUNK // max(len(keys), 1))
    for lo in range(0, len(probes), step):
        q, i, d = probe(probes[lo : lo + step], whole, keys, _NO_MASK, 0, k)
        yield q + lo, i, d


def bucket(permuted: np.ndarray, bits: int) -> np.ndarray:
    """The top `bits` bits of permuted fingerprints (a shift by 64 is undefined in numpy)."""
    if not bits:
        return np.zeros(len(permuted), dtype=np.uint64)
    return permuted >> np.uint64(FINGERPRINT_BITS - bits)


@functools.lru_cache(maxsize=256)
def probe_masks(bits: int, radius: int) -> np.ndarray:
    """Every value of `bits` bits with at most `radius` bits set (XOR masks of the probes)."""
    masks = [0]
    for weight in range(1, min(radius, bits) + 1):
        for chosen in itertools.combinations(range(bits), weight):
            masks.append(sum(1 << b for b in chosen))
    return np.array(masks, dtype=np.uint64)


def probe(
    queries: np.ndarray,
    offsets: np.ndarray,
    keys: np.ndarray,
    masks: np.ndarray,
    bits: int,
    k: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query index, key position, distance) of every key of one run of one table within
    distance k of a query, among the buckets within the probe radius of the query's (its
    bucket XOR each of `masks`). The native kernel (`indexstore/native/`); `probe_reference`
    is the same in NumPy, which the tests hold it to, and runs where the kernel is not built."""
    arrays = (
        np.ascontiguousarray(queries, dtype=np.uint64),
        np.ascontiguousarray(offsets, dtype=np.int64),
        np.ascontiguousarray(keys, dtype=np.uint64),
        np.ascontiguousarray(masks, dtype=np.uint64),
    )
    if _native_probe is None:
        return probe_reference(*arrays, bits, k)
    query, position, distance = _native_probe(*arrays, bits, k)
    return (
        np.frombuffer(query, dtype=np.int64),
        np.frombuffer(position, dtype=np.int64),
        np.frombuffer(distance, dtype=np.int64),
    )


def probe_reference(
    queries: np.ndarray,
    offsets: np.ndarray,
    keys: np.ndarray,
    masks: np.ndarray,
    bits: int,
    k: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`probe` in NumPy, hits in the same order: query after query, mask after mask."""
    buckets = (bucket(queries, bits)[:, None] ^ masks[None, :]).ravel()
    counts, pos = _ranges(offsets, buckets)
    if not len(pos):
        return _EMPTY, _EMPTY, _EMPTY
    # Candidates outnumber hits by far: find which probe a hit came from only for the hits.
    d = np.bitwise_count(keys[pos] ^ np.repeat(np.repeat(queries, len(masks)), counts))
    close = np.flatnonzero(d <= k)
    which = np.searchsorted(np.cumsum(counts), close, side="right")
    return (which // len(masks)).astype(np.int64), pos[close], d[close].astype(np.int64)


def _ranges(offsets: np.ndarray, buckets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows in each probe's bucket, every position in them, probe after probe)."""
    index = buckets.astype(np.intp)
    lo = offsets[index]
    counts = offsets[index + 1] - lo
    total = int(counts.sum())
    if not total:
        return counts, _EMPTY
    # Position of each candidate: its range start plus its offset inside the range.
    before = np.cumsum(counts) - counts
    pos = np.repeat(lo - before, counts) + np.arange(total)
    return counts, pos
