"""The native kernel (consumer/native/) gives the pure-Python path's fingerprints, bit for bit."""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import sys
from itertools import islice
from pathlib import Path

import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer._fastfp import Kernel, bottom_jaccard, decode_shingles, encode_shingles
from consumer.corpus import shared_data_dir
from consumer.errors import NewsdedupError
from consumer.fingerprint import shingles
from consumer.fingerprint.fingerprinter import Fingerprinter, FingerprintOptions
from consumer.fingerprint.idf import DocumentFrequencies
from consumer.fingerprint.kernel import load_kernel
from consumer.fingerprint.normalize import Normalizer
from consumer.fingerprint.sketch import sketch
from consumer.fingerprint.terms import _WORD_CHAR, word_char_bitmap


def _items(name: str, n: int) -> list[tuple[str, str]]:
    with gzip.open(shared_data_dir() / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in islice(f, n)]
    return [(r["title"], r["content"]) for r in records]


@pytest.fixture(scope="module")
def real_text() -> list[tuple[str, str]]:
    return (
        _items("zh_hkcnews_2017_2022", 1000)
        + _items("zh_cctv_xwlb_2022_2026", 300)
        + _items("en_reuters21578", 300)
    )


def test_murmur3_is_mmh3() -> None:
    cases = [os.urandom(n) for n in range(80)] + ["香港立法会".encode(), b"\x00" * 33]
    for data in cases:
        for seed in (0, 1, 0xFFFFFFFF):
            assert Kernel.murmur3_x64_128(data, seed) == mmh3.hash_bytes(data, seed), (data, seed)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), seed=st.integers(0, 2**32 - 1))
def test_murmur3_is_mmh3_on_any_bytes(data: bytes, seed: int) -> None:
    assert Kernel.murmur3_x64_128(data, seed) == mmh3.hash_bytes(data, seed)


def test_word_char_bitmap_is_the_word_regex() -> None:
    bitmap = word_char_bitmap()
    word_char = re.compile(_WORD_CHAR)
    for cp in [*range(0, 0x3000), *range(0x4DB0, 0x4E10), *range(0xFF00, 0xFFFF), 0x1D400]:
        expected = word_char.match(chr(cp)) is not None
        assert bool(bitmap[cp >> 3] >> (cp & 7) & 1) == expected, hex(cp)
    assert len(bitmap) * 8 == sys.maxunicode + 1


@pytest.mark.parametrize(
    "options",
    [
        FingerprintOptions(),
        FingerprintOptions(max_terms=None),
        FingerprintOptions(max_terms=1),
        FingerprintOptions(max_terms=5),
        FingerprintOptions(title_weight=2.5),
        FingerprintOptions(title_weight=0.0),
        FingerprintOptions(convert_traditional=False),
    ],
    ids=[
        "default",
        "all terms",
        "max_terms=1",
        "max_terms=5",
        "title_weight=2.5",
        "title_weight=0",
        "no conversion",
    ],
)
def test_native_equals_python_on_real_text(
    real_text: list[tuple[str, str]], options: FingerprintOptions
) -> None:
    native = Fingerprinter(options)
    python = Fingerprinter(options, native=False)
    assert native._kernel is not None and python._kernel is None
    expected = python.fingerprint_many(real_text)
    got = native.fingerprint_many(real_text)
    differing = [i for i, (a, b) in enumerate(zip(expected, got, strict=True)) if a != b]
    assert differing == []
    assert native.fingerprint(*real_text[0]) == expected[0]  # the per-article path too


def test_native_equals_python_with_a_user_idf_table(
    real_text: list[tuple[str, str]], tmp_path: Path
) -> None:
    python_default = Fingerprinter(native=False)
    df = DocumentFrequencies()
    for title, content in real_text[:300]:
        df.add(python_default._terms.count(python_default._normalize(f"{title} {content}")))
    df.write(tmp_path / "idf.txt")
    options = FingerprintOptions(idf_path=str(tmp_path / "idf.txt"))
    items = real_text[::4]
    assert Fingerprinter(options).fingerprint_many(items) == Fingerprinter(
        options, native=False
    ).fingerprint_many(items)


# Hostile and mixed text: the Latin-word rules (separators, digits of every script, apostrophes),
# stop words, Han runs beside other scripts, empty results.
_PIECES = [
    "香港",
    "立法会",
    "新闻",
    "的",
    "了",
    "iphone手机",
    "U.S.",
    "3.5",
    "1,200",
    "don't",
    "rock’n’roll",
    "a..b",
    "x,",
    ",y",
    "'",
    "’",
    ".",
    "Ⅻ",
    "٣٤٥",
    "ǅungla",
    "ｆｕｌｌ",
    "the",
    "and",
    "Économie",
    "café",
    "𝐀𝐁𝐂",
    "中華人民共和國",
    "\u9fd6\u9fff",
    "㐀㐁",
    "_",
    "__init__",
    " ",
    "\n",
    "<p>",
    "&amp;",
    "Straße",
    "ΣΑΣ",
    "😀",
]


