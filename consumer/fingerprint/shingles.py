"""What finds and verifies the copies SimHash and the sketch miss: LSH band keys and the
bottom 512 shingle hashes.

SimHash misses a copy whose edits moved many terms' weights at once (a truncation, inserted
sentences, a repost framed differently): the original lies 13–20 bits away, beyond k. The 128
minima behind the sketch barely move under such edits, so 16 keys of 3 minima each (64 bytes an
article, held in memory by the index) give a second channel: an earlier article sharing 2 of
them is a candidate. The 65-byte sketch, whose four-bit minima estimate Jaccard with a standard
error of ~0.05, cannot verify such a candidate, nor settle a SimHash candidate near the
threshold; the 512 smallest distinct 32-bit shingle hashes can, exactly for texts of fewer
than 512 shingles and within ~sqrt(J(1 - J) / 512) for two longer ones (`bottom_jaccard`
compares every value both records know: all of a short text's, those below the largest of a
long one's 512). On 12,000 scraped Chinese news pages nine of ten flags below the truth's 0.5
were pairs at 0.48-0.50 that the 512 smallest of their union put over it. They stay on disk
and are read only for those candidates (one to five in a hundred articles): Rice-coded gaps,
~1.5 KB an article on Chinese news (all the shingles would often be over 2 KB), ~0.3 KB on
English wire news.

Replayed offline on all three corpora (benchmarks/history/2026-11-26.md, "Where `check`'s
misses come from"), the two together take recall to >= 0.999 and precision to >= 0.9992.
Their cost, natively: ~11 µs to compute both for a 1,400-character article (its sketch alone
~16 µs), ~9 µs to compare two records; this Python reference takes ~0.3 ms and ~2 ms.

Shingles format (version 1): b"S", the shingling kind byte of the sketch (b"C" or b"W"), a
LEB128 count n <= 512, then for n > 0 one byte r (the Rice parameter giving the fewest bits)
and the Rice code of the gaps between the sorted values (the first from 0): per gap g, g >> r
one-bits and a zero-bit, then g's low r bits, most significant first; packed MSB first, the
last byte zero-padded. The native kernel (consumer/native/src/shingles.rs) writes the same
bytes and decodes faster; this module is its reference.
"""

from __future__ import annotations

import numpy as np

from consumer.fingerprint.sketch import _fmix64, bin_minima, shingle_hashes

try:
    from consumer._fastfp import bottom_jaccard as _native_bottom_jaccard
    from consumer._fastfp import low_values as _native_low_values
except ImportError:  # built without the native kernel: the references below serve
    _native_bottom_jaccard = None
    _native_low_values = None

BANDS = 16
BAND_ROWS = 3
BOTTOM = 512
FORMAT = b"S"
_KINDS = (b"C", b"W")
# Only 32-bit values are kept; a parameter of 32 or more would leave no quotient.
_MAX_RICE = 31
_U64 = np.uint64
_BAND_MULTIPLIER = _U64(0x9E3779B97F4A7C15)


