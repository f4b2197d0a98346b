"""The key counts against their Counter reference: the compiled tally and the sorted arrays
(the window's table without the kernel) give the same counts after the same adds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexstore.frequencies import KeyCounts
from indexstore.tally import NATIVE_TALLY, NativeTally, ReferenceTally

changes = st.lists(
    st.tuples(
        st.lists(st.integers(0, 2**32 - 1) | st.integers(0, 50), max_size=40),
        st.sampled_from([1, -1, 2]),
    ),
    max_size=30,
)


@pytest.mark.skipif(not NATIVE_TALLY, reason="the compiled kernel is not built")
@settings(max_examples=300, deadline=None)
@given(changes, st.lists(st.integers(0, 2**32 - 1) | st.integers(0, 50), max_size=60))
def test_the_kernel_counts_what_the_reference_counts(
    made: list[tuple[list[int], int]], asked: list[int]
) -> None:
    native, reference = NativeTally(), ReferenceTally()
    for keys, sign in made:
        array = np.array(keys, dtype=np.uint32)
        native.add(array, sign)
        reference.add(array, sign)
    query = np.array(asked + [k for keys, _ in made for k in keys], dtype=np.uint32)
    assert native.get(query).tolist() == reference.get(query).tolist()


def test_the_reference_counts_repeats_and_removals() -> None:
    tally = ReferenceTally()
    tally.add(np.array([5, 5, 7], dtype=np.uint32), 1)
    tally.add(np.array([5], dtype=np.uint32), -1)
    tally.add(np.array([9], dtype=np.uint32), 2)
    assert tally.get(np.array([5, 7, 9, 11], dtype=np.uint32)).tolist() == [1, 1, 2, 0]


# The window counts what its live rows carry: every removal follows an addition of its key.
window_changes = st.lists(
    st.lists(st.integers(0, 2**32 - 1) | st.integers(0, 50), min_size=1, max_size=40),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(window_changes, st.data())
def test_window_counts_match_the_reference_and_forget_keys_at_zero(
    rows: list[list[int]], data: st.DataObject
) -> None:
    """Rows added, then some removed again: every table counts alike, and a key no live row
    carries takes no room in the compiled table nor in the arrays."""
    tables = [KeyCounts(), ReferenceTally()] + ([NativeTally()] if NATIVE_TALLY else [])
    removed = data.draw(st.sets(st.integers(0, max(len(rows) - 1, 0))))
    arrays = [np.array(keys, dtype=np.uint32) for keys in rows]
    for array in arrays:
        for table in tables:
            table.add(array, 1)
    for i in sorted(removed):
        if i < len(arrays):
            for table in tables:
                table.add(arrays[i], -1)
    query = np.array(sorted({k for keys in rows for k in keys} | {7, 2**31}), dtype=np.uint32)
    expected = tables[1].get(query).tolist()
    for table in tables:
        assert table.get(query).tolist() == expected, type(table).__name__
    live = sum(1 for count in expected if count)
    assert len(tables[0]) == live
    if NATIVE_TALLY:
        assert len(tables[2]) == live
