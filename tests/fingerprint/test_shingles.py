"""Band keys and the bottom-512 shingles record (consumer/fingerprint/shingles.py): the
prototype's definitions, a lossless code, and Jaccard as brute force computes it."""

from __future__ import annotations

import gzip
import json
import random
from itertools import islice

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.corpus import shared_data_dir
from consumer.fingerprint import sketch as sk
from consumer.fingerprint.normalize import Normalizer
from consumer.fingerprint.shingles import (
    BOTTOM,
    band_keys,
    bands_and_shingles,
    bottom_jaccard,
    bottom_jaccard_reference,
    decode_shingles,
    encode_shingles,
    of_text,
)

U32 = st.integers(0, 2**32 - 1)


def prototype_band_keys(minima: np.ndarray, bands: int = 16, rows: int = 3) -> bytes:
    """`Replay.band_keys` of tools/accuracy-prototype, for one article."""
    m = minima[None, : bands * rows].reshape(1, bands, rows)
    h = np.zeros(m.shape[:2], dtype=np.uint64)
    with np.errstate(over="ignore"):
        for r in range(rows):
            h = (h * np.uint64(0x9E3779B97F4A7C15)) ^ m[:, :, r]
        h = sk._fmix64(h + np.arange(bands, dtype=np.uint64))
    return (h >> np.uint64(32)).astype(np.uint32)[0].astype("<u4").tobytes()


def hashes_with_top_bits(values: list[int], rng: random.Random) -> np.ndarray:
    """64-bit shingle hashes whose top 32 bits are `values`, with arbitrary low bits."""
    return np.array([v << 32 | rng.getrandbits(32) for v in values], dtype=np.uint64)


def real_texts(n: int) -> list[str]:
    texts = []
    normalizer = Normalizer()
    for name in ("zh_hkcnews_2017_2022", "zh_cctv_xwlb_2022_2026", "en_reuters21578"):
        with gzip.open(shared_data_dir() / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
            records = [json.loads(line) for line in islice(f, n)]
        for r in records:
            title, content = normalizer.many([r["title"], r["content"]])
            texts.append(f"{title}\n{content}")
    return texts


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return real_texts(100)


def test_band_keys_are_the_prototypes_on_real_text(texts: list[str]) -> None:
    for text in texts:
        minima = sk.bin_minima(sk.shingle_hashes(text)[1])
        assert band_keys(minima) == prototype_band_keys(minima)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), min_size=128, max_size=128))
def test_band_keys_are_the_prototypes_on_any_minima(minima: list[int]) -> None:
    m = np.array(minima, dtype=np.uint64)
    keys = band_keys(m)
    assert len(keys) == 64 and keys == prototype_band_keys(m)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(U32, max_size=1200), kind=st.sampled_from([b"C", b"W"]), seed=st.integers())
def test_shingles_round_trip_the_bottom_512_distinct_top_bits(
    values: list[int], kind: bytes, seed: int
) -> None:
    hashes = hashes_with_top_bits(values, random.Random(seed))
    decoded_kind, decoded = decode_shingles(encode_shingles(kind, hashes))
    assert decoded_kind == kind and decoded.dtype == np.uint32
    assert decoded.tolist() == sorted(set(values))[:BOTTOM]


@settings(max_examples=300, deadline=None)
@given(st.sets(U32, max_size=BOTTOM))
def test_rice_code_round_trips_any_sorted_set_with_the_fewest_bits(values: set[int]) -> None:
    ordered = sorted(values)
    data = encode_shingles(b"C", hashes_with_top_bits(ordered, random.Random(0)))
    assert decode_shingles(data)[1].tolist() == ordered
    if ordered:
        gaps = np.diff(np.array(ordered, dtype=np.int64), prepend=0)
        fewest = min(int((gaps >> r).sum()) + len(gaps) * (1 + r) for r in range(32))
        count_bytes = 1 if len(ordered) < 128 else 2
        assert len(data) == 2 + count_bytes + 1 + (fewest + 7) // 8


def test_extreme_values_round_trip() -> None:
    for values in ([0], [2**32 - 1], [0, 2**32 - 1], [0, 1, 2], list(range(512)), [5] * 9):
        data = encode_shingles(b"W", np.array(values, dtype=np.uint64) << np.uint64(32))
        assert decode_shingles(data)[1].tolist() == sorted(set(values))
    kind, values = decode_shingles(encode_shingles(b"C", np.zeros(0, dtype=np.uint64)))
    assert kind == b"C" and values.size == 0
    assert encode_shingles(b"C", np.zeros(0, dtype=np.uint64)) == b"SC\x00"


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.tuples(st.integers(0, 900), st.integers(0, 600), st.integers(0, 600)),
    seed=st.integers(),
)
def test_bottom_jaccard_is_the_share_in_both_of_what_both_records_know(
    sizes: tuple[int, int, int], seed: int
) -> None:
    """Of every value up to the smaller largest value of the full records (512 values), the
    share in both; all of both sets when neither record is full, and then exact."""
    rng = random.Random(seed)
    values = rng.sample(range(2**32), sum(sizes))
    common, only_a, only_b = (
        set(values[: sizes[0]]),
        set(values[sizes[0] : sizes[0] + sizes[1]]),
        set(values[sizes[0] + sizes[1] :]),
    )
    a, b = common | only_a, common | only_b
    record_a = encode_shingles(b"C", hashes_with_top_bits(sorted(a), rng))
    record_b = encode_shingles(b"C", hashes_with_top_bits(sorted(b), rng))
    got = bottom_jaccard_reference(record_a, record_b)
    assert got == bottom_jaccard(record_a, record_b)
    kept_a, kept_b = sorted(a)[:BOTTOM], sorted(b)[:BOTTOM]
    limit = min([kept[-1] for kept in (kept_a, kept_b) if len(kept) == BOTTOM], default=2**32 - 1)
    known_a = {v for v in kept_a if v <= limit}
    known_b = {v for v in kept_b if v <= limit}
    assert got == (len(known_a & known_b) / len(known_a | known_b) if a | b else 1.0)
    # Never fewer values than the 512 smallest of the union, which a bottom-512 sketch has.
    assert len(known_a | known_b) >= min(BOTTOM, len(a | b))
    if len(a) < BOTTOM and len(b) < BOTTOM:
        exact = len(a & b) / len(a | b) if a | b else 1.0
        assert got == exact


