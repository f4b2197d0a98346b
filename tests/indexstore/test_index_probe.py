"""The native probe kernel (indexstore/native/) finds exactly what its NumPy reference finds,
in the same order, and refuses arrays that do not describe a run."""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from indexstore._probe import probe as native_probe
from indexstore.probe import probe, probe_masks, probe_reference


def bucketed(keys: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys and the start of every bucket (their top `bits` bits) among them,
    as a run holds them."""
    keys = np.unique(keys.astype(np.uint64))
    buckets = keys >> np.uint64(64 - bits) if bits else np.zeros(len(keys), dtype=np.uint64)
    counts = np.bincount(buckets.astype(np.intp), minlength=1 << bits)
    return keys, np.concatenate(([0], np.cumsum(counts))).astype(np.int64)


@st.composite
def runs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int]:
    """A run and queries near its keys: each query is a key (or a random value) with a few
    bits flipped, so every distance from 0 up is met, not only ~32."""
    bits = draw(st.integers(0, 8))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 2**64, draw(st.integers(0, 400)), dtype=np.uint64)
    keys, offsets = bucketed(keys, bits)
    queries = []
    for _ in range(draw(st.integers(0, 40))):
        base = keys[rng.integers(len(keys))] if len(keys) and rng.random() < 0.8 else None
        value = int(base) if base is not None else int(rng.integers(0, 2**64, dtype=np.uint64))
        for bit in rng.choice(64, size=int(rng.integers(0, 20)), replace=False):
            value ^= 1 << int(bit)
        queries.append(value)
    masks = probe_masks(bits, draw(st.integers(0, min(bits, 3))))
    k = draw(st.integers(0, 64))
    return np.array(queries, dtype=np.uint64), offsets, keys, masks, bits, k


@settings(max_examples=400, deadline=None)
@given(runs())
def test_the_kernel_finds_what_numpy_finds_in_the_same_order(run) -> None:
    got = probe(*run)
    expected = probe_reference(*run)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)


def test_every_key_within_k_of_a_probed_bucket_is_found() -> None:
    """Independent of both: bits = 0 is one bucket holding every key, so the hits are every
    (query, key) within k, found by brute force, in query then key order (the scan's)."""
    rng = np.random.default_rng(7)
    keys, offsets = bucketed(rng.integers(0, 2**64, 500, dtype=np.uint64), 0)
    queries = keys[:50] ^ np.uint64(0b1011)  # three bits from a key at least
    query, position, distance = probe(queries, offsets, keys, probe_masks(0, 0), 0, 12)
    d = np.bitwise_count(queries[:, None] ^ keys[None, :])
    qi, ki = np.nonzero(d <= 12)
    assert list(zip(query.tolist(), position.tolist(), strict=True)) == list(
        zip(qi.tolist(), ki.tolist(), strict=True)
    )
    assert (distance == np.bitwise_count(queries[query] ^ keys[position])).all()
    assert len(query) >= 50


def test_strided_and_other_typed_arrays_are_taken_as_their_values() -> None:
    rng = np.random.default_rng(3)
    keys, offsets = bucketed(rng.integers(0, 2**64, 300, dtype=np.uint64), 4)
    queries = np.repeat(keys[:20], 2)[::2]  # a view with a stride of two elements
    assert not queries.flags.c_contiguous
    masks = probe_masks(4, 1)
    expected = probe_reference(queries.copy(), offsets, keys, masks, 4, 10)
    got = probe(queries, offsets.astype(np.int32), keys, masks, 4, 10)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"offsets": np.array([0, 1], dtype=np.int64)}, "not one more than the buckets"),
        ({"masks": np.array([16], dtype=np.uint64)}, "wider than the buckets"),
        ({"offsets": np.array([0] + [999] * 16, dtype=np.int64)}, "outside the keys"),
        ({"offsets": np.array([0, -1] + [0] * 15, dtype=np.int64)}, "outside the keys"),
        ({"bits": 64}, "below 64"),
    ],
)
def test_arrays_that_do_not_describe_a_run_are_refused(change, message) -> None:
    keys, offsets = bucketed(np.arange(1, 100, dtype=np.uint64) << np.uint64(58), 4)
    args = {
        "queries": keys[:5].copy(),
        "offsets": offsets,
        "keys": keys,
        "masks": probe_masks(4, 1),
        "bits": 4,
        "k": 8,
    }
    args.update(change)
    with pytest.raises(ValueError, match=message):
        native_probe(*args.values())