@settings(max_examples=500, deadline=None)
@given(
    title=st.lists(st.sampled_from(_PIECES), max_size=8).map("".join),
    content=st.one_of(
        st.lists(st.sampled_from(_PIECES), max_size=60).map("".join),
        st.text(max_size=300),
    ),
    title_weight=st.sampled_from([1.0, 0.0, 2.5]),
    max_terms=st.sampled_from([64, None, 2]),
)
def test_native_equals_python_on_any_text(
    title: str, content: str, title_weight: float, max_terms: int | None
) -> None:
    options = FingerprintOptions(title_weight=title_weight, max_terms=max_terms)
    native, python = _pair(options)
    results = []
    for fingerprinter in (native, python):
        try:
            results.append(fingerprinter.fingerprint(title, content))
        except NewsdedupError as e:
            results.append(type(e))
    assert results[0] == results[1]


_PAIRS: dict[FingerprintOptions, tuple[Fingerprinter, Fingerprinter]] = {}


def _pair(options: FingerprintOptions) -> tuple[Fingerprinter, Fingerprinter]:
    if options not in _PAIRS:
        _PAIRS[options] = (Fingerprinter(options), Fingerprinter(options, native=False))
    return _PAIRS[options]


def test_native_sketch_equals_python_on_real_text(real_text: list[tuple[str, str]]) -> None:
    kernel = load_kernel(None)
    normalized = Normalizer().many([text for item in real_text for text in item])
    texts = [f"{t}\n{c}" for t, c in zip(normalized[0::2], normalized[1::2], strict=True)]
    assert [kernel.sketch(text) for text in texts] == [sketch(text) for text in texts]


@settings(max_examples=500, deadline=None)
@given(
    text=st.one_of(
        st.lists(st.sampled_from(_PIECES), max_size=40).map("".join),
        # Any code point but lone surrogates (which normalization removes): astral letters,
        # marks and digits, unassigned code points, texts of one to six kept characters.
        st.text(st.characters(exclude_categories=("Cs",)), max_size=200),
    )
)
def test_native_sketch_equals_python_on_any_text(text: str) -> None:
    assert load_kernel(None).sketch(text) == sketch(text)


@settings(max_examples=500, deadline=None)
@given(
    # Runs of Latin letters of either case (a title-case letter, a feminine ordinal, a
    # combining accent among them), digits, base64's signs and Chinese: whether a run reads
    # as a word, which decides the shingling of the text.
    text=st.text(st.sampled_from("aAzZéÉßǅª\u03010189+/ -中文，\n"), max_size=300)
)
def test_native_sketch_equals_python_on_runs_of_latin_letters_and_digits(text: str) -> None:
    assert load_kernel(None).sketch(text) == sketch(text)


def test_native_bands_and_shingles_equal_python_on_real_text(
    real_text: list[tuple[str, str]],
) -> None:
    kernel = load_kernel(None)
    normalized = Normalizer().many([text for item in real_text[::4] for text in item])
    texts = [f"{t}\n{c}" for t, c in zip(normalized[0::2], normalized[1::2], strict=True)]
    expected = [shingles.of_text(text) for text in texts]
    assert [kernel.bands_and_shingles(text) for text in texts] == expected
    assert all(len(bands) == 64 and records for bands, records in expected)


@settings(max_examples=300, deadline=None)
@given(
    text=st.one_of(
        st.lists(st.sampled_from(_PIECES), max_size=40).map("".join),
        st.text(st.characters(exclude_categories=("Cs",)), max_size=200),
        # Long texts: more than 512 distinct shingles, so the record keeps the bottom 512.
        st.lists(st.sampled_from(_PIECES), min_size=300, max_size=600).map("".join),
    )
)
def test_native_bands_and_shingles_equal_python_on_any_text(text: str) -> None:
    assert load_kernel(None).bands_and_shingles(text) == shingles.of_text(text)


_U32 = st.integers(0, 2**32 - 1)


def _record(kind: bytes, values: set[int]) -> bytes:
    return shingles.encode_shingles(kind, np.array(sorted(values), dtype=np.uint64) << 32)


