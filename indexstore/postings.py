"""The rows of one batch by each 32-bit key they are posted under: the rare-key candidates
among a batch's own rows. The compiled kernel (`indexstore/native/src/postings.rs`) keeps them
where it is built: a row brings up to 64 keys, and a dict pays for each an object (and the
garbage collector a walk of them). `ReferencePostings`, on a dict, does it elsewhere; the tests
hold the two to the same answers, in the same order. It may import numpy only.
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

import numpy as np


class Postings(Protocol):
    def add(self, row: int, keys: np.ndarray) -> None: ...

    def sharing(self, keys: np.ndarray, min_shared: int) -> list[tuple[int, int]]: ...


class ReferencePostings:
    """The rows by key in a dict: a key of one row maps to that row (an int, which the garbage
    collector does not walk: most keys are one row's), a key of several to a list of them."""

    __slots__ = ("_rows",)

    def __init__(self) -> None:
        self._rows: dict[int, int | list[int]] = {}

    def add(self, row: int, keys: np.ndarray) -> None:
        """Post `row` under each of `keys`, which are distinct (a row's distinct values)."""
        rows = self._rows
        for key in keys.tolist():
            held = rows.get(key)
            if held is None:
                rows[key] = row
            elif isinstance(held, int):
                rows[key] = [held, row]
            else:
                held.append(row)

    def sharing(self, keys: np.ndarray, min_shared: int) -> list[tuple[int, int]]:
        """(row, how many of `keys` it is posted under) of the rows posted under at least
        `min_shared` of these distinct keys, in the order a row is first named (through `keys`
        in turn, each key's rows in the order they were added)."""
        found = [rows for rows in map(self._rows.get, keys.tolist()) if rows is not None]
        if len(found) < min_shared:
            return []
        shared: Counter[int] = Counter()
        for rows in found:
            if isinstance(rows, int):
                shared[rows] += 1
            else:
                shared.update(rows)
        return [(row, n) for row, n in shared.items() if n >= min_shared]


class NativePostings:
    """The rows by key in the compiled kernel's table."""

    __slots__ = ("_postings",)

    def __init__(self) -> None:
        assert _KernelPostings is not None
        self._postings = _KernelPostings()

    def add(self, row: int, keys: np.ndarray) -> None:
        self._postings.add(row, np.ascontiguousarray(keys, dtype=np.uint32))

    def sharing(self, keys: np.ndarray, min_shared: int) -> list[tuple[int, int]]:
        rows, counts = self._postings.sharing(
            np.ascontiguousarray(keys, dtype=np.uint32), min_shared
        )
        if not rows:
            return []
        return list(
            zip(
                np.frombuffer(rows, dtype=np.int64).tolist(),
                np.frombuffer(counts, dtype=np.int64).tolist(),
                strict=True,
            )
        )


_KernelPostings: type | None
try:
    from indexstore._probe import KeyPostings

    _KernelPostings = KeyPostings
except ImportError:  # installed from source without cargo
    _KernelPostings = None

NATIVE_POSTINGS = _KernelPostings is not None


def new_postings() -> Postings:
    return NativePostings() if NATIVE_POSTINGS else ReferencePostings()
