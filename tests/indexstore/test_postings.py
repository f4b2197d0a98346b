"""The rows of a batch by posted key against their dict reference: the compiled postings name
the same rows, with the same counts, in the same order, after the same posts."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexstore.postings import NATIVE_POSTINGS, NativePostings, ReferencePostings

KEYS = st.integers(0, 2**32 - 1) | st.integers(0, 30)
# A row is posted under distinct keys (its distinct shingle values), and asked for distinct
# keys: the contract both keep.
posts = st.lists(st.lists(KEYS, max_size=40, unique=True), max_size=30)
asks = st.lists(KEYS, max_size=60, unique=True)


@pytest.mark.skipif(not NATIVE_POSTINGS, reason="the compiled kernel is not built")
@settings(max_examples=300, deadline=None)
@given(posts, asks, st.integers(1, 4))
def test_the_kernel_names_what_the_reference_names(
    rows: list[list[int]], asked: list[int], min_shared: int
) -> None:
    native, reference = NativePostings(), ReferencePostings()
    for row, keys in enumerate(rows):
        array = np.array(keys, dtype=np.uint32)
        native.add(row, array)
        reference.add(row, array)
    for query in (asked, list(dict.fromkeys(k for keys in rows for k in keys))[:60]):
        array = np.array(query, dtype=np.uint32)
        assert native.sharing(array, min_shared) == reference.sharing(array, min_shared)


@settings(max_examples=200, deadline=None)
@given(posts, asks, st.integers(1, 4))
def test_the_reference_counts_each_row_once_per_key_naming_it(
    rows: list[list[int]], asked: list[int], min_shared: int
) -> None:
    reference = ReferencePostings()
    for row, keys in enumerate(rows):
        reference.add(row, np.array(keys, dtype=np.uint32))
    want = Counter(row for key in asked for row, keys in enumerate(rows) for k in keys if k == key)
    got = dict(reference.sharing(np.array(asked, dtype=np.uint32), min_shared))
    assert got == {row: n for row, n in want.items() if n >= min_shared}
