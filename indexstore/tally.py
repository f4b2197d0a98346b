"""A running count per 32-bit key: what a batch's puts add to the key frequencies, asked for a
few dozen keys at a time between puts. The compiled kernel (`indexstore/native/src/tally.rs`)
keeps it where it is built: a row brings up to 128 keys, and a dict pays for each an object.
`ReferenceTally`, on `collections.Counter`, does it elsewhere; the tests hold the two to the same
counts. It may import numpy only.
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

import numpy as np


class Tally(Protocol):
    def add(self, keys: np.ndarray, sign: int) -> None: ...

    def get(self, keys: np.ndarray) -> np.ndarray: ...

    def memory_bytes(self) -> int: ...


# Roughly, per key counted: a dict's entry with its two int objects; a slot of the kernel's
# hash table (a u32 key and an i64 count, padded to 16 bytes, at most 7/8 full).
_DICT_ENTRY_BYTES = 100
_TABLE_ENTRY_BYTES = 19


class ReferenceTally:
    """The counts in a Counter: its update and subtract count in C, a key at a time."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: Counter[int] = Counter()

    def add(self, keys: np.ndarray, sign: int) -> None:
        listed = keys.tolist()
        for _ in range(abs(sign)):
            if sign > 0:
                self._counts.update(listed)
            else:
                self._counts.subtract(listed)

    def get(self, keys: np.ndarray) -> np.ndarray:
        get = self._counts.get
        listed = keys.tolist()
        return np.fromiter((get(k, 0) for k in listed), np.int64, len(listed))

    def memory_bytes(self) -> int:
        return _DICT_ENTRY_BYTES * len(self._counts)


class NativeTally:
    """The counts in the compiled kernel's table."""

    __slots__ = ("_tally",)

    def __init__(self) -> None:
        assert _KernelTally is not None
        self._tally = _KernelTally()

    def add(self, keys: np.ndarray, sign: int) -> None:
        self._tally.add(np.ascontiguousarray(keys, dtype=np.uint32), sign)

    def get(self, keys: np.ndarray) -> np.ndarray:
        raw = self._tally.get(np.ascontiguousarray(keys, dtype=np.uint32))
        return np.frombuffer(raw, dtype=np.int64).copy()

    def memory_bytes(self) -> int:
        return _TABLE_ENTRY_BYTES * len(self._tally)

    def __len__(self) -> int:
        return len(self._tally)


_KernelTally: type | None
try:
    from indexstore._probe import KeyTally

    _KernelTally = KeyTally
except ImportError:  # installed from source without cargo
    _KernelTally = None

NATIVE_TALLY = _KernelTally is not None


def new_tally() -> Tally:
    return NativeTally() if NATIVE_TALLY else ReferenceTally()
