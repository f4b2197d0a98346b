"""The compiled key tally against its Counter reference: the same counts after the same adds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