def test_bottom_jaccard_is_exact_when_both_records_hold_every_value() -> None:
    """Two texts of 400 shingles each, 250 of them in common: the records hold all of both,
    though their union (550 values) is more than 512."""
    rng = random.Random(7)
    values = rng.sample(range(2**32), 550)
    a, b = sorted(values[:400]), sorted(values[150:])
    record_a = encode_shingles(b"C", hashes_with_top_bits(a, rng))
    record_b = encode_shingles(b"C", hashes_with_top_bits(b, rng))
    assert bottom_jaccard_reference(record_a, record_b) == 250 / 550
    assert bottom_jaccard(record_a, record_b) == 250 / 550


def test_bottom_jaccard_of_real_copies(texts: list[str]) -> None:
    records = [of_text(text)[1] for text in texts]
    for record in records:
        assert bottom_jaccard_reference(record, record) == 1.0
    # An article and its first half: about half of the shingles shared.
    text = max(texts[:100], key=len)
    half = of_text(text[: len(text) // 2])[1]
    assert 0.3 < bottom_jaccard_reference(of_text(text)[1], half) < 0.7


def test_bottom_jaccard_is_none_when_nothing_compares() -> None:
    chars = encode_shingles(b"C", np.arange(10, dtype=np.uint64) << np.uint64(32))
    words = encode_shingles(b"W", np.arange(10, dtype=np.uint64) << np.uint64(32))
    assert bottom_jaccard_reference(chars, words) is None
    assert bottom_jaccard_reference(b"", chars) is None
    assert bottom_jaccard_reference(chars, b"") is None
    assert bottom_jaccard_reference(chars, chars[:-1]) is None
    assert bottom_jaccard_reference(b"SC\x00", b"SC\x00") == 1.0
    assert bottom_jaccard_reference(b"SC\x00", chars) == 0.0


MALFORMED = [
    b"S",
    b"SC",
    b"XC\x00",  # another format
    b"SX\x00",  # another shingling
    b"SC\x00\x00",  # bytes after an empty record
    b"SC\x80",  # truncated count
    b"SC\x80\x00",  # count not in its shortest form
    b"SC\x81\x04\x05",  # 513 values
    b"SC\x01",  # no Rice parameter
    b"SC\x01\x20\x00",  # Rice parameter 32
    b"SC\x01\x00",  # no code
    b"SC\x01\x00\xff",  # a value's quotient runs off the end
    b"SC\x01\x1f\x00\x00\x00",  # its 31 low bits cut short
    b"SC\x02\x00\x00",  # a zero gap after the first value: not increasing
    b"SC\x01\x00\x01",  # a padding bit set (value 0, then 0b0000001)
    b"SC\x01\x00\x00\x00",  # an extra byte
]


@pytest.mark.parametrize("data", MALFORMED)
def test_malformed_records_are_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_shingles(data)
    good = encode_shingles(b"C", np.arange(3, dtype=np.uint64) << np.uint64(32))
    assert bottom_jaccard_reference(data, good) is None
    assert bottom_jaccard_reference(good, data) is None


def test_a_value_beyond_32_bits_is_refused() -> None:
    # Two values, Rice parameter 31: 2**31 + (2**31 - 1), then a gap of 1 overflows 32 bits.
    bits = "10" + "1" * 31 + "0" + "0" * 30 + "1"
    data = b"SC\x02\x1f" + int(bits.ljust(72, "0"), 2).to_bytes(9)
    with pytest.raises(ValueError, match="32 bits"):
        decode_shingles(data)


@settings(max_examples=2000, deadline=None)
@given(
    prefix=st.sampled_from([b"", b"S", b"SC", b"SW", b"SC\x05", b"SW\x84\x02"]),
    data=st.binary(max_size=80),
)
def test_random_bytes_decode_or_raise_value_error(prefix: bytes, data: bytes) -> None:
    try:
        kind, values = decode_shingles(prefix + data)
    except ValueError:
        return
    # Whatever decodes is a record: it encodes back to the same bytes, or with another Rice
    # parameter than the encoder's, to the same values.
    assert kind in (b"C", b"W")
    assert (
        decode_shingles(encode_shingles(kind, values.astype(np.uint64) << np.uint64(32)))[
            1
        ].tolist()
        == values.tolist()
    )
    assert np.all(np.diff(values.astype(np.int64)) > 0)


def test_text_without_shingles_has_no_bands_and_no_shingles() -> None:
    assert bands_and_shingles(b"W", np.zeros(0, dtype=np.uint64), np.zeros(128, np.uint64)) == (
        b"",
        b"",
    )
    bands, shingles = of_text("香港立法会")
    assert len(bands) == 64 and decode_shingles(shingles)[1].size == 1