@settings(max_examples=500, deadline=None)
@given(
    common=st.sets(_U32, max_size=700),
    only_a=st.sets(_U32, max_size=400),
    only_b=st.sets(_U32, max_size=400),
    kinds=st.sampled_from([(b"C", b"C"), (b"W", b"W"), (b"C", b"W")]),
)
def test_native_bottom_jaccard_equals_python(
    common: set[int], only_a: set[int], only_b: set[int], kinds: tuple[bytes, bytes]
) -> None:
    a, b = _record(kinds[0], common | only_a), _record(kinds[1], common | only_b)
    assert bottom_jaccard(a, b) == shingles.bottom_jaccard_reference(a, b)
    assert bottom_jaccard(b, a) == shingles.bottom_jaccard_reference(b, a)
    assert shingles.bottom_jaccard(a, b) == bottom_jaccard(a, b)  # the module uses the kernel


@settings(max_examples=500, deadline=None)
@given(
    values=st.one_of(
        st.lists(_U32, max_size=1500),
        # Clustered values: small gaps and long runs, where the Rice parameter is 0 or 1.
        st.lists(st.integers(0, 3000), max_size=1500),
        # Few values far apart: large parameters and long quotients.
        st.lists(st.sampled_from([0, 1, 2**31, 2**32 - 1, 2**20, 3 << 29]), max_size=6),
    ),
    kind=st.sampled_from([b"C", b"W"]),
    repeats=st.integers(1, 3),
)
def test_native_shingles_record_equals_python(values: list[int], kind: bytes, repeats: int) -> None:
    # Repeated values: texts with repeated shingles, which the native selection sorts apart.
    hashes = np.array(values * repeats, dtype=np.uint64) << np.uint64(32)
    hashes |= np.arange(len(hashes), dtype=np.uint64)
    assert encode_shingles(kind, hashes.tolist()) == shingles.encode_shingles(kind, hashes)


def _decoded(decode, data: bytes) -> tuple[bytes, list[int]] | str:
    try:
        kind, values = decode(data)
    except ValueError:
        return "malformed"
    return kind, list(values)


def _mutated(record: bytes, rng: random.Random) -> bytes:
    """A record with a few bytes flipped, cut or added: mostly malformed, sometimes not."""
    data = bytearray(record)
    for _ in range(rng.randint(1, 3)):
        action = rng.randrange(4)
        if action == 0 and data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif action == 1 and data:
            del data[rng.randrange(len(data)) :]
        elif action == 2:
            data.insert(rng.randint(0, len(data)), rng.randrange(256))
        elif data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data)


def test_native_decoder_refuses_what_python_refuses_on_fuzzed_bytes() -> None:
    rng = random.Random(19)
    records = [
        _record(rng.choice([b"C", b"W"]), {rng.getrandbits(32) for _ in range(n)})
        for n in (0, 1, 2, 3, 7, 100, 127, 128, 511, 512)
    ]
    inputs = [rng.randbytes(rng.randrange(40)) for _ in range(2000)]
    inputs += [
        b"S" + rng.choice(b"CW").to_bytes() + rng.randbytes(rng.randrange(40)) for _ in range(2000)
    ]
    inputs += [_mutated(rng.choice(records), rng) for _ in range(3000)]
    valid = 0
    for data in inputs:
        expected = _decoded(shingles.decode_shingles, data)
        assert _decoded(decode_shingles, data) == expected, data
        similarity = bottom_jaccard(data, records[5])
        assert similarity == shingles.bottom_jaccard_reference(data, records[5]), data
        valid += expected != "malformed"
    assert 0 < valid < len(inputs) // 2


def test_native_decoder_reads_every_record() -> None:
    rng = random.Random(7)
    for n in (0, 1, 2, 127, 128, 129, 300, 511, 512, 513, 2000):
        values = {rng.getrandbits(32) for _ in range(n)} | ({0, 2**32 - 1} if n > 10 else set())
        record = _record(b"W", values)
        assert decode_shingles(record) == (b"W", sorted(values)[: shingles.BOTTOM])
        assert bottom_jaccard(record, record) == 1.0


def test_native_shingles_of_repetitive_and_long_texts_equal_python() -> None:
    # Over 1,024 shingles: the kernel keeps only values below the threshold where 640 of them
    # are expected, and collects again when repetition leaves fewer than 512 distinct ones.
    rng = random.Random(3)
    texts = [
        "香港立法会今日通过了新的法案。" * 200,  # a few distinct shingles, many times
        "".join(chr(0x4E00 + rng.randrange(2000)) for _ in range(1100)) * 2,  # 1,100 twice
        "".join(chr(0x4E00 + rng.randrange(20000)) for _ in range(20000)),
        " ".join(f"word{rng.randrange(5000)}" for _ in range(3000)),
    ]
    for text in texts:
        assert load_kernel(None).bands_and_shingles(text) == shingles.of_text(text)