def band_keys(minima: np.ndarray) -> bytes:
    """The 16 little-endian u32 band keys of 128 sketch minima (`sketch.bin_minima`): a hash
    of each band's 3 minima, salted by the band's number so equal minima in two bands still
    give two keys."""
    m = minima[: BANDS * BAND_ROWS].astype(np.uint64).reshape(BANDS, BAND_ROWS)
    h = np.zeros(BANDS, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for r in range(BAND_ROWS):
            h = (h * _BAND_MULTIPLIER) ^ m[:, r]
        h = _fmix64(h + np.arange(BANDS, dtype=np.uint64))
    return (h >> _U64(32)).astype("<u4").tobytes()


def bands_and_shingles(kind: bytes, hashes: np.ndarray, minima: np.ndarray) -> tuple[bytes, bytes]:
    """The band keys and shingles record of a text shingled `kind` into `hashes`, whose
    `sketch.bin_minima` are `minima`; both b"" for a text without shingles (a word-shingled
    text without a word), whose minima are all zero and would share every band."""
    if len(hashes) == 0:
        return b"", b""
    return band_keys(minima), encode_shingles(kind, hashes)


def of_text(normalized: str) -> tuple[bytes, bytes]:
    """`bands_and_shingles` of normalized text, shingled as its sketch
    (`sketch.shingle_hashes`)."""
    kind, hashes = shingle_hashes(normalized)
    return bands_and_shingles(kind, hashes, bin_minima(hashes))


def bottom_values(hashes: np.ndarray) -> np.ndarray:
    """The `BOTTOM` smallest distinct top-32-bit values of 64-bit shingle hashes, sorted."""
    # Sorted, then deduplicated: a quarter of np.unique's time on an article's hashes.
    tops = np.sort((hashes >> _U64(32)).astype(np.uint32))
    first = np.ones(len(tops), dtype=bool)
    first[1:] = tops[1:] != tops[:-1]
    return tops[first][:BOTTOM]


def encode_shingles(kind: bytes, hashes_u64: np.ndarray) -> bytes:
    """The shingles record of a text shingled `kind` (b"C" or b"W") into these hashes."""
    if kind not in _KINDS:
        raise ValueError(f"unknown shingling kind {kind!r}")
    values = bottom_values(np.asarray(hashes_u64, dtype=np.uint64))
    head = FORMAT + kind + _leb128(len(values))
    if len(values) == 0:
        return head
    gaps = np.diff(values.astype(np.int64), prepend=0)
    # Bits of the code for every parameter at once; argmin takes the first, smallest, of equals.
    parameters = np.arange(_MAX_RICE + 1)
    bits_per_parameter = (gaps[:, None] >> parameters).sum(axis=0) + len(gaps) * (1 + parameters)
    r = int(np.argmin(bits_per_parameter))
    quotients = gaps >> r
    # Each gap's code: its quotient in one-bits, a zero-bit, its low r bits.
    lengths = quotients + 1 + r
    starts = np.cumsum(lengths) - lengths
    bits = np.zeros(int(bits_per_parameter[r]), dtype=np.uint8)
    ones = int(quotients.sum())
    if ones:
        first_one = np.cumsum(quotients) - quotients  # of each gap, among all one-bits
        bits[np.repeat(starts - first_one, quotients) + np.arange(ones)] = 1
    if r:
        low_bits = (gaps[:, None] >> np.arange(r - 1, -1, -1)) & 1  # most significant first
        bits[(starts + quotients + 1)[:, None] + np.arange(r)] = low_bits
    return head + bytes([r]) + np.packbits(bits).tobytes()


def _leb128(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def decode_shingles(data: bytes) -> tuple[bytes, np.ndarray]:
    """(kind, sorted distinct uint32 values) of a shingles record; ValueError when it is not
    one, exactly: a wrong header, a count over `BOTTOM` or not in its shortest form, a Rice
    parameter over 31, values not increasing or beyond 32 bits, missing or extra bytes, a
    padding bit set."""
    if len(data) < 3 or data[:1] != FORMAT or data[1:2] not in _KINDS:
        raise ValueError("not a shingles record")
    kind = data[1:2]
    n, at = _read_leb128(data, 2)
    if n > BOTTOM:
        raise ValueError(f"shingles record of {n} values (at most {BOTTOM})")
    if n == 0:
        if at != len(data):
            raise ValueError("bytes after an empty shingles record")
        return kind, np.zeros(0, dtype=np.uint32)
    if at >= len(data) or data[at] > _MAX_RICE:
        raise ValueError("missing or invalid Rice parameter")
    r = data[at]
    bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8, offset=at + 1))
    size = len(bits)
    # The first zero-bit at or after each position (size where none is left): each value's
    # code ends at the first zero after the previous code, and only that walk is sequential.
    zero_at = np.where(bits == 0, np.arange(size), size)
    next_zero = [*np.minimum.accumulate(zero_at[::-1])[::-1].tolist(), size]
    ends = []  # of each value's unary quotient, at its zero-bit
    position = 0
    for _ in range(n):
        end = next_zero[position]
        position = end + 1 + r
        if position > size:
            raise ValueError("shingles record ends inside a value")
        ends.append(end)
    if (position + 7) // 8 != size // 8 or bits[position:].any():
        raise ValueError("shingles record has extra bytes or padding bits set")
    code_ends = np.array(ends, dtype=np.int64)
    quotients = code_ends - np.r_[0, code_ends[:-1] + 1 + r]
    if quotients.max() > 0xFFFFFFFF:  # (and no int64 overflow below)
        raise ValueError("shingles record value beyond 32 bits")
    low_bits = bits[(code_ends + 1)[:, None] + np.arange(r)].astype(np.int64)
    gaps = (quotients << r) | (low_bits @ (np.int64(1) << np.arange(r - 1, -1, -1)))
    if (gaps[1:] == 0).any():
        raise ValueError("shingles record values are not increasing")
    values = np.cumsum(gaps)  # cannot overflow when no gap is over 32 bits
    if gaps.max() > 0xFFFFFFFF or values[-1] > 0xFFFFFFFF:
        raise ValueError("shingles record value beyond 32 bits")
    return kind, values.astype(np.uint32)


def _read_leb128(data: bytes, at: int) -> tuple[int, int]:
    """The varint at `at` and where it ends; only the shortest form of a count up to 2**14."""
    n, shift = 0, 0
    for _ in range(2):
        if at >= len(data):
            break
        byte = data[at]
        at += 1
        n |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if byte == 0 and shift:
                raise ValueError("shingles count not in its shortest form")
            return n, at
        shift += 7
    raise ValueError("shingles count truncated or too long")


def bottom_jaccard_reference(a: bytes, b: bytes) -> float | None:
    """`bottom_jaccard`, in Python: the native kernel's reference."""
    if not a or not b:
        return None
    try:
        kind_a, values_a = decode_shingles(a)
        kind_b, values_b = decode_shingles(b)
    except ValueError:
        return None
    if kind_a != kind_b:
        return None
    if len(values_a) == 0 and len(values_b) == 0:
        return 1.0
    # A record of BOTTOM values may have left larger ones out: below its largest, both sets
    # are known in full. A record of fewer holds its whole set.
    limits = [int(v[-1]) for v in (values_a, values_b) if len(v) == BOTTOM]
    if limits:
        limit = min(limits)
        values_a, values_b = values_a[values_a <= limit], values_b[values_b <= limit]
    union = np.union1d(values_a, values_b)
    both = np.intersect1d(values_a, values_b, assume_unique=True)
    return len(both) / len(union)


def bottom_jaccard(a: bytes, b: bytes) -> float | None:
    """Jaccard similarity of the shingle sets behind two shingles records, from their bottom
    512 values: of every value up to the smaller of the largest values of the records that
    are full (512 values, which may have left larger ones out), the share in both. That is at
    least the 512 smallest of the union, more when a record holds fewer than 512 values, and
    exact when both do (texts of fewer than 512 distinct shingles). None when either is empty
    or malformed, or they are of different shinglings."""
    if _native_bottom_jaccard is not None:
        return _native_bottom_jaccard(a, b)
    return bottom_jaccard_reference(a, b)


def low_values_reference(data: bytes, below: int, at_most: int) -> np.ndarray:
    """`low_values`, in Python: the native kernel's reference."""
    _, values = decode_shingles(data)
    return values[values < below][:at_most]


def low_values_bytes(data: bytes, below: int, at_most: int) -> bytes:
    """`low_values` as little-endian u32 bytes, as the native kernel gives them."""
    if _native_low_values is not None:
        return _native_low_values(data, below, at_most)  # type: ignore[no-any-return]
    return low_values_reference(data, below, at_most).astype("<u4").tobytes()


def low_values(data: bytes, below: int, at_most: int) -> np.ndarray:
    """The values of a shingles record below `below`, the smallest `at_most` of them, sorted
    (uint32). Every text keeps all its values below a bound that is the same for all texts
    (as long as it has no more than `at_most` there): a sample of its shingles that two texts
    share exactly when they share the shingles. ValueError for what is not a record."""
    if _native_low_values is not None:
        return np.frombuffer(_native_low_values(data, below, at_most), dtype="<u4")
    return low_values_reference(data, below, at_most)
